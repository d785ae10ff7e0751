"""``scripts/render_mannequins.py`` draws a skeleton's mannequin from four sides into a small
PNG (issue 32, part 4): four panels, each with the body drawn (not only the sky and the
ground), the front and back views mirror images in outline, the side views narrower."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from conftest import REPO


def _script():
    spec = importlib.util.spec_from_file_location("render_mannequins", REPO / "scripts" / "render_mannequins.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_four_sides_of_a_humanoid(data_dir, tmp_path):
    from PIL import Image

    from motionmatch.anim import load_bvh

    script = _script()
    path = script.render(load_bvh(data_dir / "bandai-namco/dataset-2/dataset-2_walk_normal_001.bvh"), "bandai",
                         tmp_path, "standing")
    assert path.stat().st_size < 120_000
    rgb = np.asarray(Image.open(path).convert("RGB"), dtype=np.float64) / 255
    body = script.BODY_RGB
    # the body's pixels: its hue (warm grey: red above blue), neither the sky (blue above red) nor white
    warm = (rgb[..., 0] - rgb[..., 2] > 0.04) & (rgb.sum(axis=-1) < 2.7) & (rgb.sum(axis=-1) > 0.6)
    cols = np.flatnonzero(warm.any(axis=0))
    assert len(cols) > 0 and body[0] > body[2]
    # four panels, each with a body in it: split the image in quarters
    w = rgb.shape[1] // 4
    widths = []
    for k in range(4):
        panel = warm[int(0.15 * rgb.shape[0]):int(0.8 * rgb.shape[0]), k * w:(k + 1) * w]  # above the ground
        assert panel.mean() > 0.01, f"panel {k}: no body"
        xs = np.flatnonzero(panel.any(axis=0))
        widths.append(xs[-1] - xs[0])
    front, left, back, right = widths  # (the A pose: the arms spread sideways)
    assert abs(front - back) <= 0.1 * front and left < 0.6 * front and right < 0.6 * front, widths


def test_a_missing_file_is_skipped_with_one_line(tmp_path, capsys):
    script = _script()
    assert script.main(["--data", str(tmp_path), "--only", "lafan1", "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lafan1" in err[0] and "missing" in err[0]
    assert not (tmp_path / "out").exists()


@pytest.fixture(autouse=True)
def _agg():
    import matplotlib

    matplotlib.use("Agg")
