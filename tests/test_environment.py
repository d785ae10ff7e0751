"""Environment-aware matching on synthetic data: geometry, barrier, obstacles, scenes,
scenario files, schema/features and the penalised search (checked against brute force)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from motionmatch.database import FeatureTerm, MotionDatabase, default_schema
from motionmatch.database.features import body_ellipses
from motionmatch.database.schema import FeatureSchema, environment_schema, schema_by_name
from motionmatch.environment import Obstacle, ScenarioError, Scene, parse_scenario
from motionmatch.environment.collision import collision_summary, intersection_runs
from motionmatch.geometry.shapes import (
    ROW,
    T_BOX,
    T_DISK,
    T_ELLIPSE,
    barrier,
    ellipse_obstacle_distances,
    make_row,
    point_lower_bound,
    point_upper_bound,
)
from motionmatch.search import BruteForceSearch
from motionmatch.search.penalized import PenalizedSearch, PenaltyParams, SearchOptions, prepare_obstacles
from synthetic import walker


# ----------------------------------------------------------------------------- geometry
def _outline(kind, x, z, ux, uz, p, q, n=720):
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    if kind == T_BOX:
        s = np.linspace(-1, 1, n // 4)
        o = np.ones_like(s)
        loc = np.concatenate([np.stack([p * o, q * s], 1), np.stack([-p * o, q * s], 1),
                              np.stack([p * s, q * o], 1), np.stack([p * s, -q * o], 1)])
    else:
        loc = np.stack([p * np.cos(t), q * np.sin(t)], 1)
    return np.stack([x + loc[:, 0] * ux - loc[:, 1] * uz, z + loc[:, 0] * uz + loc[:, 1] * ux], 1)


def _inside(kind, x, z, ux, uz, p, q, pts):
    dx, dz = pts[:, 0] - x, pts[:, 1] - z
    a, b = dx * ux + dz * uz, -dx * uz + dz * ux
    if kind == T_BOX:
        return (np.abs(a) <= p) & (np.abs(b) <= q)
    return (a / p) ** 2 + (b / q) ** 2 <= 1


def test_signed_distance_matches_sampled_geometry():
    """Separated pairs: the distance equals the sampled boundary distance (to the sampling
    error); overlapping pairs: negative."""
    rng = np.random.default_rng(0)
    for _ in range(80):
        kind = int(rng.integers(0, 3))
        ang, ea = rng.uniform(0, 2 * np.pi, 2)
        p, q = rng.uniform(0.05, 0.7, 2)
        x, z = rng.uniform(-1.4, 1.4, 2)
        row = make_row(kind, x, z, math.cos(ang), math.sin(ang), p, q)
        if kind == T_DISK:
            q = p
        a, b = rng.uniform(0.05, 0.5, 2)
        e = np.array([[0.0, 0.0, math.cos(ea), math.sin(ea), a, b]])
        sd = ellipse_obstacle_distances(e, row[None])[0, 0]
        body = _outline(T_ELLIPSE, 0, 0, math.cos(ea), math.sin(ea), a, b)
        obst = _outline(kind, x, z, math.cos(ang), math.sin(ang), p, q)
        overlap = (_inside(kind, x, z, math.cos(ang), math.sin(ang), p, q, body).any()
                   or _inside(T_ELLIPSE, 0, 0, math.cos(ea), math.sin(ea), a, b, obst).any())
        if overlap:
            assert sd < 1e-3
        else:
            true = np.sqrt(((body[:, None] - obst[None]) ** 2).sum(-1)).min()
            assert sd == pytest.approx(true, abs=2e-3)
            assert sd <= true + 1e-9 + 2e-3  # a lower bound, up to sampling


def test_point_bounds_bracket_distances():
    rng = np.random.default_rng(1)
    for _ in range(50):
        kind = int(rng.integers(0, 3))
        ang = rng.uniform(0, 2 * np.pi)
        row = make_row(kind, *rng.uniform(-1, 1, 2), math.cos(ang), math.sin(ang), *rng.uniform(0.1, 0.5, 2))
        px, pz = rng.uniform(-2, 2, 2)
        tiny = np.array([[px, pz, 1.0, 0.0, 1e-6, 1e-6]])
        sd = ellipse_obstacle_distances(tiny, row[None])[0, 0]
        assert point_lower_bound(px, pz, row) <= sd + 1e-5
        assert point_upper_bound(px, pz, row) >= sd - 1e-5


def test_barrier_shape():
    dhat, k = 0.4, 4.0
    assert barrier(0.4, dhat, k) == 0.0 and barrier(1.0, dhat, k) == 0.0
    d = np.linspace(-0.3, 0.45, 400)
    b = np.array([barrier(x, dhat, k) for x in d])
    assert np.all(np.isfinite(b))
    assert np.all(np.diff(b) <= 1e-12)  # decreasing with distance
    assert b[0] > b[np.searchsorted(d, 0.0)] > 1.0  # deeper penetration costs more
    lim = 0.01 * dhat  # continuous where it turns linear
    assert barrier(lim - 1e-9, dhat, k) == pytest.approx(barrier(lim + 1e-9, dhat, k), rel=1e-5)
    assert barrier(0.39, dhat, k) < 1e-6  # near zero around the threshold


# ----------------------------------------------------------------------------- obstacles, scenes
def test_obstacle_rows_and_motion():
    o = Obstacle.from_dict({"shape": "box", "center": [1, 2], "size": [2.0, 0.5], "yaw_deg": 90, "height": [0, 1],
                            "velocity": [1.0, 0.0]})
    assert o.moving and np.allclose(o.position(2.0), [3, 2])
    assert np.allclose(o.predicted(1.0, 0.5), [2.5, 2])
    r = o.row()
    assert r.shape == (ROW,) and r[0] == T_BOX and np.allclose(r[3:5], [1, 0], atol=1e-12)  # first axis along +X
    assert point_lower_bound(1.0 + 1.0 + 0.3, 2.0, r) == pytest.approx(0.3)
    p = Obstacle.from_dict({"shape": "disk", "center": [0, 0], "radius": 0.5, "path": [[0, 0, 0], [2, 0, 4]]})
    assert np.allclose(p.position(1.0), [0, 2]) and np.allclose(p.velocity_at(1.0), [0, 2])
    assert np.allclose(p.position(5.0), [0, 4])  # holds the last waypoint
    assert Obstacle.from_dict(o.to_dict()).to_dict() == o.to_dict()
    with pytest.raises(ValueError, match="radius"):
        Obstacle.from_dict({"shape": "disk", "center": [0, 0]})
    with pytest.raises(ValueError, match="unknown field"):
        Obstacle.from_dict({"shape": "disk", "center": [0, 0], "radius": 1, "colour": "red"})


def test_scene_queries_match_brute_force():
    rng = np.random.default_rng(2)
    obs = [Obstacle("disk", tuple(rng.uniform(-20, 20, 2)), radius=float(rng.uniform(0.1, 0.6))) for _ in range(300)]
    obs += [Obstacle("box", tuple(rng.uniform(-20, 20, 2)), size=(6.0, 0.3), yaw=float(rng.uniform(0, 3)))
            for _ in range(30)]
    obs.append(Obstacle("disk", (0.0, 5.0), radius=0.3, velocity=(0.0, -1.0)))
    scene = Scene(obs)
    for _ in range(20):
        pts = rng.uniform(-15, 15, (4, 2))
        got = set(scene.static_near(pts, 1.5).tolist())
        want = {m for m, r in enumerate(scene.static_rows) if min(point_lower_bound(p[0], p[1], r) for p in pts) <= 1.5}
        assert got == want
    rows, slots = scene.query(1.0, np.array([[0.0, 0.0]]), 1.0, (1 / 3, 2 / 3, 1.0))
    moving = rows[slots >= 0]
    assert len(moving) == 3 and np.allclose(moving[:, 2], [5 - 1 - 1 / 3, 5 - 1 - 2 / 3, 5 - 2])  # time-aligned
    # and the moving disk where it is now (the proxy aligned with the rendered object), for every slot
    assert np.isclose(rows[slots < 0, 1:3], [0.0, 4.0]).all(axis=1).sum() == 1


def test_prepare_obstacles_frame_selection_and_order():
    rows = np.stack([make_row(T_BOX, 3.0, 0.0, 1, 0, 0.5, 0.5), make_row(T_DISK, 1.0, 0.0, p=0.2),
                     make_row(T_DISK, 0.0, 30.0, p=0.2), make_row(T_DISK, 1.5, 0.5, p=0.1)])
    slot_of = np.array([-1, -1, -1, 2])
    # character at (1, 0) facing +X (yaw 90 degrees): world +X is its forward (+Z local)
    pts = np.array([[0.0, 0.0], [0.0, 1.0], [0.0, 2.0], [0.0, 3.0]])
    obs, cnt, nearest = prepare_obstacles(rows, slot_of, (1.0, 0.0), math.pi / 2, pts, 1.0, 3)
    assert cnt.tolist() == [2, 2, 3]  # the far disk is dropped; the last one only in slot 2
    assert nearest == pytest.approx(-0.2)
    assert obs[0, 0, 0] == T_DISK and np.allclose(obs[0, 0, 1:3], [0, 0], atol=1e-12)  # at the character
    assert obs[0, 1, 0] == T_BOX and np.allclose(obs[0, 1, 1:3], [0, 2], atol=1e-12)  # 2 m ahead
    assert np.allclose(np.abs(obs[0, 1, 3:5]), [0, 1], atol=1e-12)  # its axis (world X) is local Z
    assert obs[2, 0, 0] == T_DISK and obs[2, 1, 0] == T_DISK and obs[2, 2, 0] == T_BOX  # disks first
    assert np.allclose(obs[2, 0, 1:3], [-0.5, 0.5], atol=1e-12)  # nearest slot point first; right = local -X
    w = make_row(T_DISK, 0.0, 0.0, p=1.0)
    _, cnt2, _ = prepare_obstacles(w[None], np.array([-1]), (0.0, 0.0), 0.0, pts + 5.0, 1.0, 3)
    assert cnt2.sum() == 0


# ----------------------------------------------------------------------------- scenario files
def test_scenario_parsing_and_errors():
    d = {"name": "t", "duration": 5, "obstacles": [{"shape": "disk", "center": [0, 1], "radius": 0.2}],
         "agents": [{"name": "a", "start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]}},
                    {"name": "b", "start": [1, 0], "path": [[1, 0], [1, 5]], "speed": 1.1}],
         "groups": [{"count": 4, "area": [[-2, -2], [2, 0]], "goal_offset": [0, 6], "via": [[-1, 1], [1, 1]],
                     "seed": 3}]}
    sc = parse_scenario(d)
    assert [a.input_kind for a in sc.agents[:2]] == ["script", "path"] and len(sc.agents) == 6
    assert sc.frames == 300
    g = sc.agents[2:]
    for a in g:
        assert np.allclose(np.array(a.goal) - np.array(a.start), [0, 6])
        assert a.via.tolist() == [[-1, 1], [1, 1]]  # waypoints in order
    again = parse_scenario(d)
    assert [a.start for a in again.agents] == [a.start for a in sc.agents]  # deterministic
    assert parse_scenario(json.loads(json.dumps(sc.to_dict()))).to_dict() == sc.to_dict()
    bad = [({"duration": 5}, "at least one agent"), ({"agents": [{"start": [0, 0]}]}, "duration"),
           ({"duration": 5, "agents": [{"start": [0, 0], "goal": [1, 1], "path": [[0, 0], [1, 1]]}]}, "one input"),
           ({"duration": 5, "agents": [{"start": [0, 0]}], "obstacles": [{"shape": "cone"}]}, r"obstacles\[0\]"),
           ({"duration": 5, "agents": [{"start": [0]}]}, r"agents\[0\].start"),
           ({"duration": 5, "agents": [{"start": [0, 0]}], "wind": 1}, "unknown field")]
    for data, msg in bad:
        with pytest.raises(ScenarioError, match=msg):
            parse_scenario(data)


def test_collision_runs_and_summary():
    d = np.array([[1, 1], [-1, 1], [-1, 1], [1, -1], [-1, -1], [1, 1]], dtype=float)
    runs = intersection_runs(d < 0)
    assert sorted(runs) == [(0, 1, 2), (0, 4, 1), (1, 3, 2)]
    s = collision_summary(d, fps=10)
    assert s["collisions"] == 3 and s["collision_time_s"] == pytest.approx((0.2 + 0.1 + 0.2) / 3)
    assert s["collision_fraction"] == pytest.approx(4 / 6)


# ----------------------------------------------------------------------------- schema and features
def test_environment_schema_terms():
    s = environment_schema(heights=True)
    t = s.term("body_ellipse")
    assert t.is_environment and not t.is_trajectory and not t.is_bone and t.weight == 0.0
    assert s.dims == 27 + 21 and s.query_columns().tolist() == list(range(27))
    assert FeatureTerm("e", "ellipse", offsets=(0.5,), weight=3.0).weight == 0.0  # never in distances
    assert FeatureSchema.from_json(s.to_json()) == s
    assert schema_by_name("environment").dims == 27 + 15
    assert schema_by_name("environment-heights-3d").dims == 33 + 21
    assert default_schema().dims == 27 and default_schema().to_json() == schema_by_name("classic").to_json()


def test_ellipse_features_of_a_walker():
    """A straight walker (legs straight, facing +Z, 1 m/s): ellipses along the motion, at the
    future root positions, stored raw and excluded from the normalised features."""
    m = walker(n=240, speed=1.0)
    db = MotionDatabase.build([m], schema=environment_schema(heights=True))
    sl = db.schema.slice("body_ellipse")
    e = db.raw_features[:, sl].reshape(db.num_frames, 3, 7)
    assert np.all(db.features[:, sl] == 0.0)
    i = 10
    for k, off in enumerate((20, 40, 60)):
        # centre 1 m/s * t ahead, plus half the toes' reach (0.12 m ahead of the hips): the
        # ellipse spans the joints' extent, not a disc around the root
        assert e[i, k, 1] == pytest.approx(off / 60 + 0.06, abs=0.02)
        assert abs(e[i, k, 0]) < 0.02
        assert e[i, k, 3] == pytest.approx(0.06, abs=0.005) and abs(e[i, k, 2]) < 1e-6  # along +Z (the motion)
    # a straight-legged biped 0.2 m wide at the hips, toes 0.12 m ahead: across = 0.1, along ~0.06+
    assert e[i, 0, 4] == pytest.approx(0.1, abs=0.01)
    assert e[i, 0, 5] == pytest.approx(0.0, abs=0.01) and e[i, 0, 6] == pytest.approx(1.6, abs=0.02)
    # the classic part is unchanged by the extra term
    db0 = MotionDatabase.build([m])
    assert np.allclose(db0.raw_features, db.raw_features[:, :27])


def test_body_ellipses_direction_of_motion():
    """Side-stepping (moving along +X while facing +Z): the first axis follows the motion."""
    m = walker(n=120, speed=1.0, heading=math.pi / 2)
    wp = m.world_positions.copy()
    facing = np.tile([0.0, 0.0, 1.0], (len(wp), 1))
    e = body_ellipses(np.concatenate([wp[:, :1] * [1, 0, 1], wp], axis=1), wp[:, 0] * [1, 0, 1], facing, 60.0)
    assert np.allclose(np.abs(e[5:-5, 2]), 1.0, atol=1e-6)
    still = body_ellipses(np.concatenate([wp[:1, :1] * [1, 0, 1], wp[:1]], axis=1).repeat(5, 0),
                          (wp[:1, 0] * [1, 0, 1]).repeat(5, 0), facing[:5], 60.0)
    assert np.allclose(still[:, 3], 1.0)  # standing: along the facing (+Z)


# ----------------------------------------------------------------------------- penalised search
def _random_problem(seed: int, n: int = 3000, d: int = 12, k: int = 3):
    rng = np.random.default_rng(seed)
    # smooth "clips" so that representatives and segments mean something
    steps = rng.normal(scale=0.15, size=(n, d))
    feats = np.cumsum(steps, axis=0)
    feats -= feats.mean(axis=0)
    feats = (feats / feats.std(axis=0)).astype(np.float32)
    valid = rng.uniform(size=n) > 0.05
    ell = np.zeros((n, k, 7))
    t = np.arange(n)
    for s in range(k):
        ell[:, s, 0] = 0.6 * np.sin(t / 40.0 + s) * (s + 1)
        ell[:, s, 1] = 0.5 * (s + 1) + 0.3 * np.cos(t / 25.0)
        ang = t / 60.0
        a = 0.2 + 0.1 * np.abs(np.sin(t / 30.0 + s))
        ell[:, s, 2], ell[:, s, 3] = np.sin(ang) * a, np.cos(ang) * a
        ell[:, s, 4] = 0.12 + 0.05 * np.abs(np.cos(t / 17.0))
        ell[:, s, 5], ell[:, s, 6] = 0.0, 1.7
    starts = np.array([0, n // 3, 2 * n // 3])
    stops = np.array([n // 3, 2 * n // 3, n])
    return feats, valid, ell, starts, stops, rng


def _obstacles(rng, m=6):
    kinds = [T_DISK, T_ELLIPSE, T_BOX]
    rows = []
    for i in range(m):
        ang = rng.uniform(0, 6.28)
        rows.append(make_row(kinds[i % 3], *rng.uniform(-1.2, 1.2, 2), math.cos(ang), math.sin(ang),
                             *rng.uniform(0.1, 0.35, 2)))
    rows = np.stack(rows)
    pts = np.array([[0, 0], [0, 0.5], [0, 1.0], [0, 1.5]], dtype=float)
    return prepare_obstacles(rows, -np.ones(m, dtype=np.int64), (0.0, 0.0), 0.0, pts, 3.0, 3)


def test_linear_search_is_exact_against_numpy_scores():
    feats, valid, ell, starts, stops, rng = _random_problem(0)
    ps = PenalizedSearch(feats, valid, ell, clip_starts=starts, clip_stops=stops)
    pen = PenaltyParams(threshold=0.5, env_weight=3.0)
    for _ in range(10):
        obs, cnt, _ = _obstacles(rng)
        q = feats[rng.integers(len(feats))] + rng.normal(scale=0.3, size=feats.shape[1])
        w = rng.uniform(0.5, 2.0, feats.shape[1])
        mask = rng.uniform(size=len(feats)) > 0.2
        res = ps.search(q, obs, cnt, mask=mask, weights=w, penalty=pen, options=SearchOptions(method="linear"))
        ok = np.flatnonzero(valid & mask)
        scores = ps.score(ok, q, obs, cnt, weights=w, penalty=pen)
        assert res.score == pytest.approx(scores.min(), rel=1e-9)
        assert scores[np.searchsorted(ok, res.index)] == pytest.approx(scores.min(), rel=1e-9)
        assert res.distance == pytest.approx(float(np.sum(w * (feats[res.index] - q) ** 2)), rel=1e-6)


def test_coherent_search_exhaustive_settings_equal_linear():
    """Every frame a representative, stride 1, no warm start: the coherent search visits
    every frame and must find the linear search's optimum."""
    feats, valid, ell, starts, stops, rng = _random_problem(1)
    ps = PenalizedSearch(feats, valid, ell, clip_starts=starts, clip_stops=stops)
    exhaustive = SearchOptions(adaptive=False, dissimilarity=False, warm_start=False, collision_fallback=False)
    for _ in range(8):
        obs, cnt, _ = _obstacles(rng)
        q = feats[rng.integers(len(feats))] + rng.normal(scale=0.3, size=feats.shape[1])
        lin = ps.search(q, obs, cnt, options=SearchOptions(method="linear"))
        coh = ps.search(q, obs, cnt, options=exhaustive)
        assert coh.score == pytest.approx(lin.score, rel=1e-9)


def test_plain_search_and_no_obstacles():
    feats, valid, ell, starts, stops, rng = _random_problem(2)
    ps = PenalizedSearch(feats, valid, ell, clip_starts=starts, clip_stops=stops)
    brute = BruteForceSearch(feats, valid)
    empty = np.zeros((3, 1, ROW))
    cnt = np.zeros(3, dtype=np.int64)
    for _ in range(5):
        q = rng.normal(size=feats.shape[1])
        _i, d = brute.nearest(q)
        for method in ("coherent-approx", "linear", "plain"):
            r = ps.search(q, empty, cnt, options=SearchOptions(method=method))
            assert r.score == pytest.approx(d[0], rel=1e-6) and r.penalty == pytest.approx(0.0, abs=1e-12)
        assert ps.search(q, empty, cnt).method == "plain"  # nothing near: the accelerated search
        w = np.full(feats.shape[1], 2.0)
        r = ps.search(q, empty, cnt, weights=w)
        assert r.score == pytest.approx(2 * d[0], rel=1e-5)


def test_coherent_search_quality_and_collision_guarantee():
    """The full method agrees with the linear search on most queries, is never much worse,
    and never returns a colliding frame when the linear search found a collision-free one
    with a lower score (the collision fallback)."""
    feats, valid, ell, starts, stops, rng = _random_problem(3, n=6000)
    ps = PenalizedSearch(feats, valid, ell, clip_starts=starts, clip_stops=stops)
    same, ratios = 0, []
    prev = None
    for _ in range(40):
        obs, cnt, _ = _obstacles(rng, m=8)
        i0 = int(rng.integers(len(feats) - 1))
        q = feats[i0 + 1].astype(np.float64) + rng.normal(scale=0.2, size=feats.shape[1])
        lin = ps.search(q, obs, cnt, init_index=i0, options=SearchOptions(method="linear"))
        coh = ps.search(q, obs, cnt, init_index=i0, previous=prev)
        prev = coh.index
        same += coh.index == lin.index
        ratios.append(coh.score / lin.score)
        assert coh.score >= lin.score - 1e-9
        if coh.collides:
            assert lin.collides or lin.score >= coh.score - 1e-9
    assert same >= 10 and np.median(ratios) < 1.5


def test_disk_body_and_heights():
    """Ablation knobs change what collides: a disk body is wider than a thin ellipse; an
    obstacle above the body's head (a ceiling) does not count when heights are used."""
    feats, valid, ell, _starts, _stops, _rng = _random_problem(4, n=400)
    ell[:, :, 0] = 0.0
    ell[:, :, 1] = 0.0
    ell[:, :, 2], ell[:, :, 3] = 0.0, 0.3  # along +Z, semi-axes 0.3 (along) and 0.1 (across)
    ell[:, :, 4] = 0.1
    ps = PenalizedSearch(feats, valid, ell)
    wall = make_row(T_BOX, 0.25, 0.0, 0, 1, 1.0, 0.1)  # a wall 0.15 m to the right of the body's side
    obs = np.tile(wall, (3, 1, 1))
    cnt = np.ones(3, dtype=np.int64)
    thin = ps.clearance(0, obs, cnt)
    disk = ps.clearance(0, obs, cnt, PenaltyParams(disk_body=True))
    assert thin == pytest.approx(np.full(3, 0.05), abs=1e-4) and np.all(disk < 0)
    ceiling = make_row(T_DISK, 0.0, 0.0, p=2.0, ymin=1.9, ymax=3.0)
    obs2 = np.tile(ceiling, (3, 1, 1))
    assert np.all(np.isinf(ps.clearance(0, obs2, cnt)))  # 1.7 + 0.12 < 1.9: no contact
    assert np.all(ps.clearance(0, obs2, cnt, PenaltyParams(use_heights=False)) < 0)


def test_the_approximate_penalised_method_says_so_and_its_former_name_still_reads():
    from motionmatch.search.penalized import METHODS

    assert "coherent-approx" in METHODS and "coherent" not in METHODS
    assert SearchOptions(method="coherent").method == "coherent-approx"  # scenario files of before
    assert SearchOptions().method == "coherent-approx"


def test_evasion_and_anticipation_formulas():
    """Evasion (Eq. 5): the direction weight's factor is ``max(E, 1 + log10(c / t))``,
    clamped to 1, ``c`` the clearance (root distance minus the body radius); Anticipation
    (Eq. 6): ``W_env = W_env0 * max(A v, 1)``. Known answers."""
    from motionmatch.runtime.environment_matching import (
        Controls,
        EnvironmentSettings,
        anticipation_weight,
        evasion_factor,
    )

    st = EnvironmentSettings()
    t, r = st.penalty.threshold, st.body_radius
    c = Controls(evasion=0.1, anticipation=1.0)
    assert evasion_factor(c, st, math.inf) == 1.0
    assert evasion_factor(c, st, r + 2 * t) == 1.0  # beyond the threshold: no effect
    assert evasion_factor(c, st, r + t) == pytest.approx(1.0)
    assert evasion_factor(c, st, r + t / math.sqrt(10)) == pytest.approx(0.5)
    assert evasion_factor(c, st, r + t / 10) == pytest.approx(0.1)  # 1 + log10(0.1) = 0 < E
    assert evasion_factor(c, st, r) == pytest.approx(0.1) and evasion_factor(c, st, 0.0) == pytest.approx(0.1)
    assert evasion_factor(c.with_(evasion=1.0), st, r) == 1.0  # E = 1: off
    w0 = st.penalty.env_weight
    assert anticipation_weight(c, st, 0.0) == pytest.approx(w0)  # standing: the base weight
    assert anticipation_weight(c, st, 0.85) == pytest.approx(w0)  # walking: still the base weight
    assert anticipation_weight(c, st, 1.3) == pytest.approx(1.3 * w0)
    assert anticipation_weight(c.with_(anticipation=4.0), st, 3.0) == pytest.approx(12.0 * w0)
    assert anticipation_weight(c.with_(anticipation=0.0), st, 3.0) == pytest.approx(w0)
