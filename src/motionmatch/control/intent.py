"""What the user wants, independent of the input device.

An :class:`Intent` is what every input (keyboard, gamepad, drawn path, script, pose
classifier) is turned into and what a per-frame controller consumes: a desired velocity
in the world frame, an optional desired facing, a gait label and a set of actions.

Frames and units: world frame, metres and seconds, Y up. Velocities are world-frame
vectors ``[3]`` (``y`` is 0 for ground locomotion). Facings are unit vectors in the
ground plane; ``None`` means "face the direction of travel", a set facing means
strafing (moving one way while looking another).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

GAITS = ("idle", "walk", "run", "sprint")
ACTIONS = frozenset({"jump", "creep", "dance", "punch", "stop"})

#: Planar speeds below this (m/s) count as standing still.
STILL_SPEED = 0.05


@dataclass(frozen=True)
class GaitSpeeds:
    """Typical speeds (m/s) of each gait, used to turn a gait into a target speed and back.

    Defaults are typical human speeds; ``creep`` is the paper's 0.8 m/s (Sec. 3.3.1),
    chosen there as the average creeping speed of its data. A database can supply its
    own values measured from its speed distribution (e.g. the median root speed of the
    clips tagged walk / run / sprint / creep) with ``GaitSpeeds(walk=..., run=...)``.
    """

    walk: float = 1.4
    run: float = 3.5
    sprint: float = 5.0
    creep: float = 0.8

    def __post_init__(self) -> None:
        vals = (self.creep, self.walk, self.run, self.sprint)
        if not all(math.isfinite(v) and v > 0 for v in vals):
            raise ValueError(f"gait speeds must be finite and > 0, got {self}")
        if not self.walk < self.run <= self.sprint:
            raise ValueError(f"gait speeds must satisfy walk < run <= sprint, got {self}")

    def speed(self, gait: str) -> float:
        """Target speed (m/s) of a gait label (``"idle"`` is 0)."""
        if gait == "idle":
            return 0.0
        if gait not in GAITS:
            raise ValueError(f"unknown gait {gait!r}; expected one of {', '.join(GAITS)}")
        return float(getattr(self, gait))

    def gait_for_speed(self, speed: float) -> str:
        """Label of a planar speed: idle below :data:`STILL_SPEED`, else the nearest of walk/run/sprint.

        Boundaries are the midpoints between neighbouring gait speeds.
        """
        if speed < STILL_SPEED:
            return "idle"
        if speed < 0.5 * (self.walk + self.run):
            return "walk"
        if speed < 0.5 * (self.run + self.sprint):
            return "run"
        return "sprint"


def vec3(value: ArrayLike, what: str) -> np.ndarray:
    """``value`` as a finite ``[3]`` float array (a ``[x, z]`` pair gets ``y = 0``), or a
    ``ValueError`` naming ``what``."""
    a = np.asarray(value, dtype=np.float64).reshape(-1)
    if a.shape == (2,):
        a = np.array([a[0], 0.0, a[1]])
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{what} must be 3 finite numbers [x, y, z] (or 2, [x, z]), got {value!r}")
    return a


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


def _planar_unit(v: np.ndarray) -> np.ndarray:
    p = np.array([v[0], 0.0, v[2]])
    n = float(np.hypot(p[0], p[2]))
    return p / n if n > 1e-12 else np.zeros(3)


def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(math.acos(max(-1.0, min(1.0, float(np.dot(a, b))))))


@dataclass(frozen=True, eq=False)
class Intent:
    """A desired motion, in the world frame.

    Attributes:
        velocity: desired velocity ``[3]`` (m/s, read-only array). Ground locomotion
            keeps ``y = 0``; a 2-vector ``[x, z]`` is accepted and widened.
        facing: desired facing, a unit ground-plane vector ``[3]`` (read-only), or
            ``None`` to face the direction of travel. Setting it while moving another
            way is strafing.
        gait: ``"idle" | "walk" | "run" | "sprint"``.
        actions: a frozenset drawn from ``{"jump", "creep", "dance", "punch", "stop"}``; present
            while requested (a controller triggers a one-shot action such as a jump on
            the frame it appears).
    """

    velocity: np.ndarray = None  # type: ignore[assignment]
    facing: np.ndarray | None = None
    gait: str = "idle"
    actions: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        v = np.zeros(3) if self.velocity is None else vec3(self.velocity, "Intent.velocity")
        object.__setattr__(self, "velocity", _frozen(v))
        if self.facing is not None:
            f = vec3(self.facing, "Intent.facing").copy()  # may be a read-only view of a frozen facing
            f[1] = 0.0
            n = float(np.linalg.norm(f))
            if n < 1e-9:
                raise ValueError(
                    "Intent.facing must be a non-zero ground-plane direction, or None to face the direction of travel"
                )
            object.__setattr__(self, "facing", _frozen(f / n))
        if self.gait not in GAITS:
            raise ValueError(f"unknown gait {self.gait!r}; expected one of {', '.join(GAITS)}")
        acts = self.actions
        if isinstance(acts, str):
            acts = (acts,)
        acts = frozenset(acts)
        bad = sorted(a for a in acts if a not in ACTIONS)
        if bad:
            raise ValueError(f"unknown action(s) {bad}; expected some of {sorted(ACTIONS)}")
        object.__setattr__(self, "actions", acts)

    # -- constructors -------------------------------------------------------------------

    @classmethod
    def idle(cls, actions: Iterable[str] = ()) -> Intent:
        """Standing still (optionally with actions, e.g. dancing in place)."""
        return cls(np.zeros(3), None, "idle", frozenset(actions))

    @classmethod
    def from_speed_direction(
        cls,
        speed: float,
        direction: ArrayLike,
        facing: ArrayLike | None = None,
        gait: str | None = None,
        actions: Iterable[str] = (),
        gaits: GaitSpeeds | None = None,
    ) -> Intent:
        """Moving at ``speed`` (m/s) along the ground-plane ``direction`` (normalised here).

        ``gait`` defaults to the label of ``speed`` under ``gaits``.
        """
        d = _planar_unit(vec3(direction, "direction"))
        if speed < 0 or not math.isfinite(speed):
            raise ValueError(f"speed must be finite and >= 0, got {speed!r}")
        if not np.any(d):
            speed = 0.0
        if gait is None:
            gait = (gaits or GaitSpeeds()).gait_for_speed(speed)
        return cls(d * speed, facing, gait, frozenset(actions))

    @classmethod
    def planar(cls, vx: float, vz: float, gait: str, facing: tuple[float, float] | None = None) -> Intent:
        """Moving at ``(vx, 0, vz)`` m/s (finite floats) facing the direction of travel, or
        ``facing`` ``(x, z)`` (a unit vector, taken as it is), with a known ``gait``:
        ``Intent(velocity=[vx, 0, vz], facing=..., gait=gait)`` without the constructor's
        checks and conversions (the per-step path of inputs that steer many agents)."""
        it = object.__new__(cls)
        v = np.array([vx, 0.0, vz], dtype=np.float64)
        v.setflags(write=False)
        put = object.__setattr__
        put(it, "velocity", v)
        if facing is not None:
            facing = np.array([facing[0], 0.0, facing[1]], dtype=np.float64)
            facing.setflags(write=False)
        put(it, "facing", facing)
        put(it, "gait", gait)
        put(it, "actions", frozenset())
        return it

    @classmethod
    def planar_rows(cls, velocity: np.ndarray, rows: Sequence[int], gaits: Sequence[str]) -> list[Intent]:
        """:meth:`planar` for many at once: the intents moving at ``velocity[rows]``
        (``velocity`` ``[G, 3]`` float64 m/s, finite, ``y = 0``; made read-only here, each
        intent's velocity a view of its row) with known ``gaits`` (one per row). About five
        times as fast as :meth:`planar` one by one (a steered crowd's step)."""
        velocity.flags.writeable = False
        new, empty = object.__new__, frozenset()
        speeds = np.hypot(velocity[rows, 0], velocity[rows, 2]).tolist()  # (:attr:`speed`'s, at once)
        vx, vz = velocity[rows, 0].tolist(), velocity[rows, 2].tolist()  # (:attr:`planar_velocity`'s)
        out = []
        for r, g, sp, x, z in zip(rows, gaits, speeds, vx, vz):
            it = new(cls)
            it.__dict__.update(velocity=velocity[r], facing=None, gait=g, actions=empty, _speed=sp,
                               _xz=(x, z))  # (frozen)
            out.append(it)
        return out

    # -- derived quantities ---------------------------------------------------------------

    @property
    def speed(self) -> float:
        """Planar (x, z) speed in m/s (computed once: the intent is immutable)."""
        sp = self.__dict__.get("_speed")
        if sp is None:
            v = self.velocity
            sp = math.hypot(v[0], v[2])
            object.__setattr__(self, "_speed", sp)
        return sp

    @property
    def planar_velocity(self) -> tuple[float, float]:
        """``(vx, vz)``: the velocity's ground components in m/s, as floats (read once: the
        intent is immutable)."""
        xz = self.__dict__.get("_xz")
        if xz is None:
            vx, _, vz = self.velocity.tolist()
            xz = (vx, vz)
            object.__setattr__(self, "_xz", xz)
        return xz

    @property
    def direction(self) -> np.ndarray:
        """Unit planar direction of travel ``[3]``; zeros when standing still."""
        if self.speed < STILL_SPEED:
            return np.zeros(3)
        return _planar_unit(self.velocity)

    @property
    def moving(self) -> bool:
        """Whether the planar speed is at least :data:`STILL_SPEED`."""
        return self.speed >= STILL_SPEED

    @property
    def strafing(self) -> bool:
        """Whether a facing is set (the character keeps it whatever the direction of travel)."""
        return self.facing is not None

    def facing_or(self, current: ArrayLike) -> np.ndarray:
        """The facing to aim for: :attr:`facing`, else the direction of travel, else ``current``."""
        if self.facing is not None:
            return np.array(self.facing)
        if self.moving:
            return self.direction
        return _planar_unit(vec3(current, "current facing"))

    def with_(self, **changes) -> Intent:
        """A copy with some fields replaced (``dataclasses.replace``)."""
        return replace(self, **changes)

    def changed_sharply(self, other: Intent, angle_deg: float = 45.0, speed_delta: float = 1.0) -> bool:
        """Whether going from ``self`` to ``other`` (or back) warrants an immediate search.

        True when the planar speed changes by at least ``speed_delta`` m/s, the direction
        of travel turns by at least ``angle_deg`` (both moving), the desired facing turns
        by at least ``angle_deg`` or strafing is switched on/off, the gait label changes,
        or the set of actions changes. Symmetric in its two intents.
        """
        if abs(self.speed - other.speed) >= speed_delta:
            return True
        if self.gait != other.gait or self.actions != other.actions:
            return True
        if self.moving and other.moving and _angle_deg(self.direction, other.direction) >= angle_deg:
            return True
        if (self.facing is None) != (other.facing is None):
            return True
        return self.facing is not None and _angle_deg(self.facing, other.facing) >= angle_deg

    # -- equality (arrays make the dataclass default unusable) ---------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Intent):
            return NotImplemented
        same_facing = (self.facing is None and other.facing is None) or (
            self.facing is not None and other.facing is not None and np.array_equal(self.facing, other.facing)
        )
        return (
            np.array_equal(self.velocity, other.velocity)
            and same_facing
            and self.gait == other.gait
            and self.actions == other.actions
        )

    def __hash__(self) -> int:
        f = None if self.facing is None else tuple(self.facing.tolist())
        return hash((tuple(self.velocity.tolist()), f, self.gait, self.actions))

    def __repr__(self) -> str:
        v = ", ".join(f"{c:.3g}" for c in self.velocity)
        f = "None" if self.facing is None else "[" + ", ".join(f"{c:.3g}" for c in self.facing) + "]"
        acts = "{" + ", ".join(sorted(self.actions)) + "}"
        return f"Intent(velocity=[{v}], facing={f}, gait={self.gait!r}, actions={acts})"


#: the gaits' indices (:class:`IntentRows`'s ``gaits``)
GAIT_INDEX = {g: k for k, g in enumerate(GAITS)}

#: up to this many intents, :meth:`IntentRows.of` packs their goals one tuple each
_FEW = 16


def intent_goal_tuple(intent: Intent) -> tuple[float, float, float, float, float]:
    """An intent's goal, the numbers a simulated root heads for: its velocity ``x, z``
    (m/s), its facing ``x, z`` and 1 if it has one (else zeros)."""
    vx, _, vz = intent.velocity.tolist()
    f = intent.facing
    if f is None:
        return (vx, vz, 0.0, 0.0, 0.0)
    fx, _, fz = f.tolist()
    return (vx, vz, fx, fz, 1.0)


def _row_of(intent: Intent) -> tuple[tuple, int, bool]:
    """An intent's row of :class:`IntentRows` (its goal tuple, gait index, whether it is
    plain), computed once and kept on the (immutable) intent."""
    if not isinstance(intent, Intent):
        raise TypeError(f"an intent must be an Intent, got {type(intent).__name__}")
    row = intent.__dict__.get("_row")
    if row is None:
        row = (intent_goal_tuple(intent), GAIT_INDEX.get(intent.gait, 0), type(intent) is Intent and not intent.actions)
        object.__setattr__(intent, "_row", row)
    return row


def intent_goals(intents: Sequence[Intent]) -> np.ndarray:
    """:func:`intent_goal_tuple` of many intents at once: ``[n, 5]``."""
    if isinstance(intents, IntentRows):
        return intents.goals
    out = np.zeros((len(intents), 5))
    if not len(intents):
        return out
    vel = np.concatenate([it.velocity for it in intents]).reshape(-1, 3)  # (4x np.array's speed on small arrays)
    out[:, 0], out[:, 1] = vel[:, 0], vel[:, 2]
    for k in [k for k, it in enumerate(intents) if it.facing is not None]:
        out[k] = intent_goal_tuple(intents[k])
    return out


class IntentRows(Sequence):
    """The intents of many agents as columns, for compiled stages over rows; the
    :class:`Intent` objects are made when read.

    Attributes:
        goals: ``[n, 5]`` float64, each intent's goal (:func:`intent_goal_tuple`: velocity
            x, z in m/s; facing x, z; 1 if it has a facing).
        gaits: ``[n]`` int64, each one's gait (an index of :data:`GAITS`).
        plain: ``[n]`` bool, whether it is a plain :class:`Intent` with no actions (then
            ``goals`` and ``gaits`` say all of it: velocity ``y`` is 0).

    ``rows[k]`` is intent ``k`` (the object given, or one made from the columns once)."""

    __slots__ = ("_objects", "gaits", "goals", "plain")

    def __init__(self, goals: np.ndarray, gaits: np.ndarray, plain: np.ndarray, objects: list):
        self.goals, self.gaits, self.plain, self._objects = goals, gaits, plain, objects

    @classmethod
    def of(cls, intents: Sequence[Intent]) -> IntentRows:
        """The columns of ``intents`` (any :class:`Intent` objects, kept as they are)."""
        if isinstance(intents, IntentRows):
            return intents
        if len(intents) <= _FEW:  # (a few characters: each intent's row, kept on it, beats the array calls)
            rows = [_row_of(it) for it in intents]
            return cls(np.array([r[0] for r in rows], dtype=np.float64).reshape(-1, 5),
                       np.array([r[1] for r in rows], dtype=np.int64), np.array([r[2] for r in rows], dtype=bool),
                       list(intents))
        plain = [type(it) is Intent and not it.actions for it in intents]
        if not all(plain) and not all(isinstance(it, Intent) for it in intents):
            bad = next(it for it in intents if not isinstance(it, Intent))
            raise TypeError(f"an intent must be an Intent, got {type(bad).__name__}")
        gaits = [GAIT_INDEX.get(it.gait, 0) for it in intents]
        return cls(intent_goals(intents), np.array(gaits, dtype=np.int64), np.array(plain, dtype=bool), list(intents))

    @classmethod
    def planar(cls, velocity: np.ndarray, gaits: np.ndarray) -> IntentRows:
        """Plain intents moving at ``velocity [n, 2]`` (x, z, m/s, finite) facing the
        direction of travel, with ``gaits [n]`` (indices of :data:`GAITS`): what a steered
        crowd wants, without an object per agent until one is read."""
        n = len(velocity)
        goals = np.zeros((n, 5))
        goals[:, :2] = velocity
        return cls(goals, np.asarray(gaits, dtype=np.int64), np.ones(n, dtype=bool), [None] * n)

    def take(self, ks: Sequence[int]) -> IntentRows:
        """Rows ``ks`` of these (in that order)."""
        ks = np.asarray(ks, dtype=np.int64)
        return IntentRows(self.goals[ks], self.gaits[ks], self.plain[ks], [self._objects[k] for k in ks.tolist()])

    def with_goals(self, goals: np.ndarray, changed: np.ndarray) -> IntentRows:
        """These intents with ``goals [n, 5]`` instead; ``changed [n]`` (bool): the plain
        ones whose goal changed, made again from their new columns when read."""
        objects = [None if c else it for c, it in zip(changed.tolist(), self._objects)]
        return IntentRows(goals, self.gaits, self.plain, objects)

    def __len__(self) -> int:
        return len(self._objects)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        it = self._objects[k]
        if it is None:
            vx, vz, fx, fz, has_facing = self.goals[k].tolist()
            it = self._objects[k] = Intent.planar(vx, vz, GAITS[self.gaits[k]],
                                                  facing=(fx, fz) if has_facing else None)
        return it
