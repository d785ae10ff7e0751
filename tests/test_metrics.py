"""Metrics with known answers, plus a few sanity checks on real motion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from motionmatch import metrics as M

FPS = 30.0


# ----------------------------------------------------------------------- foot skating
def test_foot_sliding_at_constant_speed_while_planted():
    F = 40
    t = np.arange(F) / FPS
    feet = np.zeros((F, 2, 3))
    feet[:, 0, 0] = 0.3 * t  # foot 0 slides along +x at 0.3 m/s
    feet[:, 0, 1] = 0.05 * np.sin(t)  # vertical motion must not count
    feet[:, 1, 2] = np.where(t < 0.5, 0.0, 5.0 * (t - 0.5))  # foot 1 still, then swings fast
    contacts = np.zeros((F, 2), dtype=bool)
    contacts[:, 0] = True
    contacts[: int(0.5 * FPS) + 1, 1] = True  # planted while still
    # foot 0 contributes F-1 pairs at 0.3 m/s; foot 1 contributes 15 pairs at 0 m/s.
    expected = 0.3 * (F - 1) / (F - 1 + 15)
    assert M.foot_skating(feet, contacts, FPS) == pytest.approx(expected, rel=1e-9)
    only0 = contacts.copy()
    only0[:, 1] = False
    assert M.foot_skating(feet, only0, FPS) == pytest.approx(0.3, rel=1e-9)


def test_foot_skating_counts_only_pairs_both_in_contact():
    F = 10
    feet = np.zeros((F, 1, 3))
    feet[:, 0, 2] = np.arange(F) * 0.01  # 0.3 m/s at 30 fps
    contacts = np.zeros((F, 1), dtype=bool)
    contacts[::2] = True  # never two consecutive frames
    assert M.foot_skating(feet, contacts, FPS) == 0.0
    assert M.foot_skating(feet, np.zeros((F, 1), bool), FPS) == 0.0
    with pytest.raises(ValueError, match="contacts must have shape"):
        M.foot_skating(feet, np.zeros((F, 2), bool), FPS)


# ------------------------------------------------------------------------------- jerk
def test_cubic_trajectory_has_known_jerk():
    fps = 60.0
    t = np.arange(50) / fps
    a, b = 2.0, -1.5
    p = np.stack([a * t**3 + t, 0.5 * t**2, b * t**3], axis=1)  # jerk (6a, 0, 6b)
    expected = 6 * math.hypot(a, b)
    assert M.jerk(p, fps) == pytest.approx(expected, rel=1e-6)
    # Several points: mean of per-point magnitudes.
    two = np.stack([p, np.zeros_like(p)], axis=1)
    assert M.jerk(two, fps) == pytest.approx(expected / 2, rel=1e-6)


def test_jerk_of_linear_motion_is_zero_and_short_input_fails():
    p = np.outer(np.arange(10), [1.0, 2.0, 3.0])
    assert M.jerk(p, FPS) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="at least 4 frames"):
        M.jerk(p[:3], FPS)


# ------------------------------------------------------------------------ transitions
def test_transitions_per_second():
    idx = np.r_[np.arange(10, 30), np.arange(100, 120), np.arange(50, 70)]  # 60 frames, 2 jumps
    assert M.count_transitions(idx) == 2
    assert M.transitions_per_second(idx, 30.0) == pytest.approx(1.0)  # 2 jumps in 2 s
    # Holding a frame is a transition too; playback step 2 is not.
    assert M.count_transitions([5, 5, 6]) == 1
    assert M.count_transitions(np.arange(0, 40, 2), step=2) == 0
    assert M.transitions_per_second([], 30.0) == 0.0


# ---------------------------------------------------------------------- response time
def _turning_path(fps, t_turn_start, turn_duration, duration, speed=1.5):
    """Travel along +z, then turn at a constant rate onto +x (a quarter circle)."""
    n = round(duration * fps)
    t = np.arange(n) / fps
    omega = (math.pi / 2) / turn_duration
    heading = np.clip((t - t_turn_start) * omega, 0.0, math.pi / 2)  # 0 = +z, pi/2 = +x
    v = speed * np.stack([np.sin(heading), np.zeros(n), np.cos(heading)], axis=1)
    p = np.cumsum(v, axis=0) / fps
    return p, omega


def test_response_time_on_a_smooth_turn():
    fps = 60.0
    t_change, t_turn, turn = 1.0, 1.3, 1.0
    p, omega = _turning_path(fps, t_turn, turn, 4.0)
    # Within 20 degrees of +x once the heading reaches 70 degrees.
    expected = t_turn + math.radians(70) / omega - t_change
    (rt,) = M.response_time(p, fps, [(t_change, [1.0, 0.0, 0.0])])
    assert rt == pytest.approx(expected, abs=1.5 / fps)
    # Already travelling the desired way: 0.
    (rt0,) = M.response_time(p, fps, [(0.5, np.array([0.0, 3.0, 2.0]))])  # vertical part ignored
    assert rt0 == 0.0


def test_response_time_on_a_sharp_corner_and_misses():
    fps = 30.0
    p, _ = _turning_path(fps, 2.0, 1e-6, 4.0)  # an instant 90-degree corner at t = 2 s
    rts = M.response_time(p, fps, [(0.0, [0, 0, 1]), (1.0, [1, 0, 0]), (3.0, [-1, 0, 0])], window_s=0.1)
    assert rts[0] == 0.0
    assert rts[1] == pytest.approx(1.0, abs=0.1)  # the corner, blurred by the 0.1 s window
    assert rts[2] is None  # never went -x before the end
    assert M.mean_response_time(p, fps, [(0.0, [0, 0, 1]), (1.0, [1, 0, 0])]) == pytest.approx(rts[1] / 2)
    assert math.isnan(M.mean_response_time(p, fps, [(3.0, [-1, 0, 0])]))


def test_response_time_ignores_standing_still_and_checks_input():
    fps = 30.0
    p = np.zeros((60, 3))
    p[30:, 0] = np.arange(30) * 0.01  # still for 1 s, then +x at 0.3 m/s
    (rt,) = M.response_time(p, fps, [(0.0, [1, 0, 0])], min_speed=0.1)
    assert rt == pytest.approx(1.0, abs=2.5 / fps)
    with pytest.raises(ValueError, match="time order"):
        M.response_time(p, fps, [(1.0, [1, 0, 0]), (0.5, [0, 0, 1])])
    with pytest.raises(ValueError, match="horizontal"):
        M.response_time(p, fps, [(0.0, [0, 1, 0])])


# ------------------------------------------------------------------- trajectory, path
def test_trajectory_error_is_mean_horizontal_distance():
    a = np.zeros((4, 3))
    b = np.array([[3.0, 9.0, 4.0], [0, 0, 1], [0, 0, 0], [0, -2, 2]])  # heights ignored
    assert M.trajectory_error(a, b) == pytest.approx((5 + 1 + 0 + 2) / 4)
    with pytest.raises(ValueError):
        M.trajectory_error(np.zeros((4, 3)), np.zeros((5, 3)))


def test_distance_to_polyline():
    path = np.array([[0.0, 0, 0], [2, 0, 0], [2, 0, 2]])  # an L on the ground
    pts = np.array([
        [1.0, 5.0, 1.0],   # 1 m from both legs (height ignored)
        [-1.0, 0, 0],      # beyond the first vertex: 1 m
        [3.0, 0, 3.0],     # beyond the last vertex: sqrt(2)
        [2.0, 0, 1.0],     # on the path
        [1.0, 0, -0.5],    # 0.5 m from the first leg
    ])
    expected = np.array([1.0, 1.0, math.sqrt(2), 0.0, 0.5])
    np.testing.assert_allclose(M.distance_to_path(pts, path), expected, atol=1e-12)
    assert M.mean_distance_to_path(pts, path) == pytest.approx(expected.mean())
    # 3D distances count heights.
    assert M.distance_to_path(pts[:1], path, horizontal_only=False)[0] == pytest.approx(math.hypot(1, 5))
    # A one-vertex path is a point; repeated vertices (zero-length segments) are fine.
    assert M.distance_to_path([[3.0, 0, 4.0]], [[0.0, 0, 0]])[0] == pytest.approx(5.0)
    assert M.distance_to_path([[1.0, 0, 1.0]], [[0.0, 0, 0], [0, 0, 0], [2, 0, 0]])[0] == pytest.approx(1.0)


def test_distance_to_path_chunks_long_inputs_like_brute_force():
    rng = np.random.default_rng(0)
    path = np.cumsum(rng.normal(size=(3000, 3)), axis=0)
    pts = rng.normal(scale=20, size=(1500, 3))  # 1500 x 2999 pairs: several chunks
    got = M.distance_to_path(pts, path)
    # Brute force on a few points, densely sampling each segment.
    s = np.linspace(0, 1, 201)
    dense = (path[:-1, None, :] + s[None, :, None] * (path[1:] - path[:-1])[:, None, :]).reshape(-1, 3)
    for i in range(0, 1500, 150):
        d = np.linalg.norm((dense - pts[i])[:, [0, 2]], axis=1).min()
        assert got[i] <= d + 1e-9 and got[i] == pytest.approx(d, abs=0.05)


# ------------------------------------------------------------------------------ sanity
def test_count_nan_frames_on_arrays():
    a = np.zeros((5, 3, 3))
    a[1, 2, 0] = np.nan
    a[3, 0, 1] = np.inf
    assert M.count_nan_frames(a) == 2
    assert M.count_nan_frames(np.zeros((4, 3))) == 0


def test_upright_fraction_positions():
    head = np.zeros((4, 3))
    hips = np.zeros((4, 3))
    head[:, 1] = [1.6, 1.5, 0.2, 1.7]
    hips[:, 1] = 0.9
    assert M.upright_fraction_positions(head, hips) == 0.75


# ----------------------------------------------------------------------- on real data
@pytest.fixture(scope="module")
def walk(data_dir):
    from motionmatch.anim import load_bvh

    f = data_dir / "lafan1" / "walk1_subject1_stop.bvh"
    if not f.is_file():
        pytest.skip(f"{f} not found; set MOTIONMATCH_DATA to the shared data folder")
    return load_bvh(f)


def test_motion_level_metrics_on_a_real_walk(walk):
    assert M.count_nan_frames(walk) == 0
    assert M.upright_fraction(walk) == 1.0
    # Captured walking: planted feet barely slide; jerk is finite and positive.
    assert 0.0 <= M.foot_skating_motion(walk) < 0.1
    j = M.jerk_motion(walk)
    assert 0.0 < j < 1000.0
    assert M.jerk_motion(walk, joints=["Hips"]) < j  # the hips move more smoothly than hands and feet
    # Upside down, the head is below the hips in every frame.
    from motionmatch.anim import quat

    flip = walk.copy()
    flip.rotations[:, 0] = quat.mul(np.broadcast_to(quat.from_axis_angle([1.0, 0, 0], math.pi), (walk.num_frames, 4)),
                                    flip.rotations[:, 0])
    assert M.upright_fraction(flip) == 0.0


def test_foot_skating_motion_sees_added_sliding(walk):
    from motionmatch.anim.contacts import foot_contacts

    contacts = foot_contacts(walk)
    slid = walk.copy()
    slid.translations[:, 0, 0] += 0.5 * np.arange(walk.num_frames) / walk.fps  # the body drifts at 0.5 m/s
    base = M.foot_skating_motion(walk, contacts)
    assert M.foot_skating_motion(slid, contacts) == pytest.approx(base + 0.5, abs=0.1)


def test_update_timing_leaves_the_warm_up_out():
    from types import SimpleNamespace

    from motionmatch._jit import overlapping
    from motionmatch.metrics.report import update_timing

    secs = np.full(100, 0.001)
    secs[0] = 4.0  # the first update waited for a compilation
    starts = np.cumsum(np.r_[0.0, secs[:-1]])
    warm = overlapping(starts, secs, [(0.5, 3.5)])
    assert warm.tolist() == [True] + [False] * 99
    t = update_timing(SimpleNamespace(update_seconds=secs, warm_up=warm, compile_seconds=3.0))
    assert t["update_ms_mean"] == pytest.approx(1.0) and t["update_ms_median"] == pytest.approx(1.0)
    assert t["warm_up"] == {"frames": 1, "ms": 4000.0, "compile_s": 3.0}
    naive = update_timing(SimpleNamespace(update_seconds=secs))  # not known: nothing left out
    assert naive["update_ms_mean"] > 40.0 and naive["warm_up"]["frames"] == 0
