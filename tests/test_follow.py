"""Path following end to end: the shipped test paths on LAFAN1 (acceptance), control modes,
several characters, the ablations that must hurt, DirectionNet, the CLI and the path files."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest

from conftest import REPO
from motionmatch.control.direction_net import (
    DirectionNet,
    DirectionNetConfig,
    MissingTorchError,
    direction_windows,
    train_direction_net,
)
from motionmatch.control.path import TimedPath, load_path
from motionmatch.control.revision import RevisionSettings
from motionmatch.database import MotionDatabase
from motionmatch.metrics.follow import follow_report
from motionmatch.runtime.follow import FollowSettings, PathFollower, default_v_max, run_followers
from synthetic import random_direction_net, walker

PATHS = ("s_curve", "square", "zigzag", "circle", "figure_eight")


@pytest.fixture(scope="module")
def lafan(data_dir):
    from motionmatch.datasets import load_folder

    folder = data_dir / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    return MotionDatabase.build(load_folder(folder), mirror_copies=True)


@pytest.fixture(scope="module")
def small_db():
    specs = [(1.0, 1.4, 0.0), (0.4, 1.2, 0.8), (1.2, 0.6, -0.8), (2.0, 3.0, 0.3), (0.0, 1.0, 0.0), (1.5, 0.0, 0.0),
             (1.0, 1.0, 1.5), (1.0, 1.0, -1.5), (0.8, 0.8, 0.0), (0.0, 0.0, 0.0), (1.1, 1.1, 0.3),
             (1.1, 1.1, 0.6), (0.6, 0.6, 0.3)]
    return MotionDatabase.build([walker(n=240, speed=a, end_speed=b, turn_rate=r, name=f"walk_{i}")
                                 for i, (a, b, r) in enumerate(specs)], mirror_copies=True)


def shipped(name: str, **kw) -> TimedPath:
    return load_path(REPO / "paths" / f"{name}.json", **kw)


# --------------------------------------------------------------------------- acceptance
def test_full_method_completes_every_shipped_path_closely(lafan):
    """The issue's bar: complete every test path with a mean distance of at most 0.15 m
    (the paper: 0.085 to 0.147 m on its four paths)."""
    for name in PATHS:
        f = PathFollower(lafan, shipped(name), FollowSettings())
        r = follow_report(f.run())
        assert r["completed"], name
        assert r["mean_distance_m"] <= 0.15, (name, r["mean_distance_m"])
        assert r["knn_calls_per_match"] == 13.0
        assert r["nan_frames"] == 0
        # it keeps the timing the limits allow (the drawn one, slower where the path is
        # drawn faster than a person runs: the circle's 9 m/s, braking for the square's
        # corners): done within a few seconds of it
        allowed = float(f.reviser.time_to_run(f.path.last))
        assert r["path_duration_s"] <= allowed + 1e-9
        assert r["completion_time_s"] < allowed + 3.0, (name, r["completion_time_s"], allowed)


def test_tight_fast_paths_are_followed_as_a_person_runs_them(lafan):
    """The tight set (paths/tight/: turns of radius 0.3-0.5 m drawn at 3-4.5 m/s): every
    path completed, slowing for its turns (later than drawn), each within 0.2 m and the
    set within 0.15 m on average, from the start facing along the path. The issue's
    per-path bar (<= 0.15 m) holds on the means over five starts
    (``benchmarks/bench_follow_spread.py --only-tight``); a single run may miss it by a
    centimetre, since the runs are chaotic."""
    dists = []
    for name in ("chicane", "hairpins", "loops", "slalom", "switchbacks"):
        path = load_path(REPO / "paths" / "tight" / f"{name}.json")
        r = follow_report(PathFollower(lafan, path, FollowSettings()).run())
        assert r["completed"], name
        assert r["completion_time_s"] > r["path_duration_s"] + 1.0, name  # slowed down for the turns
        assert r["mean_distance_m"] <= 0.2, (name, r["mean_distance_m"])
        dists.append(r["mean_distance_m"])
    assert np.mean(dists) <= 0.15, dists


def test_ablations_that_must_hurt(lafan):
    """Paths drawn too fast need the speed limit (the circle reaches 9 m/s). (The corner
    modification no longer matters on the zigzag in a single run since the desired
    position keeps pace and the facings steer back to the path: the benchmark measures
    each ablation, ``benchmarks/bench_follow.py``; its geometry is tested in test_path.)"""
    def dist(name, **rev):
        rec = PathFollower(lafan, shipped(name), FollowSettings(revision=RevisionSettings(**rev))).run()
        return follow_report(rec)

    full, nolimit = dist("circle"), dist("circle", speed_limit=False, turn_limit=False)
    assert not nolimit["completed"] or nolimit["mean_distance_m"] > 2 * full["mean_distance_m"]


def test_desired_position_window_versus_nearest_point_on_a_crossing_path(lafan):
    """The nearest-point ablation jumps to the end of a figure-eight that ends where it
    starts; the windowed desired position follows it all the way."""
    near = PathFollower(lafan, shipped("figure_eight"), FollowSettings(revision=RevisionSettings(desired="nearest")))
    rec = near.run()
    assert not rec.completed and rec.coverage < 0.5


def test_global_mode_walks_to_the_path_first_and_bmm_works(lafan):
    path = shipped("s_curve")
    f = PathFollower(lafan, path, FollowSettings(mode="global", k=1, levels=1), position=(4.0, 0.0, -3.0))
    rec = f.run()
    assert rec.completed and follow_report(rec)["knn_calls_per_match"] == 1.0
    np.testing.assert_allclose(rec.root[0], [4.0, 0.0, -3.0], atol=1e-9)
    # it passes the drawn path's start, where it was drawn (not moved)
    assert np.min(np.linalg.norm(rec.root - path.input_points[0], axis=1)) < 0.3
    assert rec.mean_distance < 0.15
    # approach at the path's initial speed: the path reaches its own start after d / v
    d = np.linalg.norm(path.input_points[0] - [4.0, 0.0, -3.0])
    assert f.path.duration == pytest.approx(path.duration + d / max(path.initial_speed(), 0.5), abs=0.05)


def test_several_characters_at_once(lafan):
    fs = [PathFollower(lafan, shipped(n), FollowSettings(), position=(5.0 * i, 0.0, 0.0), name=n)
          for i, n in enumerate(("s_curve", "zigzag"))]
    recs = run_followers(fs)
    assert all(r.completed and r.mean_distance < 0.15 for r in recs)
    assert recs[1].root[0][0] == pytest.approx(5.0)
    # each stopped when done: the two runs have their own lengths
    assert recs[0].motion.num_frames != recs[1].motion.num_frames


def test_dance_database_follows_a_path_dancing(data_dir):
    """Section VIII-D: the same path with a dance-only database (LAFAN1's dance takes)."""
    from motionmatch.datasets import load_folder

    clips = load_folder(data_dir / "lafan1-60fps", pattern="dance*.bvh")
    if not clips:
        pytest.skip("no LAFAN1 dance clips")
    db = MotionDatabase.build(clips, mirror_copies=True)
    assert set(db.tags) <= {"dance", "mirrored"}
    f = PathFollower(db, shipped("figure_eight"), FollowSettings(tags="*"))
    assert f.v_max < 1.2  # dancers travel slowly: the path is followed at their pace
    rec = f.run()
    assert rec.completed and rec.mean_distance < 0.15


def test_default_v_max_comes_from_the_data(lafan):
    v = default_v_max(lafan)
    assert 2.0 < v < 4.0
    assert default_v_max(lafan, percentile=50) < v


# ------------------------------------------------------------------------- synthetic
def test_follows_a_curve_on_a_small_database(small_db):
    t = np.linspace(0, 8, 300)
    path = TimedPath.from_samples(t, np.stack([1.2 * np.sin(t / 2.5), 1.1 * t], axis=1))
    f = PathFollower(small_db, path, FollowSettings())
    rec = f.run()
    r = follow_report(rec)
    assert rec.completed and r["mean_distance_m"] < 0.15
    for key in ("mean_distance_m", "completed", "knn_calls_per_match", "ms_per_match"):
        assert key in r
    assert rec.desired.shape == (rec.motion.num_frames, 3, 3)
    assert np.all(np.diff(rec.desired_index) >= 0)  # alpha = 0: never back


def test_query_is_revised_once_per_match_unless_asked_every_frame(small_db):
    """The paper's Algorithm 2: the query (desired position, future points) changes when
    a match is due, and holds in between; ``revise_every_frame`` revises it on every frame."""
    t = np.linspace(0, 4, 120)
    path = TimedPath.from_samples(t, np.stack([0.8 * np.sin(t / 1.5), 1.2 * t], axis=1))
    changes = {}
    for every in (False, True):
        rec = PathFollower(small_db, path, FollowSettings(revise_every_frame=every)).run()
        moved = np.any(np.abs(np.diff(rec.desired, axis=0)) > 1e-12, axis=(1, 2))
        changes[every] = (int(moved.sum()), int(rec.searched[1:].sum()), len(moved))
        if not every:
            assert np.all(rec.searched[1:][moved])  # a new query only where a match ran
    held, searches, frames = changes[False]
    assert held <= searches and searches < frames / 5  # about every 10th frame at 60 Hz
    assert changes[True][0] > 0.8 * changes[True][2]


def test_joystick_facing_turns_the_query(small_db):
    t = np.linspace(0, 4, 100)
    path = TimedPath.from_samples(t, np.stack([np.zeros_like(t), t], axis=1))
    f = PathFollower(small_db, path, FollowSettings(revision=RevisionSettings(facing="joystick", joystick_deg=90)))
    traj, intent, _, _ = f.desired()
    np.testing.assert_allclose(traj.directions, np.tile([-1.0, 0.0, 0.0], (3, 1)), atol=1e-9)
    np.testing.assert_allclose(intent.facing, [-1.0, 0.0, 0.0], atol=1e-9)


def test_net_facing_runs_with_any_network(small_db):
    t = np.linspace(0, 4, 100)
    path = TimedPath.from_samples(t, np.stack([np.zeros_like(t), t], axis=1))
    net = random_direction_net(seed=3)
    with pytest.raises(ValueError, match="DirectionNet"):
        PathFollower(small_db, path, FollowSettings(revision=RevisionSettings(facing="net")))
    f = PathFollower(small_db, path, FollowSettings(revision=RevisionSettings(facing="net")), facing_net=net)
    rec = f.run()
    assert np.isfinite(rec.root).all() and rec.motion.num_frames > 60


@pytest.mark.parametrize("feedback", ["character", "plan"])
def test_net_facing_reads_its_past_facings(small_db, tmp_path, capsys, feedback):
    """The fed-back network, either past: runs, and through the CLI (--net-feedback)."""
    t = np.linspace(0, 4, 100)
    path = TimedPath.from_samples(t, np.stack([0.5 * np.sin(t), t], axis=1))
    net = random_direction_net(seed=3)
    f = PathFollower(small_db, path, FollowSettings(revision=RevisionSettings(facing="net"), net_feedback=feedback),
                     facing_net=net)
    rec = f.run()
    assert np.isfinite(rec.root).all() and rec.motion.num_frames > 60
    db, pf, nf = tmp_path / "db.npz", tmp_path / "p.json", tmp_path / "net.npz"
    small_db.save(db)
    net.save(nf)
    pf.write_text(json.dumps({"points": np.stack([t, 0.5 * np.sin(t), t], 1).tolist()}))
    rep = tmp_path / "r.json"
    assert cli(["follow", "--db", str(db), "--path", str(pf), "-o", str(tmp_path / "o.bvh"), "--facing", "net",
                "--net", str(nf), "--net-feedback", feedback, "--report", str(rep), "--k", "2", "--levels", "2"]) == 0
    assert json.loads(rep.read_text())["settings"]["net_feedback"] == feedback


# ------------------------------------------------------------------------ DirectionNet
def straight_tracks(n=3):
    out = []
    for i in range(n):
        t = np.arange(600) / 60.0
        yaw = np.full(600, 0.4 * i)
        out.append((np.stack([np.sin(yaw) * t * (1 + i), np.cos(yaw) * t * (1 + i)], axis=1), yaw, 60.0))
    return out


def test_direction_windows_are_in_the_facing_frame():
    x, y = direction_windows(straight_tracks(), DirectionNetConfig(), stride=30)
    assert x.shape[1:] == (120, 6) and y.shape[1:] == (120, 2)
    np.testing.assert_allclose(y, np.broadcast_to([0.0, 1.0], y.shape), atol=1e-6)  # facing forward throughout
    assert np.all(x[..., 3] > -1e-6) and np.median(x[:, 60, 3]) > 0.9  # moving forward (+Z) in that frame
    assert np.all(np.abs(x[..., [0, 2, 4]]) < 1e-5)  # and never sideways


def test_direction_net_numpy_forward_matches_torch():
    """The first format (no facing fed back): numpy's forward is PyTorch's GRU and linear layer."""
    torch = pytest.importorskip("torch")
    net = random_direction_net(DirectionNetConfig(feedback=False), seed=1)
    gru = torch.nn.GRU(6, 30, batch_first=True)
    lin = torch.nn.Linear(30, 2)
    w = net.w
    with torch.no_grad():
        for name, key in (("weight_ih_l0", "w_ih"), ("weight_hh_l0", "w_hh"), ("bias_ih_l0", "b_ih"),
                          ("bias_hh_l0", "b_hh")):
            getattr(gru, name).copy_(torch.tensor(w[key]))
        lin.weight.copy_(torch.tensor(w["w_out"]))
        lin.bias.copy_(torch.tensor(w["b_out"]))
        x = np.random.default_rng(0).normal(size=(3, 50, 6))
        want = lin(gru(torch.tensor(x, dtype=torch.float64).float())[0]).double().numpy()
    np.testing.assert_allclose(net.forward(x), want, atol=1e-5)


def test_direction_net_trains_saves_and_loads(tmp_path):
    pytest.importorskip("torch")
    cfg = DirectionNetConfig(hidden=8, feedback=False)  # (the fed-back form: tests/test_direction_feedback.py)
    net = train_direction_net(straight_tracks(), config=cfg, epochs=3, stride=10, seed=0)
    assert len(net.history) == 3 and net.history[-1] < net.history[0]
    net.save(tmp_path / "net.npz")
    again = DirectionNet.load(tmp_path / "net.npz")
    x = np.random.default_rng(0).normal(size=(2, 20, 6))
    np.testing.assert_array_equal(net.forward(x), again.forward(x))
    assert again.config.hidden == 8 and again.history == net.history
    # deterministic for a seed: the same weights again
    twin = train_direction_net(straight_tracks(), config=cfg, epochs=3, stride=10, seed=0)
    for k in DirectionNet.KEYS:
        np.testing.assert_array_equal(twin.w[k], net.w[k])


def test_training_without_torch_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingTorchError, match="pip install torch"):
        train_direction_net(straight_tracks(), epochs=1)


# -------------------------------------------------------------------------------- CLI
def cli(argv):
    from motionmatch.cli.main import main

    return main(argv)


def test_cli_follow_writes_animation_and_report(small_db, tmp_path, capsys):
    db = tmp_path / "db.npz"
    small_db.save(db)
    path = tmp_path / "p.json"
    t = np.linspace(0, 5, 120)
    path.write_text(json.dumps({"points": np.stack([t, 0.3 * np.sin(t), 1.0 * t], 1).tolist()}))
    out, rep = tmp_path / "o.bvh", tmp_path / "r.json"
    assert cli(["follow", "--db", str(db), "--path", str(path), "-o", str(out), "--report", str(rep),
                "--k", "2", "--levels", "2", "--mode", "global", "--start", "1,-1"]) == 0
    r = json.loads(rep.read_text())
    for key in ("mean_distance_m", "completed", "knn_calls_per_match", "ms_per_match"):
        assert key in r
    assert r["knn_calls_per_match"] == 3.0 and r["settings"]["mode"] == "global"
    from motionmatch.anim import load_bvh

    assert load_bvh(out).num_frames == r["frames"]
    assert "mean distance" in capsys.readouterr().out
    # errors are reported, not raised
    assert cli(["follow", "--db", str(db), "--path", str(tmp_path / "none.json"), "-o", str(out)]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_cli_net_without_torch_is_a_clear_error(small_db, tmp_path, capsys, monkeypatch):
    db = tmp_path / "db.npz"
    small_db.save(db)
    monkeypatch.setitem(sys.modules, "torch", None)
    assert cli(["train-direction-net", "--db", str(db), "-o", str(tmp_path / "n.npz")]) == 1
    assert "PyTorch" in capsys.readouterr().err


# ------------------------------------------------------------------------- path files
def test_shipped_paths_are_what_the_script_makes():
    spec = importlib.util.spec_from_file_location("make_paths", REPO / "paths" / "make_paths.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    made = mod.make_all()
    assert set(made) == set(PATHS)
    for name, obj in made.items():
        on_disk = json.loads((REPO / "paths" / f"{name}.json").read_text())
        np.testing.assert_allclose(np.asarray(on_disk["points"]), np.asarray(obj["points"]), atol=1e-9)
        p = shipped(name)
        assert p.duration > 5 and p.length > 10
    circle = shipped("circle")
    v = circle.speeds[: circle.last]
    assert v[:30].mean() < 0.5 and v[-60:].mean() > 8.0  # 0 to 9 m/s
    eight = shipped("figure_eight")
    # crosses itself: two distant parts of the path come within a few centimetres
    p = eight.points[::10]
    d = np.linalg.norm(p[:, None] - p[None], axis=-1)
    far = np.abs(np.arange(len(p))[:, None] - np.arange(len(p))[None]) > len(p) // 4
    assert d[far].min() < 0.1


def test_a_character_waits_where_the_drawing_paused(lafan):
    """A path drawn with a 2 s pause: the character stops there, then goes on (Eq. 1 alone
    would hold the desired position at the pause for ever)."""
    t = np.array([0.0, 3.0, 5.0, 8.0])
    path = TimedPath.from_samples(t, np.array([[0.0, 0.0], [0.0, 3.0], [0.0, 3.0], [0.0, 6.0]]))
    rec = PathFollower(lafan, path, FollowSettings()).run()
    assert rec.completed and rec.mean_distance < 0.15
    speed = np.linalg.norm(rec.root[6:] - rec.root[:-6], axis=1) * 10  # m/s over 0.1 s
    still = np.flatnonzero(speed < 0.2)
    mid = still[(rec.root[still, 2] > 2.5) & (rec.root[still, 2] < 3.5)]
    assert len(mid) / 60 >= 0.5  # stood at the pause point for a while


# --------------------------------------------------------------------------- paths through obstacles
def slalom_scene(gap: float, moving: bool):
    """A gentle S path (16 m at 1.3 m/s) with an obstacle every 2 m, on alternating sides,
    ``gap`` metres from the path (every third a 0.6 m box, the others 0.25 m disks; with
    ``moving`` the disks sway across, their edge between ``gap`` and ``gap + 0.4`` m from the
    path, 2 s each way). Returns ``(TimedPath, Scene)``."""
    from motionmatch.environment.obstacles import box, disk
    from motionmatch.environment.scene import Scene

    z = np.linspace(0.0, 16.0, 400)
    x = np.sin(z / 2.5)
    s = np.r_[0.0, np.cumsum(np.hypot(np.diff(x), np.diff(z)))]
    path = TimedPath.from_samples(s / 1.3, np.stack([x, z], axis=1), rate=150.0)
    tx, tz = np.gradient(x), np.gradient(z)
    obstacles = []
    for i, zc in enumerate(np.arange(2.0, 15.0, 2.0)):
        j = int(np.argmin(abs(z - zc)))
        n = np.array([tz[j], -tx[j]]) / np.hypot(tx[j], tz[j])  # the path's normal
        side = 1.0 if i % 2 == 0 else -1.0
        if i % 3 == 2:
            c = np.array([x[j], z[j]]) + side * n * (gap + 0.3)
            obstacles.append(box(c[0], c[1], 0.6, 0.6, yaw=float(np.arctan2(tx[j], tz[j]))))
            continue
        c = np.array([x[j], z[j]]) + side * n * (gap + 0.25)
        kw = {}
        if moving:
            far = c + side * n * 0.4
            kw["path"] = tuple((t, *(c if k % 2 == 0 else far)) for k, t in enumerate(np.arange(0.0, 31.0, 2.0)))
        obstacles.append(disk(c[0], c[1], 0.25, **kw))
    return path, Scene(obstacles)


@pytest.mark.parametrize("moving", [False, True], ids=["static", "moving"])
def test_lhmm_with_the_penalised_search_walks_a_path_past_obstacles(lafan, moving):
    """LHMM(3, 3) planning ahead with the obstacle penalties collides at most a third as
    much as LHMM(3, 3) blind to them, staying within 0.1 m as close to the path on average."""
    from motionmatch.metrics.follow import follow_collisions
    from motionmatch.runtime.environment_matching import EnvironmentMatcher

    path, scene = slalom_scene(0.2, moving)
    runs = {}
    for avoid in (False, True):
        f = PathFollower(lafan, path, FollowSettings(mode="global"), scene=scene if avoid else None,
                         environment=EnvironmentMatcher(lafan) if avoid else None)
        rec = f.run()
        runs[avoid] = {**follow_report(rec), **follow_collisions(rec, scene)}
        assert rec.completed, runs[avoid]
    blind, avoid = runs[False], runs[True]
    assert blind["collision_fraction"] > 0.1, blind  # the scene is in the way
    assert avoid["collision_fraction"] <= blind["collision_fraction"] / 3, (blind, avoid)
    assert avoid["mean_distance_m"] <= blind["mean_distance_m"] + 0.1, (blind, avoid)
    assert avoid["knn_calls_per_match"] == blind["knn_calls_per_match"] == 13.0


def test_a_penalised_node_search_without_obstacles_near_is_the_plain_search(small_db):
    """With every obstacle far away, LHMM on the penalised node search makes exactly the
    blind follower's choices."""
    from motionmatch.environment.obstacles import disk
    from motionmatch.environment.scene import Scene

    t = np.linspace(0, 8, 300)
    path = TimedPath.from_samples(t, np.stack([1.2 * np.sin(t / 2.5), 1.1 * t], axis=1))
    far = Scene([disk(40.0, 40.0, 0.5)])
    a = PathFollower(small_db, path, FollowSettings()).run()
    f = PathFollower(small_db, path, FollowSettings(), scene=far)
    b = f.run()
    np.testing.assert_array_equal(a.frames, b.frames)
    assert f.node_search.plain_nodes > 0 and f.node_search.penalised_nodes == 0


def test_cli_follow_scene_scores_the_run_against_the_obstacles(small_db, tmp_path, capsys):
    db = tmp_path / "db.npz"
    small_db.save(db)
    path = tmp_path / "p.json"
    t = np.linspace(0, 6, 150)
    path.write_text(json.dumps({"points": np.stack([t, 0.0 * t, 1.1 * t], 1).tolist()}))
    scene = tmp_path / "scene.json"
    scene.write_text(json.dumps({"name": "posts", "duration": 8, "agents": [],
                                 "obstacles": [{"shape": "disk", "center": [0.35, 2.5], "radius": 0.2},
                                               {"shape": "box", "center": [-0.4, 4.5], "size": [0.5, 0.5],
                                                "velocity": [0.0, -0.1]}]}))
    reports = {}
    for flag in ([], ["--no-avoid"]):
        out, rep = tmp_path / f"o{len(flag)}.bvh", tmp_path / f"r{len(flag)}.json"
        assert cli(["follow", "--db", str(db), "--path", str(path), "-o", str(out), "--report", str(rep),
                    "--mode", "global", "--scene", str(scene), *flag]) == 0
        reports[bool(flag)] = json.loads(rep.read_text())
    for r in reports.values():
        for key in ("collision_fraction", "collision_time_s", "collisions", "min_clearance_m"):
            assert key in r
    assert reports[False]["settings"]["avoid"] and not reports[True]["settings"]["avoid"]
    assert "obstacle(s): collision fraction" in capsys.readouterr().out
    assert cli(["follow", "--db", str(db), "--path", str(path), "-o", str(tmp_path / "x.bvh"), "--no-avoid"]) == 1
    assert "--no-avoid needs --scene" in capsys.readouterr().err


def test_a_scenario_agent_follows_a_timed_path_as_motionmatch_follow_does(lafan):
    """A scenario agent's ``timed_path`` is the same path follower, in the scenario's world
    among its obstacles: the same root trajectory as ``motionmatch follow --scene``, and
    the scenario report scores its path error and collisions."""
    from motionmatch.environment.scenario import parse_scenario
    from motionmatch.metrics.scenario import scenario_report
    from motionmatch.runtime.scenarios import run_scenario

    path, scene = slalom_scene(0.2, moving=False)
    events = [[float(t), float(p[0]), float(p[2])] for t, p in zip(path.input_times, path.input_points)]
    sc = parse_scenario({"name": "timed", "duration": 12.0,
                         "obstacles": [o.to_dict() for o in scene.obstacles],
                         "agents": [{"name": "follower", "start": [0.0, 0.0], "timed_path": {"points": events}}]})
    world, rec = run_scenario(lafan, sc, record_poses=True)
    f = PathFollower(lafan, path, FollowSettings(mode="global", time_limit=None), scene=scene)
    for _ in range(rec.frames.shape[1]):
        f.step(0.0 if f.world.frame == 0 else 1 / 60)
    follow_roots = f._rows.column("translations")[:, 0][:, [0, 2]]
    n = min(len(follow_roots), rec.frames.shape[1])
    np.testing.assert_allclose(rec.root_positions[0, :n][:, [0, 2]], follow_roots[:n], atol=1e-9)
    rep = scenario_report(world, rec, sc)["agents"][0]
    assert rep["error_m"] < 0.3 and rep["collision_fraction"] < 0.1, rep


def test_turn_and_brake_limits_of_data_that_only_walks_straight_fall_back_to_the_defaults():
    """A database whose moving frames go straight at constant speed says nothing about how
    sharply people turn or brake: the limits are the defaults' fallbacks, never 0 (a 0 limit
    was refused by RevisionSettings, so such a database could not follow any path)."""
    from motionmatch.runtime.follow import default_brake_accel, default_turn_accel

    db = MotionDatabase.build([walker(n=240), walker(n=240, speed=0.0, name="idle")], mirror_copies=False)
    assert default_turn_accel(db) == 3.0 and default_brake_accel(db) == 2.0
    turning = MotionDatabase.build([walker(n=240, speed=1.2, turn_rate=1.5)], mirror_copies=False)
    assert 1.0 < default_turn_accel(turning) < 3.0  # 1.2 m/s * 1.5 rad/s = 1.8 m/s^2
