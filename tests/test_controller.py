"""The controller on synthetic databases: playback, search policy, frame-rate independence."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.control.intent import Intent
from motionmatch.database import MotionDatabase
from motionmatch.runtime.controller import Controller, ControllerSettings
from synthetic import walker


@pytest.fixture(scope="module")
def db():
    clips = [walker(n=240, speed=s, heading=h, name=f"walk_{i}", turn_rate=r)
             for i, (s, h, r) in enumerate([(1.0, 0.0, 0.0), (1.0, 0.0, 1.2), (1.0, 0.0, -1.2), (0.0, 0.0, 0.0),
                                            (3.0, 0.0, 0.0), (1.0, np.pi, 0.0)])]
    clips[3].tags = ("idle",)
    clips += [walker(n=120, speed=1.0, end_speed=0.0, name="stop"), walker(n=120, speed=0.0, end_speed=1.0, name="start")]
    return MotionDatabase.build(clips, mirror_copies=False)


def drive(ctrl, intent, seconds, dt=1 / 60):
    out = []
    for _ in range(round(seconds / dt)):
        out.append(ctrl.update(dt, intent))
    return out


def test_playback_follows_root_motion(db):
    """Without searches the character moves exactly as the clip's root does."""
    ctrl = Controller(db, ControllerSettings(search_interval=1e9, foot_locking=False, adjust_halflife=0),
                      start_frame=0)
    ctrl._since_search = 0.0  # no initial search either
    before = ctrl.root_pos.copy()
    for _ in range(60):
        r = ctrl.update(1 / 60, Intent(velocity=[0, 0, 1.0], gait="walk"))
    assert ctrl.frame == 60 and not r.searched
    # clip 0 moves at 1 m/s along +Z: one second of playback moves the character 1 m
    np.testing.assert_allclose(ctrl.root_pos - before, [0, 0, 1.0], atol=1e-6)
    assert r.rotations.shape == (db.skeleton.num_joints, 4)


def test_walks_where_asked_and_stops(db):
    ctrl = Controller(db)
    res = drive(ctrl, Intent(velocity=[-1.0, 0, 0], gait="walk"), 3.0)
    p = np.array([r.translations[0] for r in res])
    v = (p[-1] - p[-31]) / 0.5
    assert v[0] < -0.7 and abs(v[2]) < 0.3  # walking toward -X
    res = drive(ctrl, Intent.idle(), 3.0)
    p = np.array([r.translations[0] for r in res])
    assert np.linalg.norm(p[-1] - p[-31]) / 0.5 < 0.2
    assert res[-1].mode == "idle"


def test_searches_on_interval_and_on_sharp_changes(db):
    ctrl = Controller(db, ControllerSettings(search_interval=0.25))
    fwd = Intent(velocity=[0, 0, 1.0], gait="walk")
    res = drive(ctrl, fwd, 2.0)
    searches = sum(r.searched for r in res)
    assert 7 <= searches <= 10  # every 0.25 s (plus the first)
    ctrl._since_search = 0.0
    r = ctrl.update(1 / 60, Intent(velocity=[1.0, 0, 0], gait="walk"))  # 90 degree change
    assert r.searched


def test_search_interval_counts_frames_exactly(db):
    """0.1 s at 60 Hz is every 6th frame (summing 1/60 six times gives 0.0999...; that
    must not delay the search to the 7th frame)."""
    ctrl = Controller(db, ControllerSettings(search_interval=0.1))
    fwd = Intent(velocity=[0, 0, 1.0], gait="walk")
    res = drive(ctrl, fwd, 0.5)  # first update searches; settle
    res = drive(ctrl, fwd, 3.0)
    frames = [i for i, r in enumerate(res) if r.searched]
    gaps = np.diff(frames)
    assert np.median(gaps) == 6, gaps


def test_prefers_continuing_the_current_clip(db):
    ctrl = Controller(db)
    res = drive(ctrl, Intent(velocity=[0, 0, 1.0], gait="walk"), 3.0)
    # straight walking along the straight clip: after settling, no more transitions
    assert sum(r.transitioned for r in res[60:]) <= 1


def test_frame_rate_independent(db):
    paths = []
    for fps in (30, 60, 120):
        ctrl = Controller(db)
        drive(ctrl, Intent(velocity=[0, 0, 1.0], gait="walk"), 1.0, 1 / fps)
        res = drive(ctrl, Intent(velocity=[1.0, 0, 0], gait="walk"), 2.0, 1 / fps)
        paths.append(res[-1].translations[0])
    paths = np.array(paths)
    assert np.abs(paths - paths[1]).max() < 0.35


def test_bad_dt_is_refused(db):
    ctrl = Controller(db)
    with pytest.raises(ValueError, match="dt"):
        ctrl.update(float("nan"), Intent.idle())


def test_desired_trajectory_override_and_custom_chooser(db):
    from motionmatch.control.trajectory import PredictedTrajectory

    ctrl = Controller(db)
    times = np.asarray(db.schema.trajectory_offsets)
    # ask, through an explicit trajectory, for walking toward +X while the intent says nothing
    pos = np.stack([times * 1.0, np.zeros_like(times), np.zeros_like(times)], axis=1)
    dirs = np.tile([1.0, 0.0, 0.0], (len(times), 1))
    from motionmatch.anim import quat

    rots = quat.from_angle_y(np.full(len(times), np.pi / 2))
    want = PredictedTrajectory(times, pos, np.tile([1.0, 0, 0], (len(times), 1)), dirs, rots)
    calls = []

    def chooser(c, q, mask, view):
        calls.append(q.shape)
        return c.searcher().nearest(q, mask=mask, k=1, weights=c.view_weights(view))

    ctrl.chooser = chooser
    intent = Intent(velocity=[1.0, 0, 0], gait="walk")
    for _ in range(120):
        def shifted(c=ctrl):
            return PredictedTrajectory(times, c.root_pos + pos, want.velocities, dirs, rots)
        r = ctrl.update(1 / 60, intent, desired=shifted())
    assert calls and all(s == (db.schema.dims,) for s in calls)
    assert r.desired is not None and np.allclose(r.desired.directions, dirs)
    with pytest.raises(ValueError, match="samples"):
        ctrl.update(1 / 60, intent, desired=PredictedTrajectory(times[:1], pos[:1], pos[:1], dirs[:1], rots[:1]))
