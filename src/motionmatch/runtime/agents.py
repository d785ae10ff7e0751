"""A character of a :class:`~motionmatch.runtime.world.World` (:class:`Agent`: a handle on
its controller, chooser, input and clock) and what one world step produced for the agents
it stepped (:class:`StepResults`)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from motionmatch.anim.kinematics import forward_kinematics
from motionmatch.control.intent import Intent
from motionmatch.control.trajectory import PredictedTrajectory
from motionmatch.runtime._batch_kernels import MODES
from motionmatch.runtime.chooser import EnvironmentChooser
from motionmatch.runtime.controller import Controller, FrameResult
from motionmatch.runtime.environment_matching import Controls
from motionmatch.runtime.inputs import InputSource, WantRows

if TYPE_CHECKING:
    from motionmatch.runtime.world import World

__all__ = ["Agent", "StepResults"]

_STANDING = Intent.idle()

#: an agent's clock: its fields and their types (:attr:`World.agent_clocks`)
_CLOCK = {"start_time": float, "started": bool, "local_time": float, "owed": float}


class Agent:
    """One character of a :class:`World`: a controller, its environment-aware chooser and
    its input (an :class:`~motionmatch.runtime.inputs.InputSource`, replaceable at any step).

    Attributes:
        intent, desired: what the input wanted at the last step.
        result: the controller's last :class:`~motionmatch.runtime.controller.FrameResult`.
        searched: whether the last step searched.
        start_time, started, local_time, owed: its input's clock (see
            :attr:`World.agent_clocks`, where a world keeps them).
    """

    def __init__(self, name: str, controller: Controller, chooser: EnvironmentChooser | None,
                 source: InputSource, *, start_time: float = 0.0, path: np.ndarray | None = None,
                 goal: np.ndarray | None = None):
        self.name = name
        self._ctrl = controller
        self._chooser = chooser
        self._world: weakref.ref | None = None  # the world it is in (its clock in the world's columns)
        self._clock = {"start_time": float(start_time), "started": False, "local_time": 0.0, "owed": 0.0}
        self._source = source
        self.path = path
        self.goal = goal
        controller.chooser = chooser
        self.uid = -1  # its number in its world (obstacle rows of its body: id -1 - uid)
        #: ``(step, k)``: this agent's row ``k`` of the last step it took (a
        #: :class:`StepResults`; ``None`` before the first)
        self.last_step: tuple[StepResults, int] | None = None
        self._result: FrameResult | None = None  # (set, or built from last_step: see result)
        self._result_of: tuple | None = None  # (the last_step _result was built from)

    @property
    def ctrl(self) -> Controller:
        """Its controller (for its life: a world keeps its agents' controllers in a list)."""
        return self._ctrl

    @property
    def chooser(self) -> EnvironmentChooser | None:
        """Its environment-aware frame chooser (``None`` in a world without environment)."""
        return self._chooser

    @property
    def result(self) -> FrameResult | None:
        """The controller's last :class:`~motionmatch.runtime.controller.FrameResult`
        (``None`` before the first step; built from :attr:`last_step` when first read)."""
        at = self.last_step
        if at is not None and self._result_of is not at:
            self._result, self._result_of = at[0].result(at[1]), at
        return self._result

    @result.setter
    def result(self, r: FrameResult | None) -> None:
        self._result, self._result_of = r, self.last_step

    def world_pose(self) -> tuple[np.ndarray, np.ndarray] | None:
        """World joint positions ``[J, 3]`` (m) and rotations ``[J, 4]`` (w, x, y, z) of its
        last step's pose: its rows of :meth:`StepResults.world_pose` (one compiled forward
        kinematics for all the agents of that step, made when first read); before its first
        step, of the result set on it; ``None`` without either."""
        at = self.last_step
        if at is not None:
            pos, rot = at[0].world_pose()
            return pos[at[1]], rot[at[1]]
        r = self._result
        if r is None:
            return None
        pos, rot = forward_kinematics(self._ctrl.db.skeleton.parents, r.rotations[None], r.translations[None])
        return pos[0], rot[0]

    @property
    def searched(self) -> bool:
        """Whether its last step searched (``False`` before the first)."""
        at = self.last_step
        return at is not None and at[0].searched(at[1])

    @property
    def source(self) -> InputSource:
        """Its input (replaceable at any step)."""
        return self._source

    @source.setter
    def source(self, source: InputSource) -> None:
        self._source = source
        world = self._world() if self._world is not None else None
        if world is not None:
            world.inputs_changed()

    def join(self, world: World | None) -> None:
        """Its clock and its chooser's state from now on in ``world``'s columns
        (:attr:`World.agent_clocks`, :attr:`World.chooser_columns`, its controller's row),
        or here again (``None``: it left its world)."""
        old = self._world() if self._world is not None else None
        if old is not None:
            cols, r = old.agent_clocks, self.ctrl.row
            self._clock = {name: getattr(cols, name)[r].item() for name in _CLOCK}
        self._world = None
        if world is not None:
            cols, r = world.agent_clocks, self.ctrl.row
            for name in _CLOCK:
                getattr(cols, name)[r] = self._clock[name]
            self._world = weakref.ref(world)
        if self._chooser is not None:  # (its chooser's state: in the world's columns too)
            self._chooser.place(None if world is None else world.chooser_columns, self.ctrl.row)

    def _clock_field(name: str, doc: str) -> property:
        def get(agent):
            world = agent._world() if agent._world is not None else None
            if world is None:
                return agent._clock[name]
            return getattr(world.agent_clocks, name)[agent.ctrl.row].item()

        def put(agent, value) -> None:
            world = agent._world() if agent._world is not None else None
            if world is None:
                agent._clock[name] = _CLOCK[name](value)
            else:
                getattr(world.agent_clocks, name)[agent.ctrl.row] = value

        return property(get, put, doc=doc)

    start_time = _clock_field("start_time", "World seconds from which its input drives it.")
    started = _clock_field("started", "Whether it has taken its first step.")
    local_time = _clock_field("local_time", "Seconds of input since it started (the sum of its steps).")
    owed = _clock_field("owed", "Seconds not yet stepped (a world's level of detail).")
    del _clock_field

    @property
    def intent(self) -> Intent:
        """What the input wanted at the last step (standing before the first)."""
        if self.last_step is None:
            return _STANDING
        step, k = self.last_step
        return step.wants.intents[k]

    @property
    def desired(self) -> PredictedTrajectory | None:
        """The desired trajectory the input gave at the last step (``None``: none)."""
        if self.last_step is None:
            return None
        step, k = self.last_step
        return step.wants.desired[k]

    @property
    def root_xz(self) -> np.ndarray:
        return np.array([self.ctrl.root_pos[0], self.ctrl.root_pos[2]])

    @property
    def yaw(self) -> float:
        return float(self.ctrl.root_yaw)

    def set_controls(self, controls: Controls) -> None:
        """This agent's high-level controls from now on (its environment-aware search)."""
        if self.chooser is not None:
            self.chooser.controls = controls


class StepResults:
    """What one step of a :class:`World` produced for the agents it stepped (row ``k``:
    the ``k``-th of them, whose :attr:`Agent.last_step` is ``(this, k)``): their wants
    (:class:`~motionmatch.runtime.inputs.WantRows`), their poses copied out of the batch at
    once, frames, modes, whether each searched and transitioned; each agent's
    :class:`~motionmatch.runtime.controller.FrameResult` is built when read (:meth:`result`)."""

    __slots__ = ("_before", "_choosers", "_ctrls", "_world", "contacts", "decided", "frames", "modes", "rotations",
                 "translations", "wants")

    def __init__(self, wants: WantRows, ctrls: list[Controller], choosers: list, decided: list[tuple[bool, bool]],
                 before: list[int] | None, rows: np.ndarray | slice | None = None):
        """``ctrls``, ``choosers``: the rows' (lists not changed afterwards); ``rows``: the
        controllers' rows of their batch, ``[n]`` or, when they are consecutive, a slice
        (default: read from them)."""
        st = ctrls[0].batch.state
        if rows is None:
            rows = np.fromiter((c.row for c in ctrls), dtype=np.int64, count=len(ctrls))
        self.wants = wants
        if isinstance(rows, slice):  # (copies: the batch's arrays are the next step's)
            self.rotations, self.translations = st.out_rot[rows].copy(), st.out_pos[rows].copy()
            self.contacts, self.frames, self.modes = (st.out_contacts[rows].copy(), st.frame[rows].copy(),
                                                      st.mode[rows].copy())
        else:
            self.rotations, self.translations = st.out_rot[rows], st.out_pos[rows]  # [n, J, 4], [n, J, 3]
            self.contacts = st.out_contacts[rows]  # [n, K]
            self.frames = st.frame[rows]  # [n]
            self.modes = st.mode[rows]  # [n] (indices of MODES)
        self.decided = decided  # [(searched, transitioned)] per row
        self._ctrls, self._choosers, self._before = ctrls, choosers, before
        self._world: tuple[np.ndarray, np.ndarray] | None = None

    def world_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World joint positions ``[n, J, 3]`` (m) and rotations ``[n, J, 4]`` (w, x, y, z)
        of the rows' poses: one compiled forward kinematics for all of them, made when
        first read (what a viewer draws; read-only)."""
        if self._world is None:
            pos, rot = forward_kinematics(self._ctrls[0].db.skeleton.parents, self.rotations, self.translations)
            pos.flags.writeable = rot.flags.writeable = False
            self._world = pos, rot
        return self._world

    def desired(self, k: int) -> PredictedTrajectory | None:
        """The desired trajectory of row ``k``'s last search (its controller's, read while
        this is its agent's last step: it changes only when the controller searches)."""
        return self._ctrls[k].last_desired

    def searched(self, k: int) -> bool:
        """Whether row ``k`` searched (its controller, or its chooser on its own)."""
        if self.decided[k][0]:
            return True
        n = -1 if self._before is None else self._before[k]
        return n >= 0 and self._choosers[k].searches > n

    def result(self, k: int) -> FrameResult:
        """Row ``k`` as a :class:`~motionmatch.runtime.controller.FrameResult`."""
        searched, transitioned = self.decided[k]
        c = self._ctrls[k]  # (its desired trajectory and costs change only when it searches)
        return FrameResult(self.rotations[k], self.translations[k], int(self.frames[k]), MODES[self.modes[k]],
                           searched, transitioned, c.last_desired, self.contacts[k], c.last_costs if searched else {})
