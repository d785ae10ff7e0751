"""Exact nearest-neighbour search over feature matrices (the motion-matching query).

Everything here works on plain arrays: ``features [F, D]`` (float, converted to
C-contiguous float32), a ``valid [F]`` bool array fixed at build time (frames that may ever
be returned, e.g. not the last frames of a clip) and, per call, an optional ``mask [F]`` bool
(e.g. a tag restriction); a frame may be returned when it is valid and in the mask.

Distances are squared Euclidean distances computed in float64 from the float32 features,
optionally weighted per call: ``weights [D]`` (finite, ``>= 0``) gives
``Σ_d w_d (q_d − f_d)²`` (the high-level controls' per-dimension multipliers), searched over
the same structures, so that changing the weights copies nothing; ``None`` is the plain
distance, on the unweighted code path. Every searcher returns the exact k nearest frames for
that metric, ascending (frames at equal distance may come in any order).

>>> s = build_searcher(features, valid)                  # "box" (numba) by default
>>> idx, dist = s.nearest(query, k=1, init_index=current_frame)   # [1], [1]
>>> idx, dist = s.nearest_batch(queries, mask=tag_mask, k=3)      # [Q, 3], [Q, 3]
>>> idx, dist = s.nearest(query, weights=w)              # w [D]: weighted distances

Methods: ``"brute"`` (:class:`BruteForceSearch`, numpy, the oracle) and ``"box"``
(:class:`BoxSearch`, numba, bounding boxes of 16/64 consecutive frames: 5-7x faster than
numpy brute force on single queries of real 100k-200k frame databases, more on batches; see
``benchmarks/bench_search.py``). Bad arguments raise :class:`SearchError` (a
``ValueError``) naming the argument (``weights`` included: wrong shape, NaN, negative). ``nearest_batch`` of :class:`BoxSearch` runs on numba's
threads (``numba.set_num_threads`` limits them); the numba kernels release the GIL.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from motionmatch.search._validate import SearchError
from motionmatch.search.box import BoxSearch
from motionmatch.search.brute import BruteForceSearch

__all__ = ["METHODS", "BoxSearch", "BruteForceSearch", "SearchError", "Searcher", "build_searcher"]


@runtime_checkable
class Searcher(Protocol):
    """What every searcher offers (all exact)."""

    method: str
    n_frames: int
    dim: int

    def nearest(
        self,
        query: np.ndarray,
        *,
        mask: np.ndarray | None = None,
        k: int = 1,
        init_index: int | None = None,
        weights: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """k nearest frames to ``query [D]``: ``(indices [k] int64, squared distances [k] float64)``,
        ascending. ``mask [F]`` bool restricts the frames (with ``valid``); ``init_index`` is a
        frame likely to be near (the frame playing now) used to start the search;
        ``weights [D]`` float (finite, ``>= 0``) multiply the squared differences per
        dimension (distance ``Σ_d w_d (q_d − f_d)²``), ``None`` for all ones."""
        ...

    def nearest_batch(
        self,
        queries: np.ndarray,
        *,
        mask: np.ndarray | None = None,
        k: int = 1,
        weights: np.ndarray | None = None,
        init_indices: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`nearest` for each row of ``queries [Q, D]`` (``weights [D]`` for every row),
        each seeded like :meth:`nearest` with ``init_indices [Q]`` (``None``: no seeds; -1,
        an invalid or masked-out frame: none for that row): ``(indices [Q, k], distances [Q, k])``."""
        ...


METHODS: dict[str, type] = {"brute": BruteForceSearch, "box": BoxSearch}


def build_searcher(features: np.ndarray, valid: np.ndarray | None = None, method: str = "box") -> Searcher:
    """A searcher over ``features [F, D]`` restricted to ``valid [F]`` (``None``: all frames).

    ``method``: ``"box"`` (default, numba bounding-box search) or ``"brute"`` (numpy).
    """
    try:
        cls = METHODS[method]
    except KeyError:
        raise SearchError(f"method: expected one of {sorted(METHODS)}, got {method!r}") from None
    return cls(features, valid)
