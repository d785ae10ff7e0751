"""Environment-penalised motion-matching search (Environment-aware Motion Matching, Sec. 4.2, 5.4).

A frame's score is its weighted squared query distance plus, for each of its future body
ellipses (the environment features, stored raw in the database), log-barrier penalties of
its signed distances to the obstacles near the character (see
:mod:`motionmatch.search._penalized_kernels` for the formula and
:mod:`motionmatch.geometry.shapes` for the distances and the barrier). The search
returns the frame of lowest score.

Methods (:attr:`SearchOptions.method`):

``"linear"``
    every frame, with the base optimisations only (query distance first, early rejection
    against the best score, obstacles nearest first and disks first, cheap bounds before
    exact distances): exact, the reference.
``"coherent-approx"`` (also read as ``"coherent"``, its former name)
    the paper's temporal-coherence search: representative frames (at least ``min_stride``
    apart and differing by ``rep_threshold`` of a dimension's range), a segment search
    around each representative that beats the best, a dissimilarity-based stride with
    aggressiveness ``v``, starting about 1% of the representatives before the previous
    best match. Approximate. With ``block_bounds`` (ours, not the paper's) runs of
    ``block_size`` representatives carry byte-coded per-dimension bounds of their segments'
    frames; a run whose box is already farther from the query than the best score is
    skipped whole (no frame in it could win). With ``collision_fallback`` a result that
    still collides is replaced by the linear search's (so it never returns a colliding
    frame when a collision-free one scores lower).
``"plain"``
    no environment: the accelerated search on query features (plain motion matching).

One compiled call (:func:`._penalized_kernels.run_search`) runs the search, the
collision fallback and the summary of the result; :class:`SearchBuffers` lets a caller
that searches every few frames reuse its arrays and packed parameters.

Every method first pre-selects obstacles around the query trajectory (the caller does
this with :func:`prepare_obstacles`); with none near, all but ``"linear"`` fall back to
the plain accelerated search (``plain_when_clear``), which then costs what plain motion
matching costs. Each optimisation can be switched off for the ablation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from motionmatch._jit import readonly
from motionmatch.geometry.shapes import ROW
from motionmatch.search import _penalized_kernels as PK
from motionmatch.search._validate import SearchError, check_features
from motionmatch.search.box import BoxSearch

__all__ = ["METHODS", "PenalizedSearch", "PenaltyParams", "SearchBuffers", "SearchOptions", "SearchResult",
           "control_weights", "gather_static", "prepare_obstacles", "prepare_obstacles_into", "prepare_static",
           "trajectory_points"]

METHODS = ("coherent-approx", "linear", "plain")
#: former names still read in settings and scenario files
_ALIASES = {"coherent": "coherent-approx"}


@dataclass(frozen=True)
class PenaltyParams:
    """Obstacle penalties.

    Attributes:
        threshold: distance (m) below which penalties start (the paper: 0.4 for tight
            spaces, 0.6 otherwise).
        exponent: how fast the barrier grows toward contact (the paper: 4).
        env_weight: W_env, the weight of all penalties (before Anticipation scaling).
        slot_weights: per-ellipse weights (first, second, third future ellipse); the later
            ones are lower: immediate collisions matter most.
        margin: clearance (m) subtracted from every distance (0: the skeleton's ellipse).
        height_low, height_top: margins (m) below the lowest and above the highest joint
            when gating by height (the head joint is ~0.1 m below the top of the head).
        use_heights: gate obstacles with a height range by the body's vertical extent
            (needs a database with height features).
        disk_body: ablation: the body is the circle around its ellipse.
    """

    threshold: float = 0.6
    exponent: float = 4.0
    env_weight: float = 2.0
    slot_weights: tuple[float, ...] = (1.0, 0.6, 0.3)
    margin: float = 0.0
    height_low: float = 0.02
    height_top: float = 0.12
    use_heights: bool = True
    disk_body: bool = False

    def slot_weight_array(self, n_slots: int) -> np.ndarray:
        """``[n_slots]`` per-ellipse weights (missing entries: 1)."""
        slotw = np.ones(n_slots)
        sw = np.asarray(self.slot_weights, dtype=np.float64)
        slotw[: min(len(sw), n_slots)] = sw[:n_slots]
        return slotw

    def packed(self, env_weight: float | None = None, heights_available: bool = True) -> np.ndarray:
        pp = np.zeros(PK.NP)
        pp[PK.P_DHAT] = self.threshold
        pp[PK.P_KAPPA] = self.exponent
        pp[PK.P_MARGIN] = self.margin
        pp[PK.P_HLOW] = self.height_low
        pp[PK.P_HTOP] = self.height_top
        pp[PK.P_HEIGHTS] = 1.0 if (self.use_heights and heights_available) else 0.0
        pp[PK.P_DISK] = 1.0 if self.disk_body else 0.0
        pp[PK.P_ENVW] = self.env_weight if env_weight is None else env_weight
        return pp


@dataclass(frozen=True)
class SearchOptions:
    """Which search and which optimisations (every one can be switched off).

    Attributes:
        method: ``"coherent-approx"`` (the paper's full method, approximate; ``"coherent"``
            is read as it), ``"linear"`` (exact) or
            ``"plain"`` (see the module docstring).
        plain_when_clear: with no obstacle pre-selected, run the plain accelerated search.
        adaptive: representatives ``min_stride`` apart and ``rep_threshold`` different
            (off: every valid frame is a representative: the "No Adaptive" ablation).
        dissimilarity: the dissimilarity-based stride over representatives (off: stride 1).
        v: aggressiveness of that stride.
        warm_start: start near the previous best match and seed the best score with the
            frame playing now (off: from frame 0: the "Start 0" ablation).
        start_back: how far before the previous best's representative to start (fraction
            of the representatives).
        collision_fallback: if the coherent result still collides, use the linear (exact)
            search's result.
        max_stride: cap of the dissimilarity stride (in representatives).
        segment_slack: also open the segment of a representative whose query distance is
            below ``segment_slack`` times the best score (1: only when it beats the best,
            as in the paper); a little more work for better matches.
        block_bounds: skip a whole block of ``block_size`` consecutive representatives when
            the box bounding the features of their segments is farther from the query than
            the best score (no frame it skips could beat the best so far: work saved, not
            quality; the stride restarts at the next block).
        block_size: representatives per block (8: about 160 frames; on the dense-obstacle
            scenario 2, 4 and 8 cost about the same, and 8 kept the path error closest to
            the reference method's).
        super_blocks: blocks per super-block (0: none): with block bounds, the box of each
            run of ``super_blocks`` blocks is checked first and the run skipped whole when it
            cannot win (same guarantee as the blocks).
    """

    method: str = "coherent-approx"
    plain_when_clear: bool = True
    adaptive: bool = True
    dissimilarity: bool = True
    v: float = 0.5
    warm_start: bool = True
    start_back: float = 0.01
    collision_fallback: bool = True
    max_stride: int = 64
    segment_slack: float = 1.0
    block_bounds: bool = True
    block_size: int = 8
    super_blocks: int = 0

    def __post_init__(self) -> None:
        if self.method in _ALIASES:
            object.__setattr__(self, "method", _ALIASES[self.method])
        if self.method not in METHODS:
            raise SearchError(f"method: expected one of {METHODS}, got {self.method!r}")
        if not self.v >= 0:
            raise SearchError(f"v: expected >= 0, got {self.v}")
        if int(self.block_size) < 1:
            raise SearchError(f"block_size: expected >= 1, got {self.block_size}")
        if int(self.super_blocks) < 0:
            raise SearchError(f"super_blocks: expected >= 0, got {self.super_blocks}")

    def with_(self, **changes) -> SearchOptions:
        return replace(self, **changes)


@dataclass
class SearchResult:
    """One penalised search.

    Attributes:
        index: the best frame; score: its total score; distance: its weighted query
            distance; penalty: its weighted penalty (``score - distance``).
        clearance: ``[K]`` its smallest signed distance per ellipse (m; ``inf``: no obstacle).
        collides: whether one of its ellipses overlaps an obstacle.
        method: the method that produced it (``"plain"`` when nothing was near,
            ``"exact"`` after a collision fallback).
        stats: counters (distances started, penalty evaluations, exact signed distances,
            segments opened, representatives visited, blocks skipped).
    """

    index: int
    score: float
    distance: float
    penalty: float
    clearance: np.ndarray
    collides: bool
    method: str
    stats: dict


_A_INIT, _A_PREV, _A_CUR = PK.A_INIT, PK.A_PREV, PK.A_CUR
_USED_NAMES = ("linear", "coherent-approx", "linear", "plain")
STAT_NAMES = ("distances", "penalties", "signed_distances", "segments", "representatives", "blocks_skipped")


class SearchBuffers:
    """Preallocated buffers of repeated :meth:`PenalizedSearch.search` calls (one per
    character): counters, clearance and summary arrays, the packed penalty parameters of the
    last :class:`PenaltyParams` (re-packed only when another object is passed), and ``cur``,
    a frame whose full score each search leaves in ``out[2]`` (-1: none).

    Attributes:
        stats: ``[NS]`` int64 counters of the last search; clearance: ``[K]`` float64;
        out: ``[4]`` float64: score, distance, score of ``cur``, collides (0/1).
        qcodes, qpad: scratch of the search kernel (``[3, Dp]`` float32: the query's
            block-bound codes; ``[3, D + (-D % 16)]`` float64: query, weights, best frame);
            :meth:`gaps_for` gives its per-block bounds scratch.
    """

    def __init__(self, search: PenalizedSearch):
        self.search = search
        self.stats = np.zeros(PK.NS, dtype=np.int64)
        self.qcodes = search.new_qcodes()
        self.qpad = search.new_qpad()
        self._gaps = search.new_gaps(search._none_codes)
        self._tail_key: tuple | None = None  # see PenalizedSearch.choose_into
        self._tail: tuple = ()
        self.clearance = np.empty(search.n_slots)
        self.out = np.empty(4)
        self.cur = -1
        self._pen: PenaltyParams | None = None
        self._slotw = np.ones(search.n_slots)
        self._pp = np.zeros(PK.NP)
        self._envw = 0.0
        self.ia = np.zeros(PK.NA, dtype=np.int64)  # the packed integer arguments of the last search
        self._ia_of: np.ndarray | None = None  # the template they were copied from

    def packed_ints(self, template: np.ndarray, init: int, previous: int | None, cur: int) -> np.ndarray:
        """``ia``: the packed integer arguments of a plan (``template``, copied only when the
        plan changes) with this search's frames (see :meth:`frames_into`)."""
        ia = self.ia
        if self._ia_of is not template:
            ia[:] = template
            self._ia_of = template
        return self.frames_into(ia, init, previous, cur)

    @staticmethod
    def frames_into(ia: np.ndarray, init: int, previous: int | None, cur: int) -> np.ndarray:
        """``ia`` with the frame playing now (``init``, -1: none), the previous best match
        and the frame whose score goes to ``out[2]``."""
        ia[_A_INIT] = init
        ia[_A_PREV] = -1 if previous is None else previous
        ia[_A_CUR] = cur
        return ia

    def gaps_for(self, block_lo: np.ndarray) -> np.ndarray:
        """Scratch of the search kernel: a float32 bound per block of ``block_lo [B, Dp]``."""
        if self._gaps.shape[0] < block_lo.shape[0]:
            self._gaps = self.search.new_gaps(block_lo)
        return self._gaps

    def result(self, index: int, method: str) -> SearchResult:
        """The :class:`SearchResult` of the last search from these buffers (its ``index`` and
        ``method`` as returned by :meth:`PenalizedSearch.search_into`; copies)."""
        out = self.out
        return SearchResult(int(index), float(out[0]), float(out[1]), float(out[0] - out[1]), self.clearance.copy(),
                            bool(out[3] > 0.0), method, dict(zip(STAT_NAMES, self.stats.tolist())))

    def packed(self, pen: PenaltyParams, env_weight: float | None) -> tuple[np.ndarray, np.ndarray]:
        """``(slot weights [K], packed parameters [NP])`` of ``pen`` with ``env_weight``."""
        if pen is not self._pen:
            self._pen = pen
            self._slotw = pen.slot_weight_array(self.search.n_slots)
            self._pp = pen.packed(None, self.search.has_heights)
            self._envw = pen.env_weight
        self._pp[PK.P_ENVW] = self._envw if env_weight is None else env_weight
        return self._slotw, self._pp


class PenalizedSearch:
    """Penalised search over query features and body ellipses.

    Args:
        features: ``[N, D]`` normalised, weighted query features (the columns that enter
            distances: no environment columns).
        valid: ``[N]`` frames that may be returned.
        ellipses: ``[N, K, 5]`` raw ellipse features (centre x, z, semi-major vector x, z,
            semi-minor) in each frame's character frame, or ``[N, K, 7]`` with the lowest
            and highest joint heights.
        clip_starts, clip_stops: ``[C]`` clip ranges (representatives never straddle clips);
            default: one clip.
        min_stride, rep_threshold: representatives (see :class:`SearchOptions`).
        plain: an existing accelerated searcher over ``features`` and ``valid`` to reuse.
    """

    def __init__(self, features: np.ndarray, valid: np.ndarray | None, ellipses: np.ndarray, *,
                 clip_starts: np.ndarray | None = None, clip_stops: np.ndarray | None = None,
                 min_stride: int = 8, rep_threshold: float = 0.05, plain: BoxSearch | None = None):
        f, v = check_features(features, valid)
        self.features = f
        self.valid = v
        self.n_frames, self.dim = f.shape
        e = np.asarray(ellipses, dtype=np.float64)
        if e.ndim != 3 or e.shape[0] != self.n_frames or e.shape[2] not in (5, 7):
            raise SearchError(f"ellipses: expected shape ({self.n_frames}, K, 5 or 7), got {e.shape}")
        self.n_slots = e.shape[1]
        self.has_heights = e.shape[2] == 7
        ell = np.zeros((self.n_frames, self.n_slots, 8), dtype=np.float32)
        a = np.hypot(e[..., 2], e[..., 3])
        safe = np.maximum(a, 1e-9)
        ell[..., 0], ell[..., 1] = e[..., 0], e[..., 1]
        ell[..., 2] = np.where(a > 1e-9, e[..., 2] / safe, 1.0)
        ell[..., 3] = np.where(a > 1e-9, e[..., 3] / safe, 0.0)
        ell[..., 4], ell[..., 5] = a, e[..., 4]
        if self.has_heights:
            ell[..., 6], ell[..., 7] = e[..., 5], e[..., 6]
        else:
            ell[..., 6], ell[..., 7] = 0.0, 2.0
        self.ellipses = ell
        self.plain = plain if plain is not None else BoxSearch(f, v)
        if clip_starts is None:
            clip_starts, clip_stops = np.array([0]), np.array([self.n_frames])
        self.clip_starts = np.asarray(clip_starts, dtype=np.int64)
        self.clip_stops = np.asarray(clip_stops, dtype=np.int64)
        self._reps = {}
        self._bits: dict = {}  # id(mask) -> (mask, reps, packed bits): see _mask_bits
        self._blocks: dict = {}
        self._supers: dict = {}
        self._none_blocks = np.zeros((1, self.dim), dtype=np.float32)
        self._none_codes = np.zeros((1, self.dim + (-self.dim % 8)), dtype=np.uint8)
        self._none_grid = np.ones((2, self.dim))
        self._none_order = np.arange(self.dim, dtype=np.int64)
        self.min_stride = int(min_stride)
        self.rep_threshold = float(rep_threshold)
        self.representatives(True)
        self._ones = np.ones(self.dim)
        self._none_reps = np.zeros(1, dtype=np.int64)
        self._plans: dict = {}
        self._plan_opt: SearchOptions | None = None
        self._plan: tuple = ()
        self._sorted_scratch = np.empty(0)

    # ------------------------------------------------------------ representatives
    def representatives(self, adaptive: bool = True) -> tuple[np.ndarray, ...]:
        """``(reps, rep_features, lo, hi, rep_of)``: representative frames, their features
        (contiguous, rows padded to whole cache lines: the first ``D`` columns), their segments ``[lo, hi)`` and, per frame, the index of its
        representative (``adaptive=False``: every valid frame is its own representative)."""
        key = bool(adaptive)
        if key not in self._reps:
            n = self.n_frames
            reps = np.empty(n, dtype=np.int64)
            lo = np.empty(n, dtype=np.int64)
            hi = np.empty(n, dtype=np.int64)
            fv = self.features[self.valid].astype(np.float64)
            rng = (fv.max(axis=0) - fv.min(axis=0)) if fv.size else np.ones(self.dim)
            inv = np.where(rng > 1e-12, 1.0 / np.maximum(rng, 1e-12), 0.0)
            stride, thr = (self.min_stride, self.rep_threshold) if adaptive else (1, 0.0)
            m = PK.build_representatives(self.features, self.valid, self.clip_starts, self.clip_stops, inv,
                                         stride, thr, reps, lo, hi)
            reps, lo, hi = reps[:m].copy(), lo[:m].copy(), hi[:m].copy()
            rep_of = np.zeros(n, dtype=np.int64)
            for j in range(m):  # segments partition the clips; vectorised fill
                rep_of[lo[j]:hi[j]] = j
            self._reps[key] = (reps, _line_rows(self.features[reps]), lo, hi, rep_of)
        return self._reps[key]

    def block_bounds(self, adaptive: bool = True, size: int = 4) -> tuple[np.ndarray, ...]:
        """``(lo, hi [ceil(R / size), Dp] uint8, grid [2, D], order [D])``: per-dimension bounds of
        the valid frames in the segments of each run of ``size`` consecutive representatives
        (``R`` of them; see :meth:`representatives`), coded on a grid (value = ``grid[0] +
        code * grid[1]``, rounded outward: see :func:`PK.encode_block_bounds`); column ``j``
        holds feature dimension ``order[j]``, by decreasing spread of the block centres (the
        dimensions that separate blocks most come first); ``Dp``: ``D`` rounded up to a
        multiple of 8 (padding columns: the whole grid), cached."""
        key = (bool(adaptive), int(size))
        if key not in self._blocks:
            _reps, _rf, lo, hi, _rep_of = self.representatives(adaptive)
            nb = max((len(lo) + size - 1) // size, 1)
            blo = np.empty((nb, self.dim), dtype=np.float32)
            bhi = np.empty((nb, self.dim), dtype=np.float32)
            PK.build_block_bounds(self.features, self.valid, lo, hi, int(size), blo, bhi)
            fin = np.all(np.isfinite(blo), axis=1)
            spread = ((blo[fin].astype(np.float64) + bhi[fin]) / 2).std(axis=0) if fin.any() else np.zeros(self.dim)
            order = np.argsort(-spread, kind="stable").astype(np.int64)

            clo, chi, grid = PK.encode_block_bounds(blo[:, order], bhi[:, order])
            pad = -self.dim % 8  # whole vector lanes: padded columns never add a gap
            clo = np.concatenate([clo, np.zeros((len(clo), pad), np.uint8)], axis=1)
            chi = np.concatenate([chi, np.full((len(chi), pad), 255, np.uint8)], axis=1)
            self._blocks[key] = (np.ascontiguousarray(clo), np.ascontiguousarray(chi), grid, order)
        return self._blocks[key]

    def super_blocks(self, adaptive: bool, size: int, sup: int) -> tuple[np.ndarray, np.ndarray]:
        """Codes ``(lo, hi) [ceil(B / sup), Dp]`` uint8 of runs of ``sup`` consecutive blocks
        of :meth:`block_bounds` (same grid and column order), cached."""
        key = (bool(adaptive), int(size), int(sup))
        if key not in self._supers:
            blo, bhi, _grid, _order = self.block_bounds(adaptive, size)
            self._supers[key] = PK.super_block_codes(blo, bhi, int(sup))
        return self._supers[key]

    # ------------------------------------------------------------------ search
    def search(self, query: np.ndarray, obstacles: np.ndarray, counts: np.ndarray, *,
               mask: np.ndarray | None = None, init_index: int | None = None, previous: int | None = None,
               weights: np.ndarray | None = None, penalty: PenaltyParams | None = None,
               env_weight: float | None = None, options: SearchOptions | None = None,
               buffers: SearchBuffers | None = None) -> SearchResult:
        """The frame of lowest penalised score.

        Args:
            query: ``[D]`` normalised query (same columns as ``features``).
            obstacles: ``[K, M, ROW]`` obstacle rows per slot in the query's character
                frame, ``counts [K]`` how many per slot (see :func:`prepare_obstacles`).
            mask: ``[N]`` frames allowed for this call (with ``valid``).
            init_index: the frame playing now (seeds the best score; warm start).
            previous: the previous best match (where the coherent search starts).
            weights: ``[D]`` per-dimension multipliers of the squared distance (high-level
                controls); ``None``: all 1.
            penalty: :class:`PenaltyParams`; env_weight: overrides its ``env_weight``.
            options: :class:`SearchOptions`.
            buffers: :class:`SearchBuffers` of this searcher, for a caller that searches
                every few frames (a character's chooser): no allocations, packed penalty
                parameters reused, and only cheap checks (arrays must already be contiguous
                float64 / int64 / bool); the score of ``buffers.cur`` is left in
                ``buffers.out[2]``.
        """
        opt = options or SearchOptions()
        pen = penalty or PenaltyParams()
        if buffers is not None:
            if buffers.search is not self:
                raise SearchError("buffers: made for another PenalizedSearch")
            b = buffers
            m = self.valid if mask is None else mask
            w = self._ones if weights is None else weights
            if query.shape != (self.dim,) or m.shape != (self.n_frames,) or w.shape != (self.dim,) \
                    or obstacles.shape[0] != self.n_slots or counts.shape != (self.n_slots,):
                raise SearchError("query, mask, weights, obstacles or counts: wrong shape")
            slotw, pp = b.packed(pen, env_weight)
            idx, method = self.search_into(query, obstacles, counts, m, init_index, previous, w, slotw, pp, opt, b.cur,
                                           b.stats, b.clearance, b.out, b)
            return b.result(idx, method)
        q = np.ascontiguousarray(query, dtype=np.float64)
        if q.shape != (self.dim,):
            raise SearchError(f"query: expected shape ({self.dim},), got {q.shape}")
        m = self.valid if mask is None else np.ascontiguousarray(mask, dtype=bool)
        if m.shape != (self.n_frames,):
            raise SearchError(f"mask: expected shape ({self.n_frames},), got {m.shape}")
        w = self._ones if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
        if w.shape != (self.dim,):
            raise SearchError(f"weights: expected shape ({self.dim},), got {w.shape}")
        obs = np.ascontiguousarray(obstacles, dtype=np.float64)
        cnt = np.ascontiguousarray(counts, dtype=np.int64)
        if obs.ndim != 3 or obs.shape[0] != self.n_slots or obs.shape[2] != ROW or cnt.shape != (self.n_slots,):
            raise SearchError(f"obstacles: expected shape ({self.n_slots}, M, {ROW}) with counts ({self.n_slots},)")
        if np.any(cnt > obs.shape[1]) or np.any(cnt < 0):
            raise SearchError(f"counts: expected values in [0, {obs.shape[1]}], got {cnt}")
        slotw = pen.slot_weight_array(self.n_slots)
        pp = pen.packed(env_weight, self.has_heights)
        stats = np.zeros(PK.NS, dtype=np.int64)
        clearance = np.empty(self.n_slots)
        out = np.empty(4)
        idx, method = self.search_into(q, obs, cnt, m, init_index, previous, w, slotw, pp, opt, -1, stats,
                                       clearance, out)
        return SearchResult(idx, float(out[0]), float(out[1]), float(out[0] - out[1]), clearance,
                            bool(out[3] > 0.0), method, dict(zip(STAT_NAMES, stats.tolist())))

    def search_into(self, q: np.ndarray, obs: np.ndarray, cnt: np.ndarray, mask: np.ndarray,
                    init_index: int | None, previous: int | None, w: np.ndarray, slotw: np.ndarray, pp: np.ndarray,
                    opt: SearchOptions, cur: int, stats: np.ndarray, clearance: np.ndarray,
                    out: np.ndarray, buffers: SearchBuffers | None = None) -> tuple[int, str]:
        """:meth:`search` without input checks, for a per-frame chooser that owns its
        buffers (one compiled call does the search, the collision fallback and the summary;
        the scalar arguments of each :class:`SearchOptions` are packed once).

        Args:
            q: ``[D]`` float64 contiguous; obs, cnt: as for :meth:`search` (float64 / int64,
                contiguous); mask: ``[N]`` bool; w: ``[D]`` float64 weights;
                slotw: :meth:`PenaltyParams.slot_weight_array`; pp: :meth:`PenaltyParams.packed`.
            cur: a frame whose full score goes to ``out[2]`` (-1: none).
            stats: ``[NS]`` int64 counters of this search (out); clearance: ``[K]`` float64 out;
            out: ``[4]`` float64 out: score, distance, score of ``cur``, collides (0/1).
            buffers: optional :class:`SearchBuffers` whose ``ia`` holds the packed integer
                arguments (re-copied from the options' template only when the options change).

        Returns:
            ``(index, method)``: the best frame and the method that produced it (as
            :attr:`SearchResult.method`).
        """
        plan = self._plan_for(opt)
        init = -1 if init_index is None else init_index
        if buffers is not None:
            ia = buffers.packed_ints(plan[0], init, previous, cur)
        else:  # (the template is shared by every call with these options)
            ia = SearchBuffers.frames_into(plan[0].copy(), init, previous, cur)
        qcodes = buffers.qcodes if buffers is not None else self.new_qcodes()
        qpad = buffers.qpad if buffers is not None else self.new_qpad()
        if ia[PK.A_METHOD] < 0 or (ia[PK.A_CLEAR] and not any(cnt.tolist())):  # plain, or nothing near
            used = PK.USED_CLEAR
        else:
            idx, used = PK.run_search(ia, plan[1], self.features, q, w, self.valid, readonly(mask), self.ellipses, obs,
                                      cnt,
                                      slotw, pp, *plan[2:], stats, clearance, out, qcodes,
                                      self._mask_bits(plan[2], mask), qpad,
                                      buffers.gaps_for(plan[7]) if buffers is not None else self.new_gaps(plan[7]))
        if used == PK.USED_CLEAR:
            return self._plain_choice(q, mask, w, init_index, opt, obs, cnt, slotw, pp, cur, stats, clearance, out), \
                "plain"
        return int(idx), _USED_NAMES[used]

    def _plain_choice(self, q, mask, w, init_index, opt, obs, cnt, slotw, pp, cur, stats, clearance, out) -> int:
        """The plain accelerated search (plain method, or nothing near), warm-started at
        ``init_index`` when allowed, with the penalised summary of its result in ``out``."""
        init = -1
        if init_index is not None and opt.warm_start and 0 <= init_index < self.n_frames \
                and self.valid[init_index] and mask[init_index]:
            init = int(init_index)
        stats[:] = 0
        idx, _ = self._plain(q, mask, w, init)
        if cnt.any():
            PK.summarise(idx, self.features, q, w, self.ellipses, obs, cnt, slotw, pp, cur, clearance, out, stats)
        else:  # (the same values; a character alone needs no penalty kernel compiled)
            PK.plain_summary(idx, self.features, q, w, cur, clearance, out)
        return idx

    def choose_into(self, query: np.ndarray, cols: np.ndarray, masks: tuple, zero: np.ndarray, db_features: np.ndarray,
                    cur: int, controls: tuple[float, float, float], q: np.ndarray, w: np.ndarray, obs: np.ndarray,
                    cnt: np.ndarray, mask: np.ndarray, previous: int | None, slotw: np.ndarray, pp: np.ndarray,
                    opt: SearchOptions, buffers: SearchBuffers) -> tuple[int, str, float]:
        """A chooser's whole choice in one compiled call (:func:`PK.choose`): the query's
        search columns ``query[cols]`` into ``q``, the view's and the high-level controls' weights into ``w``
        (``masks``: columns left out, pose, trajectory position, trajectory direction ``[D]`` bool;
        ``controls``: continuity, responsiveness, evasion factor; see
        :func:`PK.control_weights`), the plain view distance of the whole ``query`` to frame
        ``cur`` of ``db_features`` (columns where ``zero`` is true taken as 0), then
        :meth:`search_into` with ``init_index = cur`` and the score of ``cur`` in
        ``buffers.out[2]``. No checks: every array must be contiguous and of the right type
        (as :meth:`search_into`). Returns ``(index, method, plain distance)``.

        The kernel's arguments from ``ia`` on are kept in ``buffers`` while the plan, the mask,
        the obstacle buffers and the penalty arrays stay the same objects (a chooser's case:
        building them is about a tenth of a search's time); a writable mask is packed anew
        on every call."""
        plan = self._plan if opt is self._plan_opt else self._plan_for(opt)
        b = buffers
        ia = b.packed_ints(plan[0], cur, previous, cur)
        if ia[PK.A_METHOD] < 0 or (ia[PK.A_METHOD] == 1 and ia[PK.A_CLEAR] and not cnt.any()):  # plain, or nothing near
            plain = PK.plain_choice(query, cols, *masks, zero, db_features, cur, controls[0], controls[1], controls[2],
                                    q, w)
            return self._plain_choice(q, mask, w, cur, opt, obs, cnt, slotw, pp, cur, b.stats, b.clearance, b.out), \
                "plain", plain
        key = b._tail_key
        if key is None or key[0] is not plan or key[1] is not mask or key[2] is not obs or key[3] is not cnt \
                or key[4] is not slotw or key[5] is not pp or mask.flags.writeable:
            b._tail = (ia, plan[1], self.features, self.valid, readonly(mask), self.ellipses, obs, cnt, slotw, pp, *plan[2:],
                       b.stats, b.clearance, b.out, b.qcodes, self._mask_bits(plan[2], mask), b.qpad,
                       b.gaps_for(plan[7]))
            b._tail_key = (plan, mask, obs, cnt, slotw, pp)
        idx, used, plain = PK.choose(query, cols, *masks, zero, db_features, cur, controls[0],
                                     controls[1], controls[2], q, w, *b._tail)
        if used == PK.USED_CLEAR:
            return self._plain_choice(q, mask, w, cur, opt, obs, cnt, slotw, pp, cur, b.stats, b.clearance, b.out), \
                "plain", plain
        return int(idx), _USED_NAMES[used], plain

    def _mask_bits(self, reps: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``mask`` at the representatives ``reps``, packed 8 to a byte (:func:`PK.mask_bits`).
        Cached for a read-only mask that owns its data (the controllers' tag masks are
        shared read-only): such a mask must not be made writable and changed while in use."""
        cacheable = not mask.flags.writeable and mask.base is None
        if cacheable:
            hit = self._bits.get(id(mask))
            if hit is not None and hit[0] is mask and hit[1] is reps:
                return hit[2]
        out = np.empty((len(reps) + 7) // 8, dtype=np.uint8)
        PK.mask_bits(reps, mask, out)
        if cacheable:
            if len(self._bits) >= 16:
                self._bits.pop(next(iter(self._bits)))
            self._bits[id(mask)] = (mask, reps, out)  # holds the mask: its id stays its own
        return out

    @staticmethod
    def new_gaps(block_lo: np.ndarray) -> np.ndarray:
        """Scratch of the search kernel: ``[B]`` float32, a bound per block of ``block_lo [B, Dp]``."""
        return np.zeros(max(block_lo.shape[0], 1), dtype=np.float32)

    def new_qpad(self) -> np.ndarray:
        """Scratch of the search kernel: ``[3, D + (-D % 16)]`` float64 (the query, the
        weights and the best frame's features, padded to the representatives' row width)."""
        return np.zeros((3, self.dim + (-self.dim % 16)))

    def new_qcodes(self) -> np.ndarray:
        """Scratch of the search kernel: ``[3, Dp]`` float32 (the query's codes on the grid of
        the block bounds; ``Dp``: the dimension rounded up to a multiple of 8)."""
        return np.zeros((3, self._none_codes.shape[1]), dtype=np.float32)

    def _plan_for(self, opt: SearchOptions) -> tuple:
        """Packed arguments of :func:`PK.run_search` for ``opt`` (cached per options object):
        ``(ia [NA], fa [NF], reps, rep_feats, lo, hi, rep_of, block lo, block hi, block grid, block order)``."""
        if opt is self._plan_opt:
            return self._plan
        plan = self._plans.get(opt)
        if plan is None:
            ia = np.zeros(PK.NA, dtype=np.int64)
            fa = np.zeros(PK.NF)
            ia[PK.A_METHOD] = {"linear": 0, "coherent-approx": 1, "plain": -1}[opt.method]
            ia[PK.A_WARM] = int(bool(opt.warm_start))
            slo = shi = self._none_codes
            if opt.method == "coherent-approx":
                reps, rep_feats, lo, hi, rep_of = self.representatives(opt.adaptive)
                ia[PK.A_DISSIM] = 0 if not opt.dissimilarity else (2 if opt.dissimilarity == "bound" else 1)
                ia[PK.A_MAXSTRIDE] = int(opt.max_stride)
                ia[PK.A_FALLBACK] = int(bool(opt.collision_fallback))
                ia[PK.A_CLEAR] = int(bool(opt.plain_when_clear))
                ia[PK.A_BACK] = round(opt.start_back * len(reps))
                fa[PK.F_V] = float(opt.v)
                fa[PK.F_SLACK] = float(opt.segment_slack)
                if opt.block_bounds:
                    blo, bhi, grid, order = self.block_bounds(opt.adaptive, opt.block_size)
                    ia[PK.A_BLOCK] = int(opt.block_size)
                    if opt.super_blocks > 0:
                        slo, shi = self.super_blocks(opt.adaptive, opt.block_size, opt.super_blocks)
                        ia[PK.A_SUPER] = int(opt.super_blocks)
                else:
                    blo = bhi = self._none_codes
                    grid = self._none_grid
                    order = self._none_order
            else:
                reps = lo = hi = self._none_reps
                rep_of = self._none_reps
                rep_feats = self._none_blocks
                blo = bhi = self._none_codes
                grid = self._none_grid
                order = self._none_order
            plan = (ia, fa, reps, rep_feats, lo, hi, rep_of, blo, bhi, grid, order, slo, shi)
            if len(self._plans) >= 32:
                self._plans.pop(next(iter(self._plans)))
            self._plans[opt] = plan
        self._plan_opt, self._plan = opt, plan
        return plan

    def _plain(self, q, m, w, init):
        """The accelerated (bounding-box) search on query features, weighted by ``w [D]``
        per query (no copy of the database; unit weights take the unweighted path).
        Returns ``(index, weighted squared distance)``."""
        weights = None if w is self._ones or np.all(w == 1.0) else w
        idx, d = self.plain.nearest(q, mask=m, k=1, init_index=init if init >= 0 else None, weights=weights)
        return int(idx[0]), float(d[0])

    def score(self, frames: np.ndarray, query: np.ndarray, obstacles: np.ndarray, counts: np.ndarray, *,
              weights: np.ndarray | None = None, penalty: PenaltyParams | None = None,
              env_weight: float | None = None) -> np.ndarray:
        """Total scores of ``frames`` (no rejection): for tests and for the controller's
        comparison with the frame playing now."""
        pen = penalty or PenaltyParams()
        frames = np.ascontiguousarray(frames, dtype=np.int64).reshape(-1)
        q = np.ascontiguousarray(query, dtype=np.float64)
        w = self._ones if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
        slotw = pen.slot_weight_array(self.n_slots)
        out = np.empty(frames.shape[0])
        PK.score_frames(frames, self.features, q, w, self.ellipses, np.ascontiguousarray(obstacles, dtype=np.float64),
                        np.ascontiguousarray(counts, dtype=np.int64), slotw, pen.packed(env_weight, self.has_heights),
                        out)
        return out

    def clearance(self, frame: int, obstacles: np.ndarray, counts: np.ndarray,
                  penalty: PenaltyParams | None = None) -> np.ndarray:
        """``[K]`` smallest signed distance of each of ``frame``'s ellipses to the obstacles."""
        pen = penalty or PenaltyParams()
        out = np.empty(self.n_slots)
        PK.frame_clearance(int(frame), self.ellipses, np.ascontiguousarray(obstacles, dtype=np.float64),
                           np.ascontiguousarray(counts, dtype=np.int64), pen.packed(None, self.has_heights), out)
        return out


def _line_rows(x: np.ndarray) -> np.ndarray:
    """``x [n, D]`` float32 copied into rows of whole 64-byte cache lines (``D`` padded with
    zeros to a multiple of 16, 64-byte aligned): a row read from a cold cache then touches
    ``ceil(D / 16)`` lines, never one more (kernels loop over the first ``D`` columns only)."""
    n, D = x.shape
    Dp = D + (-D % 16)
    raw = np.zeros(n * Dp + 16, dtype=np.float32)
    off = (-raw.ctypes.data % 64) // 4
    rows = raw[off: off + n * Dp].reshape(n, Dp)
    rows[:, :D] = x
    return rows


def prepare_obstacles(rows: np.ndarray, slot_of: np.ndarray, root_xz, yaw: float, points_local: np.ndarray,
                      radius: float, n_slots: int, out: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, float]:
    """World obstacle rows -> per-slot rows in the character frame, pre-selected and sorted.

    Args:
        rows: ``[M, ROW]`` world rows (static obstacles, moving ones' predicted proxies,
            other agents' future ellipses).
        slot_of: ``[M]`` the slot each row belongs to (-1: every slot).
        root_xz: the character's ground position (x, z); yaw: its heading (rad, 0 = +Z).
        points_local: ``[P, 2]`` query trajectory in the character frame, starting with the
            origin: a row is kept when it comes within ``radius`` of one of them (the
            paper's pre-selection: threshold + the obstacle's radius + about half an arm span).
        n_slots: K.
        out: optional ``[K, >= M, ROW]`` buffer to reuse.

    Returns:
        ``(obstacles [K, M', ROW], counts [K], nearest)``: ``nearest`` is a lower bound of
        the distance from the character to the nearest kept obstacle (``inf``: none).
    """
    r = np.ascontiguousarray(rows, dtype=np.float64).reshape(-1, ROW)
    M = max(r.shape[0], 1)
    if out is None or out.shape[0] != n_slots or out.shape[1] < M:
        out = np.empty((n_slots, M, ROW))
    counts = np.zeros(n_slots, dtype=np.int64)
    key = np.empty(M)
    nearest = PK.prepare_obstacles(r, np.ascontiguousarray(slot_of, dtype=np.int64), float(root_xz[0]),
                                   float(root_xz[1]), float(yaw), np.ascontiguousarray(points_local, dtype=np.float64),
                                   float(radius), out, counts, key)
    return out, counts, float(nearest)


# Compiled obstacle preparation for a caller's per-search glue (a chooser that keeps its own
# buffers): no argument checks, every array must be contiguous and of the kernel's type.
#: ``(pose, pos, direc, continuity, responsiveness, evasion_factor) -> [D]`` control weights
control_weights = PK.control_weights
#: :func:`prepare_obstacles` into the caller's ``out, counts, order_key`` buffers
prepare_obstacles_into = PK.prepare_obstacles
#: the same for the rows ``rows[ids]`` of static obstacles (every slot)
prepare_static = PK.prepare_static
#: the pre-selection points (root and query trajectory), world and character frame
trajectory_points = PK.trajectory_points
#: points, grid query and pre-selection in one call for a scene of static obstacles
gather_static = PK.gather_static
