"""Compiled quaternion arithmetic on ``[4]`` arrays (w, x, y, z), for the kernels of every
layer above (retargeting, the controller's pose)."""

from __future__ import annotations

from motionmatch._jit import no_refcount


@no_refcount
def qmul(a, b, out):  # pragma: no cover - compiled
    """``out = a * b`` (the rotation ``b`` then ``a``)."""
    aw, ax, ay, az = a[0], a[1], a[2], a[3]
    bw, bx, by, bz = b[0], b[1], b[2], b[3]
    out[0] = aw * bw - ax * bx - ay * by - az * bz
    out[1] = aw * bx + ax * bw + ay * bz - az * by
    out[2] = aw * by - ax * bz + ay * bw + az * bx
    out[3] = aw * bz + ax * by - ay * bx + az * bw
