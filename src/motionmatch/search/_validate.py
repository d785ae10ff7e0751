"""Argument checks shared by the searchers; every message names the offending argument."""

from __future__ import annotations

import numpy as np

from motionmatch.errors import MotionMatchError

__all__ = ["SearchError", "check_features", "check_k", "check_mask", "check_queries", "check_query", "check_weights"]

#: Largest magnitude accepted in features and queries: squares and sums of squares of
#: values this size stay far from float32 overflow.
MAX_ABS = 1e15


class SearchError(MotionMatchError, ValueError):
    """Bad input to a nearest-neighbour search (shape, dtype, NaN, mask, k, weights)."""


def check_features(features: np.ndarray, valid: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``features [F, D]`` as C-contiguous float32 and ``valid [F]`` as bool (all true if ``None``)."""
    f = np.asarray(features)
    if f.ndim != 2:
        raise SearchError(f"features: expected a 2-D array [frames, dims], got shape {f.shape}")
    if f.shape[0] < 1 or f.shape[1] < 1:
        raise SearchError(f"features: expected at least one frame and one dimension, got shape {f.shape}")
    if not np.issubdtype(f.dtype, np.floating) and not np.issubdtype(f.dtype, np.integer):
        raise SearchError(f"features: expected a numeric array, got dtype {f.dtype}")
    f = np.ascontiguousarray(f, dtype=np.float32)
    if not np.isfinite(f).all():
        bad = np.argwhere(~np.isfinite(f))[0]
        raise SearchError(f"features: non-finite value at frame {bad[0]}, dimension {bad[1]}")
    if np.abs(f).max() > MAX_ABS:
        raise SearchError(f"features: values larger than {MAX_ABS:g} in magnitude are not supported")
    if valid is None:
        v = np.ones(f.shape[0], dtype=bool)
    else:
        v = _as_mask(valid, f.shape[0], "valid")
    return f, v


def _as_mask(mask: np.ndarray, n: int, name: str) -> np.ndarray:
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise SearchError(f"{name}: expected a boolean array, got dtype {m.dtype}")
    if m.ndim != 1 or m.shape[0] != n:
        raise SearchError(f"{name}: expected shape ({n},) (one flag per frame), got {m.shape}")
    return np.ascontiguousarray(m)


def check_mask(mask: np.ndarray | None, n: int) -> np.ndarray | None:
    """``mask [F]`` bool (contiguous) or ``None``."""
    if mask is None:
        return None
    return _as_mask(mask, n, "mask")


def check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise SearchError(f"k: expected an integer, got {type(k).__name__}")
    if k < 1:
        raise SearchError(f"k: expected k >= 1, got {k}")
    return int(k)


def too_few(k: int, available: int) -> SearchError:
    return SearchError(f"k: asked for {k} neighbours but only {available} frames are unmasked (valid and in mask)")


def check_query(query: np.ndarray, dim: int) -> np.ndarray:
    """``query [D]`` as float64 (finite, moderate magnitude)."""
    q = np.asarray(query)
    if q.ndim != 1 or q.shape[0] != dim:
        raise SearchError(f"query: expected shape ({dim},), got {q.shape}")
    if q.dtype.kind not in "fiu":
        raise SearchError(f"query: expected a numeric array, got dtype {q.dtype}")
    q = q.astype(np.float64)
    if not np.isfinite(q).all():
        raise SearchError(f"query: contains NaN or infinite values at dimensions {np.flatnonzero(~np.isfinite(q)).tolist()}")
    if np.abs(q).max() > MAX_ABS:
        raise SearchError(f"query: values larger than {MAX_ABS:g} in magnitude are not supported")
    return q


def check_queries(queries: np.ndarray, dim: int) -> np.ndarray:
    """``queries [Q, D]`` as C-contiguous float64 (finite)."""
    q = np.asarray(queries)
    if q.ndim != 2 or q.shape[1] != dim:
        raise SearchError(f"queries: expected shape (n_queries, {dim}), got {q.shape}")
    if q.dtype.kind not in "fiu":
        raise SearchError(f"queries: expected a numeric array, got dtype {q.dtype}")
    q = np.ascontiguousarray(q, dtype=np.float64)
    finite = np.isfinite(q).all(axis=1)
    if not finite.all():
        raise SearchError(f"queries: row {int(np.flatnonzero(~finite)[0])} contains NaN or infinite values")
    if q.size and np.abs(q).max() > MAX_ABS:
        raise SearchError(f"queries: values larger than {MAX_ABS:g} in magnitude are not supported")
    return q


def check_weights(weights: np.ndarray | None, dim: int) -> np.ndarray | None:
    """``weights [D]`` as C-contiguous float64 (finite, ``0 <= w <= MAX_ABS``), or ``None``.

    The weights multiply the squared differences per dimension: the searched distance is
    ``sum_d w_d (q_d - f_d)^2``; ``None`` means all ones (the plain squared distance).
    """
    if weights is None:
        return None
    w = np.asarray(weights)
    if w.ndim != 1 or w.shape[0] != dim:
        raise SearchError(f"weights: expected shape ({dim},) (one per dimension), got {w.shape}")
    if w.dtype.kind not in "fiu":
        raise SearchError(f"weights: expected a numeric array, got dtype {w.dtype}")
    w = np.ascontiguousarray(w, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(w))
    if bad.size:
        raise SearchError(f"weights: contains NaN or infinite values at dimensions {bad.tolist()}")
    if (w < 0).any():
        raise SearchError(f"weights: expected values >= 0, negative at dimensions {np.flatnonzero(w < 0).tolist()}")
    if w.max() > MAX_ABS:
        raise SearchError(f"weights: values larger than {MAX_ABS:g} are not supported")
    return w
