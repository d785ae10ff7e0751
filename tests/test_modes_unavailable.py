"""A database with no standing clip holds a pose when idle (issue 32, part 2), and a mode
the database cannot play says why once, whichever input asks: a script's keys, a
keyboard, pose commands."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from motionmatch.control.keyboard import KeyboardController
from motionmatch.control.pose.commands import CommandMapper
from motionmatch.control.script import load_script
from motionmatch.database import MotionDatabase
from motionmatch.errors import ModeWarning
from motionmatch.runtime.controller import Controller, ControllerSettings
from motionmatch.runtime.offline import run_input, run_script
from motionmatch.runtime.pose_run import CommandInput
from rigs import lafan_clip


@pytest.fixture
def walk_db(data_dir):
    """400 frames of walking: no standing stretch, no jump, dance or crawl (a new database
    for each test: a refusal is said once per database)."""
    return MotionDatabase.build([lafan_clip(data_dir, 400)])


def _said(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [str(w.message) for w in got if issubclass(w.category, ModeWarning)]


def test_idle_holds_a_pose_and_every_mode_says_why(walk_db, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"duration": 7.0, "events": [
        {"t": 0.0, "keys": ["w"]}, {"t": 2.0, "keys": []}, {"t": 4.0, "keys": ["j"]}, {"t": 4.5, "keys": ["p"]},
        {"t": 5.0, "keys": ["c"]}, {"t": 5.2, "keys": ["f"]}, {"t": 5.5, "keys": ["w"]}]}))
    rec, said = _said(run_script, walk_db, load_script(script), ControllerSettings(), fps=60)
    assert sorted(s.split(":")[0] for s in said) == ["creep", "dance", "idle", "jump", "punch"]  # each once
    assert all("\n" not in s and "this database has no" in s for s in said)
    root = rec.motion.world_positions[:, 0, [0, 2]]
    speed = np.linalg.norm(np.diff(root, axis=0), axis=1) * 60
    assert speed[60:110].mean() > 1.0  # walking
    assert speed[180:235].mean() < 0.02  # idle: holds its pose (it drifted at 0.29 m/s)
    assert speed[345:].mean() > 0.8  # and walks again


def test_keys_and_pose_commands_say_why_too(walk_db):
    ctrl = Controller(walk_db)
    kb = KeyboardController(gaits=ctrl.gaits)
    ctrl.reset()
    said = []
    for _ in range(30):
        _, s = _said(lambda: ctrl.update(1 / 60, kb.update({"w", "j"}, 1 / 60)))
        said += s
    assert [s.split(":")[0] for s in said] == ["jump"] and ctrl.refused.keys() == {"jump"}
    commands = np.array(["walk_forward"] * 30 + ["dance"] * 30)
    _rec, said = _said(run_input, walk_db, lambda agent: CommandInput(commands, CommandMapper(agent.ctrl.gaits)), 60)
    assert [s.split(":")[0] for s in said] == ["dance", "idle"]  # a dance asked standing still: it holds
    # a second character on the same database: noted, not said again
    other = Controller(walk_db)
    other.reset()
    _, again = _said(lambda: [other.update(1 / 60, kb.update({"w", "j"}, 1 / 60)) for _ in range(10)])
    assert again == [] and other.refused.keys() == {"jump"}
