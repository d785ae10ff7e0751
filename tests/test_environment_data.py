"""Environment features and the penalised search on real data (LAFAN1), and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from motionmatch.database import MotionDatabase, default_schema
from motionmatch.database.schema import environment_schema
from motionmatch.environment import load_scenario
from motionmatch.environment.body import database_ellipses
from motionmatch.runtime.chooser import EnvironmentChooser
from motionmatch.runtime.environment_matching import EnvironmentMatcher, EnvironmentSettings
from motionmatch.runtime.scenarios import run_scenario
from motionmatch.search import BoxSearch
from motionmatch.search.penalized import SearchOptions

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


@pytest.fixture(scope="module")
def clips(data_dir):
    from motionmatch.datasets import load_folder

    return load_folder(data_dir / "lafan1-60fps")


@pytest.fixture(scope="module")
def env_db(clips):
    db = MotionDatabase.build(clips, mirror_copies=True, schema=environment_schema())
    return db, EnvironmentMatcher(db)


def test_stored_ellipses_equal_computed_ones(clips, env_db):
    """A database built without environment features gets the same ellipses computed from
    its poses; the classic features are unchanged by the extra term."""
    db, _ = env_db
    sub = clips[:6]
    plain = MotionDatabase.build(sub, schema=default_schema())
    env = MotionDatabase.build(sub, schema=environment_schema())
    assert np.allclose(plain.raw_features, env.raw_features[:, :27])
    stored = database_ellipses(env)
    computed = database_ellipses(plain)
    assert stored.shape == computed.shape == (env.num_frames, 3, 5)
    assert np.allclose(stored, computed, atol=1e-4)
    # plausible human footprints: semi-axes between 5 cm and 1 m, centres within 3 m
    e = database_ellipses(db)
    a = np.hypot(e[..., 2], e[..., 3])
    assert np.all((a >= 0.049) & (a < 1.0)) and np.all((e[..., 4] >= 0.049) & (e[..., 4] < 1.0))
    assert np.percentile(np.hypot(e[..., 0], e[..., 1]), 99) < 3.5
    # the environment columns never enter distances: searching all columns = searching query columns
    cols = db.schema.query_columns()
    q = db.features[1234]
    i1, d1 = BoxSearch(db.features, db.valid).nearest(q, k=3)
    i2, d2 = BoxSearch(db.features[:, cols], db.valid).nearest(q[cols], k=3)
    assert np.array_equal(i1, i2) and np.allclose(d1, d2)


def test_full_method_against_linear_on_scenario_queries(env_db):
    """Every search of a run of the dense-obstacle scenario, repeated with the linear
    search: the full method agrees on a good share of them, is at most a few percent worse
    on average, and never returns a colliding frame when the linear search found a
    collision-free one with a lower score."""
    db, m = env_db
    sc = load_scenario(SCENARIOS / "dense-obstacles.json")
    sc.duration = 25.0
    log = []

    def record(q, obs, cnt, kw, r):  # every search of every chooser, with its arguments
        log.append((q.copy(), obs.copy(), cnt.copy(), {**kw, "mask": kw["mask"].copy()}, r))

    EnvironmentChooser.record = record
    try:
        run_scenario(db, sc, settings=EnvironmentSettings.from_dicts(sc.penalty, sc.search, None), matcher=m)
    finally:
        EnvironmentChooser.record = None
    same, ratios, n = 0, [], 0
    for j, (q, obs, cnt, kw, r) in enumerate(log):
        if j % 10 == 0:  # the chooser's lean path (no checks, buffers) equals the checked search
            a = m.search.search(q, obs, cnt, **kw)
            assert (a.index, a.method, a.collides) == (r.index, r.method, r.collides)
            assert a.score == r.score and a.distance == r.distance and a.stats == r.stats
        if r.method == "plain":
            continue
        n += 1
        kw["options"] = SearchOptions(method="linear")
        lin = m.search.search(q, obs, cnt, **kw)
        assert r.score >= lin.score - 1e-6 * max(1.0, lin.score)  # the linear search is exact
        same += r.index == lin.index
        ratios.append(r.score / lin.score)
        if r.collides and not lin.collides:
            assert lin.score >= r.score - 1e-6
    assert n > 100
    assert same / n > 0.2 and np.mean(ratios) < 1.6


def test_scenario_cli(env_db, tmp_path):
    from motionmatch.cli.scenario_cmd import main

    db, _ = env_db
    dbp = tmp_path / "db.npz"
    db.save(dbp)
    out, rep, prev = tmp_path / "run.npz", tmp_path / "report.json", tmp_path / "preview.gif"
    rc = main([str(SCENARIOS / "cubes-approach.json"), "--db", str(dbp), "-o", str(out), "--report", str(rep),
               "--preview", str(prev), "--duration", "2", "-q"])
    assert rc == 0 and out.exists() and prev.stat().st_size > 1000
    report = json.loads(rep.read_text())
    for key in ("ms_per_search", "diversity", "error_m", "collision_time_s", "collision_fraction", "agents"):
        assert key in report
    assert 0.0 < report["search_call_ms"] <= report["ms_per_search"]
    with np.load(out, allow_pickle=False) as z:
        assert z["root_positions"].shape == (1, 120, 3) and z["ellipses"].shape == (1, 120, 8)
        assert "rotations" in z.files
    assert main([str(SCENARIOS / "cubes-approach.json"), "--db", str(dbp), "-o", str(tmp_path / "x.bvh")]) == 1
    bad = tmp_path / "bad.json"
    bad.write_text('{"duration": 1, "agents": [{"start": [0]}]}')
    assert main([str(bad), "--db", str(dbp), "-o", str(out)]) == 1


def test_floor_segments_keep_passages_over_obstacles(data_dir):
    """LAFAN1's obstacles1_subject1 on the floor: its passages over a ~0.48 m box (a foot put
    on it on the way across, 0.2-1.4 s, floor to floor) are kept (they are the only frames
    whose whole body is above a 0.4 m fence while travelling), its platform stays (standing
    or walking on boxes for seconds, up to 1 m high) are not."""
    from motionmatch.anim import load_bvh
    from motionmatch.environment.data import floor_segments

    path = data_dir / "lafan1" / "obstacles1_subject1.bvh"
    if not path.exists():
        pytest.skip(f"{path} not found")
    m = load_bvh(path)
    kept = np.zeros(m.num_frames, dtype=bool)
    for a, b in floor_segments(m):
        assert (b - a) / m.fps >= 3.0
        kept[a:b] = True
    low = m.world_positions[:, :, 1].min(axis=1)  # the take's floor is y = 0
    speed = np.linalg.norm(np.gradient(m.world_positions[:, 0, [0, 2]], 1.0 / m.fps, axis=0), axis=1)
    over = kept & (low > 0.42) & (speed > 0.5)
    assert over.sum() / m.fps > 0.5  # more than half a second of bodies above a 0.4 m fence, moving
    # no kept stretch is a platform: the lowest joint never stays above 0.15 m for more than 1.5 s
    d = np.diff(np.r_[0, (kept & (low > 0.15)).astype(np.int8), 0])
    runs = np.flatnonzero(d == -1) - np.flatnonzero(d == 1)
    assert runs.max() / m.fps <= 1.5
    assert 0.5 < kept.mean() < 0.9


def test_corridor_widths_explain_the_narrow_corridor(env_db):
    """The narrowest straight corridor each frame's present and three future body ellipses
    fit through: LAFAN1 has almost no frame that moves through 0.35 m (the corridor-narrowing
    scenario's narrowest part: see scenarios/README.md), several hundred for 0.45 m."""
    from motionmatch.environment.body import corridor_widths, frame_ellipses

    db, _ = env_db
    width, travel, sideways = corridor_widths(db)
    assert width.shape == travel.shape == sideways.shape == (db.num_frames,)
    now = frame_ellipses(db)
    assert np.all(width >= 2 * np.minimum(now[:, 4], now[:, 5]) - 1e-9)
    moving = db.valid & (travel > 0.3)  # more than 0.3 m in a second
    fits = {w: int((moving & (width <= w)).sum()) for w in (0.35, 0.45, 0.6)}
    assert fits[0.35] < 0.0005 * moving.sum()  # measured: 10 of 81,854 (one slow side-step, mirrored)
    assert fits[0.45] > 20 * max(fits[0.35], 1)  # measured: 509
    assert fits[0.6] > 10 * fits[0.45]  # measured: 12,020
    # those that fit 0.45 m are side-steps (travel more than 45 degrees from the facing)
    assert np.mean(sideways[moving & (width <= 0.45)] > 45) > 0.9


def test_searches_that_paid_a_compilation_are_kept_apart_from_the_search_times(env_db):
    from motionmatch.environment import load_scenario
    from motionmatch.metrics.scenario import scenario_report
    from motionmatch.runtime.scenarios import run_scenario

    db, m = env_db
    sc = load_scenario(SCENARIOS / "cubes-approach.json")
    sc.duration = 2.0
    world, rec = run_scenario(db, sc, matcher=m)
    lg = rec.logs[0]
    assert len(lg.starts) == len(lg.times) > 3
    plain = scenario_report(world, rec, sc)
    assert plain["warm_up"]["searches"] == 0 and plain["warm_up"]["compile_s"] == 0.0
    # a (pretend) compilation during the first search: it is left out, and said so
    from motionmatch.runtime.chooser import SearchLog

    slow = SearchLog()
    for i, (t, c, sc_, m, hit, n, f, st) in enumerate(zip(lg.times, lg.cpu_times, lg.search_cpu_times, lg.methods,
                                                          lg.collides, lg.obstacles, lg.frames, lg.starts)):
        slow.add(5.0 if i == 0 else t, c, sc_, m, hit, n, f, st)  # the first waited for a 5 s compile
    rec.logs[0] = slow
    t0 = lg.starts[0]
    both = scenario_report(world, rec, sc)
    assert lg.starts[1] > t0 + 1e-4  # (the next search began later)
    rep = scenario_report(world, rec, sc, compiles=[(t0 + 1e-6, t0 + 2e-6)])
    assert rep["warm_up"]["searches"] == 1 and rep["warm_up"]["ms_per_search"] == 5000.0
    assert rep["searches"] == both["searches"]
    # the mean without the warm-up is that of the other searches; with it, wrong by far
    assert rep["ms_per_search"] == pytest.approx(1e3 * np.mean(lg.times[1:]), rel=1e-6)
    assert both["ms_per_search"] > 5 * rep["ms_per_search"]
