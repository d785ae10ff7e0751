"""Offline runs: drive a controller with a script at a fixed frame rate and record it."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from motionmatch.anim import Motion, quat
from motionmatch.control.intent import Intent
from motionmatch.control.script import Script
from motionmatch.database import MotionDatabase
from motionmatch.runtime.controller import Controller, ControllerSettings


@dataclass
class RunRecord:
    """Everything an offline run produced, frame by frame (``F`` frames at ``fps``).

    Attributes:
        motion: the character's animation (joint 0 is the character root).
        frames: ``[F]`` database frame played.
        modes: ``[F]`` controller mode names.
        searched, transitioned: ``[F]`` bool.
        desired: ``[F, K, 3]`` desired future root positions (world) at the schema offsets.
        desired_velocity: ``[F, 3]`` the intent's velocity per frame.
        contacts: ``[F, 2]`` feet locked.
        update_seconds: ``[F]`` wall time of each ``update`` call.
        desired_times: ``[K]`` the seconds ahead of the ``desired`` samples.
    """

    motion: Motion
    frames: np.ndarray
    modes: np.ndarray
    searched: np.ndarray
    transitioned: np.ndarray
    desired: np.ndarray
    desired_velocity: np.ndarray
    contacts: np.ndarray
    update_seconds: np.ndarray
    desired_times: np.ndarray | None = None


def run_script(db: MotionDatabase, script: Script, settings: ControllerSettings | None = None, *,
               fps: float = 60.0, progress: bool = False, name: str = "motionmatch_run") -> RunRecord:
    """Run ``script`` through a :class:`Controller` at ``fps`` and record the result.

    Keyboard events use the database's own gait speeds (walk/run/sprint/creep measured
    from its clips).
    """
    ctrl = Controller(db, settings)
    kb = script.keyboard(gaits=ctrl.gaits)
    return run_intents(ctrl, script.intents(1.0 / fps, keyboard=kb), script.frame_count(1.0 / fps), fps=fps,
                       progress=progress, name=name)


def run_intents(ctrl: Controller, intents, n_frames: int, *, fps: float = 60.0, progress: bool = False,
                name: str = "motionmatch_run") -> RunRecord:
    """Drive ``ctrl`` with ``(t, intent)`` pairs, one per frame."""
    dt = 1.0 / fps
    J = ctrl.db.skeleton.num_joints
    K = len(ctrl.db.schema.trajectory_offsets)
    rots = np.empty((n_frames, J, 4))
    trs = np.empty((n_frames, J, 3))
    frames = np.empty(n_frames, dtype=np.int64)
    modes = np.empty(n_frames, dtype=object)
    searched = np.zeros(n_frames, dtype=bool)
    transitioned = np.zeros(n_frames, dtype=bool)
    desired = np.full((n_frames, K, 3), np.nan)
    dvel = np.zeros((n_frames, 3))
    contacts = np.zeros((n_frames, max(len(ctrl._legs), 1)), dtype=bool)
    secs = np.empty(n_frames)
    last = None
    for i, (_, intent) in enumerate(tqdm(intents, total=n_frames, desc="simulating", unit="frame", disable=not progress)):
        if i >= n_frames:
            break
        t0 = time.perf_counter()
        r = ctrl.update(0.0 if i == 0 else dt, intent)
        secs[i] = time.perf_counter() - t0
        rots[i], trs[i] = r.rotations, r.translations
        frames[i], modes[i] = r.frame, r.mode
        searched[i], transitioned[i] = r.searched, r.transitioned
        if r.desired is not None:
            last = r.desired.positions
        if last is not None:
            desired[i] = last
        dvel[i] = np.asarray(intent.velocity if isinstance(intent, Intent) else 0.0)
        contacts[i, : len(r.contacts)] = r.contacts
    rots = quat.unroll(rots, axis=0)
    # Joints the file format cannot translate keep the skeleton's bone lengths exactly.
    fixed = ~ctrl.db.skeleton.has_position_channels
    trs[:, fixed] = ctrl.db.skeleton.offsets[fixed]
    motion = Motion(ctrl.db.skeleton, rots, trs, fps, name=name, file_scale=ctrl.db.file_scale)
    return RunRecord(motion, frames, modes.astype(str), searched, transitioned, desired, dvel, contacts, secs,
                     np.asarray(ctrl.db.schema.trajectory_offsets))
