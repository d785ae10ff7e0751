"""Preview rendering: gif and mp4 files of real motion, atomic writes, clear errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the preview needs matplotlib (pip install 'motionmatch[viz]')")
from PIL import Image  # Pillow comes with matplotlib

from motionmatch.io import preview
from motionmatch.io.preview import (
    MissingDependencyError,
    output_frame_indices,
    plot_trajectories,
    render_preview,
)


@pytest.fixture(scope="module")
def clip(data_dir):
    from motionmatch.anim import load_bvh

    f = data_dir / "lafan1" / "walk1_subject1_stop.bvh"
    if not f.is_file():
        pytest.skip(f"{f} not found; set MOTIONMATCH_DATA to the shared data folder")
    return load_bvh(f)[:60]


def _future(motion, offsets=(10, 20, 30)):
    """[F, K, 3] hips positions some frames ahead: a stand-in for predicted trajectories."""
    hips = motion.world_positions[:, 0].copy()
    hips[:, 1] = 0
    F = motion.num_frames
    return np.stack([hips[np.minimum(np.arange(F) + k, F - 1)] for k in offsets], axis=1)


def _gif_frames(path) -> int:
    with Image.open(path) as im:
        assert im.format == "GIF"
        return im.n_frames


def test_output_frame_indices():
    np.testing.assert_array_equal(output_frame_indices(6, 30, 30), np.arange(6))
    np.testing.assert_array_equal(output_frame_indices(7, 60, 30), [0, 2, 4])
    assert len(output_frame_indices(600, 60, 30)) == 300
    assert len(output_frame_indices(1, 60, 30)) == 1


def test_render_gif(clip, tmp_path):
    out = render_preview(clip, tmp_path / "walk.gif", desired_trajectory=_future(clip), progress=False)
    assert out == tmp_path / "walk.gif"
    assert out.stat().st_size > 20_000
    assert _gif_frames(out) == 60  # 30 fps clip, 30 fps output
    with Image.open(out) as im:
        assert im.size == (640, 480)
        # Not a blank image: the stick figure and grid give many distinct colours.
        assert len(np.unique(np.asarray(im.convert("RGB")).reshape(-1, 3), axis=0)) > 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["walk.gif"]  # no temporary left behind


def test_render_gif_options(clip, tmp_path):
    path_xyz = clip.world_positions[:, 0] + [0.5, 0.0, 0.0]
    out = render_preview(clip, tmp_path / "o.gif", desired_trajectory=path_xyz, fps=10, size=(321, 240),
                         camera="fixed", projection="orthographic", progress=False, title="ortho")
    assert _gif_frames(out) == 20  # 2 s at 10 fps
    with Image.open(out) as im:
        assert im.size == (320, 240)  # rounded down to even


def test_render_mp4(clip, tmp_path):
    iio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="mp4 previews need imageio-ffmpeg (motionmatch[viz])")
    out = render_preview(clip, tmp_path / "walk.mp4", desired_trajectory=_future(clip), progress=False)
    assert out.stat().st_size > 5_000
    with open(out, "rb") as f:
        assert f.read(12)[4:8] == b"ftyp"  # an MP4 container
    nframes, secs = iio_ffmpeg.count_frames_and_secs(str(out))
    assert nframes == 60
    assert secs == pytest.approx(2.0, abs=0.1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["walk.mp4"]


def test_bad_extension_is_a_clear_error(clip, tmp_path):
    with pytest.raises(ValueError, match=r"unsupported file type '\.avi'.*\.gif, \.mp4"):
        render_preview(clip, tmp_path / "walk.avi", progress=False)
    with pytest.raises(ValueError, match="unsupported file type"):
        render_preview(clip, tmp_path / "walk", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments(clip, tmp_path):
    with pytest.raises(ValueError, match="desired_trajectory must have shape"):
        render_preview(clip, tmp_path / "a.gif", desired_trajectory=np.zeros((5, 3)), progress=False)
    with pytest.raises(ValueError, match="camera must be"):
        render_preview(clip, tmp_path / "a.gif", camera="orbit", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_missing_extra_names_the_package(clip, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # makes `import imageio_ffmpeg` fail
    with pytest.raises(MissingDependencyError, match=r"imageio-ffmpeg.*motionmatch\[viz\]"):
        render_preview(clip, tmp_path / "walk.mp4", progress=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_failure_midway_leaves_no_file(clip, tmp_path, monkeypatch, suffix):
    if suffix == ".mp4":
        pytest.importorskip("imageio_ffmpeg", reason="mp4 previews need imageio-ffmpeg (motionmatch[viz])")
    target = tmp_path / f"walk{suffix}"
    target.write_bytes(b"old")  # an earlier file must survive a failed render untouched
    real_draw = preview._Renderer.draw

    def failing_draw(self, k):
        if k == 10:
            raise RuntimeError("boom")
        return real_draw(self, k)

    monkeypatch.setattr(preview._Renderer, "draw", failing_draw)
    with pytest.raises(RuntimeError, match="boom"):
        render_preview(clip, target, progress=False)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_camera_orientation():
    # Seen from the front (+Z side, azimuth 0): +X is to the right, +Y up, in both projections.
    for projection in ("perspective", "orthographic"):
        cam = preview._Camera(projection, azimuth_deg=0.0, elevation_deg=0.0, fov_deg=40.0)
        cam.set_target(np.zeros(3))
        s = cam.project(np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 0]]))
        assert s[0, 0] > 0 and abs(s[0, 1]) < 1e-9
        assert s[1, 1] > 0 and abs(s[1, 0]) < 1e-9
        np.testing.assert_allclose(s[2], 0, atol=1e-12)
    # Points behind a perspective camera are not drawn.
    cam = preview._Camera("perspective", 0.0, 0.0, 40.0)
    cam.set_target(np.zeros(3))
    assert np.all(np.isnan(cam.project(np.array([0.0, 0, 10.0]))))


def test_plot_trajectories(tmp_path):
    t = np.linspace(0, 2 * np.pi, 100)
    circle = np.stack([np.cos(t), np.zeros_like(t), np.sin(t)], axis=1)
    out = plot_trajectories(tmp_path / "top.png", {"actual": circle, "shifted": circle + 0.2},
                            paths={"desired": circle * 1.1}, title="circles", size=(400, 300))
    with Image.open(out) as im:
        assert im.format == "PNG" and im.size == (400, 300)
    plot_trajectories(tmp_path / "one.png", circle)
    plot_trajectories(tmp_path / "two.png", [circle, circle * 2])
    with pytest.raises(ValueError, match=r"\.png"):
        plot_trajectories(tmp_path / "top.jpg", circle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.png", "top.png", "two.png"]


def test_importing_io_does_not_import_matplotlib():
    code = "import sys, motionmatch.io, motionmatch.metrics; assert 'matplotlib' not in sys.modules, 'imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
