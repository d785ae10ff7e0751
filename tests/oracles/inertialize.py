"""The quintic inertialization in plain numpy: what the compiled decay is checked against.

:meth:`~motionmatch.runtime.inertialize.Inertializer.update` evaluates the quintic
offsets with a compiled kernel (:func:`motionmatch.runtime._kernels.quintic_offsets`);
:func:`update_reference` evaluates the same polynomials with :func:`quintic_value` and
``quat.exp`` on arrays.
"""

from __future__ import annotations

import numpy as np

from motionmatch.anim import quat
from motionmatch.runtime.inertialize import Inertializer

__all__ = ["quintic_value", "update_reference"]


def quintic_value(coeffs: tuple[np.ndarray, ...], t: float) -> np.ndarray:
    """Offset norm at time ``t`` since the transition (0 after ``t1``) of the quintic whose
    coefficients :func:`~motionmatch.runtime.inertialize.quintic_coefficients` returned."""
    A, B, C, c2, v0, x0, t1 = coeffs
    tt = np.minimum(t, t1)
    x = (((((A * tt + B) * tt + C) * tt + c2) * tt + v0) * tt) + x0
    return np.where(t >= t1, 0.0, x)


def update_reference(inert: Inertializer, dt: float) -> None:
    """``inert.update(dt)`` in plain numpy: the quintic offsets from the stored
    coefficients, axes and directions (the other methods through ``update`` itself)."""
    if inert.method != "quintic" or inert._rot_coeffs is None:
        inert.update(dt)
        return
    inert.elapsed += dt
    a = quintic_value(inert._rot_coeffs, inert.elapsed)
    inert.rot_offset = quat.exp(inert._rot_axis * a[:, None])
    d = quintic_value(inert._pos_coeffs, inert.elapsed)
    inert.pos_offset = inert._pos_dir * d[:, None]
