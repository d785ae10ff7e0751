"""Numba kernels of a whole choice (for :mod:`motionmatch.search.penalized`): the query's
view columns and the controls' weights (:func:`choose`, :func:`plain_choice`), the search
itself (:func:`run_search`: the frame playing now, then the linear or the coherent search of
:mod:`motionmatch.search._penalized_kernels`, with a fallback), and the chosen frame's
summary (its score's parts and the bodies' clearance). The arguments travel as there."""

from __future__ import annotations

import numba
import numpy as np

from motionmatch._jit import no_refcount
from motionmatch.geometry.shapes import C_W, C_YMAX, C_YMIN, barrier, signed_distance
from motionmatch.search._penalized_kernels import (
    FM,
    S_PEN,
    S_SD,
    USED_CLEAR,
    USED_COHERENT,
    USED_FALLBACK,
    USED_LINEAR,
    Coarse,
    Env,
    Frames,
    Options,
    Penalty,
    Query,
    Scratch,
    View,
    _dist,
    _out_of_reach,
    _penalised,
    _point_lb,
    _slot_ellipse,
    coherent_search,
    init_score,
    linear_search,
)


@no_refcount
def _full_score(i, fr, q, w, env, stats):
    """The full score of frame ``i`` (no rejection; ``stats`` left as they were: this is
    not search work)."""
    pen0 = stats[S_PEN]
    sd0 = stats[S_SD]
    s = _penalised(i, _dist(fr.feats, i, q, w), env, np.inf, False, stats)
    stats[S_PEN] = pen0
    stats[S_SD] = sd0
    return s


@no_refcount
def penalty_clearance(i, env, clearance):
    """Frame ``i``'s weighted penalty sum (without W_env; :func:`frame_penalty` without
    rejection, the same terms in the same order: the same value) and, into ``clearance [K]``,
    its smallest signed distance per ellipse (:func:`frame_clearance`), each exact signed
    distance computed once for both."""
    ell = env.ell
    obs = env.obs
    pen = env.pen
    dhat = pen.threshold
    kappa = pen.exponent
    margin = pen.margin
    total = 0.0
    for k in range(env.counts.shape[0]):
        best = np.inf
        cx, cz, ux, uz, a, b, R, lo, hi = _slot_ellipse(ell, i, k, pen)
        wk = pen.slot_weights[k]
        reach = dhat + margin + R
        for m in range(env.counts[k]):
            if pen.heights and (hi <= obs[k, m, C_YMIN] or lo >= obs[k, m, C_YMAX]):
                continue
            if _out_of_reach(cx, cz, reach, obs, k, m):
                # no penalty: its distance only counts when it may be the smallest (the body
                # lies within R of its centre, so no nearer than the centre's bound minus R)
                if _point_lb(cx, cz, obs, k, m) - R - margin > best:
                    continue
                d = signed_distance(cx, cz, ux, uz, a, b, obs[k, m]) - margin
                if d < best:
                    best = d
                continue
            d = signed_distance(cx, cz, ux, uz, a, b, obs[k, m]) - margin
            if d < best:
                best = d
            if d < dhat:
                total += wk * obs[k, m, C_W] * barrier(d, dhat, kappa)
        clearance[k] = best
    return total


@no_refcount
def summarise(idx, fr, pen, scr, q, w, obs, counts, env_weight, cur):
    """The summary of result ``idx`` of a search done elsewhere (the plain search) into
    ``scr`` (:class:`Scratch`: ``out``, ``clearance``, see :func:`run_search`), with no
    frame seeding it; ``fr``, ``pen``, ``scr``: plain tuples (see :mod:`motionmatch._jit`)."""
    fr = Frames(*fr)
    _summarise(idx, fr, q, w, Env(fr.ell, obs, counts, Penalty(*pen), env_weight), cur, Scratch(*scr), -1, np.inf)


@no_refcount
def plain_summary(idx, fr, scr, q, w, cur):
    """:func:`summarise` when no obstacle is near (every count 0), the same values without
    the penalty kernels: no penalty, ``clearance`` inf, scores the weighted distances
    (``fr``, ``scr``: plain tuples)."""
    feats = Frames(*fr).feats
    scr = Scratch(*scr)
    out = scr.out
    for k in range(scr.clearance.shape[0]):
        scr.clearance[k] = np.inf
    if idx >= 0:
        d = _dist(feats, idx, q, w)
        out[0] = d
        out[1] = d
    else:
        out[0] = np.inf
        out[1] = np.inf
    out[3] = 0.0
    out[2] = _dist(feats, cur, q, w) if cur >= 0 else np.nan


@no_refcount
def _summarise(idx, fr, q, w, env, cur, scr, init, s_init):
    """Summary of a search's result ``idx`` (see :func:`run_search` for ``scr.out`` and
    ``scr.clearance``); the score of ``cur`` is ``s_init`` when it is ``init``."""
    if idx >= 0:
        total = penalty_clearance(idx, env, scr.clearance)
    else:
        total = np.inf
        for k in range(scr.clearance.shape[0]):
            scr.clearance[k] = np.inf
    _write_summary(idx, fr, q, w, env, cur, total, scr, init, s_init)


@no_refcount
def _write_summary(idx, fr, q, w, env, cur, total, scr, init, s_init):
    """``scr.out`` of result ``idx`` from its penalty ``total`` and ``scr.clearance``
    already computed (``idx`` -1: no result); ``out[2]``: the score of ``cur`` (``s_init``
    when it is ``init``; ``nan`` for -1)."""
    out = scr.out
    if idx >= 0:
        d = _dist(fr.feats, idx, q, w)
        out[0] = d + env.env_weight * total
        out[1] = d
        hit = 0.0
        for k in range(scr.clearance.shape[0]):
            if scr.clearance[k] < 0.0:
                hit = 1.0
        out[3] = hit
    else:
        out[0] = np.inf
        out[1] = np.inf
        out[3] = 0.0
    if cur >= 0:
        out[2] = s_init if (cur == init and init >= 0) else _full_score(cur, fr, q, w, env, scr.stats)
    else:
        out[2] = np.nan


@no_refcount
def run_search(fr, co, opt, pen, scr, q, w, mask, rep_bits, obs, counts, env_weight, init, prev, cur):
    """One penalised search in a single call (the per-search glue of :mod:`.penalized`
    fused), over :class:`Frames` ``fr`` with :class:`Coarse` ``co``, :class:`Options`
    ``opt``, :class:`Penalty` ``pen`` and :class:`Scratch` ``scr``, all plain tuples (see
    :mod:`motionmatch._jit`), the query ``q, w, mask, rep_bits`` (see :class:`Query`) and
    the obstacles ``obs, counts`` weighing ``env_weight`` (see :class:`Env`).

    ``scr.stats`` is zeroed first. The frame playing now (``init``, -1: none) seeds the
    search when it is valid and in the mask (and ``opt.warm``). Method 0 runs
    :func:`linear_search`; method 1 returns ``(-1, USED_CLEAR)`` at once when ``opt.clear``
    and no slot has an obstacle, else runs :func:`coherent_search` (from ``opt.back``
    representatives before that of the previous best match ``prev``) and then, with
    ``opt.fallback`` and a colliding result, :func:`linear_search`. Then the summary of the
    best frame (:func:`_summarise`): ``scr.out[0]`` its score, ``out[1]`` its weighted query
    distance, ``out[3]`` 1 if one of its ellipses overlaps an obstacle (``scr.clearance
    [K]`` per ellipse, see :func:`frame_clearance`), and ``out[2]`` the full score of frame
    ``cur`` (for the controller's comparison; ``nan`` for -1). Returns ``(index, used)``
    with ``used`` one of ``USED_*``.

    (One function, not a wrapper that names the tuples around another: Numba optimises a
    kernel's whole call tree again for every compiled caller, about 2 s of CPU here.)"""
    fr = Frames(*fr)
    co = Coarse(*co)
    opt = Options(*opt)
    scr = Scratch(*scr)
    qr = Query(q, w, mask, rep_bits)
    env = Env(fr.ell, obs, counts, Penalty(*pen), env_weight)
    stats = scr.stats
    for k in range(stats.shape[0]):
        stats[k] = 0
    N = fr.feats.shape[0]
    if opt.method == 1 and opt.clear:
        clear = True
        for k in range(env.counts.shape[0]):
            if env.counts[k] > 0:
                clear = False
        if clear:
            return -1, USED_CLEAR
    i0 = init
    init = -1
    if opt.warm and 0 <= i0 < N and fr.valid[i0] and qr.mask[i0]:
        init = i0
    s_init = init_score(init, fr, qr, env, stats)
    have_clearance = False
    if opt.method == 0:
        idx, _ = linear_search(fr, qr, env, init, s_init, True, stats)
        used = USED_LINEAR
    else:
        n = co.reps.shape[0]
        start = 0
        if opt.warm and 0 <= prev < N and n > 0:
            start = (co.rep_of[prev] - opt.back) % n
        init_seg = co.rep_of[init] if init >= 0 else -1
        idx, _ = coherent_search(fr, qr, env, co, opt, scr, start, init, s_init, init_seg)
        used = USED_COHERENT
        if opt.fallback and idx >= 0:
            total = penalty_clearance(idx, env, scr.clearance)
            have_clearance = True
            hit = False
            for k in range(scr.clearance.shape[0]):
                if scr.clearance[k] < 0.0:
                    hit = True
            if hit:
                idx, _ = linear_search(fr, qr, env, init, s_init, True, stats)
                used = USED_FALLBACK
                have_clearance = False
    if have_clearance:  # the summary of idx from its penalty and clearance already computed
        _write_summary(idx, fr, qr.q, qr.w, env, cur, total, scr, init, s_init)
    else:
        _summarise(idx, fr, qr.q, qr.w, env, cur, scr, init, s_init)
    return idx, used


@no_refcount(fastmath=FM)
def view_distance(query, feats, i, zero):
    """Squared distance between ``query [D]`` and row ``i`` of ``feats [N, D]`` with the
    columns where ``zero [D]`` is true taken as 0 (the controller's planar view)."""
    s = 0.0
    for d in range(query.shape[0]):
        x = 0.0 if zero[d] else np.float64(feats[i, d])
        t = np.float64(query[d]) - x
        s += t * t
    return s


@no_refcount
def take_columns(x, cols, out):
    """``out[j] = x[cols[j]]`` as float64 (a query's search columns, no temporary)."""
    for j in range(cols.shape[0]):
        out[j] = x[cols[j]]


@no_refcount
def control_weights_into(off, pose, pos, direc, continuity, responsiveness, evasion_factor, w):
    """Write into ``w [D]`` the squared-distance weights of a feature view and the high-level
    controls: 0 on the columns the view leaves out (``off``: the planar view's vertical
    columns), ``continuity`` on the pose columns, ``responsiveness`` on the trajectory
    positions and ``responsiveness * evasion_factor`` on the trajectory directions (masks
    ``[D]``), 1 elsewhere."""
    for d in range(w.shape[0]):
        if off[d]:
            w[d] = 0.0
        elif pose[d]:
            w[d] = continuity
        elif pos[d]:
            w[d] = responsiveness
        elif direc[d]:
            w[d] = responsiveness * evasion_factor
        else:
            w[d] = 1.0


@numba.njit(cache=True, nogil=True)
def control_weights(off, pose, pos, direc, continuity, responsiveness, evasion_factor):
    """``[D]`` weights of a view and the high-level controls in a new array (:func:`control_weights_into`)."""
    w = np.empty(pose.shape[0])
    control_weights_into(off, pose, pos, direc, continuity, responsiveness, evasion_factor, w)
    return w


@no_refcount
def plain_choice(view, controls, query, cur, q, w):
    """The first half of :func:`choose` alone, for a choice with nothing near (the caller
    runs the plain accelerated search): ``q``, ``w`` written as there; returns the view
    distance to frame ``cur``. A character with no obstacle near needs only this small
    kernel, so its first search does not wait for the penalised search's compilation."""
    v = View(*view)
    continuity, responsiveness, evasion_factor = controls
    take_columns(query, v.cols, q)
    control_weights_into(v.off, v.pose, v.pos, v.direc, continuity, responsiveness, evasion_factor, w)
    return view_distance(query, v.db_feats, cur, v.zero)


@no_refcount
def choose(view, controls, query, cur, fr, co, opt, pen, scr, q, w, mask, rep_bits, obs, counts, env_weight, prev):
    """An environment-aware chooser's choice in one call: the search columns of ``query``
    into ``q`` (:func:`take_columns`) and the weights of ``controls`` (continuity,
    responsiveness, evasion factor) into ``w`` (:func:`control_weights_into`), buffers both,
    the plain view distance of ``query`` to frame ``cur`` (:func:`view_distance`), then
    :func:`run_search` with ``q`` and ``w`` seeded with ``cur``, whose full score goes to
    ``out[2]``. ``view``: a :class:`View` plain tuple (see :mod:`motionmatch._jit`), the
    rest as :func:`run_search`. Returns ``(index, used, plain)``; ``(-1, USED_CLEAR,
    plain)`` without searching for the plain method (``method < 0``) or when nothing is near
    and ``opt.clear`` (the caller then runs the plain accelerated search with ``q`` and
    ``w``)."""
    v = View(*view)
    continuity, responsiveness, evasion_factor = controls
    take_columns(query, v.cols, q)
    control_weights_into(v.off, v.pose, v.pos, v.direc, continuity, responsiveness, evasion_factor, w)
    plain = view_distance(query, v.db_feats, cur, v.zero)
    if Options(*opt).method < 0:
        return -1, USED_CLEAR, plain
    idx, used = run_search(fr, co, opt, pen, scr, q, w, mask, rep_bits, obs, counts, env_weight, cur, prev, cur)
    return idx, used, plain
