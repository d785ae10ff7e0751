"""The controller's compiled per-frame path against the plain numpy reference.

:class:`~oracles.controller.ReferenceController` (``tests/oracles``) runs the same decisions with
the straightforward array formulation of every per-frame stage (root motion, root
adjustment, springs, query, inertialization, foot-locking IK); both must play the same
poses up to rounding over hundreds of frames, with transitions and foot locks happening.
Also: the public search phase and the ``search_forced`` flag a chooser can read.
"""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.control.intent import Intent
from motionmatch.control.script import parse_script
from motionmatch.control.trajectory import TrajectoryPredictor, predict_trajectory
from motionmatch.database import MotionDatabase
from motionmatch.runtime.controller import Controller, ControllerSettings
from motionmatch.runtime.inertialize import Inertializer
from oracles.controller import ReferenceController
from oracles.inertialize import update_reference
from oracles.trajectory import advance_reference
from synthetic import walker

TOL = 1e-9  # metres / quaternion components; observed differences are ~1e-13

SCRIPT = {
    "duration": 12.0,
    "events": [
        {"t": 0.0, "keys": ["w"]}, {"t": 2.0, "keys": ["d"]}, {"t": 3.5, "keys": ["a"]},
        {"t": 5.0, "keys": ["w", "shift"]}, {"t": 7.0, "keys": []}, {"t": 8.5, "keys": ["s"]},
        {"t": 10.0, "keys": ["w", "a"]},
    ],
}


def _compare(db, settings, dts, intents):
    """Run both controllers on the same inputs; returns the largest pose difference and
    counts of searches, transitions and locked-foot frames (of the fast one)."""
    fast, ref = Controller(db, settings), ReferenceController(db, settings)
    worst = 0.0
    searches = transitions = locked = 0
    for dt, intent in zip(dts, intents):
        a, b = fast.update(dt, intent), ref.update(dt, intent)
        assert (a.frame, a.mode, a.searched, a.transitioned) == (b.frame, b.mode, b.searched, b.transitioned)
        np.testing.assert_array_equal(a.contacts, b.contacts)
        worst = max(worst, float(np.abs(a.rotations - b.rotations).max()),
                    float(np.abs(a.translations - b.translations).max()))
        searches += a.searched
        transitions += a.transitioned
        locked += bool(a.contacts.any())
    assert abs(fast.root_yaw - ref.root_yaw) < TOL
    np.testing.assert_allclose(fast.root_pos, ref.root_pos, atol=TOL)
    np.testing.assert_allclose(fast.predictor.state.position, ref.predictor.state.position, atol=TOL)
    return worst, searches, transitions, locked


@pytest.fixture(scope="module")
def lafan(data_dir):
    names = ("walk1_subject1_walk2", "multipleActions1_subject1_run", "ground2_subject3_turn",
             "pushAndFall1_subject4_stand", "ground1_subject4_backward")
    paths = [data_dir / "lafan1-60fps" / f"{n}.bvh" for n in names]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        pytest.skip(f"LAFAN1 clips missing: {missing}")
    return MotionDatabase.build([load_bvh(p) for p in paths], mirror_copies=True)


@pytest.mark.parametrize("inertialization", ["quintic", "spring", "none"])
def test_fast_path_matches_reference_on_lafan(lafan, inertialization):
    settings = ControllerSettings(inertialization=inertialization)
    script = parse_script(SCRIPT)
    dt = 1 / 60
    n = script.frame_count(dt)
    kb = script.keyboard(gaits=Controller(lafan, settings).gaits)
    intents = [it for _, (_, it) in zip(range(n), script.intents(dt, keyboard=kb))]
    worst, searches, transitions, locked = _compare(lafan, settings, [0.0] + [dt] * (n - 1), intents)
    assert n == 720 and worst < TOL
    # the comparison exercised what was optimised: searches, transitions, foot locks
    assert searches > 50 and transitions > 5 and locked > 100


def test_fast_path_matches_reference_at_irregular_rates(lafan):
    """Frame times from 0 to 1/20 s (with repeated zero steps) and changing intents."""
    rng = np.random.default_rng(3)
    n = 400
    dts = rng.choice([0.0, 1 / 144, 1 / 60, 1 / 30, 1 / 20], size=n, p=[0.05, 0.25, 0.4, 0.2, 0.1])
    intents, it = [], Intent.idle()
    for i in range(n):
        if i % 40 == 0:
            v = rng.normal(size=3) * 1.5
            v[1] = 0.0
            face = None if rng.random() < 0.7 else np.array([rng.normal(), 0.0, rng.normal()])
            it = Intent(velocity=v, facing=face, gait="run" if np.hypot(v[0], v[2]) > 2 else "walk")
        intents.append(it)
    worst, searches, transitions, _ = _compare(lafan, ControllerSettings(), dts, intents)
    assert worst < TOL and searches > 20 and transitions > 3


def test_fast_path_matches_reference_with_desired_override():
    """The path-following use: a desired trajectory replaces the spring prediction."""
    clips = [walker(n=240, speed=s, heading=h, name=f"walk_{i}", turn_rate=r)
             for i, (s, h, r) in enumerate([(1.0, 0.0, 0.0), (1.0, 0.0, 1.2), (1.0, 0.0, -1.2), (0.0, 0.0, 0.0)])]
    db = MotionDatabase.build(clips, mirror_copies=False)
    times = np.asarray(db.schema.trajectory_offsets)
    fast, ref = Controller(db), ReferenceController(db)
    intent = Intent(velocity=[1.0, 0, 0], gait="walk")
    from motionmatch.control.trajectory import PredictedTrajectory

    dirs = np.tile([1.0, 0.0, 0.0], (len(times), 1))
    rots = np.tile([np.cos(np.pi / 4), 0.0, np.sin(np.pi / 4), 0.0], (len(times), 1))
    for _ in range(300):
        out = []
        for c in (fast, ref):
            pos = c.root_pos + np.stack([times, 0 * times, 0.3 * times], axis=1)
            out.append(c.update(1 / 60, intent, desired=PredictedTrajectory(times, pos, dirs, dirs, rots)))
        a, b = out
        assert (a.frame, a.searched, a.transitioned) == (b.frame, b.searched, b.transitioned)
        assert np.abs(a.rotations - b.rotations).max() < TOL and np.abs(a.translations - b.translations).max() < TOL


def test_predictor_fast_paths_match_array_springs():
    rng = np.random.default_rng(0)
    fast, ref = TrajectoryPredictor(velocity_halflife=0.2, facing_halflife=0.25), TrajectoryPredictor(
        velocity_halflife=0.2, facing_halflife=0.25)
    for i in range(600):
        if i % 30 == 0:
            v = rng.normal(size=3) * 2
            v[1] = 0.0
            if rng.random() < 0.2:
                v[:] = 0.0
            face = None if rng.random() < 0.6 else np.array([rng.normal(), 0.0, rng.normal()])
            intent = Intent(velocity=v, facing=face, gait="walk")
        a, b = fast.advance(1 / 60, intent), advance_reference(ref, 1 / 60, intent)
        for name in ("position", "velocity", "acceleration", "rotation", "angular_velocity"):
            np.testing.assert_allclose(getattr(a, name), getattr(b, name), atol=1e-10)
        assert abs(a.yaw - b.yaw) < 1e-10
        p, q = fast.predict(intent), predict_trajectory(b, intent, ref.times, velocity_halflife=0.2,
                                                         facing_halflife=0.25)
        for name in ("positions", "velocities", "directions", "rotations"):
            np.testing.assert_allclose(getattr(p, name), getattr(q, name), atol=1e-10)


def test_inertializer_kernel_matches_numpy():
    rng = np.random.default_rng(1)
    J = 7
    rot = rng.normal(size=(2, J, 4))
    rot /= np.linalg.norm(rot, axis=-1, keepdims=True)
    pos = rng.normal(size=(2, J, 3))
    vel = 0.3 * rng.normal(size=(4, J, 3))
    a, b = Inertializer(J, "quintic", 0.3), Inertializer(J, "quintic", 0.3)
    for inert in (a, b):
        inert.transition(rot[0], vel[0], rot[1], vel[1], pos[0], vel[2], pos[1], vel[3])
    seen = 0.0
    for _ in range(30):
        a.update(1 / 60)
        update_reference(b, 1 / 60)
        np.testing.assert_allclose(a.rot_offset, b.rot_offset, atol=1e-12)
        np.testing.assert_allclose(a.pos_offset, b.pos_offset, atol=1e-12)
        seen = max(seen, float(np.abs(a.pos_offset).max()), float(np.abs(a.rot_offset[:, 1:]).max()))
    assert seen > 0.1  # the offsets compared were blending, not zeros
    np.testing.assert_allclose(a.pos_offset, 0.0, atol=1e-12)  # and reached rest within the blend time


def test_search_phase_is_public_and_staggers():
    db = MotionDatabase.build([walker(n=240, speed=1.0), walker(n=240, speed=0.0, name="idle")], mirror_copies=False)
    ctrl = Controller(db, ControllerSettings(search_interval=0.1))
    assert ctrl.since_search == np.inf
    intent = Intent(velocity=[0, 0, 1.0], gait="walk")
    assert ctrl.update(1 / 60, intent).searched  # first update: the phase is inf
    assert ctrl.since_search == 0.0
    ctrl.since_search = -5 / 60  # delay the next periodic search by 5 frames
    assert ctrl._since_search == -5 / 60  # the private name world.py writes stays the same state
    searched = [ctrl.update(1 / 60, intent).searched for _ in range(12)]
    # 5 frames of delay, then the 0.1 s interval: the 11th update (12th when the sum of
    # sixtieths rounds just below 0.1)
    assert searched.index(True) in (10, 11)
    for bad in (float("nan"), -np.inf):
        with pytest.raises(ValueError, match="since_search"):
            ctrl.since_search = bad


def test_chooser_sees_whether_the_search_is_forced():
    db = MotionDatabase.build([walker(n=240, speed=1.0), walker(n=240, speed=0.0, name="idle")], mirror_copies=False)
    ctrl = Controller(db)
    seen = []

    def chooser(c, q, mask, view):
        seen.append(c.search_forced)
        return c.searcher().nearest(q, mask=mask, k=1, weights=c.view_weights(view))

    ctrl.chooser = chooser
    intent = Intent(velocity=[0, 0, 1.0], gait="walk")
    for _ in range(30):
        ctrl.update(1 / 60, intent)
    assert seen and not all(seen)  # periodic searches are not forced
    n = len(seen)
    ctrl.update(1 / 60, intent, force_search=True)  # asks for a search, not a forced transition
    assert len(seen) == n + 1 and seen[-1] is False
    for _ in range(120):  # stop: entering idle (once the simulated root slows down) forces the transition
        n = len(seen)
        r = ctrl.update(1 / 60, Intent.idle())
        if r.mode == "idle":
            break
    assert r.mode == "idle" and r.searched and len(seen) == n + 1 and seen[-1] is True and r.transitioned


def test_sharp_change_test_matches_intent_method():
    db = MotionDatabase.build([walker(n=240, speed=1.0), walker(n=240, speed=0.0, name="idle")], mirror_copies=False)
    ctrl = Controller(db, ControllerSettings(sharp_turn_deg=30.0))
    rng = np.random.default_rng(5)

    def random_intent():
        v = rng.normal(size=3) * rng.choice([0.0, 0.02, 1.0, 2.5])
        v[1] = 0.0
        face = None if rng.random() < 0.5 else np.array([rng.normal(), 0.0, rng.normal()])
        return Intent(velocity=v, facing=face, gait=str(rng.choice(["walk", "run"])),
                      actions=frozenset(["creep"]) if rng.random() < 0.1 else frozenset())

    both = 0
    for _ in range(2000):
        a = random_intent()
        if rng.random() < 0.5:  # a small change of the same intent
            face = None if a.facing is None else np.array(a.facing) + rng.normal(size=3) * [0.5, 0, 0.5]
            b = Intent(velocity=a.velocity + rng.normal(size=3) * [0.6, 0, 0.6], facing=face, gait=a.gait,
                       actions=a.actions)
        else:
            b = random_intent()
        want = a.changed_sharply(b, 30.0)
        assert ctrl._changed_sharply(a, b) == want
        both += want
    assert 200 < both < 1800  # both outcomes were exercised


def test_last_intent_kept_in_the_row_compares_as_the_original():
    """A plain last intent lives in the batch row (goal, gait) and comes back equal in every
    number the sharp-change test reads; an intent with actions is kept as it is."""
    db = MotionDatabase.build([walker(n=240, speed=1.0), walker(n=240, speed=0.0, name="idle")], mirror_copies=False)
    ctrl = Controller(db, ControllerSettings(adjust_halflife=0.0))
    assert ctrl._last_intent is None
    strafe = Intent(velocity=[0.3, 0.0, 1.2], facing=[1.0, 0.0, 0.2], gait="walk")
    ctrl._last_intent = strafe
    back = ctrl._last_intent
    assert back == strafe and back is not strafe
    assert ctrl.batch.state.last_kind[ctrl.row] == 1  # (LAST_PLAIN: in the row's columns)
    jumping = Intent(velocity=[0.0, 0.0, 1.0], gait="walk", actions={"jump"})
    ctrl._last_intent = jumping
    assert ctrl._last_intent is jumping
    ctrl.update(1 / 60, strafe)
    assert ctrl._last_intent == strafe
    # a small change with no search due only coasts: the compiled stage decides it (no
    # call of _decide) and keeps the row's last intent
    decided = []
    python_decide = ctrl._decide
    ctrl._decide = lambda *a, **kw: decided.append(a) or python_decide(*a, **kw)
    ctrl.since_search = 0.0
    turned = Intent(velocity=[0.31, 0.0, 1.2], facing=[1.0, 0.0, 0.21], gait="walk")
    r = ctrl.update(1 / 60, turned)
    assert not r.searched and not decided and ctrl._last_intent == turned
    r = ctrl.update(1 / 60, Intent(velocity=[-1.2, 0.0, 0.3], facing=[1.0, 0.0, 0.21], gait="walk"))
    assert r.searched and len(decided) == 1  # a sharp turn: decided in Python, a search at once
