"""The pose reselect history (``ControllerSettings.reselect_history``): the plain search
does not jump back a moment within the clip it plays (a replay), so a character held on W
walks instead of looping a fraction of a second of a slow start."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.control.script import parse_script
from motionmatch.runtime.controller import ControllerSettings
from motionmatch.runtime.offline import run_script

HOLD_W = {"duration": 8.0, "events": [{"t": 0.0, "keys": ["w"]}]}


@pytest.fixture(scope="module")
def lafan(data_dir, request):
    """LAFAN1 at 60 fps, not mirrored (what `motionmatch build lafan1-60fps` makes), cached
    in pytest's cache folder (the same file as tests/test_follow_drawn_paths.py's)."""
    from motionmatch.database import MotionDatabase
    from motionmatch.datasets import load_folder

    folder = data_dir / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found; set MOTIONMATCH_DATA to the shared data folder")
    cache = request.config.cache.mkdir("motionmatch-db")
    return MotionDatabase.cached(cache / "lafan1-60fps.npz", load_folder(folder))


def _speed_last_4s(rec) -> float:
    root = rec.motion.world_positions[:, 0, [0, 2]]
    return float(np.linalg.norm(root[-1] - root[-round(4 * rec.motion.fps)]) / 4.0)


def _back_steps(db, frames: np.ndarray, transitioned: np.ndarray, within: int) -> int:
    """Transitions to a frame 1..``within`` frames behind the one shown before, same clip."""
    prev, cur = frames[:-1], frames[1:]
    back = (db.frame_clip[prev] == db.frame_clip[cur]) & (cur - prev < 0) & (prev - cur <= within)
    return int((back & transitioned[1:]).sum())


def test_holding_w_walks_on_the_database_built_without_mirroring(lafan):
    script = parse_script(HOLD_W)
    on = run_script(lafan, script)
    off = run_script(lafan, script, ControllerSettings(reselect_history=0.0))
    # without it: frames 42886-42909 of walk2_subject3_walk (a slow start) over and over
    assert _speed_last_4s(off) < 0.4 and _back_steps(lafan, off.frames, off.transitioned, 30) >= 10
    assert _speed_last_4s(on) > 0.7, _speed_last_4s(on)  # LAFAN1's walk: about 0.85 m/s
    assert _back_steps(lafan, on.frames, on.transitioned, round(0.5 * lafan.fps)) == 0


def test_a_short_history_lets_the_replay_through(lafan):
    """The history is a time: 0.2 s (12 frames) is shorter than the 23-frame loop."""
    rec = run_script(lafan, parse_script(HOLD_W), ControllerSettings(reselect_history=0.2))
    assert _speed_last_4s(rec) < 0.4
