"""Paths drawn as people draw them (issue 33, items 7 and 8): the drawings recorded in the
real page by ``scripts/record_drawings.py`` load and are what a hand makes; the path
follower's defaults cope with them; the paper's demos "cross the finish line" and "reach
the target location" do what they claim, with a number each."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import REPO
from motionmatch.control.path import load_path

DRAWN = REPO / "paths" / "drawn_by_hand"
DEMOS = REPO / "paths" / "demos"


@pytest.fixture(scope="module")
def lafan(data_dir, request):
    """LAFAN1 at 60 fps, not mirrored: the benchmark's database (``/work/cache/lafan.npz``
    is the same build), cached in pytest's cache folder."""
    from motionmatch.database import MotionDatabase
    from motionmatch.datasets import load_folder

    folder = data_dir / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found; set MOTIONMATCH_DATA to the shared data folder")
    cache = request.config.cache.mkdir("motionmatch-db")
    return MotionDatabase.cached(cache / "lafan1-60fps.npz", load_folder(folder))


# ------------------------------------------------------------------------------ the recordings
def drawn_files():
    return sorted(DRAWN.glob("*.json"))


def test_the_recorded_drawings_load_and_are_what_a_hand_makes():
    files = drawn_files()
    assert len(files) >= 12, files
    devices = {"mouse": 0, "touchpad": 0}
    paused = []
    for f in files:
        doc = json.loads(f.read_text())
        rec = doc["recorded"]
        devices[rec["device"]] += 1
        path = load_path(f)  # as 'motionmatch follow --path' reads it
        t, p = path.input_times, path.input_points[:, [0, 2]]
        assert len(t) >= 100 and np.all(np.diff(t) > 0), f
        assert doc["scale"] in (0.5, 1.0), f  # the page's "drawing time" setting, as sent
        step = np.linalg.norm(np.diff(p, axis=0), axis=1)
        assert step.min() >= 0.0185, f  # the page drops points closer than 2 cm (then rounds to 1 mm)
        speed = step / np.diff(t)
        # uneven: the hand's fast stretches are at least twice its slow ones
        assert np.percentile(speed, 90) > 2.0 * np.percentile(speed, 10), f
        # jitter: the drawn polyline is longer than the smoothed path the character follows
        assert float(step.sum()) > 1.03 * path.length, f
        if rec["hand"]["pause_at"] is not None:
            paused.append(f.stem)
            # the hand rests: over 0.4 of its pause the pointer moves less than 15 cm (its tremor)
            raw = np.asarray(doc["points"])
            later = np.searchsorted(raw[:, 0], raw[:, 0] + 0.4 * rec["hand"]["pause_s"])
            ok = later < len(raw)
            moved = np.linalg.norm(raw[later[ok], 1:] - raw[ok, 1:], axis=1)
            assert moved.min() < 0.15, (f, moved.min())
    assert devices["mouse"] >= 10 and devices["touchpad"] >= 3, devices
    assert "detour_pause" in paused


def test_a_touchpad_drawing_steps_more_finely_sideways_than_a_mouse_drawing():
    """Touchpad jitter: small high-frequency steps; the share of direction reversals
    between consecutive steps is higher than on the mouse drawings."""
    def reversals(f):
        p = load_path(f).input_points[:, [0, 2]]
        d = np.diff(p, axis=0)
        cos = np.einsum("ij,ij->i", d[1:], d[:-1]) / np.maximum(
            np.linalg.norm(d[1:], axis=1) * np.linalg.norm(d[:-1], axis=1), 1e-12)
        return float((cos < 0).mean())

    mouse = [reversals(f) for f in drawn_files() if not f.stem.startswith("pad_")]
    pad = [reversals(f) for f in drawn_files() if f.stem.startswith("pad_")]
    assert np.median(pad) > np.median(mouse), (pad, mouse)


def test_a_bad_drawing_file_is_one_line_naming_it(tmp_path):
    from motionmatch.control.path import PathError

    bad = tmp_path / "scribble.json"
    doc = json.loads((DRAWN / "corner.json").read_text())
    doc["points"][5][0] = doc["points"][4][0]  # a repeated event time
    bad.write_text(json.dumps(doc))
    with pytest.raises(PathError, match=r"scribble\.json: path times must increase strictly: point 5"):
        load_path(bad)


# ------------------------------------------------------------------------------ the demos
def _follow_scene(db, path_file, scene_file, mode, avoid):
    from motionmatch.environment import load_scenario
    from motionmatch.metrics.follow import follow_report
    from motionmatch.runtime.environment_matching import EnvironmentMatcher
    from motionmatch.runtime.follow import FollowSettings, PathFollower

    sc = load_scenario(scene_file, agents_required=False)
    scene = sc.scene()
    f = PathFollower(db, load_path(path_file), FollowSettings(mode=mode), scene=scene if avoid else None,
                     environment=EnvironmentMatcher(db) if avoid else None)
    rec = f.run()
    return sc, rec, follow_report(rec, scene)


def test_demo_cross_the_finish_line(lafan):
    """Local control: the character crosses the finish line (z = 12 m) within 14 s, its body
    never touched by the three blocks sliding across its way (min clearance > 0); the same
    path followed blind to them is hit (> 10% of its frames)."""
    sc, rec, rep = _follow_scene(lafan, DEMOS / "finish_line.json", REPO / "scenarios" / "finish-line.json",
                                 "local", True)
    finish = sc.regions["finish"]["z"][0]
    crossed = np.flatnonzero(rec.root[:, 2] >= finish)
    assert crossed.size, rec.root[-1]
    assert crossed[0] / rec.fps <= 14.0, crossed[0] / rec.fps
    assert rep["collision_fraction"] == 0.0 and rep["min_clearance_m"] > 0.0, rep
    _, _, blind = _follow_scene(lafan, DEMOS / "finish_line.json", REPO / "scenarios" / "finish-line.json",
                                "local", False)
    assert blind["collision_fraction"] > 0.10, blind


def test_demo_reach_the_target_location(lafan):
    """Global control: from the origin the character walks to the drawn path's start (2 m
    away), follows it and stops within 0.5 m of the target, clear of every obstacle."""
    sc, rec, rep = _follow_scene(lafan, DEMOS / "reach_target.json", REPO / "scenarios" / "reach-target.json",
                                 "global", True)
    region = sc.regions["target"]
    target = np.array([np.mean(region["x"]), np.mean(region["z"])])
    end = rec.root[-1, [0, 2]]
    assert rep["completed"], rep
    assert np.linalg.norm(end - target) <= 0.5, (end, target)
    assert rep["collision_fraction"] == 0.0 and rep["min_clearance_m"] > 0.0, rep


def test_the_demo_files_load_as_scenes_and_paths():
    from motionmatch.environment import load_scenario

    for scene, path in (("finish-line", "finish_line"), ("reach-target", "reach_target")):
        sc = load_scenario(REPO / "scenarios" / f"{scene}.json")
        assert sc.description and sc.expect and len(sc.scene()) >= 3
        p = load_path(DEMOS / f"{path}.json")
        a = np.asarray(sc.agents[0].timed_path["points"])
        assert np.allclose(a[:, 1:], p.input_points[:, [0, 2]])  # the scene's character follows the path file


def test_the_v_max_study_reads_as_the_papers_fig_9(lafan):
    """The paper's Fig. 9 (``benchmarks/bench_vmax.py``): on its circle (0 to 9 m/s over 1.5
    laps), v_max 1 m/s follows closely but only walks (about 1 m/s, four times the drawn
    duration); 3 m/s follows at a run's pace; 9 m/s with the speed limit alone (the paper's
    method) cannot follow the circle; with our turn limit (the default) it still does."""
    from motionmatch.control.revision import RevisionSettings
    from motionmatch.metrics.follow import follow_report
    from motionmatch.runtime.follow import FollowSettings, PathFollower

    def run(v_max, turn_limit):
        rev = RevisionSettings(v_max=v_max, turn_limit=turn_limit)
        return follow_report(PathFollower(lafan, load_path(REPO / "paths" / "circle.json"),
                                          FollowSettings(revision=rev)).run())

    slow, paper3, paper9, ours9 = run(1.0, False), run(3.0, False), run(9.0, False), run(9.0, True)
    assert slow["completed"] and slow["mean_distance_m"] < 0.06, slow
    assert slow["completion_time_s"] > 3.0 * slow["path_duration_s"], slow
    assert paper3["completed"] and paper3["mean_distance_m"] < 0.15, paper3
    assert paper3["completion_time_s"] < 0.5 * slow["completion_time_s"], (paper3, slow)
    assert not paper9["completed"] and paper9["mean_distance_m"] > 0.3, paper9
    assert ours9["completed"] and ours9["mean_distance_m"] < 0.1, ours9


def test_a_hand_drawn_corner_with_an_overshoot_is_followed_without_the_corner_modification(lafan):
    """The change of issue 33: the paper's sharp-corner modification is off by default.
    On hand drawings whose corners the hand overshot (a hook: past the corner and back),
    the modification read the hook as a sharp reversal and moved the query's later points
    onto the line toward it, pulling the character off the drawing (mean distance 0.079 and
    0.072 m with it, 0.052 and 0.046 without, on these two from this start); the defaults
    stay within 0.065 m, and with the modification switched back on they do not."""
    from motionmatch.control.revision import RevisionSettings
    from motionmatch.runtime.follow import FollowSettings, PathFollower

    def mean_distance(name, **rev):
        f = PathFollower(lafan, load_path(DRAWN / f"{name}.json"), FollowSettings(revision=RevisionSettings(**rev)))
        return f.run().mean_distance

    assert not RevisionSettings().sharp_corners
    for name in ("corner", "lightning"):
        ours, paper = mean_distance(name), mean_distance(name, sharp_corners=True)
        assert ours < 0.065 and paper > 0.065 and ours < paper * 0.8, (name, ours, paper)
