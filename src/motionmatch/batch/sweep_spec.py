"""The sweep file of ``batch sweep``: what to run, checked field by field.

A sweep is a grid: every scenario file and path file x every named setting x every seed
is one cell. Paths are relative to the sweep file. ::

    {
      "database": "lafan_env.npz",
      "scenarios": ["scenarios/doors-small.json", "scenarios/zigzag-cones.json"],
      "paths": ["paths/square.json"],
      "settings": {
        "approx": {"method": "coherent-approx"},
        "exact": {"method": "linear"},
        "plain": {"method": "plain"},
        "lhmm-3-3": {"k": 3, "levels": 3}
      },
      "seeds": [0, 1, 2],
      "duration": 20.0
    }

Settings fields: for scenarios ``method`` (``coherent-approx``, ``linear`` or ``plain``:
no environment), ``penalty``, ``search`` and ``controller`` (objects merged over the
scenario's own sections); for paths ``mode`` (``local``/``global``), ``k``, ``levels``
and ``interval`` (seconds between matches). A field of the other kind is ignored by a
cell. ``seeds``: a scenario's crowd groups are placed with seed ``1000 * seed + group
index``; a path's character starts ``start_jitter_m`` (default 0) around the path's start
in a direction drawn from the seed, so seeds only vary paths with a jitter. ``duration``
(seconds) overrides the scenarios' durations and limits a path follower's time.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from motionmatch._limits import read_json
from motionmatch.batch.cluster import BatchError

SCENARIO_FIELDS = {"method": str, "penalty": dict, "search": dict, "controller": dict}
PATH_FIELDS = {"mode": str, "k": int, "levels": int, "interval": float}
METHODS = ("coherent-approx", "linear", "plain")
TOP_FIELDS = ("database", "scenarios", "paths", "settings", "seeds", "duration", "start_jitter_m")
MAX_CELLS = 100_000


@dataclass(frozen=True)
class SweepSpec:
    """A checked sweep file (absolute paths)."""

    source: Path
    database: Path
    scenarios: tuple[Path, ...]
    paths: tuple[Path, ...]
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)
    duration: float | None = None
    start_jitter_m: float = 0.0


def _files(d: dict, name: str, folder: Path, where: str) -> tuple[Path, ...]:
    v = d.get(name, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise BatchError(f"{where}: {name}: expected a list of file names, got {json.dumps(v)[:80]}")
    out = []
    for i, x in enumerate(v):
        p = folder / x
        if not p.is_file():
            raise BatchError(f"{where}: {name}[{i}]: no such file {p}")
        out.append(p.resolve())
    if len(set(out)) != len(out):
        raise BatchError(f"{where}: {name}: a file is listed twice")
    return tuple(out)


def _number(v, kind: type, lo: float, hi: float, where: str):
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi
    if kind is int:
        ok = ok and float(v).is_integer()
    if not ok:
        what = "a whole number" if kind is int else "a number"
        raise BatchError(f"{where}: expected {what} from {lo:g} to {hi:g}, got {json.dumps(v)}")
    return kind(v)


def _setting(name: str, s, where: str) -> dict[str, Any]:
    if not isinstance(s, dict):
        raise BatchError(f"{where}: expected an object of settings, got {json.dumps(s)[:80]}")
    unknown = sorted(set(s) - set(SCENARIO_FIELDS) - set(PATH_FIELDS))
    if unknown:
        raise BatchError(f"{where}.{unknown[0]}: unknown setting; known: {', '.join(sorted({**SCENARIO_FIELDS, **PATH_FIELDS}))}")
    out = dict(s)
    if "method" in s and s["method"] not in METHODS:
        raise BatchError(f"{where}.method: expected one of {', '.join(METHODS)}, got {json.dumps(s['method'])}")
    if "mode" in s and s["mode"] not in ("local", "global"):
        raise BatchError(f"{where}.mode: expected local or global, got {json.dumps(s['mode'])}")
    for k in ("penalty", "search", "controller"):
        if k in s and not isinstance(s[k], dict):
            raise BatchError(f"{where}.{k}: expected an object, got {json.dumps(s[k])[:80]}")
    if "k" in s:
        out["k"] = _number(s["k"], int, 1, 64, f"{where}.k")
    if "levels" in s:
        out["levels"] = _number(s["levels"], int, 1, 16, f"{where}.levels")
    if "interval" in s:
        out["interval"] = _number(s["interval"], float, 0.01, 10.0, f"{where}.interval")
    return out


def parse_sweep(data, source: str | Path) -> SweepSpec:
    """A :class:`SweepSpec` from the sweep file's JSON object, or a one-line
    :class:`~motionmatch.batch.cluster.BatchError` naming the file and the field."""
    source = Path(source)
    where = str(source)
    if not isinstance(data, dict):
        raise BatchError(f"{where}: expected a JSON object (see 'motionmatch batch sweep --help')")
    unknown = sorted(set(data) - set(TOP_FIELDS))
    if unknown:
        raise BatchError(f"{where}: {unknown[0]}: unknown field; known: {', '.join(TOP_FIELDS)}")
    folder = source.parent
    db = data.get("database")
    if not isinstance(db, str) or not db:
        raise BatchError(f"{where}: database: expected the database file (built with 'motionmatch build')")
    if not (folder / db).is_file():
        raise BatchError(f"{where}: database: no such file {folder / db}")
    scenarios = _files(data, "scenarios", folder, where)
    paths = _files(data, "paths", folder, where)
    if not scenarios and not paths:
        raise BatchError(f"{where}: scenarios, paths: give at least one scenario or path file")
    settings = data.get("settings", {"default": {}})
    if not isinstance(settings, dict) or not settings:
        raise BatchError(f"{where}: settings: expected an object of named settings, e.g. "
                         '{"exact": {"method": "linear"}}')
    for name in settings:
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            raise BatchError(f"{where}: settings.{name}: names are letters, digits, '-', '_' and '.'")
    checked = {n: _setting(n, s, f"{where}: settings.{n}") for n, s in settings.items()}
    seeds = data.get("seeds", [0])
    if not isinstance(seeds, list) or not seeds:
        raise BatchError(f"{where}: seeds: expected a list of whole numbers, got {json.dumps(seeds)[:80]}")
    seeds = tuple(_number(s, int, 0, 2**31 - 1, f"{where}: seeds[{i}]") for i, s in enumerate(seeds))
    if len(set(seeds)) != len(seeds):
        raise BatchError(f"{where}: seeds: a seed is listed twice")
    duration = data.get("duration")
    if duration is not None:
        duration = _number(duration, float, 0.1, 3600.0, f"{where}: duration")
    jitter = _number(data.get("start_jitter_m", 0.0), float, 0.0, 100.0, f"{where}: start_jitter_m")
    n = (len(scenarios) + len(paths)) * len(checked) * len(seeds)
    if n > MAX_CELLS:
        raise BatchError(f"{where}: {n} cells; at most {MAX_CELLS} in one sweep")
    return SweepSpec(source.resolve(), (folder / db).resolve(), scenarios, paths, checked, seeds, duration, jitter)


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and check a sweep file (see :func:`parse_sweep`)."""
    p = Path(path)
    data = read_json(p, "sweep", error=BatchError)
    return parse_sweep(data, p)
