"""Punch (issue 33 item 3): F, a script's ``punch`` action or the pose command plays a
punch from the data, strike included, then the character goes on; a database without
punches says why. Also: takes of one rig whose root bone is found in some and not in
others (Bandai-Namco's walks and punches) build into one skeleton."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

from motionmatch.anim.kinematics import forward_kinematics
from motionmatch.control.pose.commands import CommandMapper
from motionmatch.control.script import parse_script
from motionmatch.database import MotionDatabase
from motionmatch.datasets.folder import load_folder
from motionmatch.errors import ModeWarning
from motionmatch.runtime.modes import punch_strikes
from motionmatch.runtime.offline import run_input, run_script
from motionmatch.runtime.pose_run import CommandInput

FILES = ("dataset-1_walk_normal_001", "dataset-1_walk_normal_002", "dataset-1_punch_normal_001",
         "dataset-1_punch_normal_002")


@pytest.fixture(scope="module")
def boxer(data_dir, tmp_path_factory):
    src = data_dir / "bandai-namco" / "dataset-1"
    missing = [f for f in FILES if not (src / f"{f}.bvh").is_file()]
    if missing:
        pytest.skip(f"Bandai-Namco dataset-1 files missing under {src}: {missing}")
    folder = tmp_path_factory.mktemp("boxer")
    for f in FILES:
        shutil.copy(src / f"{f}.bvh", folder / f"{f}.bvh")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MotionDatabase.build(load_folder(folder))


def test_walks_and_punches_of_one_rig_build_one_database(boxer):
    """The punches stand on the spot, so the file's root bone is not recognised in them as
    it is in the walks: every take then gets a new root, and the database one skeleton."""
    assert boxer.skeleton.names[0] == "SimulationBone" and "joint_Root" in boxer.skeleton.names
    assert {t for tags in boxer.clip_tags for t in tags} >= {"walk", "punch"}


def test_strikes_are_found_in_the_punch_clips_only(boxer):
    land, nxt = punch_strikes(boxer)
    strikes = np.flatnonzero(nxt == np.arange(boxer.num_frames))
    clips = {boxer.clip_names[c] for c in boxer.frame_clip[strikes]}
    assert clips == {"dataset-1_punch_normal_001", "dataset-1_punch_normal_002"}
    assert 8 <= len(strikes) <= 12  # five punches a clip
    assert land.any() and np.all(nxt[land] > np.flatnonzero(land))  # each landing frame has a strike ahead


def _reach(db, rec) -> np.ndarray:
    """``[F]`` the farther hand's distance from the chest on the ground plane (m)."""
    names = db.skeleton.names
    wp, _ = forward_kinematics(db.skeleton.parents, rec.motion.rotations, rec.motion.translations)
    chest = wp[:, names.index("Chest")]
    return np.max([np.linalg.norm((wp[:, names.index(h)] - chest)[:, [0, 2]], axis=1) for h in ("Hand_L", "Hand_R")],
                  axis=0)


def test_f_plays_a_punch_strike_included_then_the_character_goes_on(boxer):
    script = parse_script({"duration": 7.0, "events": [{"t": 0.0, "keys": ["w"]}, {"t": 2.0, "keys": []},
                                                      {"t": 3.0, "keys": ["f"]}, {"t": 3.1, "keys": []},
                                                      {"t": 5.0, "keys": ["w"]}]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModeWarning)  # (no standing clip: idle holds a pose)
        rec = run_script(boxer, script)
    modes = np.asarray(rec.modes)
    punch_clip = np.array(["punch" in boxer.clip_names[c] for c in boxer.frame_clip[rec.frames]])
    assert not punch_clip[:180].any()  # walking never plays a punch
    during = np.flatnonzero(modes == "punch")
    assert 180 <= during[0] <= 181 and 0.5 <= len(during) / 60 <= 1.5  # from the press, about a second
    assert punch_clip[during].all()
    reach = _reach(boxer, rec)
    assert reach[during].max() > 1.5 * np.median(reach[:170])  # the arm goes out: a strike
    assert reach[during[-1] + 30] < 0.7 * reach[during].max()  # and comes back
    assert (modes[300:] == "locomotion").mean() > 0.9 and not punch_clip[during[-1] + 10:].any()


def test_the_pose_command_punches_too(boxer):
    commands = np.array(["stand_still"] * 30 + ["punch"] * 60 + ["stand_still"] * 60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModeWarning)
        rec = run_input(boxer, lambda agent: CommandInput(commands, CommandMapper(agent.ctrl.gaits)), 150)
    assert (np.asarray(rec.modes) == "punch").sum() >= 30
