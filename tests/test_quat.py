"""Quaternion utilities against known answers and SciPy."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from motionmatch.anim import quat

rng = np.random.default_rng(0)


def random_quats(n):
    return quat.normalize(rng.normal(size=(n, 4)))


def test_known_rotation_about_y():
    q = quat.from_angle_y(np.pi / 2)
    np.testing.assert_allclose(quat.rotate(q, [0, 0, 1]), [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(quat.rotate(q, [1, 0, 0]), [0, 0, -1], atol=1e-12)


def test_mul_matches_matrix_product():
    a, b = random_quats(50), random_quats(50)
    np.testing.assert_allclose(quat.to_matrix(quat.mul(a, b)), quat.to_matrix(a) @ quat.to_matrix(b), atol=1e-12)


def test_inverse_and_rotate():
    q = random_quats(20)
    v = rng.normal(size=(20, 3))
    np.testing.assert_allclose(quat.inv_rotate(q, quat.rotate(q, v)), v, atol=1e-12)
    np.testing.assert_allclose(quat.mul(q, quat.inverse(q)), quat.identity((20,)), atol=1e-12)


@pytest.mark.parametrize("order", ["zyx", "zxy", "xyz", "yzx", "yxz", "xzy"])
def test_euler_roundtrip_and_scipy(order):
    ang = rng.uniform(-np.pi, np.pi, size=(100, 3))
    ang[:, 1] = rng.uniform(-1.4, 1.4, size=100)  # away from gimbal lock
    q = quat.from_euler(ang, order)
    ref = Rotation.from_euler(order.upper(), ang).as_quat()[:, [3, 0, 1, 2]]
    np.testing.assert_allclose(np.abs(np.sum(q * ref, axis=1)), 1.0, atol=1e-12)
    back = quat.to_euler(q, order)
    np.testing.assert_allclose(quat.from_euler(back, order) * np.sign(np.sum(q * quat.from_euler(back, order), 1))[:, None], q, atol=1e-10)


def test_matrix_and_6d_roundtrip():
    q = random_quats(100)
    q = np.where(q[:, :1] < 0, -q, q)
    np.testing.assert_allclose(quat.from_matrix(quat.to_matrix(q)), q, atol=1e-10)
    np.testing.assert_allclose(quat.from_6d(quat.to_6d(q)), q, atol=1e-10)


def test_log_exp():
    rv = rng.normal(size=(100, 3))
    rv *= (rng.uniform(0, 3.0, size=100) / np.linalg.norm(rv, axis=1))[:, None]  # angles < pi
    np.testing.assert_allclose(quat.log(quat.exp(rv)), rv, atol=1e-10)
    np.testing.assert_allclose(quat.log(quat.identity((3,))), 0.0, atol=1e-15)


def test_slerp_endpoints_and_midpoint():
    a = quat.identity()
    b = quat.from_angle_y(np.pi / 2)
    np.testing.assert_allclose(quat.slerp(a, b, 0.0), a, atol=1e-12)
    np.testing.assert_allclose(quat.slerp(a, b, 1.0), b, atol=1e-12)
    np.testing.assert_allclose(quat.slerp(a, b, 0.5), quat.from_angle_y(np.pi / 4), atol=1e-12)
    # shortest path even when b is given with the opposite sign
    np.testing.assert_allclose(quat.slerp(a, -b, 0.5), quat.from_angle_y(np.pi / 4), atol=1e-12)


def test_angular_velocity_constant_spin():
    fps = 60.0
    t = np.arange(30) / fps
    q = quat.from_angle_y(2.0 * t)  # 2 rad/s about +Y
    w = quat.angular_velocity(q, 1 / fps)
    np.testing.assert_allclose(w, np.tile([0, 2.0, 0], (30, 1)), atol=1e-9)


def test_between_and_unroll():
    u = rng.normal(size=(50, 3))
    v = rng.normal(size=(50, 3))
    q = quat.between(u, v)
    np.testing.assert_allclose(quat.rotate(q, u / np.linalg.norm(u, axis=1, keepdims=True)),
                               v / np.linalg.norm(v, axis=1, keepdims=True), atol=1e-10)
    opp = quat.between(np.array([[1.0, 0, 0]]), np.array([[-1.0, 0, 0]]))
    np.testing.assert_allclose(quat.rotate(opp, [1.0, 0, 0]), [[-1.0, 0, 0]], atol=1e-12)
    seq = quat.from_angle_y(np.linspace(0, 1, 10))
    seq[3::2] *= -1
    un = quat.unroll(seq)
    assert np.all(np.sum(un[1:] * un[:-1], axis=1) > 0)
