"""Long runs in bounded memory (issue 15, item 7): the per-step buffers of the runtime stay
bounded with their totals right (``RecentRows``, a chooser's ``SearchLog``, a path
follower's record, LHMM's match log), the soak's checks catch what they are for (NaN,
feet in the ground, a stuck foot lock, a memory slope), and a shortened soak on the real
data passes them (``benchmarks/soak.py`` runs the full one)."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from conftest import REPO, long_step
from motionmatch.control.path import TimedPath
from motionmatch.database import MotionDatabase
from motionmatch.runtime.chooser import SearchLog
from motionmatch.runtime.follow import FollowSettings, PathFollower
from motionmatch.runtime.recent import RecentRows
from motionmatch.runtime.world import World
from synthetic import walker


@pytest.fixture(scope="module")
def soak():
    """``benchmarks/soak.py`` as a module."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        yield importlib.import_module("soak")
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


@pytest.fixture(scope="module")
def small_db():
    specs = [(1.0, 1.4, 0.0), (0.4, 1.2, 0.8), (1.2, 0.6, -0.8), (0.0, 1.0, 0.0), (1.5, 0.0, 0.0), (1.0, 1.0, 1.5),
             (1.0, 1.0, -1.5), (0.8, 0.8, 0.0), (0.0, 0.0, 0.0), (1.1, 1.1, 0.3)]
    return MotionDatabase.build([walker(n=240, speed=a, end_speed=b, turn_rate=r, name=f"walk_{i}")
                                 for i, (a, b, r) in enumerate(specs)], mirror_copies=True)


# ---------------------------------------------------------------------------- RecentRows
@pytest.mark.parametrize("packed", [False, True], ids=["columns", "packed"])
def test_recent_rows_stay_bounded_and_hand_every_dropped_row_to_the_totals(packed):
    folded = []
    rows = RecentRows(100, block=16, on_drop=lambda cols: folded.append((cols["i"].copy(), cols["v"].copy())),
                      packed=packed)
    for i in range(1000):
        if i % 2:  # (the short path: values in the columns' order)
            rows.append_values(i, [i, 2.0 * i])
        else:
            rows.append(i=np.int64(i), v=np.array([i, 2.0 * i]))
        assert len(rows) <= rows.capacity == 116
    assert rows.total == 1000 and rows.dropped + len(rows) == 1000 and len(rows) >= 100
    dropped = np.concatenate([f[0] for f in folded])
    np.testing.assert_array_equal(dropped, np.arange(rows.dropped))  # oldest first, each once
    np.testing.assert_array_equal(rows.column("i"), np.arange(rows.dropped, 1000))  # the rest, in order
    np.testing.assert_array_equal(rows.column("v")[:, 1], 2.0 * np.arange(rows.dropped, 1000))
    assert sum(f[1][:, 0].sum() for f in folded) + rows.column("v")[:, 0].sum() == sum(range(1000))
    assert rows.nbytes() == 116 * (8 + 16)  # grown to its capacity, no further


@pytest.mark.parametrize("packed", [False, True], ids=["columns", "packed"])
def test_recent_rows_refuse_other_columns(packed):
    rows = RecentRows(4, packed=packed)
    rows.append(a=1.0)
    with pytest.raises(KeyError):
        rows.append(b=1.0)
    with pytest.raises(KeyError):
        rows.column("b")
    with pytest.raises(KeyError):
        rows.append_values(1.0, 2.0)
    with pytest.raises(KeyError):
        RecentRows(4).append_values(1.0)


# ---------------------------------------------------------------------------- SearchLog
def test_a_search_log_keeps_the_recent_searches_and_exact_totals():
    log = SearchLog(keep=64)
    n = 1000
    for i in range(n):
        log.add(0.001 * i, 0.002, 0.0005, "box" if i % 3 else "plain", i % 7 == 0, i % 5, i, 10.0 + i)
    assert log.count == n and 64 <= log.kept <= 64 + 8
    assert log.time_total == pytest.approx(0.001 * sum(range(n)))
    assert log.cpu_total == pytest.approx(0.002 * n) and log.search_cpu_total == pytest.approx(0.0005 * n)
    assert log.collisions == len(range(0, n, 7))
    assert log.method_counts == {"plain": len(range(0, n, 3)), "box": n - len(range(0, n, 3))}
    k = log.kept
    assert log.frames == list(range(n - k, n)) and log.times == pytest.approx([0.001 * i for i in range(n - k, n)])
    assert log.methods == ["box" if i % 3 else "plain" for i in range(n - k, n)]
    assert log.collides == [i % 7 == 0 for i in range(n - k, n)] and log.obstacles == [i % 5 for i in range(n - k, n)]
    assert len(log.cpu_times) == len(log.search_cpu_times) == k and log.starts == [10.0 + i for i in range(n - k, n)]


def test_a_world_still_sees_searches_once_its_agents_logs_are_full(small_db, monkeypatch):
    from motionmatch.control.intent import Intent
    from motionmatch.runtime import chooser as chooser_mod
    from motionmatch.runtime.inputs import InputSource, Want

    class Turning(InputSource):
        def intent(self, agent, t, dt):
            return Want(Intent.planar(np.sin(t), np.cos(t), "walk"))

    monkeypatch.setattr(chooser_mod, "SEARCH_LOG_KEEP", 8)
    w = World(small_db, record_poses=False)
    a = w.add_agent("a", (0.0, 0.0), (0.0, 1.0), Turning())
    searched, counts = [], []
    for f in range(600):
        w.step(0.0 if f == 0 else 1 / 60)
        searched.append(a.searched)
        counts.append(a.chooser.log.count)
    log = a.chooser.log
    assert counts[299] > 9 and log.kept <= 9  # the window was full by step 300
    late = np.diff(counts[299:]) > 0  # steps that logged a search, once the window was full
    assert late.sum() > 5 and np.all(np.asarray(searched[300:])[late])  # each still seen as a search


# ---------------------------------------------------------------------------- path follower
def _follow(db, keep_frames: int) -> tuple[PathFollower, object]:
    t = np.linspace(0, 10, 300)
    path = TimedPath.from_samples(t, np.stack([1.5 * np.sin(t / 2.0), 1.0 * t], axis=1))
    f = PathFollower(db, path, FollowSettings(keep_frames=keep_frames, levels=2))
    return f, f.run()


def test_a_follower_keeps_its_last_frames_and_the_whole_runs_totals(small_db, monkeypatch):
    from motionmatch.runtime import lhmm

    _full_f, full = _follow(small_db, 100_000)
    monkeypatch.setattr(lhmm, "MATCH_LOG_KEEP", 10)
    f, rec = _follow(small_db, 96)
    F = full.total_frames
    assert F > 400 and full.dropped_frames == 0
    assert rec.total_frames == F and len(rec.root) <= 96 + 12 and rec.dropped_frames == F - len(rec.root)
    assert len(f._rows) <= f._rows.capacity == 108  # bounded however long it runs
    np.testing.assert_array_equal(rec.root, full.root[-len(rec.root):])  # the same run, its last frames
    np.testing.assert_array_equal(rec.motion.rotations, full.motion.rotations[-len(rec.root):])
    assert rec.completion_frame == full.completion_frame >= rec.dropped_frames
    assert rec.completed == full.completed and rec.coverage == pytest.approx(full.coverage, abs=1e-12)
    assert rec.mean_distance == pytest.approx(full.mean_distance, rel=1e-9)
    assert rec.max_distance == pytest.approx(float(full.distances().max()), rel=1e-12)
    assert rec.dropped_transitions + rec.transitioned.sum() == full.transitioned.sum()
    assert len(rec.match_seconds) == 10 < rec.matches == full.matches == len(full.match_seconds)
    assert rec.knn_calls == full.knn_calls


def test_a_follower_refuses_a_window_of_no_frames():
    with pytest.raises(ValueError, match="keep_frames"):
        FollowSettings(keep_frames=0)


# ---------------------------------------------------------------------------- the soak's checks
def _checks(soak, db, frames: int, agents: int = 2, chunk: int = 50):
    """A FrameChecks fed ``frames`` frames of ``agents`` standing in the rest pose,
    walking +Z at 1 m/s, feet locked alternately every 30 frames."""
    bands = soak.database_bands(db)
    c = soak.FrameChecks(db, agents, bands, chunk=chunk)
    J = db.skeleton.num_joints
    rot = np.broadcast_to(np.array([1.0, 0, 0, 0]), (agents, J, 4)).copy()
    trs = np.broadcast_to(db.skeleton.offsets, (agents, J, 3)).copy()
    frames_data = []
    for f in range(frames):
        root = np.zeros((agents, 3))
        root[:, 2] = f / 60.0
        tr = trs.copy()
        tr[:, 0] = root
        locks = np.zeros((agents, 2), dtype=bool)
        locks[:, (f // 30) % 2] = True
        frames_data.append((rot.copy(), tr, locks, root, np.zeros(agents)))
    return c, frames_data


def _run(soak, c, frames_data, simulated: float, memory=None):
    for fr in frames_data:
        c.add(*fr)
    c.flush()
    mem = memory or {"slope_mb_per_hour": 0.0, "start_mb": 1.0, "end_mb": 1.0}
    return soak.failures({"checks": c.summary(), "memory": mem, "simulated_s": simulated}, soak.Limits())


def test_sane_frames_pass_the_checks(soak, small_db):
    c, data = _checks(soak, small_db, 300)
    assert _run(soak, c, data, 5.0) == []
    s = c.summary()
    assert s["agent_frames"] == 600 and s["nan_frames"] == 0
    assert s["contacts"]["locked_fraction"] == [0.5, 0.5] and s["contacts"]["longest_lock_s"] == 0.5
    assert s["contacts"]["max_travel_while_locked_m"] == pytest.approx(29 / 60)  # 29 steps of 1/60 m per lock


def test_the_checks_flag_an_injected_nan(soak, small_db):
    c, data = _checks(soak, small_db, 200)
    data[123][0][1, 4, 2] = np.nan  # agent 1, one joint's rotation
    data[150][3][0, 0] = np.inf  # agent 0's root
    out = _run(soak, c, data, 5.0)
    assert c.summary()["nan_frames"] == 2 and any("NaN" in line for line in out)


def test_the_checks_flag_hips_and_feet_through_the_floor(soak, small_db):
    c, data = _checks(soak, small_db, 200)
    for f in range(40, 100):  # the character sinks 0.5 m for a second: feet in the ground, hips too low
        data[f][1][0, 0, 1] = -0.5
    out = _run(soak, c, data, 5.0)
    s = c.summary()
    assert s["feet_below_frames"] == 60 and s["longest_below_floor_s"] == pytest.approx(1.0)
    worst = s["longest_below_floor"]  # where: agent 0, the run of frames 40..99
    assert worst["agent"] == 0 and worst["end_s"] == pytest.approx(100 / 60) and worst["foot_height_m"] < -0.4
    assert s["hip_height"]["frames_outside"] == 60 and s["root_height"]["frames_outside"] == 60
    assert any("stayed below" in line for line in out) and any("hip height" in line for line in out)
    assert any("below the ground" in line for line in out)


def test_the_checks_flag_a_foot_lock_stuck_while_walking(soak, small_db):
    c, data = _checks(soak, small_db, 600, chunk=64)
    for f in range(100, 400):  # agent 0's left foot locked for 5 s while it walks 5 m (across chunks)
        data[f][2][0] = [True, False]
    out = _run(soak, c, data, 120.0)
    assert c.summary()["contacts"]["max_travel_while_locked_m"] == pytest.approx(299 / 60)
    assert any("stayed locked" in line for line in out)
    c, data = _checks(soak, small_db, 600)
    for fr in data:  # a flag stuck off: the foot never locks in a long run
        fr[2][:, 1] = False
    assert any("foot 1 locked in 0.0%" in line for line in _run(soak, c, data, 120.0))


def test_run_lengths_carry_across_chunks(soak):
    flags = np.array([0, 1, 1, 0, 1, 1, 1, 1, 0, 1], dtype=bool)
    whole, _ = soak.run_lengths(flags, np.int64(0))
    a, carry = soak.run_lengths(flags[:6], np.int64(0))
    b, _ = soak.run_lengths(flags[6:], carry)
    np.testing.assert_array_equal(whole, [0, 1, 2, 0, 1, 2, 3, 4, 0, 1])
    np.testing.assert_array_equal(np.concatenate([a, b]), whole)


def test_a_growing_memory_series_is_flagged_and_a_flat_one_is_not(soak, small_db):
    t = np.arange(0, 3600, 10.0)
    rng = np.random.default_rng(0)
    flat = 500e6 + rng.normal(0, 1e6, len(t))  # +-1 MB of noise
    grow = flat + t / 3600 * 200e6  # 200 MB per hour
    warm = flat.copy()
    warm[:20] -= 80e6  # a warm-up at the start: left out of the fit
    fit = soak.rss_slope(t, grow)
    assert fit["slope_mb_per_hour"] == pytest.approx(200.0, rel=0.05) and fit["fitted"] < fit["samples"]
    assert abs(soak.rss_slope(t, flat)["slope_mb_per_hour"]) < 5 and abs(soak.rss_slope(t, warm)["slope_mb_per_hour"]) < 5
    c, data = _checks(soak, small_db, 100)
    assert any("memory grows" in line for line in _run(soak, c, data, 3600.0, fit))
    c, data = _checks(soak, small_db, 100)
    assert _run(soak, c, data, 3600.0, soak.rss_slope(t, warm)) == []
    assert soak.rss_bytes() > 10e6


def test_the_random_keys_hold_every_mode_and_head_home(soak):
    keys = soak.RandomKeys(np.random.default_rng(3))
    held = set()
    t = 0.0
    while t < 600:
        k = keys.keys_at(t, (0.0, 0.0))
        if k is not None:
            held |= k
        t += 0.1
    assert {"w", "a", "s", "d", "shift", "c", "j", "p"} <= held and ({"up", "down"} & held)
    keys.until = 0.0
    for _ in range(50):  # far out at +X, +Z: any direction keys point back (-X is D, -Z is S)
        k = keys.keys_at(keys.until, (40.0, 40.0))
        d = k & {"w", "a", "s", "d"}
        assert not d or d == {"s", "d"}


# ---------------------------------------------------------------------------- the shortened soak
@pytest.mark.slow
def test_a_shortened_soak_passes_its_checks(soak, data_dir):
    """2 simulated minutes of the keyboard character and 30 s of 50 crowd agents on the
    viewer's database: the full soak's checks, but for two. The crowd's memory slope: 30 s
    of a crowd is mostly its warm-up (the full soak measures it over 10 minutes). How long
    a foot may stay below the floor: a foot lock keeps the toe where it was when it locked,
    also when a transition's blend had dipped it below the floor (benchmarks/README.md,
    Soak), so only the depth and the share of such frames are checked here."""
    from motionmatch.runtime.environment_matching import EnvironmentMatcher

    folder = data_dir / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    db, _desc, _s = soak.load_database(str(folder), None, log=lambda *a: None)
    bands, matcher = soak.database_bands(db), EnvironmentMatcher(db)
    with long_step("soak: 2 simulated minutes of a keyboard character", 10):
        single = soak.soak_single(db, 120.0, seed=5, rss_every=5.0, progress=False, bands=bands, matcher=matcher)
    assert single["frames"] == 7200 and single["checks"]["agent_frames"] == 7200
    assert set(single["mode_frames"]) >= {"locomotion", "idle", "jump", "dance", "creep"}
    below = {"max_below_floor_s": np.inf}
    assert soak.failures(single, soak.Limits(max_slope_mb_per_hour=200.0, **below)) == []
    with long_step("soak: 30 simulated seconds of a 50-agent crowd", 20):
        crowd = soak.soak_crowd(db, 30.0, 50, seed=6, progress=False, bands=bands, matcher=matcher)
    assert crowd["checks"]["agent_frames"] == 50 * 1800 and crowd["arrivals"] > 0
    assert soak.failures(crowd, soak.Limits(max_slope_mb_per_hour=np.inf, **below)) == []
    for run in (single, crowd):
        assert run["checks"]["feet_below_fraction"] < 0.05
