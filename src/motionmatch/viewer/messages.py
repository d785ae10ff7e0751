"""Messages from the page: schemas, validation, size and rate limits.

Every text message from the page is one JSON object with a ``"type"`` and, optionally,
an integer ``"seq"`` that the server echoes in its reply (``ack``/``error``). Each type
has a schema below: required and optional fields, their types, ranges and lengths;
unknown fields are refused. :func:`validate` returns the cleaned message (numbers as
floats/ints, vectors as tuples) or raises :class:`MessageError`, which the server turns
into ``{"type": "error", "code": ..., "message": ..., "seq": ...}`` without ending the
session. Binary messages from the page are refused the same way.

Limits (:class:`Limits`): the size of one message (256 KiB of text), a token bucket of
messages per second (rate and burst), and the sizes of lists inside messages (path
points, files, variants).

Message types (client -> server); vectors on the ground are ``[x, z]`` metres:

=================  ======================================================================
hello              ``client`` (str): optional greeting.
key                ``key`` (str: w a s d up down shift j p c, browser codes accepted),
                   ``down`` (bool), ``yaw`` (camera heading, rad, optional). Real key-down
                   and key-up events drive the selected character.
keys               ``held`` (list of keys), ``yaw``: the full set of held keys (e.g. []
                   when the page loses focus).
camera             ``yaw``: camera heading (rad): keys are camera-relative.
select             ``id``: the character the keyboard steers and the camera follows.
path               ``points`` ([[t, x, z], ...], 2..4096, drawing seconds and metres),
                   ``mode`` (``local``/``global``), ``id`` (optional), ``scale`` (drawing
                   seconds per world second, default 1: drawing speed = walking speed).
path_cancel        ``id`` (optional).
pause              ``paused`` (bool).
step               ``frames`` (1..600): advance while paused.
scrub              ``back`` (frames back from the newest, 0..history): show the past.
add_character      ``position`` [x, z], ``facing`` [x, z] (optional), ``name``.
remove_character   ``id``.
spawn_group        ``count`` (1..100), ``center`` [x, z], ``spacing``, ``target`` [x, z]
                   (offset every member walks), ``speed``, ``via`` (optional offsets
                   [[x, z], ...] walked through first: a target path).
controls           ``id`` (optional), ``responsiveness``, ``continuity``, ``evasion``,
                   ``anticipation`` (0..2 each, all optional).
obstacle_add       ``obstacle`` (see below); the reply names its ``id``.
obstacle_update    ``id``, ``obstacle``.
obstacle_remove    ``id``.
scene_clear        (no fields).
scene_set          ``scene``: ``{"obstacles": [...]}`` (a file the user picked in the page).
scene_save         (no fields): the reply carries the scene as JSON.
scenario_load      ``file`` (an id from ``files``): obstacles and agents of a scenario.
files              ``kind`` (``bvh``, ``scenario``, ``path``, ``keypoints``): list what the
                   page may load (only from the configured data folders).
genmm              ``examples`` (1..8 file ids), ``seconds`` (1..120), ``seed`` (int),
                   ``loop`` (bool), ``keyframes`` (file id, optional), ``variants`` (1..8).
genmm_clear        (no fields).
export_bvh         ``id``: the session's motion of that character as a BVH download.
debug              ``enabled`` (bool), ``candidates`` (0..16, optional).
pose_source        ``kind`` (``off``/``webcam``/``file``), ``file`` (optional).
pose_keypoints     ``keypoints`` ([[x, y, score], ...], up to 64): one webcam frame.
=================  ======================================================================

Obstacles use the scenario file's format (:mod:`motionmatch.environment.scenario`):
``{"shape": "disk" | "box" | "ellipse", "center": [x, z], "radius": r, "size": [along,
across], "axes": [a, b], "yaw_deg": d, "height": [bottom, top], "velocity": [vx, vz],
"path": [[t, x, z], ...]}`` (a moving obstacle: constant velocity, or timed waypoints).
"""

from __future__ import annotations

import itertools
import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SCHEMAS", "Limits", "MessageError", "RateLimiter", "parse", "validate", "validate_obstacle"]


class MessageError(ValueError):
    """A message the server refuses; ``code`` is one of ``invalid``, ``too_large``,
    ``rate_limited``, ``unknown_type``, ``binary``, ``bad_json``."""

    def __init__(self, code: str, message: str, seq: int | None = None):
        super().__init__(message)
        self.code = code
        self.seq = seq


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 256 * 1024
    rate: float = 120.0          # messages per second, sustained
    burst: float = 240.0         # messages at once
    path_points: int = 4096
    obstacles: int = 256
    characters: int = 200
    variants: int = 8
    examples: int = 8


# ----------------------------------------------------------------------------- field types
class _Field(ABC):
    def __init__(self, optional: bool = False, default: Any = None):
        self.optional = optional
        self.default = default

    @abstractmethod
    def check(self, v: Any, where: str) -> Any:
        """``v`` validated (and normalised) for the field at ``where``; raises on bad input."""


class Num(_Field):
    def __init__(self, lo: float = -1e6, hi: float = 1e6, *, integer: bool = False, **kw):
        super().__init__(**kw)
        self.lo, self.hi, self.integer = lo, hi, integer

    def check(self, v, where):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise MessageError("invalid", f"{where} must be a number, got {type(v).__name__}")
        # the range first: Python compares ints of any size with floats exactly, while
        # converting a 400-digit int to a float overflows
        if isinstance(v, float) and not math.isfinite(v):
            raise MessageError("invalid", f"{where} must be finite")
        if not self.lo <= v <= self.hi:
            shown = f"{v:g}" if isinstance(v, float) or abs(v) < 10**15 else f"an integer of {len(str(abs(v)))} digits"
            raise MessageError("invalid", f"{where} must be between {self.lo:g} and {self.hi:g}, got {shown}")
        if self.integer:
            if float(v) != int(v):
                raise MessageError("invalid", f"{where} must be an integer, got {v}")
            v = int(v)
        return v if self.integer else float(v)


class Str(_Field):
    def __init__(self, max_len: int = 64, choices: tuple[str, ...] | None = None, **kw):
        super().__init__(**kw)
        self.max_len, self.choices = max_len, choices

    def check(self, v, where):
        if not isinstance(v, str):
            raise MessageError("invalid", f"{where} must be a string, got {type(v).__name__}")
        if len(v) > self.max_len:
            raise MessageError("invalid", f"{where} is longer than {self.max_len} characters")
        if self.choices is not None and v not in self.choices:
            raise MessageError("invalid", f"{where} must be one of {', '.join(self.choices)}, got {v!r}")
        return v


class Bool(_Field):
    def check(self, v, where):
        if not isinstance(v, bool):
            raise MessageError("invalid", f"{where} must be true or false, got {type(v).__name__}")
        return v


class Vec(_Field):
    def __init__(self, n: int = 2, lo: float = -1e4, hi: float = 1e4, **kw):
        super().__init__(**kw)
        self.n, self.item = n, Num(lo, hi)

    def check(self, v, where):
        if not isinstance(v, (list, tuple)) or len(v) != self.n:
            raise MessageError("invalid", f"{where} must be a list of {self.n} numbers")
        return tuple(self.item.check(x, f"{where}[{i}]") for i, x in enumerate(v))


class List(_Field):
    def __init__(self, item: _Field, min_len: int = 0, max_len: int = 64, **kw):
        super().__init__(**kw)
        self.item, self.min_len, self.max_len = item, min_len, max_len

    def check(self, v, where):
        if not isinstance(v, list):
            raise MessageError("invalid", f"{where} must be a list, got {type(v).__name__}")
        if not self.min_len <= len(v) <= self.max_len:
            raise MessageError("invalid" if len(v) < self.min_len else "too_large",
                               f"{where} must have {self.min_len} to {self.max_len} items, got {len(v)}")
        return [self.item.check(x, f"{where}[{i}]") for i, x in enumerate(v)]


class Obj(_Field):
    def __init__(self, fields: Mapping[str, _Field], **kw):
        super().__init__(**kw)
        self.fields = dict(fields)

    def check(self, v, where):
        if not isinstance(v, dict):
            raise MessageError("invalid", f"{where} must be an object, got {type(v).__name__}")
        return _check_fields(v, self.fields, where)


class Custom(_Field):
    def __init__(self, fn: Callable[[Any, str], Any], **kw):
        super().__init__(**kw)
        self.fn = fn

    def check(self, v, where):
        return self.fn(v, where)


def _check_fields(d: Mapping, fields: Mapping[str, _Field], where: str) -> dict:
    extra = sorted(set(d) - set(fields))
    if extra:
        raise MessageError("invalid", f"{where}: unknown field(s) {', '.join(map(repr, extra))}; "
                           f"known: {', '.join(sorted(fields)) or 'none'}")
    out = {}
    for name, f in fields.items():
        if name not in d or d[name] is None:
            if not f.optional:
                raise MessageError("invalid", f"{where}: missing field {name!r}")
            out[name] = f.default
            continue
        out[name] = f.check(d[name], f"{where}.{name}")
    return out


# ----------------------------------------------------------------------------- obstacles
_SHAPES = ("disk", "box", "ellipse")


def validate_obstacle(v: Any, where: str = "obstacle") -> dict:
    """A cleaned obstacle dict (scenario format) or :class:`MessageError`."""
    fields = {
        "shape": Str(16, _SHAPES),
        "center": Vec(2, -1000, 1000),
        "radius": Num(0.01, 50, optional=True),
        "size": Vec(2, 0.01, 100, optional=True),
        "axes": Vec(2, 0.01, 50, optional=True),
        "yaw_deg": Num(-3600, 3600, optional=True, default=0.0),
        "height": Vec(2, -10, 100, optional=True),
        "velocity": Vec(2, -20, 20, optional=True),
        "path": List(Vec(3, -1e4, 1e4), 2, 256, optional=True),
        "name": Str(64, optional=True, default=""),
    }
    o = Obj(fields).check(v, where)
    shape = o["shape"]
    need = {"disk": "radius", "box": "size", "ellipse": "axes"}[shape]
    if o[need] is None:
        raise MessageError("invalid", f"{where}: a {shape} needs {need!r}")
    if o["height"] is not None and not o["height"][0] < o["height"][1]:
        raise MessageError("invalid", f"{where}.height must be [bottom, top] with bottom < top")
    out = {"shape": shape, "center": list(o["center"]), need: o[need] if need == "radius" else list(o[need])}
    if o["yaw_deg"]:
        out["yaw_deg"] = o["yaw_deg"]
    if o["height"] is not None:
        out["height"] = list(o["height"])
    if o["path"] is not None:
        ts = [p[0] for p in o["path"]]
        if any(b <= a for a, b in itertools.pairwise(ts)):
            raise MessageError("invalid", f"{where}.path: times must increase")
        out["path"] = [list(p) for p in o["path"]]
    elif o["velocity"] is not None and any(o["velocity"]):
        out["velocity"] = list(o["velocity"])
    if o["name"]:
        out["name"] = o["name"]
    return out


def _obstacle_field(v, where):
    return validate_obstacle(v, where)


def _scene(v, where):
    o = Obj({"obstacles": List(Custom(_obstacle_field), 0, Limits.obstacles, optional=True, default=[]),
             "name": Str(128, optional=True), "description": Str(2000, optional=True)}).check(v, where)
    return {"obstacles": o["obstacles"] or []}


def _path_points(v, where):
    pts = List(Vec(3, -1e5, 1e5), 2, Limits.path_points).check(v, where)
    for i in range(1, len(pts)):
        if not pts[i][0] > pts[i - 1][0]:
            raise MessageError("invalid", f"{where}: times must increase (point {i} has t = {pts[i][0]:g} "
                               f"after {pts[i - 1][0]:g})")
    return pts


_FILE_ID = Str(512)
_KEY = Str(32)
_ID = Num(0, 65535, integer=True)
_YAW = Num(-1000, 1000, optional=True)
_CONTROL = Num(0.0, 2.0, optional=True)

SCHEMAS: dict[str, dict[str, _Field]] = {
    "hello": {"client": Str(128, optional=True)},
    "key": {"key": _KEY, "down": Bool(), "yaw": _YAW},
    "keys": {"held": List(_KEY, 0, 16), "yaw": _YAW},
    "camera": {"yaw": Num(-1000, 1000)},
    "select": {"id": _ID},
    "path": {"points": Custom(_path_points), "mode": Str(16, ("local", "global"), optional=True, default="local"),
             "id": Num(0, 65535, integer=True, optional=True), "scale": Num(0.05, 20, optional=True, default=1.0)},
    "path_cancel": {"id": Num(0, 65535, integer=True, optional=True)},
    "pause": {"paused": Bool()},
    "step": {"frames": Num(1, 600, integer=True, optional=True, default=1)},
    "scrub": {"back": Num(0, 65535, integer=True)},
    "add_character": {"position": Vec(2, -1000, 1000, optional=True, default=(0.0, 0.0)),
                      "facing": Vec(2, -1, 1, optional=True), "name": Str(64, optional=True)},
    "remove_character": {"id": _ID},
    "spawn_group": {"count": Num(1, 100, integer=True), "center": Vec(2, -1000, 1000),
                    "spacing": Num(0.5, 10, optional=True, default=1.2),
                    "target": Vec(2, -1000, 1000), "speed": Num(0.3, 6, optional=True, default=1.3),
                    "via": List(Vec(2, -1000, 1000), 0, 32, optional=True)},
    "controls": {"id": Num(0, 65535, integer=True, optional=True), "responsiveness": _CONTROL,
                 "continuity": _CONTROL, "evasion": _CONTROL, "anticipation": _CONTROL},
    "obstacle_add": {"obstacle": Custom(_obstacle_field)},
    "obstacle_update": {"id": _ID, "obstacle": Custom(_obstacle_field)},
    "obstacle_remove": {"id": _ID},
    "scene_clear": {},
    "scene_set": {"scene": Custom(_scene)},
    "scene_save": {},
    "scenario_load": {"file": _FILE_ID},
    "files": {"kind": Str(16, ("bvh", "scenario", "path", "keypoints"))},
    "genmm": {"examples": List(_FILE_ID, 1, Limits.examples), "seconds": Num(1, 120, optional=True, default=10.0),
              "seed": Num(0, 2**31 - 1, integer=True, optional=True, default=0),
              "loop": Bool(optional=True, default=False), "keyframes": Str(512, optional=True),
              "variants": Num(1, Limits.variants, integer=True, optional=True, default=3)},
    "genmm_clear": {},
    "export_bvh": {"id": _ID},
    "debug": {"enabled": Bool(), "candidates": Num(0, 16, integer=True, optional=True, default=5)},
    "pose_source": {"kind": Str(16, ("off", "webcam", "file")), "file": Str(512, optional=True)},
    "pose_keypoints": {"keypoints": List(Vec(3, -1e4, 1e4), 1, 64), "t": Num(0, 1e9, optional=True)},
}


def parse(text: str | bytes, limits: Limits = Limits()) -> dict:
    """Decode and validate one text message (see the module doc)."""
    if isinstance(text, (bytes, bytearray)):
        raise MessageError("binary", "binary messages are not accepted from the page; send JSON text")
    if len(text) > limits.max_bytes:
        raise MessageError("too_large", f"message of {len(text)} bytes exceeds the limit of {limits.max_bytes}")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise MessageError("bad_json", f"not valid JSON: {e}") from None
    return validate(obj)


def validate(obj: Any) -> dict:
    """Validate a decoded message; returns ``{"type": ..., "seq": ..., **fields}``."""
    if not isinstance(obj, dict):
        raise MessageError("invalid", "a message must be a JSON object with a 'type'")
    seq = obj.get("seq")
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < 2**53):
        raise MessageError("invalid", "'seq' must be a non-negative integer")
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in SCHEMAS:
        raise MessageError("unknown_type", f"unknown message type {kind!r}; known: {', '.join(sorted(SCHEMAS))}",
                           seq)
    body = {k: v for k, v in obj.items() if k not in ("type", "seq")}
    try:
        out = _check_fields(body, SCHEMAS[kind], kind)
    except MessageError as e:
        e.seq = seq
        raise
    out["type"] = kind
    out["seq"] = seq
    return out


class RateLimiter:
    """Token bucket: ``rate`` messages per second on average, ``burst`` at once."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = float(rate), float(burst), clock
        self.tokens = float(burst)
        self.t = clock()
        self.refused = 0

    def allow(self, cost: float = 1.0) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
        self.t = now
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        self.refused += 1
        return False
