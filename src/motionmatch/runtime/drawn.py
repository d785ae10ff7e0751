"""Drawn-trajectory control (the ETH paper's, Sec. 3.4.2) as an input of the World.

:class:`DrawnPathInput` drives an agent along a painted line with
:class:`~motionmatch.control.path_steering.DrawnSteering`: straight to the nearest point
of the drawing, along it at a constant walking speed (running while Shift is held, or
with ``run``), round again when it is closed or looping is asked for, and standing at the
end of an open one. Every step it wants the steering's velocity and its desired future
route (the query's trajectory); the agent's own chooser searches (plain, or penalised
among obstacles), as for the keyboard. It sits beside the timed following of
:mod:`motionmatch.runtime.follow` (the path paper's LHMM), which keeps a drawing's timing.

Holding Q (the strafe key) while it follows keeps the facing on the camera's forward
direction, as with the keys (the desired route's facings too): the character sidesteps or
backs along the drawing.

The keyboard takes over when a movement key (W/A/S/D) is pressed: given the character's
:class:`~motionmatch.runtime.inputs.KeyboardInput`, the input hands over to it on that step
(:attr:`DrawnPathInput.handed_over`) and from then on passes its wants on.
"""

from __future__ import annotations

import math

import numpy as np

from motionmatch.control.intent import GaitSpeeds, Intent
from motionmatch.control.keyboard import STRAFE_KEY, camera_axes
from motionmatch.control.path_steering import PHASES, Drawing, DrawingFile, DrawnSteering, SteerSettings
from motionmatch.control.trajectory import PredictedTrajectory, yaw_rotation
from motionmatch.runtime.inputs import Agent, InputSource, KeyboardInput, Want

__all__ = ["DrawnPathInput", "run_drawing"]

#: the phase codes of :attr:`DrawnPathInput.phases`: the steering's, then the keyboard's
PHASE_CODES = (*PHASES, "keyboard")

_MOVE_KEYS = frozenset({"w", "a", "s", "d"})


class DrawnPathInput(InputSource):
    """An agent steered along a drawing (see the module docstring).

    Args:
        drawing: the painted line (:class:`~motionmatch.control.path_steering.Drawing`,
            or its points ``[P, 2]`` x, z in metres).
        settings: speeds, looping, capture and lookahead (``SteerSettings``); its speeds
            default to ``gaits``' walk and run.
        gaits: the database's gait speeds (``agent.ctrl.gaits`` when ``None``).
        keys: the character's keyboard: Shift held runs, a movement key takes over.
        run: run along the drawing (as if Shift were held).

    Attributes:
        steering: the :class:`DrawnSteering` (phase, progress, laps, entry point).
        handed_over: the keyboard took over (its wants are passed on from then).
        phases: one code a step (an index of :data:`PHASE_CODES`), ``record_phases`` on.
    """

    def __init__(self, drawing: Drawing | np.ndarray, settings: SteerSettings | None = None, *,
                 gaits: GaitSpeeds | None = None, keys: KeyboardInput | None = None, run: bool = False,
                 record_phases: bool = False):
        self.settings = settings or SteerSettings()
        self.drawing = drawing if isinstance(drawing, Drawing) else Drawing(drawing, self.settings)
        self.steering = DrawnSteering(self.drawing, self.settings)
        self.gaits = gaits
        self.keys = keys
        self.run = bool(run)
        self.handed_over = False
        self._offsets: np.ndarray | None = None
        self._stand: Want | None = None
        self.phases: list[int] | None = [] if record_phases else None

    @property
    def done(self) -> bool:
        """Whether the character stands at the end of an open drawing or the keyboard took over."""
        return self.handed_over or self.steering.phase == "done"

    @property
    def phase(self) -> str:
        """``"approach"``, ``"follow"``, ``"done"`` (:data:`~motionmatch.control.path_steering.PHASES`)
        or ``"keyboard"`` once it handed over."""
        return "keyboard" if self.handed_over else self.steering.phase

    def running(self) -> bool:
        """Whether it runs now (``run``, or Shift held on its keyboard)."""
        return self.run or (self.keys is not None and "shift" in self.keys.held)

    def speed(self, gaits: GaitSpeeds) -> float:
        """The speed along the drawing now (m/s)."""
        st = self.settings
        if self.running():
            return float(st.run_speed if st.run_speed is not None else gaits.run)
        return float(st.speed if st.speed is not None else gaits.walk)

    def intent(self, agent: Agent, t: float, dt: float) -> Want:
        want = self._want(agent, t, dt)
        if self.phases is not None:
            self.phases.append(PHASE_CODES.index(self.phase))
        return want

    def _want(self, agent: Agent, t: float, dt: float) -> Want:
        keys = self.keys
        if keys is not None and (self.handed_over or keys.held & _MOVE_KEYS):
            self.handed_over = True
            return keys.intent(agent, t, dt)
        ctrl = agent.ctrl
        gaits = self.gaits or ctrl.gaits
        if self._offsets is None:
            self._offsets = np.asarray(ctrl.db.schema.trajectory_offsets, dtype=np.float64)
        speed = self.speed(gaits)
        root = ctrl.root_pos
        st = self.steering.steer((float(root[0]), float(root[2])), speed, self._offsets)
        if st.phase == "done":
            if self._stand is None:
                self._stand = Want(Intent.idle())
            return self._stand
        K = len(self._offsets)
        pos = np.zeros((K, 3))
        pos[:, 0], pos[:, 2] = st.positions[:, 0], st.positions[:, 1]
        pos[:, 1] = root[1]
        dirs = np.zeros((K, 3))
        dirs[:, 0], dirs[:, 2] = st.directions[:, 0], st.directions[:, 1]
        vel = dirs * st.speeds[:, None]
        facing = None
        if keys is not None and STRAFE_KEY in keys.held:  # strafing along the drawing
            f = camera_axes(keys.keyboard.camera_yaw)[0]
            facing = (float(f[0]), float(f[2]))
            dirs = np.repeat(f[None], K, axis=0)
        traj = PredictedTrajectory(self._offsets, pos, vel, dirs, yaw_rotation(dirs))
        vx, vz = float(st.velocity[0]), float(st.velocity[1])
        gait = gaits.gait_for_speed(math.hypot(vx, vz))
        return Want(Intent.planar(vx, vz, gait, facing=facing), traj)


def run_drawing(db, file: DrawingFile, *, start=(0.0, 0.0), fps: float = 60.0, progress: bool = False,
                name: str = "drawn"):
    """One character at ``start [x, z]`` facing +Z steered along a drawing file's line
    (:func:`~motionmatch.control.path_steering.load_drawing`) for the file's seconds
    (:meth:`DrawingFile.seconds`); returns ``(record, input)``: the
    :class:`~motionmatch.runtime.offline.RunRecord` and the :class:`DrawnPathInput` (its
    phases recorded, one a frame)."""
    from motionmatch.runtime.offline import run_input

    made: list[DrawnPathInput] = []

    def make(agent) -> DrawnPathInput:
        made.append(DrawnPathInput(file.drawing, file.settings, gaits=agent.ctrl.gaits, run=file.run,
                                   record_phases=True))
        return made[0]

    from motionmatch.runtime.modes import gait_speeds_from_database

    speed = DrawnPathInput(file.drawing, file.settings, run=file.run).speed(gait_speeds_from_database(db))
    seconds = file.seconds(np.asarray(start, dtype=np.float64), speed)
    rec = run_input(db, make, max(1, round(seconds * fps)), fps=fps, progress=progress,
                    name=name, start=start)
    return rec, made[0]
