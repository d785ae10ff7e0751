"""Exact search with a two-level axis-aligned bounding-box hierarchy (numba).

Frames are grouped, in database order, into leaves of 16 and top boxes of 64 consecutive
frames. Boxes may straddle clip boundaries: only valid frames enter the bounds, and the
masks decide what may be returned. A query

1. computes the lower bound of every top box at once, together with its distance to one
   representative frame per box (vector instructions over 16 boxes, bounds coded as bytes
   on a grid per group of 16 boxes: the only data every query reads whole is ~1.6 bytes per
   frame);
2. seeds the k best with the nearest representatives (float64 distances), which gives a
   tight bound before any box is opened;
3. visits the top boxes whose bound does not exceed the k-th best distance (the box of the
   best seed first, then those with a bound below half the k-th best, then the others):
   the 4 leaf bounds (float16), then the 16 frames of each surviving leaf at once,
   the most variable dimensions first, abandoning a box or leaf after ``early_dims``
   dimensions when it is already beyond the bound; the memory of the next boxes is
   prefetched meanwhile.

A query may carry per-dimension ``weights [D]`` (``w_d >= 0``): the distance is then
``Σ_d w_d (q_d - f_d)²`` (the high-level controls' multipliers), searched exactly over the
same structures, with bounds scaled by ``sqrt(w_d)``: no copy of the database per weight
vector. ``weights=None`` runs the unweighted kernels unchanged.

See :mod:`._box_kernels` for the layout and for why the coded/float16/float32 arithmetic
never loses the exact (float64) answer, and :mod:`._simd` for the vector code.
"""

from __future__ import annotations

import numpy as np

from motionmatch._jit import readonly
from motionmatch.search import _box_kernels as K
from motionmatch.search._validate import (
    SearchError,
    check_features,
    check_k,
    check_mask,
    check_queries,
    check_query,
    check_weights,
    too_few,
)

#: read-only masks whose leaf flags a searcher keeps (:meth:`BoxSearch._mask_state`)
MASK_CACHE = 16
#: batches of at least this many queries are searched on numba's threads, smaller ones on
#: the calling thread (starting the threads costs about as much as a dozen searches)
THREADS_FROM = 16

__all__ = ["BoxSearch"]


def _f16(x: np.ndarray, direction: int) -> np.ndarray:
    """``x`` as float16 rounded down (``direction < 0``), up (``> 0``) or to nearest (0)."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore"):
        h = x.astype(np.float16)
    if direction:
        wide = h.astype(np.float32)
        bad = wide > x if direction < 0 else wide < x
        h[bad] = np.nextafter(h[bad], np.float16(-np.inf if direction < 0 else np.inf))
    return h


def _group_grids(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``[G, 3, D]`` float32 grids (``base``, ``inv``, ``step = 1/inv``) for the boxes of each
    group, from their bounds ``lo, hi [G, 16, D]`` (``+inf/-inf`` for empty boxes): codes
    ``(value - base) * inv`` span 0 to at most 250 over the group's boxes. ``base`` is rounded
    down to float32; the step has a floor (1e-20) so that far queries stay finite in grid units."""
    with np.errstate(invalid="ignore"):
        fin = np.isfinite(lo)
        base = np.where(fin, lo, np.inf).min(axis=1)
        top = np.where(np.isfinite(hi), hi, -np.inf).max(axis=1)
    empty = ~np.isfinite(base)
    base = np.where(empty, 0.0, base).astype(np.float64)
    top = np.where(empty, 1.0, top).astype(np.float64)
    base32 = base.astype(np.float32)
    down = base32.astype(np.float64) > base
    base32[down] = np.nextafter(base32[down], np.float32(-np.inf))
    step = np.maximum((top - base32) / 250.0, 1e-20)
    inv32 = (1.0 / step).astype(np.float32)
    step32 = (1.0 / inv32.astype(np.float64)).astype(np.float32)
    return np.ascontiguousarray(np.stack([base32, inv32, step32], axis=1))


def _box_bounds(x: np.ndarray, ok: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``[n // size, D]`` of consecutive groups of ``size`` rows of ``x [n, D]``,
    counting only rows with ``ok``; groups without such a row get ``lo=+inf, hi=-inf``."""
    n, d = x.shape
    g = x.reshape(n // size, size, d)
    okg = ok.reshape(n // size, size, 1)
    lo = np.where(okg, g, np.inf).min(axis=1).astype(np.float32)
    hi = np.where(okg, g, -np.inf).max(axis=1).astype(np.float32)
    return lo, hi


class BoxSearch:
    """Exact k-nearest-neighbour search over ``features [F, D]`` with AABBs of 16/64 frames.

    Args:
        features: ``[F, D]`` float array (converted to C-contiguous float32), finite.
        valid: ``[F]`` bool, frames that may ever be returned (``None``: all). Invalid frames
            are left out of the box bounds, which makes the bounds tighter.
        early_dims: number of leading (most variable) dimensions after which a box or leaf
            is abandoned if it is already beyond the k-th best distance (``None``: half of
            ``D``, at least 4; ``D`` disables the early exit).

    Distances are squared Euclidean distances computed in float64 from the float32 features,
    optionally weighted per dimension per call (``weights``); results are exact for that
    metric (equal distances may come in any order). Building
    takes about 0.2 s for 200k frames; the structures take about 1.1x the memory of the
    features (a dimension-permuted copy plus bounds); ``features`` itself is kept, not copied,
    when it is already C-contiguous float32.
    """

    method = "box"

    def __init__(self, features: np.ndarray, valid: np.ndarray | None = None, *, early_dims: int | None = None):
        f, v = check_features(features, valid)
        n, dim = f.shape
        self.features = f
        self.valid = v
        self.n_frames = n
        self.dim = dim
        self.n_valid = int(v.sum())
        # most variable dimensions first: they separate frames soonest
        var = f[v].astype(np.float64).var(axis=0) if self.n_valid else np.zeros(dim)
        self.perm = np.argsort(-var, kind="stable").astype(np.int64)
        self.early_dims = max(1, min(dim, early_dims if early_dims is not None else max(4, dim // 2)))

        group_frames = K.TOP * K.GROUP
        n_pad = -(-n // group_frames) * group_frames
        n_top = n_pad // K.TOP
        n_leaf = n_top * K.PER_TOP
        fp = np.full((n_pad, dim), np.inf, dtype=np.float32)
        fp[:n] = f[:, self.perm]
        okp = np.zeros(n_pad, dtype=bool)
        okp[:n] = v
        fp[~okp] = np.inf

        # leaf bounds: per top box and dimension, the 4 lows then the 4 highs: [T, D, 2, 4]
        leaf_lo, leaf_hi = _box_bounds(fp, okp, K.LEAF)
        leafb = np.empty((n_top, dim, 2, K.PER_TOP), dtype=np.float16)
        leafb[:, :, 0, :] = _f16(leaf_lo, -1).reshape(n_top, K.PER_TOP, dim).transpose(0, 2, 1)
        leafb[:, :, 1, :] = _f16(leaf_hi, +1).reshape(n_top, K.PER_TOP, dim).transpose(0, 2, 1)
        self._leafb = leafb.ravel().view(np.uint16)

        # top bounds and one representative valid frame per top box (the one nearest the
        # mean of its valid frames), coded as uint8 on a grid per group of 16 boxes and
        # dimension: [T/16, D, 3, 16]
        top_lo, top_hi = _box_bounds(fp, okp, K.TOP)  # [T, D]
        okg = okp.reshape(n_top, K.TOP)
        cnt = okg.sum(axis=1)
        g = np.where(okg[:, :, None], fp.reshape(n_top, K.TOP, dim), 0.0).astype(np.float64)
        mean = g.sum(axis=1) / np.maximum(cnt, 1)[:, None]
        dev = np.where(okg, ((g - mean[:, None, :]) ** 2).sum(axis=2), np.inf)
        pick = np.arange(n_top) * K.TOP + dev.argmin(axis=1)
        self._rep_idx = np.where(cnt > 0, pick, -1).astype(np.int64)
        rep = fp[pick].astype(np.float64)  # +inf rows for boxes without valid frames
        n_groups = n_top // K.GROUP
        self._grid = _group_grids(top_lo.reshape(n_groups, K.GROUP, dim), top_hi.reshape(n_groups, K.GROUP, dim))
        gbase = self._grid[:, 0, :].astype(np.float64)[:, None, :]
        ginv = self._grid[:, 1, :].astype(np.float64)[:, None, :]
        with np.errstate(invalid="ignore", over="ignore"):
            codes = (
                np.floor((top_lo.reshape(n_groups, K.GROUP, dim) - gbase) * ginv),  # rounded down
                np.ceil((top_hi.reshape(n_groups, K.GROUP, dim) - gbase) * ginv),  # rounded up
                np.rint((rep.reshape(n_groups, K.GROUP, dim) - gbase) * ginv),
            )
        tops = np.empty((n_groups, dim, 3, K.GROUP), dtype=np.uint8)
        for j, c in enumerate(codes):
            tops[:, :, j, :] = np.clip(np.nan_to_num(c, nan=0.0), 0, 255).astype(np.uint8).transpose(0, 2, 1)
        self._tops = tops.ravel()

        # flags without a call mask: from `valid`
        self._leaf_ok = okp.reshape(n_leaf, K.LEAF).any(axis=1)
        self._top_pen = np.where(cnt > 0, 0.0, np.inf).astype(np.float32)
        self.n_top = n_top
        self.n_leaf = n_leaf
        # `valid` of the whole leaves as uint64 words (2 per leaf), for call masks
        self._n_full_words = (n // K.LEAF) * 2
        self._valid_words = np.ascontiguousarray(v[: self._n_full_words * 8]).view(np.uint64)
        #: per read-only mask: (mask, its checked copy, leaf flags, top penalties, frames admitted)
        self._masks: dict[int, tuple] = {}

    # ------------------------------------------------------------------ helpers
    def _mask_state(self, mask: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mask to test frames against, leaf flags, top penalties) for a call."""
        if mask is None:
            if k > self.n_valid:
                raise too_few(k, self.n_valid)
            return self.valid, self._leaf_ok, self._top_pen
        # a read-only mask that owns its data (a controller's tag mask, shared by every
        # search it makes) cannot change while it is held here: its leaf flags are computed once
        cacheable = type(mask) is np.ndarray and not mask.flags.writeable and mask.base is None
        if cacheable:
            hit = self._masks.get(id(mask))
            if hit is not None and hit[0] is mask:
                if k > hit[4]:
                    raise too_few(k, hit[4])
                return hit[1:4]
        m = check_mask(mask, self.n_frames)
        leaf_ok = np.empty(self.n_leaf, dtype=bool)
        top_pen = np.empty(self.n_top, dtype=np.float32)
        words = m[: self._n_full_words * 8].view(np.uint64)
        count = K.mask_boxes(words, self._valid_words, m, self.valid, leaf_ok, top_pen)
        if cacheable:
            if len(self._masks) >= MASK_CACHE:
                self._masks.pop(next(iter(self._masks)))
            self._masks[id(mask)] = (mask, m, leaf_ok, top_pen, count)  # (holds the mask: its id stays its own)
        if k > count:
            raise too_few(k, count)
        return m, leaf_ok, top_pen

    # ------------------------------------------------------------------ API
    def nearest(
        self,
        query: np.ndarray,
        *,
        mask: np.ndarray | None = None,
        k: int = 1,
        init_index: int | None = None,
        weights: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` frames nearest to ``query [D]`` among valid frames with ``mask [F]`` true.

        ``init_index``: a frame whose distance seeds the search bound (e.g. the frame playing
        now); ignored if it is masked out or not valid. ``weights``: ``[D]`` per-dimension
        multipliers of the squared differences (finite, ``>= 0``; the distance is
        ``Σ_d w_d (q_d - f_d)²``, in the features' units squared times the weights' units),
        ``None`` for all ones. Returns ``(indices [k] int64, squared distances [k] float64)``,
        ascending.
        """
        if type(k) is not int or k < 1:
            k = check_k(k)
        q = query
        if not (type(q) is np.ndarray and q.dtype == np.float64 and q.shape == (self.dim,)):
            q = np.asarray(q)
            if q.ndim != 1 or q.shape[0] != self.dim:
                raise SearchError(f"query: expected shape ({self.dim},), got {q.shape}")
            if q.dtype.kind not in "fiu":
                raise SearchError(f"query: expected a numeric array, got dtype {q.dtype}")
            q = q.astype(np.float64)
        w = weights
        if w is not None and not (type(w) is np.ndarray and w.dtype == np.float64 and w.shape == (self.dim,)
                                  and w.flags.c_contiguous):
            w = check_weights(w, self.dim)  # (the kernel checks the values)
        m, leaf_ok, top_pen = self._mask_state(mask, k)
        init = -1
        if init_index is not None:
            init = int(init_index)
            if not 0 <= init < self.n_frames:
                raise SearchError(f"init_index: expected a frame index in [0, {self.n_frames}), got {init_index}")
            if not (self.valid[init] and m[init]):
                init = -1
        out_i = np.empty(k, dtype=np.int64)
        out_d = np.empty(k, dtype=np.float64)
        ok = K.search_one(q, self.perm, k, init, readonly(m), self.valid, leaf_ok, top_pen, self._tops, self._grid,
                          self._rep_idx, self._leafb, self.features, out_i, out_d, self.early_dims,
                          None if w is None else readonly(w))
        if not ok:
            check_query(q, self.dim)  # raises the precise error
            check_weights(w, self.dim)
            raise SearchError("query: rejected by the search kernel")  # pragma: no cover
        return out_i, out_d

    def prepare(self, query: np.ndarray, mask: np.ndarray | None, init_index: int, weights: np.ndarray | None,
                out_i: np.ndarray, out_d: np.ndarray) -> tuple:
        """The arguments of :meth:`nearest` for one nearest frame (``k = 1``), checked here,
        for :meth:`run_prepared` to search with later, perhaps on another thread (it takes
        no lock). ``query [D]`` and ``weights [D]`` (or ``None``) float64 and contiguous,
        ``init_index`` a frame or -1, ``out_i [1]`` int64 and ``out_d [1]`` float64 take the
        answer; the arrays must stay as they are until it has run."""
        m, leaf_ok, top_pen = self._mask_state(mask, 1)
        init = int(init_index)
        if not (0 <= init < self.n_frames and self.valid[init] and m[init]):
            init = -1
        return (query, self.perm, 1, init, readonly(m), self.valid, leaf_ok, top_pen, self._tops, self._grid,
                self._rep_idx, self._leafb, self.features, out_i, out_d, self.early_dims,
                None if weights is None else readonly(weights))

    @staticmethod
    def run_prepared(args: tuple) -> bool:
        """The search of :meth:`prepare`'s ``args``: ``False`` when a query or weight value is
        out of range (:meth:`nearest` with the same arguments says which)."""
        return K.search_one(*args)

    def nearest_batch(
        self,
        queries: np.ndarray,
        *,
        mask: np.ndarray | None = None,
        k: int = 1,
        weights: np.ndarray | None = None,
        init_indices: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`nearest` for each row of ``queries [Q, D]``; ``weights [D]`` (or ``None``)
        apply to every query; ``init_indices [Q]`` (or ``None``) seed each query's search
        as :meth:`nearest`'s ``init_index`` (-1, an invalid or masked-out frame: none).
        Batches of at least :data:`THREADS_FROM` queries run in parallel (numba threads),
        smaller ones on the calling thread.

        Returns ``(indices [Q, k] int64, squared distances [Q, k] float64)``.
        """
        if type(k) is not int or k < 1:
            k = check_k(k)
        w = weights
        if w is not None and not (type(w) is np.ndarray and w.dtype == np.float64 and w.shape == (self.dim,)
                                  and w.flags.c_contiguous):
            w = check_weights(w, self.dim)  # (the kernels check the values)
        m, leaf_ok, top_pen = self._mask_state(mask, k)
        q64 = queries
        if not (type(q64) is np.ndarray and q64.ndim == 2 and q64.shape[1] == self.dim and q64.dtype.kind == "f"):
            q64 = check_queries(queries, self.dim)
        elif q64.dtype != np.float64 or not q64.flags.c_contiguous:
            q64 = np.ascontiguousarray(q64, dtype=np.float64)  # (values checked by the kernels, or below)
        nq = q64.shape[0]
        out_i = np.empty((nq, k), dtype=np.int64)
        out_d = np.empty((nq, k), dtype=np.float64)
        if nq >= THREADS_FROM:
            q64 = check_queries(q64, self.dim)  # (the threads' kernel trusts its queries, weights and seeds)
            w = check_weights(w, self.dim)
            K.search_batch(q64, self._seeds(init_indices, m, nq), self.perm, k, m, self.valid, leaf_ok, top_pen,
                           self._tops, self._grid, self._rep_idx, self._leafb, self.features, out_i, out_d,
                           self.early_dims, w)
        elif nq:
            seeds = np.full(nq, -1, dtype=np.int64) if init_indices is None else self._seed_array(init_indices, nq)
            bad = K.search_serial(q64, seeds, self.perm, k, readonly(m), self.valid, leaf_ok, top_pen, self._tops,
                                  self._grid, self._rep_idx, self._leafb, self.features, out_i, out_d,
                                  self.early_dims, None if w is None else readonly(w))
            if bad >= 0:
                check_queries(q64, self.dim)  # raises the precise error
                check_weights(w, self.dim)
                raise SearchError(f"queries: row {bad} rejected by the search kernel")  # pragma: no cover
        return out_i, out_d

    def _seed_array(self, init_indices, nq: int) -> np.ndarray:
        """``init_indices`` as ``[nq]`` int64 (a seed that is not a valid frame in the mask seeds nothing)."""
        s = init_indices
        if not (type(s) is np.ndarray and s.dtype == np.int64 and s.shape == (nq,)):
            s = np.asarray(s)
            if s.shape != (nq,) or s.dtype.kind not in "iu":
                raise SearchError(f"init_indices: expected {nq} integer frame indices, got {s.dtype} {list(s.shape)}")
            s = s.astype(np.int64)
        return s

    def _seeds(self, init_indices: np.ndarray | None, mask: np.ndarray, nq: int) -> np.ndarray:
        """``[nq]`` int64 seed frames (-1: none) from ``init_indices`` (``None``: none), for the
        threads' kernel (which trusts its seeds)."""
        if init_indices is None:
            return np.full(nq, -1, dtype=np.int64)
        s = self._seed_array(init_indices, nq)
        inside = (s >= 0) & (s < self.n_frames)
        c = np.where(inside, s, 0)
        return np.where(inside & self.valid[c] & mask[c], s, -1)
