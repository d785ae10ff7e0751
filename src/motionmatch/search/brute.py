"""Exact brute-force search in numpy: the oracle the other searchers are tested against.

Scores come from the ``‖f‖² − 2 F·q`` form in float32 (one matrix-vector product, norms
precomputed, invalid frames +inf); every frame whose score is within the float32 error
bound of the k-th best is then re-measured in float64, so the result is exact for the
float64 squared Euclidean distance, like the other searchers.
"""

from __future__ import annotations

import numpy as np

from motionmatch.search._validate import (
    SearchError,
    check_features,
    check_k,
    check_mask,
    check_queries,
    check_query,
    too_few,
)

__all__ = ["BruteForceSearch"]

_U = 2.0**-24  # float32 unit roundoff
_CHUNK_BYTES = 32 << 20  # score matrix size per batch chunk


class BruteForceSearch:
    """Exact k-nearest-neighbour search over ``features [F, D]`` by scoring every frame.

    Args:
        features: ``[F, D]`` float array (converted to C-contiguous float32), finite.
        valid: ``[F]`` bool, frames that may be returned (``None``: all).
    """

    method = "brute"

    def __init__(self, features: np.ndarray, valid: np.ndarray | None = None):
        f, v = check_features(features, valid)
        self.features = f
        self.valid = v
        self.n_frames, self.dim = f.shape
        self.n_valid = int(v.sum())
        norms64 = np.einsum("ij,ij->i", f.astype(np.float64), f.astype(np.float64))
        self._norms_valid = np.where(v, norms64, np.inf).astype(np.float32)  # [F]
        self._max_norm = float(np.sqrt(norms64.max()))
        # |score error| <= _err_coef * (‖f‖ + ‖q‖)²: rounding of the norms, of the float32
        # dot product (any summation order), of the query to float32 and of the subtraction
        self._err_coef = (self.dim + 8) * _U

    def _selection(self, mask: np.ndarray | None, k: int) -> np.ndarray | None:
        m = check_mask(mask, self.n_frames)
        if m is None:
            if k > self.n_valid:
                raise too_few(k, self.n_valid)
            return None
        count = int(np.count_nonzero(m & self.valid))
        if k > count:
            raise too_few(k, count)
        return m

    def _refine(self, scores: np.ndarray, q64: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact k best of one query from its float32 ``scores [F]`` (+inf where excluded)."""
        if k == 1:
            kth = scores[np.argmin(scores)]
        else:
            kth = np.partition(scores, k - 1)[k - 1]
        qn = float(np.sqrt(q64 @ q64))
        err = self._err_coef * (self._max_norm + qn) ** 2
        cand = np.flatnonzero(scores <= np.float32(float(kth) + 2.0 * err + 1e-30))
        diff = self.features[cand].astype(np.float64) - q64
        d64 = np.einsum("ij,ij->i", diff, diff)
        order = np.lexsort((cand, d64))[:k]
        return cand[order].astype(np.int64), d64[order]

    def nearest(
        self, query: np.ndarray, *, mask: np.ndarray | None = None, k: int = 1, init_index: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` frames nearest to ``query [D]`` among valid frames with ``mask [F]`` true.

        ``init_index`` is accepted for API compatibility and only range-checked. Returns
        ``(indices [k] int64, squared distances [k] float64)``, ascending (ties by index).
        """
        k = check_k(k)
        q64 = check_query(query, self.dim)
        m = self._selection(mask, k)
        if init_index is not None and not 0 <= int(init_index) < self.n_frames:
            raise SearchError(f"init_index: expected a frame index in [0, {self.n_frames}), got {init_index}")
        scores = self._norms_valid - 2.0 * (self.features @ q64.astype(np.float32))
        if m is not None:
            scores[~m] = np.inf
        return self._refine(scores, q64, k)

    def nearest_batch(
        self, queries: np.ndarray, *, mask: np.ndarray | None = None, k: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`nearest` for each row of ``queries [Q, D]`` (blocked matrix products).

        Returns ``(indices [Q, k] int64, squared distances [Q, k] float64)``.
        """
        k = check_k(k)
        q64 = check_queries(queries, self.dim)
        m = self._selection(mask, k)
        nq = q64.shape[0]
        out_i = np.empty((nq, k), dtype=np.int64)
        out_d = np.empty((nq, k), dtype=np.float64)
        chunk = max(1, _CHUNK_BYTES // (4 * self.n_frames))
        ft = self.features.T
        for a in range(0, nq, chunk):
            qc = q64[a : a + chunk]
            scores = self._norms_valid[None, :] - 2.0 * (qc.astype(np.float32) @ ft)
            if m is not None:
                scores[:, ~m] = np.inf
            for r in range(qc.shape[0]):
                out_i[a + r], out_d[a + r] = self._refine(scores[r], qc[r], k)
        return out_i, out_d
