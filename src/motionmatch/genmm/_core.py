"""The hot path of GenMM, written once against the array API (numpy or torch, see `_backend`).

Patch distances without unfolding
---------------------------------
A patch is ``p`` consecutive frames of ``d`` features. The squared distance between the
synthesis patch starting at frame ``i`` and the example patch starting at frame ``j`` is

    ``D[i, j] = sum_t |x[i+t] - y[j+t]|^2 = P_x[i] + P_y[j] - 2 * sum_t G[i+t, j+t]``

with ``G = X Y^T`` the *frame* Gram matrix and ``P`` the patches' squared norms (box sums
of the frames' squared norms). So one ``[n, d] x [d, m]`` matrix product and ``p``
shifted additions give every patch distance: ``p`` times fewer multiply-adds than
comparing unfolded ``[n, p*d]`` patches, with the same numbers (up to rounding). Features
are centred (the example mean subtracted from both sides) before the product, which keeps
float32 cancellation small.

Distances are computed in tiles of synthesis patches, so memory stays bounded by
``block_bytes`` however long the output is: when all tiles fit, they are kept and the
matching is one pass; otherwise the per-example-patch minima (the completeness
normaliser) are found in a first pass and the nearest neighbours in a second. Every other
row-wise step (resampling, centring, voting) works in chunks of rows too, so the memory
of a synthesis is its feature array plus a bounded amount.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from motionmatch.genmm._backend import Backend


@dataclass
class Bank:
    """The example patches of one skeletal part at one stage.

    Attributes:
        Y: ``[Ly, d]`` example frames (all clips end to end), centred by ``mean``, in the
            working dtype: what distances are computed from.
        Y64: the same frames, not centred, in float64: what voting blends, so the blended
            values are example values to float64 precision whatever the working dtype.
        mean: ``[d]`` the centring vector (float64 backend array).
        yy: ``[Ly - p + 1]`` squared norms of the patches starting at each frame; ``+inf``
            where a patch would cross from one clip into the next.
        starts: number of patch starts (``Ly - p + 1``).
    """

    Y: Any
    Y64: Any
    mean: Any
    yy: Any
    starts: int


@functools.lru_cache(maxsize=512)
def resample_indices(n_src: int, n_dst: int, periodic: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linear-resampling gather indices ``i0, i1`` and weights ``w`` (numpy, read-only:
    remembered for the next synthesis of the same lengths).

    Not periodic: the first and last frames map onto each other (frame ``k`` of the new
    sequence sits at ``k (n_src - 1) / (n_dst - 1)``). Periodic: the sequence is a circle of
    ``n_src`` frames (frame ``k`` sits at ``k n_src / n_dst``, wrapping around).
    """
    out = _resample_indices(int(n_src), int(n_dst), bool(periodic))
    for a in out:
        a.flags.writeable = False
    return out


def _resample_indices(n_src: int, n_dst: int, periodic: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if n_dst == n_src:
        i = np.arange(n_src)
        return i, i, np.zeros(n_src)
    if periodic:
        pos = np.arange(n_dst) * (n_src / n_dst)
        i0 = np.floor(pos).astype(np.int64)
        w = pos - i0
        i0 %= n_src
        i1 = (i0 + 1) % n_src
        return i0, i1, w
    if n_dst == 1 or n_src == 1:
        z = np.zeros(n_dst, dtype=np.int64)
        return z, z, np.zeros(n_dst)
    pos = np.arange(n_dst) * ((n_src - 1) / (n_dst - 1))
    i0 = np.minimum(np.floor(pos).astype(np.int64), n_src - 2)
    w = pos - i0
    # Land exactly on source frames where the grid does (keeps equal lengths exact).
    exact = np.abs(w - np.round(w)) < 1e-9
    i0 = np.where(exact & (np.round(w) == 1), i0 + 1, i0)
    w = np.where(exact, 0.0, w)
    i1 = np.minimum(i0 + 1, n_src - 1)
    return i0, i1, w


def resample_np(X: np.ndarray, n: int, periodic: bool = False) -> np.ndarray:
    """Linear resampling of a frame-major numpy array ``[F, ...]`` to ``n`` frames."""
    if X.shape[0] == n:
        return X.copy()
    i0, i1, w = resample_indices(X.shape[0], n, periodic)
    w = w.reshape((-1,) + (1,) * (X.ndim - 1))
    return X[i0] * (1.0 - w) + X[i1] * w


#: Rows processed at once by the row-wise helpers (bounds their temporaries).
CHUNK_ROWS = 16384


def _chunks(n: int, rows: int = CHUNK_ROWS) -> list[tuple[int, int]]:
    return [(i, min(i + rows, n)) for i in range(0, n, rows)]


def resample(be: Backend, X: Any, n: int, periodic: bool = False) -> Any:
    """Linear resampling of a backend array ``[F, d]`` to ``n`` frames (in row chunks)."""
    xp = be.xp
    if X.shape[0] == n:
        return X
    i0, i1, w = resample_indices(int(X.shape[0]), n, periodic)
    out = xp.empty((n, int(X.shape[1])), dtype=X.dtype, device=_device(be, X))
    for c0, c1 in _chunks(n):
        w_ = be.asarray(w[c0:c1, None], dtype=X.dtype)
        a = xp.take(X, be.asarray(i0[c0:c1], dtype=be.index_dtype), axis=0)
        b = xp.take(X, be.asarray(i1[c0:c1], dtype=be.index_dtype), axis=0)
        b -= a
        b *= w_
        a += b
        out[c0:c1] = a
    return out


def centered(be: Backend, X: Any, mean: Any, columns: Any | None = None) -> Any:
    """``X[:, columns] - mean`` in the working dtype (in row chunks)."""
    xp = be.xp
    n = int(X.shape[0])
    d = int(mean.shape[0])
    out = xp.empty((n, d), dtype=be.float_dtype, device=_device(be, X))
    for c0, c1 in _chunks(n):
        block = X[c0:c1] if columns is None else xp.take(X[c0:c1], columns, axis=1)
        out[c0:c1] = xp.astype(block - mean[None, :], be.float_dtype)
    return out


def box_sum_np(v: np.ndarray, p: int) -> np.ndarray:
    """Sums of ``p`` consecutive entries of a 1-D numpy array (``len - p + 1`` of them)."""
    c = np.concatenate([[0.0], np.cumsum(v, dtype=np.float64)])
    return c[p:] - c[:-p]


def make_bank(be: Backend, clips: list[np.ndarray], mean: np.ndarray, p: int) -> Bank:
    """A :class:`Bank` from example clips ``[L_e, d]`` (numpy, float64), each ``>= p`` frames."""
    Y64 = np.concatenate(clips, axis=0)
    Y = Y64 - mean[None]
    yy = np.empty(Y.shape[0] - p + 1)
    fr = np.einsum("ij,ij->i", Y, Y)
    yy[:] = box_sum_np(fr, p)
    # Patches crossing a clip boundary are not example patches.
    end = 0
    for c in clips[:-1]:
        end += c.shape[0]
        yy[max(end - p + 1, 0):end] = np.inf
    return Bank(be.asarray(Y), be.asarray(Y64, dtype=be.float64), be.asarray(mean, dtype=be.float64),
                be.asarray(yy), Y.shape[0] - p + 1)


def _patch_norms(be: Backend, X: Any, p: int) -> Any:
    """Squared norms of the ``len - p + 1`` patches of a backend array ``[n, d]``."""
    xp = be.xp
    parts = [xp.sum(X[c0:c1] * X[c0:c1], axis=1) for c0, c1 in _chunks(int(X.shape[0]))]
    fr = parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)
    n = fr.shape[0] - p + 1
    out = fr[0:n]
    for t in range(1, p):
        out = out + fr[t:t + n]
    return out


def _block_distances(be: Backend, Xe: Any, xx: Any, bank: Bank, p: int, i0: int, i1: int) -> Any:
    """``[i1 - i0, starts]`` squared patch distances of synthesis patches ``i0 .. i1 - 1``
    (``Xe`` holds the synthesis frames, already extended for circular patches)."""
    xp = be.xp
    G = xp.matmul(Xe[i0:i1 + p - 1], xp.matrix_transpose(bank.Y))
    n = i1 - i0
    m = bank.starts
    S = G[0:n, 0:m]
    S = S + G[1:n + 1, 1:m + 1] if p > 1 else S * 1
    for t in range(2, p):
        S += G[t:t + n, t:t + m]
    S *= -2.0
    S += xx[i0:i1, None]
    S += bank.yy[None, :]
    return S


def nearest_patches(
    be: Backend,
    X: Any,
    bank: Bank,
    p: int,
    alpha: float | None,
    *,
    periodic: bool = False,
    block_bytes: int = 64 << 20,
    tile_bytes: int | None = None,
) -> Any:
    """For each synthesis patch, the example patch minimising the normalised distance.

    ``score[i, j] = D[i, j] / (alpha * p * d + min_i' D[i', j])``, i.e. GenMM's
    ``D~ = d / (alpha + min d)`` with ``d`` the mean squared difference per patch value.
    ``alpha=None`` disables the normalisation (plain nearest neighbours).

    Distances are computed in tiles of synthesis patches (``tile_bytes`` of frame
    products each: cache-sized on the CPU, large on a GPU). When all tiles together fit
    in ``block_bytes`` they are kept between the two steps (column minima, then row
    minima); otherwise they are computed twice, so memory never exceeds ``block_bytes``
    plus one tile, however long the synthesis.

    Args:
        X: ``[n, d]`` synthesis frames (backend array), centred like ``bank``.
        periodic: the synthesis is a loop: ``n`` patches, the last ones wrapping around.

    Returns:
        ``[n_patches]`` indices of example patch starts (backend index array).
    """
    xp = be.xp
    n, d = int(X.shape[0]), int(X.shape[1])
    if periodic:
        Xe = xp.concat([X, X[0:p - 1]], axis=0) if p > 1 else X
        n_patches = n
    else:
        Xe = X
        n_patches = n - p + 1
    xx = _patch_norms(be, Xe, p)
    m = bank.starts
    itemsize = 4 if "32" in str(X.dtype) else 8
    if tile_bytes is None:
        tile_bytes = (8 << 20) if be.name == "numpy" or str(be.device) == "cpu" else (512 << 20)
    tile_bytes = min(tile_bytes, block_bytes)
    row_bytes = (m + p) * itemsize
    rows = max(1, min(n_patches, tile_bytes // row_bytes))
    blocks = [(i, min(i + rows, n_patches)) for i in range(0, n_patches, rows)]
    if alpha is None:
        out = [xp.argmin(_block_distances(be, Xe, xx, bank, p, i0, i1), axis=1) for i0, i1 in blocks]
        return xp.concat(out, axis=0) if len(out) > 1 else out[0]
    keep = n_patches * m * itemsize <= block_bytes
    colmin = None
    stored = []
    for i0, i1 in blocks:
        Dm = _block_distances(be, Xe, xx, bank, p, i0, i1)
        cm = xp.min(Dm, axis=0)
        colmin = cm if colmin is None else xp.minimum(colmin, cm)
        if keep:
            stored.append(Dm)
    inv = 1.0 / (xp.maximum(colmin, xp.zeros_like(colmin)) + float(alpha) * p * d)
    # Patches across clip boundaries have D = inf; keep them at inf (inf * 0 would be NaN).
    inv = xp.where(xp.isinf(colmin), xp.full_like(inv, float("inf")), inv)
    out = []
    for b, (i0, i1) in enumerate(blocks):
        Dm = stored[b] if keep else _block_distances(be, Xe, xx, bank, p, i0, i1)
        Dm *= inv[None, :]
        out.append(xp.argmin(Dm, axis=1))
        if keep:
            stored[b] = None
    return xp.concat(out, axis=0) if len(out) > 1 else out[0]


def vote_weights(p: int, sigma: float | None) -> np.ndarray:
    """``[p]`` voting weight of each place ``t`` in a patch: all ones (``sigma=None``:
    average voting, the paper's), or a Gaussian of ``sigma`` frames around the patch's
    centre, so that a frame takes more from the patches centred near it."""
    if sigma is None:
        return np.ones(p)
    t = np.arange(p) - (p - 1) / 2.0
    return np.exp(-0.5 * (t / float(sigma)) ** 2)


def vote(be: Backend, bank: Bank, nn: Any, n: int, p: int, *, periodic: bool = False,
         weights: np.ndarray | None = None) -> Any:
    """Voting: frame ``f`` of the result is the mean of the example frames that the
    matched patches covering ``f`` put there, weighted by their place in the patch
    (``weights [p]``, :func:`vote_weights`; ``None``: average voting). Returns ``[n, d]``
    float64 (not centred)."""
    xp = be.xp
    Y = bank.Y64
    d = int(Y.shape[1])
    k = int(nn.shape[0])
    total = n + p - 1 if periodic else n
    out = xp.zeros((total, d), dtype=Y.dtype, device=_device(be, Y))
    for t in range(p):
        for c0, c1 in _chunks(k):
            rows = xp.take(Y, nn[c0:c1] + t, axis=0)
            if weights is not None:
                rows = rows * float(weights[t])
            out[t + c0:t + c1] += rows
    w = np.ones(p) if weights is None else np.asarray(weights, dtype=np.float64)
    if periodic:
        if p > 1:
            out[0:p - 1] += out[n:n + p - 1]
        return out[0:n] / float(w.sum())
    f = np.arange(n)
    lo, hi = np.maximum(0, f - p + 1), np.minimum(f, k - 1)  # the patches covering frame f
    csum = np.concatenate([[0.0], np.cumsum(w)])
    count = csum[f - lo + 1] - csum[f - hi]  # the weights of places t = f - s, s = lo .. hi
    return out / be.asarray(count[:, None], dtype=out.dtype)


def _device(be: Backend, x: Any) -> Any:
    return None if be.name == "numpy" else x.device
