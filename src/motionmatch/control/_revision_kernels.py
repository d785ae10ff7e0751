"""Compiled query revision: the arithmetic of :class:`motionmatch.control.revision.QueryReviser`
over many character states in one call.

Every kernel reproduces the operations of the array formulation it replaced in the same
order (``numpy.interp``'s rule, ``x ** 2`` as ``x * x``, sums over three components left to
right, the first of equal minima), so a revision is the same to the last bit: the path
followers' state hashes did not change.

Arguments travel in two plain tuples (see :mod:`motionmatch._jit`):

- ``path``: the :class:`PathArrays` of the reviser's path: ``points``, ``tangents``,
  ``heading`` ``[P, 3]``, ``bend``, ``speeds``, ``cap`` (the speed limits, at most 1e6 m/s),
  ``tau`` (seconds a character needs to reach each sample) ``[P]`` float64, and the future
  offsets ``offsets`` (s) and ``off_samples`` (samples) ``[K]``;
- ``rules``: the :class:`Rules` (scalars) of its :class:`RevisionSettings`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from motionmatch._jit import no_refcount

DESIRED_CODES = {"window": 0, "current": 1, "nearest": 2}
#: facing codes: the path's tangents, the tangents turned (the joystick), none (the caller
#: fills the directions, e.g. from DirectionNet's facing track)
FACING_TANGENT, FACING_TURNED, FACING_NONE = 0, 1, 2


class PathArrays(NamedTuple):
    points: np.ndarray
    tangents: np.ndarray
    heading: np.ndarray
    bend: np.ndarray
    speeds: np.ndarray
    cap: np.ndarray
    tau: np.ndarray
    offsets: np.ndarray
    off_samples: np.ndarray


class Rules(NamedTuple):
    desired: int  # DESIRED_CODES
    alpha: int  # the window before / after the previous desired sample (samples)
    beta: int
    fps: float  # path samples per second
    limited: bool  # any finite speed limit
    beta_time: float  # beta / fps (s)
    max_pace: float  # NaN: none
    min_pace: float  # NaN: none
    tie2: float  # squared distance (m^2) under which two path points are the same place
    sharp: bool  # the corner modification
    cos_corner: float
    advance: int  # samples a stuck desired position is pushed before a corner
    steer: bool


@no_refcount
def interp_index(x, tau):
    """``numpy.interp(x, tau, arange(len(tau)))`` for one ``x`` (``tau`` increasing)."""
    n = tau.shape[0]
    if x > tau[n - 1]:
        return float(n - 1)
    if x < tau[0]:
        return 0.0
    lo = 0
    hi = n - 1
    while hi - lo > 1:  # the last j with tau[j] <= x
        mid = (lo + hi) >> 1
        if tau[mid] <= x:
            lo = mid
        else:
            hi = mid
    j = hi if tau[hi] <= x else lo
    if j == n - 1 or tau[j] == x:
        return float(j)
    slope = ((j + 1.0) - j) / (tau[j + 1] - tau[j])
    return slope * (x - tau[j]) + j


@no_refcount
def _lerp_into(a, i, out):
    """``out [C] = a`` (``[P, C]``) at the fractional sample ``i`` (clamped), as ``_lerp``."""
    last = a.shape[0] - 1.0
    i = min(max(i, 0.0), last)
    lo = math.floor(i)
    hi = min(lo + 1, a.shape[0] - 1)
    f = i - lo
    for c in range(a.shape[1]):
        out[c] = a[lo, c] * (1.0 - f) + a[hi, c] * f


@no_refcount
def _lerp1(a, i):
    """The ``[P]`` array ``a`` at the fractional sample ``i`` (clamped)."""
    last = a.shape[0] - 1.0
    i = min(max(i, 0.0), last)
    lo = math.floor(i)
    hi = min(lo + 1, a.shape[0] - 1)
    f = i - lo
    return a[lo] * (1.0 - f) + a[hi] * f


@no_refcount
def _unit3(v):
    """``v [3]`` made unit in place (left zero when shorter than 1e-12); its length before."""
    n = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    if n > 1e-12:
        v[0] = v[0] / n
        v[1] = v[1] / n
        v[2] = v[2] / n
    else:
        v[0] = 0.0
        v[1] = 0.0
        v[2] = 0.0
    return n


@no_refcount
def desired_row(path, rules, px, pz, i_prev, elapsed, t_prev, carry):
    """``(i_d, carry)``: the desired sample of a root at ``(px, pz)`` whose previous desired
    sample was ``i_prev`` (Eq. 1 of the path paper with the pace bounds and pauses, or the
    ablations: the current time's sample, the nearest sample)."""
    pts = path.points
    last = pts.shape[0] - 1
    if rules.desired == 1:
        return min(np.int64(np.rint(elapsed * rules.fps)), last), 0.0
    if rules.desired == 2:
        best = np.inf
        sel = 0
        for c in range(last + 1):
            dx = px - pts[c, 0]
            dz = pz - pts[c, 2]
            d = dx * dx + dz * dz
            if d < best:
                best = d
                sel = c
        return np.int64(sel), 0.0
    tau = path.tau
    w = rules.alpha + rules.beta + 1
    tau_prev = tau[i_prev]
    far_at = tau_prev + rules.beta_time + 1e-9
    has_max = not math.isnan(rules.max_pace)
    has_min = not math.isnan(rules.min_pace)
    ceiling = tau_prev + rules.max_pace * (elapsed - t_prev) if has_max else 0.0
    first = 0.0
    if has_min:
        floor_t = tau_prev + rules.min_pace * (elapsed - t_prev)
        first = math.floor(interp_index(floor_t, tau) + 1e-9)
    best = np.inf
    sel = 0
    for j in range(w):
        c = min(max(i_prev - rules.alpha + j, 0), last)
        dx = px - pts[c, 0]
        dz = pz - pts[c, 2]
        d = dx * dx + dz * dz
        if rules.limited:
            if j > 0 and tau[c] > far_at:
                d = np.inf
            if has_max and j >= rules.alpha + 2 and tau[c] > ceiling + 1e-9:
                d = np.inf
            if has_min and j != w - 1 and c < first:
                d = np.inf
        if d < best:
            best = d
            sel = j
    b = min(max(i_prev - rules.alpha + sel, 0), last)
    # where the path stands still, the drawn time decides (a pause lasts as it was drawn)
    target = (i_prev + carry) + (elapsed - t_prev) * rules.fps
    best = np.inf
    near = 0
    for j in range(w):
        c = min(max(i_prev - rules.alpha + j, 0), last)
        gx = pts[c, 0] - pts[b, 0]
        gz = pts[c, 2] - pts[b, 2]
        if gx * gx + gz * gz <= rules.tie2:
            near += 1
            s = abs(c - target)
            if s < best:
                best = s
                sel = j
    i_d = min(max(i_prev - rules.alpha + sel, 0), last)
    if near > 1:
        return np.int64(i_d), min(max(target - i_d, -0.5), 0.5)
    return np.int64(i_d), 0.0


@no_refcount
def desired_rows(path, rules, pos, i_prev, elapsed, t_prev, carry, out_i, out_carry):
    """:func:`desired_row` for roots ``pos [M, 3]`` and states ``[M]``: into ``out_i``, ``out_carry``."""
    path = PathArrays(*path)
    rules = Rules(*rules)
    for m in range(pos.shape[0]):
        out_i[m], out_carry[m] = desired_row(path, rules, pos[m, 0], pos[m, 2], i_prev[m], elapsed[m], t_prev[m],
                                             carry[m])


@no_refcount
def _future(path, rules, i_d, idx, fut):
    """The future samples ``idx [K]`` of a character at sample ``i_d`` (never faster than the
    limits) and their points ``fut [K, 3]``."""
    last = path.points.shape[0] - 1.0
    for k in range(idx.shape[0]):
        if rules.limited:
            v = interp_index(path.tau[i_d] + path.offsets[k], path.tau)
        else:
            v = i_d + path.off_samples[k]
        idx[k] = min(v, last)
        _lerp_into(path.points, idx[k], fut[k])


@no_refcount
def _first_sharp(path, rules, a0, idx, tmp, tmp2):
    """The first ``J`` with the chord headings at ``(a0, idx...)[J]`` and ``[J + 1]`` more
    than the corner angle apart (-1: none)."""
    _lerp_into(path.heading, a0, tmp)
    _unit3(tmp)
    for k in range(idx.shape[0]):
        _lerp_into(path.heading, idx[k], tmp2)
        _unit3(tmp2)
        cos = (tmp[0] * tmp2[0] + tmp[2] * tmp2[2]) + tmp[1] * tmp2[1]  # (numpy.einsum's order)
        if cos < rules.cos_corner:
            return k
        tmp[0] = tmp2[0]
        tmp[1] = tmp2[1]
        tmp[2] = tmp2[2]
    return -1


@no_refcount
def _corner(path, rules, i_d, i_prev, idx, fut, tmp, tmp2):
    """The corner modification (Appendix D of the path paper) of one row: ``(i_d, corner)``,
    ``idx`` and ``fut`` changed in place."""
    last = path.points.shape[0] - 1
    J = _first_sharp(path, rules, float(i_d), idx, tmp, tmp2)
    if J < 0:
        return i_d, -1
    if rules.desired != 1 and i_d == i_prev and i_d < last:
        # stuck before the corner: push the desired position on and look again
        i_d = min(i_d + rules.advance, last)
        _future(path, rules, i_d, idx, fut)
        J = _first_sharp(path, rules, float(i_d), idx, tmp, tmp2)
        if J < 0:
            return i_d, -1
    a = float(i_d) if J == 0 else idx[J - 1]
    b = idx[J]
    lo = math.floor(a)
    hi = math.ceil(b)
    if hi - lo < 2:
        ic = lo
    else:  # the sharpest step between the two points
        ic = lo
        top = path.bend[lo]
        for i in range(lo + 1, hi):
            if path.bend[i] > top:
                top = path.bend[i]
                ic = i
        ic = min(max(ic, lo), hi - 1)
    corner = ic if J == 0 else -1
    if ic <= a + 1e-9:
        return i_d, corner  # the corner is at the earlier point itself
    if J == 0:
        _lerp_into(path.points, a, tmp)
    else:
        tmp[0] = fut[J - 1, 0]
        tmp[1] = fut[J - 1, 1]
        tmp[2] = fut[J - 1, 2]
    kk = (b - a) / (ic - a)
    for c in range(3):
        new = tmp[c] + kk * (path.points[ic, c] - tmp[c])
        shift = new - fut[J, c]
        fut[J, c] = new
        for q in range(J + 1, fut.shape[0]):
            fut[q, c] += shift
    return i_d, corner


@no_refcount
def revise_rows(path, rules, facing, turn_cos, turn_sin, pos, i_prev, elapsed, t_prev, carry,
                out_i, out_carry, out_idx, out_fut, out_dirs, out_vel, out_corner, tmp):
    """The revised queries of roots ``pos [M, 3]`` with states ``i_prev``, ``elapsed``,
    ``t_prev``, ``carry`` ``[M]``: the desired samples ``out_i [M]`` and ``out_carry``, the
    future samples ``out_idx [M, K]``, points ``out_fut``, facings ``out_dirs`` (untouched
    with :data:`FACING_NONE`; turned by the angle of ``turn_cos``, ``turn_sin`` with
    :data:`FACING_TURNED`) and path velocities ``out_vel`` ``[M, K, 3]``, the corner sample
    ``out_corner [M]`` (-1: none). ``tmp [3, 3]`` scratch."""
    path = PathArrays(*path)
    rules = Rules(*rules)
    K = out_idx.shape[1]
    t0 = tmp[0]
    t1 = tmp[1]
    t2 = tmp[2]
    for m in range(pos.shape[0]):
        i_d, cy = desired_row(path, rules, pos[m, 0], pos[m, 2], i_prev[m], elapsed[m], t_prev[m], carry[m])
        idx = out_idx[m]
        fut = out_fut[m]
        _future(path, rules, i_d, idx, fut)
        corner = -1
        if rules.sharp:
            i_d, corner = _corner(path, rules, i_d, i_prev[m], idx, fut, t0, t1)
        out_i[m] = i_d
        out_carry[m] = cy
        out_corner[m] = corner
        for k in range(K):
            _lerp_into(path.tangents, idx[k], t2)
            _unit3(t2)
            speed = min(_lerp1(path.speeds, idx[k]), _lerp1(path.cap, idx[k]))
            for c in range(3):
                out_vel[m, k, c] = t2[c] * speed
            if facing == FACING_NONE:
                continue
            if facing == FACING_TURNED:
                x = turn_cos * t2[0] + turn_sin * t2[2]
                z = -turn_sin * t2[0] + turn_cos * t2[2]
                t2[0] = x
                t2[2] = z
            elif rules.steer:
                # along the query's own polyline (root, future points): from the point
                # before to the point after (the last: from the point before)
                nxt = fut[k + 1] if k + 1 < K else fut[K - 1]
                if k == 0:
                    t0[0] = nxt[0] - pos[m, 0]
                    t0[2] = nxt[2] - pos[m, 2]
                else:
                    t0[0] = nxt[0] - fut[k - 1, 0]
                    t0[2] = nxt[2] - fut[k - 1, 2]
                t0[1] = 0.0
                if _unit3(t0) > 1e-3:
                    t2[0] = t0[0]
                    t2[1] = t0[1]
                    t2[2] = t0[2]
            for c in range(3):
                out_dirs[m, k, c] = t2[c]


@no_refcount
def fill_queries(raw_features, frames, fut, dirs, origin, cos_yaw, sin_yaw, layout, mean, scale, weights, zero_cols,
                 out):
    """Normalised queries ``out [M, D]`` (float32) for characters playing database ``frames [M]``
    (their ``raw_features`` rows) whose future positions ``fut`` and facings ``dirs``
    ``[M, K, 3]`` (world) are seen from roots at ``origin [M, 3]`` turned by the yaws of
    ``cos_yaw``, ``sin_yaw`` ``[M]``. ``layout [T, 4]``: per trajectory feature column pair
    (is a position, offset k, column x, column z); ``(raw - mean) / scale * weights``, then
    the columns ``zero_cols`` set to 0."""
    D = out.shape[1]
    for m in range(frames.shape[0]):
        row = out[m]
        f = frames[m]
        c = cos_yaw[m]
        s = sin_yaw[m]
        for d in range(D):
            row[d] = np.float32(((np.float64(raw_features[f, d]) - mean[d]) / scale[d]) * weights[d])
        for t in range(layout.shape[0]):
            k = layout[t, 1]
            cx = layout[t, 2]
            cz = layout[t, 3]
            if layout[t, 0]:
                rx = fut[m, k, 0] - origin[m, 0]
                rz = fut[m, k, 2] - origin[m, 2]
            else:
                rx = dirs[m, k, 0]
                rz = dirs[m, k, 2]
            lx = c * rx - s * rz
            lz = s * rx + c * rz
            row[cx] = np.float32(((lx - mean[cx]) / scale[cx]) * weights[cx])
            row[cz] = np.float32(((lz - mean[cz]) / scale[cz]) * weights[cz])
        for z in range(zero_cols.shape[0]):
            row[zero_cols[z]] = 0.0
