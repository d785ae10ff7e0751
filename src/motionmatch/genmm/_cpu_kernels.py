"""Numba kernels of GenMM's CPU path (see :mod:`motionmatch.genmm._cpu`).

Each kernel works on a range of rows ``r0 .. r1 - 1`` and computes every row on its own,
with the same operations in the same order whichever range it is in: the thread count
that cuts the rows never changes a number. They hold no GIL and allocate nothing (the
caller passes every array).
"""

from __future__ import annotations

import numpy as np

from motionmatch._jit import no_refcount


@no_refcount
def _center_row(src, cols, mean, dst):
    """``dst = src[cols] - mean`` in ``dst``'s dtype; returns the squared norm of the
    stored values (a float64 sum)."""
    s = 0.0
    for c in range(cols.shape[0]):
        dst[c] = src[cols[c]] - mean[c]
        w = np.float64(dst[c])
        s += w * w
    return s


@no_refcount
def center_rows(X, cols, mean, n_src, out, frame_sq, r0, r1):
    """``out[i] = X[i % n_src, cols] - mean`` and ``frame_sq[i]`` its squared norm, for
    rows ``r0 .. r1 - 1`` (rows past ``n_src`` wrap around: a loop's patches)."""
    for i in range(r0, r1):
        frame_sq[i] = _center_row(X[i % n_src], cols, mean, out[i])


@no_refcount
def patch_rows(G, g0, xx, yy, p, D, colmin, r0, r1):
    """Squared patch distances from frame products: ``G`` holds the products of synthesis
    frames ``g0, g0 + 1, ...`` with the example frames (``[rows, m + p - 1]``), ``xx``
    the patch norms of patches ``g0, g0 + 1, ...``, and ``D[i, j] = -2 * sum_t G[i - g0 +
    t, j + t] + xx[i - g0] + yy[j]`` (the sum in ``t`` order, in ``D``'s dtype) for rows
    ``r0 .. r1 - 1``; ``colmin[j]`` is lowered to the smallest ``D[i, j]`` of those rows."""
    m = D.shape[1]
    for i in range(r0, r1):
        row = D[i]
        g = G[i - g0]
        for j in range(m):
            row[j] = g[j]
        for t in range(1, p):
            g = G[i - g0 + t]
            for j in range(m):
                row[j] += g[j + t]
        x = xx[i - g0]
        for j in range(m):
            v = row[j]
            v = -(v + v)
            v += x
            v += yy[j]
            row[j] = v
            if v < colmin[j]:
                colmin[j] = v


@no_refcount
def patch_sums(frame_sq, p, out):
    """``out[i] = sum_t frame_sq[i + t]``, ``t < p`` (a float64 sum in ``t`` order, stored
    in ``out``'s dtype)."""
    for i in range(out.shape[0]):
        s = frame_sq[i]
        for t in range(1, p):
            s += frame_sq[i + t]
        out[i] = s


@no_refcount
def normalisers(colmins, parts, use_alpha, alpha_pd, inv):
    """The completeness normalisers ``inv[j] = 1 / (max(c_j, 0) + alpha_pd)`` with ``c_j``
    the least of ``colmins[0 .. parts - 1, j]`` (``inf`` where that is ``inf``: a patch
    across two clips; 1 without ``use_alpha``), in ``inv``'s dtype: ``alpha_pd`` has it."""
    for j in range(inv.shape[0]):
        c = colmins[0, j]
        for k in range(1, parts):
            if colmins[k, j] < c:
                c = colmins[k, j]
        if not use_alpha:
            inv[j] = 1.0
        elif c == np.inf:
            inv[j] = np.inf
        else:
            if c < 0:
                c = c * 0
            inv[j] = 1.0 / (c + alpha_pd)


@no_refcount
def _argmin_row(row, inv):
    """``argmin_j row[j] * inv[j]``, the first of equal minima (as ``numpy.argmin``)."""
    best = np.inf
    arg = 0
    for j in range(row.shape[0]):
        v = row[j] * inv[j]
        if v < best:
            best = v
            arg = j
    return arg


@no_refcount
def argmin_rows(D, inv, out, offset, r0, r1):
    """``out[offset + i] = argmin_j D[i, j] * inv[j]`` for rows ``r0 .. r1 - 1``."""
    for i in range(r0, r1):
        out[offset + i] = _argmin_row(D[i], inv)


@no_refcount
def _vote_row(Y, nn, base, wrap, p, periodic, weights, n, k, f, row):
    """Voting of frame ``f`` into ``row``: the mean of the example frames ``Y[nn(f - t) +
    t]`` of the ``k`` patches covering it, weighted by ``weights[t]`` (the frame's place
    in the patch; all ones: average voting), ``t`` ascending (on a loop of ``n`` frames,
    the patches that wrap around are summed apart and added last), with ``nn(s) = nn[s -
    base]``, plus ``wrap`` where that is negative."""
    d = row.shape[0]
    for c in range(d):
        row[c] = 0.0
    total = 0.0
    for t in range(p):
        s = f - t
        if s >= 0 and s < k:
            y = Y[nn[s - base] + t]
            w = weights[t]
            total += w
            for c in range(d):
                row[c] += y[c] * w
    if periodic and f < p - 1:
        # The patches starting near the end wrap around onto this frame.
        for t in range(f + 1, p):
            total += weights[t]
        for c in range(d):
            acc = 0.0
            for t in range(f + 1, p):
                i = f - t - base
                if i < 0:
                    i += wrap
                acc += Y[nn[i] + t, c] * weights[t]
            row[c] += acc
    for c in range(d):
        row[c] /= total


@no_refcount
def vote_rows(Y, nn, p, periodic, weights, out, r0, r1):
    """Voting (see :func:`_vote_row`) of frames ``r0 .. r1 - 1`` of ``out [n, d]`` from the
    nearest neighbours ``nn`` of all patches."""
    n = out.shape[0]
    for f in range(r0, r1):
        _vote_row(Y, nn, 0, n, p, periodic, weights, n, nn.shape[0], f, out[f])


@no_refcount
def match_vote_rows(D, inv, Y, p, periodic, weights, nn, out, recenter, cols, mean, Xc, frame_sq, ext_out, ext_Xc,
                    ext_sq, r0, r1):
    """Frames ``r0 .. r1 - 1`` of one match-and-blend, from the patch distances ``D
    [k, m]`` and the completeness normalisers ``inv [m]``: the nearest neighbours of the
    patches covering them (into ``nn``, this range's scratch of ``r1 - r0 + 2 (p - 1)``:
    neighbouring ranges find the patches they share each on their own, the same way),
    voting (``weights``, see :func:`_vote_row`) into ``out [n, d]`` and, with
    ``recenter``, those frames centred for the next iteration (``Xc[f] = out[f, cols] -
    mean``, ``frame_sq``; on a loop also the copies of the first ``p - 1`` frames after
    the last). Not on a loop, the ``e = len(ext_sq)`` frames after the range (``e < p``)
    are voted and centred too, into ``ext_out``, ``ext_Xc`` and ``ext_sq`` (this range's
    own copies of the next range's first frames, which its next patches need)."""
    n = out.shape[0]
    k = D.shape[0]
    base = r0 - p + 1
    e = ext_sq.shape[0]
    for j in range(base, r1 + e):
        s = j
        if periodic:
            if s < 0:
                s += n
        elif s < 0 or s >= k:
            continue
        nn[j - base] = _argmin_row(D[s], inv)
    for f in range(r0, r1):
        _vote_row(Y, nn, base, 0, p, periodic, weights, n, k, f, out[f])
        if recenter:
            frame_sq[f] = _center_row(out[f], cols, mean, Xc[f])
            if periodic and f < p - 1:
                src = Xc[f]
                dst = Xc[n + f]
                for c in range(src.shape[0]):
                    dst[c] = src[c]
                frame_sq[n + f] = frame_sq[f]
    for i in range(e):
        _vote_row(Y, nn, base, 0, p, periodic, weights, n, k, r1 + i, ext_out[i])
        ext_sq[i] = _center_row(ext_out[i], cols, mean, ext_Xc[i])


@no_refcount
def resample_rows(X, i0, i1, w, weighted_sum, out, r0, r1):
    """Linear resampling, rows ``r0 .. r1 - 1``: ``out[r] = a + (b - a) * w[r]`` with
    ``a, b = X[i0[r]], X[i1[r]]``, or with ``weighted_sum`` ``a * (1 - w[r]) + b * w[r]``
    (the two forms of :mod:`motionmatch.genmm._core`, for the synthesis and the examples)."""
    d = out.shape[1]
    for r in range(r0, r1):
        a = X[i0[r]]
        b = X[i1[r]]
        ww = w[r]
        dst = out[r]
        if weighted_sum:
            va = 1.0 - ww
            for c in range(d):
                dst[c] = a[c] * va + b[c] * ww
        else:
            for c in range(d):
                dst[c] = a[c] + (b[c] - a[c]) * ww
