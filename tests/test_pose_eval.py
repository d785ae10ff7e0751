"""Training on rendered motion capture and evaluation on held-out clips and azimuths (quick configuration).

The acceptance numbers (full configuration: macro-F1, latency, flicker) come from
``motionmatch pose eval``; here the same code runs on a third of the data.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from motionmatch.control.pose import default as d
from motionmatch.control.pose.dataset import scored_frames
from motionmatch.control.pose.evaluate import (
    class_metrics,
    confusion_matrix,
    flicker_rate,
    format_table,
    plot_confusion,
)
from motionmatch.control.pose.labels import COMMANDS
from motionmatch.control.pose.tune import MAX_LATENCY_S, choose_smoother
from test_pose_common import pose_cli, quick_bundle

pytest.importorskip("sklearn")
pytestmark = pytest.mark.data


def test_metrics_by_hand():
    yt = np.array([0, 0, 1, 1, 2])
    yp = np.array([0, 1, 1, 1, -1])
    cm = confusion_matrix(yt, yp, 3)
    assert cm.tolist() == [[1, 1, 0], [0, 2, 0], [0, 0, 0]]
    m = class_metrics(cm, ("a", "b", "c"))
    assert m["per_class"]["a"] == {"precision": 1.0, "recall": 0.5, "f1": 0.6667, "support": 2}
    assert m["per_class"]["b"]["precision"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["macro_f1"] == pytest.approx((2 / 3 + 0.8) / 2, abs=1e-3)     # classes without support are left out
    lab = np.array(["walk_left"] * 90)
    em = np.array([0] * 40 + [1, 0] * 5 + [0] * 40)
    changes, seconds = flicker_rate(lab, em, 30.0, np.ones(90, bool))
    assert changes == 10 and seconds == pytest.approx(2.5)


def test_split_is_held_out_and_every_command_is_tested(data_dir):
    data, _, imp = quick_bundle(str(data_dir))
    train_names = {r.stream.meta["clip"] for r in data.train}
    val_names = {r.stream.meta["clip"] for r in data.val}
    test_names = {r.stream.meta["clip"] for r in data.test}
    assert val_names and not train_names & test_names and not val_names & test_names and not val_names & train_names
    az = {k: {float(a) for r in rs for a in np.unique(r.azimuth)}
          for k, rs in (("train", data.train), ("val", data.val), ("test", data.test))}
    assert az["test"] <= set(d.QUICK.data.test_azimuths) and az["val"] <= set(d.QUICK.data.val_azimuths)
    assert not az["test"] & az["train"] and not az["test"] & az["val"] and not az["val"] & az["train"]
    counts = data.counts()
    assert all(counts["test"][c] > 30 for c in COMMANDS), counts["test"]
    assert all(counts["train"][c] > 100 for c in COMMANDS), counts["train"]
    assert sum(counts["val"][c] > 0 for c in COMMANDS) >= 11, counts["val"]
    assert {tr.render.split for tr in data.val_transitions} == {"val"} and len(data.val_transitions) > 10
    # the smoother's setting came from the validation data and the improved classifier uses it
    sv = imp.meta["smoother_validation"]
    assert (imp.stay, imp.power, imp.margin) == (sv["stay"], sv["power"], sv["margin"])
    pr = d.protocol(data, imp)
    assert pr["val_clips"] and pr["test_clips"] and not set(pr["val_clips"]) & set(pr["test_clips"])


def test_smoother_is_chosen_by_validation_f1_within_the_latency_bar(data_dir):
    data, _, imp = quick_bundle(str(data_dir))
    before = (imp.stay, imp.power, imp.margin)
    grid = {"stay": (0.5, 0.9), "power": (1.0,), "margin": (1.0, 2.5)}
    ch = choose_smoother(imp, data.val, data.val_transitions, grid=grid, apply=False)
    assert (imp.stay, imp.power, imp.margin) == before and len(ch.table) == 4
    ok = [r for r in ch.table if r["latency_median_s"] is not None and r["latency_median_s"] <= MAX_LATENCY_S]
    quickest = min(r["latency_median_s"] for r in ch.table if r["latency_median_s"] is not None)
    pool = ok or [r for r in ch.table if r["latency_median_s"] == quickest]
    assert ch.best["macro_f1"] == max(r["macro_f1"] for r in pool)
    slow = max(ch.table, key=lambda r: (r["stay"], r["margin"]))
    fast = min(ch.table, key=lambda r: (r["stay"], r["margin"]))
    assert slow["flicker_per_s"] <= fast["flicker_per_s"]          # more smoothing, less flicker


def test_improved_beats_the_baseline(data_dir, tmp_path):
    data, knn, imp = quick_bundle(str(data_dir))
    ev = d.evaluate(data, knn, imp)
    k, i = ev.results["knn"], ev.results["improved"]
    assert i.smoothed["macro_f1"] > k.smoothed["macro_f1"] + 0.05, format_table(ev.results)
    assert i.smoothed["macro_f1"] > 0.55
    assert i.flicker_per_s < k.flicker_per_s
    li, lk = ev.latency["improved"], ev.latency["knn"]
    assert li["measured"] >= 20 and li["median_s"] <= lk["median_s"]
    out = ev.to_dict()
    assert out["best"]["name"] == "improved" and set(out["best"]["per_class"]) == set(COMMANDS)
    png = plot_confusion(i.confusion, tmp_path / "cm.png", "test")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # every scored frame of every test render was classified
    assert k.frames == sum(int(scored_frames(r).sum()) for r in data.test)


@pytest.mark.slow
def test_cli_eval_quick_json(data_dir, tmp_path, capsys, monkeypatch):
    """`pose eval --quick` end to end: the report, the PNGs, the JSON and the cache. The
    quick renders and classifiers are the ones the tests above trained (the same calls,
    `prepare` and `train` of the QUICK configuration), not trained a second time."""
    data, knn, imp = quick_bundle(str(data_dir))
    asked = []
    monkeypatch.setattr(d, "prepare", lambda root, cfg, progress=False: asked.append(cfg) or data)
    monkeypatch.setattr(d, "train", lambda got: (knn, imp) if got is data else pytest.fail("other data trained"))
    monkeypatch.setenv("MOTIONMATCH_CACHE", str(tmp_path / "cache"))
    assert d.cached_classifiers(data_dir, d.QUICK) is None
    assert pose_cli(["eval", "--quick", "--json", "--data", str(data_dir), "--out", str(tmp_path)]) == 0
    assert asked == [d.QUICK]
    assert d.cached_classifiers(data_dir, d.QUICK) is not None  # kept for pose run and the viewer
    res = json.loads(capsys.readouterr().out)
    for key in ("knn", "improved", "best"):
        assert 0 <= res[key]["macro_f1"] <= 1 and set(res[key]["per_class"]) == set(COMMANDS)
        assert {"precision", "recall", "f1", "support"} <= set(res[key]["per_class"]["jump"])
        assert "flicker_per_s" in res[key] and "median_s" in res[key]["latency"]
    assert res["best"]["macro_f1"] == res["improved"]["macro_f1"]
    assert set(res["protocol"]["azimuths"]) == {"train", "val", "test"} and "smoother_validation" in res["protocol"]
    assert res["seconds"]["total"] > 0
    assert (tmp_path / "confusion_knn.png").is_file() and (tmp_path / "confusion_improved.png").is_file()
    assert json.loads((tmp_path / "pose_eval.json").read_text())["class_counts"]["test"]["walk_forward"] > 0


def test_default_classifiers_are_cached(data_dir, tmp_path, monkeypatch):
    data, knn, imp = quick_bundle(str(data_dir))
    calls = []
    monkeypatch.setattr(d, "train", lambda data: calls.append(1) or (knn, imp))   # training is tested above
    a = d.default_classifiers(data_dir, d.QUICK, cache_dir=tmp_path, data=data)
    b = d.default_classifiers(data_dir, d.QUICK, cache_dir=tmp_path)
    assert len(calls) == 1 and len(list(tmp_path.glob("*.npz"))) == 2
    s = data.test[0].stream
    np.testing.assert_allclose(a[1].classify(s).proba, b[1].classify(s).proba, atol=1e-5)


# ----------------------------------------------------------------------------- estimator imitation (issue 18)
def _symmetric_model(seed: int = 0):
    """A made-up estimator whose numbers are mirror-symmetric (as fitting makes them)."""
    from motionmatch.control.pose.imitate import BINS, EstimatorNoise, _mirror_xy
    from motionmatch.control.pose.keypoints import KEYPOINTS, MIRROR

    rng = np.random.default_rng(seed)
    K = len(KEYPOINTS)
    off = rng.normal(0, 0.08, (BINS, K, 2))
    off = 0.5 * (off + _mirror_xy(off[::-1]))
    noise = np.full((BINS, K, 2), 0.03)
    miss = np.tile(np.linspace(0.0, 0.2, K), (BINS, 1))
    miss = 0.5 * (miss + miss[::-1][:, MIRROR])
    miss[:, [1, 2, 7, 8]] = 0.0        # without shoulders and hips there is no body: that is `lost`
    lost = np.r_[np.linspace(0.3, 0.0, BINS // 2), np.linspace(0.0, 0.3, BINS // 2)]
    swap = np.full(BINS, 0.1)
    return EstimatorNoise(off, noise, np.full(K, 0.6), miss, lost, 6.0, swap, 4.0, np.zeros(BINS, np.int64))


def test_estimator_imitation_is_measured_back_by_the_fit():
    """Keypoints made by a known model: fitting them gives that model back (a known answer)."""
    from motionmatch.control.pose.imitate import fit_estimator_noise, imitate_estimator, view_bin
    from motionmatch.control.pose.keypoints import standing_pose

    model = _symmetric_model()
    rng = np.random.default_rng(1)
    samples = []
    for clip in range(12):
        F = 900
        true = standing_pose(60.0 + 5 * clip)[None] + rng.normal(0, 2.0, (F, 13, 2))
        view = np.full(F, -165.0 + 30.0 * clip)
        est, conf = imitate_estimator(true, view, model, rng)
        samples.append((true, est, conf, view))
    fit = fit_estimator_noise(samples)
    b = view_bin(np.array([-165.0 + 30.0 * c for c in range(12)]))
    assert np.abs(fit.offset[b] - model.offset[b]).max() < 0.02
    assert np.abs(fit.noise[b] / model.noise[b] - 1).max() < 0.25
    assert np.abs(fit.missing - model.missing).max() < 0.05
    assert np.abs(fit.lost - model.lost).max() < 0.1
    assert np.abs(fit.swap - model.swap).max() < 0.08 and 2.5 < fit.swap_run < 6.0 and 4.0 < fit.lost_run < 8.0
    assert np.abs(fit.ar - model.ar).max() < 0.15
    # a model that adds nothing leaves the keypoints alone; the shipped one does not
    from dataclasses import replace

    zero = replace(model, offset=0 * model.offset, noise=0 * model.noise, missing=0 * model.missing,
                   lost=0 * model.lost, swap=0 * model.swap)
    true = samples[0][0]
    out, conf = imitate_estimator(true, np.zeros(len(true)), zero, rng)
    assert np.array_equal(out, true) and conf.min() == 1.0


def test_the_shipped_estimator_model_loads_and_a_bad_file_says_what_to_do(tmp_path):
    from motionmatch.control.pose.imitate import BINS, EstimatorNoise, load_estimator_noise
    from motionmatch.errors import MotionMatchError

    m = load_estimator_noise("mediapipe")
    assert m.offset.shape == (BINS, 13, 2) and m.frames.sum() > 1000 and "MediaPipe" in m.source
    assert 0 <= m.lost.min() and m.lost.max() < 1 and np.all(m.noise > 0)
    p = m.save(tmp_path / "m.json")
    again = EstimatorNoise.from_dict(json.loads(p.read_text()))
    assert np.allclose(again.offset, m.offset, atol=1e-4)
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    with pytest.raises(MotionMatchError, match=r"bench_pose_camera\.py --fit"):
        load_estimator_noise(str(tmp_path / "bad.json"))
    with pytest.raises(MotionMatchError, match="no such estimator noise model"):
        load_estimator_noise(str(tmp_path / "none.json"))


def test_training_renders_can_imitate_the_estimator_and_test_renders_never_do(data_dir):
    """``DataConfig(estimator="mediapipe")``: every second training render imitates MediaPipe
    (lost bodies unlabelled, limbs missing), validation and test renders stay clean."""
    from dataclasses import replace

    from motionmatch.control.pose.dataset import DataConfig, load_clips, render_clips

    base = DataConfig(folders=(("bandai-namco/dataset-1", 1, "*_walk-left_[a-c]*"),), train_passes=1, rare_passes=1,
                      min_test_frames=0, min_val_frames=0, train_azimuths=(70.0, -70.0, 100.0, -100.0))
    clips = load_clips(data_dir, base)
    assert {c.split for c in clips} >= {"train", "test"}
    assert not any(r.stream.meta.get("estimator") for r in render_clips(clips, base))     # off by default
    renders = render_clips(clips, replace(base, estimator="mediapipe"))
    train = [r for r in renders if r.split == "train"]
    imitated = [r for r in train if r.stream.meta.get("estimator") == "mediapipe"]
    assert len(imitated) == len(train) // 2
    assert not any(r.stream.meta.get("estimator") for r in renders if r.split != "train")
    body = [1, 2, 7, 8]
    lost = [~r.stream.present()[:, body].all(axis=1) for r in imitated]
    assert all((r.labels[x] == "").all() for r, x in zip(imitated, lost))       # no body, no label
    assert any((~r.stream.present()[:, [3, 4, 5, 6]]).any() for r in imitated)  # limbs go missing side on
    clean = [r for r in train if not r.stream.meta.get("estimator")]
    assert all(r.stream.present().all() for r in clean)


def test_training_is_locked_per_configuration(tmp_path):
    """While one process trains a configuration (holds its lock), another cannot take the
    lock and waits; released, it can (then it reads the first one's cache)."""
    import fcntl

    from motionmatch.control.pose.default import _training_lock

    target = tmp_path / "cache" / "improved-abc.npz"
    with _training_lock(target):
        with open(target.with_name(target.name + ".lock"), "a") as other:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(target.with_name(target.name + ".lock"), "a") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
