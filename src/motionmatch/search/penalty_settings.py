"""The penalised search's settings and its result: the obstacle penalties
(:class:`PenaltyParams`, one set of defaults for every scene), which search and which
optimisations (:class:`SearchOptions`), and what one search returns (:class:`SearchResult`).
:mod:`motionmatch.search.penalized` runs the search."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from motionmatch.search import _penalized_kernels as PK
from motionmatch.search._validate import SearchError

__all__ = ["METHODS", "PenaltyParams", "SearchOptions", "SearchResult"]

METHODS = ("coherent-approx", "linear", "plain")
#: former names still read in settings and scenario files
_ALIASES = {"coherent": "coherent-approx"}


@dataclass(frozen=True)
class PenaltyParams:
    """Obstacle penalties: ONE set of defaults for every scene (issue 17).

    The shape of the penalty is not a per-scene setting: scenario files may not set
    ``threshold``, ``exponent``, ``env_weight``, ``slot_weights``, ``margin`` or the height
    margins (:mod:`motionmatch.environment.scenario_schema` refuses them); a scene sets
    its characters' high-level controls instead (:class:`motionmatch.runtime.environment_matching.Controls`).

    Attributes:
        threshold: distance (m) below which penalties start. The paper uses 0.4 "for
            navigating highly constrained environments and 0.6 for more general usage";
            every scene here is a constrained one (corridors, doors, a dense field, a
            crowd), so the default is 0.4.
        exponent: how fast the barrier grows toward contact (the paper: 4 "for all
            experiments"). The barrier is ``((t - d) / t) ** exponent * ln(t / d)``, the
            paper's ``-(t - d) ** exponent * ln(d / t)`` divided by ``t ** exponent`` so that
            ``env_weight`` means the same at any threshold.
        env_weight: W_env0, the weight of all penalties before Anticipation scales it
            (the paper's value is missing from our copy of the text; ours).
        slot_weights: per-ellipse weights (first, second, third future ellipse); the later
            ones are lower: immediate collisions matter most (the paper's "w_e2 < 1,
            w_e3 < w_e2"; its values are missing from our copy of the text, and the
            authors' released scenes use 0.4 / 0.1, 0.4 / 0 and 0 / 0). Ours, 0.6 / 0.3:
            with 0.4 / 0.1 the character under the 0.75 m ceiling of
            ``scenarios/fence-ceilings.json`` rises (its later ellipses barely count).
        margin: clearance (m) subtracted from every distance (0: the skeleton's ellipse).
        height_low, height_top: margins (m) below the lowest and above the highest joint
            when gating by height (the head joint is ~0.1 m below the top of the head).
        use_heights: gate obstacles with a height range by the body's vertical extent
            (needs a database with height features).
        disk_body: ablation: the body is the circle around its ellipse.
    """

    threshold: float = 0.4
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

    def packed(self, n_slots: int, heights_available: bool = True) -> PK.Penalty:
        """The parameters as the kernels take them (without ``env_weight``, an argument of
        its own): ``n_slots`` per-ellipse weights, height gating only with
        ``heights_available``."""
        return PK.Penalty(threshold=float(self.threshold), exponent=float(self.exponent), margin=float(self.margin),
                          height_low=float(self.height_low), height_top=float(self.height_top),
                          heights=bool(self.use_heights and heights_available), disk=bool(self.disk_body),
                          slot_weights=self.slot_weight_array(n_slots))


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
