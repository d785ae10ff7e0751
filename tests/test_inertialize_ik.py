"""Inertialization (quintic and spring) and two-bone IK with known answers."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from motionmatch.anim import quat
from motionmatch.runtime.ik import two_bone_ik
from motionmatch.runtime.inertialize import Inertializer, quintic_coefficients
from oracles.inertialize import quintic_value


@settings(max_examples=200, deadline=None)
@given(x0=st.floats(0.0, 3.0), v0=st.floats(-50.0, 50.0), t1=st.floats(0.05, 1.0))
def test_quintic_has_no_overshoot_and_ends_at_rest(x0, v0, t1):
    c = quintic_coefficients(np.array([x0]), np.array([v0]), t1)
    ts = np.linspace(0, t1, 200)
    xs = np.array([quintic_value(c, t)[0] for t in ts])
    assert np.all(xs >= -1e-9 * max(1, x0)) and np.all(xs <= x0 + 1e-9)
    assert abs(quintic_value(c, t1 + 1e-3)[0]) == 0.0
    assert abs(xs[0] - x0) < 1e-12


def test_quintic_boundary_conditions():
    x0, v0, t1 = 1.0, -2.0, 0.5
    c = quintic_coefficients(np.array([x0]), np.array([v0]), t1)
    h = 1e-5
    f = lambda t: quintic_value(c, t)[0]  # noqa: E731
    assert abs((f(h) - f(0)) / h - v0) < 1e-3           # starts with the given velocity
    assert abs(f(t1 - h)) < 1e-9                        # ends at 0 ...
    assert abs((f(t1 - h) - f(t1 - 2 * h)) / h) < 1e-4  # ... at rest


def _pose(J, rng):
    return quat.normalize(rng.normal(size=(J, 4))), rng.normal(size=(J, 3))


def test_inertializer_is_continuous_at_the_transition_and_decays():
    rng = np.random.default_rng(1)
    J = 5
    for method in ("quintic", "spring"):
        inert = Inertializer(J, method=method, blend_time=0.3, halflife=0.08)
        src_r, src_p = _pose(J, rng)
        dst_r, dst_p = _pose(J, rng)
        z = np.zeros((J, 3))
        inert.transition(src_r, z, dst_r, z, src_p, z, dst_p, z)
        r, p = inert.apply(dst_r, dst_p)
        np.testing.assert_allclose(np.abs(np.sum(r * src_r, axis=1)), 1.0, atol=1e-9)  # shows the source pose
        np.testing.assert_allclose(p, src_p, atol=1e-9)
        prev = np.inf
        for _ in range(60):
            inert.update(1 / 60)
            r, p = inert.apply(dst_r, dst_p)
            err = np.abs(p - dst_p).max()
            assert err <= prev + 1e-9
            prev = err
        assert err < 1e-3
        np.testing.assert_allclose(np.abs(np.sum(r * dst_r, axis=1)), 1.0, atol=1e-5)


def test_no_inertialization_cuts():
    rng = np.random.default_rng(2)
    inert = Inertializer(3, method="none")
    src_r, src_p = _pose(3, rng)
    dst_r, dst_p = _pose(3, rng)
    z = np.zeros((3, 3))
    inert.transition(src_r, z, dst_r, z, src_p, z, dst_p, z)
    r, p = inert.apply(dst_r, dst_p)
    np.testing.assert_allclose(p, dst_p)
    np.testing.assert_allclose(r, dst_r)


def test_two_bone_ik_reaches_target_and_keeps_lengths():
    rng = np.random.default_rng(3)
    for _ in range(50):
        a = rng.normal(size=3)
        a_rot = quat.normalize(rng.normal(size=4))
        b_local = quat.normalize(rng.normal(size=4))
        b_rot = quat.mul(a_rot, b_local)
        off_b, off_c = np.array([0.0, -0.45, 0.0]), np.array([0.0, -0.42, 0.02])
        b = a + quat.rotate(a_rot, off_b)
        c = b + quat.rotate(b_rot, off_c)
        target = c + rng.normal(size=3) * 0.1
        na, nb = two_bone_ik(a, b, c, target, a_rot, b_rot)
        b2 = a + quat.rotate(na, off_b)
        c2 = b2 + quat.rotate(nb, off_c)
        reach = np.linalg.norm(target - a) < np.linalg.norm(off_b) + np.linalg.norm(off_c) - 1e-4
        if reach and np.linalg.norm(target - a) > abs(np.linalg.norm(off_b) - np.linalg.norm(off_c)) + 1e-4:
            np.testing.assert_allclose(c2, target, atol=1e-6)
        np.testing.assert_allclose(np.linalg.norm(b2 - a), np.linalg.norm(off_b), atol=1e-9)
