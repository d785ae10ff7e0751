"""Scenario files: obstacles, agents, their inputs, duration (JSON).

A scenario is a JSON object (see ``scenarios/README.md`` for the full reference)::

    {
      "name": "corridor-narrowing",
      "description": "...", "expect": "what must happen",
      "duration": 14.0, "fps": 60,
      "obstacles": [
        {"shape": "box", "center": [0.6, 5.0], "size": [10.0, 0.4], "height": [0, 2]},
        {"shape": "disk", "center": [1.0, 2.0], "radius": 0.3},
        {"shape": "ellipse", "center": [0, 3], "axes": [0.5, 0.2], "yaw_deg": 30},
        {"shape": "box", "center": [0, 10], "size": [1, 1], "velocity": [0, -1.2]},
        {"shape": "disk", "center": [0, 0], "radius": 0.5, "path": [[0, 0, 9], [6, 0, 0]]}
      ],
      "agents": [
        {"name": "hero", "start": [0, 0], "facing": [0, 1],
         "script": {"events": [{"t": 0, "keys": ["w"]}]}},
        {"name": "b", "start": [0, 8], "facing": [0, -1], "path": [[0, 8], [0, -2]], "speed": 1.3},
        {"name": "c", "start": [3, 0], "goal": [3, 10], "speed": 1.3,
         "controls": {"responsiveness": 1.5}}
      ],
      "groups": [{"count": 10, "area": [[-2, -8], [2, -6]], "facing": [0, 1], "goal_offset": [0, 14],
                  "speed": 1.3, "spacing": 0.8, "seed": 0}],
      "penalty": {"threshold": 0.4, "exponent": 4},
      "search": {"method": "coherent-approx"},
      "controller": {"search_interval": 0.1667},
      "database": {"requires": ["jump", "creep"], "locomotion_tags": "!dance"},
      "regions": {"narrow": {"z": [4.0, 6.0]}}
    }

An agent's input is one of ``script`` (the timeline of ``motionmatch run``: keys or
intents, world axes), ``path`` (a polyline followed at ``speed``: the desired
trajectory is read ahead on the path), ``timed_path`` (a drawn path ``{"points": [[t, x,
z], ...]}`` or a path file, followed at the speed it was drawn with long-horizon matching
over the penalised search, as ``motionmatch follow --scene``), ``goal`` (crowd steering toward a point at
``speed``, through the waypoints ``via`` first) or nothing (standing). ``controls`` sets its high-level controls
(Responsiveness, Continuity, Evasion, Anticipation); ``environment: false`` makes it a
plain motion-matching character (ignores obstacles); ``start_time`` delays its input.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from motionmatch.environment.obstacles import Obstacle, ObstacleError
from motionmatch.environment.scene import Scene
from motionmatch.errors import MotionMatchError

__all__ = ["AgentSpec", "Scenario", "ScenarioError", "load_scenario", "parse_scenario"]

_TOP = {"name", "description", "expect", "duration", "fps", "obstacles", "agents", "groups", "penalty", "search",
        "controller", "database", "regions", "steering", "notes"}
_AGENT = {"name", "start", "facing", "script", "path", "timed_path", "goal", "via", "speed", "gait", "controls",
          "environment", "start_time", "tags", "loop"}
_GROUP = {"name", "count", "area", "facing", "goal_offset", "goal", "via", "speed", "spacing", "seed", "controls",
          "environment", "start_jitter"}
CONTROL_NAMES = ("responsiveness", "continuity", "evasion", "anticipation")


class ScenarioError(MotionMatchError, ValueError):
    """A scenario file is malformed; the message names the field."""


def _vec2(v, where: str) -> tuple[float, float]:
    try:
        a = tuple(float(x) for x in v)
    except (TypeError, ValueError):
        raise ScenarioError(f"{where}: expected [x, z], got {v!r}") from None
    if len(a) != 2 or not all(map(math.isfinite, a)):
        raise ScenarioError(f"{where}: expected [x, z], got {v!r}")
    return a


def _num(v, where: str, lo: float | None = None) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ScenarioError(f"{where}: expected a number, got {v!r}") from None
    if not math.isfinite(x) or (lo is not None and x < lo):
        raise ScenarioError(f"{where}: expected a finite number{'' if lo is None else f' >= {lo}'}, got {v!r}")
    return x


@dataclass
class AgentSpec:
    """One character of a scenario (see the module docstring)."""

    name: str
    start: tuple[float, float]
    facing: tuple[float, float] = (0.0, 1.0)
    script: dict | None = None
    path: np.ndarray | None = None
    goal: tuple[float, float] | None = None
    via: np.ndarray | None = None
    speed: float = 1.3
    gait: str = "walk"
    controls: dict = field(default_factory=dict)
    environment: bool = True
    start_time: float = 0.0
    tags: str | None = None
    loop: bool = False
    #: a drawn, timed path ``{"points": [[t, x, z], ...]}`` (seconds, metres; optional
    #: ``"scale"``, ``"rate"``), or the path of such a file (.json / .csv), followed with
    #: long-horizon matching over the penalised search
    timed_path: dict | str | None = None

    @property
    def input_kind(self) -> str:
        if self.script is not None:
            return "script"
        if self.timed_path is not None:
            return "timed_path"
        if self.path is not None:
            return "path"
        if self.goal is not None:
            return "goal"
        return "idle"

    def to_dict(self) -> dict:
        d: dict = {"name": self.name, "start": list(self.start), "facing": list(self.facing)}
        if self.script is not None:
            d["script"] = self.script
        if self.path is not None:
            d["path"] = self.path.tolist()
        if self.timed_path is not None:
            d["timed_path"] = self.timed_path
        if self.goal is not None:
            d["goal"] = list(self.goal)
        if self.via is not None:
            d["via"] = self.via.tolist()
        if self.input_kind in ("path", "goal"):
            d["speed"] = self.speed
        if self.gait != "walk":
            d["gait"] = self.gait
        if self.controls:
            d["controls"] = dict(self.controls)
        if not self.environment:
            d["environment"] = False
        if self.start_time:
            d["start_time"] = self.start_time
        if self.tags is not None:
            d["tags"] = self.tags
        if self.loop:
            d["loop"] = True
        return d


@dataclass
class Scenario:
    """A parsed scenario (see the module docstring)."""

    name: str
    duration: float
    fps: float = 60.0
    obstacles: list[Obstacle] = field(default_factory=list)
    agents: list[AgentSpec] = field(default_factory=list)
    penalty: dict = field(default_factory=dict)
    search: dict = field(default_factory=dict)
    controller: dict = field(default_factory=dict)
    database: dict = field(default_factory=dict)
    regions: dict = field(default_factory=dict)
    steering: dict = field(default_factory=dict)
    description: str = ""
    expect: str = ""
    source: str | None = None

    def scene(self) -> Scene:
        return Scene(self.obstacles)

    @property
    def frames(self) -> int:
        return round(self.duration * self.fps)

    def to_dict(self) -> dict:
        d = {"name": self.name, "description": self.description, "expect": self.expect, "duration": self.duration,
             "fps": self.fps, "obstacles": [o.to_dict() for o in self.obstacles],
             "agents": [a.to_dict() for a in self.agents]}
        for k in ("penalty", "search", "controller", "database", "regions", "steering"):
            if getattr(self, k):
                d[k] = getattr(self, k)
        return d

    def save(self, path: str | Path) -> Path:
        from motionmatch._files import atomic_write

        with atomic_write(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
        return Path(path)


def _timed_path(v, where: str, folder: Path | None) -> dict | str:
    """A timed path as given (its events checked), or a path file's absolute name
    (relative names are in the scenario file's folder)."""
    if isinstance(v, str):
        f = Path(v) if Path(v).is_absolute() or folder is None else folder / v
        if not f.is_file():
            raise ScenarioError(f"{where}: no such path file {f}")
        return str(f)
    if not isinstance(v, Mapping) or not isinstance(v.get("points"), list) or len(v["points"]) < 2:
        raise ScenarioError(f"{where}: expected {{\"points\": [[t, x, z], ...]}} (at least 2) or a path file name")
    for i, e in enumerate(v["points"]):
        if not (isinstance(e, (list, tuple)) and len(e) == 3 and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in e)):
            raise ScenarioError(f"{where}.points[{i}]: expected [t, x, z] (finite numbers), got {e!r}")
    return dict(v)


def _parse_agent(d: Mapping, where: str, folder: Path | None = None) -> AgentSpec:
    if not isinstance(d, Mapping):
        raise ScenarioError(f"{where}: expected an object")
    extra = sorted(set(d) - _AGENT)
    if extra:
        raise ScenarioError(f"{where}: unknown field(s) {extra}; known: {sorted(_AGENT)}")
    inputs = [k for k in ("script", "path", "timed_path", "goal") if d.get(k) is not None]
    if len(inputs) > 1:
        raise ScenarioError(f"{where}: give one input of script / path / timed_path / goal, got {inputs}")
    if "start" not in d:
        raise ScenarioError(f"{where}: 'start' [x, z] is required")
    a = AgentSpec(name=str(d.get("name", where)), start=_vec2(d["start"], f"{where}.start"))
    if d.get("facing") is not None:
        a.facing = _vec2(d["facing"], f"{where}.facing")
        if math.hypot(*a.facing) < 1e-9:
            raise ScenarioError(f"{where}.facing: must be a non-zero direction")
    if d.get("script") is not None:
        s = d["script"]
        if not isinstance(s, Mapping) or not isinstance(s.get("events"), list):
            raise ScenarioError(f"{where}.script: expected {{\"events\": [...]}} (the 'motionmatch run' format)")
        a.script = dict(s)
    if d.get("path") is not None:
        p = np.asarray([_vec2(v, f"{where}.path[{i}]") for i, v in enumerate(d["path"])], dtype=np.float64)
        if len(p) < 2:
            raise ScenarioError(f"{where}.path: needs at least 2 points")
        a.path = p
    if d.get("timed_path") is not None:
        a.timed_path = _timed_path(d["timed_path"], f"{where}.timed_path", folder)
    if d.get("goal") is not None:
        a.goal = _vec2(d["goal"], f"{where}.goal")
    if d.get("via") is not None:
        if a.goal is None:
            raise ScenarioError(f"{where}.via: waypoints need a goal")
        a.via = np.asarray([_vec2(v, f"{where}.via[{i}]") for i, v in enumerate(d["via"])], dtype=np.float64)
    a.speed = _num(d.get("speed", a.speed), f"{where}.speed", 0.0)
    a.gait = str(d.get("gait", "walk"))
    c = d.get("controls", {}) or {}
    if not isinstance(c, Mapping) or set(c) - set(CONTROL_NAMES):
        raise ScenarioError(f"{where}.controls: expected some of {CONTROL_NAMES}")
    a.controls = {k: _num(v, f"{where}.controls.{k}", 0.0) for k, v in c.items()}
    a.environment = bool(d.get("environment", True))
    a.start_time = _num(d.get("start_time", 0.0), f"{where}.start_time", 0.0)
    a.tags = d.get("tags")
    a.loop = bool(d.get("loop", False))
    return a


def _expand_group(g: Mapping, where: str, index: int) -> list[AgentSpec]:
    """A group: ``count`` agents on a jittered grid in ``area`` ([[x0, z0], [x1, z1]]) with
    ``spacing``, each heading to its start + ``goal_offset`` (or to ``goal`` plus its
    offset in the group), through the waypoints ``via`` first if given (e.g. in front of and
    behind a door), deterministic from ``seed``."""
    if not isinstance(g, Mapping):
        raise ScenarioError(f"{where}: expected an object")
    extra = sorted(set(g) - _GROUP)
    if extra:
        raise ScenarioError(f"{where}: unknown field(s) {extra}; known: {sorted(_GROUP)}")
    count = int(_num(g.get("count", 1), f"{where}.count", 1))
    try:
        (x0, z0), (x1, z1) = (_vec2(v, f"{where}.area") for v in g["area"])
    except (KeyError, TypeError, ValueError):
        raise ScenarioError(f"{where}.area: expected [[x0, z0], [x1, z1]]") from None
    spacing = _num(g.get("spacing", 0.8), f"{where}.spacing", 0.1)
    rng = np.random.default_rng(int(g.get("seed", index)))
    nx = max(1, int((abs(x1 - x0)) // spacing) + 1)
    nz = max(1, int((abs(z1 - z0)) // spacing) + 1)
    cells = [(i, j) for j in range(nz) for i in range(nx)]
    if count > len(cells):
        raise ScenarioError(f"{where}: {count} agents do not fit in the area at spacing {spacing} "
                            f"({len(cells)} places); enlarge the area or reduce the spacing")
    pick = sorted(rng.choice(len(cells), size=count, replace=False))
    jitter = _num(g.get("start_jitter", 0.15), f"{where}.start_jitter", 0.0)
    facing = _vec2(g.get("facing", (0.0, 1.0)), f"{where}.facing")
    off = _vec2(g["goal_offset"], f"{where}.goal_offset") if "goal_offset" in g else None
    goal = _vec2(g["goal"], f"{where}.goal") if "goal" in g else None
    if (off is None) == (goal is None):
        raise ScenarioError(f"{where}: give one of goal_offset / goal")
    via = None
    if g.get("via") is not None:
        via = np.asarray([_vec2(v, f"{where}.via[{i}]") for i, v in enumerate(g["via"])], dtype=np.float64)
    base = str(g.get("name", f"group{index}"))
    out = []
    cx, cz = 0.5 * (x0 + x1), 0.5 * (z0 + z1)
    for n, c in enumerate(pick):
        i, j = cells[c]
        x = min(x0, x1) + i * spacing + rng.uniform(-jitter, jitter)
        z = min(z0, z1) + j * spacing + rng.uniform(-jitter, jitter)
        gx, gz = (x + off[0], z + off[1]) if off is not None else (goal[0] + x - cx, goal[1] + z - cz)
        d = {"name": f"{base}-{n}", "start": [x, z], "facing": list(facing), "goal": [gx, gz],
             "via": None if via is None else via.tolist(),
             "speed": g.get("speed", 1.3), "controls": g.get("controls", {}), "environment": g.get("environment", True),
             "start_time": float(rng.uniform(0.0, 0.5))}
        out.append(_parse_agent(d, f"{where}[{n}]"))
    return out


def parse_scenario(data: Mapping, source: str | None = None, *, agents_required: bool = True) -> Scenario:
    """A :class:`Scenario` from its JSON object; errors name the offending field.
    ``agents_required=False``: a scene of obstacles for other characters (``motionmatch
    follow --scene``) may have no agent."""
    where = source or "scenario"
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{where}: expected a JSON object")
    extra = sorted(set(data) - _TOP)
    if extra:
        raise ScenarioError(f"{where}: unknown field(s) {extra}; known: {sorted(_TOP)}")
    if "duration" not in data:
        raise ScenarioError(f"{where}: 'duration' (seconds) is required")
    sc = Scenario(name=str(data.get("name", Path(source).stem if source else "scenario")),
                  duration=_num(data["duration"], f"{where}.duration", 0.0),
                  fps=_num(data.get("fps", 60.0), f"{where}.fps", 1.0), source=source)
    if sc.duration <= 0:
        raise ScenarioError(f"{where}.duration: must be > 0")
    obs = data.get("obstacles", [])
    if not isinstance(obs, list):
        raise ScenarioError(f"{where}.obstacles: expected a list")
    try:
        sc.obstacles = [Obstacle.from_dict(o, f"{where}.obstacles[{i}]") for i, o in enumerate(obs)]
    except ObstacleError as e:
        raise ScenarioError(str(e)) from None
    agents = data.get("agents", [])
    if not isinstance(agents, list):
        raise ScenarioError(f"{where}.agents: expected a list")
    folder = Path(source).parent if source else None
    sc.agents = [_parse_agent(a, f"{where}.agents[{i}]", folder) for i, a in enumerate(agents)]
    for i, g in enumerate(data.get("groups", []) or []):
        sc.agents.extend(_expand_group(g, f"{where}.groups[{i}]", i))
    if not sc.agents and agents_required:
        raise ScenarioError(f"{where}: at least one agent is required (in 'agents' or 'groups')")
    names = [a.name for a in sc.agents]
    if len(set(names)) != len(names):
        raise ScenarioError(f"{where}: agent names must be unique")
    for k in ("penalty", "search", "controller", "database", "regions", "steering"):
        v = data.get(k, {}) or {}
        if not isinstance(v, Mapping):
            raise ScenarioError(f"{where}.{k}: expected an object")
        setattr(sc, k, dict(v))
    sc.description = str(data.get("description", ""))
    sc.expect = str(data.get("expect", ""))
    return sc


def load_scenario(path: str | Path, *, agents_required: bool = True) -> Scenario:
    """Read and parse a scenario JSON file (see :func:`parse_scenario`)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such scenario file") from None
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{p}: not valid JSON ({e})") from None
    return parse_scenario(data, str(p), agents_required=agents_required)
