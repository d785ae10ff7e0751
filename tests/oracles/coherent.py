"""The coherent (temporal-coherence) search of the environment-aware paper in plain Python:
the reference of the compiled :func:`motionmatch.search._penalized_kernels.coherent_search`
(without super-blocks), visit by visit.

It walks the representatives as the paper describes (Sec. 5.4.2): from ``start``, one
representative at a time; a representative whose segment holds no frame the mask admits is
stepped over with stride 1; another one is scored against the best so far (its segment
searched when it beats it), then the stride grows with its dissimilarity to the best frame
(:func:`motionmatch.search._penalized_kernels.stride_for`); with block bounds, a block of
representatives whose coded box is already farther from the query than the best score is
skipped whole, and so are the blocks after it with bounds as high. Penalties come from the
kernels' own :func:`~motionmatch.search._penalized_kernels._penalised` (the same early
rejection), block bounds from the scalar ``box_codes_gap``. Returns the frame, its score and
the visit counters, which the compiled search must reproduce exactly: any shortcut it takes
(runs of excluded segments crossed at once, say) must leave the walk unchanged.
"""

from __future__ import annotations

import math

import numpy as np

from motionmatch.search import _penalized_kernels as PK


def coherent_reference(ps, opt, q, w, mask, obs, counts, pen, env_weight, init: int, prev: int) -> dict:
    """The coherent search of :class:`~motionmatch.search.penalized.PenalizedSearch` ``ps``
    with :class:`~motionmatch.search.penalized.SearchOptions` ``opt`` (dissimilarity on,
    no super-blocks, warm start) for query ``q [D]``, weights ``w [D]``, ``mask [N]``, the
    obstacles ``obs, counts`` and packed penalty ``pen``, seeded with frame ``init`` and
    starting before the representative of ``prev`` (as ``run_search`` does). Returns
    ``{"index", "score", "representatives", "distances", "segments", "blocks_skipped"}``."""
    reps, rep_feats, rep_lo, rep_hi, rep_of = ps.representatives(opt.adaptive)
    feats, valid = ps.features, ps.valid
    env = PK.Env(ps.ellipses, obs, counts, PK.Penalty(*pen), env_weight)
    stats = np.zeros(PK.NS, dtype=np.int64)
    n, D = len(reps), len(q)

    def dist(i):
        return float(np.sum(w * (feats[i].astype(np.float64) - q) ** 2))

    def dist_rep(j, f):
        return float(np.sum(w * (rep_feats[j, :D].astype(np.float64) - f) ** 2))

    def penalised(i, d, best):
        return PK._penalised(i, d, env, best, True, stats)

    blk = opt.block_size if opt.block_bounds else 0
    gaps = []
    if blk:
        lo, hi, grid, order = ps.block_bounds(opt.adaptive, blk)
        dp = lo.shape[1]
        ql, qh, wc = (np.zeros(dp, np.float32) for _ in range(3))
        x = np.clip((q[order] - grid[0]) / grid[1], -10000.0, 10255.0)
        ql[:D], qh[:D] = np.floor(x), np.ceil(x)
        wc[:D] = (w[order] * grid[1] * grid[1] * (1.0 - 1e-5)).astype(np.float32)
        gaps = [PK.box_codes_gap(lo, hi, b, ql, qh, wc) for b in range(lo.shape[0])]
    admitted = [bool(mask[reps[j]] or mask[rep_lo[j]:rep_hi[j]].any()) for j in range(n)]

    best, bi = math.inf, -1
    if init >= 0 and valid[init] and mask[init]:
        best, bi = penalised(init, dist(init), math.inf), init
    else:
        init = -1
    nd = nr = nf = skipped = 0
    if init >= 0:
        for i in range(rep_lo[rep_of[init]], rep_hi[rep_of[init]]):
            if i == init or not (valid[i] and mask[i]):
                continue
            nd += 1
            d2 = dist(i)
            if d2 < best:
                s2 = penalised(i, d2, best)
                if s2 < best:
                    best, bi = s2, i
    fb = feats[bi].astype(np.float64) if bi >= 0 else None
    start = (rep_of[prev] - round(opt.start_back * n)) % n if prev >= 0 else 0
    j, seen, cur_blk = start, 0, -1
    v2 = opt.v * opt.v
    while seen < n:
        if blk and j // blk != cur_blk:
            cur_blk = j // blk
            if best < math.inf and gaps[cur_blk] >= best:
                e = cur_blk + 1
                while e < len(gaps) and gaps[e] >= best:
                    e += 1
                nxt = min(e * blk, n)
                seen += nxt - j
                skipped += e - cur_blk
                j = nxt if nxt < n else 0
                continue
        nr += 1
        step = 1
        if admitted[j]:
            nd += 1
            dr = dist_rep(j, q)
            improved = False
            r = reps[j]
            if dr < best * opt.segment_slack and r != bi:
                open_seg = opt.segment_slack > 1.0
                if dr < best:
                    if mask[r]:
                        s = penalised(r, dr, best)
                        if s < best:
                            best, bi, improved = s, r, True
                    else:
                        open_seg = True
                if improved or open_seg:
                    nf += 1
                    for i in range(rep_lo[j], rep_hi[j]):
                        if i == r or not (valid[i] and mask[i]):
                            continue
                        nd += 1
                        d2 = dist(i)
                        if d2 < best:
                            s2 = penalised(i, d2, best)
                            if s2 < best:
                                best, bi, improved = s2, i, True
                if improved:
                    fb = feats[bi].astype(np.float64)
            if bi >= 0 and 0.0 < best < math.inf:
                step = PK.stride_for(dist_rep(j, fb), 1.0 / best, v2, opt.max_stride)
        j += step
        if j >= n:
            j -= n
        seen += step
    return {"index": bi, "score": best, "representatives": nr, "distances": nd, "segments": nf,
            "blocks_skipped": skipped}
