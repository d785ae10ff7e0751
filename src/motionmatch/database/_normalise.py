"""Compiled normalisation of a database's features: one pass per statistic, no temporaries.

The numbers are numpy's to the last bit (``raw.astype(float64)``, then ``mean(axis=0)``
and ``std(axis=0)``, then ``((raw - mean) / scale * weights).astype(float32)``): numpy
sums a C-ordered array along its first axis row after row, in float64, and so do these
loops. What they save is memory: numpy's formulas make seven float64 temporaries of the
whole feature array (a database of 250,000 frames: 54 MB each), and the fresh pages of each
cost the kernel a page fault apiece, about 0.6 s of a 1 s database join on a loaded
2-core machine (``benchmarks/README.md``, batch jobs).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def column_mean_std(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (population) standard deviation of each column of ``raw`` ``[N, D]``
    (float32), in float64, ``[D]`` each."""
    n, d = raw.shape
    total = np.zeros(d)
    for i in range(n):
        for j in range(d):
            total[j] += np.float64(raw[i, j])
    mean = total / n
    sq = np.zeros(d)
    for i in range(n):
        for j in range(d):
            x = np.float64(raw[i, j]) - mean[j]
            sq[j] += x * x
    return mean, np.sqrt(sq / n)


@numba.njit(cache=True, nogil=True)
def normalized(raw: np.ndarray, mean: np.ndarray, scale: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``((raw - mean) / scale * weights)`` in float64, as float32 ``[N, D]`` (``raw``
    float32 ``[N, D]``; the others float64 ``[D]``)."""
    n, d = raw.shape
    out = np.empty((n, d), dtype=np.float32)
    for i in range(n):
        for j in range(d):
            out[i, j] = np.float32((np.float64(raw[i, j]) - mean[j]) / scale[j] * weights[j])
    return out
