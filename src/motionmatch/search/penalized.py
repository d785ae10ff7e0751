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

One compiled call (:func:`._choice_kernels.run_search`) runs the search, the
collision fallback and the summary of the result; :class:`SearchBuffers` lets a caller
that searches every few frames reuse its arrays and packed parameters.

Every method first pre-selects obstacles around the query trajectory (the caller does
this with :func:`prepare_obstacles`); with none near, all but ``"linear"`` fall back to
the plain accelerated search (``plain_when_clear``), which then costs what plain motion
matching costs. Each optimisation can be switched off for the ablation.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from motionmatch._jit import readonly
from motionmatch.geometry.shapes import ROW
from motionmatch.search import _choice_kernels as PC
from motionmatch.search import _coarse_index as CI
from motionmatch.search import _obstacle_kernels as OK
from motionmatch.search import _penalized_kernels as PK
from motionmatch.search._validate import SearchError, check_features
from motionmatch.search.box import BoxSearch
from motionmatch.search.penalty_settings import METHODS, PenaltyParams, SearchOptions, SearchResult

__all__ = ["METHODS", "PenalizedSearch", "PenaltyParams", "SearchBuffers", "SearchOptions", "SearchResult",
           "chooser_view", "control_weights", "gather_static", "gather_with_agents", "prepare_obstacles",
           "prepare_obstacles_into",
           "prepare_static", "trajectory_points"]

_USED_NAMES = ("linear", "coherent-approx", "linear", "plain")
STAT_NAMES = ("distances", "penalties", "signed_distances", "segments", "representatives", "blocks_skipped")


class SearchBuffers:
    """Preallocated buffers of repeated :meth:`PenalizedSearch.search` calls (one per
    character): counters, clearance and summary arrays, the search kernel's scratch, the
    packed penalty parameters of the last :class:`PenaltyParams` (re-packed only when
    another object is passed), and ``cur``, a frame whose full score each search leaves in
    ``out[2]`` (-1: none).

    Attributes:
        stats: ``[NS]`` int64 counters of the last search; clearance: ``[K]`` float64;
        out: ``[4]`` float64: score, distance, score of ``cur``, collides (0/1).
        scratch: these and the search kernel's scratch as the kernels take them (a plain
            :class:`PK.Scratch`; :meth:`scratch_for` grows its per-block bounds).
    """

    def __init__(self, search: PenalizedSearch):
        self.search = search
        self.stats = np.zeros(PK.NS, dtype=np.int64)
        self.clearance = np.empty(search.n_slots)
        self.out = np.empty(4)
        self.cur = -1
        self.box_i, self.box_d = np.empty(1, dtype=np.int64), np.empty(1)  # (a plain search's answer)
        D = search.dim
        # the query's block-bound codes [3, Dp] (Dp: D rounded up to a multiple of 8), and the
        # query, weights and best frame padded to the representatives' row width
        self._qcodes = np.zeros((3, D + (-D % 8)), dtype=np.float32)
        self._qpad = np.zeros((3, D + (-D % 16)))
        self._gaps = np.zeros(1, dtype=np.float32)
        self.scratch = self._scratch()
        self._tail_key: tuple | None = None  # see PenalizedSearch.choose_into
        self._tail: tuple = ()
        self._pen: PenaltyParams | None = None
        self._penalty: tuple = ()

    def _scratch(self) -> tuple:
        return tuple(PK.Scratch(self.stats, self.clearance, self.out, self._qcodes, self._qpad, self._gaps))

    def scratch_for(self, block_lo: np.ndarray) -> tuple:
        """:attr:`scratch` with a float32 bound per block of ``block_lo [B, Dp]``."""
        if self._gaps.shape[0] < block_lo.shape[0]:
            self._gaps = np.zeros(block_lo.shape[0], dtype=np.float32)
            self.scratch = self._scratch()
        return self.scratch

    def penalty(self, pen: PenaltyParams) -> tuple:
        """``pen`` as the kernels take it (a plain :meth:`PenaltyParams.packed`)."""
        if pen is not self._pen:
            self._pen = pen
            self._penalty = tuple(pen.packed(self.search.n_slots, self.search.has_heights))
        return self._penalty

    def result(self, index: int, method: str) -> SearchResult:
        """The :class:`SearchResult` of the last search from these buffers (its ``index`` and
        ``method`` as returned by :meth:`PenalizedSearch.search_into`; copies)."""
        out = self.out
        return SearchResult(int(index), float(out[0]), float(out[1]), float(out[0] - out[1]), self.clearance.copy(),
                            bool(out[3] > 0.0), method, dict(zip(STAT_NAMES, self.stats.tolist())))


class ChoiceJob:
    """One choice of :meth:`PenalizedSearch.choice_job`: :meth:`run` makes it (the compiled
    search alone: it takes no lock and releases the interpreter's, so another thread may run
    it while the caller prepares the next), :meth:`PenalizedSearch.choice_end` reads it.

    Attributes:
        args: the search kernel's arguments (``None``: nothing to run, the choice is the
            plain accelerated search's); idx, used, plain: the kernel's answer (the frame,
            the method's code, the plain distance to the frame playing now).
        plain_args: the arguments of the plain accelerated search of a choice with
            nothing near (run by :meth:`PenalizedSearch.choice_end` when :attr:`box` is
            ``None``).
        box: that plain search made ready (:meth:`BoxSearch.prepare`) with its summary's
            arguments, for :meth:`run` to make (two compiled calls: it may run on another
            thread), ``None`` when :meth:`PenalizedSearch.choice_end` runs it; box_done:
            whether :meth:`run` made it.
        cpu_s, wall_s: the run's thread CPU and wall time (s); error: what it raised.
        context: the caller's (e.g. a chooser's clock readings), carried along.
    """

    __slots__ = ("args", "box", "box_done", "context", "cpu_s", "error", "idx", "plain", "plain_args", "used",
                 "wall_s")

    def __init__(self, plain_args: tuple):
        self.args: tuple | None = None
        self.box: tuple | None = None
        self.box_done = False
        self.plain_args = plain_args
        self.idx = -1
        self.used = PK.USED_CLEAR
        self.plain = 0.0
        self.cpu_s = self.wall_s = 0.0
        self.error: BaseException | None = None
        self.context = None

    @property
    def runs(self) -> bool:
        """Whether :meth:`run` has a compiled search to make (the penalised one or :attr:`box`)."""
        return self.args is not None or self.box is not None

    def run(self, cpu: bool = True) -> None:
        """Run the search kernel (nothing when there is none: :attr:`runs`); an exception is
        kept in :attr:`error`, raised by :meth:`PenalizedSearch.choice_end`. ``cpu``: measure
        :attr:`cpu_s` (false: :func:`run_jobs` sets it)."""
        if self.args is None and self.box is None:
            return
        t0 = time.perf_counter()
        c0 = time.thread_time() if cpu else 0.0
        try:
            if self.args is not None:
                self.idx, self.used, self.plain = PC.choose(*self.args)
            else:  # (the plain search and its summary; a value out of range: choice_end says which)
                search, summary = self.box
                if BoxSearch.run_prepared(search):
                    self.idx = idx = int(search[13][0])
                    PC.plain_summary(idx, *summary)
                    self.box_done = True
        except BaseException as e:  # (raised again on the caller's thread)
            self.error = e
        if cpu:
            self.cpu_s = time.thread_time() - c0
        self.wall_s = time.perf_counter() - t0


def run_jobs(jobs) -> None:
    """Run ``jobs`` (:class:`ChoiceJob` objects, or an iterator over them that another
    thread may share) in turn on this thread. Each one's :attr:`~ChoiceJob.wall_s` is its
    own; its :attr:`~ChoiceJob.cpu_s` is this thread's CPU time over all the jobs it ran,
    shared in proportion to their wall times (a thread's CPU clock is a system call, about
    2 us here: two reads for the lot instead of two per job)."""
    c0 = time.thread_time()
    ran = []
    for job in jobs:
        job.run(cpu=False)
        ran.append(job)
    cpu = time.thread_time() - c0
    wall = sum(job.wall_s for job in ran)
    for job in ran:
        job.cpu_s = cpu * (job.wall_s / wall) if wall > 0 else cpu / len(ran)


class _Plan(NamedTuple):
    """The kernel arguments of one :class:`SearchOptions` (:meth:`PenalizedSearch._plan_for`)."""

    options: PK.Options
    coarse: PK.Coarse
    opt: tuple  # the same two as the kernels take them (plain tuples)
    co: tuple


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
        self._frames = tuple(PK.Frames(feats=f, valid=v, ell=ell))  # as the kernels take it
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
        self._plan: _Plan | None = None
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
            m = CI.build_representatives(self.features, self.valid, self.clip_starts, self.clip_stops, inv,
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
        code * grid[1]``, rounded outward: see :func:`CI.encode_block_bounds`); column ``j``
        holds feature dimension ``order[j]``, by decreasing spread of the block centres (the
        dimensions that separate blocks most come first); ``Dp``: ``D`` rounded up to a
        multiple of 8 (padding columns: the whole grid), cached."""
        key = (bool(adaptive), int(size))
        if key not in self._blocks:
            _reps, _rf, lo, hi, _rep_of = self.representatives(adaptive)
            nb = max((len(lo) + size - 1) // size, 1)
            blo = np.empty((nb, self.dim), dtype=np.float32)
            bhi = np.empty((nb, self.dim), dtype=np.float32)
            CI.build_block_bounds(self.features, self.valid, lo, hi, int(size), blo, bhi)
            fin = np.all(np.isfinite(blo), axis=1)
            spread = ((blo[fin].astype(np.float64) + bhi[fin]) / 2).std(axis=0) if fin.any() else np.zeros(self.dim)
            order = np.argsort(-spread, kind="stable").astype(np.int64)

            clo, chi, grid = CI.encode_block_bounds(blo[:, order], bhi[:, order])
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
            self._supers[key] = CI.super_block_codes(blo, bhi, int(sup))
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
        envw = float(pen.env_weight if env_weight is None else env_weight)
        m = self.valid if mask is None else mask
        w = self._ones if weights is None else weights
        if buffers is not None:
            if buffers.search is not self:
                raise SearchError("buffers: made for another PenalizedSearch")
            if query.shape != (self.dim,) or m.shape != (self.n_frames,) or w.shape != (self.dim,) \
                    or obstacles.shape[0] != self.n_slots or counts.shape != (self.n_slots,):
                raise SearchError("query, mask, weights, obstacles or counts: wrong shape")
            q, obs, cnt = query, obstacles, counts
        else:
            q, m, w, obs, cnt = self._checked(query, m, w, obstacles, counts)
            buffers = SearchBuffers(self)
        idx, method = self.search_into(q, obs, cnt, m, init_index, previous, w, buffers.penalty(pen), envw, opt,
                                       buffers)
        return buffers.result(idx, method)

    def _checked(self, query, mask, weights, obstacles, counts) -> tuple[np.ndarray, ...]:
        """The arguments of :meth:`search` checked and converted: ``(q, mask, w, obs, cnt)``."""
        q = np.ascontiguousarray(query, dtype=np.float64)
        if q.shape != (self.dim,):
            raise SearchError(f"query: expected shape ({self.dim},), got {q.shape}")
        m = np.ascontiguousarray(mask, dtype=bool)
        if m.shape != (self.n_frames,):
            raise SearchError(f"mask: expected shape ({self.n_frames},), got {m.shape}")
        w = np.ascontiguousarray(weights, dtype=np.float64)
        if w.shape != (self.dim,):
            raise SearchError(f"weights: expected shape ({self.dim},), got {w.shape}")
        obs = np.ascontiguousarray(obstacles, dtype=np.float64)
        cnt = np.ascontiguousarray(counts, dtype=np.int64)
        if obs.ndim != 3 or obs.shape[0] != self.n_slots or obs.shape[2] != ROW or cnt.shape != (self.n_slots,):
            raise SearchError(f"obstacles: expected shape ({self.n_slots}, M, {ROW}) with counts ({self.n_slots},)")
        if np.any(cnt > obs.shape[1]) or np.any(cnt < 0):
            raise SearchError(f"counts: expected values in [0, {obs.shape[1]}], got {cnt}")
        return q, m, w, obs, cnt

    def search_into(self, q: np.ndarray, obs: np.ndarray, cnt: np.ndarray, mask: np.ndarray,
                    init_index: int | None, previous: int | None, w: np.ndarray, pen: tuple, env_weight: float,
                    opt: SearchOptions, buffers: SearchBuffers) -> tuple[int, str]:
        """:meth:`search` without input checks, for a per-frame chooser that owns its
        buffers (one compiled call does the search, the collision fallback and the summary;
        the arguments of each :class:`SearchOptions` are packed once).

        Args:
            q: ``[D]`` float64 contiguous; obs, cnt: as for :meth:`search` (float64 / int64,
                contiguous); mask: ``[N]`` bool; w: ``[D]`` float64 weights;
                pen: :meth:`SearchBuffers.penalty`; env_weight: W_env.
            buffers: the :class:`SearchBuffers` that receive the result; the full score of
                its frame ``cur`` goes to its ``out[2]``.

        Returns:
            ``(index, method)``: the best frame and the method that produced it (as
            :attr:`SearchResult.method`).
        """
        plan = self._plan_for(opt)
        init = -1 if init_index is None else init_index
        o = plan.options
        near = any(cnt.tolist())  # (faster than cnt.any() on a few counts)
        if o.method < 0 or (o.clear and not near):  # plain, or nothing near
            used = PK.USED_CLEAR
        else:
            idx, used = PC.run_search(self._frames, plan.co, plan.opt, pen, buffers.scratch_for(plan.coarse.blk_lo), q,
                                      w, readonly(mask), self._mask_bits(plan.coarse, mask), obs, cnt, env_weight, init,
                                      -1 if previous is None else previous, buffers.cur)
        if used == PK.USED_CLEAR:
            return self._plain_choice(q, mask, w, init_index, opt, obs, cnt, near, pen, env_weight, buffers.cur,
                                      buffers), "plain"
        return int(idx), _USED_NAMES[used]

    def _plain_choice(self, q, mask, w, init_index, opt, obs, cnt, near, pen, env_weight, cur, buffers) -> int:
        """The plain accelerated search (plain method, or nothing near), warm-started at
        ``init_index`` when allowed, with the penalised summary of its result in ``buffers``
        (``near``: whether any obstacle count is positive)."""
        init = -1
        if init_index is not None and opt.warm_start and 0 <= init_index < self.n_frames \
                and self.valid[init_index] and mask[init_index]:
            init = int(init_index)
        buffers.stats[:] = 0
        idx, _ = self._plain(q, mask, w, init)
        if near:
            PC.summarise(idx, self._frames, pen, buffers.scratch, q, w, obs, cnt, env_weight, cur)
        else:  # (the same values; a character alone needs no penalty kernel compiled)
            PC.plain_summary(idx, self._frames, buffers.scratch, q, w, cur)
        return idx

    def choose_into(self, view: tuple, query: np.ndarray, cur: int, controls: tuple[float, float, float],
                    q: np.ndarray, w: np.ndarray, obs: np.ndarray, cnt: np.ndarray, mask: np.ndarray,
                    previous: int | None, pen: tuple, env_weight: float, opt: SearchOptions,
                    buffers: SearchBuffers) -> tuple[int, str, float]:
        """A chooser's whole choice in one compiled call (:func:`PC.choose`): the query's
        search columns into ``q``, the high-level controls' weights into ``w`` (``view``:
        :func:`chooser_view`; ``controls``: continuity, responsiveness, evasion factor; see
        :func:`PC.control_weights`), the plain view distance of the whole ``query`` to frame
        ``cur``, then :meth:`search_into` with ``init_index = cur`` and the score of ``cur``
        in ``buffers.out[2]``. No checks: every array must be contiguous and of the right
        type (as :meth:`search_into`). Returns ``(index, method, plain distance)``.

        The same as :meth:`choice_job`, :meth:`ChoiceJob.run` and :meth:`choice_end` in a
        row (a caller with many choices to make runs the jobs on another thread)."""
        job = self.choice_job(view, query, cur, controls, q, w, obs, cnt, mask, previous, pen, env_weight, opt,
                              buffers)
        job.run()
        return self.choice_end(job)

    def choice_job(self, view: tuple, query: np.ndarray, cur: int, controls: tuple[float, float, float],
                   q: np.ndarray, w: np.ndarray, obs: np.ndarray, cnt: np.ndarray, mask: np.ndarray,
                   previous: int | None, pen: tuple, env_weight: float, opt: SearchOptions,
                   buffers: SearchBuffers) -> ChoiceJob:
        """:meth:`choose_into`'s choice made ready (arguments as there): a :class:`ChoiceJob`
        whose :meth:`~ChoiceJob.run` is the compiled search alone. Until :meth:`choice_end`,
        the arrays passed and ``buffers`` belong to the job.

        The kernel's arguments from the searcher's frames to the obstacles are kept in
        ``buffers`` while the plan, the buffers ``q`` and ``w``, the mask, the obstacle
        buffers and the packed penalty stay the same objects (a chooser's case: building
        them is about a tenth of a search's time); a writable mask is packed anew on every
        call."""
        plan = self._plan if opt is self._plan_opt else self._plan_for(opt)
        b = buffers
        o = plan.options
        near = any(cnt.tolist())
        job = ChoiceJob((q, mask, w, cur, opt, obs, cnt, near, pen, env_weight, cur, b))
        if o.method < 0 or (o.method == 1 and o.clear and not near):  # plain, or nothing near
            job.plain = PC.plain_choice(view, controls, query, cur, q, w)
            if not near:  # (the plain search made ready here, made by run with its summary)
                b.stats[:] = 0
                init = cur if opt.warm_start and cur >= 0 else -1
                weights = None if w is self._ones or np.all(w == 1.0) else w
                job.box = (self.plain.prepare(q, mask, init, weights, b.box_i, b.box_d),
                           (self._frames, b.scratch, q, w, cur))
            return job
        key = b._tail_key
        if key is None or key[0] is not plan or key[1] is not q or key[2] is not w or key[3] is not mask \
                or key[4] is not obs or key[5] is not cnt or key[6] is not pen or mask.flags.writeable:
            b._tail = (self._frames, plan.co, plan.opt, pen, b.scratch_for(plan.coarse.blk_lo), q, w, readonly(mask),
                       self._mask_bits(plan.coarse, mask), obs, cnt)
            b._tail_key = (plan, q, w, mask, obs, cnt, pen)
        job.args = (view, controls, query, cur, *b._tail, env_weight, -1 if previous is None else previous)
        return job

    def choice_end(self, job: ChoiceJob) -> tuple[int, str, float]:
        """The choice of a :class:`ChoiceJob` that has run: ``(index, method, plain
        distance)`` as :meth:`choose_into` returns them (the plain accelerated search, when
        nothing was near, runs here)."""
        if job.error is not None:
            raise job.error
        if job.used == PK.USED_CLEAR:
            if job.box_done:
                return job.idx, "plain", job.plain
            return self._plain_choice(*job.plain_args), "plain", job.plain
        return int(job.idx), _USED_NAMES[job.used], job.plain

    def _mask_bits(self, co: PK.Coarse, mask: np.ndarray) -> np.ndarray:
        """Which segments of the representatives ``co`` hold a frame ``mask`` admits, packed 8
        to a byte (:func:`CI.mask_bits`). Cached for a read-only mask that owns its data (the
        controllers' tag masks are shared read-only): such a mask must not be made writable
        and changed while in use."""
        reps = co.reps
        cacheable = not mask.flags.writeable and mask.base is None
        if cacheable:
            hit = self._bits.get(id(mask))
            if hit is not None and hit[0] is mask and hit[1] is reps:
                return hit[2]
        out = np.empty((len(reps) + 7) // 8, dtype=np.uint8)
        CI.mask_bits(reps, co.rep_lo, co.rep_hi, mask, out)
        if cacheable:
            if len(self._bits) >= 16:
                self._bits.pop(next(iter(self._bits)))
            self._bits[id(mask)] = (mask, reps, out)  # holds the mask: its id stays its own
        return out

    def _plan_for(self, opt: SearchOptions) -> _Plan:
        """The kernels' arguments for ``opt`` (cached per options object)."""
        if opt is self._plan_opt:
            return self._plan
        plan = self._plans.get(opt)
        if plan is None:
            options = PK.Options(method={"linear": 0, "coherent-approx": 1, "plain": -1}[opt.method],
                                 warm=bool(opt.warm_start), dissim=0, max_stride=0, v=0.0, slack=0.0, fallback=False,
                                 clear=False, back=0, block=0, super_block=0)
            coarse = PK.Coarse(reps=self._none_reps, rep_feats=self._none_blocks, rep_lo=self._none_reps,
                               rep_hi=self._none_reps, rep_of=self._none_reps, blk_lo=self._none_codes,
                               blk_hi=self._none_codes, blk_grid=self._none_grid, blk_order=self._none_order,
                               sup_lo=self._none_codes, sup_hi=self._none_codes)
            if opt.method == "coherent-approx":
                reps, rep_feats, lo, hi, rep_of = self.representatives(opt.adaptive)
                options = options._replace(
                    dissim=0 if not opt.dissimilarity else (2 if opt.dissimilarity == "bound" else 1),
                    max_stride=int(opt.max_stride), v=float(opt.v), slack=float(opt.segment_slack),
                    fallback=bool(opt.collision_fallback), clear=bool(opt.plain_when_clear),
                    back=round(opt.start_back * len(reps)))
                coarse = coarse._replace(reps=reps, rep_feats=rep_feats, rep_lo=lo, rep_hi=hi, rep_of=rep_of)
                if opt.block_bounds:
                    blo, bhi, grid, order = self.block_bounds(opt.adaptive, opt.block_size)
                    options = options._replace(block=int(opt.block_size))
                    coarse = coarse._replace(blk_lo=blo, blk_hi=bhi, blk_grid=grid, blk_order=order)
                    if opt.super_blocks > 0:
                        slo, shi = self.super_blocks(opt.adaptive, opt.block_size, opt.super_blocks)
                        options = options._replace(super_block=int(opt.super_blocks))
                        coarse = coarse._replace(sup_lo=slo, sup_hi=shi)
            plan = _Plan(options, coarse, tuple(options), tuple(coarse))
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
        out = np.empty(frames.shape[0])
        PK.score_frames(frames, self._frames, tuple(pen.packed(self.n_slots, self.has_heights)), q, w,
                        np.ascontiguousarray(obstacles, dtype=np.float64), np.ascontiguousarray(counts, dtype=np.int64),
                        float(pen.env_weight if env_weight is None else env_weight), out)
        return out

    def clearance(self, frame: int, obstacles: np.ndarray, counts: np.ndarray,
                  penalty: PenaltyParams | None = None) -> np.ndarray:
        """``[K]`` smallest signed distance of each of ``frame``'s ellipses to the obstacles."""
        pen = penalty or PenaltyParams()
        out = np.empty(self.n_slots)
        PK.frame_clearance(int(frame), self._frames, tuple(pen.packed(self.n_slots, self.has_heights)),
                           np.ascontiguousarray(obstacles, dtype=np.float64),
                           np.ascontiguousarray(counts, dtype=np.int64), out)
        return out


def _line_rows(x: np.ndarray) -> np.ndarray:
    """``x [n, D]`` float32 copied into rows of whole 64-byte cache lines (``D`` padded with
    zeros to a multiple of 16, 64-byte aligned): a row read from a cold cache then touches
    ``ceil(D / 16)`` lines, never one more (kernels loop over the first ``D`` columns only)."""
    n, D = x.shape
    Dp = D + (-D % 16)
    rows = _huge_page_zeros(n * Dp).reshape(n, Dp)
    rows[:, :D] = x
    return rows


#: a transparent huge page (Linux, x86-64)
_HUGE = 2 << 20


def _huge_page_zeros(count: int) -> np.ndarray:
    """``count`` float32 zeros starting on a 2 MiB boundary, in a buffer that numpy asks the
    kernel to back with transparent huge pages (it does so for buffers of 4 MiB and more,
    where the system allows it). A representative's row then costs no page walk: the
    coherent search jumps from row to row (each visit waits for the last one's distance),
    and on a busy machine, whose other programs have evicted the translation caches between
    two searches, a 4 KiB page walk per few rows was a measurable share of a search.
    Without huge pages it is an ordinary 64-byte-aligned buffer; so is one under 256 KiB
    (a small database's rows span a few pages anyway, and a huge page would be 2 MiB of
    memory for each of them)."""
    nbytes = 4 * count
    if nbytes < 256 << 10:
        raw = np.zeros(nbytes + 64, dtype=np.uint8)
        off = -raw.ctypes.data % 64
    else:
        raw = np.zeros(max(nbytes + _HUGE, 2 * _HUGE + 64), dtype=np.uint8)
        off = -raw.ctypes.data % _HUGE
    return raw[off: off + nbytes].view(np.float32)


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
    nearest = OK.prepare_obstacles(r, np.ascontiguousarray(slot_of, dtype=np.int64), float(root_xz[0]),
                                   float(root_xz[1]), float(yaw), np.ascontiguousarray(points_local, dtype=np.float64),
                                   float(radius), out, counts, key)
    return out, counts, float(nearest)


def chooser_view(cols: np.ndarray, masks: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                 zero: np.ndarray, db_features: np.ndarray) -> tuple:
    """What :meth:`PenalizedSearch.choose_into` searches with for one feature view of the
    database, as the kernel takes it (a plain :class:`PK.View`): the query columns ``cols
    [D]`` int64 the search uses; ``masks``: the columns the view leaves out (weight 0), pose,
    trajectory position and trajectory direction columns ``[D]`` bool (weighted by continuity,
    responsiveness, responsiveness times the evasion factor); ``zero [Dq]`` bool, the columns taken as 0 in the plain view distance to
    ``db_features [N, Dq]``. Build it once per view."""
    off, pose, pos, direc = masks
    return tuple(PK.View(cols=cols, off=off, pose=pose, pos=pos, direc=direc, zero=zero, db_feats=db_features))


# Compiled obstacle preparation for a caller's per-search glue (a chooser that keeps its own
# buffers): no argument checks, every array must be contiguous and of the kernel's type.
#: ``(pose, pos, direc, continuity, responsiveness, evasion_factor) -> [D]`` control weights
control_weights = PC.control_weights
#: :func:`prepare_obstacles` into the caller's ``out, counts, order_key`` buffers
prepare_obstacles_into = OK.prepare_obstacles
#: the same for the rows ``rows[ids]`` of static obstacles (every slot)
prepare_static = OK.prepare_static
#: the pre-selection points (root and query trajectory), world and character frame
trajectory_points = OK.trajectory_points
#: points, grid query and pre-selection in one call for a scene of static obstacles
gather_static = OK.gather_static
#: the same among static obstacles and a world's other agents (their grid)
gather_with_agents = OK.gather_with_agents
