"""2D geometry of body ellipses and obstacles: signed distances and the log barrier (numba).

Obstacles are packed one per row of a float64 array (:data:`ROW` columns, see the ``C_*``
constants) so that numba kernels and the penalised search read them without Python
objects. A row describes a disk, an ellipse or an oriented box (rectangle) on the ground
with a vertical range ``[ymin, ymax]`` (``-inf``/``+inf`` for a 2D obstacle).

Signed distance (:func:`signed_distance`). For two convex sets ``A`` (the body ellipse)
and ``B`` (an obstacle) with support functions ``h_A``, ``h_B`` and centres ``a``, ``b``,
the separating-axis theorem in its continuous form gives

    sd(A, B) = max over unit u of  g(u) = (b - a) . u - h_A(u) - h_B(-u),

the gap between the sets when they are apart and minus the penetration depth (the
shortest translation that separates them) when they overlap. Every ``u`` gives a lower
bound of ``sd``: a partly converged maximisation can only overstate a collision, never
hide one. Support functions are closed-form: a disk ``r``; an ellipse with semi-axes
``p, q`` along ``f1, f2``: ``sqrt(p^2 (u.f1)^2 + q^2 (u.f2)^2)``; a box with half extents
``p, q``: ``p |u.f1| + q |u.f2|``. ``g`` is maximised over the angle of ``u`` by a
safeguarded Newton iteration from the direction between the centres (disk and ellipse
obstacles: ``g`` is smooth), with ``u`` kept as a unit vector (no trigonometric calls); for a box the maximum is either at one of its face normals
(where ``g`` has kinks) or, for a corner contact, at the maximiser of the smooth
corner-to-ellipse function, so those candidates are evaluated and the largest kept.

Barrier (:func:`barrier`). The paper's Eq. 2 is lost in the text we have; it is described
as an IPC-style log barrier (Li et al. 2020) with a distance threshold ``d̂`` (penalties
start there) and an exponent ``κ`` (how fast they grow toward contact), near zero around
``d̂`` and growing without bound as ``d -> 0``. We use the normalised generalisation of the
IPC barrier

    b(d) = ((d̂ - d) / d̂)^κ · ln(d̂ / d)      for 0 < d < d̂, and 0 for d >= d̂,

which is C^(κ-1) at ``d̂`` (IPC's own barrier is the case κ = 2 up to scale) and is
continued linearly (with its slope) below ``d_min = 0.01 d̂``, so an overlap has a finite
penalty that grows with the penetration depth: when every candidate collides, the search
still prefers the shallowest collision.
"""

from __future__ import annotations

import math

import numpy as np

from motionmatch._jit import no_refcount

T_DISK = 0
T_ELLIPSE = 1
T_BOX = 2
TYPE_NAMES = {"disk": T_DISK, "ellipse": T_ELLIPSE, "box": T_BOX}

# columns of a packed obstacle row
C_TYPE = 0      # T_DISK / T_ELLIPSE / T_BOX
C_X = 1         # centre x (m)
C_Z = 2         # centre z (m)
C_UX = 3        # unit first axis x (ellipse: semi-axis p; box: half extent p)
C_UZ = 4        # unit first axis z
C_P = 5         # disk radius / first semi-axis / first half extent (m)
C_Q = 6         # disk radius / second semi-axis / second half extent (m)
C_R = 7         # circumradius (m)
C_YMIN = 8      # lowest point (m), -inf for none
C_YMAX = 9      # highest point (m), +inf for none
C_ID = 10       # obstacle id (scene index, or -1 - agent index for agents)
C_W = 11        # weight multiplier of this obstacle's penalty
ROW = 12

#: Below this fraction of the threshold, the barrier continues linearly.
BARRIER_LINEAR_FRACTION = 0.01

_NEWTON_ITERS = 8


def make_row(kind: int, x: float, z: float, ux: float = 1.0, uz: float = 0.0, p: float = 0.0, q: float = 0.0,
             ymin: float = -np.inf, ymax: float = np.inf, ident: float = -1.0, weight: float = 1.0) -> np.ndarray:
    """One packed obstacle row (see the ``C_*`` columns)."""
    n = math.hypot(ux, uz)
    ux, uz = (ux / n, uz / n) if n > 1e-12 else (1.0, 0.0)
    if kind == T_DISK:
        q = p
        r = p
    elif kind == T_ELLIPSE:
        r = max(p, q)
    else:
        r = math.hypot(p, q)
    return np.array([kind, x, z, ux, uz, p, q, r, ymin, ymax, ident, weight], dtype=np.float64)


@no_refcount
def _g_smooth(c, s, x, y, a2, b2, cf, sf, p2, q2):
    """g(u) for the unit direction ``u = (c, s)``: an ellipse body (``a2, b2``: squared
    semi-axes on the x/y axes) and an ellipse obstacle (``p2, q2`` along the unit axis
    ``(cf, sf)``; ``p2 = q2`` for a disk) centred at ``(x, y)``."""
    C = c * cf + s * sf  # u in the obstacle's axes
    S = s * cf - c * sf
    return x * c + y * s - math.sqrt(a2 * c * c + b2 * s * s) - math.sqrt(p2 * C * C + q2 * S * S)


@no_refcount
def _max_smooth(x, y, a, b, cf, sf, p, q):
    """max over unit ``u`` of x u_x + y u_y - h_E(u) - h_O(u) for an ellipse (a, b along the
    x/y axes) and an obstacle ellipse (p, q along the unit axis ``(cf, sf)``; p = q for a
    disk): safeguarded Newton on the angle of ``u`` from the centre direction, with ``u``
    kept as a unit vector (a step ``t`` turns it by ``atan(t)``: no trigonometric call; the
    Newton step is unchanged to first order). Returns ``(value, u_x, u_y)``."""
    a2, b2, p2, q2 = a * a, b * b, p * p, q * q
    r = math.sqrt(x * x + y * y)
    if r > 0.0:
        c = x / r
        s = y / r
    else:
        c = 1.0
        s = 0.0
    best = _g_smooth(c, s, x, y, a2, b2, cf, sf, p2, q2)
    dab = b2 - a2
    dpq = q2 - p2
    for _ in range(_NEWTON_ITERS):
        C = c * cf + s * sf
        S = s * cf - c * sf
        he = math.sqrt(a2 * c * c + b2 * s * s)
        ho = math.sqrt(p2 * C * C + q2 * S * S)
        he1 = dab * s * c / he
        he2 = (dab * (c * c - s * s) - he1 * he1) / he
        if ho > 1e-12:
            ho1 = dpq * S * C / ho
            ho2 = (dpq * (C * C - S * S) - ho1 * ho1) / ho
        else:
            ho1 = 0.0
            ho2 = 0.0
        g1 = -x * s + y * c - he1 - ho1
        g2 = -x * c - y * s - he2 - ho2
        if g2 < -1e-12:
            step = -g1 / g2
        else:
            step = 0.3 if g1 > 0 else -0.3
        if step > 0.6:
            step = 0.6
        elif step < -0.6:
            step = -0.6
        if abs(step) < 1e-5:
            break
        moved = False
        for _h in range(6):
            n = math.sqrt(1.0 + step * step)
            cn = (c - step * s) / n
            sn = (s + step * c) / n
            gn = _g_smooth(cn, sn, x, y, a2, b2, cf, sf, p2, q2)
            if gn >= best:
                c = cn
                s = sn
                best = gn
                moved = True
                break
            step *= 0.5
        if not moved:
            break
    return best, c, s


@no_refcount
def _g_box(c, s, x, y, a2, b2, fx, fy, p, q):
    """g(u) for the unit direction ``u = (c, s)``, the ellipse body and a box centred at
    ``(x, y)`` with unit first axis ``(fx, fy)`` and half extents ``p, q``."""
    # u . f1 and u . f2 with f2 = (-fy, fx)
    d1 = c * fx + s * fy
    d2 = -c * fy + s * fx
    return x * c + y * s - math.sqrt(a2 * c * c + b2 * s * s) - p * abs(d1) - q * abs(d2)


@no_refcount
def _sd_box(x, y, a, b, fx, fy, p, q):
    """Signed distance between the ellipse (a, b on the axes, at the origin) and a box
    centred at (x, y) with unit first axis (fx, fy) and half extents p, q."""
    a2, b2 = a * a, b * b
    # face normals (the kinks of g): the box's axes, both ways
    best = _g_box(fx, fy, x, y, a2, b2, fx, fy, p, q)
    best = max(best, _g_box(-fy, fx, x, y, a2, b2, fx, fy, p, q))
    best = max(best, _g_box(-fx, -fy, x, y, a2, b2, fx, fy, p, q))
    best = max(best, _g_box(fy, -fx, x, y, a2, b2, fx, fy, p, q))
    # corner contacts: maximiser of the smooth corner-to-ellipse function, scored with the
    # true g, for the two corners nearest the ellipse (in its own scaled metric; a contact
    # with a farther corner would put a nearer one inside the ellipse's reach first)
    gx, gy = -fy, fx
    d1 = np.inf
    d2 = np.inf
    c1x = c1y = c2x = c2y = 0.0
    for sp in (-1.0, 1.0):
        for sq in (-1.0, 1.0):
            vx = x + sp * p * fx + sq * q * gx
            vy = y + sp * p * fy + sq * q * gy
            e = vx * vx / a2 + vy * vy / b2
            if e < d1:
                d2, c2x, c2y = d1, c1x, c1y
                d1, c1x, c1y = e, vx, vy
            elif e < d2:
                d2, c2x, c2y = e, vx, vy
    _, c, s = _max_smooth(c1x, c1y, a, b, 1.0, 0.0, 0.0, 0.0)
    best = max(best, _g_box(c, s, x, y, a2, b2, fx, fy, p, q))
    _, c, s = _max_smooth(c2x, c2y, a, b, 1.0, 0.0, 0.0, 0.0)
    best = max(best, _g_box(c, s, x, y, a2, b2, fx, fy, p, q))
    return best


@no_refcount
def signed_distance(cx, cz, ux, uz, a, b, row):
    """Signed distance (m) between a body ellipse and a packed obstacle ``row``.

    The ellipse has centre ``(cx, cz)``, unit first axis ``(ux, uz)`` with semi-axis ``a``
    and semi-axis ``b`` across it. Positive: the gap; negative: minus the penetration depth.
    """
    dx = row[C_X] - cx
    dz = row[C_Z] - cz
    x = dx * ux + dz * uz
    y = -dx * uz + dz * ux
    t = int(row[C_TYPE])
    if t == T_DISK:
        r = row[C_P]
        v, _, _ = _max_smooth(x, y, a, b, 1.0, 0.0, r, r)
        return v
    fx = row[C_UX] * ux + row[C_UZ] * uz
    fy = -row[C_UX] * uz + row[C_UZ] * ux
    nf = math.sqrt(fx * fx + fy * fy)  # 1 for a packed row; renormalised against rounding
    if nf > 0.0:
        fx /= nf
        fy /= nf
    else:
        fx = 1.0
        fy = 0.0
    if t == T_ELLIPSE:
        v, _, _ = _max_smooth(x, y, a, b, fx, fy, row[C_P], row[C_Q])
        return v
    return _sd_box(x, y, a, b, fx, fy, row[C_P], row[C_Q])


@no_refcount
def point_lower_bound(px, pz, row):
    """A lower bound of the distance (m) from a point to an obstacle (exact for disks and boxes)."""
    dx = px - row[C_X]
    dz = pz - row[C_Z]
    if int(row[C_TYPE]) != T_BOX:
        return math.sqrt(dx * dx + dz * dz) - row[C_R]
    lx = abs(dx * row[C_UX] + dz * row[C_UZ]) - row[C_P]
    lz = abs(-dx * row[C_UZ] + dz * row[C_UX]) - row[C_Q]
    if lx <= 0.0 and lz <= 0.0:
        return max(lx, lz)
    lx = max(lx, 0.0)
    lz = max(lz, 0.0)
    return math.sqrt(lx * lx + lz * lz)


@no_refcount
def point_upper_bound(px, pz, row):
    """An upper bound of the signed distance (m) from a point to an obstacle (exact for
    disks and boxes; an ellipse contains the disk of its smaller semi-axis)."""
    dx = px - row[C_X]
    dz = pz - row[C_Z]
    t = int(row[C_TYPE])
    if t == T_BOX:
        return point_lower_bound(px, pz, row)
    r = row[C_P] if t == T_DISK else min(row[C_P], row[C_Q])
    return math.sqrt(dx * dx + dz * dz) - r


@no_refcount
def barrier(d, dhat, kappa):
    """The log barrier b(d) (see the module docstring): 0 from ``dhat`` on, growing toward
    contact, continued linearly (finite, increasing with penetration) below 1% of ``dhat``."""
    if d >= dhat:
        return 0.0
    dmin = BARRIER_LINEAR_FRACTION * dhat
    if d > dmin:
        r = (dhat - d) / dhat
        if kappa == 4.0:
            r2 = r * r
            return r2 * r2 * math.log(dhat / d)
        return r**kappa * math.log(dhat / d)
    r = (dhat - dmin) / dhat
    b0 = r**kappa * math.log(dhat / dmin)
    slope = kappa / dhat * r ** (kappa - 1.0) * math.log(dhat / dmin) + r**kappa / dmin
    return b0 + slope * (dmin - d)


@no_refcount
def signed_distances(ell, rows, out):
    """``out[i, m]``: signed distance between ellipse ``ell[i]`` (cx, cz, ux, uz, a, b) and
    obstacle ``rows[m]`` (vectorised helper for metrics and tests)."""
    for i in range(ell.shape[0]):
        for m in range(rows.shape[0]):
            out[i, m] = signed_distance(ell[i, 0], ell[i, 1], ell[i, 2], ell[i, 3], ell[i, 4], ell[i, 5], rows[m])


def ellipse_obstacle_distances(ellipses: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``[E, M]`` signed distances between body ellipses ``[E, 6]`` (centre x, z, unit axis
    x, z, semi-axis along it, semi-axis across) and packed obstacle rows ``[M, ROW]``."""
    e = np.ascontiguousarray(ellipses, dtype=np.float64).reshape(-1, 6)
    r = np.ascontiguousarray(rows, dtype=np.float64).reshape(-1, ROW)
    out = np.empty((e.shape[0], r.shape[0]))
    if out.size:
        signed_distances(e, r, out)
    return out


def ellipse_row(centre, axis, a: float, b: float, ymin: float = -np.inf, ymax: float = np.inf,
                ident: float = -1.0) -> np.ndarray:
    """A packed ellipse row from a centre ``[2]`` (x, z), a first-axis direction ``[2]`` and semi-axes."""
    return make_row(T_ELLIPSE, float(centre[0]), float(centre[1]), float(axis[0]), float(axis[1]), a, b,
                    ymin, ymax, ident)
