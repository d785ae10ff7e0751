"""Messages from the page: schemas, validation, size and rate limits.

Every text message from the page is one JSON object with a ``"type"`` and, optionally,
an integer ``"seq"`` that the server echoes in its reply (``ack``/``error``). Each type
has a schema below: required and optional fields, their types, ranges and lengths;
unknown fields are refused. :func:`validate` returns the cleaned message (numbers as
floats/ints, vectors as tuples) or raises :class:`MessageError`, which the server turns
into ``{"type": "error", "code": ..., "message": ..., "seq": ...}`` without ending the
session. Binary messages from the page are refused the same way. The field types and
the bounds shared with scenario files (coordinates, controls, speeds, obstacles, ...) are
:mod:`motionmatch.validation`'s.

Limits (:class:`Limits`): the size of one message (256 KiB of text), a token bucket of
messages per second (rate and burst), a second one of server time (each message is
charged what validating and carrying it out cost: a tab may use a share of a core, then
its messages are refused until it has paid), the messages and bytes a tab may have
waiting (:mod:`motionmatch.viewer.inbox`), the replies waiting for a slow page
(:mod:`motionmatch.viewer.outbox`), the sizes of lists inside messages (path points,
files, variants) and the seconds of a drawn path.

Message types (client -> server); vectors on the ground are ``[x, z]`` metres:

=================  ======================================================================
hello              ``client`` (str): optional greeting.
key                ``key`` (str: w a s d up down shift j p c q, browser codes accepted;
                   q held strafes: the character faces the camera's forward direction),
                   ``down`` (bool), ``yaw`` (camera heading, rad, optional). Real key-down
                   and key-up events drive the selected character. A mode key (j p c)
                   for a mode the database cannot play is not passed on; its key-down
                   is answered with ``mode_unavailable`` (below).
keys               ``held`` (list of keys), ``yaw``: the full set of held keys (e.g. []
                   when the page loses focus); mode keys as for ``key``.
camera             ``yaw``: camera heading (rad): keys are camera-relative.
view               ``polygon`` ([[x, z], ...], 3..8 points in order, convex; or null:
                   everything): the ground the camera sees. The characters more than 2 m
                   outside it (and not selected) are sent a sixth of the ticks, in frames
                   flagged ``FLAG_PARTIAL``.
select             ``id``: the character the keyboard steers and the camera follows.
path               ``points`` ([[t, x, z], ...], 2..4096, drawing seconds and metres),
                   ``mode`` (``local``/``global``: the timed following; ``drawn``: the ETH
                   paper's drawn-trajectory control, straight to the nearest point and
                   along it at the walking speed, Shift runs, W/A/S/D take over), ``id``
                   (optional), ``scale`` (drawing seconds per world second, default 1:
                   drawing speed = walking speed), ``loop`` (``drawn``: go round again;
                   absent or null: when the drawing is closed), ``facing`` (local/global:
                   ``tangent``, the default; ``joystick``: turned ``joystick_deg`` degrees
                   right, -180..180; ``net``: DirectionNet, if this machine has trained it).
stick              ``left``, ``right`` ([x, y] each in -1..1, x right, y forward: the
                   gamepad's sticks; the right one sets the facing: strafing),
                   ``sprint`` (bool), ``yaw``: drive the selected character (both at
                   rest: the keys again).
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
                   ``anticipation`` (0..4 each, all optional).
obstacle_add       ``obstacle`` (see below); the reply names its ``id``.
obstacle_update    ``id``, ``obstacle``.
obstacle_remove    ``id``.
scene_clear        (no fields).
scene_set          ``scene``: ``{"obstacles": [...]}`` (a file the user picked in the page).
scene_save         (no fields): the reply carries the scene as JSON (with its terrain).
terrain_set        ``terrain``: a scenario file's ``"terrain"`` object with its heights
                   inline (``{"height_field": {"origin", "cell", "heights"}}`` or
                   ``{"flat": {}}``; a file the user picked in the page; no file names:
                   the page names no file on the server), or null: the flat floor. Its
                   fields are checked as a scenario's (``terrain.height_field.cell must
                   be ...``); the reply and a ``terrain`` message carry the ground as the
                   page draws it (:mod:`motionmatch.viewer.terrain`).
scenario_load      ``file`` (an id from ``files``): obstacles and agents of a scenario.
files              ``kind`` (``bvh``, ``scenario``, ``path``, ``keypoints``): list what the
                   page may load (only from the configured data folders).
genmm              ``examples`` (1..8 file ids), ``seconds`` (1..120), ``seed`` (int),
                   ``loop`` (bool), ``keyframes`` (file id, optional), ``variants`` (1..8).
genmm_clear        (no fields).
export             ``id``, ``format`` (``bvh``/``glb``): the session's motion of that
                   character as a download: BVH, or binary glTF (skinned body, skeleton,
                   animation).
export_bvh         ``id``: the same as ``export`` with ``format`` ``bvh``.
debug              ``enabled`` (bool), ``candidates`` (0..16, optional).
pose_source        ``kind`` (``off``/``webcam``/``file``), ``file`` (optional).
pose_keypoints     ``keypoints`` ([[x, y, score], ...], up to 64): one webcam frame.
rig_clear          (no fields): "Use the mannequin": the motion-matching characters on
                   the database's skeleton again (a rig is sent by HTTP, not in a
                   message: ``POST /api/rig/{session}``, :mod:`motionmatch.viewer.server`).
=================  ======================================================================

Which modes the database can play: the ``welcome`` message's ``modes`` (``{mode:
{"available": bool, "reason": one line or null, "seconds": float}}`` for ``idle``,
``locomotion``, ``jump``, ``dance``, ``creep``) and ``mode_keys`` (``{"j": "jump", "p":
"dance", "c": "creep"}``); a key-down of a mode key the database cannot play gets
``{"type": "mode_unavailable", "mode", "key", "reason", "message"}`` (e.g. ``"creep: this
database has no crawling clip ..."``), and the character is not put in that mode.

Obstacles use the scenario file's format (:mod:`motionmatch.environment.scenario`):
``{"shape": "disk" | "box" | "ellipse", "center": [x, z], "radius": r, "size": [along,
across], "axes": [a, b], "yaw_deg": d, "height": [bottom, top], "velocity": [vx, vz],
"path": [[t, x, z], ...]}`` (a moving obstacle: constant velocity, or timed waypoints).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from motionmatch.validation import (
    CAMERA_YAW,
    DIRECTION,
    GROUP_SIZE,
    KEY_LEN,
    KEYS_HELD,
    NAME_LEN,
    OBSTACLES,
    PATH_POINTS,
    PATH_SCALE,
    SEED,
    SPACING,
    SPEED,
    WAYPOINTS,
    Bool,
    Custom,
    Field,
    FieldError,
    List,
    Num,
    Obj,
    Str,
    TimedPoints,
    Vec,
    check_fields,
    controls,
    point,
    validate_obstacle,
)
from motionmatch.viewer.terrain import page_terrain

__all__ = ["SCHEMAS", "Limits", "MessageError", "RateLimiter", "check_size", "parse", "validate", "validate_obstacle"]


class MessageError(FieldError):
    """A message the server refuses; ``code`` is one of ``invalid``, ``too_large``,
    ``rate_limited``, ``busy`` (the tab's queue is full), ``unknown_type``, ``binary``,
    ``bad_json``; ``seq`` is the refused message's, for the reply."""

    def __init__(self, code: str, message: str, seq: int | None = None):
        super().__init__(code, message)
        self.seq = seq


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 256 * 1024
    rate: float = 120.0          # messages per second, sustained
    burst: float = 240.0         # messages at once
    path_points: int = PATH_POINTS
    obstacles: int = OBSTACLES
    characters: int = 200
    variants: int = 8
    examples: int = 8
    cost_rate: float = 0.25      # seconds of server time per second a tab's messages may use (a quarter of a core)
    cost_burst: float = 0.5      # seconds of it at once
    cost_debt: float = 0.25      # the most a tab owes after one very expensive message (its next ones wait 1 s)
    tick_share: float = 0.5      # of a 60 Hz tick, the most spent on messages before the tick steps (one at least)
    queued_messages: int = 256   # messages of a tab waiting for its session
    queued_bytes: int = 1024 * 1024  # their text
    outbox_bytes: int = 8 * 1024 * 1024  # replies waiting for a page that reads slowly (pose frames: the newest)
    path_seconds: float = 120.0  # seconds of drawing in one path (its cost grows with them)


_OBSTACLE = Custom(validate_obstacle)


def _scene(v, where):
    o = Obj({"obstacles": List(_OBSTACLE, 0, Limits.obstacles, optional=True, default=[]),
             "name": Str(128, optional=True), "description": Str(2000, optional=True)}).check(v, where)
    return {"obstacles": o["obstacles"] or []}


_FILE_ID = Str(512)
_KEY = Str(KEY_LEN)
_ID = Num(0, 65535, integer=True)
_YAW = Num(*CAMERA_YAW, optional=True)

SCHEMAS: dict[str, dict[str, Field]] = {
    "hello": {"client": Str(128, optional=True)},
    "key": {"key": _KEY, "down": Bool(), "yaw": _YAW},
    "keys": {"held": List(_KEY, 0, KEYS_HELD), "yaw": _YAW},
    "camera": {"yaw": Num(*CAMERA_YAW)},
    "view": {"polygon": List(point(), 3, 8, optional=True)},
    "select": {"id": _ID},
    "path": {"points": TimedPoints(2, Limits.path_points),
             "mode": Str(16, ("local", "global", "drawn"), optional=True, default="local"),
             "id": Num(0, 65535, integer=True, optional=True), "scale": Num(*PATH_SCALE, optional=True, default=1.0),
             "loop": Bool(optional=True),
             "facing": Str(16, ("tangent", "joystick", "net"), optional=True, default="tangent"),
             "joystick_deg": Num(-180.0, 180.0, optional=True, default=0.0)},
    "stick": {"left": Vec(2, -1.0, 1.0), "right": Vec(2, -1.0, 1.0, optional=True, default=(0.0, 0.0)),
              "sprint": Bool(optional=True, default=False), "yaw": _YAW},
    "path_cancel": {"id": Num(0, 65535, integer=True, optional=True)},
    "pause": {"paused": Bool()},
    "step": {"frames": Num(1, 600, integer=True, optional=True, default=1)},
    "scrub": {"back": Num(0, 65535, integer=True)},
    "add_character": {"position": point(optional=True, default=(0.0, 0.0)),
                      "facing": Vec(2, *DIRECTION, optional=True), "name": Str(NAME_LEN, optional=True)},
    "remove_character": {"id": _ID},
    "spawn_group": {"count": Num(1, GROUP_SIZE, integer=True), "center": point(),
                    "spacing": Num(*SPACING, optional=True, default=1.2),
                    "target": point(), "speed": Num(*SPEED, optional=True, default=1.3),
                    "via": List(point(), 0, WAYPOINTS, optional=True)},
    "controls": {"id": Num(0, 65535, integer=True, optional=True), **controls().fields},
    "obstacle_add": {"obstacle": _OBSTACLE},
    "obstacle_update": {"id": _ID, "obstacle": _OBSTACLE},
    "obstacle_remove": {"id": _ID},
    "scene_clear": {},
    "scene_set": {"scene": Custom(_scene)},
    "scene_save": {},
    "terrain_set": {"terrain": Custom(page_terrain, optional=True)},
    "scenario_load": {"file": _FILE_ID},
    "files": {"kind": Str(16, ("bvh", "scenario", "path", "keypoints"))},
    "genmm": {"examples": List(_FILE_ID, 1, Limits.examples), "seconds": Num(1, 120, optional=True, default=10.0),
              "seed": Num(*SEED, integer=True, optional=True, default=0),
              "loop": Bool(optional=True, default=False), "keyframes": Str(512, optional=True),
              "variants": Num(1, Limits.variants, integer=True, optional=True, default=3)},
    "genmm_clear": {},
    "export": {"id": _ID, "format": Str(8, ("bvh", "glb"), optional=True, default="bvh")},
    "export_bvh": {"id": _ID},
    "debug": {"enabled": Bool(), "candidates": Num(0, 16, integer=True, optional=True, default=5)},
    "pose_source": {"kind": Str(16, ("off", "webcam", "file")), "file": Str(512, optional=True)},
    "pose_keypoints": {"keypoints": List(Vec(3, -1e4, 1e4), 1, 64), "t": Num(0, 1e9, optional=True)},
    "rig_clear": {},
}


def check_size(text: str | bytes, limits: Limits = Limits()) -> None:
    """Refuse a binary message, or text over ``limits.max_bytes`` (before any parsing)."""
    if isinstance(text, (bytes, bytearray)):
        raise MessageError("binary", "binary messages are not accepted from the page; send JSON text")
    if len(text) > limits.max_bytes:
        raise MessageError("too_large", f"message of {len(text)} bytes exceeds the limit of {limits.max_bytes}")


def parse(text: str | bytes, limits: Limits = Limits()) -> dict:
    """Decode and validate one text message (see the module doc)."""
    check_size(text, limits)
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
        out = check_fields(body, SCHEMAS[kind], kind)
    except FieldError as e:
        raise MessageError(e.code, str(e), seq) from None
    out["type"] = kind
    out["seq"] = seq
    return out


class RateLimiter:
    """Token bucket: ``rate`` messages (or seconds of work) per second on average,
    ``burst`` at once. Thread-safe: one thread may ask while another charges."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = float(rate), float(burst), clock
        self.tokens = float(burst)
        self.t = clock()
        self.refused = 0
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
        self.t = now

    def allow(self, cost: float = 1.0) -> bool:
        """Take ``cost`` if the bucket holds it (else refuse and count)."""
        with self._lock:
            self._refill()
            if self.tokens >= cost:
                self.tokens -= cost
                return True
            self.refused += 1
            return False

    def charge(self, cost: float, floor: float | None = None) -> None:
        """Take ``cost`` spent already (work measured after the fact): the bucket may go
        into debt, down to ``floor`` (default ``-burst``), and :meth:`allow` refuses until
        it is paid back."""
        with self._lock:
            self._refill()
            self.tokens = max(self.tokens - cost, -self.burst if floor is None else floor)
