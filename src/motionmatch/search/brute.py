"""Exact brute-force search in numpy: the oracle the other searchers are tested against.

Scores come from the ``‖f‖² − 2 F·q`` form in float32 (one matrix-vector product, norms
precomputed, invalid frames +inf); every frame whose score is within the float32 error
bound of the k-th best is then re-measured in float64, so the result is exact for the
float64 squared Euclidean distance, like the other searchers.

With per-dimension ``weights [D]`` (distance ``Σ_d w_d (q_d − f_d)²``) the scores are
``Σ_d w_d f_d² − 2 F·(w ⊙ q)`` in float32: the weighted norms come from one more product
with the squared features (``f²`` in float32, kept after the first weighted call: the
memory of the features once more; the norms of the last weight vector are cached), and
the error bound is the same with weighted norms (see :meth:`BruteForceSearch._weighted`);
the float64 re-measure is the weighted distance.
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
    check_weights,
    too_few,
)

__all__ = ["BruteForceSearch"]

_U = 2.0**-24  # float32 unit roundoff
_ETA = 2.0**-150  # half the smallest float32 subnormal: the absolute rounding error below the normal range
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
        self._sq: np.ndarray | None = None  # [F, D] float32 f², built by the first weighted call
        self._sq_max = 0.0  # its largest value
        self._invalid = np.flatnonzero(~v)
        self._abs_f = float(np.abs(f).max())
        self._wcache: tuple[np.ndarray, np.ndarray, float, float] | None = None  # see _weighted

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

    def _refine(
        self, scores: np.ndarray, q64: np.ndarray, k: int, w: np.ndarray | None = None, err: float | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact k best of one query from its float32 ``scores [F]`` (+inf where excluded).

        Unweighted (``w is None``): the error bound of the scores is computed here. Weighted:
        ``err`` is the bound of :meth:`_weighted_err` and the re-measure is weighted by ``w [D]``.
        """
        if k == 1:
            kth = scores[np.argmin(scores)]
        else:
            kth = np.partition(scores, k - 1)[k - 1]
        if err is None:
            qn = float(np.sqrt(q64 @ q64))
            err = self._err_coef * (self._max_norm + qn) ** 2
        cand = np.flatnonzero(scores <= np.float32(float(kth) + 2.0 * err + 1e-30))
        diff = self.features[cand].astype(np.float64) - q64
        d64 = np.einsum("ij,ij->i", diff, diff) if w is None else (diff * diff) @ w
        order = np.lexsort((cand, d64))[:k]
        return cand[order].astype(np.int64), d64[order]

    def _weighted(self, w: np.ndarray) -> tuple[np.ndarray, float, float]:
        """For weights ``w [D]``: ``(norms [F] float32, root_max, abs_err)``, ``norms`` the
        float32 weighted squared norms ``Σ_d w_d f_d²`` of the frames (+inf for invalid ones),
        ``root_max`` a bound of ``√(Σ_d w_d f_d²)`` over all frames and ``abs_err`` the
        absolute part of the score error bound (cached for the last ``w``).

        Error bound: the score of a frame for a query ``q``, ``norms − 2 F·(w ⊙ q)`` in
        float32 (``w ⊙ q`` rounded to float32 from float64), differs from the exact
        ``N_f − 2 P`` (``N_f = Σ w f²``, ``P = Σ w f q``) by at most
        ``(D + 8) u (√N_f + √N_q)² + abs_err`` with ``N_q = Σ w q²`` and ``u = 2^-24``:
        rounding ``f²``, ``w``, their products and the ``D`` sums costs at most
        ``(D + 2) u N_f`` (non-negative terms, any summation order); rounding ``w ⊙ q``, the
        products with ``f`` and the sums at most ``(D + 1) u Σ |f| w |q| <= (D + 1) u √N_f √N_q``
        (Cauchy–Schwarz for the weighted dot product); the subtraction ``u`` of the result;
        ``(D + 8) u`` covers the sum and the second-order terms. Roundings in float32's
        subnormal range add up to ``2^-150`` each, times what multiplies them afterwards:
        ``abs_err``. ``√N_f <= root_max``: the largest float32 norm corrected for its own
        rounding.
        """
        c = self._wcache
        if c is not None and np.array_equal(c[0], w):
            return c[1], c[2], c[3]
        if self._sq is None:
            f64 = self.features.astype(np.float64)
            self._sq = (f64 * f64).astype(np.float32)
            self._sq_max = float(self._sq.max())
        w32 = w.astype(np.float32)
        norms = self._sq @ w32
        abs_err = 2.0 * self.dim * _ETA * (float(w32.max()) + self._sq_max + self._abs_f + 2.0)
        root_max = float(np.sqrt((float(norms.max()) + abs_err) * (1.0 + (self.dim + 8) * _U)))
        norms[self._invalid] = np.inf
        self._wcache = (w.copy(), norms, root_max, abs_err)
        return norms, root_max, abs_err

    def _weighted_err(self, q64: np.ndarray, w: np.ndarray, root_max: float, abs_err: float) -> float:
        """The score error bound of :meth:`_weighted` for the query ``q64 [D]``."""
        qn = float(np.sqrt(w @ (q64 * q64)))
        return self._err_coef * (root_max + qn) ** 2 + abs_err

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

        ``init_index`` is accepted for API compatibility and only range-checked. ``weights``:
        ``[D]`` per-dimension multipliers of the squared differences (finite, ``>= 0``; the
        distance is ``Σ_d w_d (q_d - f_d)²``), ``None`` for all ones. Returns
        ``(indices [k] int64, squared distances [k] float64)``, ascending (ties by index).
        """
        k = check_k(k)
        q64 = check_query(query, self.dim)
        w = check_weights(weights, self.dim)
        m = self._selection(mask, k)
        if init_index is not None and not 0 <= int(init_index) < self.n_frames:
            raise SearchError(f"init_index: expected a frame index in [0, {self.n_frames}), got {init_index}")
        if w is None:
            scores = self._norms_valid - 2.0 * (self.features @ q64.astype(np.float32))
            err = None
        else:
            norms, root_max, abs_err = self._weighted(w)
            scores = norms - 2.0 * (self.features @ (w * q64).astype(np.float32))
            err = self._weighted_err(q64, w, root_max, abs_err)
        if m is not None:
            scores[~m] = np.inf
        return self._refine(scores, q64, k, w, err)

    def nearest_batch(
        self,
        queries: np.ndarray,
        *,
        mask: np.ndarray | None = None,
        k: int = 1,
        weights: np.ndarray | None = None,
        init_indices: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`nearest` for each row of ``queries [Q, D]`` (blocked matrix products);
        ``weights [D]`` (or ``None``) apply to every query; ``init_indices`` is accepted
        for API compatibility (an exhaustive search needs no seed).

        Returns ``(indices [Q, k] int64, squared distances [Q, k] float64)``.
        """
        k = check_k(k)
        q64 = check_queries(queries, self.dim)
        w = check_weights(weights, self.dim)
        m = self._selection(mask, k)
        nq = q64.shape[0]
        out_i = np.empty((nq, k), dtype=np.int64)
        out_d = np.empty((nq, k), dtype=np.float64)
        chunk = max(1, _CHUNK_BYTES // (4 * self.n_frames))
        ft = self.features.T
        if w is not None and nq:
            norms, root_max, abs_err = self._weighted(w)
        for a in range(0, nq, chunk):
            qc = q64[a : a + chunk]
            if w is None:
                scores = self._norms_valid[None, :] - 2.0 * (qc.astype(np.float32) @ ft)
            else:
                scores = norms[None, :] - 2.0 * ((qc * w).astype(np.float32) @ ft)
            if m is not None:
                scores[:, ~m] = np.inf
            for r in range(qc.shape[0]):
                err = None if w is None else self._weighted_err(qc[r], w, root_max, abs_err)
                out_i[a + r], out_d[a + r] = self._refine(scores[r], qc[r], k, w, err)
        return out_i, out_d
