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
      "penalty": {"use_heights": true},
      "search": {"method": "coherent-approx"},
      "controller": {"search_interval": 0.1667},
      "database": {"requires": ["jump", "creep"], "locomotion_tags": "!dance"},
      "regions": {"narrow": {"z": [4.0, 6.0]}},
      "terrain": {"height_field": {"origin": [-10, -10], "cell": 0.5, "heights": [[0.0, ...], ...]}}
    }

An agent's input is one of ``script`` (the timeline of ``motionmatch run``: keys or
intents, world axes), ``path`` (a polyline followed at ``speed``: the desired
trajectory is read ahead on the path), ``timed_path`` (a drawn path ``{"points": [[t, x,
z], ...]}`` or a path file, followed at the speed it was drawn with long-horizon matching
over the penalised search, as ``motionmatch follow --scene``), ``goal`` (crowd steering toward a point at
``speed``, through the waypoints ``via`` first) or nothing (standing). ``controls`` sets its high-level controls
(Responsiveness, Continuity, Evasion, Anticipation); ``environment: false`` makes it a
plain motion-matching character (ignores obstacles); ``start_time`` delays its input.

Every field is checked (:mod:`~motionmatch.environment.scenario_schema`) with the field
types and bounds of the viewer's socket messages (:mod:`motionmatch.validation`: ground
coordinates within 1000 m, controls 0..4, speeds 0.3..6 m/s, ...); a bad one is a
one-line :class:`ScenarioError` naming the file and the field. A path file is read only
from the scenario file's folder.

``terrain`` is the ground (:mod:`motionmatch.environment.terrain`: ``{"flat": {}}``, a
``height_field`` inline or from a ``.npy`` / 16-bit PNG file, a ``mesh`` from a ``.glb`` /
``.obj`` file, files beside the scenario); it is kept on the :class:`Scenario` and its
:class:`~motionmatch.environment.scene.Scene`. Without it the ground is today's flat floor
(``Scenario.terrain`` is ``None``), exactly as before.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from motionmatch._limits import read_json
from motionmatch.environment import scenario_schema as schema
from motionmatch.environment.obstacles import Obstacle, ObstacleError
from motionmatch.environment.scene import Scene
from motionmatch.environment.terrain import Terrain, parse_terrain
from motionmatch.errors import MotionMatchError
from motionmatch.validation import FieldError, check_fields

__all__ = ["AgentSpec", "Scenario", "ScenarioError", "load_scenario", "parse_scenario"]


class ScenarioError(MotionMatchError, ValueError):
    """A scenario file is malformed; the message (one line) names the file and the field:
    ``scenario.json: agents[2].start[0] must be between -1000 and 1000, got 1e+308``."""


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

    def route(self, duration: float, where: str = "path") -> np.ndarray | None:
        """The polyline walked in ``duration`` seconds: ``path``, or for a looping one the
        loop (closed back to its first point) repeated until it is at least ``speed *
        duration + 1`` metres long; :class:`~motionmatch.validation.FieldError` naming
        ``where`` past :data:`~motionmatch.environment.scenario_schema.LOOP_POINTS` points."""
        if self.path is None or not self.loop:
            return self.path
        pts = self.path
        if np.linalg.norm(pts[-1] - pts[0]) > 1e-6:
            pts = np.concatenate([pts, pts[:1]])
        lap = float(np.linalg.norm(np.diff(pts, axis=0), axis=1).sum())
        laps = (self.speed * duration + 1.0) / max(lap, 1e-9)
        if not laps * (len(pts) - 1) <= schema.LOOP_POINTS:
            raise FieldError("invalid", f"{where}: a loop of {lap:.3g} m walked for {duration:g} s at "
                                        f"{self.speed:g} m/s is {laps:.3g} laps, more than {schema.LOOP_POINTS} "
                                        "points; make the loop longer or the scenario shorter")
        n = max(1, math.ceil(laps))
        return np.concatenate([pts] + [pts[1:]] * (n - 1))

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
    #: the ground (``None``: the flat floor, y = 0)
    terrain: Terrain | None = None

    def scene(self) -> Scene:
        return Scene(self.obstacles, terrain=self.terrain)

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
        if self.terrain is not None:
            d["terrain"] = self.terrain.to_dict()
        return d

    def save(self, path: str | Path) -> Path:
        from motionmatch._files import atomic_write

        with atomic_write(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
        return Path(path)


def _path_file(name: str, where: str, folder: Path) -> str:
    """The absolute name of path file ``name``, which must lie in ``folder`` (the scenario
    file's): a scenario cannot make the viewer read files elsewhere."""
    f = folder / name
    try:
        inside = f.resolve().is_relative_to(folder.resolve()) and f.is_file()
    except (OSError, ValueError):  # e.g. a NUL character, a name too long
        inside = False
    if not inside:
        raise FieldError("invalid", f"{where}: no path file {name!r} in the scenario's folder")
    return str(f)


def _agent_spec(a: dict, where: str, folder: Path) -> AgentSpec:
    """An :class:`AgentSpec` from the cleaned fields (:data:`scenario_schema.AGENT`) of the
    agent at ``where`` (its name when it has none)."""
    tp = a["timed_path"]
    return AgentSpec(
        name=a["name"] or where, start=a["start"], facing=a["facing"], script=a["script"],
        path=None if a["path"] is None else np.asarray(a["path"], dtype=np.float64),
        goal=a["goal"], via=None if a["via"] is None else np.asarray(a["via"], dtype=np.float64).reshape(-1, 2),
        speed=a["speed"], gait=a["gait"], controls=a["controls"], environment=a["environment"],
        start_time=a["start_time"], tags=a["tags"], loop=a["loop"],
        timed_path=_path_file(tp, f"{where}.timed_path", folder) if isinstance(tp, str) else tp)


def _expand_group(g: dict, where: str, index: int) -> list[AgentSpec]:
    """A group (cleaned fields, :data:`scenario_schema.GROUP`): ``count`` agents on a
    jittered grid in ``area`` ([[x0, z0], [x1, z1]]) with ``spacing``, each heading to its
    start + ``goal_offset`` (or to ``goal`` plus its offset in the group), through the
    waypoints ``via`` first if given (e.g. in front of and behind a door), deterministic
    from ``seed``."""
    count, spacing, jitter, off, goal = g["count"], g["spacing"], g["start_jitter"], g["goal_offset"], g["goal"]
    (x0, z0), (x1, z1) = g["area"]
    rng = np.random.default_rng(index if g["seed"] is None else g["seed"])
    nx = int(abs(x1 - x0) // spacing) + 1
    nz = int(abs(z1 - z0) // spacing) + 1
    if count > nx * nz:
        raise FieldError("invalid", f"{where}: {count} agents do not fit in the area at spacing {spacing:g} "
                                    f"({nx * nz} places); enlarge the area or reduce the spacing")
    pick = sorted(rng.choice(nx * nz, size=count, replace=False))  # place c: column c % nx, row c // nx
    base = g["name"] or f"group{index}"
    out = []
    cx, cz = 0.5 * (x0 + x1), 0.5 * (z0 + z1)
    for n, c in enumerate(pick):
        i, j = c % nx, c // nx
        x = min(x0, x1) + i * spacing + rng.uniform(-jitter, jitter)
        z = min(z0, z1) + j * spacing + rng.uniform(-jitter, jitter)
        gx, gz = (x + off[0], z + off[1]) if off is not None else (goal[0] + x - cx, goal[1] + z - cz)
        d = {"name": f"{base}-{n}", "start": [x, z], "facing": list(g["facing"]), "goal": [gx, gz], "via": g["via"],
             "speed": g["speed"], "controls": g["controls"], "environment": g["environment"],
             "start_time": float(rng.uniform(0.0, 0.5))}
        member = f"{where}[{n}]"
        out.append(_agent_spec(schema.AGENT.check(d, member), member, Path()))
    return out


def parse_scenario(data: Mapping, source: str | None = None, *, agents_required: bool = True,
                   label: str | None = None) -> Scenario:
    """A :class:`Scenario` from its JSON object, or a one-line :class:`ScenarioError` that
    names the file (``label``, else ``source``) and the field. Every field is checked
    against :mod:`~motionmatch.environment.scenario_schema` (bounds of
    :mod:`motionmatch.validation`); path files are looked for in ``source``'s folder.
    ``agents_required=False``: a scene of obstacles for other characters (``motionmatch
    follow --scene``) may have no agent."""
    try:
        return _build(data, source, agents_required)
    except (FieldError, ObstacleError) as e:
        raise ScenarioError(f"{label or source or 'scenario'}: {e}") from None


def _build(data: Mapping, source: str | None, agents_required: bool) -> Scenario:
    if not isinstance(data, Mapping):
        raise FieldError("invalid", f"expected a JSON object, got {type(data).__name__}")
    d = check_fields(data, schema.TOP)
    members = len(d["agents"]) + sum(g["count"] for g in d["groups"])
    if members > schema.AGENTS:
        raise FieldError("too_large", f"at most {schema.AGENTS} agents in all (agents and groups' members), "
                                      f"got {members}")
    sc = Scenario(name=d["name"] or (Path(source).stem if source else "scenario"), duration=d["duration"],
                  fps=d["fps"], source=source, description=d["description"], expect=d["expect"],
                  regions=d["regions"], **{k: d[k] for k in schema.SECTIONS})
    sc.obstacles = [Obstacle.from_dict(o, f"obstacles[{i}]") for i, o in enumerate(d["obstacles"])]
    folder = Path(source).parent if source else Path()
    if d["terrain"] is not None:
        sc.terrain = parse_terrain(d["terrain"], "terrain", folder)
    sc.agents = [_agent_spec(a, f"agents[{i}]", folder) for i, a in enumerate(d["agents"])]
    for i, a in enumerate(sc.agents):
        a.route(sc.duration, f"agents[{i}].path")  # a looping path fits in its bound
    for i, g in enumerate(d["groups"]):
        sc.agents.extend(_expand_group(g, f"groups[{i}]", i))
    if not sc.agents and agents_required:
        raise FieldError("invalid", "at least one agent is required (in 'agents' or 'groups')")
    twice = sorted(n for n, k in Counter(a.name for a in sc.agents).items() if k > 1)
    if twice:
        raise FieldError("invalid", f"agent names must be unique: {twice[:5]} appear more than once")
    return sc


def load_scenario(path: str | Path, *, agents_required: bool = True, label: str | None = None) -> Scenario:
    """Read and parse a scenario JSON file (see :func:`parse_scenario`); ``label`` names
    the file in errors instead of its path (the viewer's file id)."""
    p = Path(path)
    shown = label or str(p)
    data = read_json(p, "scenario", error=ScenarioError, label=shown)
    return parse_scenario(data, str(p), agents_required=agents_required, label=label)
