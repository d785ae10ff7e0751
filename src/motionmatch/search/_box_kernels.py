"""Numba kernels of :class:`motionmatch.search.BoxSearch` (two-level AABB exact search).

Layout (built by :class:`motionmatch.search.box.BoxSearch`): the ``D`` dimensions are
permuted so that the most variable come first; frames are padded to ``T * 64`` (``T`` top
boxes of 64 frames, a multiple of 16), ``L = 4 T`` leaves of 16 frames.

- ``tops``: uint8 ``[T / 16, D, 3, 16]``: for each group of 16 top boxes and each
  dimension, their 16 lows, 16 highs and the values of their 16 representative frames, as
  codes on a grid of the group and dimension, ``value = base + code / inv`` (lows rounded
  down and highs up, so the coded box holds the true box); one group is read with vector
  loads, dimension by dimension (165 KB with the grids for 100k frames: the part every
  query reads whole is small);
- ``grid``: float32 ``[T / 16, 3, D]``: ``base`` (rounded down), ``inv`` and
  ``step = 1 / inv`` of each group's grid;
- ``top_pen``: ``[T]`` float32, 0 for a box with an unmasked valid frame, else ``+inf``;
- ``rep_idx``: ``[T]`` int64, the representative frame of each top box (-1 if none);
- ``leafb``: uint16 bits of float16 ``[T, D, 2, 4]``: for each top box and dimension, the
  lows (rounded down) then the highs (rounded up) of its 4 leaves;
- ``leaf_ok``: ``[L]`` bool, leaf has an unmasked valid frame;
- ``feats``: float32 ``[F, D]``: the database itself (original dimension order): the frames
  of a surviving leaf are measured from its 16 consecutive rows (vector code, 16 dimensions
  at a time), and each candidate again in float64. No copy of the database is made: the
  search structures take ~10% of its memory.

Bounds count only valid frames; boxes without one have ``lo = +inf, hi = -inf``.

Exactness: bounds and distances are computed in float32 (from float16 or grid-coded bounds
rounded outwards, which only loosens them), and a box or frame is rejected only when that value
exceeds :func:`_threshold` of the current k-th best *float64* distance. The threshold
covers the float32 rounding, so no frame whose float64 distance could beat the k-th best is
ever rejected (for the coded top bounds, the query is converted to grid units in float64,
and the margin of 2^-12 code the bounds are widened by at query time is far above the error
of that conversion); every frame that passes is re-measured in float64 from ``feats`` and only
float64 distances enter the result.

Weighted queries (``weights [D]``, ``w_d >= 0``: the distance ``Σ_d w_d (q_d - f_d)²``) run
the same search with the root of every float32 term (a gap or a difference, in the
features' units) multiplied by ``sqrt(w_d)`` rounded *down* to float32
(:func:`._simd.top_block16qw`, :func:`._simd.box_lb4hw`, :func:`._simd.rowdist16w`): a
bound stays below its exact weighted value up to one more rounding per term, which the
threshold's slack covers together with the weighted norm of the query (see
:func:`_threshold`); the float64 re-measure is the weighted distance. A zero weight makes a
dimension's terms 0 (an empty box's infinite gap included). The search structures and the
dimension order are the unweighted ones, so weights that favour dimensions that vary
little prune less well. ``weights=None`` compiles the unweighted kernels unchanged (numba
drops the ``weights is None`` branches of each specialisation).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from motionmatch.search._simd import (
    box_lb4h,
    box_lb4hw,
    prefetch,
    rowdist16,
    rowdist16w,
    top_block16q,
    top_block16qw,
)
from motionmatch.search._validate import MAX_ABS

LEAF = 16
TOP = 64
PER_TOP = TOP // LEAF  # 4
GROUP = 16  # top boxes per vector group in ``tops``
PREFETCH_AHEAD = 8  # candidate top boxes whose leaf bounds are prefetched ahead


@numba.njit(cache=True, nogil=True)
def _threshold(best, slack_mul, slack_add):
    """float32 rejection threshold for a current k-th best float64 distance ``best``.

    ``slack_mul = 1 + (D + 16) u`` and ``slack_add = u ‖q‖² + 1e-30`` (``u = 2^-24``): the
    float32 distance (or box lower bound) of a point whose float64 distance is ``< best`` is
    at most ``(1 + u)^(D + 4) (best + u ‖q‖²)`` (rounding of the D differences, squares and
    sums, and of the query to float32; by Minkowski's inequality the query's rounding adds
    at most ``u ‖q‖`` to the root of the distance; the grid-coded bounds add two roundings
    per term, the step and the scaling by it), and ``slack_mul`` keeps a few more ulps for
    the rounding of the threshold itself to float32.

    Weighted (``Σ w_d (q_d - f_d)²``): ``‖q‖²`` becomes ``Σ w_d q_d²`` (Minkowski's inequality
    for the weighted norm) and ``slack_mul = 1 + (D + 32) u``: each term has one more
    rounding, the product of its root by ``sqrt(w_d)`` (two ulps of the square; the scale
    itself is rounded down, which only lowers a bound; the underflow of tiny products is
    covered by the 1e-30).
    """
    if best == np.inf:
        return np.float32(np.inf)
    return np.float32((best + slack_add) * slack_mul)


@numba.njit(cache=True, nogil=True)
def _insert(out_i, out_d, k, i, d):
    """Insert frame ``i`` of float64 distance ``d`` (``d < out_d[k-1]``) into the sorted k best."""
    p = k - 1
    while p > 0 and out_d[p - 1] > d:
        out_d[p] = out_d[p - 1]
        out_i[p] = out_i[p - 1]
        p -= 1
    out_d[p] = d
    out_i[p] = i


@numba.njit(cache=True, nogil=True)
def _kept(out_i, k, i):
    """Whether frame ``i`` is already among the k best (rare path: candidates only)."""
    for j in range(k):
        if out_i[j] == i:
            return True
    return False


@numba.njit(cache=True, nogil=True)
def _dist64(feats, i, q64):
    d = feats.shape[1]
    s = 0.0
    for j in range(d):
        t = np.float64(feats[i, j]) - q64[j]
        s += t * t
    return s


@numba.njit(cache=True, nogil=True)
def _wdist64(feats, i, q64, w64):
    """``Σ_j w64[j] (feats[i, j] - q64[j])²`` in float64 (``t * t * 1.0`` is ``t * t``: unit
    weights give :func:`_dist64`'s value bit for bit)."""
    d = feats.shape[1]
    s = 0.0
    for j in range(d):
        t = np.float64(feats[i, j]) - q64[j]
        s += t * t * w64[j]
    return s


@numba.njit(cache=True, nogil=True)
def _down32(x):
    """``x >= 0`` (float64) as the largest float32 not above it (a scale that only lowers bounds)."""
    y = np.float32(x)
    if np.float64(y) > x:
        y = np.nextafter(y, np.float32(0.0))
    return y


@numba.njit(cache=True, nogil=True)
def mask_boxes(mask_words, valid_words, mask, valid, leaf_ok, top_pen):
    """Per-box flags for a call mask: ``leaf_ok [L]`` (the leaf has a valid frame in the mask)
    and ``top_pen [T]`` (0, or ``+inf`` for a top box without one). Returns the number of
    valid frames in the mask.

    ``mask_words``/``valid_words``: the bool arrays of the first ``16 * (F // 16)`` frames
    viewed as uint64 (2 words per leaf, one byte per frame); ``mask``/``valid``: ``[F]`` bool,
    for the last, partial leaf. About 5 µs for 100k frames.
    """
    n = mask.shape[0]
    full = mask_words.shape[0] // 2
    total = 0
    for leaf in range(full):
        a = mask_words[2 * leaf] & valid_words[2 * leaf]
        b = mask_words[2 * leaf + 1] & valid_words[2 * leaf + 1]
        leaf_ok[leaf] = (a | b) != 0
        # bytes are 0 or 1: their sum is the top byte of the product with 0x0101...01
        total += ((a * np.uint64(0x0101010101010101)) >> np.uint64(56)) + (
            (b * np.uint64(0x0101010101010101)) >> np.uint64(56)
        )
    for leaf in range(full, leaf_ok.shape[0]):
        c = 0
        for i in range(leaf * LEAF, min(leaf * LEAF + LEAF, n)):
            c += mask[i] & valid[i]
        leaf_ok[leaf] = c > 0
        total += c
    for t in range(top_pen.shape[0]):
        ok = leaf_ok[t * PER_TOP] | leaf_ok[t * PER_TOP + 1] | leaf_ok[t * PER_TOP + 2] | leaf_ok[t * PER_TOP + 3]
        top_pen[t] = np.float32(0.0) if ok else np.float32(np.inf)
    return int(total)


@numba.njit(cache=True, nogil=True)
def search_one(
    q64, perm, k, init_index, mask, valid, leaf_ok, top_pen, tops, grid, rep_idx, leafb, feats,
    out_i, out_d, n_early, weights,
):
    """Exact k nearest neighbours of one query; returns ``False`` (and does nothing) if a
    query value is NaN, infinite or larger than ``MAX_ABS`` in magnitude, or a weight is not
    in ``[0, MAX_ABS]``.

    ``q64``: ``[D]`` float64 query (original dimension order); ``perm``: ``[D]`` the
    dimension order of the search structures; ``init_index``: a frame to seed the bound
    with (-1: none; the caller checks that it is valid and in the mask). ``mask``/``valid``:
    ``[F]`` bool (pass ``valid`` twice without a call mask). ``out_i``/``out_d``: ``[k]``
    results (ascending float64 squared distances). ``n_early``: dimensions after which a box
    or a leaf is abandoned when already beyond the bound. ``weights``: ``None`` (the plain
    squared distance) or ``[D]`` float64 per-dimension weights of the squared differences
    (original dimension order). The caller guarantees at least ``k`` valid frames in the
    mask. See the module docstring for the other arrays.

    The hot loops call no function taking arrays: such a call updates the reference counts
    of its array arguments atomically, which took half of the time in a first version.
    """
    dim = q64.shape[0]
    n = feats.shape[0]
    n_top = top_pen.shape[0]
    z = np.float32(0.0)
    qp = np.empty(dim, dtype=np.float32)
    q32 = np.empty(dim, dtype=np.float32)
    qn2 = 0.0  # the (weighted) squared norm of the query
    for d in range(dim):
        x = q64[d]
        if not abs(x) <= MAX_ABS:
            return False
        if weights is None:
            qn2 += x * x
        else:
            wd = weights[d]
            if not (wd >= 0.0 and wd <= MAX_ABS):
                return False
            qn2 += wd * x * x
        qp[d] = np.float32(q64[perm[d]])
        q32[d] = np.float32(x)
    u = 2.0**-24
    if weights is None:
        slack_mul = 1.0 + (dim + 16) * u
    else:
        slack_mul = 1.0 + (dim + 32) * u
        # sqrt(w) rounded down to float32, in the original order (frames) and permuted
        # (leaf and top bounds)
        sw = np.empty(dim, dtype=np.float32)
        swp = np.empty(dim, dtype=np.float32)
        for d in range(dim):
            sw[d] = _down32(np.sqrt(weights[d]))
        for d in range(dim):
            swp[d] = sw[perm[d]]
    slack_add = u * qn2 + 1e-30
    for j in range(k):
        out_i[j] = -1
        out_d[j] = np.inf
    if init_index >= 0:
        if weights is None:
            _insert(out_i, out_d, k, init_index, _dist64(feats, init_index, q64))
        else:
            _insert(out_i, out_d, k, init_index, _wdist64(feats, init_index, q64, weights))

    # 1. lower bounds of all top boxes and distances to their representatives (vectorised)
    lb = np.empty(n_top, dtype=np.float32)
    rd = np.empty(n_top, dtype=np.float32)
    qp64 = np.empty(dim)  # the query in the permuted order, float64
    for d in range(dim):
        qp64[d] = q64[perm[d]]
    qc = np.empty(dim, dtype=np.float32)  # the query in a group's grid units
    step = np.empty(dim, dtype=np.float32)
    group = dim * 3 * GROUP
    for g in range(n_top // GROUP):
        for d in range(dim):
            qc[d] = np.float32((qp64[d] - np.float64(grid[g, 0, d])) * np.float64(grid[g, 1, d]))
            step[d] = grid[g, 2, d]
        if weights is None:
            top_block16q(tops, g * group, qc, step, top_pen, lb, rd, g * GROUP)
        else:
            top_block16qw(tops, g * group, qc, step, swp, top_pen, lb, rd, g * GROUP)

    # 2. seed the k best with the nearest representatives: a tight bound from the start
    thr = _threshold(out_d[k - 1], slack_mul, slack_add)
    for t in range(n_top):
        if rd[t] <= thr:
            i = rep_idx[t]
            if i >= 0 and mask[i]:
                if weights is None:
                    d64 = _dist64(feats, i, q64)
                else:
                    d64 = _wdist64(feats, i, q64, weights)
                if d64 < out_d[k - 1] and not _kept(out_i, k, i):
                    _insert(out_i, out_d, k, i, d64)
                    thr = _threshold(out_d[k - 1], slack_mul, slack_add)

    # 3. candidate top boxes (a tight loop: the visiting loop below keeps many values live
    # and is slow to step over pruned boxes): the box of the best seed first, then those
    # with a bound below half the current one (roughly best-first without a sort: the
    # bound tightens sooner), then the rest
    cand = np.empty(n_top, dtype=np.int64)
    nc = 0
    half = thr * np.float32(0.5)
    for t in range(n_top):
        if lb[t] <= half:
            cand[nc] = t
            nc += 1
    for t in range(n_top):
        if lb[t] <= thr and lb[t] > half:
            cand[nc] = t
            nc += 1
    if nc:
        # first: the box of the best seed, or without one (masks can exclude every
        # representative) the box of smallest bound
        first = 0
        if out_i[0] >= 0:
            bt = out_i[0] // TOP
            for ci in range(nc):
                if cand[ci] == bt:
                    first = ci
                    break
        else:
            for ci in range(1, nc):
                if lb[cand[ci]] < lb[cand[first]]:
                    first = ci
        bt = cand[first]
        cand[first] = cand[0]
        cand[0] = bt

    # 4. visit them: leaf bounds (with an early exit after `ne` dimensions), then the frames
    # of each surviving leaf; memory is prefetched ahead
    acc = np.empty(LEAF, dtype=np.float32)
    lbl = np.empty(PER_TOP, dtype=np.float32)
    ne = min(max(n_early, 1), dim)
    stride_top = dim * 2 * PER_TOP
    for ci in range(nc):
        if ci + PREFETCH_AHEAD < nc:
            o2 = cand[ci + PREFETCH_AHEAD] * stride_top
            for p in range(0, ne * 2 * PER_TOP, 32):  # 32 float16 per cache line
                prefetch(leafb, o2 + p)
        t = cand[ci]
        if lb[t] > thr:
            continue
        o = t * stride_top
        for c in range(PER_TOP):
            lbl[c] = z
        if weights is None:
            if box_lb4h(leafb, o, qp, 0, ne, lbl) > thr:
                continue
            box_lb4h(leafb, o, qp, ne, dim, lbl)
        else:
            if box_lb4hw(leafb, o, qp, swp, 0, ne, lbl) > thr:
                continue
            box_lb4hw(leafb, o, qp, swp, ne, dim, lbl)
        for c in range(PER_TOP):
            leaf = t * PER_TOP + c
            if lbl[c] > thr or not leaf_ok[leaf]:
                continue
            # the (up to) 16 frames of the leaf, read from the rows of `feats` (no copy of
            # the database: a smaller memory footprint and the rows the float64 check reads)
            base = leaf * LEAF
            nrows = min(LEAF, n - base)
            ob = base * dim
            for p in range(0, nrows * dim, 16):  # 16 float32 per cache line
                prefetch(feats, ob + p)
            if weights is None:
                if rowdist16(feats, base, nrows, q32, acc) > thr:
                    continue
            else:
                if rowdist16w(feats, base, nrows, q32, sw, acc) > thr:
                    continue
            for j in range(LEAF):
                if acc[j] <= thr:
                    i = base + j
                    if i < n and valid[i] and mask[i]:
                        if weights is None:
                            d64 = _dist64(feats, i, q64)
                        else:
                            d64 = _wdist64(feats, i, q64, weights)
                        if d64 < out_d[k - 1] and not _kept(out_i, k, i):
                            _insert(out_i, out_d, k, i, d64)
                            thr = _threshold(out_d[k - 1], slack_mul, slack_add)
    return True


@numba.njit(cache=True, nogil=True, parallel=True)
def search_batch(
    q64s, seeds, perm, k, mask, valid, leaf_ok, top_pen, tops, grid, rep_idx, leafb, feats, out_i, out_d, n_early,
    weights,
):
    """:func:`search_one` for each row of ``q64s [Q, D]`` (finite, checked by the caller, as
    ``weights``: ``None`` or ``[D]``, the same for every query), seeded with ``seeds [Q]``
    (-1: none; checked by the caller), in parallel over queries; results in
    ``out_i``/``out_d`` ``[Q, k]``."""
    for s in prange(q64s.shape[0]):
        search_one(q64s[s], perm, k, seeds[s], mask, valid, leaf_ok, top_pen, tops, grid, rep_idx, leafb, feats,
                   out_i[s], out_d[s], n_early, weights)


@numba.njit(cache=True, nogil=True)
def search_serial(
    q64s, seeds, perm, k, mask, valid, leaf_ok, top_pen, tops, grid, rep_idx, leafb, feats, out_i, out_d, n_early,
    weights,
):
    """:func:`search_batch` on the calling thread, one query after another (a few queries:
    starting threads would cost more than they give). ``seeds [Q]`` may name any frame: one
    outside the frames, not valid or not in ``mask`` seeds nothing. Returns the first query
    :func:`search_one` refused (a value out of range), ``-1`` when none was."""
    n = valid.shape[0]
    for s in range(q64s.shape[0]):
        seed = seeds[s]
        if seed < 0 or seed >= n or not valid[seed] or not mask[seed]:
            seed = -1
        if not search_one(q64s[s], perm, k, seed, mask, valid, leaf_ok, top_pen, tops, grid, rep_idx, leafb, feats,
                          out_i[s], out_d[s], n_early, weights):
            return s
    return -1
