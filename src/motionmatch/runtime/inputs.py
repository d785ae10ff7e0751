"""What drives an agent of a :class:`~motionmatch.runtime.world.World`: the input contract.

Every input (a timeline script, a polyline at a speed, crowd steering toward a goal, a
drawn timed path followed with long-horizon matching, keys held in the viewer, pose
commands, or nothing) is an :class:`InputSource`. Each world step asks every started
agent's input once, before anyone moves::

    want = source.intent(agent, t, dt)       # t: seconds since the agent started

(then ``source.stepped(agent, dt)`` once the agent moved) and plays ``want.intent`` (an :class:`~motionmatch.control.intent.Intent`: velocity,
facing, gait, actions), matching ``want.desired`` instead of the controller's own spring
prediction when given (a world-space
:class:`~motionmatch.control.trajectory.PredictedTrajectory` at the schema's offsets),
searching at once when ``want.search_now``. An input that chooses frames its own way (a
path follower's long-horizon matcher) says so with :meth:`InputSource.chooser`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Protocol

import numpy as np

from motionmatch.control.intent import GaitSpeeds, Intent, IntentRows
from motionmatch.control.keyboard import KeyboardController, intent_from_sticks, normalize_key
from motionmatch.control.script import Script, ScriptPlayback, parse_script
from motionmatch.control.trajectory import PredictedTrajectory

__all__ = ["Agent", "AroundObstacles", "IdleInput", "InputSource", "KeyboardInput", "ScriptInput", "Want", "WantRows"]


class Agent(Protocol):
    """What an input may read of the agent it drives (a :class:`~motionmatch.runtime.world.
    Agent`: its name, its number in its world, where it stands, its controller and the
    frame it played last)."""

    name: str
    uid: int
    ctrl: Any
    result: Any

    @property
    def root_xz(self) -> np.ndarray: ...

    @property
    def yaw(self) -> float: ...


class Want(NamedTuple):
    """What an input wants of its agent this step.

    Attributes:
        intent: the intent (speed, direction, facing, gait, actions).
        desired: the future trajectory to match (world, at the schema's trajectory offsets),
            or ``None``: the controller predicts one from ``intent`` with its springs.
        search_now: search this step whatever the search interval (e.g. a sharp corner).
        root_motion_only: move by the clips' root motion alone this step (no pull toward
            the simulated root; a path follower's character, as in the paper).
    """

    intent: Intent
    desired: PredictedTrajectory | None = None
    search_now: bool = False
    root_motion_only: bool = False


class WantRows:
    """The wants of a step's agents as columns (row ``k``: the ``k``-th agent stepped).

    Attributes:
        intents: their intents (:class:`~motionmatch.control.intent.IntentRows`).
        desired: ``[n]`` each one's desired trajectory or ``None``.
        search_now, root_motion_only: ``[n]`` bool.
    """

    __slots__ = ("desired", "intents", "root_motion_only", "search_now")

    def __init__(self, intents: IntentRows, desired: list, search_now: np.ndarray, root_motion_only: np.ndarray):
        self.intents, self.desired = intents, desired
        self.search_now, self.root_motion_only = search_now, root_motion_only

    @classmethod
    def assemble(cls, n: int, wants: list[tuple[int, Want]], groups: list[tuple[np.ndarray, IntentRows]]) -> WantRows:
        """The rows of ``n`` agents: rows ``k`` of ``wants`` (``(k, Want)`` each) and rows
        ``ks [m]`` of each group's intents (``(ks, IntentRows)``: no desired trajectory, no
        forced search, not root motion only)."""
        if not groups and len(wants) == n:  # (every row a Want, in order: a few characters)
            ws = [w for _, w in wants]
            return cls(IntentRows.of([w.intent for w in ws]), [w.desired for w in ws],
                       np.array([w.search_now for w in ws], dtype=bool),
                       np.array([w.root_motion_only for w in ws], dtype=bool))
        goals, gaits, plain = np.zeros((n, 5)), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
        objects: list = [None] * n
        desired: list = [None] * n
        search_now, rmo = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        if wants:
            ks = [k for k, _ in wants]
            own = IntentRows.of([w.intent for _, w in wants])
            goals[ks], gaits[ks], plain[ks] = own.goals, own.gaits, own.plain
            for k, w in wants:
                objects[k], desired[k], search_now[k], rmo[k] = w
        for ks, rows in groups:
            goals[ks], gaits[ks], plain[ks] = rows.goals, rows.gaits, rows.plain
        return cls(IntentRows(goals, gaits, plain, objects), desired, search_now, rmo)

    def take(self, ks: list[int]) -> WantRows:
        """Rows ``ks`` of these (in that order)."""
        return WantRows(self.intents.take(ks), [self.desired[k] for k in ks], self.search_now[ks],
                        self.root_motion_only[ks])

    def want(self, k: int) -> Want:
        """Row ``k`` as a :class:`Want`."""
        return Want(self.intents[k], self.desired[k], bool(self.search_now[k]), bool(self.root_motion_only[k]))


class InputSource(Protocol):
    """The input contract (see the module docstring).

    An input class may also offer ``wants_together(world, at) -> IntentRows``, a static
    method: the intents of all the world's agents it drives (at rows ``at [n]`` of the
    world's ground positions) at once, as columns, without a call per agent (crowd
    steering does); a world then asks it once a step for all of them, and their wants
    have no desired trajectory, no forced search and no root-motion-only step.
"""

    def intent(self, agent: Agent, t: float, dt: float) -> Want:
        """What ``agent`` should do now, ``t`` seconds after it started, ``dt`` seconds
        after the previous call (0 on the first)."""
        ...

    def chooser(self, agent: Agent):
        """The frame chooser this input needs (``(controller, query, mask, view) ->
        (indices [1], costs [1])``), or ``None``: the agent's own (its environment-aware
        search among obstacles, else the controller's nearest-frame search)."""
        return None

    def stepped(self, agent: Agent, dt: float) -> None:
        """Called after every step of the agent that asked :meth:`intent` (``agent.result``
        holds the frame it played): progress, completion, recording. Default: nothing."""
        return None


IDLE = Want(Intent.idle())


class IdleInput(InputSource):
    """Stands still."""

    def intent(self, agent: Agent, t: float, dt: float) -> Want:
        return IDLE


class ScriptInput(InputSource):
    """A timeline script (the ``motionmatch run`` format, world axes: W = +Z), played live
    (:class:`~motionmatch.control.script.ScriptPlayback`).

    Args:
        script: a :class:`~motionmatch.control.script.Script`, or its JSON object
            (``duration`` defaulting to ``duration``).
        gaits: the keyboard's gait speeds (default the script's own; the world's agents
            walk and run at their database's).
    """

    def __init__(self, script: Script | dict, duration: float | None = None, gaits: GaitSpeeds | None = None):
        if not isinstance(script, Script):
            d = dict(script)
            if duration is not None:
                d.setdefault("duration", duration)
            script = parse_script(d)
        self.script = script
        kb = script.keyboard(gaits=gaits) if gaits is not None else script.keyboard()
        self.playback = ScriptPlayback(script, kb)
        self._want = Want(Intent.idle())

    def intent(self, agent: Agent, t: float, dt: float) -> Want:
        intent = self.playback.intent(t, dt)
        if intent is not self._want.intent:  # (the same intent: the same Want)
            self._want = Want(intent)
        return self._want


class KeyboardInput(InputSource):
    """Keys held now (the viewer's W/A/S/D, Shift, Q to strafe, ...), through a
    :class:`~motionmatch.control.keyboard.KeyboardController` (camera-relative directions),
    or a gamepad's two sticks (:meth:`set_sticks`: the left one moves, the right one sets
    the facing; they drive while either is off its rest, the keys otherwise)."""

    def __init__(self, gaits: GaitSpeeds | None = None, camera_yaw: float = 0.0):
        self.keyboard = KeyboardController(gaits=gaits)
        self.keyboard.camera_yaw = float(camera_yaw)
        self.held: set[str] = set()
        self._want: Want | None = None
        self._sticks: tuple | None = None  # (left, right, sprint): the gamepad's, while off its rest

    def set_sticks(self, left: tuple[float, float], right: tuple[float, float] = (0.0, 0.0),
                   sprint: bool = False) -> None:
        """The gamepad's sticks now (``(x right, y forward)`` each, in ``[-1, 1]``;
        :func:`~motionmatch.control.keyboard.intent_from_sticks`); both at rest (within
        the deadzone) hands the character back to the keys."""
        rest = max(abs(left[0]), abs(left[1]), abs(right[0]), abs(right[1])) <= 0.15
        self._sticks = None if rest else ((float(left[0]), float(left[1])), (float(right[0]), float(right[1])),
                                          bool(sprint))

    def set_key(self, key: str, down: bool) -> None:
        k = normalize_key(key)
        if down:
            self.held.add(k)
        else:
            self.held.discard(k)

    def set_keys(self, keys) -> None:
        self.held = {normalize_key(k) for k in keys}

    def intent(self, agent: Agent, t: float, dt: float) -> Want:
        intent = self.keyboard.update(self.held, dt)
        if self._sticks is not None:
            left, right, sprint = self._sticks
            intent = intent_from_sticks(left, right, self.keyboard.camera_yaw, sprint=sprint,
                                        gaits=self.keyboard.gaits, actions=intent.actions)
        if self._want is None or intent is not self._want.intent:  # (the same intent: the same Want)
            self._want = Want(intent)
        return self._want


class AroundObstacles(InputSource):
    """Another input's intent bent around the obstacle that blocks the way ahead (the
    viewer's keyboard characters walk around what they are steered at).

    The desired velocity ``v`` of ``inner`` is kept when no obstacle's bounding circle,
    grown by ``clearance``, meets the corridor ``[0, max(1.2, 1.6 |v|)]`` metres ahead;
    otherwise it is turned, at the same speed, toward the point beside the nearest blocking
    obstacle on the side the character is already on (kept while that obstacle blocks, so
    it does not dither). Moving obstacles count where they will be when reached. The
    trajectory the controller then predicts passes the obstacle, and the penalised search
    picks the poses that follow it without touching anything. A desired trajectory of
    ``inner`` (a path) is left as it is.

    Args:
        inner: the input whose intents are bent; world: where the obstacles are
            (``world.scene``, ``world.time``); clearance: metres kept around an
            obstacle's bounding circle.
    """

    def __init__(self, inner: InputSource, world, clearance: float = 0.55):
        self.inner = inner
        self.world = world
        self.clearance = float(clearance)
        self._side: tuple[int, float] | None = None
        self._static: tuple | None = None  # (scene, [S, 4] its static obstacles' disks)

    def chooser(self, agent: Agent):
        return self.inner.chooser(agent)

    def stepped(self, agent: Agent, dt: float) -> None:
        self.inner.stepped(agent, dt)

    def _disks(self, t: float, ahead: float) -> np.ndarray:
        """``[M, 4]`` (x, z, bounding radius, scene index) of every obstacle, moving ones
        where they are predicted ``ahead`` seconds on (the static ones packed once per scene)."""
        sc = self.world.scene
        if self._static is None or self._static[0] is not sc:
            st = [(o.center[0], o.center[1], o.bounding_radius, i) for i, o in enumerate(sc.obstacles) if not o.moving]
            self._static = (sc, np.array(st, dtype=np.float64).reshape(-1, 4))
        disks = self._static[1]
        if not sc.moving_ids.size:
            return disks
        moving = [(*sc.obstacles[i].predicted(t, ahead), sc.obstacles[i].bounding_radius, i) for i in sc.moving_ids]
        return np.concatenate([disks, np.array(moving, dtype=np.float64)])

    def intent(self, agent: Agent, t: float, dt: float) -> Want:
        want = self.inner.intent(agent, t, dt)
        intent = want.intent
        v = np.asarray(intent.velocity, dtype=np.float64)
        sp = float(math.hypot(v[0], v[2]))
        if want.desired is not None or sp < 0.05 or not len(self.world.scene):
            self._side = None
            return want
        look = max(1.2, 1.6 * sp)
        d = np.array([v[0], v[2]]) / sp
        n = np.array([-d[1], d[0]])
        disks = self._disks(self.world.time, min(look / sp, 1.5))
        p = np.asarray(agent.root_xz, dtype=np.float64)
        rel = disks[:, :2] - p
        along = rel @ d
        lat = rel @ n
        R = disks[:, 2] + self.clearance
        block = (along > -0.1) & (along < look + R) & (np.abs(lat) < R)
        if not block.any():
            self._side = None
            return want
        j = int(np.flatnonzero(block)[np.argmin(along[block] - R[block])])
        ident = int(disks[j, 3])
        if self._side is not None and self._side[0] == ident:
            side = self._side[1]
        else:
            side = -1.0 if lat[j] > 0.02 else 1.0
            self._side = (ident, side)
        aim = disks[j, :2] + n * side * R[j] * 1.05
        to = aim - p
        dist = float(np.hypot(*to))
        if dist < 1e-6:
            return want
        nd = to / dist
        if nd @ d < 0.0:  # never turn back: walk along the obstacle instead
            nd = n * side
        bent = Intent(velocity=[nd[0] * sp, 0.0, nd[1] * sp], facing=intent.facing, gait=intent.gait,
                      actions=intent.actions)
        return Want(bent, None, want.search_now, want.root_motion_only)
