"""Timeline scripts: reproducible input for offline runs.

A script is a JSON object::

    {
      "duration": 20.0,
      "camera_yaw": 0.0,
      "events": [
        {"t": 0.0, "keys": ["w"]},
        {"t": 5.0, "keys": ["w", "shift"]},
        {"t": 8.0, "keys": ["d"]},
        {"t": 9.0, "keys": ["a"], "facing": [0.0, 1.0]},
        {"t": 10.0, "intent": {"velocity": [0.0, 2.0], "facing": [1.0, 0.0], "gait": "run"}},
        {"t": 12.0, "keys": []}
      ]
    }

* ``duration`` (seconds, > 0) is required; ``events`` is a list sorted by strictly
  increasing ``t`` (seconds, ``0 <= t <= duration``). Before the first event the
  character is idle.
* A ``keys`` event holds those keys (names as in :mod:`motionmatch.control.keyboard`,
  case-insensitive, aliases allowed) from ``t`` until the next event; they go through a
  :class:`~motionmatch.control.keyboard.KeyboardController`, so Up/Down steps of the
  target speed persist (a key counts as pressed again only if an event in between
  released it). ``camera_yaw`` (radians, default 0: W = +Z, D = -X) applies to keys.
  Holding ``q`` strafes: the character faces the camera's forward direction whatever
  the keys move it. A keys event may also give ``"facing"`` ``[x, z]`` (world axes, a
  non-zero ground direction; ``null``: face the direction of travel): the character
  keeps that facing while the keys move it (strafing, sideways or backwards).
* An ``intent`` event gives the :class:`~motionmatch.control.intent.Intent` directly,
  in world axes (no camera): ``velocity`` ``[x, z]`` or ``[x, y, z]`` m/s (or
  ``direction`` ``[x, z]`` plus ``speed``, or plus ``gait`` to use that gait's speed),
  ``facing`` ``[x, z]`` / ``[x, y, z]`` or ``null`` (face the direction of travel),
  ``gait`` (default: from the speed) and ``actions`` (list of jump/creep/dance/stop).
  While it is active the keyboard sees no keys.
* Other top-level fields are kept, unread, in :attr:`Script.extra`.

Problems raise :class:`ScriptError` naming the file, the event and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from motionmatch._limits import Refuse, loads_json, read_json
from motionmatch.control.intent import ACTIONS, GAITS, GaitSpeeds, Intent
from motionmatch.control.keyboard import KEYS, KeyboardController, normalize_key
from motionmatch.errors import MotionMatchError

_EPS = 1e-9
_EVENT_FIELDS = ("t", "keys", "intent", "facing")
_INTENT_FIELDS = ("velocity", "direction", "speed", "facing", "gait", "actions")


class ScriptError(MotionMatchError, ValueError):
    """A timeline script is malformed.

    Attributes:
        path: the file, or ``"<script>"`` for data parsed from memory.
        index: 0-based index of the offending event, or ``None`` for the whole script.
        reason: what is wrong and how to fix it.
    """

    def __init__(self, path: str | Path | None, index: int | None, message: str):
        self.path = str(path) if path is not None else "<script>"
        self.index = index
        self.reason = message
        where = self.path if index is None else f"{self.path}, event {index}"
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, eq=False)
class ScriptEvent:
    """One timeline event: at ``t`` either hold ``keys`` (canonical names; with ``facing``
    ``[3]``, a unit ground vector, the character keeps that facing while they move it)
    or set ``intent``."""

    t: float
    keys: frozenset[str] | None = None
    intent: Intent | None = None
    facing: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Script:
    """A parsed timeline (see the module docstring)."""

    duration: float
    events: tuple[ScriptEvent, ...]
    camera_yaw: float = 0.0
    path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def keyboard(self, **kwargs: Any) -> KeyboardController:
        """A fresh :class:`KeyboardController` with this script's camera yaw (``kwargs`` passed on)."""
        kwargs.setdefault("camera_yaw", self.camera_yaw)
        return KeyboardController(**kwargs)

    def event_index_at(self, t: float) -> int:
        """Index of the event active at time ``t`` (the last with ``event.t <= t``), -1 before the first."""
        idx = -1
        for i, ev in enumerate(self.events):
            if ev.t <= t + _EPS:
                idx = i
            else:
                break
        return idx

    def _step(self, kb: KeyboardController, idx: int, dt: float, memo: dict | None = None) -> Intent:
        ev = self.events[idx] if idx >= 0 else None
        if ev is not None and ev.intent is not None:
            kb.update((), dt)
            return ev.intent
        intent = kb.update(ev.keys if ev is not None else (), dt)
        if ev is None or ev.facing is None:
            return intent
        if memo is not None and (hit := memo.get(idx)) is not None and hit[0] is intent:
            return hit[1]  # (the keyboard's intent unchanged: the same strafing intent)
        strafed = Intent(intent.velocity, ev.facing, intent.gait, intent.actions)
        if memo is not None:
            memo[idx] = (intent, strafed)
        return strafed

    def intent_at(self, t: float, keyboard: KeyboardController | None = None) -> Intent:
        """The intent at time ``t``, replaying the events up to ``t``.

        ``keyboard`` (reset first, and given the script's camera yaw) lets you choose
        gait speeds, speed steps etc.; default :meth:`keyboard`.
        """
        kb = keyboard or self.keyboard()
        kb.reset()
        kb.camera_yaw = self.camera_yaw
        last = self.event_index_at(t)
        prev_t = 0.0
        intent = self._step(kb, -1, 0.0)
        for i in range(last + 1):
            intent = self._step(kb, i, max(self.events[i].t - prev_t, 0.0))
            prev_t = self.events[i].t
        if t > prev_t:
            intent = self._step(kb, last, t - prev_t)
        return intent

    def frame_count(self, dt: float) -> int:
        """Number of frames ``t = 0, dt, 2 dt, ...`` strictly before :attr:`duration`."""
        if not dt > 0:
            raise ValueError(f"dt must be > 0 seconds, got {dt!r}")
        return max(1, math.ceil(self.duration / dt - _EPS))

    def intents(self, dt: float, keyboard: KeyboardController | None = None) -> Iterator[tuple[float, Intent]]:
        """``(t, intent)`` for ``t = i * dt``, ``i = 0 .. frame_count(dt) - 1`` (a
        :meth:`playback` stepped at a fixed ``dt``, the first step at 0).

        Key events are fed to ``keyboard`` (reset first; default :meth:`keyboard`) once
        per frame, as a live controller would. The event active at a frame is the last
        one with ``t <= frame time``.
        """
        play = self.playback(keyboard)
        for i in range(self.frame_count(dt)):
            yield i * dt, play.intent(i * dt, dt if i else 0.0)

    def playback(self, keyboard: KeyboardController | None = None) -> ScriptPlayback:
        """The script played live, one step at a time (see :class:`ScriptPlayback`)."""
        return ScriptPlayback(self, keyboard)

    def direction_changes(
        self, min_angle_deg: float = 1.0, include_starts: bool = True, keyboard: KeyboardController | None = None
    ) -> list[tuple[float, np.ndarray]]:
        """Times at which the desired direction of travel changes, with the new unit direction ``[3]``.

        A change is recorded at an event whose intent moves in a direction at least
        ``min_angle_deg`` away from the previous one; with ``include_starts`` also where
        the character starts moving from standing still (stops are not recorded). Used to
        measure response times.
        """
        kb = keyboard or self.keyboard()
        kb.reset()
        kb.camera_yaw = self.camera_yaw
        out: list[tuple[float, np.ndarray]] = []
        prev_dir: np.ndarray | None = None
        prev_t = 0.0
        cos_min = math.cos(math.radians(min_angle_deg))
        for i, ev in enumerate(self.events):
            intent = self._step(kb, i, max(ev.t - prev_t, 0.0))
            prev_t = ev.t
            if not intent.moving:
                prev_dir = None
                continue
            d = intent.direction
            if prev_dir is None:
                if include_starts:
                    out.append((ev.t, d))
            elif float(np.dot(prev_dir, d)) < cos_min - 1e-12:
                out.append((ev.t, d))
            prev_dir = d
        return out


# ---------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _vector(value: Any, what: str, path: str | None, idx: int) -> np.ndarray:
    if not isinstance(value, list) or len(value) not in (2, 3) or not all(_is_number(c) for c in value):
        raise ScriptError(path, idx, f"{what} must be a list of 2 numbers [x, z] or 3 numbers [x, y, z], got {value!r}")
    return np.array([value[0], 0.0, value[1]] if len(value) == 2 else value, dtype=np.float64)


def _parse_intent(raw: Any, path: str | None, idx: int, gaits: GaitSpeeds) -> Intent:
    if not isinstance(raw, dict):
        raise ScriptError(path, idx, f'"intent" must be an object like {{"velocity": [0, 1.4]}}, got {raw!r}')
    unknown = sorted(set(raw) - set(_INTENT_FIELDS))
    if unknown:
        raise ScriptError(path, idx, f"unknown intent field(s) {unknown}; allowed: {', '.join(_INTENT_FIELDS)}")
    gait = raw.get("gait")
    if gait is not None and gait not in GAITS:
        raise ScriptError(path, idx, f'"gait" must be one of {", ".join(GAITS)}, got {gait!r}')
    actions = raw.get("actions", [])
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ScriptError(path, idx, f'"actions" must be a list of strings, got {actions!r}')
    bad = sorted({a for a in actions if a not in ACTIONS})
    if bad:
        raise ScriptError(path, idx, f"unknown action(s) {bad}; use some of {', '.join(sorted(ACTIONS))}")
    if "velocity" in raw and ("direction" in raw or "speed" in raw):
        raise ScriptError(path, idx, 'give either "velocity" or "direction" (+ "speed"), not both')
    if "speed" in raw and "direction" not in raw:
        raise ScriptError(path, idx, '"speed" needs a "direction" [x, z] to go with it')
    if "direction" in raw:
        d = _vector(raw["direction"], '"direction"', path, idx)
        d[1] = 0.0
        n = float(np.linalg.norm(d))
        if n < 1e-9:
            raise ScriptError(path, idx, '"direction" must be non-zero; use "velocity": [0, 0] to stand still')
        if "speed" in raw:
            speed = raw["speed"]
            if not _is_number(speed) or speed < 0:
                raise ScriptError(path, idx, f'"speed" must be a number >= 0 (m/s), got {speed!r}')
        else:
            if gait is None:
                raise ScriptError(path, idx, 'with "direction", give a "speed" (m/s) or a "gait"')
            speed = gaits.speed(gait)
        velocity = d / n * float(speed)
    else:
        velocity = _vector(raw.get("velocity", [0.0, 0.0]), '"velocity"', path, idx)
    facing = raw.get("facing")
    if facing is not None:
        facing = _vector(facing, '"facing"', path, idx)
        if math.hypot(facing[0], facing[2]) < 1e-9:
            raise ScriptError(
                path, idx, '"facing" must be a non-zero ground direction, or null to face the direction of travel'
            )
    if gait is None:
        gait = gaits.gait_for_speed(float(math.hypot(velocity[0], velocity[2])))
    return Intent(velocity, facing, gait, frozenset(actions))


def _keys_facing(value: Any, path: str | None, idx: int) -> np.ndarray | None:
    """A keys event's ``"facing"``: ``None`` (face the direction of travel) or a unit
    ground vector ``[3]``; a bad one raises :class:`ScriptError` naming the fix."""
    if value is None:
        return None
    f = _vector(value, '"facing"', path, idx)
    f[1] = 0.0
    n = float(np.hypot(f[0], f[2]))
    if n < 1e-9:
        raise ScriptError(path, idx, '"facing" must be a non-zero ground direction [x, z], e.g. [0, 1] for +Z, '
                                     'or null to face the direction of travel')
    f = f / n
    f.setflags(write=False)
    return f


def parse_script(data: Any, path: str | Path | None = None, gaits: GaitSpeeds | None = None) -> Script:
    """Validate decoded JSON ``data`` (or a JSON string) and build a :class:`Script`.

    ``path`` is only used in error messages; ``gaits`` gives the speeds of intent events
    that name a gait without a speed (and the default gait labels).
    """
    p = str(path) if path is not None else None
    g = gaits or GaitSpeeds()
    if isinstance(data, str):
        data = loads_json(data, p or "<script>", error=_refuse(p))
    if not isinstance(data, dict):
        raise ScriptError(p, None, 'a script must be a JSON object like {"duration": 10.0, "events": [...]}')
    if "duration" not in data:
        raise ScriptError(p, None, 'missing "duration"; add the length of the run in seconds, e.g. "duration": 20.0')
    duration = data["duration"]
    if not _is_number(duration) or duration <= 0:
        raise ScriptError(p, None, f'"duration" must be a number of seconds > 0, got {duration!r}')
    yaw = data.get("camera_yaw", 0.0)
    if not _is_number(yaw):
        raise ScriptError(p, None, f'"camera_yaw" must be a number (radians), got {yaw!r}')
    raw_events = data.get("events")
    if not isinstance(raw_events, list):
        raise ScriptError(p, None, f'"events" must be a list like [{{"t": 0.0, "keys": ["w"]}}], got {raw_events!r}')
    events: list[ScriptEvent] = []
    for i, raw in enumerate(raw_events):
        if not isinstance(raw, dict):
            raise ScriptError(p, i, f'each event must be an object like {{"t": 0.0, "keys": ["w"]}}, got {raw!r}')
        unknown = sorted(set(raw) - set(_EVENT_FIELDS))
        if unknown:
            raise ScriptError(p, i, f'unknown field(s) {unknown}; an event has "t" and one of "keys" or "intent" '
                                    '(and, with "keys", an optional "facing")')
        if "t" not in raw:
            raise ScriptError(p, i, 'missing "t"; add the event time in seconds, e.g. "t": 0.0')
        t = raw["t"]
        if not _is_number(t) or t < 0:
            raise ScriptError(p, i, f'"t" must be a number of seconds >= 0, got {t!r}')
        if t > duration:
            raise ScriptError(
                p,
                i,
                f'"t" = {t} is after the end of the script ("duration" = {duration}); raise "duration" or remove the event',
            )
        if events and t <= events[-1].t:
            raise ScriptError(
                p,
                i,
                f'events must be sorted by strictly increasing "t": {t} follows {events[-1].t}; reorder or merge them',
            )
        if ("keys" in raw) == ("intent" in raw):
            raise ScriptError(
                p, i, 'an event needs exactly one of "keys" (a list of key names) or "intent" (an object)'
            )
        if "keys" in raw:
            keys = raw["keys"]
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ScriptError(p, i, f'"keys" must be a list of key names like ["w", "shift"], got {keys!r}')
            names = set()
            for k in keys:
                try:
                    names.add(normalize_key(k))
                except ValueError:
                    raise ScriptError(
                        p, i, f"unknown key {k!r}; use {', '.join(KEYS)} (aliases: arrowup, lshift, space ...)"
                    ) from None
            facing = _keys_facing(raw.get("facing"), p, i)
            events.append(ScriptEvent(float(t), keys=frozenset(names), facing=facing))
        else:
            if "facing" in raw:
                raise ScriptError(p, i, '"facing" beside "intent" is ambiguous; put it inside the intent: '
                                        '"intent": {"velocity": [1, 0], "facing": [0, 1]}')
            events.append(ScriptEvent(float(t), intent=_parse_intent(raw["intent"], p, i, g)))
    extra = {k: v for k, v in data.items() if k not in ("duration", "events", "camera_yaw")}
    return Script(float(duration), tuple(events), float(yaw), p, extra)


def load_script(path: str | Path, gaits: GaitSpeeds | None = None) -> Script:
    """Read and validate a JSON timeline script (see the module docstring)."""
    path = Path(path)
    return parse_script(read_json(path, "script", error=_refuse(str(path))), path, gaits)


def _refuse(path: str | None) -> Refuse:
    """A refusal of the shared readers (:mod:`motionmatch._limits`) as a :class:`ScriptError`."""
    return lambda message: ScriptError(path, None, message.removeprefix(f"{path or '<script>'}: "))


class ScriptPlayback:
    """A :class:`Script` played live: :meth:`intent` for increasing times ``t`` (s), each
    step ``dt`` seconds after the previous one (any ``dt``: key events reach the keyboard
    once per step, as a live controller's would).

    Args:
        script: the timeline; keyboard: the keyboard it types on (reset here, given the
            script's camera yaw; default :meth:`Script.keyboard`).
    """

    def __init__(self, script: Script, keyboard: KeyboardController | None = None):
        self.script = script
        self.keyboard = keyboard or script.keyboard()
        self.keyboard.reset()
        self.keyboard.camera_yaw = script.camera_yaw
        self._index = -1
        self._memo: dict = {}

    def intent(self, t: float, dt: float) -> Intent:
        """The intent at time ``t``, ``dt`` seconds after the previous step: the last event
        with ``t_event <= t`` in force."""
        ev = self.script.events
        while self._index + 1 < len(ev) and ev[self._index + 1].t <= t + _EPS:
            self._index += 1
        return self.script._step(self.keyboard, self._index, dt, self._memo)
