"""One validation layer for what users hand us as JSON: the viewer's socket messages
(:mod:`motionmatch.viewer.messages`) and scenario files
(:mod:`motionmatch.environment.scenario`).

Field classes (:class:`Num`, :class:`Str`, :class:`Bool`, :class:`Vec`, :class:`Tuple`,
:class:`List`, :class:`TimedPoints`, :class:`Obj`, :class:`Custom`) check one decoded
JSON value and return it cleaned (numbers as floats or ints, vectors as tuples), or raise
:class:`FieldError` naming the field (``agents[2].start[0] must be between -1000 and
1000, got 1e+308``). Every number has a range: a value a real scene could need passes,
a huge, infinite or NaN one (or a 400-digit integer) is refused before it reaches the
simulation.

The bounds below are shared by both inputs, so that a scenario file and a page's
message that mean the same thing accept the same values. :func:`validate_obstacle`
checks one obstacle of the scenario format, for both.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from motionmatch.errors import MotionMatchError

__all__ = ["CAMERA_YAW", "CONTROL", "CONTROL_NAMES", "DIRECTION", "FPS", "GROUP_SIZE", "HEIGHT", "KEYS_HELD", "KEY_LEN", "OBSTACLES", "OBSTACLE_SPEED",
           "PATH_POINTS", "PATH_SCALE", "RADIUS", "SECONDS", "SEED", "SIZE", "SPACING", "SPEED", "WAYPOINTS", "WORLD",
           "YAW_DEG", "Bool", "Custom", "Field", "FieldError", "List", "Num", "Obj", "Str", "TimedPoints", "Tuple",
           "Vec", "check_fields", "controls", "point", "validate_obstacle"]

# ----------------------------------------------------------------------------- bounds
#: ground coordinates ``x`` and ``z`` (m) of every position, goal, waypoint, offset and path point
WORLD = (-1000.0, 1000.0)
#: each component of a facing direction (normalised where it is used)
DIRECTION = (-1.0, 1.0)
#: the high-level controls (Responsiveness, Continuity, Evasion, Anticipation); the
#: default Responsiveness is 2 and scenarios use 3
CONTROL = (0.0, 4.0)
CONTROL_NAMES = ("responsiveness", "continuity", "evasion", "anticipation")
#: walking speed (m/s) of steered agents and groups; the fastest is also the bound of a
#: scripted intent's speed and velocity
SPEED = (0.3, 6.0)
#: a camera's heading (rad): keys are camera-relative
CAMERA_YAW = (-1000.0, 1000.0)
#: names of keys, and how many are held at once
KEY_LEN = 32
KEYS_HELD = 16
#: seconds: a scenario's duration, an agent's start time, the times of timed points
SECONDS = (0.0, 3600.0)
#: frames per second of a scenario run
FPS = (1.0, 480.0)
#: distance (m) between the members of a group
SPACING = (0.5, 10.0)
#: drawing seconds per world second of a drawn path
PATH_SCALE = (0.05, 20.0)
#: random seeds
SEED = (0, 2**31 - 1)
#: members of one group, waypoints before a goal, points of a path, obstacles of a scene
GROUP_SIZE = 100
WAYPOINTS = 32
PATH_POINTS = 4096
OBSTACLES = 256
#: obstacles: radius and semi-axes, box extents, height range (m), yaw (degrees),
#: velocity components (m/s), timed waypoints
RADIUS = (0.01, 50.0)
SIZE = (0.01, 100.0)
HEIGHT = (-10.0, 100.0)
YAW_DEG = (-3600.0, 3600.0)
OBSTACLE_SPEED = (-20.0, 20.0)
OBSTACLE_WAYPOINTS = 256
#: characters in a name
NAME_LEN = 64


class FieldError(MotionMatchError, ValueError):
    """A value refused by a field; ``code`` is ``invalid`` or ``too_large`` (a list
    longer than its field allows), the message names the field."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def _at(where: str, text: str) -> str:
    return f"{where}: {text}" if where else text


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


# ----------------------------------------------------------------------------- field types
class Field(ABC):
    """One field of an object: ``optional`` fields may be absent or null (then ``default``)."""

    def __init__(self, optional: bool = False, default: Any = None):
        self.optional = optional
        self.default = default

    @abstractmethod
    def check(self, v: Any, where: str) -> Any:
        """``v`` validated (and normalised) for the field at ``where``; raises :class:`FieldError`."""


class Num(Field):
    """A number in ``[lo, hi]`` (a float, or an int with ``integer``); never NaN or infinite."""

    def __init__(self, lo: float = -1e6, hi: float = 1e6, *, integer: bool = False, **kw):
        super().__init__(**kw)
        self.lo, self.hi, self.integer = lo, hi, integer

    def check(self, v, where):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise FieldError("invalid", f"{where} must be a number, got {type(v).__name__}")
        # the range first: Python compares ints of any size with floats exactly, while
        # converting a 400-digit int to a float overflows
        if isinstance(v, float) and not math.isfinite(v):
            raise FieldError("invalid", f"{where} must be finite")
        if not self.lo <= v <= self.hi:
            shown = f"{v:g}" if isinstance(v, float) or abs(v) < 10**15 else f"an integer of {len(str(abs(v)))} digits"
            raise FieldError("invalid", f"{where} must be between {self.lo:g} and {self.hi:g}, got {shown}")
        if self.integer:
            if float(v) != int(v):
                raise FieldError("invalid", f"{where} must be an integer, got {v}")
            return int(v)
        return float(v)


class Str(Field):
    """A string of at most ``max_len`` characters, one of ``choices`` if given."""

    def __init__(self, max_len: int = NAME_LEN, choices: tuple[str, ...] | None = None, **kw):
        super().__init__(**kw)
        self.max_len, self.choices = max_len, choices

    def check(self, v, where):
        if not isinstance(v, str):
            raise FieldError("invalid", f"{where} must be a string, got {type(v).__name__}")
        if len(v) > self.max_len:
            raise FieldError("invalid", f"{where} is longer than {self.max_len} characters")
        if self.choices is not None and v not in self.choices:
            raise FieldError("invalid", f"{where} must be one of {', '.join(self.choices)}, got {v!r}")
        return v


class Bool(Field):
    """``true`` or ``false`` (not 0 / 1)."""

    def check(self, v, where):
        if not isinstance(v, bool):
            raise FieldError("invalid", f"{where} must be true or false, got {type(v).__name__}")
        return v


class Tuple(Field):
    """A list of fixed length, each item checked by its own field: a tuple."""

    def __init__(self, *items: Field, **kw):
        super().__init__(**kw)
        self.items = items

    def check(self, v, where):
        if not isinstance(v, (list, tuple)) or len(v) != len(self.items):
            raise FieldError("invalid", f"{where} must be a list of {len(self.items)} numbers")
        return tuple(f.check(x, f"{where}[{i}]") for i, (f, x) in enumerate(zip(self.items, v)))


class Vec(Tuple):
    """``n`` numbers in ``[lo, hi]``: a tuple."""

    def __init__(self, n: int = 2, lo: float = -1e4, hi: float = 1e4, **kw):
        self.n, self.item = n, Num(lo, hi)
        super().__init__(*[self.item] * n, **kw)


class List(Field):
    """A list of ``min_len`` to ``max_len`` items (more: ``too_large``), each checked by ``item``."""

    def __init__(self, item: Field, min_len: int = 0, max_len: int = 64, **kw):
        super().__init__(**kw)
        self.item, self.min_len, self.max_len = item, min_len, max_len

    def check(self, v, where):
        if not isinstance(v, list):
            raise FieldError("invalid", f"{where} must be a list, got {type(v).__name__}")
        if not self.min_len <= len(v) <= self.max_len:
            raise FieldError("invalid" if len(v) < self.min_len else "too_large",
                             f"{where} must have {self.min_len} to {self.max_len} items, got {len(v)}")
        return [self.item.check(x, f"{where}[{i}]") for i, x in enumerate(v)]


class TimedPoints(List):
    """Timed points ``[[t, x, z], ...]``: seconds (strictly increasing, within
    :data:`SECONDS`) and ground metres (within :data:`WORLD`)."""

    def __init__(self, min_len: int = 2, max_len: int = PATH_POINTS, **kw):
        super().__init__(Tuple(Num(*SECONDS), Num(*WORLD), Num(*WORLD)), min_len, max_len, **kw)

    def check(self, v, where):
        pts = super().check(v, where)
        for i, (a, b) in enumerate(itertools.pairwise(pts), 1):
            if not b[0] > a[0]:
                raise FieldError("invalid", f"{where}: times must increase (point {i} has t = {b[0]:g} "
                                            f"after {a[0]:g})")
        return pts


class Obj(Field):
    """An object with the named ``fields`` (unknown names refused): a dict of every field
    (``partial``: of the fields given, each optional), checked last by ``rule(cleaned,
    where)`` if given (rules across fields)."""

    def __init__(self, fields: Mapping[str, Field], *, partial: bool = False,
                 rule: Callable[[dict, str], None] | None = None, **kw):
        super().__init__(**kw)
        self.fields, self.partial, self.rule = dict(fields), partial, rule

    def check(self, v, where):
        if not isinstance(v, dict):
            raise FieldError("invalid", f"{where} must be an object, got {type(v).__name__}")
        out = check_fields(v, self.fields, where, partial=self.partial)
        if self.rule is not None:
            self.rule(out, where)
        return out


class Custom(Field):
    """A field checked by ``fn(value, where)``."""

    def __init__(self, fn: Callable[[Any, str], Any], **kw):
        super().__init__(**kw)
        self.fn = fn

    def check(self, v, where):
        return self.fn(v, where)


def check_fields(d: Mapping, fields: Mapping[str, Field], where: str = "", *, partial: bool = False) -> dict:
    """``d``'s values checked by ``fields``: a dict of every field, absent or null optional
    ones their default (``partial``: of the fields ``d`` gives, not null); an unknown or a
    missing required name is refused."""
    extra = sorted(set(d) - set(fields), key=str)
    if extra:
        raise FieldError("invalid", _at(where, f"unknown field(s) {', '.join(map(repr, extra))}; "
                                               f"known: {', '.join(sorted(fields)) or 'none'}"))
    out = {}
    for name, f in fields.items():
        if name not in d or d[name] is None:
            if partial:
                continue
            if not f.optional:
                raise FieldError("invalid", _at(where, f"missing field {name!r}"))
            out[name] = f.default
            continue
        out[name] = f.check(d[name], _join(where, name))
    return out


# ----------------------------------------------------------------------------- shared fields
def point(**kw) -> Vec:
    """A ground point or offset ``[x, z]`` (m)."""
    return Vec(2, *WORLD, **kw)


def controls(**kw) -> Obj:
    """The high-level controls, each optional."""
    return Obj({name: Num(*CONTROL, optional=True) for name in CONTROL_NAMES}, **kw)


# ----------------------------------------------------------------------------- obstacles
_SHAPES = ("disk", "box", "ellipse")
_OBSTACLE = {
    "shape": Str(16, _SHAPES),
    "center": point(),
    "radius": Num(*RADIUS, optional=True),
    "size": Vec(2, *SIZE, optional=True),
    "axes": Vec(2, *RADIUS, optional=True),
    "yaw_deg": Num(*YAW_DEG, optional=True, default=0.0),
    "height": Vec(2, *HEIGHT, optional=True),
    "velocity": Vec(2, *OBSTACLE_SPEED, optional=True),
    "path": TimedPoints(2, OBSTACLE_WAYPOINTS, optional=True),
    "name": Str(NAME_LEN, optional=True, default=""),
}


def validate_obstacle(v: Any, where: str = "obstacle") -> dict:
    """A cleaned obstacle dict of the scenario format
    (:mod:`motionmatch.environment.obstacles`) or :class:`FieldError`."""
    o = Obj(_OBSTACLE).check(v, where)
    shape = o["shape"]
    need = {"disk": "radius", "box": "size", "ellipse": "axes"}[shape]
    if o[need] is None:
        raise FieldError("invalid", f"{where}: a {shape} needs {need!r}")
    if o["height"] is not None and not o["height"][0] < o["height"][1]:
        raise FieldError("invalid", f"{where}.height must be [bottom, top] with bottom < top")
    out = {"shape": shape, "center": list(o["center"]), need: o[need] if need == "radius" else list(o[need])}
    if o["yaw_deg"]:
        out["yaw_deg"] = o["yaw_deg"]
    if o["height"] is not None:
        out["height"] = list(o["height"])
    if o["path"] is not None:
        out["path"] = [list(p) for p in o["path"]]
    elif o["velocity"] is not None and any(o["velocity"]):
        out["velocity"] = list(o["velocity"])
    if o["name"]:
        out["name"] = o["name"]
    return out
