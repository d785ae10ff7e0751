"""The core's special cases (issue 17): the idle clip chosen from the data and played
still, the paper's vertical jump spring fitted to the data, and the search weights
written as text (``--weights``). Small synthetic databases, known answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from motionmatch.anim import quat
from motionmatch.cli.main import main
from motionmatch.control.intent import Intent
from motionmatch.database import MotionDatabase, SearchWeights, WeightsError, default_schema
from motionmatch.runtime.controller import Controller
from motionmatch.runtime.modes import JumpSpring, fit_jump_spring, idle_clip
from synthetic import walker


def _posed(name: str, head: np.ndarray | None = None, n: int = 300):
    """A standing synthetic biped whose head joint turns by ``head [n]`` radians about X."""
    m = walker(n=n, speed=0.0, name=name, tags=("stand",))
    if head is not None:
        h = m.skeleton.index("Head")
        m.rotations[:, h] = quat.from_axis_angle(np.array([1.0, 0.0, 0.0]), head)
    return m


@pytest.fixture(scope="module")
def db():
    t = np.arange(300) / 60
    clips = [walker(n=240, speed=1.2, name="walk"), _posed("still_a"), _posed("still_b"),
             _posed("bent", head=np.full(300, 1.4)),                # an odd pose, held still
             _posed("nodding", head=0.5 * np.sin(2 * np.pi * t))]   # a typical pose, moving
    return MotionDatabase.build(clips)


def test_idle_clip_is_the_stillest_typical_standing_stretch(db):
    clip = idle_clip(db, seconds=3.0)
    assert clip is not None and clip.frames == 180
    assert db.clip_names[db.frame_clip[clip.start]] in ("still_a", "still_b")
    assert db.frame_clip[clip.stop - 1] == db.frame_clip[clip.start]
    # entries: its first second (each entry plays >= 2 s before it turns), valid frames
    entries = np.flatnonzero(clip.entries)
    assert entries[0] == clip.start and entries[-1] == clip.start + 59 and db.valid[entries].all()
    # without a standing stretch there is none (idle then keeps matching)
    walking = MotionDatabase.build([walker(n=240, speed=1.2, name="walk")])
    assert idle_clip(walking) is None
    assert idle_clip(db, seconds=0.0) is None


def test_idle_plays_the_clip_forward_and_back_without_searching(db):
    ctrl = Controller(db)
    clip = ctrl.idle_clip()
    r = ctrl.update(1 / 60, Intent.idle())
    assert r.mode == "idle" and clip.start <= r.frame < clip.stop  # a new character enters it at once
    ctrl = Controller(db, start_frame=0)  # walking
    assert ctrl.mode == "locomotion"
    results = [ctrl.update(1 / 60, Intent.idle()) for _ in range(600)]
    idle = [r for r in results if r.mode == "idle"]
    assert len(idle) > 500
    assert sum(r.transitioned for r in idle) == 1 and sum(r.searched for r in idle) == 1  # entering only
    frames = np.array([r.frame for r in idle])
    assert ((frames >= clip.start) & (frames < clip.stop)).all()
    steps = np.diff(frames)
    assert (steps > 0).any() and (steps < 0).any()  # forward and back: a turn, not a loop's jump
    assert np.abs(steps).max() <= 1
    # moving again leaves idle at once (a forced search)
    r = ctrl.update(1 / 60, Intent(velocity=[0, 0, 1.2], gait="walk"))
    assert r.mode == "locomotion" and r.searched and r.transitioned


def test_jump_spring_known_answers():
    s = JumpSpring(v_up=2.0, halflife=0.3)
    rise, v = s.state_after(np.array([0.0, 0.3, 2.0]))
    assert rise[0] == 0 and v[0] == pytest.approx(2.0)
    assert rise[1] == pytest.approx(0.565 * 2.0 * 0.3, rel=2e-3) and abs(v[1]) < 1e-9  # the apex, at the half-life
    assert rise[2] == 0 and v[2] == 0  # landed
    assert 0.3 < s.landing_time < 1.2
    # the fit recovers a spring from its own curve, and says how much a curve it cannot be leaves
    t = np.arange(31) / 60
    h, vel = JumpSpring(1.5, 0.25).state_after(t)
    fit, unexplained = fit_jump_spring(t, h, vel)
    assert (fit.v_up, fit.halflife) == (pytest.approx(1.5), pytest.approx(0.25)) and unexplained < 1e-6
    _, bad = fit_jump_spring(t, -h, -vel)
    assert bad > 0.9


def test_weight_specs():
    schema = default_schema()
    paper = SearchWeights.parse("responsiveness=0.8,continuity=0.2", schema)
    assert (paper.responsiveness, paper.continuity) == (0.8, 0.2)
    assert set(paper.group_weights.values()) == {1.0}  # Eq. 13: no per-group weights
    assert SearchWeights.parse("paper", schema) == paper
    w = SearchWeights.parse(" paper , trajectory_direction=1.5", schema)
    assert w.group_weights["trajectory_direction"] == 1.5 and w.responsiveness == 0.8
    assert SearchWeights.parse("unit", schema) == SearchWeights({t.name: 1.0 for t in schema.terms})
    for bad, says in [("", "empty"), ("speed=2", "'speed'"), ("responsiveness", "name=value"),
                      ("continuity=-1", ">= 0"), ("continuity=nan", ">= 0"), ("foot_position=x", ">= 0")]:
        with pytest.raises(WeightsError, match=says) as e:
            SearchWeights.parse(bad, schema)
        assert "\n" not in str(e.value)


def test_weights_on_the_command_line(db, tmp_path, capsys):
    """``--weights`` on ``build`` is saved with the database, on ``run`` it replaces the
    database's for the run; a bad spec is one line and leaves no file."""
    from motionmatch.anim import save_bvh

    bvh = save_bvh(walker(n=120, speed=1.0), tmp_path / "walk.bvh")
    out = tmp_path / "db.npz"
    assert main(["build", str(bvh), "-o", str(out), "--weights", "responsiveness=0.8,continuity=0.2", "-q"]) == 0
    built = MotionDatabase.load(out)
    assert (built.responsiveness, built.continuity) == (0.8, 0.2)
    assert set(built.group_weights.values()) == {1.0}
    traj = built.schema.slice("trajectory_position")
    # the trajectory's share of a squared distance is 0.8 over the unit weight's
    np.testing.assert_allclose(built.weights[traj], np.sqrt(0.8))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"duration": 0.5, "events": [{"t": 0, "keys": ["w"]}]}))
    ok = main(["run", "--db", str(out), "--input", str(script), "-o", str(tmp_path / "o.bvh"), "--weights", "unit"])
    assert ok == 0 and (tmp_path / "o.bvh").exists()
    capsys.readouterr()
    for cmd in (["build", str(bvh), "-o", str(tmp_path / "x.npz")],
                ["run", "--db", str(out), "--input", str(script), "-o", str(tmp_path / "x.bvh")]):
        assert main([*cmd, "--weights", "responsiveness=0.8,speed=1"]) == 1
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "'speed'" in err and "responsiveness" in err
    assert not (tmp_path / "x.npz").exists() and not (tmp_path / "x.bvh").exists()
