"""Numba kernels that build the coarse search's index (for
:mod:`motionmatch.search.penalized`, once per database and options): the representatives
of each clip's segments (a frame standing for the next ones while they stay within a
threshold of it), the bounds of blocks of representatives (coded to a byte per feature, and
gathered into super-blocks), and which segments a tag mask admits, packed 8 to a byte.
:mod:`motionmatch.search._penalized_kernels`' coherent search walks them."""

from __future__ import annotations

import numba
import numpy as np

from motionmatch._jit import no_refcount


def super_block_codes(lo: np.ndarray, hi: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes of super-blocks: ``(lo [ceil(B / size), Dp], hi [...])`` uint8, the smallest
    ``lo`` and largest ``hi`` codes of each run of ``size`` consecutive blocks (same grid:
    their boxes contain the blocks' boxes)."""
    B = lo.shape[0]
    nb = max((B + size - 1) // size, 1)
    pad = nb * size - B
    lo_p = np.concatenate([lo, np.full((pad, lo.shape[1]), 255, np.uint8)]) if pad else lo
    hi_p = np.concatenate([hi, np.zeros((pad, hi.shape[1]), np.uint8)]) if pad else hi
    slo = lo_p.reshape(nb, size, -1).min(axis=1)
    shi = hi_p.reshape(nb, size, -1).max(axis=1)
    return np.ascontiguousarray(slo), np.ascontiguousarray(shi)


@numba.njit(cache=True, nogil=True)
def build_block_bounds(feats, valid, rep_lo, rep_hi, size, out_lo, out_hi):
    """Per-dimension bounds ``out_lo, out_hi [ceil(n / size), D]`` (float32, rounded outward
    so that they bound the float32 features exactly) of the valid frames in the segments of
    each run of ``size`` consecutive representatives; ``+inf / -inf`` where none is valid."""
    D = feats.shape[1]
    out_lo[:] = np.inf
    out_hi[:] = -np.inf
    for j in range(rep_lo.shape[0]):
        b = j // size
        for i in range(rep_lo[j], rep_hi[j]):
            if not valid[i]:
                continue
            for d in range(D):
                x = feats[i, d]
                if x < out_lo[b, d]:
                    out_lo[b, d] = x
                if x > out_hi[b, d]:
                    out_hi[b, d] = x


def encode_block_bounds(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float block bounds ``lo, hi [B, D]`` (``+inf / -inf`` rows: empty blocks) as uint8 codes
    on a per-dimension grid: ``(lo codes [B, D], hi codes [B, D], grid [2, D])`` with
    ``grid[0]`` the base (the smallest bound) and ``grid[1]`` the step (range / 250). Codes
    round outward with a margin of 1e-6 step, so the decoded box ``base + code * step``
    contains the float box (the distance to it stays a lower bound); an empty block gets the
    whole range (it is then only skipped when nothing could win anyway)."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    D = lo.shape[1]
    fin = np.isfinite(lo) & np.isfinite(hi)
    base = np.where(fin, lo, np.inf).min(axis=0) if len(lo) else np.zeros(D)
    top = np.where(fin, hi, -np.inf).max(axis=0) if len(hi) else np.ones(D)
    base = np.where(np.isfinite(base), base, 0.0)
    top = np.where(np.isfinite(top), top, base + 1.0)
    step = np.maximum((top - base) / 250.0, 1e-12)
    eps = 1e-6
    with np.errstate(invalid="ignore"):
        cl = np.floor((lo - base) / step - eps)
        ch = np.ceil((hi - base) / step + eps)
    cl = np.where(fin, np.clip(cl, 0, 255), 0)
    ch = np.where(fin, np.clip(ch, 0, 255), 255)
    # the decoded box must contain the float box (checked, not assumed)
    dl = base + cl * step
    dh = base + ch * step
    if np.any(fin & ((dl > lo) | (dh < hi))):
        raise ValueError("block bounds: encoding lost a bound")
    grid = np.ascontiguousarray(np.stack([base, step]))
    return cl.astype(np.uint8), ch.astype(np.uint8), grid


@no_refcount
def mask_bits(reps, rep_lo, rep_hi, mask, out):
    """``out [ceil(len(reps) / 8)]`` uint8: bit ``t`` of byte ``b`` set when segment
    ``j = 8 b + t`` (frames ``[rep_lo[j], rep_hi[j])``) holds a frame ``mask`` admits: its
    representative ``reps[j]``, or (a sparse mask, e.g. a few entry frames of one clip)
    another one. The search then visits the segment through its representative even when
    the representative itself is not admitted (it is then not a candidate)."""
    for b in range(out.shape[0]):
        out[b] = 0
    for j in range(reps.shape[0]):
        hit = mask[reps[j]]
        if not hit:
            for i in range(rep_lo[j], rep_hi[j]):
                if mask[i]:
                    hit = True
                    break
        if hit:
            out[j >> 3] |= np.uint8(1 << (j & 7))


@numba.njit(cache=True, nogil=True)
def build_representatives(feats, valid, clip_starts, clip_stops, inv_range, min_stride, threshold, out_reps,
                          out_lo, out_hi):
    """Representative frames per clip: the first valid frame, then each valid frame at least
    ``min_stride`` after the last representative whose features differ from it by at least
    ``threshold`` on average over the dimensions, each difference relative to its
    dimension's range (the paper's "5% relative to each feature's range"). Fills the
    segments ``[lo, hi)`` (halfway to the neighbouring representatives, clip-bounded) and
    returns the number of representatives."""
    n = 0
    D = feats.shape[1]
    for c in range(clip_starts.shape[0]):
        a = clip_starts[c]
        b = clip_stops[c]
        first = n
        last = -1
        for i in range(a, b):
            if not valid[i]:
                continue
            if last >= 0:
                if i - last < min_stride:
                    continue
                diff = 0.0
                for d in range(D):
                    diff += abs(np.float64(feats[i, d]) - np.float64(feats[last, d])) * inv_range[d]
                if diff < threshold * D:
                    continue
            out_reps[n] = i
            n += 1
            last = i
        for j in range(first, n):
            out_lo[j] = a if j == first else (out_reps[j - 1] + out_reps[j]) // 2 + 1
            out_hi[j] = b if j == n - 1 else (out_reps[j] + out_reps[j + 1]) // 2 + 1
    return n
