"""Drawn paths: loading, resampling, smoothing and the revised future query, with known answers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from motionmatch.control.path import (
    PathError,
    TimedPath,
    braking_profile,
    gaussian_kernel,
    load_path,
    parse_path,
    resample_path,
    smooth_path,
)
from motionmatch.control.revision import QueryReviser, RevisionSettings, RevisionState

OFFSETS = (1 / 3, 2 / 3, 1.0)


def line_events(speed=1.2, seconds=6.0, heading=(0.0, 1.0), seed=0, n=200):
    """Events at irregular times along a straight line at constant speed."""
    rng = np.random.default_rng(seed)
    t = np.sort(np.concatenate([[0.0, seconds], rng.uniform(0, seconds, n)]))
    d = np.asarray(heading, float) / np.linalg.norm(heading)
    return t, t[:, None] * speed * d[None, :]


def polyline_events(vertices, speed, rate=120.0):
    """Events every 1/rate s along a polyline at constant speed (abrupt corners, like a mouse)."""
    v = np.asarray(vertices, float)
    seg = np.linalg.norm(np.diff(v, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    t = np.arange(0.0, s[-1] / speed, 1 / rate)
    t = np.append(t, s[-1] / speed) if t[-1] < s[-1] / speed - 1e-9 else t
    d = t * speed
    return t, np.stack([np.interp(d, s, v[:, 0]), np.interp(d, s, v[:, 1])], axis=1)


# ----------------------------------------------------------------------------- input
def test_loads_the_json_form(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"points": [[0.0, 0.0, 0.0], [0.021, 0.03, 0.01], [0.5, 0.6, 0.2], [1.0, 1.2, 0.4]]}))
    p = load_path(f)
    assert p.fps == 150.0 and p.num_samples == 151  # 1 s at 150 Hz, both ends included
    np.testing.assert_allclose(p.input_points[-1], [1.2, 0.0, 0.4])
    assert np.all(p.points[:, 1] == 0.0)
    # the drawing-speed factor: 0.2 makes 150 Hz samples 1/30 s apart, the path 5x longer in time
    q = load_path(f, scale=0.2)
    assert q.fps == pytest.approx(30.0) and q.duration == pytest.approx(5.0)


def test_loads_csv_with_and_without_header(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("t,x,z\n0,0,0\n0.5,0.5,0\n1.0,1.0,0\n")
    b = tmp_path / "b.csv"
    b.write_text("0 ,0,0\n0.5,0.5,0\n1.0,1.0,0\n")
    pa, pb = load_path(a), load_path(b)
    np.testing.assert_allclose(pa.points, pb.points)
    assert pa.length == pytest.approx(1.0, abs=1e-9)


def test_file_options_and_joystick_timeline(tmp_path):
    f = tmp_path / "j.json"
    f.write_text(json.dumps({"points": [[1.0, 0, 0], [2.0, 1, 0], [3.0, 2, 0]], "scale": 0.5, "rate": 60,
                             "joystick": [[1.0, 0], [2.0, 45]]}))
    p = load_path(f)
    assert p.fps == pytest.approx(30.0) and p.duration == pytest.approx(4.0)
    # the timeline is moved to world seconds from the path's start: 45 degrees from t = 2 s
    assert p.joystick_deg(1.9) == 0.0 and p.joystick_deg(2.1) == 45.0


@pytest.mark.parametrize(("obj", "words"), [
    ({"points": [[0, 0, 0]]}, "at least two points"),
    ({"points": []}, "triples"),
    ({"points": [[0, 0, 0], [0.1, float("nan"), 0]]}, "not finite"),
    ({"points": [[0, 0, 0], [0.2, 1, 0], [0.2, 2, 0]]}, "increase strictly"),
    ({"points": [[0, 0, 0], [0.3, 1, 0], [0.1, 2, 0]]}, "increase strictly"),
    ({"points": [[0, 1, 1], [0.5, 1, 1], [1, 1, 1]]}, "zero length"),
    ({"pts": [[0, 0, 0], [1, 1, 1]]}, '"points"'),
    ({"points": [[0, 0], [1, 1]]}, "triples"),
    ({"points": [[0, 0, 0], [1, 1, 1]], "scale": -1}, "positive"),
])
def test_invalid_paths_get_clear_errors(obj, words):
    with pytest.raises(PathError, match=words):
        raw = parse_path(obj)
        TimedPath.from_samples(raw.times, raw.points)


def test_file_errors_name_the_file(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text("{not json")
    with pytest.raises(PathError, match=r"bad\.json.*JSON"):
        load_path(f)
    with pytest.raises(PathError, match="cannot read"):
        load_path(tmp_path / "missing.json")
    c = tmp_path / "bad.csv"
    c.write_text("t,x,y\n0,0,0\n1,1,1\n")
    with pytest.raises(PathError, match="columns t, x, z"):
        load_path(c)


# ------------------------------------------------------------------------ resampling
def test_resampling_irregular_events_on_a_line_is_exact():
    t, xz = line_events(speed=1.2, seconds=6.0)
    pts, fps = resample_path(t, xz, rate=150.0, scale=1.0)
    assert fps == 150.0 and len(pts) == 901
    expect = np.arange(901)[:, None] / 150.0 * 1.2 * np.array([[0.0, 1.0]])
    np.testing.assert_allclose(pts, expect, atol=1e-12)


def test_resampling_with_drawing_speed_factor():
    """A path drawn in 1 s with factor 0.2 lasts 5 world seconds: 5x slower."""
    t, xz = line_events(speed=5.0, seconds=1.0)
    _pts, fps = resample_path(t, xz, rate=150.0, scale=0.2)
    assert fps == pytest.approx(30.0)
    p = TimedPath.from_samples(t, xz, rate=150.0, scale=0.2)
    assert p.duration == pytest.approx(5.0)
    np.testing.assert_allclose(p.speeds[:-1], 1.0, rtol=1e-9)


def test_resampling_keeps_the_last_event():
    t = np.array([0.0, 0.3, 1.007])
    xz = np.array([[0.0, 0.0], [0.3, 0.0], [1.007, 0.0]])
    pts, _fps = resample_path(t, xz, 150.0)
    np.testing.assert_allclose(pts[-1], [1.007, 0.0])
    assert np.all(np.diff(pts[:, 0]) > 0)


# ------------------------------------------------------------------------- smoothing
def test_gaussian_kernel():
    w = gaussian_kernel(3.0, 19)
    assert w.shape == (19,) and w.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(w, w[::-1])
    assert np.argmax(w) == 9
    with pytest.raises(PathError):
        gaussian_kernel(3.0, 18)


def test_straight_path_at_constant_speed_is_unchanged_by_smoothing():
    t, xz = line_events(speed=1.5, seconds=4.0, heading=(0.6, -0.8))
    raw = TimedPath.from_samples(t, xz, smooth=False)
    sm = TimedPath.from_samples(t, xz, smooth=True)
    np.testing.assert_allclose(sm.points, raw.points, atol=1e-9)
    pts = raw.points[:, [0, 2]]
    np.testing.assert_allclose(smooth_path(pts, 3.0, 19), pts, atol=1e-9)


def test_smoothing_keeps_length_and_softens_corners():
    t, xz = polyline_events([[0, 0], [0, 4], [4, 4]], speed=2.0)
    raw = TimedPath.from_samples(t, xz, smooth=False)
    sm = TimedPath.from_samples(t, xz, smooth=True)
    # the ends stay where they were drawn (extrapolated, not shortened)
    np.testing.assert_allclose(sm.points[0], raw.points[0], atol=1e-6)
    np.testing.assert_allclose(sm.points[-1], raw.points[-1], atol=1e-6)
    assert sm.num_samples == raw.num_samples
    # the speed dips gently at the corner instead of the velocity turning at once
    acc = lambda p: np.linalg.norm(np.diff(p.points, 2, axis=0), axis=1).max() * p.fps**2  # noqa: E731
    assert acc(sm) < 0.25 * acc(raw)
    mid = sm.speeds[: sm.last]
    assert mid.min() < 1.9 and mid.max() < 2.05


def test_smoothing_is_defined_in_world_time():
    """The paper's sigma and width are in 1/30 s path frames: the same path resampled at
    150 Hz and at 30 Hz is smoothed alike."""
    t, xz = polyline_events([[0, 0], [0, 3], [3, 3]], speed=1.5)
    a = TimedPath.from_samples(t, xz, rate=150.0)
    b = TimedPath.from_samples(t, xz, rate=30.0)
    np.testing.assert_allclose(a.point(np.arange(b.num_samples) * 5.0), b.points, atol=0.02)


# -------------------------------------------------------------------------- TimedPath
def test_path_geometry():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    xz = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 1.0]])  # stand, walk, stand
    p = TimedPath.from_samples(t, xz, rate=10.0, smooth=False)
    np.testing.assert_allclose(p.tangents, np.tile([0.0, 0.0, 1.0], (p.num_samples, 1)))
    assert p.length == pytest.approx(1.0)
    assert p.index_at_arc(0.5) == pytest.approx(15.0)
    np.testing.assert_allclose(p.velocity(15.0), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(p.point(-3.0), p.points[0])
    np.testing.assert_allclose(p.point(1e9), p.points[-1])
    q = p.starting_at([2.0, 5.0, 3.0])
    np.testing.assert_allclose(q.points[0], [2.0, 0.0, 3.0])
    np.testing.assert_allclose(q.input_points[-1], [2.0, 0.0, 4.0])


def test_global_approach_joins_a_straight_segment_at_the_initial_speed():
    t, xz = line_events(speed=1.0, seconds=5.0)
    p = TimedPath.from_samples(t, xz)
    g = p.with_approach([3.0, 0.0, 0.0])
    np.testing.assert_allclose(g.points[0], [3.0, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(g.input_points[1], p.input_points[0])
    assert g.duration == pytest.approx(p.duration + 3.0, abs=0.02)  # 3 m at 1 m/s first
    assert p.with_approach(p.points[0]) is p


# ------------------------------------------------------------------ query revision
def straight(speed=1.0, seconds=10.0):
    t, xz = line_events(speed=speed, seconds=seconds)
    return TimedPath.from_samples(t, xz)


def test_on_a_followed_path_the_query_is_the_path_ahead():
    p = straight(1.0)
    rv = QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0))
    st = RevisionState(np.array([300]), np.array([2.0]), t_prev=np.array([2.0 - 1 / 30]))  # the root kept pace
    r = rv.revise(p.points[305], st)
    assert r.i_d[0] == 305
    np.testing.assert_allclose(r.indices[0], 305 + np.array(OFFSETS) * 150)
    np.testing.assert_allclose(r.positions[0], p.point(r.indices[0]))
    np.testing.assert_allclose(r.directions[0], np.tile([0.0, 0.0, 1.0], (3, 1)), atol=1e-12)
    np.testing.assert_allclose(r.velocities[0, :, 2], 1.0, rtol=1e-6)
    assert r.state.i_prev[0] == 305 and r.corner[0] == -1


def test_desired_position_window_never_goes_back_nor_far_ahead():
    p = straight(1.0)
    rv = QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0, min_pace=None, max_pace=None))  # the paper's window
    st = RevisionState(np.array([300, 300]), np.zeros(2))
    behind, ahead = p.points[100], p.points[900]
    i_d = rv.desired_index(np.stack([behind, ahead]), st)
    assert i_d[0] == 300            # alpha = 0: not back
    assert i_d[1] == 300 + 50       # beta = 10 path frames = 1/3 s = 50 samples at 150 Hz


def test_desired_position_modes():
    p = straight(1.0)
    st = RevisionState(np.array([300]), np.array([4.0]))
    pos = p.points[100][None]
    cur = QueryReviser(p, OFFSETS, RevisionSettings(desired="current", v_max=3.0)).desired_index(pos, st)
    near = QueryReviser(p, OFFSETS, RevisionSettings(desired="nearest", v_max=3.0)).desired_index(pos, st)
    assert cur[0] == 600 and near[0] == 100


def test_self_crossing_path_is_followed_in_order():
    """At the crossing of a figure-eight the window keeps the branch being walked; the
    nearest point of the whole path may be on the other branch."""
    u = np.linspace(0, 2 * np.pi, 1200)
    xz = np.stack([3 * np.sin(u), 1.5 * np.sin(2 * u)], axis=1)
    p = TimedPath.from_samples(u / u[-1] * 14.0, xz)
    rv = QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0))
    # at the start (the crossing) and at the middle crossing, the window stays on its branch
    mid = int(np.argmin(np.linalg.norm(p.points[p.last // 4 : 3 * p.last // 4], axis=1))) + p.last // 4
    for i in (0, mid - 3):
        st = RevisionState(np.array([i]), np.zeros(1))
        assert abs(rv.desired_index(p.points[i][None] + 0.01, st)[0] - i) <= 50
    st = RevisionState(np.array([mid - 3]), np.zeros(1))
    near = QueryReviser(p, OFFSETS, RevisionSettings(desired="nearest", v_max=3.0))
    # the end is where the path started: "nearest" may jump to it from the start
    assert near.desired_index(p.points[0][None], RevisionState.start())[0] in (0, p.last)


def test_path_drawn_3x_too_fast_gives_future_points_limited_to_v_max():
    v_max = 2.0
    p = straight(speed=3 * v_max, seconds=8.0)
    rv = QueryReviser(p, OFFSETS, RevisionSettings(v_max=v_max))
    st = RevisionState(np.array([150]), np.zeros(1))
    r = rv.revise(p.points[150], st)
    d = np.linalg.norm(r.positions[0] - p.points[150], axis=1)
    np.testing.assert_allclose(d, v_max * np.array(OFFSETS), rtol=1e-6)  # evenly spaced in time
    np.testing.assert_allclose(np.linalg.norm(r.velocities[0], axis=1), v_max, rtol=1e-6)
    # without the limit the raw points are 3x as far
    raw = QueryReviser(p, OFFSETS, RevisionSettings(speed_limit=False)).revise(p.points[150], st)
    np.testing.assert_allclose(np.linalg.norm(raw.positions[0] - p.points[150], axis=1), 3 * v_max * np.array(OFFSETS),
                               rtol=1e-6)
    # a path slower than v_max is left as it is
    slow = straight(speed=1.0)
    r = QueryReviser(slow, OFFSETS, RevisionSettings(v_max=v_max)).revise(slow.points[150], st)
    np.testing.assert_allclose(r.indices[0], 150 + np.array(OFFSETS) * 150)


def corner_path(speed=1.0, leg=4.0):
    t, xz = polyline_events([[0, 0], [0, leg], [-leg, leg]], speed=speed)
    return TimedPath.from_samples(t, xz, smooth=False, rate=150.0)


def test_sharp_corner_moves_the_point_after_it_toward_the_corner():
    p = corner_path()  # a 90-degree corner at z = 4 (sample 600), then toward -X
    paper = dict(v_max=3.0, min_pace=None, max_pace=None, steer=False,  # Eq. 1's window and the path's tangents
                 sharp_corners=True)
    rv = QueryReviser(p, OFFSETS, RevisionSettings(**paper))
    plain = QueryReviser(p, OFFSETS, RevisionSettings(**{**paper, "sharp_corners": False}))
    i = 520  # future points at 570, 620, 670: the corner (sample 600) lies between p_f^1 and p_f^2
    st = RevisionState(np.array([i - 5]), np.zeros(1))
    r, r0 = rv.revise(p.points[i], st), plain.revise(p.points[i], st)
    assert r.i_d[0] == i
    np.testing.assert_allclose(r0.indices[0], [570, 620, 670])
    np.testing.assert_allclose(r.positions[0, 0], r0.positions[0, 0])  # before the corner: unchanged
    corner_pt = p.points[599]  # the path point just before the corner
    a, b = r0.positions[0, 0], r.positions[0, 1]
    # on the line from p_f^1 through the corner point, as far as the path goes in that time
    k = (620 - 570) / (599 - 570)
    np.testing.assert_allclose(b, a + k * (corner_pt - a), atol=1e-9)
    assert b[0] == pytest.approx(0.0) and b[2] > 4.0  # straight on past the corner, not cut across
    # the later point moves by the same amount
    np.testing.assert_allclose(r.positions[0, 2] - r0.positions[0, 2], b - r0.positions[0, 1], atol=1e-9)
    assert r.corner[0] == -1  # the corner is not yet between p_d and p_f^1


def test_corner_next_to_the_character_is_reported_and_a_stuck_desired_position_advances():
    p = corner_path()
    rv = QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0, sharp_corners=True))
    st = RevisionState(np.array([580]), np.zeros(1))
    r = rv.revise(p.points[580], st)  # i_d did not move and a corner is right ahead
    assert r.i_d[0] == 580 + 10  # advanced by c = 2 path frames = 10 samples
    assert r.corner[0] == 599
    # past the corner: nothing to modify any more
    st = RevisionState(np.array([640]), np.zeros(1))
    r = rv.revise(p.points[641], st)
    assert r.corner[0] == -1
    np.testing.assert_allclose(r.positions[0], p.point(r.indices[0]))


def test_facing_modes():
    p = straight(1.0)
    st = RevisionState(np.array([100]), np.zeros(1))
    joy = QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0, facing="joystick", joystick_deg=90.0))
    r = joy.revise(p.points[100], st)
    np.testing.assert_allclose(r.directions[0], np.tile([-1.0, 0.0, 0.0], (3, 1)), atol=1e-12)  # to the right
    r = joy.revise(p.points[100], st, joystick_deg=-180.0)  # plus the path's own timeline: -90 in all
    np.testing.assert_allclose(r.directions[0], np.tile([1.0, 0.0, 0.0], (3, 1)), atol=1e-12)
    net = QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0, facing="net"),
                       facing_track=lambda idx: np.stack([np.ones_like(idx), np.zeros_like(idx), -np.ones_like(idx)], -1))
    r = net.revise(p.points[100], st)
    np.testing.assert_allclose(r.directions[0], np.tile([math.sqrt(0.5), 0, -math.sqrt(0.5)], (3, 1)))
    with pytest.raises(ValueError, match="facing track"):
        QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0, facing="net")).revise(p.points[0], st)


def test_reviser_checks_its_settings():
    p = straight(1.0)
    with pytest.raises(ValueError, match="v_max"):
        QueryReviser(p, OFFSETS, RevisionSettings())
    with pytest.raises(ValueError, match="desired"):
        RevisionSettings(desired="closest")
    r = RevisionSettings.raw()
    assert r.desired == "current" and not r.speed_limit and not r.sharp_corners


def test_many_states_at_once_match_one_by_one():
    p = corner_path(speed=2.5)
    rv = QueryReviser(p, OFFSETS, RevisionSettings(v_max=2.0))
    rng = np.random.default_rng(1)
    i_prev = rng.integers(0, p.last, 12)
    pos = p.points[np.minimum(i_prev + rng.integers(0, 30, 12), p.last)] + rng.normal(0, 0.05, (12, 3)) * [1, 0, 1]
    st = RevisionState(i_prev, rng.uniform(0, 5, 12))
    r = rv.revise(pos, st)
    for m in range(12):
        one = rv.revise(pos[m], st.take([m]))
        np.testing.assert_allclose(one.positions[0], r.positions[m])
        np.testing.assert_allclose(one.directions[0], r.directions[m])
        assert one.i_d[0] == r.i_d[m]


def test_a_pause_in_the_drawing_lasts_as_long_as_drawn():
    """Where the path stands still, the desired position moves on with the drawn time
    (Eq. 1 alone would hold it at the pause's first point for ever)."""
    t = np.array([0.0, 3.0, 5.0, 8.0])
    xz = np.array([[0.0, 0.0], [0.0, 3.0], [0.0, 3.0], [0.0, 6.0]])  # 1 m/s, 2 s still, 1 m/s
    p = TimedPath.from_samples(t, xz, smooth=False)
    rv = QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0, min_pace=None, max_pace=None))  # Eq. 1 and the ties
    st = RevisionState(np.array([440]), np.zeros(1))
    at = p.points[450]
    frames = 0
    while True:
        r = rv.revise(at, st)
        if r.i_d[0] >= 750 or frames > 1000:
            break
        st = r.state.later(1 / 60)
        frames += 1
    assert abs(frames - 120) <= 2  # 2 s at 60 Hz standing at the pause point
    # the query meanwhile holds still, then leads on
    r = rv.revise(at, RevisionState(np.array([450]), np.zeros(1)))
    np.testing.assert_allclose(r.positions[0, 0], at)


# ------------------------------------------------------------- tight, fast and ragged paths
def arc_events(radius, degrees, speed, lead=2.0, tail=0.0, rate=150.0):
    """Events of a straight ``lead`` m along +Z, an arc of ``radius`` turning left by
    ``degrees``, then ``tail`` m straight on, drawn at a constant ``speed``."""
    a = np.radians(np.linspace(0.0, degrees, 200))
    arc = np.stack([radius - radius * np.cos(a), lead + radius * np.sin(a)], axis=1)
    end = arc[-1] + tail * np.array([np.sin(a[-1]), np.cos(a[-1])])
    return polyline_events(np.concatenate([[[0.0, 0.0]], arc, [end]]), speed, rate)


def slowing_events(seed=2, lift=0.01):
    """3 m along +Z at 1.5 m/s, slowing to a stop over the last 0.6 m, events every 16 ms
    with 3 mm of jitter and the last one ``lift`` m to the side (the pen leaving the pad)."""
    rng = np.random.default_rng(seed)
    h, t, d = 1e-3, [0.0], [0.0]
    while d[-1] < 3.0 - 1e-6:
        v = 1.5 * min(1.0, math.sqrt(max(3.0 - d[-1], 0.0) / 0.6))
        d.append(min(3.0, d[-1] + max(v, 1e-3) * h))
        t.append(t[-1] + h)
    ev = np.append(np.arange(0.0, t[-1], 0.016), t[-1])
    z = np.interp(ev, t, d) + rng.normal(0, 0.003, len(ev))
    x = rng.normal(0, 0.003, len(ev))
    x[-1] += lift
    return ev, np.stack([x, z], axis=1)


def test_a_slow_jittery_end_is_no_sharp_corner():
    """A hand that slows to a stop, jittering, and lifts the pen: the step tangents at
    the query's points turn by more than 80 degrees near the end (the paper's test would
    see a corner there), but no corner is reported and the query is not bent."""
    p = TimedPath.from_samples(*slowing_events())
    rv = QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0, sharp_corners=True))
    plain = QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0, sharp_corners=False))
    step_corners = 0
    for i in range(int(np.flatnonzero(p.arc > p.length - 1.5)[0]), p.last, 5):
        st = RevisionState(np.array([i]), np.zeros(1))
        r, r0 = rv.revise(p.points[i], st), plain.revise(p.points[i], st)
        tg = p.tangent(np.concatenate([r0.i_d, r0.indices[0]]))
        step_corners += bool(np.any(np.einsum("kc,kc->k", tg[:-1], tg[1:]) < math.cos(math.radians(80))))
        assert r.corner[0] == -1
        np.testing.assert_allclose(r.positions, r0.positions)
        assert r.i_d[0] == r0.i_d[0]
    assert step_corners > 5
    # a real corner is still one (see test_sharp_corner_moves_the_point_after_it_toward_the_corner)
    assert np.degrees(corner_path().bend.max()) == pytest.approx(90.0, abs=1.0)


def test_turn_limit_bunches_the_query_before_a_tight_turn():
    """A 180-degree turn of radius 0.4 m drawn at 4 m/s: with a 4 m/s^2 turn limit the
    query asks for about sqrt(4 / 2.5) = 1.26 m/s in the turn, and the points before
    it bunch up; on the straight, far from the turn, the drawn speed stands."""
    t, xz = arc_events(0.4, 180.0, 4.0, lead=6.0, tail=6.0)
    p = TimedPath.from_samples(t, xz, smooth=False)
    rv = QueryReviser(p, OFFSETS, RevisionSettings(v_max=5.0, turn_accel=4.0, sharp_corners=False))
    free = QueryReviser(p, OFFSETS, RevisionSettings(v_max=5.0, sharp_corners=False))  # no turn_accel: no limit
    in_turn = (p.arc > 6.2) & (p.arc < 6.9)
    np.testing.assert_allclose(np.median(rv.limits[in_turn]), math.sqrt(4.0 / 2.5), rtol=0.1)
    st = RevisionState(np.array([0]), np.zeros(1))
    r = rv.revise(p.points[0], st)  # the turn is 1.5 s away: the query is the drawn path
    np.testing.assert_allclose(r.indices, free.revise(p.points[0], st).indices)
    i = int(np.flatnonzero(p.arc >= 5.5)[0])  # 0.5 m before the turn
    st = RevisionState(np.array([i]), np.zeros(1))
    r, r0 = rv.revise(p.points[i], st), free.revise(p.points[i], st)
    ahead, ahead0 = p.arc[np.rint(r.indices[0]).astype(int)] - p.arc[i], p.arc[np.rint(r0.indices[0]).astype(int)] - p.arc[i]
    np.testing.assert_allclose(ahead0, 4.0 * np.array(OFFSETS), rtol=0.02)
    assert ahead[-1] < 0.5 * ahead0[-1]  # a second ahead reaches less than half as far
    assert np.all(np.diff(ahead) > 0)
    assert np.linalg.norm(r.velocities[0, -1]) < 2.0


def test_smoothing_blur_is_capped_where_the_path_is_fast():
    """The paper's filter (sigma 0.1 s) rounds a turn of radius 0.4 m drawn at 4 m/s
    far off the drawing; capped at MAX_BLUR it stays close. A slow path is smoothed as
    the paper does."""
    from motionmatch.geometry.polyline import distance_to_path

    t, xz = arc_events(0.4, 150.0, 4.0)
    capped, paper = TimedPath.from_samples(t, xz), TimedPath.from_samples(t, xz, max_blur=None)
    off = [distance_to_path(q.points, q.input_points).max() for q in (capped, paper)]
    assert off[0] < 0.5 * off[1]
    t, xz = arc_events(0.8, 150.0, 0.5)
    np.testing.assert_allclose(TimedPath.from_samples(t, xz).points,
                               TimedPath.from_samples(t, xz, max_blur=None).points, atol=1e-9)


def test_braking_profile_slows_down_ahead_of_a_slow_stretch_and_speeds_up_after():
    """A 1 m/s limit at 5 m of a 10 m path, 3 m/s elsewhere, braking at 2 m/s^2: the
    speed d metres away is sqrt(1 + 4 d) up to 3 m/s (2 m away), on both sides."""
    arc = np.linspace(0.0, 10.0, 1001)
    lim = np.full(len(arc), 3.0)
    lim[500] = 1.0
    v = braking_profile(lim, arc, 2.0)
    d = np.abs(arc - 5.0)
    np.testing.assert_allclose(v, np.minimum(3.0, np.sqrt(1.0 + 4.0 * d)), atol=1e-9)
    assert np.all(v <= lim)
    inf = braking_profile(np.full(5, np.inf), np.arange(5.0), 2.0)
    assert np.all(np.isinf(inf))


def test_a_turn_is_braked_for_before_it_and_the_desired_position_keeps_pace():
    """With brake_accel the query slows down ahead of a tight turn (the future points
    bunch up earlier than with the turn limit alone); with max_pace the desired position
    of a character that cut inside the turn stays near the apex instead of jumping to the
    nearest point past it."""
    t, xz = arc_events(0.4, 180.0, 4.0, lead=6.0, tail=6.0)
    p = TimedPath.from_samples(t, xz, smooth=False)
    plain = QueryReviser(p, OFFSETS, RevisionSettings(v_max=5.0, turn_accel=3.0, sharp_corners=False))
    braked = QueryReviser(p, OFFSETS, RevisionSettings(v_max=5.0, turn_accel=3.0, brake_accel=2.5, min_pace=None,
                                                       max_pace=None, sharp_corners=False))
    i = int(np.flatnonzero(p.arc >= 4.5)[0])  # 1.5 m before the turn
    assert plain.limits[i] == pytest.approx(5.0)
    assert braked.limits[i] == pytest.approx(math.sqrt(3.0 * 0.4 + 2 * 2.5 * 1.5), rel=0.05)
    st = RevisionState(np.array([i]), np.zeros(1))
    assert braked.revise(p.points[i], st).indices[0, -1] < plain.revise(p.points[i], st).indices[0, -1]
    # a character at the turn's centre, 1/6 s after a query at its entry
    entry = int(np.flatnonzero(p.arc >= 6.0)[0])
    centre = np.array([0.4, 0.0, 6.0])
    st = RevisionState(np.array([entry]), np.full(1, 1 / 6), t_prev=np.zeros(1))
    free = braked.revise(centre, st).i_d[0]
    paced = QueryReviser(p, OFFSETS, RevisionSettings(v_max=5.0, turn_accel=3.0, brake_accel=2.5, max_pace=1.25,
                                                      sharp_corners=False))
    held = paced.revise(centre, st).i_d[0]
    assert paced.time_to_run(held) - paced.time_to_run(entry) <= 1.25 / 6 + 1e-6
    assert p.arc[held] < p.arc[free]


def test_the_pace_bounds_let_a_query_revised_every_frame_move_on():
    """Revised every 1/60 s on a tight turn the limits slow to a walk (samples further
    apart in limited time than a frame), the desired position still moves on with a
    character walking the path, at no more than the next sample per frame."""
    t, xz = arc_events(0.4, 180.0, 4.0, lead=1.0, tail=1.0)
    p = TimedPath.from_samples(t, xz, smooth=False)
    rv = QueryReviser(p, OFFSETS, RevisionSettings(v_max=3.0, turn_accel=1.8, brake_accel=1.5))
    i = int(np.flatnonzero(p.arc >= 1.0)[0])  # the turn's entry
    st = RevisionState(np.array([i]), np.zeros(1))
    seen = [i]
    for _ in range(60):
        r = rv.revise(p.points[min(seen[-1] + 1, p.last)], st)  # the character a step ahead
        seen.append(int(r.i_d[0]))
        st = r.state.later(1 / 60)
    steps = np.diff(seen)
    assert seen[-1] - seen[0] >= 30 and steps.min() >= 0 and steps.max() <= 1, steps


@given(st.lists(st.floats(0.001, 5.0), min_size=1, max_size=40), st.lists(st.floats(-2.0, 60.0), min_size=1, max_size=30))
@settings(max_examples=200, deadline=None)
def test_the_compiled_interpolation_is_numpys_to_the_bit(steps, xs):
    """The revision kernels' sample lookup equals ``numpy.interp`` exactly (the followers'
    frames depend on it), inside, outside and on the samples."""
    from motionmatch.control._revision_kernels import interp_index

    tau = np.concatenate([[0.0], np.cumsum(steps)])
    xs = np.concatenate([xs, tau[:3], [tau[-1]]])
    want = np.interp(xs, tau, np.arange(len(tau), dtype=np.float64))
    got = np.array([interp_index(float(x), tau) for x in xs])
    np.testing.assert_array_equal(got, want)
