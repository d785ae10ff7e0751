"""Keyboard and gamepad input turned into :class:`~motionmatch.control.intent.Intent` s.

Keys (the paper's, Sec. 3.4.1):

==============  =========================================================
W / A / S / D   move forward / left / back / right (relative to the camera)
Up / Down       raise / lower the target speed by one step (on press)
Shift           sprint (the gait's sprint speed)
J (or Space)    jump
P               dance
C               creep (at the creep speed)
F               punch (one on each press)
Q (held)        strafe: face the camera's forward direction whatever the direction
                of travel (W/A/S/D then walk forward, sideways and backwards)
==============  =========================================================

Axis conventions. World: Y up. ``camera_yaw`` (radians) is the heading of the camera's
view direction projected on the ground, measured about +Y from +Z: the camera looks
along ``forward = (sin yaw, 0, cos yaw)``. With ``camera_yaw = 0`` (the offline
convention) W moves toward +Z, S toward -Z, A toward +X and D toward -X: a character
facing +Z has +X on its left, so D moves it to its right. A positive yaw turns all four
directions counter-clockwise seen from above (+Z toward +X).

Combinations: two perpendicular keys move diagonally at the same speed (the direction is
normalised); opposite keys (W+S, A+D) cancel. Key names are case-insensitive and accept
common aliases: ``"ArrowUp"``, ``"up_arrow"``, ``"KeyW"`` (browser ``KeyboardEvent.code``
names), ``"lshift"``, ``"ShiftLeft"``, ``"space"`` ... (:func:`normalize_key`).

Strafing (issue 33): while Q is held the intent's facing is the camera's forward
direction (``facing = (sin yaw, 0, cos yaw)``), so the character keeps facing where the
camera looks while W/A/S/D move it in any direction (camera-relative, as the movement).

Gamepad: :func:`intent_from_stick` maps a left stick ``(x, y)`` with x to the right and
y forward (push up = positive; negate a device's y if its up is negative);
:func:`intent_from_sticks` adds the right stick: pushed past its deadzone it sets the
facing (camera-relative, like the left stick's direction), i.e. twin-stick strafing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from motionmatch.control.intent import STILL_SPEED, GaitSpeeds, Intent

#: Canonical key names understood by the mapping.
KEYS = ("w", "a", "s", "d", "up", "down", "shift", "j", "p", "c", "f", "q")

#: The key held to strafe (keep the camera-forward facing while moving any way).
STRAFE_KEY = "q"

_ALIASES = {
    "arrowup": "up",
    "uparrow": "up",
    "up_arrow": "up",
    "key_up": "up",
    "arrowdown": "down",
    "downarrow": "down",
    "down_arrow": "down",
    "key_down": "down",
    "lshift": "shift",
    "rshift": "shift",
    "leftshift": "shift",
    "rightshift": "shift",
    "shiftleft": "shift",
    "shiftright": "shift",
    "left_shift": "shift",
    "right_shift": "shift",
    "space": "j",
    "spacebar": "j",
    " ": "j",
}
for _k in ("w", "a", "s", "d", "j", "p", "c", "f", "q"):
    _ALIASES["key" + _k] = _k  # browser KeyboardEvent.code, e.g. "KeyW"

_ACTION_KEYS = {"j": "jump", "p": "dance", "c": "creep", "f": "punch"}

_MEMO_SIZE = 256  # held-key sets (and their intents) a keyboard remembers


def normalize_key(name: str) -> str:
    """Canonical name (one of :data:`KEYS`) of a key name or alias; ``ValueError`` if unknown."""
    if not isinstance(name, str):
        raise ValueError(f"key names must be strings, got {name!r}")
    low = name.lower()
    if low.strip():
        low = low.strip().replace("-", "_").replace(" ", "_")
    if low in KEYS:
        return low
    if low in _ALIASES:
        return _ALIASES[low]
    if low.replace("_", "") in _ALIASES:
        return _ALIASES[low.replace("_", "")]
    raise ValueError(
        f"unknown key {name!r}; use one of {', '.join(KEYS)} "
        "(aliases: arrowup/arrowdown, lshift/rshift, space = j, KeyW ...)"
    )


def normalize_keys(keys: Iterable[str], strict: bool = True) -> frozenset[str]:
    """Canonical names of ``keys``; unknown names raise (``strict``) or are dropped."""
    if isinstance(keys, str):
        keys = (keys,)
    out = set()
    for k in keys:
        try:
            out.add(normalize_key(k))
        except ValueError:
            if strict:
                raise
    return frozenset(out)


def camera_axes(camera_yaw: float) -> tuple[np.ndarray, np.ndarray]:
    """``(forward, left)`` unit ground-plane vectors for a camera heading (radians)."""
    s, c = math.sin(camera_yaw), math.cos(camera_yaw)
    return np.array([s, 0.0, c]), np.array([c, 0.0, -s])


def key_direction(keys: Iterable[str], camera_yaw: float = 0.0) -> np.ndarray:
    """Unit world direction ``[3]`` of the held W/A/S/D keys, or zeros (none held, or they cancel)."""
    k = normalize_keys(keys, strict=False)
    fwd = ("w" in k) - ("s" in k)
    left = ("a" in k) - ("d" in k)
    if fwd == 0 and left == 0:
        return np.zeros(3)
    f, lft = camera_axes(camera_yaw)
    d = fwd * f + left * lft
    return d / np.linalg.norm(d)


def intent_from_keys(
    keys: Iterable[str],
    camera_yaw: float = 0.0,
    speed: float | None = None,
    gaits: GaitSpeeds | None = None,
    strict: bool = False,
) -> Intent:
    """Stateless mapping of held keys to an :class:`Intent` (Up/Down are ignored here).

    ``speed`` is the normal target speed (default: the walk speed); Shift replaces it
    by the sprint speed and C by the creep speed. The facing follows the direction of
    travel (``facing=None``), unless Q (:data:`STRAFE_KEY`) is held: then it is the
    camera's forward direction (strafing), also when standing still (turn to face it).
    """
    g = gaits or GaitSpeeds()
    k = normalize_keys(keys, strict=strict)
    actions = frozenset(_ACTION_KEYS[x] for x in k if x in _ACTION_KEYS)
    facing = camera_axes(camera_yaw)[0] if STRAFE_KEY in k else None
    d = key_direction(k, camera_yaw)
    if not np.any(d):
        return Intent.idle(actions) if facing is None else Intent(np.zeros(3), facing, "idle", actions)
    if "c" in k:
        v, gait = g.creep, "walk"
    elif "shift" in k:
        v, gait = g.sprint, "sprint"
    else:
        v = g.walk if speed is None else float(speed)
        gait = g.gait_for_speed(v)
    if v < STILL_SPEED:
        return Intent.idle(actions) if facing is None else Intent(np.zeros(3), facing, "idle", actions)
    return Intent(d * v, facing, gait, actions)


class KeyboardController:
    """Keeps the keyboard's state (the target speed) across frames.

    Args:
        camera_yaw: camera heading in radians (see the module docstring); may be changed
            between frames (``controller.camera_yaw = ...``).
        gaits: gait speeds (Shift = ``gaits.sprint``, C = ``gaits.creep``).
        speed: initial target speed (default ``gaits.walk``).
        speed_step: change of the target speed per Up/Down press (m/s).
        min_speed, max_speed: clamp of the target speed (default ``gaits.sprint`` for max).
        repeat_interval: if set, a held Up/Down repeats its step every this many seconds
            after the press (like keyboard auto-repeat); ``None``: once per press.
        strict: raise on unknown key names instead of ignoring them.

    ``update(keys, dt)`` takes the set of keys held now and the time since the previous
    update, and returns the :class:`Intent`. Up/Down act on the frame they are pressed
    (a key absent from the previous update's set).
    """

    def __init__(
        self,
        camera_yaw: float = 0.0,
        gaits: GaitSpeeds | None = None,
        speed: float | None = None,
        speed_step: float = 0.5,
        min_speed: float = 0.5,
        max_speed: float | None = None,
        repeat_interval: float | None = None,
        strict: bool = False,
    ) -> None:
        self.camera_yaw = float(camera_yaw)
        self.gaits = gaits or GaitSpeeds()
        self.speed_step = float(speed_step)
        self.min_speed = float(min_speed)
        self.max_speed = float(self.gaits.sprint if max_speed is None else max_speed)
        if not 0 <= self.min_speed <= self.max_speed or self.speed_step <= 0:
            raise ValueError(
                f"need 0 <= min_speed <= max_speed and speed_step > 0, got {min_speed}, {self.max_speed}, {speed_step}"
            )
        if repeat_interval is not None and repeat_interval <= 0:
            raise ValueError(f"repeat_interval must be > 0 seconds or None, got {repeat_interval!r}")
        self.repeat_interval = repeat_interval
        self.strict = strict
        self._initial_speed = self.gaits.walk if speed is None else float(speed)
        self.reset()

    def reset(self) -> None:
        """Forget held keys and restore the initial target speed."""
        self.target_speed = min(max(self._initial_speed, self.min_speed), self.max_speed)
        self._held: dict[str, float] = {}
        # (held keys as given) -> their canonical names; (names, yaw, speed) -> the intent:
        # a held key set maps to one immutable Intent, built once
        self._names: dict[frozenset, frozenset[str]] = {}
        self._intents: dict[tuple, Intent] = {}

    def _steps(self, key: str, keys: frozenset[str], dt: float) -> int:
        if key not in keys:
            self._held.pop(key, None)
            return 0
        if key not in self._held:
            self._held[key] = 0.0
            return 1
        before = self._held[key]
        self._held[key] = after = before + dt
        if self.repeat_interval is None:
            return 0
        return int(math.floor(after / self.repeat_interval + 1e-9) - math.floor(before / self.repeat_interval + 1e-9))

    def update(self, keys: Iterable[str], dt: float = 0.0) -> Intent:
        """Intent for the keys held now; ``dt`` is the time since the previous update (seconds)."""
        if not math.isfinite(dt) or dt < 0:
            raise ValueError(f"dt must be finite and >= 0, got {dt!r}")
        raw = keys if isinstance(keys, frozenset) else frozenset((keys,) if isinstance(keys, str) else keys)
        k = self._names.get(raw)
        if k is None:
            k = normalize_keys(raw, strict=self.strict)
            if len(self._names) >= _MEMO_SIZE:
                self._names.clear()
            self._names[raw] = k
        if "up" in k or "down" in k or self._held:
            steps = self._steps("up", k, dt) - self._steps("down", k, dt)
            if steps:
                self.target_speed = min(max(self.target_speed + steps * self.speed_step, self.min_speed),
                                        self.max_speed)
        memo = (k, self.camera_yaw, self.target_speed, self.gaits)
        intent = self._intents.get(memo)
        if intent is None:
            intent = intent_from_keys(k, self.camera_yaw, self.target_speed, self.gaits)
            if len(self._intents) >= _MEMO_SIZE:
                self._intents.clear()
            self._intents[memo] = intent
        return intent


def intent_from_stick(
    x: float,
    y: float,
    camera_yaw: float = 0.0,
    deadzone: float = 0.15,
    sprint: bool | float = False,
    gaits: GaitSpeeds | None = None,
    actions: Iterable[str] = (),
) -> Intent:
    """Gamepad left stick to an :class:`Intent`.

    ``x`` is right, ``y`` forward (push up = +1), both in ``[-1, 1]``. A radial deadzone
    ignores magnitudes below ``deadzone``; beyond it the magnitude is rescaled to
    ``[0, 1]`` (clamped) and the speed rises linearly from ``gaits.walk`` to
    ``gaits.run``. ``sprint`` (a button, or a trigger value in ``[0, 1]`` counted as
    pressed from 0.5) uses ``gaits.sprint``. Directions are relative to ``camera_yaw``
    as for the keyboard: stick up = camera forward, stick right = camera right.
    """
    if not (math.isfinite(x) and math.isfinite(y)) or not 0 <= deadzone < 1:
        raise ValueError(f"need finite stick values and 0 <= deadzone < 1, got x={x!r}, y={y!r}, deadzone={deadzone!r}")
    g = gaits or GaitSpeeds()
    acts = frozenset(actions)
    d = stick_direction(x, y, camera_yaw, deadzone)
    if d is None:
        return Intent.idle(acts)
    amount = min((math.hypot(x, y) - deadzone) / (1.0 - deadzone), 1.0)
    if float(sprint) >= 0.5:
        return Intent(d * g.sprint, None, "sprint", acts)
    speed = g.walk + (g.run - g.walk) * amount
    return Intent(d * speed, None, g.gait_for_speed(speed), acts)


def stick_direction(x: float, y: float, camera_yaw: float = 0.0, deadzone: float = 0.15) -> np.ndarray | None:
    """Unit world direction ``[3]`` of a stick ``(x right, y forward)``, camera-relative
    (stick up = camera forward, right = camera right); ``None`` inside the radial
    ``deadzone`` (or for non-finite values)."""
    if not (math.isfinite(x) and math.isfinite(y)):
        return None
    mag = math.hypot(x, y)
    if mag <= deadzone:
        return None
    fwd, left = camera_axes(camera_yaw)
    return (y * fwd - x * left) / mag


def intent_from_sticks(
    left: tuple[float, float],
    right: tuple[float, float] = (0.0, 0.0),
    camera_yaw: float = 0.0,
    deadzone: float = 0.15,
    sprint: bool | float = False,
    gaits: GaitSpeeds | None = None,
    actions: Iterable[str] = (),
) -> Intent:
    """Both gamepad sticks to an :class:`Intent` (twin-stick strafing).

    The left stick moves as in :func:`intent_from_stick`. The right stick ``(x, y)`` (x
    right, y forward, in ``[-1, 1]``), pushed past ``deadzone``, sets the facing to its
    camera-relative direction whatever the direction of travel (strafing); inside the
    deadzone the facing follows the direction of travel (``None``). With the left stick
    at rest and the right one pushed, the character stands and turns to face it.
    """
    for name, (a, b) in (("left", left), ("right", right)):
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ValueError(f"the {name} stick must be two finite numbers, got {(a, b)!r}")
    it = intent_from_stick(left[0], left[1], camera_yaw, deadzone, sprint, gaits, actions)
    facing = stick_direction(right[0], right[1], camera_yaw, deadzone)
    if facing is None:
        return it
    return Intent(it.velocity, facing, it.gait, it.actions)
