"""The fast paths of the penalised search and of the environment chooser: block bounds,
the fused search kernel with its buffers, and the compiled glue, each against a plain
reference (known answers)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from motionmatch.database import MotionDatabase
from motionmatch.database.schema import environment_schema
from motionmatch.environment import Scene, box, disk, ellipse
from motionmatch.geometry.shapes import ROW, T_BOX, T_DISK, T_ELLIPSE, make_row
from motionmatch.runtime.chooser import EnvironmentChooser
from motionmatch.runtime.environment_matching import EnvironmentMatcher, EnvironmentSettings
from motionmatch.search import _choice_kernels as PC
from motionmatch.search import _coarse_index as CI
from motionmatch.search import _obstacle_kernels as OK
from motionmatch.search import _penalized_kernels as PK
from motionmatch.search.penalized import (
    PenalizedSearch,
    PenaltyParams,
    SearchBuffers,
    SearchOptions,
    prepare_obstacles,
)
from synthetic import walker


def _problem(seed: int, n: int = 4000, d: int = 10, k: int = 3):
    """Smooth random "clips" with body ellipses (as in test_environment)."""
    rng = np.random.default_rng(seed)
    feats = np.cumsum(rng.normal(scale=0.15, size=(n, d)), axis=0)
    feats = ((feats - feats.mean(axis=0)) / feats.std(axis=0)).astype(np.float32)
    valid = rng.uniform(size=n) > 0.05
    t = np.arange(n)
    ell = np.zeros((n, k, 7))
    for s in range(k):
        ell[:, s, 0] = 0.6 * np.sin(t / 40.0 + s) * (s + 1)
        ell[:, s, 1] = 0.5 * (s + 1) + 0.3 * np.cos(t / 25.0)
        a = 0.2 + 0.1 * np.abs(np.sin(t / 30.0 + s))
        ell[:, s, 2], ell[:, s, 3] = np.sin(t / 60.0) * a, np.cos(t / 60.0) * a
        ell[:, s, 4] = 0.12 + 0.05 * np.abs(np.cos(t / 17.0))
        ell[:, s, 5], ell[:, s, 6] = 0.0, 1.7
    starts = np.array([0, n // 4, n // 2, 3 * n // 4])
    stops = np.array([n // 4, n // 2, 3 * n // 4, n])
    return PenalizedSearch(feats, valid, ell, clip_starts=starts, clip_stops=stops), rng


def _obstacle_rows(rng, m: int = 7) -> np.ndarray:
    kinds = [T_DISK, T_ELLIPSE, T_BOX]
    rows = []
    for i in range(m):
        ang = rng.uniform(0, 2 * math.pi)
        rows.append(make_row(kinds[i % 3], *rng.uniform(-1.5, 1.5, 2), math.cos(ang), math.sin(ang),
                             *rng.uniform(0.1, 0.35, 2)))
    return np.stack(rows)


def _obstacles(rng, m: int = 7):
    pts = np.array([[0, 0], [0, 0.5], [0, 1.0], [0, 1.5]], dtype=float)
    return prepare_obstacles(_obstacle_rows(rng, m), -np.ones(m, dtype=np.int64), (0.0, 0.0), 0.0, pts, 3.0, 3)


def test_block_bounds_contain_every_frame_of_their_segments():
    ps, _ = _problem(0)
    reps, _rf, lo, hi, _ = ps.representatives(True)
    for size in (1, 4, 7):
        clo, chi, grid, order = ps.block_bounds(True, size)
        dp = clo.shape[1]
        assert clo.dtype == np.uint8 and clo.shape == (math.ceil(len(reps) / size), dp) and dp % 8 == 0
        assert np.all(clo[:, ps.dim:] == 0) and np.all(chi[:, ps.dim:] == 255)  # padding: no gap
        assert sorted(order.tolist()) == list(range(ps.dim))
        dlo = grid[0] + clo[:, : ps.dim] * grid[1]
        dhi = grid[0] + chi[:, : ps.dim] * grid[1]
        for j in range(len(reps)):
            f = ps.features[lo[j]:hi[j]][ps.valid[lo[j]:hi[j]]][:, order].astype(np.float64)
            b = j // size
            assert np.all(f >= dlo[b]) and np.all(f <= dhi[b])


def test_encode_block_bounds_rounds_outward_and_handles_empty_blocks():
    lo = np.array([[0.0, -1.0], [np.inf, np.inf], [0.3, 2.0]], dtype=np.float32)
    hi = np.array([[0.1, 1.0], [-np.inf, -np.inf], [0.7, 2.0]], dtype=np.float32)
    clo, chi, grid = CI.encode_block_bounds(lo, hi)
    assert grid[0].tolist() == pytest.approx([0.0, -1.0])
    fin = np.array([True, False, True])
    assert np.all(grid[0] + clo[fin] * grid[1] <= lo[fin]) and np.all(grid[0] + chi[fin] * grid[1] >= hi[fin])
    assert clo[1].tolist() == [0, 0] and chi[1].tolist() == [255, 255]  # empty: the whole range
    # a query inside a box is at distance 0 from it; outside, a lower bound of the true distance
    pad = 6  # whole vector lanes (8 columns)
    clo = np.concatenate([clo, np.zeros((3, pad), np.uint8)], axis=1)
    chi = np.concatenate([chi, np.full((3, pad), 255, np.uint8)], axis=1)

    def codes(q):
        x = np.clip((q - grid[0]) / grid[1], -10000.0, 10255.0)
        ql, qh = np.zeros(8, np.float32), np.zeros(8, np.float32)
        ql[:2], qh[:2] = np.floor(x), np.ceil(x)
        wc = np.zeros(8, np.float32)
        wc[:2] = grid[1] ** 2
        return ql, qh, wc

    assert PK.box_codes_gap(clo, chi, 0, *codes(np.array([0.05, 0.0]))) == 0.0
    lb = PK.box_codes_gap(clo, chi, 2, *codes(np.array([1.5, 3.0])))
    exact = (1.5 - 0.7) ** 2 + (3.0 - 2.0) ** 2
    assert 0.0 < lb <= exact and lb > 0.8 * exact
    # the empty block spans the whole grid: no gap from a query inside the grid
    assert PK.box_codes_gap(clo, chi, 1, *codes(np.array([0.5, 1.5]))) == 0.0


def test_coded_box_bound_is_a_lower_bound_of_every_frame():
    """The byte-coded block bound (query rounded to codes, gaps in whole steps) never exceeds
    the weighted distance of any frame of the block, for queries inside and outside the grid."""
    ps, rng = _problem(8)
    reps, _rf, lo, hi, _ = ps.representatives(True)
    size = 4
    clo, chi, grid, order = ps.block_bounds(True, size)
    dp = clo.shape[1]
    for _ in range(20):
        q = rng.normal(scale=rng.choice([0.5, 3.0]), size=ps.dim)
        w = rng.uniform(0.2, 3.0, ps.dim)
        x = np.clip((q[order] - grid[0]) / grid[1], -10000.0, 10255.0)
        ql = np.zeros(dp, np.float32)
        qh = np.zeros(dp, np.float32)
        wc = np.zeros(dp, np.float32)
        ql[: ps.dim], qh[: ps.dim] = np.floor(x), np.ceil(x)
        wc[: ps.dim] = w[order] * grid[1] ** 2 * (1 - 1e-5)
        for b in range(len(clo)):
            lb = PK.box_codes_gap(clo, chi, b, ql, qh, wc)
            js = range(b * size, min((b + 1) * size, len(reps)))
            f = np.concatenate([ps.features[lo[j]:hi[j]][ps.valid[lo[j]:hi[j]]] for j in js]).astype(np.float64)
            if len(f):
                assert lb <= ((f - q) ** 2 * w).sum(axis=1).min()


def test_vector_coded_box_bound_equals_the_scalar_one():
    """The 16-lane bound of the block pass (``_simd.codes_gap``) is the scalar
    ``box_codes_gap`` up to the order of its float32 additions, for every padded width
    (multiples of 8: a 16-lane loop and an 8-lane tail), queries inside and far outside the
    grid; a box containing the query has bound 0."""
    import numba

    from motionmatch.search._simd import codes_gap

    @numba.njit
    def vector_gaps(lo, hi, ql, qh, wc, out):
        for b in range(lo.shape[0]):
            out[b] = codes_gap(lo, hi, b, ql, qh, wc)

    rng = np.random.default_rng(3)
    for dp in (8, 16, 24, 32, 40):
        lo = rng.integers(0, 200, size=(50, dp)).astype(np.uint8)
        hi = np.minimum(lo.astype(int) + rng.integers(0, 56, size=(50, dp)), 255).astype(np.uint8)
        for scale in (100.0, 3000.0):
            x = rng.normal(128.0, scale, dp).clip(-10000.0, 10255.0)
            ql, qh = np.floor(x).astype(np.float32), np.ceil(x).astype(np.float32)
            wc = rng.uniform(0.0, 2.0, dp).astype(np.float32)
            got = np.empty(50, np.float32)
            vector_gaps(lo, hi, ql, qh, wc, got)
            ref = np.array([PK.box_codes_gap(lo, hi, b, ql, qh, wc) for b in range(50)], np.float32)
            np.testing.assert_allclose(got, ref, rtol=2e-6)
        inside = ((lo.astype(np.float32) + hi) / 2)[7]
        got = np.empty(50, np.float32)
        vector_gaps(lo, hi, np.floor(inside), np.ceil(inside), np.ones(dp, np.float32), got)
        assert got[7] == 0.0


def test_clearance_of_obstacles_all_out_of_reach_is_still_the_nearest_distance():
    """Obstacles beyond the penalty's reach add no penalty; the summary then computes the
    exact distance only of those that may be the nearest (a bound from the body's centre),
    and the clearance is still the smallest exact signed distance per ellipse."""
    ps, rng = _problem(6)
    params = PenaltyParams(threshold=0.3).packed(ps.n_slots, ps.has_heights)
    stats = np.zeros(PK.NS, dtype=np.int64)
    for _ in range(30):
        rows = _obstacle_rows(rng, 9)
        far = rng.uniform(2.5, 6.0, len(rows))
        ang = rng.uniform(0, 2 * math.pi, len(rows))
        rows[:, 1], rows[:, 2] = far * np.cos(ang), far * np.sin(ang)  # centres 2.5-6 m away
        pts = np.array([[0, 0], [0, 0.5], [0, 1.0], [0, 1.5]], dtype=float)
        obs, cnt, _ = prepare_obstacles(rows, -np.ones(len(rows), dtype=np.int64), (0.0, 0.0), 0.0, pts, 9.0, 3)
        env = PK.Env(ps.ellipses, obs, cnt, params, 1.0)
        i = int(rng.integers(ps.n_frames))
        cl = np.empty(ps.n_slots)
        pen = PC.penalty_clearance(i, env, cl)
        assert pen == PK.frame_penalty(i, env, np.inf, False, stats)
        np.testing.assert_array_equal(cl, ps.clearance(i, obs, cnt, PenaltyParams(threshold=0.3)))


def _matches_linear(ps, rng, opt, searches, mask=None, buffers=None) -> int:
    """``searches`` random queries and obstacle sets: ``opt``'s result scores as the linear
    search's optimum (within ``mask``); returns how many blocks ``opt`` skipped."""
    skipped = 0
    for _ in range(searches):
        obs, cnt, _ = _obstacles(rng)
        q = ps.features[rng.integers(ps.n_frames)] + rng.normal(scale=0.3, size=ps.dim)
        lin = ps.search(q, obs, cnt, mask=mask, options=SearchOptions(method="linear"))
        coh = ps.search(q, obs, cnt, mask=mask, options=opt, buffers=buffers)
        assert coh.score == pytest.approx(lin.score, rel=1e-9)
        assert mask is None or mask[coh.index]
        skipped += coh.stats["blocks_skipped"]
    return skipped


def test_block_bounded_exhaustive_coherent_search_is_exact():
    """Stride 1 over every frame, no warm start: block skipping only drops frames that
    cannot win, so the result is the linear search's optimum."""
    ps, rng = _problem(1)
    for size in (2, 4, 16):
        opt = SearchOptions(adaptive=False, dissimilarity=False, warm_start=False, collision_fallback=False,
                            block_bounds=True, block_size=size)
        assert _matches_linear(ps, rng, opt, 6) > 0  # the bounds did prune


def test_super_blocks_keep_the_exhaustive_search_exact():
    """Super-blocks (boxes of runs of blocks, checked first) only drop frames that cannot
    win either: stride 1 over every frame still finds the linear optimum, and their codes
    contain every block's box."""
    ps, rng = _problem(5)
    clo, chi, _grid, _order = ps.block_bounds(False, 2)
    slo, shi = ps.super_blocks(False, 2, 3)
    assert len(slo) == -(-len(clo) // 3)
    for b in range(len(clo)):
        assert np.all(slo[b // 3] <= clo[b]) and np.all(shi[b // 3] >= chi[b])
    for sup in (2, 5):
        opt = SearchOptions(adaptive=False, dissimilarity=False, warm_start=False, collision_fallback=False,
                            block_bounds=True, block_size=2, super_blocks=sup)
        _matches_linear(ps, rng, opt, 5)
    with pytest.raises(Exception, match="super_blocks"):
        SearchOptions(super_blocks=-1)


def test_penalty_clearance_equals_penalty_and_clearance():
    """The summary's fused pass gives frame_penalty's value (no rejection) and
    frame_clearance's distances."""
    ps, rng = _problem(6)
    params = PenaltyParams(threshold=0.5).packed(ps.n_slots, ps.has_heights)
    stats = np.zeros(PK.NS, dtype=np.int64)
    for _ in range(40):
        obs, cnt, _ = _obstacles(rng)
        env = PK.Env(ps.ellipses, obs, cnt, params, 1.0)
        i = int(rng.integers(ps.n_frames))
        ref_pen = PK.frame_penalty(i, env, np.inf, False, stats)
        ref_cl = ps.clearance(i, obs, cnt, PenaltyParams(threshold=0.5))
        cl = np.empty(ps.n_slots)
        pen = PC.penalty_clearance(i, env, cl)
        assert pen == pytest.approx(ref_pen, rel=1e-12, abs=1e-300)
        np.testing.assert_allclose(cl, ref_cl, rtol=1e-12, atol=1e-12)


def test_buffers_path_equals_the_checked_path():
    ps, rng = _problem(2)
    buf = SearchBuffers(ps)
    pen = PenaltyParams(threshold=0.5)
    prev = None
    for it in range(12):
        obs, cnt, _ = _obstacles(rng) if it % 4 else (np.zeros((3, 1, ROW)), np.zeros(3, dtype=np.int64), None)
        cur = int(rng.integers(ps.n_frames))
        q = ps.features[min(cur + 1, ps.n_frames - 1)].astype(np.float64) + rng.normal(scale=0.2, size=ps.dim)
        w = rng.uniform(0.5, 2.0, ps.dim)
        mask = rng.uniform(size=ps.n_frames) > 0.1
        for opt in (SearchOptions(), SearchOptions(method="linear"), SearchOptions(dissimilarity="bound"),
                    SearchOptions(block_bounds=False), SearchOptions(method="plain")):
            kw = dict(mask=mask, init_index=cur, previous=prev, weights=w, penalty=pen, env_weight=1.5, options=opt)
            a = ps.search(q, obs, cnt, **kw)
            buf.cur = cur
            b = ps.search(q, obs, cnt, buffers=buf, **kw)
            assert (a.index, a.method, a.collides) == (b.index, b.method, b.collides)
            assert b.score == pytest.approx(a.score, rel=1e-12) and b.distance == pytest.approx(a.distance, rel=1e-12)
            np.testing.assert_allclose(b.clearance, a.clearance)
            assert a.stats == b.stats
            cur_score = ps.score(np.array([cur]), q, obs, cnt, weights=w, penalty=pen, env_weight=1.5)[0]
            assert buf.out[2] == pytest.approx(cur_score, rel=1e-12)
        prev = a.index
    other = SearchBuffers(_problem(3)[0])
    with pytest.raises(Exception, match="another PenalizedSearch"):
        ps.search(q, obs, cnt, buffers=other)


def test_prepare_static_and_trajectory_points_match_the_reference():
    rng = np.random.default_rng(4)
    rows = _obstacle_rows(rng, 12)
    rows[:, 1:3] += 3.0  # world positions around (3, 3)
    ids = np.array([1, 4, 5, 7, 10], dtype=np.int64)
    root_x, root_z, yaw = 3.2, 2.7, 0.8
    pos = np.zeros((3, 3))
    pos[:, 0] = root_x + np.array([0.3, 0.6, 0.9])
    pos[:, 2] = root_z + np.array([0.4, 0.9, 1.3])
    world = np.empty((4, 2))
    local = np.empty((4, 2))
    OK.trajectory_points(root_x, root_z, yaw, pos, world, local)
    assert world[0].tolist() == [root_x, root_z] and np.allclose(world[1:], pos[:, [0, 2]])
    c, s = math.cos(yaw), math.sin(yaw)
    d = world - [root_x, root_z]
    np.testing.assert_allclose(local, np.stack([c * d[:, 0] - s * d[:, 1], s * d[:, 0] + c * d[:, 1]], axis=1))
    ref_obs, ref_cnt, ref_near = prepare_obstacles(rows[ids], -np.ones(len(ids), dtype=np.int64), (root_x, root_z),
                                                   yaw, local, 1.5, 3)
    out = np.empty((3, len(ids), ROW))
    cnt = np.zeros(3, dtype=np.int64)
    near = OK.prepare_static(rows, ids, root_x, root_z, yaw, local, 1.5, out, cnt, np.empty(len(ids)))
    assert near == ref_near and cnt.tolist() == ref_cnt.tolist() and cnt.sum() > 0
    for k in range(3):
        np.testing.assert_array_equal(out[k, : cnt[k]], ref_obs[k, : ref_cnt[k]])


def test_compiled_weights_columns_and_view_distance():
    rng = np.random.default_rng(5)
    D = 9
    pose = np.zeros(D, dtype=bool)
    pos = np.zeros(D, dtype=bool)
    direc = np.zeros(D, dtype=bool)
    pose[:4], pos[4:6], direc[6:8] = True, True, True
    off = np.zeros(D, dtype=bool)
    off[5] = True  # a vertical column of the planar view
    w = PC.control_weights(off, pose, pos, direc, 0.5, 2.0, 0.3)
    ref = np.ones(D)
    ref[pose], ref[pos], ref[direc], ref[off] = 0.5, 2.0, 0.6, 0.0
    np.testing.assert_allclose(w, ref)
    x = rng.normal(size=20).astype(np.float32)
    cols = np.array([3, 0, 17, 5], dtype=np.int64)
    out = np.empty(4)
    PC.take_columns(x, cols, out)
    np.testing.assert_array_equal(out, x[cols].astype(np.float64))
    feats = rng.normal(size=(6, 20)).astype(np.float32)
    zero = np.zeros(20, dtype=bool)
    zero[[2, 7]] = True
    row = feats[4].astype(np.float64)
    row[zero] = 0.0
    assert PC.view_distance(x, feats, 4, zero) == pytest.approx(float(np.sum((x.astype(np.float64) - row) ** 2)))


class _Traj:
    def __init__(self, positions):
        self.positions = positions


class _Ctrl:
    """What the chooser reads from a controller."""

    def __init__(self, frame, pos, yaw, traj):
        self.frame = frame
        self.root_pos = np.array([pos[0], 0.0, pos[1]])
        self.root_yaw = yaw
        self.last_desired = _Traj(traj)
        self.time = 0.0  # the controller's clock (Evasion's interpolation)

        class S:
            transition_ratio = 0.9

        self.s = S


@pytest.fixture(scope="module")
def walker_matcher():
    clips = [walker(n=200, speed=1.0), walker(n=200, speed=1.6, name="fast", turn_rate=0.4),
             walker(n=160, speed=0.4, name="slow", turn_rate=-0.6)]
    db = MotionDatabase.build(clips, schema=environment_schema())
    return db, EnvironmentMatcher(db)


def test_chooser_gather_matches_scene_query_and_prepare(walker_matcher):
    """The chooser's fused static pre-selection gives the rows, counts and order of the
    reference path (scene query, then :func:`prepare_obstacles`), with and without
    extra rows (other agents) and moving obstacles."""
    _db, m = walker_matcher
    obstacles = [disk(0.3, 1.0, 0.2), box(-0.5, 1.8, 0.4, 0.3, yaw=0.4), ellipse(0.8, 2.2, 0.3, 0.15),
                 disk(5.0, 5.0, 0.3)]
    st = EnvironmentSettings()
    radius = st.penalty.threshold + st.reach + st.penalty.margin
    rng = np.random.default_rng(6)
    for moving in (False, True):
        obs_list = obstacles + ([disk(-1.0, 0.5, 0.2, velocity=(0.5, 0.0))] if moving else [])
        scene = Scene(obs_list)
        for extra in (False, True):
            fn = None
            if extra:
                xr = _obstacle_rows(rng, 3)
                xs = np.array([0, 1, 2], dtype=np.int64)

                def fn(_chooser, _points, _radius, xr=xr, xs=xs):
                    return xr, xs
            ch = EnvironmentChooser(m, st, scene=scene, obstacles_fn=fn, clock=lambda: 0.5)
            for _ in range(4):
                root = rng.uniform(-0.5, 0.5, 2)
                yaw = rng.uniform(-1, 1)
                traj = np.zeros((3, 3))
                traj[:, 0] = root[0] + np.sin(yaw) * np.array([0.4, 0.8, 1.2])
                traj[:, 2] = root[1] + np.cos(yaw) * np.array([0.4, 0.8, 1.2])
                obs, cnt, near, local = ch.gather(_Ctrl(0, root, yaw, traj))
                pts = np.vstack([root, traj[:, [0, 2]]])
                rows, slot_of = scene.query(0.5, pts, radius, m.slots)
                if extra:
                    rows = np.concatenate([rows, xr])
                    slot_of = np.concatenate([slot_of, xs])
                if len(rows) == 0:
                    assert cnt.sum() == 0 and local is None
                    continue
                ref_obs, ref_cnt, ref_near = prepare_obstacles(rows, slot_of, root, yaw, local, radius, len(m.slots))
                assert cnt.tolist() == ref_cnt.tolist() and near == pytest.approx(ref_near)
                for k in range(len(m.slots)):
                    np.testing.assert_allclose(obs[k, : cnt[k]], ref_obs[k, : ref_cnt[k]])


def test_chooser_cost_and_search_match_a_direct_search(walker_matcher):
    """One choice: the returned frame is the penalised search's, and the returned cost is
    ``score(best) - ratio * score(cur) + ratio * plain distance to cur`` (so that the
    controller's comparison compares penalised scores)."""
    db, m = walker_matcher
    scene = Scene([disk(0.2, 0.9, 0.25), box(-0.4, 1.6, 0.4, 0.3)])
    ch = EnvironmentChooser(m, EnvironmentSettings(), scene=scene)
    from motionmatch.runtime.environment_matching import anticipation_weight, evasion_factor

    rng = np.random.default_rng(7)
    ch.target_speed = 1.0
    factor, last_t = None, None  # Evasion's factor, interpolated in time between searches
    for n in range(5):
        cur = int(rng.integers(db.num_frames - 20))
        query = db.features[cur + 5].astype(np.float32)
        traj = np.array([[0.0, 0.0, 0.35], [0.0, 0.0, 0.7], [0.0, 0.0, 1.05]])
        ctrl = _Ctrl(cur, (0.0, 0.0), 0.0, traj)
        ctrl.time = n / 6
        mask = db.valid.copy()
        prev = ch.previous
        idx, cost = ch(ctrl, query, mask, "full")
        obs, cnt = ch.last_obstacles
        obs, cnt = obs.copy(), cnt.copy()
        c = ch.controls
        q = query.astype(np.float64)[m.cols]
        res = ch.last
        assert idx[0] == res.index
        target = evasion_factor(c, ch.settings, ch.gather(ctrl)[2])
        if target >= 1.0 or factor is None:
            factor = target
        else:
            factor = target + (factor - target) * np.exp(-ch.settings.evasion_rate * (ctrl.time - last_t))
        last_t = ctrl.time
        assert ch.direction_factor == pytest.approx(factor, rel=1e-12)
        w = m.weights(c, factor)
        envw = anticipation_weight(c, ch.settings, 1.0)
        direct = m.search.search(q, obs, cnt, mask=mask, init_index=cur, previous=prev, weights=w,
                                 penalty=ch.settings.penalty, env_weight=envw, options=ch.settings.search)
        assert direct.index == res.index and direct.score == pytest.approx(res.score, rel=1e-12)
        scores = m.search.score(np.array([res.index, cur]), q, obs, cnt, weights=w, penalty=ch.settings.penalty,
                                env_weight=envw)
        assert res.score == pytest.approx(scores[0], rel=1e-9)
        plain_cur = float(np.sum((query.astype(np.float64) - db.features[cur].astype(np.float64)) ** 2))
        assert cost[0] == pytest.approx(scores[0] - 0.9 * scores[1] + 0.9 * plain_cur, rel=1e-9, abs=1e-9)
    lg = ch.log  # the search call's own time is logged beside the whole choice's, and is part of it
    assert len(lg.search_cpu_times) == len(lg.cpu_times) == 5
    assert all(0.0 <= s <= c + 1e-6 for s, c in zip(lg.search_cpu_times, lg.cpu_times))


def test_stride_is_the_smallest_k_whose_square_exceeds_the_scaled_dissimilarity():
    """``stride_for(δ², 1/S, v², cap)`` = min(cap, smallest k >= 1 with k² S > v² δ²),
    checked against counting up, on random values and on exact squares."""
    rng = np.random.default_rng(3)
    best = rng.uniform(0.01, 5.0, 2000)
    delta2 = best * rng.uniform(0.0, 120.0, 2000) ** 2
    v = rng.uniform(0.1, 2.0, 2000)
    for S, d2, vv in list(zip(best, delta2, v)) + [(1.0, float(k * k), 1.0) for k in range(1, 70)]:
        want = 1
        while want < 64 and want * want * S <= vv * vv * d2:
            want += 1
        assert PK.stride_for(d2, 1.0 / S, vv * vv, 64) == want, (S, d2, vv)
    assert PK.stride_for(np.nan, 1.0, 1.0, 64) == 1
    assert PK.stride_for(0.0, 1.0, 1.0, 64) == 1


def _segments_admitted(co, mask):
    return np.array([mask[co.rep_lo[j]:co.rep_hi[j]].any() for j in range(len(co.reps))])


def test_mask_bits_pack_the_segments_that_hold_admitted_frames_and_are_cached_only_for_read_only_masks():
    ps, rng = _problem(7)
    plan = ps._plan_for(SearchOptions(method="coherent-approx"))
    co = plan.coarse
    reps = co.reps
    mask = rng.uniform(size=ps.n_frames) > 0.97  # sparse: many representatives not admitted
    bits = ps._mask_bits(co, mask)
    unpacked = np.unpackbits(bits, bitorder="little")[: len(reps)].astype(bool)
    want = _segments_admitted(co, mask)
    assert (want & ~mask[reps]).any()  # segments admitted through frames other than their representative
    np.testing.assert_array_equal(unpacked, want)
    # a writable mask is packed anew on every call: changing it in place changes the bits
    mask[co.rep_lo[0]:co.rep_hi[0]] = not want[0]
    assert bool(ps._mask_bits(co, mask)[0] & 1) == (not want[0])
    # a read-only mask that owns its data is cached by identity
    ro = mask.copy()
    ro.setflags(write=False)
    assert ps._mask_bits(co, ro) is ps._mask_bits(co, ro)
    other = ~mask
    other.setflags(write=False)
    np.testing.assert_array_equal(np.unpackbits(ps._mask_bits(co, other), bitorder="little")[: len(reps)]
                                  .astype(bool), _segments_admitted(co, other))


def test_a_sparse_mask_of_frames_that_are_no_representatives_still_finds_its_best_frame():
    """A mask of a few frames inside segments whose representatives it does not admit (an
    idle clip's entry frames): the coherent search visits those segments and returns the
    best admitted frame, never -1 (it used to find nothing, and the character jumped)."""
    ps, rng = _problem(11)
    opt = SearchOptions()
    co = ps._plan_for(opt).coarse
    seg = int(np.argmax(co.rep_hi - co.rep_lo))
    inside = [i for i in range(co.rep_lo[seg], co.rep_hi[seg]) if i != co.reps[seg] and ps.valid[i]][:3]
    assert len(inside) == 3
    mask = np.zeros(ps.n_frames, dtype=bool)
    mask[inside] = True
    mask.setflags(write=False)
    for _ in range(6):
        obs, cnt, _ = _obstacles(rng)
        q = ps.features[rng.integers(ps.n_frames)] + rng.normal(scale=0.3, size=ps.dim)
        lin = ps.search(q, obs, cnt, mask=mask, options=SearchOptions(method="linear"))
        got = ps.search(q, obs, cnt, mask=mask, options=opt)
        assert got.index in inside and got.score == pytest.approx(lin.score, rel=1e-9)


def test_searches_with_masks_that_take_turns_match_the_linear_optimum():
    """Several read-only masks used in turn by one set of buffers (as the controllers' tag
    masks are): with stride 1 over every frame the result is the linear search's optimum
    for each mask, so no cached packing or bound leaks from one mask to another."""
    ps, rng = _problem(8)
    masks = []
    for p in (0.2, 0.5, 0.8):
        m = rng.uniform(size=ps.n_frames) > p
        m.setflags(write=False)
        masks.append(m)
    buf = SearchBuffers(ps)
    opt = SearchOptions(adaptive=False, dissimilarity=False, warm_start=False, collision_fallback=False,
                        block_bounds=True, block_size=4)
    for it in range(9):
        _matches_linear(ps, rng, opt, 1, mask=masks[it % 3], buffers=buf)


def test_plain_method_searches_weighted_distances_without_copying_the_database(monkeypatch):
    """The plain method (and the fallback when nothing is near) with per-query weights, zeros
    included, returns the weighted nearest frame of the weighted brute force, and builds no
    other searcher: a change of weights copies nothing."""
    from motionmatch.search import BruteForceSearch
    from motionmatch.search import penalized as P

    ps, rng = _problem(9)
    brute = BruteForceSearch(ps.features, ps.valid)

    def no_copy(*args, **kwargs):
        raise AssertionError("a searcher was built for a weight vector")

    monkeypatch.setattr(P, "BoxSearch", no_copy)
    empty, cnt = np.zeros((3, 1, ROW)), np.zeros(3, dtype=np.int64)
    for it in range(12):
        q = ps.features[rng.integers(ps.n_frames)].astype(np.float64) + rng.normal(scale=0.3, size=ps.dim)
        w = rng.uniform(0.5, 2.0, ps.dim)
        w[rng.uniform(size=ps.dim) < 0.3] = 0.0
        mask = rng.uniform(size=ps.n_frames) > 0.3
        cur = int(rng.integers(ps.n_frames))
        obs, ocnt = (empty, cnt) if it % 2 else _obstacles(rng)[:2]
        opt = SearchOptions(method="plain") if it % 2 == 0 else SearchOptions()
        r = ps.search(q, obs, ocnt, mask=mask, init_index=cur, weights=w, options=opt)
        assert r.method == "plain"
        _, d = brute.nearest(q, mask=mask, weights=w)
        diff = ps.features[r.index].astype(np.float64) - q
        assert float((diff * diff * w).sum()) == pytest.approx(d[0], rel=1e-12, abs=1e-12)
        assert r.distance == pytest.approx(d[0], rel=1e-9, abs=1e-12)
        assert mask[r.index] and ps.valid[r.index]


def test_a_choice_with_nothing_near_runs_its_plain_search_compiled_on_any_thread(walker_matcher):
    """With no obstacle near, a chooser's job makes the plain accelerated search and its
    summary itself (two compiled calls, here on another thread): the frame and summary of
    the direct plain search; a query the search refuses is reported by ``end`` with the
    search's own message."""
    from concurrent.futures import ThreadPoolExecutor

    from motionmatch.search import SearchError

    db, m = walker_matcher
    ch = EnvironmentChooser(m, EnvironmentSettings(), scene=Scene())
    ch.target_speed = 1.0
    rng = np.random.default_rng(11)
    traj = np.array([[0.0, 0.0, 0.35], [0.0, 0.0, 0.7], [0.0, 0.0, 1.05]])
    with ThreadPoolExecutor(1) as pool:
        for _ in range(4):
            cur = int(rng.integers(db.num_frames - 20))
            query = db.features[cur + 5].astype(np.float32)
            ctrl = _Ctrl(cur, (0.0, 0.0), 0.0, traj)
            mask = db.valid.copy()
            job = ch.begin(ctrl, query, mask, "full")
            assert job.box is not None and job.runs
            pool.submit(job.run).result()
            idx, _cost = ch.end(job)
            res = ch.last
            w = m.weights(ch.controls, ch.direction_factor)
            direct = m.search.search(query.astype(np.float64)[m.cols], *ch.last_obstacles, mask=mask, init_index=cur,
                                     weights=w, options=ch.settings.search)
            assert direct.method == res.method == "plain"
            assert idx[0] == res.index == direct.index and res.score == direct.score
        bad = db.features[3].astype(np.float32)
        bad[m.cols[0]] = np.nan
        job = ch.begin(_Ctrl(3, (0.0, 0.0), 0.0, traj), bad, db.valid.copy(), "full")
        pool.submit(job.run).result()
        with pytest.raises(SearchError, match="query"):
            ch.end(job)


@pytest.mark.parametrize("mask_kind", ["all", "clips out", "sparse"])
def test_coherent_search_walks_the_representatives_as_the_reference_does(mask_kind):
    """The compiled coherent search against the plain-Python walk of ``oracles.coherent``
    (the paper's algorithm, one representative at a time): the same frame, score and visit
    counters (representatives visited, distances, segments opened, blocks skipped) for masks
    that exclude long runs of segments (crossed in one step by the kernel), none, or all but
    a few frames."""
    from oracles.coherent import coherent_reference

    ps, rng = _problem(11)
    n = ps.n_frames
    mask = np.ones(n, dtype=bool)
    if mask_kind == "clips out":
        mask[n // 4: n // 2] = False
        mask[3 * n // 4 + 100: 3 * n // 4 + 400] = False
    elif mask_kind == "sparse":
        mask[:] = False
        mask[rng.choice(n, 40, replace=False)] = True
    opt = SearchOptions(collision_fallback=False)
    pen = PenaltyParams()
    visits = 0
    for _ in range(12):
        obs, cnt, _ = _obstacles(rng)
        q = ps.features[rng.integers(n)] + rng.normal(scale=0.3, size=ps.dim)
        w = rng.uniform(0.3, 2.0, ps.dim)
        admitted = np.flatnonzero(mask & ps.valid)
        init, prev = int(rng.choice(admitted)), int(rng.integers(n))
        got = ps.search(q, obs, cnt, mask=mask, init_index=init, previous=prev, weights=w, penalty=pen, options=opt)
        ref = coherent_reference(ps, opt, q, w, mask, obs, cnt, tuple(pen.packed(ps.n_slots, ps.has_heights)),
                                 pen.env_weight, init, prev)
        assert got.index == ref["index"]
        assert got.score == pytest.approx(ref["score"], rel=1e-9)
        for key in ("representatives", "distances", "segments", "blocks_skipped"):
            assert got.stats[key] == ref[key], key
        visits += ref["representatives"]
    assert visits > 12 * 20  # (the walks did visit representatives, not only skip blocks)
