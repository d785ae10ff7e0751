"""Rendered keypoints thinned to a slow estimator's rate (``render.thin_frame_rate``), and
the default classifier on such streams."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

from motionmatch.control.pose import default as d
from motionmatch.control.pose.render import RenderSettings, render_motion, thin_frame_rate


def test_thinning_draws_straight_lines_between_the_estimates():
    """Known answers: the frames an estimate was made on keep their keypoints, the frames
    between lie on the line between the two estimates around them, and the number of
    estimates is the drawn rate's."""
    rng = np.random.default_rng(3)
    F, fps = 300, 30.0
    t = np.arange(F) / fps
    uv = np.stack([np.sin(2 * np.pi * 1.3 * t), np.cos(2 * np.pi * 0.7 * t)], axis=-1)[:, None, :] * [[100.0, 50.0]]
    uv = np.concatenate([uv, 3.0 * t[:, None, None] * np.ones((1, 1, 2))], axis=1)  # a keypoint moving steadily
    conf = np.ones((F, 2))
    conf[::7, 0] = 0.25
    out, out_conf = thin_frame_rate(uv, conf, fps, [0, 150], (6.0, 6.0), rng)
    kept = np.flatnonzero(np.all(np.isclose(out, uv), axis=(1, 2)))
    # about 6 estimates a second in each half (from a random first frame), 5 frames apart
    assert 55 <= len(kept) <= 65, len(kept)
    for a, b in itertools.pairwise(kept):
        if a >= 150 or b < 150:  # (two estimates of one camera segment)
            w = ((np.arange(a, b + 1) - a) / (b - a))[:, None, None]
            np.testing.assert_allclose(out[a:b + 1], (1 - w) * uv[a] + w * uv[b], atol=1e-9)
    # in each segment, the steady keypoint stays on its line between the first and last
    # estimates (held before and after them); the sine is cut to strokes
    for lo, hi in ((0, 150), (150, F)):
        k = kept[(kept >= lo) & (kept < hi)]
        np.testing.assert_allclose(out[k[0]:k[-1] + 1, 1], uv[k[0]:k[-1] + 1, 1], atol=1e-9)
        np.testing.assert_array_equal(out[lo:k[0], 1], np.broadcast_to(uv[k[0], 1], out[lo:k[0], 1].shape))
    assert np.abs(out[:, 0] - uv[:, 0]).max() > 5.0
    assert set(np.unique(out_conf)) <= {0.25, 1.0}
    # a rate at or above the camera's changes nothing
    same, same_conf = thin_frame_rate(uv, conf, fps, [0], (30.0, 40.0), rng)
    np.testing.assert_array_equal(same, uv)
    np.testing.assert_array_equal(same_conf, conf)


@pytest.mark.parametrize("rate", [None, 6.0])
def test_the_default_classifier_reads_a_walk_and_a_run(data_dir, rate):
    """Bandai-Namco's plain walks and runs that the default data leaves out (it takes every
    fourth file of dataset-2), filmed by the virtual camera with one estimate per frame or
    6 a second (as a loaded machine's page makes): each reads mostly as itself after its
    first second (the runs at 6 a second: about 0.5-0.6 of their frames). The default
    classifier as this machine cached it (`motionmatch pose eval`; CI's set-up runs it)."""
    from motionmatch.anim import load_bvh

    pair = d.cached_classifiers(data_dir)
    if pair is None:
        pytest.skip("the default pose classifier is not trained on this machine: `motionmatch pose eval` trains "
                    "and caches it (about 10 minutes on 2 cores)")
    clf = pair[1]
    folder = data_dir / "bandai-namco" / "dataset-2"
    for kind, takes in (("walk", ("001", "002", "004")), ("run", ("001", "003", "004", "005"))):
        fams: collections.Counter = collections.Counter()
        for k in takes:
            motion = load_bvh(folder / f"dataset-2_{kind}_normal_{k}.bvh")
            stream, info = render_motion(motion, RenderSettings(azimuths_deg=(0.0,)), rng=7)
            if rate is not None:
                stream.keypoints, stream.confidence = thin_frame_rate(stream.keypoints, stream.confidence, 30.0,
                                                                      info.anchors, (rate, rate),
                                                                      np.random.default_rng(1))
            out = clf.classify(stream)
            fams.update(clf.commands[c].split("_")[0] for c in out.smoothed[30:] if c >= 0)
        assert fams[kind] > 0.45 * sum(fams.values()), (kind, rate, fams.most_common())


def test_the_new_data_fields_keep_the_old_cache_keys():
    """``DataConfig.to_dict`` (its cache key) leaves the thinning fields out at their
    defaults, so the classifiers trained before them keep their keys; set, they count."""
    from dataclasses import replace

    from motionmatch.control.pose.dataset import DataConfig

    plain = DataConfig().to_dict()
    assert "estimator_fps" not in plain and "estimator_fps_every" not in plain
    thinned = replace(DataConfig(), estimator_fps=(4.0, 15.0)).to_dict()
    assert thinned["estimator_fps"] == [4.0, 15.0] and "estimator_fps_every" not in thinned
    assert d.TrainConfig().to_dict()["data"] == d.DEFAULT_DATA.to_dict() and "estimator_fps" not in d.DEFAULT_DATA.to_dict()
