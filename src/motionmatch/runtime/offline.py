"""Offline runs: one character of a World driven by an input (a script, pose commands) at a
fixed frame rate, recorded frame by frame (``motionmatch run``, ``motionmatch pose run``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from motionmatch._jit import compile_intervals, overlapping
from motionmatch.anim import Motion, quat
from motionmatch.control.script import Script
from motionmatch.database import MotionDatabase
from motionmatch.environment.scene import Scene
from motionmatch.runtime.controller import Controller, ControllerSettings, FrameResult
from motionmatch.runtime.inputs import InputSource, ScriptInput
from motionmatch.runtime.recording import StepRecorder
from motionmatch.runtime.world import Agent, World


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
        warm_up: ``[F]`` bool, the frames whose update paid a one-off Numba compilation (a
            first run; ``None``: not known); ``compile_seconds`` their total.
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
    warm_up: np.ndarray | None = None
    compile_seconds: float = 0.0


def run_script(db: MotionDatabase, script: Script, settings: ControllerSettings | None = None, *,
               fps: float = 60.0, progress: bool = False, name: str = "motionmatch_run",
               scene: Scene | None = None) -> RunRecord:
    """Run ``script`` at ``fps`` (one agent of a :class:`~motionmatch.runtime.world.World`
    with a :class:`~motionmatch.runtime.inputs.ScriptInput`) and record the result.
    ``scene``: the ground (its terrain) and obstacles it plays among (default: none, the
    flat floor).

    Keyboard events use the database's own gait speeds (walk/run/sprint/creep measured
    from its clips).
    """
    return run_input(db, lambda agent: ScriptInput(script, gaits=agent.ctrl.gaits), script.frame_count(1.0 / fps),
                     settings, fps=fps, progress=progress, name=name, scene=scene)


def run_input(db: MotionDatabase, make_input: Callable[[Agent], InputSource], n_frames: int,
              settings: ControllerSettings | None = None, *, fps: float = 60.0, progress: bool = False,
              name: str = "motionmatch_run", start=(0.0, 0.0), scene: Scene | None = None) -> RunRecord:
    """One character at ``start [x, z]`` (default the origin) facing +Z, driven by
    ``make_input(agent)`` for ``n_frames`` frames at ``fps`` (the first at ``dt = 0``): a
    one-agent :class:`~motionmatch.runtime.world.World` (without obstacles, on the flat
    floor, unless ``scene`` has them: then its searches avoid them), recorded frame by frame."""
    has_obstacles = scene is not None and len(scene.obstacles) > 0
    world = World(db, scene, environment=has_obstacles, agents_as_obstacles=False, stagger=False, record_poses=False,
                  fps=fps, controller=settings or ControllerSettings())
    agent = world.add_agent(name, (float(start[0]), float(start[1])), (0.0, 1.0))
    agent.source = make_input(agent)
    with compile_intervals() as compiles:
        rec = world.record(n_frames, world.recorder(n_frames, poses=True, pose_dtype=np.float64, velocities=True,
                                                    desired_dtype=np.float64), progress=progress)
    run = run_record(db, rec, 0, fps, name)
    run.warm_up = overlapping(rec.starts, rec.seconds, compiles.intervals)
    run.compile_seconds = compiles.seconds
    return run


def run_record(db: MotionDatabase, rec: StepRecorder, agent: int, fps: float, name: str) -> RunRecord:
    """The :class:`RunRecord` of agent ``agent`` of a :class:`StepRecorder` (poses kept in float64)."""
    F = rec.count
    rots = quat.unroll(rec.rotations[agent, :F].astype(np.float64), axis=0)
    trs = rec.translations[agent, :F].astype(np.float64)
    # Joints the file format cannot translate keep the skeleton's bone lengths exactly.
    fixed = ~db.skeleton.has_position_channels
    trs[:, fixed] = db.skeleton.offsets[fixed]
    motion = Motion(db.skeleton, rots, trs, fps, name=name, file_scale=db.file_scale)
    return RunRecord(motion, rec.frames[agent, :F], rec.mode_names(agent), rec.searched[agent, :F],
                     rec.transitioned[agent, :F], rec.desired[agent, :F], rec.velocities[agent, :F],
                     rec.contacts[agent, :F], rec.seconds[:F], np.asarray(db.schema.trajectory_offsets))


def record_run(ctrl: Controller, results: list[FrameResult], velocities: np.ndarray, seconds: np.ndarray, fps: float,
               name: str) -> RunRecord:
    """The :class:`RunRecord` of a controller's frames ``results`` (one per frame, ``fps``),
    the intents' ``velocities [F, 3]`` and each frame's wall time ``seconds [F]``: for a
    controller stepped on its own (a benchmark's reference); a world's runs are recorded
    by a :class:`StepRecorder` (:func:`run_record`)."""
    db = ctrl.db
    n_frames = len(results)
    J = db.skeleton.num_joints
    K = len(db.schema.trajectory_offsets)
    rots = np.empty((n_frames, J, 4))
    trs = np.empty((n_frames, J, 3))
    frames = np.empty(n_frames, dtype=np.int64)
    modes = np.empty(n_frames, dtype=object)
    searched = np.zeros(n_frames, dtype=bool)
    transitioned = np.zeros(n_frames, dtype=bool)
    desired = np.full((n_frames, K, 3), np.nan)
    contacts = np.zeros((n_frames, max(ctrl.feet, 1)), dtype=bool)
    last = None
    for i, r in enumerate(results):
        rots[i], trs[i] = r.rotations, r.translations
        frames[i], modes[i] = r.frame, r.mode
        searched[i], transitioned[i] = r.searched, r.transitioned
        if r.desired is not None:
            last = r.desired.positions
        if last is not None:
            desired[i] = last
        contacts[i, : len(r.contacts)] = r.contacts
    rots = quat.unroll(rots, axis=0)
    # Joints the file format cannot translate keep the skeleton's bone lengths exactly.
    fixed = ~db.skeleton.has_position_channels
    trs[:, fixed] = db.skeleton.offsets[fixed]
    motion = Motion(db.skeleton, rots, trs, fps, name=name, file_scale=db.file_scale)
    return RunRecord(motion, frames, modes.astype(str), searched, transitioned, desired, np.asarray(velocities),
                     contacts, np.asarray(seconds), np.asarray(db.schema.trajectory_offsets))
