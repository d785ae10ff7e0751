"""Exact nearest-neighbour search: every searcher against brute force and stored answers.

The reference databases (three real 27-D feature databases with 5000 hard queries and
their exact answers) are looked for in ``$MOTIONMATCH_BENCH``, else
``$MOTIONMATCH_DATA/../bench/search-reference``, else ``../shared/bench/search-reference``
beside the repository; the tests that need them are skipped when absent.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from motionmatch.search import BoxSearch, BruteForceSearch, Searcher, SearchError, build_searcher

REPO = Path(__file__).resolve().parents[1]
DBS = ("db_a", "db_b", "db_c")
RTOL = 1e-12  # float64 sums of the same 27 squares in another order


def reference_dir() -> Path:
    env = os.environ.get("MOTIONMATCH_BENCH")
    if env:
        return Path(env)
    data = Path(os.environ.get("MOTIONMATCH_DATA", REPO.parent / "shared" / "data"))
    first = data.parent / "bench" / "search-reference"
    return first if first.is_dir() else REPO.parent / "shared" / "bench" / "search-reference"


def exact_dist(features: np.ndarray, idx: np.ndarray, q: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """float64 (weighted) squared distances of frames ``idx`` to ``q``."""
    diff = features[np.asarray(idx)].astype(np.float64) - np.asarray(q, dtype=np.float64)
    if w is None:
        return (diff * diff).sum(axis=-1)
    return (diff * diff * np.asarray(w, dtype=np.float64)).sum(axis=-1)


def sequential_dist(features: np.ndarray, idx: np.ndarray, q: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """The same, summed dimension by dimension in order (``s += t * t`` or ``s += t * t * w``):
    the box search's float64 re-measure, bit for bit."""
    diff = features[np.asarray(idx)].astype(np.float64) - np.asarray(q, dtype=np.float64)
    s = np.zeros(diff.shape[:-1])
    for j in range(diff.shape[-1]):
        t = diff[..., j]
        s = s + (t * t if w is None else t * t * w[j])
    return s


def weighted_oracle(features: np.ndarray, allowed: np.ndarray, q: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    """Plain numpy float64: the ``k`` smallest ``Σ_d w_d (f_d - q_d)²`` over the allowed frames."""
    d = ((features.astype(np.float64) - np.asarray(q, dtype=np.float64)) ** 2 * w).sum(axis=1)
    d = np.where(allowed, d, np.inf)
    return d[np.argsort(d, kind="stable")[:k]]


def assert_weighted_knn(features, q, w, got, want_d, allowed):
    """``got = (indices, distances)`` are ``k`` distinct allowed frames, ascending, whose
    weighted float64 distances are the ones returned and equal the oracle's ``want_d``."""
    gi, gd = got
    assert gi.dtype == np.int64 and gd.dtype == np.float64
    assert gi.shape == gd.shape == want_d.shape
    np.testing.assert_allclose(gd, want_d, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(exact_dist(features, gi, q, w), gd, rtol=RTOL, atol=1e-12)
    assert np.all(np.diff(gd) >= 0)
    assert len(set(gi.tolist())) == len(gi)
    assert allowed[gi].all()


def assert_same_knn(features, q, got, want, mask=None):
    """Same k distances as ``want`` (ties may differ in index); ``got``'s indices are allowed
    frames whose true distances are the ones returned, ascending."""
    gi, gd = got
    wi, wd = want
    assert gi.dtype == np.int64 and gd.dtype == np.float64
    assert gi.shape == wi.shape and gd.shape == wd.shape
    np.testing.assert_allclose(gd, wd, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(exact_dist(features, gi, q), gd, rtol=RTOL, atol=1e-12)
    assert np.all(np.diff(gd) >= 0)
    assert len(set(gi.tolist())) == len(gi)
    if mask is not None:
        assert mask[gi].all()


# ---------------------------------------------------------------- reference databases
class RefDB:
    def __init__(self, folder: Path):
        self.features = np.load(folder / "features_normalized.npy")
        self.queries = np.load(folder / "queries_normalized.npy")
        self.valid = np.load(folder / "valid_mask.npy")
        self.exact_index = np.load(folder / "exact_index.npy")
        self.exact_cost = np.load(folder / "exact_cost.npy")
        self.starts = np.load(folder / "range_starts.npy")
        self.stops = np.load(folder / "range_stops.npy")
        self.box = BoxSearch(self.features, self.valid)
        self.brute = BruteForceSearch(self.features, self.valid)


_REF: dict[str, RefDB] = {}


@pytest.fixture(scope="module", params=DBS)
def ref(request) -> RefDB:
    root = reference_dir()
    folder = root / request.param
    if not (folder / "features_normalized.npy").is_file():
        pytest.skip(f"search reference databases not found at {root}; set MOTIONMATCH_BENCH to shared/bench/search-reference")
    if request.param not in _REF:
        _REF[request.param] = RefDB(folder)
    return _REF[request.param]


def check_against_exact(r: RefDB, idx: np.ndarray, cost: np.ndarray, which: np.ndarray) -> None:
    want = r.exact_cost[which]
    np.testing.assert_allclose(cost, want, rtol=1e-9)
    differ = idx != r.exact_index[which]
    # a different index is only allowed for a tie: the same distance to the query
    if differ.any():
        np.testing.assert_allclose(exact_dist(r.features, idx[differ], r.queries[which][differ]), want[differ], rtol=1e-9)
    assert r.valid[idx].all()


def test_box_k1_all_queries_match_exact_answers(ref):
    """Every one of the 5000 queries, single calls, against the stored exact answers."""
    n = len(ref.queries)
    idx = np.empty(n, dtype=np.int64)
    cost = np.empty(n)
    for i, q in enumerate(ref.queries):
        ii, dd = ref.box.nearest(q)
        idx[i], cost[i] = ii[0], dd[0]
    check_against_exact(ref, idx, cost, np.arange(n))


def test_box_batch_all_queries_match_exact_answers_and_single_calls(ref):
    idx, cost = ref.box.nearest_batch(ref.queries)
    assert idx.shape == (len(ref.queries), 1) and cost.shape == idx.shape
    check_against_exact(ref, idx[:, 0], cost[:, 0], np.arange(len(ref.queries)))
    for i in range(0, len(ref.queries), 97):
        si, sd = ref.box.nearest(ref.queries[i])
        assert si[0] == idx[i, 0] and sd[0] == cost[i, 0]


def test_brute_matches_exact_answers(ref):
    which = np.arange(0, len(ref.queries), 25)
    out = [ref.brute.nearest(ref.queries[i]) for i in which]
    check_against_exact(ref, np.array([o[0][0] for o in out]), np.array([o[1][0] for o in out]), which)
    bi, bd = ref.brute.nearest_batch(ref.queries[which])
    check_against_exact(ref, bi[:, 0], bd[:, 0], which)


@pytest.mark.parametrize("k", [3, 10])
def test_box_knn_matches_brute(ref, k):
    which = np.arange(3, len(ref.queries), 25)
    bi, bd = ref.box.nearest_batch(ref.queries[which], k=k)
    for row, i in enumerate(which):
        q = ref.queries[i]
        want = ref.brute.nearest(q, k=k)
        got = ref.box.nearest(q, k=k)
        assert_same_knn(ref.features, q, got, want, ref.valid)
        np.testing.assert_array_equal(bi[row], got[0])
        np.testing.assert_array_equal(bd[row], got[1])
        assert got[1][0] == pytest.approx(ref.exact_cost[i], rel=1e-9)


def test_box_masks_match_brute(ref):
    rng = np.random.default_rng(1)
    n = len(ref.features)
    masks = {
        "random 50%": rng.random(n) < 0.5,
        "random 2%": rng.random(n) < 0.02,
        "few frames": np.isin(np.arange(n), rng.choice(n, 12, replace=False)),
    }
    # tag-like: whole clips (contiguous ranges), one and several
    clips = rng.choice(len(ref.starts), size=min(5, len(ref.starts)), replace=False)
    one = np.zeros(n, dtype=bool)
    one[ref.starts[clips[0]] : ref.stops[clips[0]]] = True
    several = np.zeros(n, dtype=bool)
    for c in clips:
        several[ref.starts[c] : ref.stops[c]] = True
    masks["one clip"] = one
    masks["five clips"] = several
    masks["odd range"] = (np.arange(n) >= 1001) & (np.arange(n) < 1001 + 777)
    for name, mask in masks.items():
        allowed = mask & ref.valid
        for i in range(0, 400, 40):
            q = ref.queries[i]
            for k in (1, 3):
                if k > allowed.sum():
                    continue
                want = ref.brute.nearest(q, mask=mask, k=k)
                got = ref.box.nearest(q, mask=mask, k=k)
                assert_same_knn(ref.features, q, got, want, allowed), name
        bi, bd = ref.box.nearest_batch(ref.queries[:50], mask=mask, k=1)
        _, wd = ref.brute.nearest_batch(ref.queries[:50], mask=mask, k=1)
        np.testing.assert_allclose(bd, wd, rtol=RTOL)
        assert allowed[bi].all()


def test_box_init_index(ref):
    rng = np.random.default_rng(2)
    n = len(ref.features)
    invalid = np.flatnonzero(~ref.valid)
    for i in range(0, 300, 15):
        q = ref.queries[i]
        base = ref.box.nearest(q, k=3)
        inits = [int(ref.exact_index[i]), int(rng.integers(n)), 0, n - 1]
        if len(invalid):
            inits.append(int(invalid[i % len(invalid)]))  # not valid: ignored
        for init in inits:
            got = ref.box.nearest(q, k=3, init_index=init)
            assert_same_knn(ref.features, q, got, base, ref.valid)
            g1 = ref.box.nearest(q, init_index=init)
            assert g1[1][0] == pytest.approx(ref.exact_cost[i], rel=1e-9)
        # a masked-out init frame is ignored, never returned
        mask = np.ones(n, dtype=bool)
        mask[ref.exact_index[i]] = False
        got = ref.box.nearest(q, mask=mask, init_index=int(ref.exact_index[i]))
        assert got[0][0] != ref.exact_index[i]
        assert_same_knn(ref.features, q, got, ref.brute.nearest(q, mask=mask))


@pytest.mark.parametrize("nq", [9, 40])  # on the calling thread, on numba's threads
def test_box_batch_seeds_give_the_single_seeded_answers(ref, nq):
    """``nearest_batch(init_indices=...)`` answers as ``nearest(init_index=...)`` row by row,
    with seeds that are good, random, masked out, invalid, -1 and out of range."""
    rng = np.random.default_rng(5)
    n = len(ref.features)
    rows = rng.choice(len(ref.queries), nq, replace=False)
    q = ref.queries[rows]
    mask = rng.random(n) > 0.2
    seeds = np.where(rng.random(nq) < 0.5, ref.exact_index[rows], rng.integers(-3, n + 3, nq))
    w = rng.uniform(0.5, 2.0, ref.features.shape[1])
    bi, bd = ref.box.nearest_batch(q, mask=mask, k=3, weights=w, init_indices=seeds)
    for r in range(nq):
        s = int(seeds[r])
        ok = 0 <= s < n and ref.valid[s] and mask[s]
        si, sd = ref.box.nearest(q[r], mask=mask, k=3, weights=w, init_index=s if ok else None)
        np.testing.assert_array_equal(bd[r], sd)  # the same kernel with the same seed: the same answer
        np.testing.assert_array_equal(bi[r], si)
        assert (ref.valid & mask)[bi[r]].all()
    with pytest.raises(SearchError, match="init_indices"):
        ref.box.nearest_batch(q, init_indices=seeds[:-1])
    bad = q.astype(np.float32)  # (a float32 batch is checked by the kernel, then named here)
    bad[nq // 2, 3] = np.nan
    with pytest.raises(SearchError, match=f"row {nq // 2} contains NaN"):
        ref.box.nearest_batch(bad, k=3, init_indices=seeds)
    with pytest.raises(SearchError, match="weights"):
        ref.box.nearest_batch(q, k=3, weights=-w, init_indices=seeds)


# ---------------------------------------------------------------- per-query weights
@pytest.fixture(scope="module")
def ref_b() -> RefDB:
    """One reference database (db_b, 104k frames) for the weighted searches."""
    root = reference_dir()
    folder = root / "db_b"
    if not (folder / "features_normalized.npy").is_file():
        pytest.skip(f"search reference database db_b not found at {root}; set MOTIONMATCH_BENCH to "
                    "shared/bench/search-reference")
    if "db_b" not in _REF:
        _REF["db_b"] = RefDB(folder)
    return _REF["db_b"]


def _weights(rng: np.random.Generator, d: int, kind: str) -> np.ndarray:
    if kind == "controls":  # the high-level controls' range
        return rng.uniform(0.5, 2.0, d)
    if kind == "zeros":  # whole feature groups switched off
        w = rng.uniform(0.5, 2.0, d)
        w[rng.random(d) < 0.4] = 0.0
        w[rng.integers(d)] = 1.0
        return w
    if kind == "wide":  # orders of magnitude apart
        return 10.0 ** rng.uniform(-4, 4, d)
    return np.ones(d)


@pytest.mark.parametrize("kind", ["controls", "zeros", "wide"])
def test_weighted_box_and_brute_match_numpy_oracle_on_reference_db(ref_b, kind):
    """Weighted single and batched searches, with and without masks and ``init_index``,
    k = 1, 3, 10, against plain float64 numpy on a real database and its hard queries."""
    r = ref_b
    rng = np.random.default_rng({"controls": 11, "zeros": 12, "wide": 13}[kind])
    n, d = r.features.shape
    clip = rng.integers(len(r.starts))
    one_clip = np.zeros(n, dtype=bool)
    one_clip[r.starts[clip] : r.stops[clip]] = True
    masks = {"none": None, "random 50%": rng.random(n) < 0.5, "one clip": one_clip}
    which = rng.choice(len(r.queries), size=12, replace=False)
    for name, mask in masks.items():
        allowed = r.valid & (mask if mask is not None else True)
        w = _weights(rng, d, kind)
        for k in (1, 3, 10):
            queries = r.queries[which]
            bi, bd = r.box.nearest_batch(queries, mask=mask, k=k, weights=w)
            wi, wd = r.brute.nearest_batch(queries, mask=mask, k=k, weights=w)
            for row, q in enumerate(queries):
                want = weighted_oracle(r.features, allowed, q, w, k)
                init = int(rng.integers(n))
                got = r.box.nearest(q, mask=mask, k=k, init_index=init, weights=w)
                assert_weighted_knn(r.features, q, w, got, want, allowed), (name, k)
                assert_weighted_knn(r.features, q, w, r.brute.nearest(q, mask=mask, k=k, weights=w), want, allowed)
                assert_weighted_knn(r.features, q, w, (bi[row], bd[row]), want, allowed)
                assert_weighted_knn(r.features, q, w, (wi[row], wd[row]), want, allowed)
                # batch and single box calls measure the same frames the same way
                np.testing.assert_array_equal(bd[row], r.box.nearest(q, mask=mask, k=k, weights=w)[1])
                # the box's float64 distances are the weighted sums in dimension order, bit for bit
                np.testing.assert_array_equal(got[1], sequential_dist(r.features, got[0], q, w))


def test_weights_change_the_answer_on_reference_db(ref_b):
    """The weights are not ignored: switching off the trajectory dimensions (columns 15-26)
    finds pose-only matches, which differ from the unweighted ones for most queries."""
    r = ref_b
    w = np.ones(r.features.shape[1])
    w[15:] = 0.0
    qs = r.queries[:50]
    plain = r.box.nearest_batch(qs)[0][:, 0]
    pose = r.box.nearest_batch(qs, weights=w)[0][:, 0]
    assert (plain != pose).mean() > 0.5
    for i, q in enumerate(qs):
        assert_weighted_knn(r.features, q, w, (pose[i : i + 1], r.box.nearest(q, weights=w)[1]),
                            weighted_oracle(r.features, r.valid, q, w, 1), r.valid)


def test_weights_none_keeps_the_unweighted_results_bit_for_bit(ref_b):
    """``weights=None`` is the unweighted search: its float64 distances are the unweighted
    sums in dimension order, bit for bit, and unit weights (the weighted kernels) return the
    same distances bit for bit."""
    r = ref_b
    qs = r.queries[::10]
    ones = np.ones(r.features.shape[1])
    for k in (1, 3):
        ni, nd = r.box.nearest_batch(qs, k=k)
        di, dd = r.box.nearest_batch(qs, k=k, weights=None)
        oi, od = r.box.nearest_batch(qs, k=k, weights=ones)
        np.testing.assert_array_equal(ni, di)
        np.testing.assert_array_equal(nd, dd)
        np.testing.assert_array_equal(nd, sequential_dist(r.features, ni, qs[:, None, :]))
        np.testing.assert_array_equal(od, nd)
        np.testing.assert_array_equal(sequential_dist(r.features, oi, qs[:, None, :]), od)
    idx, cost = r.box.nearest_batch(r.queries, weights=None)
    check_against_exact(r, idx[:, 0], cost[:, 0], np.arange(len(r.queries)))
    for i in range(0, 200, 20):
        q = r.queries[i]
        a, b = r.box.nearest(q, k=3, init_index=i), r.box.nearest(q, k=3, init_index=i, weights=None)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        a, b = r.brute.nearest(q, k=3), r.brute.nearest(q, k=3, weights=None)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


# ---------------------------------------------------------------- small random data
@st.composite
def small_problem(draw):
    n = draw(st.integers(1, 300))
    d = draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["normal", "integers", "duplicates", "offset", "walk"]))
    if kind == "normal":
        f = rng.normal(size=(n, d))
    elif kind == "integers":  # many exact ties
        f = rng.integers(-2, 3, size=(n, d)).astype(float)
    elif kind == "duplicates":
        base = rng.normal(size=(max(1, n // 7), d))
        f = base[rng.integers(len(base), size=n)]
    elif kind == "offset":  # far from the origin, small spread
        f = 1000.0 + 0.01 * rng.normal(size=(n, d))
    else:  # smooth like motion data
        f = np.cumsum(rng.normal(scale=0.1, size=(n, d)), axis=0)
    valid = rng.random(n) < draw(st.sampled_from([1.0, 0.9, 0.3]))
    if not valid.any():
        valid[rng.integers(n)] = True
    mask = None
    if draw(st.booleans()):
        mask = rng.random(n) < draw(st.sampled_from([0.5, 0.05]))
        mask[np.flatnonzero(valid)[0]] = True
    allowed = valid & (mask if mask is not None else True)
    k = draw(st.integers(1, min(12, int(allowed.sum()))))
    nq = draw(st.integers(1, 6))
    q = f[rng.integers(n, size=nq)] + rng.normal(scale=draw(st.sampled_from([0.0, 0.01, 1.0])), size=(nq, d))
    if kind == "integers" and draw(st.booleans()):
        q = np.round(q)
    init = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    return f.astype(np.float32), valid, mask, k, q, init


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problem())
def test_box_equals_brute_on_small_random_data(problem):
    f, valid, mask, k, queries, init = problem
    box = BoxSearch(f, valid)
    brute = BruteForceSearch(f, valid)
    allowed = valid & (mask if mask is not None else True)
    for q in queries:
        want = brute.nearest(q, mask=mask, k=k)
        got = box.nearest(q, mask=mask, k=k, init_index=init)
        assert_same_knn(f, q, got, want, allowed)
        # the oracle against plain float64 numpy
        d = np.where(allowed, exact_dist(f, np.arange(len(f)), q), np.inf)
        np.testing.assert_allclose(want[1], np.sort(d)[:k], rtol=RTOL, atol=1e-12)
    bi, bd = box.nearest_batch(queries, mask=mask, k=k)
    for row, q in enumerate(queries):
        si, sd = box.nearest(q, mask=mask, k=k)
        np.testing.assert_array_equal(bi[row], si)
        np.testing.assert_array_equal(bd[row], sd)
    _, wd = brute.nearest_batch(queries, mask=mask, k=k)
    np.testing.assert_allclose(bd, wd, rtol=RTOL, atol=1e-12)


@st.composite
def weight_vectors(draw, d: int):
    """Per-dimension weights: the controls' range, zeros, all zero, unit, orders of magnitude
    apart, tiny (float32-subnormal square roots) and large."""
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    kind = draw(st.sampled_from(["controls", "zeros", "all zero", "ones", "wide", "tiny", "large"]))
    if kind == "controls":
        return rng.uniform(0.5, 2.0, d)
    if kind == "zeros":
        return np.where(rng.random(d) < 0.5, 0.0, rng.uniform(0.5, 2.0, d))
    if kind == "all zero":
        return np.zeros(d)
    if kind == "ones":
        return np.ones(d)
    if kind == "wide":
        return 10.0 ** rng.uniform(-6, 6, d)
    if kind == "tiny":
        return np.where(rng.random(d) < 0.5, 10.0 ** rng.uniform(-90, -40, d), rng.uniform(0.5, 2.0, d))
    return 10.0 ** rng.uniform(8, 15, d)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problem(), st.data())
def test_weighted_box_and_brute_equal_numpy_oracle_on_small_random_data(problem, data):
    """Weighted single (with ``init_index``) and batched searches of both searchers against
    plain float64 numpy, on the data of :func:`small_problem` (ties, duplicates, offsets)."""
    f, valid, mask, k, queries, init = problem
    w = data.draw(weight_vectors(f.shape[1]))
    box = BoxSearch(f, valid)
    brute = BruteForceSearch(f, valid)
    allowed = valid & (mask if mask is not None else True)
    bi, bd = box.nearest_batch(queries, mask=mask, k=k, weights=w)
    wi, wd = brute.nearest_batch(queries, mask=mask, k=k, weights=w)
    for row, q in enumerate(queries):
        want = weighted_oracle(f, allowed, q, w, k)
        assert_weighted_knn(f, q, w, box.nearest(q, mask=mask, k=k, init_index=init, weights=w), want, allowed)
        assert_weighted_knn(f, q, w, brute.nearest(q, mask=mask, k=k, init_index=init, weights=w), want, allowed)
        assert_weighted_knn(f, q, w, (bi[row], bd[row]), want, allowed)
        assert_weighted_knn(f, q, w, (wi[row], wd[row]), want, allowed)
        si, sd = box.nearest(q, mask=mask, k=k, weights=w)
        np.testing.assert_array_equal(bi[row], si)
        np.testing.assert_array_equal(bd[row], sd)


@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e5, 1e9])
def test_weighted_box_exact_at_any_scale(scale):
    """Weighted bounds stay conservative beyond float16's range and for tiny values, with
    weights of 0 and far from 1."""
    rng = np.random.default_rng(14)
    f = (np.cumsum(rng.normal(size=(3000, 6)), axis=0) * scale).astype(np.float32)
    box, brute = BoxSearch(f), BruteForceSearch(f)
    allowed = np.ones(len(f), dtype=bool)
    for w in (np.array([0.0, 1.0, 2.0, 0.5, 0.0, 1.5]), 10.0 ** rng.uniform(-3, 3, 6)):
        for q in f[rng.integers(len(f), size=20)] + rng.normal(scale=0.3 * scale, size=(20, 6)):
            want = weighted_oracle(f, allowed, q, w, 3)
            assert_weighted_knn(f, q, w, box.nearest(q, k=3, weights=w), want, allowed)
            assert_weighted_knn(f, q, w, brute.nearest(q, k=3, weights=w), want, allowed)


@pytest.mark.parametrize("dim", [15, 17, 33])
def test_weighted_box_exact_for_wider_features(dim):
    """Weighted row distances over 16-lane chunks and their masked tails."""
    rng = np.random.default_rng(dim + 100)
    f = np.cumsum(rng.normal(size=(2011, dim)), axis=0).astype(np.float32)
    valid = rng.random(len(f)) < 0.9
    box = BoxSearch(f, valid)
    w = np.where(rng.random(dim) < 0.3, 0.0, rng.uniform(0.5, 2.0, dim))
    for q in f[rng.integers(len(f), size=15)] + rng.normal(scale=0.5, size=(15, dim)):
        assert_weighted_knn(f, q, w, box.nearest(q, k=4, weights=w), weighted_oracle(f, valid, q, w, 4), valid)


def test_weights_of_any_type_and_layout_are_accepted():
    """Lists, float32, integers and strided views give the float64 weights' answer."""
    rng = np.random.default_rng(15)
    f = np.cumsum(rng.normal(size=(700, 4)), axis=0).astype(np.float32)
    box, brute = BoxSearch(f), BruteForceSearch(f)
    q = f[100] + 0.3
    w = np.array([2.0, 0.0, 1.0, 3.0])
    want = brute.nearest(q, k=3, weights=w)
    wide = np.zeros(8)
    wide[::2] = w
    for ww in (w.tolist(), w.astype(np.float32), w.astype(np.int64), wide[::2], np.asfortranarray(w)):
        for s in (box, brute):
            got = s.nearest(q, k=3, weights=ww)
            np.testing.assert_array_equal(got[1], s.nearest(q, k=3, weights=w)[1])
            np.testing.assert_allclose(got[1], want[1], rtol=RTOL)
        np.testing.assert_array_equal(box.nearest_batch(q[None], k=3, weights=ww)[1][0], box.nearest(q, k=3, weights=w)[1])


@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e4, 1e5, 1e9])
def test_box_exact_at_any_scale(scale):
    """Values beyond float16's range (65504) or tiny ones: the coded/half-precision bounds
    stay conservative."""
    rng = np.random.default_rng(3)
    f = (np.cumsum(rng.normal(size=(3000, 6)), axis=0) * scale).astype(np.float32)
    f[:, 0] += np.float32(7 * scale)
    box, brute = BoxSearch(f), BruteForceSearch(f)
    for q in f[rng.integers(len(f), size=40)] + rng.normal(scale=0.3 * scale, size=(40, 6)):
        assert_same_knn(f, q, box.nearest(q, k=3), brute.nearest(q, k=3))


@pytest.mark.parametrize("dim", [15, 16, 17, 33, 64])
def test_box_exact_for_wider_features(dim):
    """Dimensions around and above the 16-lane chunks of the row distance code."""
    rng = np.random.default_rng(dim)
    f = np.cumsum(rng.normal(size=(2011, dim)), axis=0).astype(np.float32)
    valid = rng.random(len(f)) < 0.9
    box, brute = BoxSearch(f, valid), BruteForceSearch(f, valid)
    mask = rng.random(len(f)) < 0.5
    for q in f[rng.integers(len(f), size=15)] + rng.normal(scale=0.5, size=(15, dim)):
        assert_same_knn(f, q, box.nearest(q, k=4), brute.nearest(q, k=4), valid)
        assert_same_knn(f, q, box.nearest(q, mask=mask), brute.nearest(q, mask=mask), valid & mask)


def test_constant_and_single_frame_data():
    f = np.zeros((100, 4), dtype=np.float32)
    for s in (BoxSearch(f), BruteForceSearch(f)):
        i, d = s.nearest(np.ones(4), k=5)
        assert d.tolist() == [4.0] * 5 and len(set(i.tolist())) == 5
    one = np.array([[1.0, 2.0]], dtype=np.float32)
    for s in (BoxSearch(one), BruteForceSearch(one)):
        i, d = s.nearest([1.0, 0.0])
        assert i.tolist() == [0] and d.tolist() == [4.0]


def test_build_searcher_and_protocol():
    f = np.random.default_rng(4).normal(size=(500, 5)).astype(np.float32)
    for method, cls in (("box", BoxSearch), ("brute", BruteForceSearch)):
        s = build_searcher(f, method=method)
        assert isinstance(s, cls) and isinstance(s, Searcher)
        assert s.method == method and s.n_frames == 500 and s.dim == 5
    assert isinstance(build_searcher(f), BoxSearch)
    with pytest.raises(SearchError, match="method"):
        build_searcher(f, method="kdtree")


def test_masks_of_any_memory_layout():
    """Masks that are unaligned or strided views, and lengths that are not a multiple of 16."""
    rng = np.random.default_rng(8)
    f = np.cumsum(rng.normal(size=(1001, 5)), axis=0).astype(np.float32)
    box, brute = BoxSearch(f), BruteForceSearch(f)
    big = rng.random(2 * 1001 + 3) < 0.3
    for mask in (big[1:1002], big[::2][:1001], big[3:1004].copy(), ~big[5:1006]):
        for q in f[rng.integers(len(f), size=10)] + 0.2:
            assert_same_knn(f, q, box.nearest(q, mask=mask, k=3), brute.nearest(q, mask=mask, k=3), mask)


def test_read_only_masks_are_remembered_and_writable_ones_read_anew():
    """A read-only mask that owns its data (a controller's tag mask) has its leaf flags
    computed once; a writable mask changed between calls is read anew each time; both give
    the brute force's answer, and asking a remembered mask for more frames than it admits
    still fails."""
    rng = np.random.default_rng(9)
    f = np.cumsum(rng.normal(size=(3000, 6)), axis=0).astype(np.float32)
    box, brute = BoxSearch(f), BruteForceSearch(f)
    shared = rng.random(3000) < 0.3
    shared.setflags(write=False)
    qs = f[rng.integers(len(f), size=20)] + 0.3
    for q in qs:
        assert_same_knn(f, q, box.nearest(q, mask=shared, k=3), brute.nearest(q, mask=shared, k=3), shared)
    assert id(shared) in box._masks
    few = np.zeros(3000, dtype=bool)
    few[[10, 2000]] = True
    few.setflags(write=False)
    box.nearest(qs[0], mask=few, k=2)
    with pytest.raises(SearchError, match="only 2 frames"):
        box.nearest(qs[0], mask=few, k=3)  # (remembered now: the count is checked from the cache)
    live = np.zeros(3000, dtype=bool)
    for lo in (0, 1000, 2000):
        live[:] = False
        live[lo : lo + 500] = True  # the same writable array, changed
        for q in qs[:5]:
            got = box.nearest(q, mask=live, k=2)
            assert_same_knn(f, q, got, brute.nearest(q, mask=live, k=2), live)
            assert ((got[0] >= lo) & (got[0] < lo + 500)).all()
    assert id(live) not in box._masks


def test_query_dtypes_and_lists_are_accepted():
    f = np.random.default_rng(5).normal(size=(400, 3)).astype(np.float32)
    box, brute = BoxSearch(f), BruteForceSearch(f)
    q = f[7] + 0.01
    want = brute.nearest(q)
    for qq in (q, q.astype(np.float32), q.tolist(), np.asfortranarray(q)):
        assert_same_knn(f, q.astype(np.float64), box.nearest(qq), want)
    assert box.nearest(np.array([1, 2, 3]))[0].shape == (1,)
    qs = np.stack([q, q + 1])
    assert box.nearest_batch(qs.tolist())[0].shape == (2, 1)
    assert box.nearest_batch(np.empty((0, 3)))[0].shape == (0, 1)


# ---------------------------------------------------------------- validation
@pytest.fixture(scope="module")
def small():
    f = np.random.default_rng(6).normal(size=(200, 4)).astype(np.float32)
    valid = np.ones(200, dtype=bool)
    valid[-5:] = False
    return f, valid, BoxSearch(f, valid), BruteForceSearch(f, valid)


@pytest.mark.parametrize("which", [2, 3])
def test_validation_messages_name_the_argument(small, which):
    searchers = small[2:]
    s = searchers[which - 2]
    q = np.zeros(4)
    cases = [
        (lambda: s.nearest(np.zeros(3)), "query"),
        (lambda: s.nearest(np.zeros((1, 4))), "query"),
        (lambda: s.nearest(np.array([0.0, np.nan, 0.0, 0.0])), "query.*NaN"),
        (lambda: s.nearest(np.array([0.0, np.inf, 0.0, 0.0])), "query"),
        (lambda: s.nearest(np.array([0.0, 1e30, 0.0, 0.0])), "query"),
        (lambda: s.nearest(np.array(["a", "b", "c", "d"])), "query"),
        (lambda: s.nearest(q, mask=np.ones(199, dtype=bool)), "mask"),
        (lambda: s.nearest(q, mask=np.ones(200, dtype=np.int8)), "mask"),
        (lambda: s.nearest(q, mask=np.ones((200, 1), dtype=bool)), "mask"),
        (lambda: s.nearest(q, k=0), "k"),
        (lambda: s.nearest(q, k=-2), "k"),
        (lambda: s.nearest(q, k=1.5), "k"),
        (lambda: s.nearest(q, k=True), "k"),
        (lambda: s.nearest(q, k=196), "k.*195"),
        (lambda: s.nearest(q, k=4, mask=np.arange(200) < 3), "k.*3"),
        (lambda: s.nearest(q, mask=np.arange(200) >= 195), "k.*0"),
        (lambda: s.nearest(q, init_index=200), "init_index"),
        (lambda: s.nearest(q, init_index=-1), "init_index"),
        (lambda: s.nearest_batch(np.zeros(4)), "queries"),
        (lambda: s.nearest_batch(np.zeros((2, 5))), "queries"),
        (lambda: s.nearest_batch(np.array([[0.0] * 4, [np.nan] * 4])), "queries.*row 1"),
        (lambda: s.nearest_batch(np.zeros((2, 4)), k=0), "k"),
        (lambda: s.nearest_batch(np.zeros((2, 4)), mask=np.ones(3, dtype=bool)), "mask"),
        (lambda: s.nearest(q, weights=np.ones(3)), r"weights.*\(4,\)"),
        (lambda: s.nearest(q, weights=np.ones((1, 4))), "weights"),
        (lambda: s.nearest(q, weights=1.0), "weights"),
        (lambda: s.nearest(q, weights=np.array([1.0, -0.5, 1.0, 1.0])), "weights.*negative.*1"),
        (lambda: s.nearest(q, weights=np.array([1.0, 1.0, np.nan, 1.0])), "weights.*NaN.*2"),
        (lambda: s.nearest(q, weights=[1.0, 1.0, np.nan, 1.0]), "weights.*NaN"),
        (lambda: s.nearest(q, weights=np.array([np.inf, 1.0, 1.0, 1.0])), "weights.*infinite"),
        (lambda: s.nearest(q, weights=np.array([1e20, 1.0, 1.0, 1.0])), "weights.*larger"),
        (lambda: s.nearest(q, weights=np.array(["a", "b", "c", "d"])), "weights.*numeric"),
        (lambda: s.nearest(q, weights=np.ones(4)[::-1] * -1), "weights.*negative"),
        (lambda: s.nearest_batch(np.zeros((2, 4)), weights=np.ones(5)), "weights"),
        (lambda: s.nearest_batch(np.zeros((2, 4)), weights=np.array([1.0, -1.0, 1.0, 1.0])), "weights"),
        (lambda: s.nearest_batch(np.zeros((2, 4)), weights=np.array([1.0, 1.0, 1.0, np.nan])), "weights"),
    ]
    for call, pattern in cases:
        with pytest.raises(SearchError, match=pattern):
            call()
    # the messages are one line
    with pytest.raises(SearchError) as err:
        s.nearest(q, weights=np.array([1.0, 1.0, np.nan, 1.0]))
    assert "\n" not in str(err.value)
    # SearchError is a ValueError
    with pytest.raises(ValueError):
        s.nearest(np.zeros(3))


@pytest.mark.parametrize("cls", [BoxSearch, BruteForceSearch])
def test_build_validation(cls):
    good = np.zeros((10, 3), dtype=np.float32)
    with pytest.raises(SearchError, match="features"):
        cls(np.zeros(10))
    with pytest.raises(SearchError, match="features"):
        cls(np.zeros((0, 3)))
    bad = good.copy()
    bad[4, 1] = np.nan
    with pytest.raises(SearchError, match=r"features.*frame 4, dimension 1"):
        cls(bad)
    with pytest.raises(SearchError, match="features"):
        cls(np.full((4, 2), 1e20))
    with pytest.raises(SearchError, match="features"):
        cls(np.array([["a", "b"]]))
    with pytest.raises(SearchError, match="valid"):
        cls(good, np.ones(9, dtype=bool))
    with pytest.raises(SearchError, match="valid"):
        cls(good, np.ones(10))
    s = cls(good, np.zeros(10, dtype=bool))  # nothing valid: every search asks too much
    with pytest.raises(SearchError, match=r"k.*0"):
        s.nearest(np.zeros(3))


# ---------------------------------------------------------------- benchmark (benchmarks/bench_search.py)
@pytest.fixture(scope="module")
def bench() -> SimpleNamespace:
    """The search benchmark's modules, imported from the repository's ``benchmarks/``:
    ``timing`` (``search_timing.py``: measuring, report, BLAS threads) and ``command``
    (``bench_search.py``)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return SimpleNamespace(timing=importlib.import_module("search_timing"),
                               command=importlib.import_module("bench_search"))
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def _tiny_db(folder: Path, n=3000, d=6, queries=True) -> None:
    rng = np.random.default_rng(7)
    folder.mkdir(parents=True)
    f = np.cumsum(rng.normal(scale=0.1, size=(n, d)), axis=0).astype(np.float32)
    np.save(folder / "features_normalized.npy", f)
    if queries:
        np.save(folder / "queries_normalized.npy", (f[rng.integers(n, size=30)] + 0.05).astype(np.float32))


def test_run_benchmark_on_user_folder(tmp_path, bench):
    _tiny_db(tmp_path / "mine", queries=False)
    res = bench.timing.run_benchmark(tmp_path / "mine", n_queries=12, ks=(1, 3), batch=20, block=5)
    assert list(res) == ["mine"]
    r = res["mine"]
    assert r["frames"] == 3000 and r["queries"] == 12
    for key in ("numpy_us", "best_method", "best_us", "speedup_vs_numpy", "box_k3_us", "batch_speedup_vs_numpy"):
        assert key in r
    assert r["exact"]["box"]["mismatches"] == 0 and r["exact"]["box"]["reference"] == "brute"
    text = bench.timing.format_report(res)
    assert "single query" in text and "box" in text and "numpy" in text
    json.dumps(res)


def test_bench_search_command_json(tmp_path, capsys, bench):
    _tiny_db(tmp_path / "db_x")
    _tiny_db(tmp_path / "db_y", n=2000)
    main = bench.command.main
    assert main(["--data", str(tmp_path), "--json", "--queries", "8", "--batch", "10", "--k", "1", "--methods", "box"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(out) == ["db_x", "db_y"]
    assert out["db_x"]["best_method"] == "box" and out["db_x"]["numpy_us"] > 0 and out["db_x"]["speedup_vs_numpy"] > 0
    for bad in (["--data", str(tmp_path / "nothing")], ["--data", str(tmp_path), "--k", "1,x"],
                ["--data", str(tmp_path), "--queries", "0"], ["--data", str(tmp_path), "--methods", "nope"]):
        assert main(bad) == 1
        assert "error" in capsys.readouterr().err


def test_bench_search_weights_option(tmp_path, capsys, bench):
    """``--weights``: weighted contenders timed beside the unweighted ones, their ratios, and
    their answers checked against the float64 numpy oracle."""
    _tiny_db(tmp_path / "db_x")
    assert bench.command.main(["--data", str(tmp_path), "--json", "--queries", "8", "--batch", "10", "--k", "1,3",
                               "--weights"]) == 0
    r = json.loads(capsys.readouterr().out)["db_x"]
    for m in ("brute", "box"):
        assert r["single"]["k1"][f"{m}+w"]["median_us"] > 0 and r["batch"]["k3"][f"{m}+w_s"] > 0
        assert r["exact"][f"{m}+w"]["mismatches"] == 0 and "weighted" in r["exact"][f"{m}+w"]["reference"]
        assert r["weights"]["single_ratio"]["k1"][m] > 0 and r["weights"]["batch_ratio"]["k3"][m] > 0
    assert "weighted" in bench.timing.format_report({"db_x": r})
    # the oracle: the smallest weighted distance over valid frames, as plain numpy computes it
    d = bench.timing.BenchData(tmp_path / "db_x")
    w = np.linspace(0.5, 2.0, d.features.shape[1])
    want = [float(np.min(((d.features.astype(np.float64) - q) ** 2 * w).sum(axis=1))) for q in d.queries]
    np.testing.assert_allclose(bench.timing.weighted_reference(d.features, d.valid, d.queries, w), want, rtol=1e-12)


def test_blas_threads_limits_and_restores(bench):
    blas_thread_count, blas_threads = bench.timing.blas_thread_count, bench.timing.blas_threads
    before = blas_thread_count()
    with blas_threads(1) as how:
        assert isinstance(how, str)
        if how != "unchanged" and before is not None:
            assert blas_thread_count() == 1
    assert blas_thread_count() == before
