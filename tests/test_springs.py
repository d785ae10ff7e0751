"""Critically damped springs: analytic solutions, the half-life meaning, exactness for any dt."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp
from scipy.special import lambertw

from motionmatch.anim import quat
from motionmatch.control import springs
from motionmatch.control.springs import (
    damper_exact,
    damper_rotation,
    decay_spring,
    halflife_to_damping,
    lerp_toward,
    lerp_velocity_exact,
    spring_position,
    spring_rotation,
    spring_velocity,
)

RNG = np.random.default_rng(7)


def test_halflife_factor_is_the_lambert_w_solution():
    u = -lambertw(-1.0 / (2.0 * np.e), k=-1).real - 1.0
    assert springs.SPRING_HALFLIFE_FACTOR == pytest.approx(u, rel=1e-14)
    assert (1.0 + u) * np.exp(-u) == pytest.approx(0.5, rel=1e-14)
    assert springs.damping_to_halflife(halflife_to_damping(0.3)) == pytest.approx(0.3, rel=1e-6)


@pytest.mark.parametrize("h", [0.05, 0.2, 1.0, 3.0])
def test_halflife_halves_distance_from_rest(h):
    x0 = np.array([2.0, -1.0, 0.5])
    g = np.array([0.5, 0.5, 0.5])
    x, _ = spring_position(x0, np.zeros(3), g, h, h)
    np.testing.assert_allclose(x - g, 0.5 * (x0 - g), rtol=1e-7)
    # the velocity spring: velocity halfway to the goal velocity after h, from zero acceleration
    _, v, _ = spring_velocity(np.zeros(3), x0, np.zeros(3), g, h, h)
    np.testing.assert_allclose(v - g, 0.5 * (x0 - g), rtol=1e-7)
    # the first-order damper halves every h, from any state
    np.testing.assert_allclose(damper_exact(x0, g, h, 2 * h) - g, 0.25 * (x0 - g), rtol=1e-7)


def test_envelope_convention_conversion():
    h_env = 0.27
    y_env = 2.0 * np.log(2.0) / h_env
    t = np.linspace(0.0, 2.0, 9)
    x, _ = spring_position(1.0, 0.3, 0.0, h_env * springs.ENVELOPE_TO_DISTANCE_HALFLIFE, t)
    ref = (1.0 + (0.3 + y_env * 1.0) * t) * np.exp(-y_env * t)
    np.testing.assert_allclose(x, ref, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize(("x0", "v0"), [(1.0, 0.0), (-2.0, 3.0), (0.5, -4.0), (0.0, 1.0)])
def test_decay_matches_closed_form_and_ode(x0, v0):
    h = 0.25
    y = float(halflife_to_damping(h))
    t = np.linspace(0.0, 2.0, 41)
    x, v = decay_spring(x0, v0, h, t)
    np.testing.assert_allclose(x, (x0 + (v0 + y * x0) * t) * np.exp(-y * t), atol=1e-12)
    # independent check: integrate x'' = -y^2 x - 2 y x' numerically
    sol = solve_ivp(
        lambda _, s: [s[1], -y * y * s[0] - 2 * y * s[1]], (0, 2), [x0, v0], t_eval=t, rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(x, sol.y[0], atol=1e-7)
    np.testing.assert_allclose(v, sol.y[1], atol=1e-7)


def test_spring_position_toward_goal_is_decay_of_offset():
    x0, v0, g = RNG.normal(size=(5, 3)), RNG.normal(size=(5, 3)), RNG.normal(size=(5, 3))
    x, v = spring_position(x0, v0, g, 0.3, 0.17)
    xd, vd = decay_spring(x0 - g, v0, 0.3, 0.17)
    np.testing.assert_allclose(x, xd + g, atol=1e-12)
    np.testing.assert_allclose(v, vd, atol=1e-12)


def _steps(fn, state, n, dt):
    for _ in range(n):
        state = fn(*state, dt)
    return state


def test_many_small_steps_equal_one_big_step():
    h = 0.2
    x0, v0, a0, g = RNG.normal(size=(4, 3))
    big = spring_position(x0, v0, g, h, 1.0)
    small = _steps(lambda x, v, dt: spring_position(x, v, g, h, dt), (x0, v0), 60, 1 / 60)
    np.testing.assert_allclose(np.stack(small), np.stack(big), atol=1e-10)

    big = spring_velocity(x0, v0, a0, g, h, 1.0)
    small = _steps(lambda x, v, a, dt: spring_velocity(x, v, a, g, h, dt), (x0, v0, a0), 60, 1 / 60)
    np.testing.assert_allclose(np.stack(small), np.stack(big), atol=1e-10)

    big = lerp_velocity_exact(x0, v0, g, h, 1.0)
    small = _steps(lambda x, v, dt: lerp_velocity_exact(x, v, g, h, dt), (x0, v0), 37, 1 / 37)
    np.testing.assert_allclose(np.stack(small), np.stack(big), atol=1e-10)

    d = _steps(lambda x, dt: (damper_exact(x, g, h, dt),), (x0,), 13, 0.1)[0]
    np.testing.assert_allclose(d, damper_exact(x0, g, h, 1.3), atol=1e-12)


def test_uneven_steps_equal_one_step():
    dts = RNG.uniform(0.001, 0.05, size=50)
    x0, v0, a0, g = RNG.normal(size=(4, 3))
    state = (x0, v0, a0)
    for dt in dts:
        state = spring_velocity(*state, g, 0.15, dt)
    np.testing.assert_allclose(np.stack(state), np.stack(spring_velocity(x0, v0, a0, g, 0.15, dts.sum())), atol=1e-10)


def test_spring_velocity_integrates_its_velocity():
    x0, v0, a0, vg = np.array([1.0, 0, 2]), np.array([0.0, 0, 3]), np.array([1.0, 0, -1]), np.array([-2.0, 0, 1])
    t = np.linspace(0.0, 1.5, 3001)[:, None]
    x, v, a = spring_velocity(x0, v0, a0, vg, 0.3, t)
    # position is the integral of velocity; acceleration its derivative
    integral = x0 + np.concatenate([np.zeros((1, 3)), np.cumsum(0.5 * (v[1:] + v[:-1]) * np.diff(t, axis=0), axis=0)])
    np.testing.assert_allclose(x, integral, atol=1e-6)
    np.testing.assert_allclose(np.gradient(v, t[:, 0], axis=0)[1:-1], a[1:-1], atol=1e-4)
    np.testing.assert_allclose(v[0], v0)
    np.testing.assert_allclose(a[0], a0)


def test_spring_velocity_at_goal_moves_in_a_straight_line():
    x0, vg = np.array([1.0, 0.0, -1.0]), np.array([0.7, 0.0, 1.2])
    t = np.array([[0.1], [0.5], [2.0]])
    x, v, a = spring_velocity(x0, vg, np.zeros(3), vg, 0.2, t)
    np.testing.assert_allclose(x, x0 + vg * t, atol=1e-12)
    np.testing.assert_allclose(v, np.broadcast_to(vg, v.shape), atol=1e-12)
    np.testing.assert_allclose(a, 0.0, atol=1e-12)


def test_convergence_and_no_overshoot_from_rest():
    t = np.linspace(0.0, 5.0, 2001)
    x, v = spring_position(3.0, 0.0, 1.0, 0.3, t)
    d = x - 1.0
    assert np.all(d >= 0) and np.all(d <= 2.0)
    assert np.all(np.diff(d) <= 1e-15)  # monotone approach
    assert abs(d[-1]) < 1e-6 and abs(v[-1]) < 1e-5


def test_zero_halflife_snaps():
    x, v = spring_position(5.0, 2.0, 1.0, 0.0, 1 / 60)
    assert x == pytest.approx(1.0, abs=1e-9) and np.isfinite(v)
    x, v, _ = spring_velocity(0.0, 0.0, 0.0, 2.0, 0.0, 0.5)
    assert v == pytest.approx(2.0, abs=1e-9) and x == pytest.approx(1.0, abs=1e-6)
    assert damper_exact(5.0, 1.0, 0.0, 1 / 60) == pytest.approx(1.0)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="halflife"):
        spring_position(0.0, 0.0, 1.0, -0.1, 0.1)
    with pytest.raises(ValueError, match="dt"):
        spring_position(0.0, 0.0, 1.0, 0.1, -0.1)
    with pytest.raises(ValueError):
        springs.lerp_rate_to_halflife(0.0, 60)


def test_lerp_toward_is_per_frame_lerp():
    rate, fps = 0.1, 60.0
    h = springs.lerp_rate_to_halflife(rate, fps)
    x = 4.0
    for _ in range(30):
        x = x + (1.0 - x) * rate
    assert lerp_toward(4.0, 1.0, h, 30 / fps) == pytest.approx(x, rel=1e-12)
    assert springs.lerp_rate_to_halflife(1.0, 60) == 0.0


def test_lerp_velocity_jumps_acceleration_but_spring_does_not():
    # a goal change right after rest: the spring starts with zero acceleration, the lerp does not
    eps = 1e-4
    _, v_spring, _ = spring_velocity(0.0, 0.0, 0.0, 1.0, 0.2, eps)
    _, v_lerp = lerp_velocity_exact(0.0, 0.0, 1.0, 0.2, eps)
    assert v_spring / eps < 0.1
    assert v_lerp / eps > 1.0


def test_broadcast_over_times_and_batches():
    x0 = RNG.normal(size=(4, 3))
    t = np.array([0.1, 0.2, 0.4])[:, None, None]
    x, v = spring_position(x0, np.zeros(3), np.zeros(3), 0.2, t)
    assert x.shape == (3, 4, 3) and v.shape == (3, 4, 3)
    for k in range(3):
        np.testing.assert_allclose(x[k], spring_position(x0, 0.0, 0.0, 0.2, float(t[k, 0, 0]))[0])


# ---------------------------------------------------------------------------------------
# Rotations
# ---------------------------------------------------------------------------------------


def test_rotation_spring_about_y_matches_scalar_spring():
    a0, w0, ag = 0.3, 1.5, 2.0
    t = np.linspace(0.0, 1.0, 11)[:, None]
    q, w = spring_rotation(quat.from_angle_y(a0), np.array([0.0, w0, 0.0]), quat.from_angle_y(ag), 0.25, t)
    ang, angv = spring_position(a0, w0, ag, 0.25, t[:, 0])
    np.testing.assert_allclose(quat.yaw_angle(q), ang, atol=1e-9)
    np.testing.assert_allclose(w[:, 1], angv, atol=1e-9)
    np.testing.assert_allclose(w[:, [0, 2]], 0.0, atol=1e-12)


def test_rotation_spring_converges_and_stays_unit():
    q0 = quat.normalize(RNG.normal(size=(20, 4)))
    g = quat.normalize(RNG.normal(size=(20, 4)))
    w0 = RNG.normal(size=(20, 3))
    q, w = q0, w0
    for _ in range(600):
        q, w = spring_rotation(q, w, g, 0.15, 1 / 60)
        np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-12)
    dot = np.abs(np.sum(q * g, axis=-1))
    np.testing.assert_allclose(dot, 1.0, atol=1e-9)
    assert np.abs(w).max() < 1e-6


def test_rotation_spring_small_steps_equal_big_step_on_fixed_axis():
    axis = np.array([0.0, 0.6, 0.8])
    q0, g = quat.from_axis_angle(axis, 0.4), quat.from_axis_angle(axis, -1.2)
    w0 = 2.0 * axis
    big = spring_rotation(q0, w0, g, 0.2, 0.8)
    q, w = q0, w0
    for _ in range(48):
        q, w = spring_rotation(q, w, g, 0.2, 0.8 / 48)
    np.testing.assert_allclose(q, big[0], atol=1e-10)
    np.testing.assert_allclose(w, big[1], atol=1e-10)


def test_rotation_spring_angular_velocity_matches_motion():
    axis = np.array([1.0, 0.0, 0.0])
    q0, g = quat.from_axis_angle(axis, 1.0), quat.identity()
    t = np.linspace(0.0, 0.5, 5001)[:, None]
    q, w = spring_rotation(q0, np.zeros(3), g, 0.2, t)
    fd = quat.angular_velocity(q, 1e-4)
    np.testing.assert_allclose(fd[1:-2], 0.5 * (w[1:-2] + w[2:-1]), atol=1e-5)


def test_damper_rotation_halves_angle():
    q, w = damper_rotation(quat.from_angle_y(1.0), quat.identity(), 0.3, 0.3)
    assert quat.yaw_angle(q) == pytest.approx(0.5, rel=1e-7)
    assert w[1] == pytest.approx(-np.log(2) / 0.3 * 0.5, rel=1e-6)


# ---------------------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------------------

finite = st.floats(-100.0, 100.0, allow_nan=False)
halflives = st.floats(0.0, 5.0, allow_nan=False)
times = st.floats(0.0, 50.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(x0=finite, g=finite, h=halflives, t=times)
def test_property_from_rest_bounded_by_initial_distance(x0, g, h, t):
    x, v = spring_position(x0, 0.0, g, h, t)
    assert np.isfinite(x) and np.isfinite(v)
    assert abs(x - g) <= abs(x0 - g) * (1 + 1e-12) + 1e-12
    # same side of the goal: no overshoot
    assert (x - g) * (x0 - g) >= -1e-12


@settings(max_examples=200, deadline=None)
@given(v0=finite, vg=finite, a0=finite, h=halflives, t=times)
def test_property_velocity_spring_finite_and_settles(v0, vg, a0, h, t):
    x, v, a = spring_velocity(0.0, v0, a0, vg, h, t)
    assert np.isfinite(x) and np.isfinite(v) and np.isfinite(a)
    if a0 == 0.0:
        assert abs(v - vg) <= abs(v0 - vg) * (1 + 1e-12) + 1e-12


@settings(max_examples=100, deadline=None)
@given(
    q=st.lists(st.floats(-1, 1, allow_nan=False), min_size=4, max_size=4),
    g=st.lists(st.floats(-1, 1, allow_nan=False), min_size=4, max_size=4),
    w=st.lists(st.floats(-10, 10, allow_nan=False), min_size=3, max_size=3),
    h=halflives,
    t=times,
)
def test_property_rotation_spring_unit(q, g, w, h, t):
    qq, ww = spring_rotation(quat.normalize(q), np.array(w), quat.normalize(g), h, t)
    assert np.all(np.isfinite(qq)) and np.all(np.isfinite(ww))
    assert np.linalg.norm(qq) == pytest.approx(1.0, abs=1e-12)
