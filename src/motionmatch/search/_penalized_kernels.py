"""Numba kernels of :mod:`motionmatch.search.penalized` (environment-penalised search).

Score of a frame ``i`` for a query ``q`` (per-dimension weights ``w``)::

    score(i) = sum_d w_d (q_d - f_id)^2  +  W_env * sum_k W_k sum_m c_m b(sd(E_ik, O_km) - margin)

``E_ik`` is the frame's body ellipse at future slot ``k`` (character frame of the query),
``O_km`` the obstacles of that slot (already moved into the same frame, time-aligned for
moving obstacles and agents), ``c_m`` a per-obstacle weight, ``b`` the log barrier of
:mod:`motionmatch.geometry.shapes`. With height features an obstacle with a vertical
range only counts when the body's vertical extent at that slot overlaps it.

Base optimisations (always on unless ``early`` is false, which only the tests use): the
query distance first, rejected as soon as it reaches the best score so far (a partial
check halfway through the dimensions); then penalties slot by slot (first, second, third
ellipse: the later slots weigh less), obstacle by obstacle in the caller's order (nearest
first, disks first), rejected as soon as the running score reaches the best; a cheap
circle/box lower bound skips pairs farther apart than the threshold before the exact
signed distance is computed.

Arguments travel in named tuples (:class:`Frames`, :class:`Query`, :class:`Env` with its
:class:`Penalty`, :class:`Options`, :class:`Coarse`, :class:`Scratch`, :class:`View`);
the entry points called from Python take them as plain tuples and name them on entry (see
:mod:`motionmatch._jit`). Arrays: ``feats [N, D]`` float32; ``w [D]`` float64; ``ell
[N, K, 8]`` float32 (centre x, z, unit axis x, z, semi-axis along, semi-axis across,
lowest and highest joint height); ``obs [K, M, ROW]`` float64 and ``counts [K]`` int64.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from motionmatch._jit import no_refcount
from motionmatch.geometry.shapes import (
    C_P,
    C_Q,
    C_R,
    C_TYPE,
    C_UX,
    C_UZ,
    C_W,
    C_X,
    C_YMAX,
    C_YMIN,
    C_Z,
    T_BOX,
    T_DISK,
    barrier,
    signed_distance,
)
from motionmatch.search._simd import codes_gap

# statistics counters
S_DIST = 0       # query distances started
S_PEN = 1        # frames whose penalties were evaluated
S_SD = 2         # exact signed distances computed
S_FINE = 3       # fine (segment) searches opened
S_REPS = 4       # representatives visited
S_BLK = 5        # blocks of representatives skipped by their bounds
NS = 6

# what a search used (run_search's second result)
USED_LINEAR = 0
USED_COHERENT = 1
USED_FALLBACK = 2
USED_CLEAR = 3


class Frames(NamedTuple):
    """The frames a search chooses from (built once per searcher)."""

    feats: np.ndarray  #: ``[N, D]`` float32 normalised, weighted query features
    valid: np.ndarray  #: ``[N]`` bool frames that may be returned
    ell: np.ndarray    #: ``[N, K, 8]`` float32 body ellipses (see the module docstring)


class Penalty(NamedTuple):
    """The obstacle penalties' parameters (:meth:`.penalized.PenaltyParams.packed`)."""

    threshold: float          #: d̂ (m): a pair's penalty starts below this distance
    exponent: float           #: κ, the barrier's exponent
    margin: float             #: clearance kept around the body (m), subtracted from distances
    height_low: float         #: margin below the body's lowest joint (m)
    height_top: float         #: margin above its highest joint (m): the head's top is above the head joint
    heights: bool             #: gate obstacles with a height range by the body's vertical extent
    disk: bool                #: the body is a disk (circumscribed circle of the ellipse): ablation
    slot_weights: np.ndarray  #: ``[K]`` float64 per-ellipse weights W_k


class Env(NamedTuple):
    """What the penalties of one search's frames are computed from."""

    ell: np.ndarray     #: ``[N, K, 8]`` float32 the frames' body ellipses (:attr:`Frames.ell`)
    obs: np.ndarray     #: ``[K, M, ROW]`` float64 obstacle rows per slot, in the query's character frame
    counts: np.ndarray  #: ``[K]`` int64 rows of each slot in use
    pen: Penalty
    env_weight: float   #: W_env, the weight of all penalties


class Query(NamedTuple):
    """One search's query."""

    q: np.ndarray         #: ``[D]`` float64 the query features
    w: np.ndarray         #: ``[D]`` float64 per-dimension weights of the squared distance
    mask: np.ndarray      #: ``[N]`` bool frames allowed (with :attr:`Frames.valid`)
    rep_bits: np.ndarray  #: ``[ceil(R / 8)]`` uint8 segments holding a frame ``mask`` admits, packed (:func:`mask_bits`)


class Options(NamedTuple):
    """A search's options (:class:`.penalized.SearchOptions` packed once)."""

    method: int       #: 0: linear, 1: coherent, -1: plain (no penalised search)
    warm: bool        #: warm start: seed with the frame playing now, start near the previous best match
    dissim: int       #: stride: 0 stride 1, 1 dissimilarity to the best frame, 2 its triangle bound
    max_stride: int   #: stride cap (representatives)
    v: float          #: stride aggressiveness
    slack: float      #: segment slack (see :func:`coherent_search`)
    fallback: bool    #: collision fallback to the linear search
    clear: bool       #: report "clear" (no obstacle) instead of searching: the caller runs the plain search
    back: int         #: how many representatives before the previous best's to start
    block: int        #: representatives per block (0: no block bounds)
    super_block: int  #: blocks per super-block (0: none)


class Coarse(NamedTuple):
    """The coherent search's representatives and bounds (one row placeholders for other methods)."""

    reps: np.ndarray       #: ``[R]`` int64 representative frames
    rep_feats: np.ndarray  #: ``[R, Dr]`` float32 their features, rows padded to whole cache lines
    rep_lo: np.ndarray     #: ``[R]`` int64 first frame of each representative's segment
    rep_hi: np.ndarray     #: ``[R]`` int64 its end (exclusive)
    rep_of: np.ndarray     #: ``[N]`` int64 each frame's representative
    blk_lo: np.ndarray     #: ``[B, Dp]`` uint8 per-block lower bound codes (see :func:`coherent_search`)
    blk_hi: np.ndarray     #: ``[B, Dp]`` uint8 upper bound codes
    blk_grid: np.ndarray   #: ``[2, D]`` float64 the codes' grid: base and step per column
    blk_order: np.ndarray  #: ``[D]`` int64 feature dimension of each coded column
    sup_lo: np.ndarray     #: ``[S, Dp]`` uint8 super-block lower bound codes
    sup_hi: np.ndarray     #: ``[S, Dp]`` uint8 upper bound codes


class Scratch(NamedTuple):
    """A search's outputs and scratch (kept by a caller that searches often)."""

    stats: np.ndarray      #: ``[NS]`` int64 counters (``S_*``), zeroed by each search
    clearance: np.ndarray  #: ``[K]`` float64 the result's smallest signed distance per ellipse (m)
    out: np.ndarray        #: ``[4]`` float64: score, distance, score of the frame ``cur``, collides (0/1)
    qcodes: np.ndarray     #: ``[3, Dp]`` float32: the query's block-bound codes
    qpad: np.ndarray       #: ``[3, Dr]`` float64: query, weights, best frame, padded to ``Dr``
    gaps: np.ndarray       #: ``[>= B]`` float32: every block's bound


class View(NamedTuple):
    """What an environment-aware chooser searches with (per feature view, built once)."""

    cols: np.ndarray      #: ``[D]`` int64 the query columns the search uses
    off: np.ndarray       #: ``[D]`` bool columns the view leaves out (weight 0: the planar view's vertical ones)
    pose: np.ndarray      #: ``[D]`` bool columns weighted by continuity
    pos: np.ndarray       #: ``[D]`` bool trajectory positions, weighted by responsiveness
    direc: np.ndarray     #: ``[D]`` bool trajectory directions, weighted by responsiveness x evasion
    zero: np.ndarray      #: ``[Dq]`` bool query columns taken as 0 in the plain view distance
    db_feats: np.ndarray  #: ``[N, Dq]`` the database's features (the controller's distance)


#: fast-math flags for the distance loops: reassociation lets LLVM vectorise the sums
#: (no flag that assumes finite values: scores use +inf as "none yet")
FM = {"reassoc", "contract", "arcp", "nsz"}


@no_refcount(fastmath=FM)
def _dist(feats, i, q, w):
    """Weighted squared distance of frame ``i`` (float64 accumulation, vectorised)."""
    s = 0.0
    for d in range(q.shape[0]):
        t = np.float64(feats[i, d]) - q[d]
        s += w[d] * t * t
    return s


@no_refcount
def _copy_row(feats, i, out):
    """``out[:D] = feats[i]`` as float64 (``D = feats.shape[1]``; the rest of ``out`` kept)."""
    for d in range(feats.shape[1]):
        out[d] = feats[i, d]


@no_refcount(fastmath=FM)
def _dist_rows(feats, i, j, w):
    """Weighted squared distance between frames ``i`` and ``j``."""
    s = 0.0
    for d in range(feats.shape[1]):
        t = np.float64(feats[i, d]) - np.float64(feats[j, d])
        s += w[d] * t * t
    return s


@no_refcount
def _point_lb(px, pz, obs, k, m):
    """:func:`~motionmatch.geometry.shapes.point_lower_bound` of row ``obs[k, m]``, read
    element by element (no array view: views cost reference counting in a hot loop)."""
    dx = px - obs[k, m, C_X]
    dz = pz - obs[k, m, C_Z]
    if int(obs[k, m, C_TYPE]) != T_BOX:
        return math.sqrt(dx * dx + dz * dz) - obs[k, m, C_R]
    ux = obs[k, m, C_UX]
    uz = obs[k, m, C_UZ]
    lx = abs(dx * ux + dz * uz) - obs[k, m, C_P]
    lz = abs(-dx * uz + dz * ux) - obs[k, m, C_Q]
    if lx <= 0.0 and lz <= 0.0:
        return max(lx, lz)
    lx = max(lx, 0.0)
    lz = max(lz, 0.0)
    return math.sqrt(lx * lx + lz * lz)


@no_refcount
def _point_ub(px, pz, obs, k, m):
    """:func:`~motionmatch.geometry.shapes.point_upper_bound` of row ``obs[k, m]``
    (element by element, as :func:`_point_lb`)."""
    t = int(obs[k, m, C_TYPE])
    if t == T_BOX:
        return _point_lb(px, pz, obs, k, m)
    dx = px - obs[k, m, C_X]
    dz = pz - obs[k, m, C_Z]
    r = obs[k, m, C_P] if t == T_DISK else min(obs[k, m, C_P], obs[k, m, C_Q])
    return math.sqrt(dx * dx + dz * dz) - r


@no_refcount
def _slot_ellipse(ell, i, k, pen):
    """Frame ``i``'s ellipse in slot ``k`` of ``ell [N, K, 8]`` as float64 ``(cx, cz, ux,
    uz, a, b, R, lo, hi)``: centre, unit axis, semi-axes (both ``R = max(a, b)`` with a
    disk body), and the height range widened by the penalty's (:class:`Penalty`) height margins."""
    cx = np.float64(ell[i, k, 0])
    cz = np.float64(ell[i, k, 1])
    ux = np.float64(ell[i, k, 2])
    uz = np.float64(ell[i, k, 3])
    a = np.float64(ell[i, k, 4])
    b = np.float64(ell[i, k, 5])
    R = a if a > b else b
    if pen.disk:
        a = R
        b = R
    lo = np.float64(ell[i, k, 6]) - pen.height_low
    hi = np.float64(ell[i, k, 7]) + pen.height_top
    return cx, cz, ux, uz, a, b, R, lo, hi


@no_refcount
def _out_of_reach(cx, cz, reach, obs, k, m):
    """Whether obstacle ``m`` of slot ``k`` is surely farther than ``reach`` (m) from the
    point ``(cx, cz)`` (bounding circle for disks and ellipses, box distance for boxes)."""
    if int(obs[k, m, C_TYPE]) != T_BOX:
        dx = obs[k, m, C_X] - cx
        dz = obs[k, m, C_Z] - cz
        lim = reach + obs[k, m, C_R]
        return dx * dx + dz * dz >= lim * lim
    return _point_lb(cx, cz, obs, k, m) >= reach


@no_refcount
def frame_penalty(i, env, budget, early, stats):
    """Weighted penalty sum of frame ``i`` (without W_env) in :class:`Env` ``env``; stops
    once it reaches ``budget``."""
    ell = env.ell
    obs = env.obs
    counts = env.counts
    pen = env.pen
    dhat = pen.threshold
    kappa = pen.exponent
    margin = pen.margin
    use_h = pen.heights
    disk = pen.disk
    slotw = pen.slot_weights
    K = counts.shape[0]
    if early:
        # a cheap lower bound first: the ellipse contains the disk of its smaller semi-axis
        # around its centre, so sd(ellipse, obstacle) <= sd(centre, obstacle) - min(a, b);
        # the barrier decreases, so barrier(that) bounds the pair's penalty from below
        # (the bound only grows: the frame is rejected as soon as it reaches the budget)
        low = 0.0
        for k in range(K):
            n = counts[k]
            if n == 0:
                continue
            cx = np.float64(ell[i, k, 0])
            cz = np.float64(ell[i, k, 1])
            a = np.float64(ell[i, k, 4])
            b = np.float64(ell[i, k, 5])
            inner = max(a, b) if disk else min(a, b)  # radius of a disk inside the body
            lo = np.float64(ell[i, k, 6]) - pen.height_low
            hi = np.float64(ell[i, k, 7]) + pen.height_top
            for m in range(n):
                if use_h and (hi <= obs[k, m, C_YMIN] or lo >= obs[k, m, C_YMAX]):
                    continue
                ub = _point_ub(cx, cz, obs, k, m) - inner - margin
                if ub < dhat:
                    low += slotw[k] * obs[k, m, C_W] * barrier(ub, dhat, kappa)
                    if low >= budget:
                        return low
    total = 0.0
    for k in range(K):
        n = counts[k]
        if n == 0:
            continue
        cx, cz, ux, uz, a, b, R, lo, hi = _slot_ellipse(ell, i, k, pen)
        wk = slotw[k]
        reach = dhat + margin + R
        for m in range(n):
            if use_h and (hi <= obs[k, m, C_YMIN] or lo >= obs[k, m, C_YMAX]):
                continue
            if _out_of_reach(cx, cz, reach, obs, k, m):
                continue
            stats[S_SD] += 1
            d = signed_distance(cx, cz, ux, uz, a, b, obs[k, m]) - margin
            if d < dhat:
                total += wk * obs[k, m, C_W] * barrier(d, dhat, kappa)
                if early and total >= budget:
                    return total
    return total


@no_refcount
def frame_clearance(i, fr, pen, obs, counts, out):
    """``out[k]``: smallest signed distance (m, margin subtracted) of frame ``i``'s slot-k
    ellipse to the obstacles that count (height gating applied); ``+inf`` without any.
    ``fr`` :class:`Frames` and ``pen`` :class:`Penalty` as plain tuples (see
    :mod:`motionmatch._jit`)."""
    ell = Frames(*fr).ell
    pen = Penalty(*pen)
    for k in range(counts.shape[0]):
        best = np.inf
        a = np.float64(ell[i, k, 4])
        b = np.float64(ell[i, k, 5])
        if pen.disk:
            a = max(a, b)
            b = a
        lo = np.float64(ell[i, k, 6]) - pen.height_low
        hi = np.float64(ell[i, k, 7]) + pen.height_top
        for m in range(counts[k]):
            if pen.heights and (hi <= obs[k, m, C_YMIN] or lo >= obs[k, m, C_YMAX]):
                continue
            d = signed_distance(np.float64(ell[i, k, 0]), np.float64(ell[i, k, 1]), np.float64(ell[i, k, 2]),
                                np.float64(ell[i, k, 3]), a, b, obs[k, m]) - pen.margin
            if d < best:
                best = d
        out[k] = best


@no_refcount
def _penalised(i, d, env, best, early, stats):
    """``d`` plus the weighted penalties of frame ``i`` (stops once it reaches ``best``)."""
    envw = env.env_weight
    budget = (best - d) / envw if envw > 0 else np.inf
    stats[S_PEN] += 1
    return d + envw * frame_penalty(i, env, budget, early, stats)


@numba.njit(cache=True, nogil=True)
def score_frames(idx, fr, pen, q, w, obs, counts, env_weight, out):
    """Full scores (no rejection) of frames ``idx`` into ``out`` (``fr``, ``pen``: as
    :func:`frame_clearance`)."""
    feats = Frames(*fr).feats
    env = Env(Frames(*fr).ell, obs, counts, Penalty(*pen), env_weight)
    stats = np.zeros(NS, dtype=np.int64)
    for j in range(idx.shape[0]):
        out[j] = _penalised(idx[j], _dist(feats, idx[j], q, w), env, np.inf, False, stats)


@no_refcount
def init_score(init, fr, qr, env, stats):
    """The full score of frame ``init`` that seeds a search (``inf`` for -1)."""
    if init < 0:
        return np.inf
    return _penalised(init, _dist(fr.feats, init, qr.q, qr.w), env, np.inf, True, stats)


@no_refcount(fastmath=FM)
def linear_search(fr, qr, env, init, init_score, early, stats):
    """Exact: every valid frame in the mask, with early rejection, seeded with frame ``init``
    (-1: none) of full score ``init_score`` (:func:`init_score`). Returns (index, score)."""
    feats = fr.feats
    valid = fr.valid
    q = qr.q
    w = qr.w
    mask = qr.mask
    best = np.inf
    bi = -1
    if init >= 0:
        best = init_score
        bi = init
    n = 0
    for i in range(feats.shape[0]):
        if not (valid[i] and mask[i]) or i == init:
            continue
        n += 1
        d = _dist(feats, i, q, w)
        if early and d >= best:
            continue
        s = _penalised(i, d, env, best, early, stats)
        if s < best:
            best = s
            bi = i
    stats[S_DIST] += n
    return bi, best


@no_refcount(fastmath=FM)
def coherent_search(fr, qr, env, co, opt, scr, start, init, init_score, init_seg):
    """Temporal-coherence search (paper Sec. 5.4.2) of :class:`Query` ``qr`` over
    :class:`Frames` ``fr`` with the penalties of :class:`Env` ``env``: representatives
    (:class:`Coarse` ``co``) from ``start`` (wrapping around), each scored against the best
    so far; a representative that beats it opens its segment ``[rep_lo, rep_hi)`` (so does
    one whose query distance alone is below ``opt.slack`` times the best score, ``slack >
    1``); with ``opt.dissim`` the stride over representatives grows with the dissimilarity
    between the representative and the best frame (see :func:`stride_for`). The frame
    playing now (``init``, full score ``init_score``) seeds the best score, and its segment
    (``init_seg``, -1: none) is searched first. ``co.rep_feats`` holds the representatives'
    features contiguously (the coarse pass then reads memory in order).

    Block bounds (``opt.block > 0``): ``co.blk_lo, co.blk_hi [ceil(R / block), Dp]`` (uint8
    codes on the grid ``co.blk_grid [2, D]``: value = base + code * step, see
    :func:`encode_block_bounds`; column ``j`` is feature dimension ``co.blk_order[j]``)
    bound, per dimension, every valid frame in the segments of each run of ``opt.block``
    consecutive representatives (a quarter of the memory of float32 bounds: the pass over
    them is what a cold cache makes costly); on entering a block, its weighted box distance
    to the query (a lower bound of every score in it: penalties are >= 0) is compared with
    the best score and the whole block is skipped when it cannot win (it never skips a frame
    that could beat the best so far; the stride then restarts at the next block).
    Super-blocks (``opt.super_block > 0``): ``co.sup_lo, co.sup_hi [ceil(B /
    super_block), Dp]``, the same codes bounding runs of ``super_block`` blocks, checked
    first on entering one of them (then skipped whole, with the same guarantee): small
    blocks give tight bounds, and the super-blocks keep their checks few. ``qr.rep_bits``:
    bit ``t`` of byte ``b`` says whether segment ``8 b + t`` holds a frame the mask admits
    (see :func:`mask_bits`; a visit then reads neither ``reps`` nor ``mask``, but for a
    representative close enough to be scored). Scratch (:class:`Scratch` ``scr``, no allocation
    here: see :mod:`motionmatch._jit`): ``qcodes`` (the query's codes), ``qpad`` (the query,
    the weights and the best frame's features padded with zeros to the width of
    ``rep_feats``' rows), ``gaps`` (every block's bound). Returns (index, score)."""
    feats = fr.feats  # (the fields once, as locals: fewer operations for Numba to type in the loops)
    valid = fr.valid
    q = qr.q
    w = qr.w
    mask = qr.mask
    rep_bits = qr.rep_bits
    reps = co.reps
    rep_feats = co.rep_feats
    rep_lo = co.rep_lo
    rep_hi = co.rep_hi
    blk_lo = co.blk_lo
    blk_hi = co.blk_hi
    blk_grid = co.blk_grid
    blk_order = co.blk_order
    sup_lo = co.sup_lo
    sup_hi = co.sup_hi
    dissim = opt.dissim
    v = opt.v
    max_stride = opt.max_stride
    slack = opt.slack
    blk_size = opt.block
    sup_size = opt.super_block
    stats = scr.stats
    qcodes = scr.qcodes
    qpad = scr.qpad
    gaps = scr.gaps
    D = q.shape[0]
    best = np.inf
    bi = -1
    db_best = 0.0  # the best frame's query distance (its features: feats[bi])
    Dp = blk_lo.shape[1]  # the query's codes and the weights in grid units of the block bounds
    ql = qcodes[0, :Dp]  # whole numbers of steps, as float32 (exact)
    qh = qcodes[1, :Dp]
    wc = qcodes[2, :Dp]
    for d in range(Dp):
        ql[d] = 0.0
        qh[d] = 0.0
        wc[d] = 0.0
    if blk_size > 0:
        for d in range(D):
            o = blk_order[d]
            x = (q[o] - blk_grid[0, d]) / blk_grid[1, d]
            x = min(max(x, -10000.0), 10255.0)  # far beyond the grid: gaps stay exact to 10^4 steps, no overflow
            ql[d] = np.float32(math.floor(x))
            qh[d] = np.float32(math.ceil(x))
            wc[d] = np.float32(w[o] * blk_grid[1, d] * blk_grid[1, d] * (1.0 - 1e-5))  # float32: round down
        # every block's bound in one pass (independent iterations that pipeline; the scan
        # then compares a number where it would compute a bound on the way)
        for b in range(blk_lo.shape[0]):
            gaps[b] = codes_gap(blk_lo, blk_hi, b, ql, qh, wc)
    # the query, the weights and the best frame's features over the representatives' whole
    # row width (zeros past D: the distance loops below then have no remainder)
    Dr = rep_feats.shape[1]
    qv = qpad[0]
    wv = qpad[1]
    fbv = qpad[2]
    for d in range(Dr):
        qv[d] = q[d] if d < D else 0.0
        wv[d] = w[d] if d < D else 0.0
        fbv[d] = 0.0
    if init >= 0:
        db_best = _dist(feats, init, q, w)
        best = init_score
        bi = init
        _copy_row(feats, bi, fbv)
    n = reps.shape[0]
    if n == 0:
        return bi, best
    nd = 0
    nr = 0
    nf = 0
    if init >= 0 and init_seg >= 0:
        # the segment of the frame playing now: its continuation is the likeliest match
        for i in range(rep_lo[init_seg], rep_hi[init_seg]):
            if i == init or not (valid[i] and mask[i]):
                continue
            nd += 1
            d2 = _dist(feats, i, q, w)
            if d2 < best:
                s2 = _penalised(i, d2, env, best, True, stats)
                if s2 < best:
                    best = s2
                    bi = i
        db_best = _dist(feats, bi, q, w)
        _copy_row(feats, bi, fbv)
    j = start % n
    seen = 0
    cur_blk = -1
    cur_sup = -1
    v2 = v * v
    inv_best = 0.0  # 1 / best, updated when the best changes
    inv_of = -1.0
    n_blk = (n + blk_size - 1) // blk_size if blk_size > 0 else 0
    # a block size that is a power of two (the default, 8) finds a representative's block
    # with a shift: an integer division would sit on the chain from one visit to the next
    # about every second visit (strides average 4 representatives)
    blk_shift = -1
    if blk_size > 0 and (blk_size & (blk_size - 1)) == 0:
        blk_shift = 0
        while (1 << blk_shift) < blk_size:
            blk_shift += 1
    blk_begin = 0  # representatives [blk_begin, blk_end) form the current block
    blk_end = 0
    while seen < n:
        # (a range test, not ``j // blk_size`` on every step: an integer division is
        # slow and would sit on the chain from one step to the next)
        if blk_size > 0 and (j >= blk_end or j < blk_begin):
            b = j >> blk_shift if blk_shift >= 0 else j // blk_size
            blk_begin = b * blk_size
            blk_end = blk_begin + blk_size
            if b != cur_blk:
                cur_blk = b
                if sup_size > 0 and b // sup_size != cur_sup:
                    # a new super-block: the box of its ``sup_size`` blocks first
                    cur_sup = b // sup_size
                    if best < np.inf and box_codes_gap(sup_lo, sup_hi, cur_sup, ql, qh, wc) >= best:
                        nxt = (cur_sup + 1) * sup_size * blk_size
                        if nxt > n:
                            nxt = n
                        stats[S_BLK] += (nxt - 1) // blk_size - b + 1
                        seen += nxt - j
                        j = nxt if nxt < n else 0
                        continue
                if best < np.inf and gaps[b] >= best:
                    # this block cannot win, nor the ones after it with bounds as high
                    e = b + 1
                    while e < n_blk and gaps[e] >= best:
                        e += 1
                    nxt = e * blk_size
                    if nxt > n:
                        nxt = n
                    seen += nxt - j
                    j = nxt if nxt < n else 0
                    stats[S_BLK] += e - b
                    continue
        nr += 1
        step = 1
        if not (rep_bits[j >> 3] >> (j & 7)) & 1:
            # a run of segments without an admitted frame: stride 1 through each of them
            # (nothing else happens there), up to the block's end, in one step
            stop = blk_end if blk_size > 0 and blk_end < n else n
            if stop - j > n - seen:
                stop = j + n - seen
            e = j + 1
            while e < stop and not (rep_bits[e >> 3] >> (e & 7)) & 1:
                e += 1
            nr += e - j - 1
            seen += e - j
            j = e if e < n else e - n
            continue
        # the segment holds an admitted frame, from a few hundred bytes
        nd += 1
        fused = dissim == 1 and bi >= 0
        if fused:
            # the query distance and the dissimilarity to the best frame in one pass
            dr = 0.0
            dd = 0.0
            for d in range(Dr):
                t = np.float64(rep_feats[j, d])
                a = t - qv[d]
                c = t - fbv[d]
                dr += wv[d] * a * a
                dd += wv[d] * c * c
        else:
            dr = _dist(rep_feats, j, qv, wv)
            dd = 0.0
        improved = False
        r = -1
        if dr < best * slack:
            r = reps[j]
        if r >= 0 and r != bi:  # (the best frame's own representative: nothing to gain;
            # its dissimilarity to the best is 0, so the stride below is 1)
            open_seg = slack > 1.0
            if dr < best:
                if mask[r]:
                    s = _penalised(r, dr, env, best, True, stats)
                    if s < best:
                        best = s
                        bi = r
                        improved = True
                else:  # the representative stands for the segment's admitted frames
                    open_seg = True
            if improved or open_seg:
                nf += 1
                for i in range(rep_lo[j], rep_hi[j]):
                    if i == r or not (valid[i] and mask[i]):
                        continue
                    nd += 1
                    d2 = _dist(feats, i, q, w)
                    if d2 < best:
                        s2 = _penalised(i, d2, env, best, True, stats)
                        if s2 < best:
                            best = s2
                            bi = i
                            improved = True
            if improved:
                db_best = _dist(feats, bi, q, w)
                _copy_row(feats, bi, fbv)
        if dissim > 0 and bi >= 0 and best > 0.0 and best < np.inf:
            if dissim == 1:
                if improved or not fused:  # the best changed: its dissimilarity anew
                    dd = 0.0
                    for d in range(Dr):
                        t = np.float64(rep_feats[j, d]) - fbv[d]
                        dd += wv[d] * t * t
            else:
                # triangle-inequality lower bound of the dissimilarity, from distances
                # already known: |f_r - f_b| >= |f_r - q| - |q - f_b|
                dd = math.sqrt(dr) - math.sqrt(db_best)
                dd = dd * dd if dd > 0.0 else 0.0
            if best != inv_of:
                inv_best = 1.0 / best
                inv_of = best
            step = stride_for(dd, inv_best, v2, max_stride)
        j += step
        if j >= n:
            j -= n
        seen += step
    stats[S_DIST] += nd
    stats[S_REPS] += nr
    stats[S_FINE] += nf
    return bi, best


@no_refcount(fastmath=FM)
def box_codes_gap(lo, hi, b, ql, qh, wc):
    """Lower bound of the weighted squared distance from a query to the coded box ``b``
    (uint8 ``lo, hi [B, Dp]``, ``Dp`` a multiple of 8), all in grid units: ``ql, qh [Dp]``
    float32 the query's codes rounded down and up (whole numbers), ``wc [Dp]`` float32 the
    weights times the squared step (rounded down by 1e-5, more than the float32 rounding of
    the sum). The per-dimension gap ``max(lo - qh, ql - hi, 0)`` never exceeds the true one,
    so the sum is a lower bound. All ``Dp`` columns are summed, without an early exit: the
    loop then runs in vector lanes (about 5 ns for 32 columns, against 30 ns with an exit
    test every 8 columns)."""
    s = np.float32(0.0)
    for d in range(ql.shape[0]):
        g = max(np.float32(lo[b, d]) - qh[d], ql[d] - np.float32(hi[b, d]), np.float32(0.0))
        s += wc[d] * (g * g)
    return s


@no_refcount
def stride_for(delta2, inv_best, v2, max_stride):
    """The dissimilarity-based stride (the paper's Eq. 7 is lost; this is our form):
    ``1 + floor(v * δ / sqrt(S))`` with ``δ`` the (weighted Euclidean) distance between the
    current representative and the best frame and ``S`` the best score (a squared distance
    plus penalties, hence its root): 1 while the best is poor (early in the search, ``S``
    large) or the representative resembles it (``δ`` ~ 0), growing as it differs from the
    best more than the best differs from the query; ``v`` is the aggressiveness. Arguments:
    ``δ²``, ``1 / S`` and ``v²`` (no division on the search's step-to-step chain; small
    strides without a square root either), capped at ``max_stride``."""
    x = v2 * delta2 * inv_best  # stride = the smallest k >= 1 with k^2 > x
    if not x >= 1.0:  # also NaN
        return 1
    if x < 4.0:
        return 2
    if x < 9.0:
        return 3
    k = int(math.sqrt(x)) + 1
    return k if k < max_stride else max_stride


_ = C_P  # re-exported column names are used by callers


