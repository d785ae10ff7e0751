"""``batch sweep``: a grid of scenarios and paths x settings x seeds run through the World.

Every cell is one run in a :class:`~motionmatch.runtime.world.World` (a scenario's
characters, :func:`~motionmatch.runtime.scenarios.run_scenario`; or a path follower,
:class:`~motionmatch.runtime.follow.PathFollower`) on the sweep's database, which is put
in Ray's object store once for every task. Each cell writes its report
(``DIR/cells/<kind>-<name>-<setting>-seed<S>.json``: the numbers of ``motionmatch
scenario --report`` or ``motionmatch follow --report``); the job ends with
``DIR/cells.csv`` (one row per cell), ``DIR/summary.csv`` (one row per file and setting,
means over the seeds: the papers' tables), ``DIR/summary.png`` (a bar chart of collisions
or path distance per file and setting; needs matplotlib, ``motionmatch[viz]``) and
``DIR/manifest.json``. See :mod:`motionmatch.batch.sweep_spec` for the sweep file.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from motionmatch._files import atomic_path, atomic_write
from motionmatch.batch.jobs import (
    Cell,
    JobResult,
    JobStatus,
    Shared,
    add_outputs_to_manifest,
    run_cells,
    sha256_file,
    sha256_json,
    versions,
)
from motionmatch.batch.sweep_spec import SweepSpec, load_sweep

__all__ = ["CELL_COLUMNS", "METRICS", "run_path_cell", "run_scenario_cell", "sweep"]

METRICS = {
    "scenario": ("collision_fraction", "collision_time_s", "agent_collision_fraction", "error_m", "diversity",
                 "ms_per_search", "realtime_factor"),
    "path": ("mean_distance_m", "max_distance_m", "completed", "collision_fraction", "knn_calls_per_match",
             "ms_per_match"),
}
"""The numbers of each kind of cell that go in the tables."""
CELL_COLUMNS = ("kind", "file", "setting", "seed", "status", "error",
                *dict.fromkeys(METRICS["scenario"] + METRICS["path"]))


def run_scenario_cell(db, scenario_path: str, setting: dict, seed: int, duration: float | None) -> dict:
    """One scenario run (a Ray task): the report of ``motionmatch scenario --report`` with
    the setting's method and sections over the scenario's, groups placed from ``seed``."""
    from motionmatch._jit import compile_intervals
    from motionmatch._limits import read_json
    from motionmatch.environment.scenario import ScenarioError, parse_scenario
    from motionmatch.metrics.scenario import scenario_report
    from motionmatch.runtime.environment_matching import EnvironmentSettings
    from motionmatch.runtime.scenarios import run_scenario

    data = read_json(scenario_path, "scenario", error=ScenarioError)
    for i, g in enumerate(data.get("groups") or []):
        if isinstance(g, dict):
            g["seed"] = 1000 * seed + i
    sc = parse_scenario(data, scenario_path)
    if duration is not None:
        sc.duration = float(duration)
    search = {**sc.search, **setting.get("search", {})}
    if "method" in setting:
        search["method"] = setting["method"]
    penalty = {**sc.penalty, **setting.get("penalty", {})}
    settings = EnvironmentSettings.from_dicts(penalty, search, sc.controller.get("controls"))
    with compile_intervals() as warm:
        world, rec = run_scenario(db, sc, settings=settings, record_poses=False,
                                  controller_overrides=setting.get("controller"))
    report = scenario_report(world, rec, sc, compiles=warm.intervals)
    return {"kind": "scenario", "report": report}


def run_path_cell(db, path_file: str, setting: dict, seed: int, duration: float | None, jitter: float) -> dict:
    """One path-following run (a Ray task): the report of ``motionmatch follow --report``
    with LHMM(k, levels) in the setting's mode; the start is ``jitter`` metres from the
    path's start in a direction drawn from ``seed``."""
    from motionmatch.control.path import load_path
    from motionmatch.metrics.follow import follow_report
    from motionmatch.runtime.follow import FollowSettings, PathFollower, run_followers
    from motionmatch.runtime.world import World

    path = load_path(path_file)
    kw = {k: setting[k] for k in ("mode", "k", "levels", "interval") if k in setting}
    settings = FollowSettings(time_limit=duration, **kw)
    pos = None
    if jitter > 0:
        angle = float(np.random.default_rng(seed).uniform(0, 2 * np.pi))
        x, _, z = path.input_points[0]
        pos = (x + jitter * np.cos(angle), 0.0, z + jitter * np.sin(angle))
    world = World(db, None, environment=False, agents_as_obstacles=False, stagger=False, record_poses=False)
    f = PathFollower(db, path, settings, position=pos, name=Path(path_file).stem, world=world)
    rec = run_followers([f])[0]
    return {"kind": "path", "report": follow_report(rec)}


def _cells(spec: SweepSpec, inputs: dict[str, str]) -> list[Cell]:
    common = {"database": inputs[str(spec.database)], "duration": spec.duration,
              "motionmatch": versions()["motionmatch"]}
    cells = []
    for kind, files in (("scenario", spec.scenarios), ("path", spec.paths)):
        for f in files:
            for name, setting in spec.settings.items():
                for seed in spec.seeds:
                    key = f"{kind}-{f.stem}-{name}-seed{seed}"
                    h = sha256_json({**common, "kind": kind, "file": inputs[str(f)], "setting": setting,
                                     "seed": seed, "jitter": spec.start_jitter_m if kind == "path" else None})
                    cells.append(Cell(key, h, (f"cells/{key}.json",),
                                      (kind, Shared(0), str(f), name, setting, seed, spec.duration,
                                       spec.start_jitter_m)))
    return cells


def _task(kind: str, db, file: str, name: str, setting: dict, seed: int, duration: float | None,
          jitter: float) -> dict:
    """The task of a cell: a scenario or a path run."""
    if kind == "scenario":
        return run_scenario_cell(db, file, setting, seed, duration)
    return run_path_cell(db, file, setting, seed, duration, jitter)


def sweep(
    spec: str | Path | SweepSpec,
    output: str | Path,
    *,
    address: str | None = None,
    workers: int | None = None,
    progress: Callable[[JobStatus], None] | None = None,
) -> JobResult:
    """Run every cell of a sweep file and write the reports, tables and plot.

    Args:
        spec: the sweep file (see :mod:`motionmatch.batch.sweep_spec`) or a checked one.
        output: the folder to write into.
        address, workers, progress: see :func:`motionmatch.batch.build`.
    """
    from motionmatch.database import MotionDatabase

    spec = spec if isinstance(spec, SweepSpec) else load_sweep(spec)
    out = Path(output)
    files = [spec.database, *spec.scenarios, *spec.paths]
    inputs = {str(f): sha256_file(f) for f in files}
    cells = _cells(spec, inputs)
    db = MotionDatabase.load(spec.database)
    meta = {c.key: c for c in cells}

    def save(cell: Cell, value: dict) -> None:
        with atomic_write(out / cell.outputs[0], "w", encoding="utf-8") as f:
            json.dump(value["report"], f, indent=2)

    settings = {"spec": str(spec.source), "settings": spec.settings, "seeds": list(spec.seeds),
                "duration": spec.duration, "start_jitter_m": spec.start_jitter_m}
    result = run_cells("sweep", out, out / "manifest.json", cells, _task, save, shared=(db,), inputs=inputs,
                       settings=settings, progress=progress, address=address, workers=workers)
    rows = []
    for o in result.cells:
        c = meta[o.key]
        kind, _, file, name, _, seed = c.args[:6]
        row = {"kind": kind, "file": Path(file).stem, "setting": name, "seed": seed,
               "status": "failed" if o.status == "failed" else "done", "error": o.error}
        if o.status != "failed":
            report = json.loads((out / c.outputs[0]).read_text(encoding="utf-8"))
            row.update({k: report.get(k) for k in METRICS[kind]})
        rows.append(row)
    written = [_write_csv(out / "cells.csv", CELL_COLUMNS, rows), _write_csv(out / "summary.csv", *_summary(rows))]
    plot = _plot(out / "summary.png", rows)
    if plot:
        written.append(plot)
    add_outputs_to_manifest(result, {}, written)
    return result


def _summary(rows: list[dict]) -> tuple[tuple[str, ...], list[dict]]:
    """One row per (kind, file, setting): cells done and failed, and each number's mean over the done seeds."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["kind"], r["file"], r["setting"]), []).append(r)
    metrics = tuple(CELL_COLUMNS[6:])
    out = []
    for (kind, file, setting), rs in groups.items():
        done = [r for r in rs if r["status"] == "done"]
        row: dict[str, Any] = {"kind": kind, "file": file, "setting": setting, "seeds_done": len(done),
                               "seeds_failed": len(rs) - len(done)}
        for k in METRICS[kind]:
            vals = [float(r[k]) for r in done if r.get(k) is not None]
            vals = [v for v in vals if np.isfinite(v)]
            row[k] = round(float(np.mean(vals)), 6) if vals else None
        out.append(row)
    return ("kind", "file", "setting", "seeds_done", "seeds_failed", *metrics), out


def _write_csv(path: Path, columns, rows: list[dict]) -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    with atomic_write(path, "w", encoding="utf-8") as f:
        f.write(buf.getvalue())
    return path


def _plot(path: Path, rows: list[dict]) -> Path | None:
    """Bars per file, one per setting (means over seeds): the collision fraction of the
    scenarios, the mean distance to the path of the paths; ``None`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    _, summary = _summary(rows)
    panels = [(k, m) for k, m in (("scenario", "collision_fraction"), ("path", "mean_distance_m"))
              if any(r["kind"] == k for r in summary)]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, (kind, metric) in zip(axes[0], panels):
        rs = [r for r in summary if r["kind"] == kind]
        files = list(dict.fromkeys(r["file"] for r in rs))
        settings = list(dict.fromkeys(r["setting"] for r in rs))
        width = 0.8 / len(settings)
        for j, s in enumerate(settings):
            vals = [next((r[metric] for r in rs if r["file"] == f and r["setting"] == s), None) for f in files]
            ax.bar(np.arange(len(files)) + j * width, [np.nan if v is None else v for v in vals], width, label=s)
        ax.set_xticks(np.arange(len(files)) + 0.4 - width / 2, files, rotation=20, ha="right")
        ax.set_ylabel(metric.replace("_", " "))
        ax.set_title(f"{kind}s: {metric.replace('_', ' ')} (mean over seeds)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
    return path
