"""Environment-penalised motion-matching search (Environment-aware Motion Matching, Sec. 4.2, 5.4).

A frame's score is its weighted squared query distance plus, for each of its future body
ellipses (the environment features, stored raw in the database), log-barrier penalties of
its signed distances to the obstacles near the character (see
:mod:`motionmatch.search._penalized_kernels` for the formula and
:mod:`motionmatch.environment.geometry` for the distances and the barrier). The search
returns the frame of lowest score.

Methods (:attr:`SearchOptions.method`):

``"linear"``
    every frame, with the base optimisations only (query distance first, early rejection
    against the best score, obstacles nearest first and disks first, cheap bounds before
    exact distances): exact, the reference.
``"coherent"``
    the paper's temporal-coherence search: representative frames (at least ``min_stride``
    apart and differing by ``rep_threshold`` of a dimension's range), a segment search
    around each representative that beats the best, a dissimilarity-based stride with
    aggressiveness ``v``, starting about 1% of the representatives before the previous
    best match. Approximate. With ``collision_fallback`` a result that still collides is
    replaced by the linear search's (so it never returns a colliding frame when a
    collision-free one scores lower).
``"plain"``
    no environment: the accelerated search on query features (plain motion matching).

Every method first pre-selects obstacles around the query trajectory (the caller does
this with :func:`prepare_obstacles`); with none near, all but ``"linear"`` fall back to
the plain accelerated search (``plain_when_clear``), which then costs what plain motion
matching costs. Each optimisation can be switched off for the ablation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from motionmatch.environment.geometry import ROW
from motionmatch.search import _penalized_kernels as PK
from motionmatch.search._validate import SearchError, check_features
from motionmatch.search.box import BoxSearch

__all__ = ["METHODS", "PenalizedSearch", "PenaltyParams", "SearchOptions", "SearchResult", "prepare_obstacles"]

METHODS = ("coherent", "linear", "plain")


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
        method: ``"coherent"`` (the paper's full method), ``"linear"`` (exact) or
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
    """

    method: str = "coherent"
    plain_when_clear: bool = True
    adaptive: bool = True
    dissimilarity: bool = True
    v: float = 0.5
    warm_start: bool = True
    start_back: float = 0.01
    collision_fallback: bool = True
    max_stride: int = 64
    segment_slack: float = 1.0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise SearchError(f"method: expected one of {METHODS}, got {self.method!r}")
        if not self.v >= 0:
            raise SearchError(f"v: expected >= 0, got {self.v}")

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
            segments opened, representatives visited).
    """

    index: int
    score: float
    distance: float
    penalty: float
    clearance: np.ndarray
    collides: bool
    method: str
    stats: dict


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
        self._weighted_plain: dict = {}
        self._reps = {}
        self.min_stride = int(min_stride)
        self.rep_threshold = float(rep_threshold)
        self.representatives(True)
        self._ones = np.ones(self.dim)
        self._sorted_scratch = np.empty(0)

    # ------------------------------------------------------------ representatives
    def representatives(self, adaptive: bool = True) -> tuple[np.ndarray, ...]:
        """``(reps, rep_features, lo, hi, rep_of)``: representative frames, their features
        (contiguous), their segments ``[lo, hi)`` and, per frame, the index of its
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
            self._reps[key] = (reps, np.ascontiguousarray(self.features[reps]), lo, hi, rep_of)
        return self._reps[key]

    # ------------------------------------------------------------------ search
    def search(self, query: np.ndarray, obstacles: np.ndarray, counts: np.ndarray, *,
               mask: np.ndarray | None = None, init_index: int | None = None, previous: int | None = None,
               weights: np.ndarray | None = None, penalty: PenaltyParams | None = None,
               env_weight: float | None = None, options: SearchOptions | None = None) -> SearchResult:
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
        """
        opt = options or SearchOptions()
        pen = penalty or PenaltyParams()
        q = np.ascontiguousarray(query, dtype=np.float64)
        if q.shape != (self.dim,):
            raise SearchError(f"query: expected shape ({self.dim},), got {q.shape}")
        m = self.valid if mask is None else np.ascontiguousarray(mask, dtype=bool)
        w = self._ones if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
        obs = np.ascontiguousarray(obstacles, dtype=np.float64)
        cnt = np.ascontiguousarray(counts, dtype=np.int64)
        if obs.ndim != 3 or obs.shape[0] != self.n_slots or obs.shape[2] != ROW or cnt.shape != (self.n_slots,):
            raise SearchError(f"obstacles: expected shape ({self.n_slots}, M, {ROW}) with counts ({self.n_slots},)")
        slotw = np.ones(self.n_slots)
        sw = np.asarray(pen.slot_weights, dtype=np.float64)
        slotw[: min(len(sw), self.n_slots)] = sw[: self.n_slots]
        pp = pen.packed(env_weight, self.has_heights)
        stats = np.zeros(PK.NS, dtype=np.int64)
        init = -1
        if init_index is not None and opt.warm_start and 0 <= init_index < self.n_frames \
                and self.valid[init_index] and m[init_index]:
            init = int(init_index)
        method = opt.method
        clear = int(cnt.sum()) == 0
        if method == "plain" or (clear and opt.plain_when_clear and method != "linear"):
            idx, _ = self._plain(q, m, w, init)
            method = "plain"
        elif method == "linear":
            idx, _ = PK.linear_search(self.features, q, w, self.valid, m, self.ellipses, obs, cnt, slotw, pp,
                                          init, True, stats)
        else:
            reps, rep_feats, lo, hi, rep_of = self.representatives(opt.adaptive)
            start = 0
            if opt.warm_start and previous is not None and 0 <= previous < self.n_frames:
                start = int(rep_of[previous]) - round(opt.start_back * len(reps))
                start %= max(len(reps), 1)
            idx, _ = PK.coherent_search(self.features, q, w, self.valid, m, self.ellipses, obs, cnt, slotw, pp,
                                            reps, rep_feats, lo, hi, start, init,
                                            int(rep_of[init]) if init >= 0 else -1,
                                            (0 if not opt.dissimilarity else (2 if opt.dissimilarity == "bound" else 1)),
                                            float(opt.v), int(opt.max_stride), float(opt.segment_slack), stats)
        res = self._result(int(idx), q, w, obs, cnt, slotw, pp, method, stats)
        if res.collides and method == "coherent" and opt.collision_fallback:
            stats2 = np.zeros(PK.NS, dtype=np.int64)
            idx, _score = PK.linear_search(self.features, q, w, self.valid, m, self.ellipses, obs, cnt, slotw, pp,
                                          init, True, stats2)
            res = self._result(int(idx), q, w, obs, cnt, slotw, pp, "linear", stats + stats2)
        return res

    def _plain(self, q, m, w, init):
        """The accelerated (bounding-box) search on query features; for non-unit weights, on
        features scaled by their square roots (one searcher per weight vector, cached)."""
        if w is self._ones or np.all(w == 1.0):
            idx, d = self.plain.nearest(q, mask=m, k=1, init_index=init if init >= 0 else None)
            return int(idx[0]), float(d[0])
        key = np.round(w, 6).tobytes()
        box = self._weighted_plain.get(key)
        if box is None:
            if len(self._weighted_plain) >= 8:
                self._weighted_plain.pop(next(iter(self._weighted_plain)))
            sw = np.sqrt(w)
            box = BoxSearch((self.features * sw).astype(np.float32), self.valid)
            self._weighted_plain[key] = box
        sw = np.sqrt(w)
        idx, d = box.nearest(q * sw, mask=m, k=1, init_index=init if init >= 0 else None)
        return int(idx[0]), float(d[0])

    def _result(self, idx, q, w, obs, cnt, slotw, pp, method, stats) -> SearchResult:
        clr = np.empty(self.n_slots)
        score, dist = PK.frame_summary(idx, self.features, q, w, self.ellipses, obs, cnt, slotw, pp, clr)
        names = ("distances", "penalties", "signed_distances", "segments", "representatives")
        return SearchResult(idx, float(score), float(dist), float(score - dist), clr, bool(np.any(clr < 0.0)), method,
                            dict(zip(names, stats.tolist())))

    def score(self, frames: np.ndarray, query: np.ndarray, obstacles: np.ndarray, counts: np.ndarray, *,
              weights: np.ndarray | None = None, penalty: PenaltyParams | None = None,
              env_weight: float | None = None) -> np.ndarray:
        """Total scores of ``frames`` (no rejection): for tests and for the controller's
        comparison with the frame playing now."""
        pen = penalty or PenaltyParams()
        frames = np.ascontiguousarray(frames, dtype=np.int64).reshape(-1)
        q = np.ascontiguousarray(query, dtype=np.float64)
        w = self._ones if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
        slotw = np.ones(self.n_slots)
        sw = np.asarray(pen.slot_weights, dtype=np.float64)
        slotw[: min(len(sw), self.n_slots)] = sw[: self.n_slots]
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
