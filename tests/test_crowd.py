"""Crowds are Worlds of steering agents: the steering of many agents at once against the
per-agent rule (``tests/oracles/steering.py``), the grid it finds neighbours with, and the
World's batched stepping against stepping each agent's controller on its own."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.geometry.grid import box_grid, point_grid
from motionmatch.runtime.crowd import SteeringSettings, steer_all
from oracles.steering import steer


def _reference(pos, idx, aims, speeds, sides, s):
    return np.array([steer(pos[i], aims[k], speeds[k], np.delete(pos, i, axis=0), s, sides[k])
                     for k, i in enumerate(idx)]).reshape(-1, 2)


@pytest.mark.parametrize("n, spread, seed, angle", [(30, 3.0, 0, 60.0), (400, 25.0, 1, 60.0), (300, 4.0, 2, 60.0),
                                                    (300, 4.0, 3, 120.0), (200, 3.0, 4, 180.0)])
def test_steering_of_many_agents_equals_the_per_agent_rule(n, spread, seed, angle):
    """Sparse and dense crowds (most agents see several others), some arrived, agents on
    grid-cell borders, at equal distances from another and exactly at the view distance;
    cones of vision narrower and wider than a half-plane (the compiled loop skips agents
    behind only for the narrower)."""
    rng = np.random.default_rng(seed)
    s = SteeringSettings(view_angle_deg=angle)
    pos = rng.uniform(-spread, spread, (n, 2))
    pos[:10] = np.round(pos[:10] / s.view_distance) * s.view_distance  # on cell borders
    pos[10] = pos[11] + [1.0, 0.0]  # two agents equally far ahead of a third
    pos[12] = pos[11] + [-1.0, 0.0]
    pos[13] = pos[14] + [s.view_distance, 0.0]  # exactly at the view distance
    idx = np.arange(0, n, 2) if n > 40 else np.arange(n)
    aims = pos[idx] + rng.uniform(-8, 8, (len(idx), 2))
    aims[3] = pos[idx[3]] + 0.1  # arrived
    speeds = rng.uniform(0.8, 2.0, len(idx))
    sides = np.where(idx % 4 == 0, 1.0, -1.0)
    v = steer_all(pos, idx, aims, speeds, sides, s)
    ref = _reference(pos, idx, aims, speeds, sides, s)
    np.testing.assert_allclose(v, ref, atol=1e-12)
    assert not v[3].any()
    to_aim = aims - pos[idx]
    cos = np.einsum("ij,ij->i", v, to_aim) / np.maximum(np.hypot(*to_aim.T) * np.hypot(*v.T), 1e-12)
    assert np.sum(cos < 1.0 - 1e-9) >= 3  # the lateral force bent some (the comparison covers it)


def test_grid_cells_hold_exactly_the_boxes_that_touch_them():
    rng = np.random.default_rng(4)
    lo = rng.uniform(-10, 10, (200, 2))
    hi = lo + rng.uniform(0, 3, (200, 2))
    cell = 1.5
    start, items, nx, nz, x0, z0 = box_grid(lo[:, 0], hi[:, 0], lo[:, 1], hi[:, 1], cell)
    for i in range(nx):
        for j in range(nz):
            got = items[start[i * nz + j]:start[i * nz + j + 1]]
            cx, cz = x0 + i * cell, z0 + j * cell
            want = np.flatnonzero((lo[:, 0] < cx + cell) & (hi[:, 0] >= cx) & (lo[:, 1] < cz + cell) & (hi[:, 1] >= cz))
            np.testing.assert_array_equal(got, want)  # ascending box order
    p = rng.uniform(-5, 5, (50, 2))
    start, items, nx, nz, x0, z0 = point_grid(p, 2.0)
    assert len(items) == 50 and sorted(items) == list(range(50))
    for m in range(50):
        c = int((p[m, 0] - x0) // 2.0) * nz + int((p[m, 1] - z0) // 2.0)
        assert m in items[start[c]:start[c + 1]]


# ------------------------------------------------------------------ the World's batched stepping
@pytest.fixture(scope="module")
def small_env_db(data_dir):
    from motionmatch.anim import load_bvh
    from motionmatch.database import MotionDatabase
    from motionmatch.database.schema import environment_schema
    from motionmatch.runtime.environment_matching import EnvironmentMatcher

    names = ("walk1_subject1_walk2", "walk2_subject3_walk", "multipleActions1_subject1_run", "ground2_subject3_turn")
    paths = [data_dir / "lafan1-60fps" / f"{n}.bvh" for n in names]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        pytest.skip(f"LAFAN1 clips missing: {missing}")
    db = MotionDatabase.build([load_bvh(p) for p in paths], mirror_copies=True, schema=environment_schema())
    return db, EnvironmentMatcher(db)


def _crowd_world(dbm, batched: bool):
    """doors-small (12 steering agents among walls, each an obstacle to the others) plus a
    scripted agent with spring inertialization and no foot locking, and one with neither."""
    from pathlib import Path

    from motionmatch.environment import load_scenario
    from motionmatch.runtime.environment_matching import environment_controller_settings
    from motionmatch.runtime.inputs import ScriptInput
    from motionmatch.runtime.scenarios import world_from_scenario

    db, m = dbm
    sc = load_scenario(Path(__file__).resolve().parents[1] / "scenarios" / "doors-small.json")
    world = world_from_scenario(db, sc, matcher=m, record_poses=False)
    world.batched = batched
    script = {"events": [{"t": 0.0, "keys": ["w"]}, {"t": 1.5, "keys": ["d", "shift"]}, {"t": 3.0, "keys": ["a"]}]}
    for name, x, inert in (("spring", 10.0, "spring"), ("cut", 12.0, "none")):
        cs = environment_controller_settings(inertialization=inert, foot_locking=False, adjust_halflife=0.2)
        world.add_agent(name, (x, -6.0), (0.0, 1.0), ScriptInput(script, 6.0), controller=cs)
    return world


def test_a_world_run_records_what_each_agent_shows(small_env_db):
    """The one recorder (``World.record``, a few array copies a step) keeps each agent's
    root, frame, pose, searches and last desired trajectory as the agent shows them."""
    world = _crowd_world(small_env_db, batched=True)
    world.record_poses = True
    rec = world.run(40)
    assert rec.frames.shape == (len(world.agents), 40) and rec.rotations.shape[:2] == (len(world.agents), 40)
    for i, a in enumerate(world.agents):
        c = a.ctrl
        np.testing.assert_array_equal(rec.root_positions[i, -1], c.root_pos)
        assert rec.root_yaws[i, -1] == c.root_yaw and rec.frames[i, -1] == c.frame
        assert rec.searched[i, -1] == a.searched
        np.testing.assert_array_equal(rec.rotations[i, -1], a.result.rotations.astype(np.float32))
        if c.last_desired is not None:
            np.testing.assert_array_equal(rec.desired[i, -1], c.last_desired.positions.astype(np.float32))
    assert rec.searched.any(axis=1).all()  # every agent searched at least once in 40 frames


def test_the_world_poses_of_a_step_are_each_agents_forward_kinematics(small_env_db):
    """``Agent.world_pose`` (what the viewer draws) is the forward kinematics of the agent's
    own result, for every agent, from one call over the step's rows."""
    from motionmatch.anim.kinematics import forward_kinematics

    world = _crowd_world(small_env_db, batched=True)
    for _ in range(30):
        world.step(1 / 60)
    parents = small_env_db[0].skeleton.parents
    step = world.agents[0].last_step[0]
    for a in world.agents:
        pos, rot = a.world_pose()
        r = a.result
        want_pos, want_rot = forward_kinematics(parents, r.rotations[None], r.translations[None])
        np.testing.assert_allclose(pos, want_pos[0], atol=1e-12)
        np.testing.assert_allclose(rot, want_rot[0], atol=1e-12)
        assert a.last_step[0] is step and not pos.flags.writeable  # one step's arrays, read-only views
    assert step.world_pose()[0].shape == (len(world.agents), len(parents), 3)


def test_world_steps_its_agents_together_as_each_would_alone(small_env_db):
    """The batched World (one compiled playback and pose call for all agents, searches in
    between) plays the same poses as stepping each agent's controller with its own
    ``update``: transitions, foot locks, agents skipped (level of detail), removed and
    added in the middle, steps of several lengths."""
    from motionmatch.runtime.crowd import SteeringInput

    worlds = [_crowd_world(small_env_db, batched) for batched in (True, False)]
    rng = np.random.default_rng(0)
    dts = rng.choice([1 / 60, 1 / 30, 1 / 144], size=300, p=[0.7, 0.2, 0.1])
    worst = 0.0
    transitions = locked = searches = 0
    for f, dt in enumerate(dts):
        skip = frozenset(rng.choice(14, size=3, replace=False).tolist()) if f % 7 == 3 else frozenset()
        for w in worlds:
            if f == 100:  # an agent leaves; a new one takes its row
                gone = w.agents[4]
                w.remove_agent(gone)
                w.add_agent("late", (2.0, -7.0), (0.0, 1.0), SteeringInput(w, (2.0, 6.0), 1.4))
                assert gone.ctrl._batch is not w._batch  # it keeps its state, apart
            w.step(0.0 if f == 0 else float(dt), skip=skip)
        a, b = worlds
        for x, y in zip(a.agents, b.agents):
            ra, rb = x.result, y.result
            assert (ra.frame, ra.mode, ra.searched, ra.transitioned) == (rb.frame, rb.mode, rb.searched, rb.transitioned)
            np.testing.assert_array_equal(ra.contacts, rb.contacts)
            worst = max(worst, float(np.abs(ra.rotations - rb.rotations).max()),
                        float(np.abs(ra.translations - rb.translations).max()))
            transitions += ra.transitioned
            locked += bool(ra.contacts.any())
            searches += ra.searched
    assert worst < 1e-9
    assert transitions > 50 and locked > 1000 and searches > 300  # what was compared happened
    for x, y in zip(*(w.agents for w in worlds)):
        np.testing.assert_allclose(x.ctrl.root_pos, y.ctrl.root_pos, atol=1e-9)
        np.testing.assert_allclose(x.ctrl.predictor.state.position, y.ctrl.predictor.state.position, atol=1e-9)


def test_simulated_roots_in_batch_rows_are_the_predictors_own(small_env_db):
    """A controller's simulated root advanced by the batch's compiled stage is the plain
    predictor's, bit for bit: moving, strafing (a facing), standing, steps of any length,
    and a state set from outside in between (as the root adjustment does)."""
    from motionmatch.control.intent import Intent
    from motionmatch.control.trajectory import TrajectoryPredictor
    from motionmatch.runtime.batch import ControllerBatch, RowPredictor
    from motionmatch.runtime.controller import ControllerSettings

    db, _ = small_env_db
    times = db.schema.trajectory_offsets
    batch = ControllerBatch(db)
    batch.add(ControllerSettings())
    row = batch.add(ControllerSettings())  # a second row: the batch grows
    fast, plain = RowPredictor(batch, row, times, 0.2, 0.25), TrajectoryPredictor(times, 0.2, 0.25)
    rng = np.random.default_rng(1)
    intent = Intent.idle()
    for i in range(400):
        if i % 25 == 0:
            v = rng.normal(size=3) * 1.5
            v[1] = 0.0
            face = None if rng.random() < 0.6 else np.array([rng.normal(), 0.0, rng.normal()])
            intent = Intent(velocity=v if rng.random() < 0.8 else [0.0, 0.0, 0.0], facing=face, gait="walk")
        if i % 97 == 50:
            for p in (fast, plain):
                p.state = p.state.replace(position=p.state.position + [0.1, 0.0, -0.05])
        dt = float(rng.choice([0.0, 1 / 144, 1 / 60, 1 / 20]))
        a, b = fast.advance(dt, intent), plain.advance(dt, intent)
        for name in ("position", "velocity", "acceleration", "rotation", "angular_velocity"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert a.yaw == b.yaw
        np.testing.assert_array_equal(fast.predict(intent).positions, plain.predict(intent).positions)


def test_a_door_crowd_steps_together_as_each_agent_alone(small_env_db, monkeypatch):
    """A few dozen agents of the benchmark's door crowd (several groups, waypoints), each
    an obstacle to the others: the batched World, the batched World on two threads (its
    poses in two halves every step, however few; its searches' kernels run together, half
    on each thread), the batched World whose step's obstacle buffers start too small for
    most searches (those gather alone, the buffers grow) and per-agent stepping play the
    same frames and roots, step by step. The batched worlds make their searches ready
    together (queries and obstacles in one compiled call each)."""
    from motionmatch.environment import parse_scenario
    from motionmatch.runtime import batch as batch_module
    from motionmatch.runtime.chooser import EnvironmentChooser
    from motionmatch.runtime.scenarios import door_crowd, world_from_scenario

    db, m = small_env_db
    sc = parse_scenario(door_crowd(40, band=12))
    assert len(sc.agents) == 40 and len({a.goal[1] > 0 for a in sc.agents}) == 2
    monkeypatch.setattr(batch_module, "POSE_SPLIT_ROWS", 2)
    deferred = []
    from motionmatch.runtime.deferred import DeferredSearches

    run = DeferredSearches.run
    monkeypatch.setattr(DeferredSearches, "run", lambda self: (deferred.append(len(self)), run(self)))
    planned = []
    gather = EnvironmentChooser._gather_many
    monkeypatch.setattr(EnvironmentChooser, "_gather_many",
                        staticmethod(lambda c, *a: (planned.append(len(c)), gather(c, *a))[1]))
    worlds = []
    for batched, threads in ((True, 1), (False, 1), (True, 2), (True, 1)):
        w = world_from_scenario(db, sc, matcher=m, record_poses=False)
        w.batched, w.threads = batched, threads
        worlds.append(w)
    worlds[3].obstacle_pool.capacity = 1
    searched = 0
    for f in range(50):
        for w in worlds:
            w.step(0.0 if f == 0 else 1 / 60)
        a = worlds[0]
        for b in worlds[1:]:
            for x, y in zip(a.agents, b.agents):
                assert (x.result.frame, x.result.searched, x.result.transitioned) == \
                    (y.result.frame, y.result.searched, y.result.transitioned)
                np.testing.assert_array_equal(x.result.translations, y.result.translations)
                np.testing.assert_array_equal(x.result.rotations, y.result.rotations)
                assert x.chooser.log.count == y.chooser.log.count
        searched += sum(x.result.searched for x in a.agents)
    assert searched > 150  # every agent searched several times
    assert worlds[2]._pool is not None  # (its poses did run on two threads)
    assert sum(deferred) > 100  # (most of its searches were deferred and run together)
    assert sum(planned) > 300  # (and made ready together, in the three batched worlds)
    assert worlds[3].obstacle_pool.capacity > 1  # (it fell back and grew)


def test_agents_colliding_is_the_pairwise_measure():
    """The grid's answer equals every pair compared with ``pair_distances`` (overlaps,
    near misses, bodies at different heights)."""
    from motionmatch.environment.collision import pair_distances
    from motionmatch.metrics.crowd import agents_colliding, placed_ellipses

    rng = np.random.default_rng(3)
    A = 120
    e = np.zeros((A, 8))
    e[:, :2] = rng.uniform(-0.1, 0.1, (A, 2))
    ang = rng.uniform(-np.pi, np.pi, A)
    e[:, 2], e[:, 3] = np.cos(ang), np.sin(ang)
    e[:, 4], e[:, 5] = rng.uniform(0.2, 0.4, A), rng.uniform(0.1, 0.2, A)
    e[:, 6], e[:, 7] = 0.0, 1.7
    e[::17, 6], e[::17, 7] = 2.5, 3.0  # off the ground: overlaps no one below
    ell = placed_ellipses(e, rng.uniform(0, 12, (A, 2)), rng.uniform(-np.pi, np.pi, A))
    got = agents_colliding(ell)
    want = np.zeros(A, dtype=bool)
    for i in range(A):
        for j in range(A):
            if i != j and pair_distances(ell[i][None], ell[j][None])[0] < 0:
                want[i] = True
    np.testing.assert_array_equal(got, want)
    assert 5 < got.sum() < A - 5


def test_bench_crowd_command_prints_its_numbers(small_env_db, tmp_path, capsys):
    import json

    from motionmatch.cli.main import main

    db, _ = small_env_db
    db.save(tmp_path / "db.npz")
    got = []
    for processes in ("1", "2"):  # (two: the agents shared between two processes, the same steps)
        rc = main(["bench", "crowd", "--db", str(tmp_path / "db.npz"), "--agents", "12", "--environment",
                   "--seconds", "0.5", "--warmup", "0", "--processes", processes, "--json", "--quiet"])
        assert rc == 0
        r = json.loads(capsys.readouterr().out)
        assert r["agents"] == 12 and r["frames"] == 30 and r["steps_per_s"] > 0
        assert r["processes"] == int(processes) and r["threads"] >= 1
        assert r["ms_per_step"]["p95"] >= r["ms_per_step"]["median"] > 0
        assert r["process_cpu_ms_per_step"]["median"] > 0
        got.append(r["agent_collision_fraction"])
    assert 0.0 <= got[0] <= 1.0 and got[0] == got[1]


def test_compiled_query_and_gather_equal_the_general_path(small_env_db):
    """A door crowd's searches: the query built in one compiled call equals the Python
    formulation (spring prediction, character frame, normalisation) bit for bit, and the
    obstacles gathered in one compiled call (walls and the other agents' bodies through
    their grids) are the general path's rows, in its order."""
    from motionmatch.environment import parse_scenario
    from motionmatch.runtime.scenarios import door_crowd, world_from_scenario

    db, m = small_env_db
    w = world_from_scenario(db, parse_scenario(door_crowd(40, band=12)), matcher=m, record_poses=False)
    queries = near = 0
    for f in range(24):
        w.step(0.0 if f == 0 else 1 / 60)
        if f % 8:
            continue
        for a in w.agents:
            c, ch = a.ctrl, a.chooser
            q, traj = c._planar_query(a.intent)
            c.predictor.batched = lambda desired: False  # the Python formulation
            q_ref, traj_ref = c._query(a.intent, None)
            del c.predictor.batched
            np.testing.assert_array_equal(q, q_ref)
            for name in ("positions", "velocities", "directions", "rotations"):
                np.testing.assert_array_equal(getattr(traj, name), getattr(traj_ref, name))
            queries += 1
            obs, cnt, nearest, _ = ch.gather(c)
            obs, cnt = obs.copy(), cnt.copy()
            fused = ch.obstacles_fn
            ch.obstacles_fn = lambda *args, f=fused: f(*args)  # any other callable: the general path
            obs_ref, cnt_ref, nearest_ref, _ = ch.gather(c)
            ch.obstacles_fn = fused
            np.testing.assert_array_equal(cnt, cnt_ref)
            assert nearest == nearest_ref
            for k in range(len(cnt)):
                np.testing.assert_array_equal(obs[k, :cnt[k]], obs_ref[k, :cnt_ref[k]])
            near += bool(cnt.any())
    assert queries == 120 and near > 40  # most agents had walls or others near


def test_a_step_collects_garbage_once_and_group_costs_on_demand(small_env_db):
    """A World's step keeps Python's cyclic collector out of its work (with a threshold of
    one allocation it would run hundreds of times a step): at most one run at its end and
    one due on entry, every generation in turn; none when it was disabled on entry, which
    it stays. A search's group costs, computed when read, are the database's for the query
    and the frame the search chose."""
    import gc

    db, _ = small_env_db
    world = _crowd_world(small_env_db, True)
    runs, every = [], []

    import threading

    me = threading.get_ident()

    def count(phase, info):  # (this thread's collections: another thread of the process, say a
        if phase == "start" and threading.get_ident() == me:  # server left by another test, may collect)
            runs.append(info["generation"])

    from motionmatch.runtime import world as world_module

    old = gc.get_threshold()
    gc.callbacks.append(count)
    try:
        gc.set_threshold(1, 1, 1)
        world_module.YOUNG_OBJECTS_PER_AGENT, young = 0, world_module.YOUNG_OBJECTS_PER_AGENT
        try:
            world.step(0.0)
            alive = []
            for _ in range(12):
                # objects left alive between steps (a large crowd's step leaves some: its
                # agents' intents and results; this small world's may free as many as it makes)
                gc.disable()
                alive += [[] for _ in range(10)]
                gc.enable()
                runs.clear()
                world.step(1 / 60)
                assert len(runs) <= 2 and gc.isenabled()
                every += runs
        finally:
            world_module.YOUNG_OBJECTS_PER_AGENT = young
        assert set(every) == {0, 1, 2}
        gc.disable()
        runs.clear()
        world.step(1 / 60)
        assert runs == [] and not gc.isenabled()
        # the youngest generation's threshold is at least the world's budget (objects per agent)
        gc.collect()
        keep = [[] for _ in range(300)]  # 300 tracked objects, alive
        runs.clear()
        world_module._collect_as_due(young=1000)
        assert runs == [] and len(keep) == 300
        world_module._collect_as_due(young=100)
        assert runs == [0]
    finally:
        gc.enable()
        gc.callbacks.remove(count)
        gc.set_threshold(*old)
    checked = 0
    for _ in range(20):
        world.step(1 / 60)
        for a in world.agents:
            if a.result.searched and a.chooser is not None and a.chooser.last.index >= 0:
                costs = a.result.costs
                assert costs is a.ctrl.last_costs
                expect = db.group_costs(a.ctrl.last_query[0], a.chooser.last.index)
                assert dict(costs) == expect and costs == expect and set(costs) == set(expect)
                checked += 1
    assert checked > 10


# ------------------------------------------------------------------ worlds split among processes
def _state(world):
    st, rows = world._batch.state, world._rows()
    return st.frame[rows].copy(), st.root_pos[rows].copy(), st.root_yaw[rows].copy()


def _door_world(dbm, n: int):
    from motionmatch.environment import parse_scenario
    from motionmatch.runtime.scenarios import door_crowd, world_from_scenario

    db, m = dbm
    return world_from_scenario(db, parse_scenario(door_crowd(n, band=12)), matcher=m, record_poses=False)


def test_split_worlds_step_every_agent_as_the_whole_world(small_env_db):
    """A door crowd of 40 cut in two parts (World.split), each stepping its agents and told
    where the other part's stand before each step, steps every agent as the whole world
    does, bit for bit: steering among the others, the others' bodies as obstacles, the
    searches' stagger. Parts left blind to each other's moves do not (the test can fail)."""
    from motionmatch.runtime.shards import parts_of

    whole = _door_world(small_env_db, 40)
    parts = parts_of(40, 2)
    worlds, blind = [_door_world(small_env_db, 40) for _ in parts], [_door_world(small_env_db, 40) for _ in parts]
    for w, b, mine in zip(worlds, blind, parts):
        w.split(mine)
        b.split(mine)
        assert len(w.agents) == len(mine) and w.seen() == 40
        assert sorted(w.peer_uids.tolist()) == sorted(set(range(40)) - set(mine.tolist()))
    order = np.concatenate(parts)
    states = [np.concatenate(x)[np.argsort(order)] for x in zip(*(_state(w) for w in worlds))]
    searched = blind_differs = 0
    for f in range(90):
        dt = 0.0 if f == 0 else 1 / 60
        for w in worlds:  # (the uids of a scenario's agents are their places in the whole world)
            peers = w.peer_uids
            w.set_peer_state(states[0][peers], states[1][peers], states[2][peers])
        for w in (*worlds, *blind):
            w.step(dt)
        whole.step(dt)
        states = [np.concatenate(x)[np.argsort(order)] for x in zip(*(_state(w) for w in worlds))]
        for got, want in zip(states, _state(whole)):
            np.testing.assert_array_equal(got, want)
        searched += sum(a.searched for a in whole.agents)
        seen_blind = [np.concatenate(x)[np.argsort(order)] for x in zip(*(_state(w) for w in blind))]
        blind_differs += not np.array_equal(seen_blind[1], states[1])
    assert searched > 100 and blind_differs > 0


def test_a_world_is_split_once_into_agents_it_has(small_env_db):
    w = _door_world(small_env_db, 6)
    with pytest.raises(ValueError, match=r"agent indices 0\.\.5"):
        w.split([0, 6])
    with pytest.raises(ValueError, match="no peers"):
        w.set_peer_state(np.zeros(0), np.zeros((0, 3)), np.zeros(0))
    w.split([0, 2, 4])
    assert [a.uid for a in w.agents] == [0, 2, 4] and w.peer_uids.tolist() == [1, 3, 5]
    with pytest.raises(ValueError, match="split once"):
        w.split([0])


def test_parts_of_deal_every_agent_once_in_runs():
    from motionmatch.runtime.shards import parts_of

    for count, parts in ((1000, 2), (7, 2), (3, 3), (1001, 3), (1, 1), (5, 4), (0, 2)):
        got = parts_of(count, parts)
        assert len(got) == parts
        assert sorted(np.concatenate(got).tolist()) == list(range(count))
        sizes = [len(p) for p in got]
        assert max(sizes) - min(sizes) <= 1
    a, b = parts_of(1000, 2)
    assert a[0] == 0 and np.all(np.diff(a)[:62] == 1) and 900 < a[-1] and 900 < b[-1]  # runs, from everywhere


def _build_here_only(path: str, n: int, pid: int):
    """door_crowd_world in the process ``pid`` only (a part's build failing elsewhere)."""
    import os

    from motionmatch.runtime.scenarios import door_crowd_world

    if os.getpid() != pid:
        raise OSError(f"no database at {path} here")
    return door_crowd_world(path, n)


@pytest.mark.slow
def test_sharded_world_in_two_processes(small_env_db, tmp_path, monkeypatch):
    """Two processes step a door crowd of 30 as one world does (every agent's frame, root
    and yaw, every step); a part whose build fails, or whose process dies, is reported as
    such in one line, and the other processes end."""
    import os
    from pathlib import Path

    from motionmatch.runtime.scenarios import door_crowd_world
    from motionmatch.runtime.shards import ShardedWorld

    db, _ = small_env_db
    path = str(tmp_path / "db.npz")
    db.save(path)
    whole = door_crowd_world(path, 30)
    with ShardedWorld(door_crowd_world, (path, 30), processes=2) as sw:
        assert sw.processes == 2 and sw.agents == 30 and len(sw.world.agents) == 15
        for f in range(40):
            dt = 0.0 if f == 0 else 1 / 60
            sw.step(dt)
            whole.step(dt)
            for got, want in zip(sw.state(), _state(whole)):
                np.testing.assert_array_equal(got, want)
        assert sw.cpu_seconds > 0
        proc = sw._procs[0]
        proc.kill()
        proc.wait()
        with pytest.raises(RuntimeError, match="process 1 ended while stepping"):
            sw.step(1 / 60)
    with ShardedWorld(door_crowd_world, (path, 2), processes=3) as sw:  # (more processes than agents)
        assert sw.processes == 2 and len(sw._procs) == 1
        sw.step(0.0)
        assert [x.shape for x in sw.state()] == [(2,), (2, 3), (2,)]
    # (the helper's module is imported in the new process: this folder on its path)
    here = str(Path(__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    with pytest.raises(RuntimeError, match=r"process 1 failed while building its world: OSError: no database at"):
        ShardedWorld(_build_here_only, (path, 30, os.getpid()), processes=2)


def test_agent_clocks_live_in_the_world_and_go_with_the_agent(small_env_db):
    """A world keeps its agents' input clocks in columns: an agent skipped (level of
    detail) owes the time and gets it all at its next step; one that starts later stands
    until then; a replaced input is asked from the next step; an agent that leaves keeps
    its clock."""
    from motionmatch.runtime.inputs import IdleInput, ScriptInput

    world = _crowd_world(small_env_db, True)
    a = world.agents[-1]  # (the scripted agent "cut")
    late = world.add_agent("late", (14.0, -6.0), (0.0, 1.0), ScriptInput({"events": [{"t": 0.0, "keys": ["w"]}]}, 2.0),
                           start_time=0.05)
    dt = 1 / 60
    world.step(0.0)
    assert a.started and a.local_time == 0.0 and not late.started
    for _ in range(3):
        world.step(dt, skip=frozenset({a.uid}))
    assert a.owed == pytest.approx(3 * dt) and a.local_time == 0.0
    assert not late.started and late.intent.speed == 0.0  # (its start, 0.05 s, is the next step's)
    world.step(dt)
    assert a.owed == 0.0 and a.local_time == pytest.approx(4 * dt)
    assert late.started and late.local_time == 0.0  # its first step is at its start time
    assert late.intent.speed > 0  # (its script: walking)

    calls = []

    class Recorder(IdleInput):
        def intent(self, agent, t, step):
            calls.append((agent.name, t, step))
            return super().intent(agent, t, step)

    a.source = Recorder()
    world.step(dt)
    assert calls == [("cut", pytest.approx(5 * dt), pytest.approx(dt))]
    assert a.intent.speed == 0.0
    world.remove_agent(a)
    assert a.started and a.local_time == pytest.approx(5 * dt) and a.owed == 0.0
    a.local_time = 1.0
    assert a.local_time == 1.0 and a not in world.agents
