"""The engine under every batch job: cells run as Ray tasks, resumable, with a manifest.

A job is a list of :class:`Cell` s, each a unit of work with the hash of its inputs and the
files it produces. :func:`run_cells` skips the cells whose outputs exist, unchanged, from
an earlier run with the same input hash; runs the others as Ray tasks (a task runs one
cell, or a few small ones in turn; large read-only inputs are put in Ray's object store
once and handed to every task by reference); writes each finished cell's outputs
atomically in this process as soon as it arrives and notes it in a journal, so that a job
stopped at any point (a worker, a node or this process killed) keeps every finished cell;
carries on past failed cells, reporting each with its error; and ends with a manifest
(inputs' and outputs' SHA-256, versions, timings).
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from motionmatch._files import atomic_write
from motionmatch.batch.cluster import import_ray, ray_session


def journal_path(manifest: Path) -> Path:
    """The journal of finished cells, beside the manifest, while a job runs."""
    return manifest.with_name(f".{manifest.name}.journal.jsonl")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_json(value: Any) -> str:
    """Hex SHA-256 of a JSON-able value (keys sorted): the hash of a cell's settings."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def versions() -> dict[str, str]:
    """Versions of what computed the outputs (motionmatch, Ray, numpy, Python)."""
    import numpy as np

    from motionmatch import __version__

    try:
        import ray

        ray_version = ray.__version__
    except ImportError:
        ray_version = None
    return {"motionmatch": __version__, "ray": ray_version, "numpy": np.__version__,
            "python": platform.python_version()}


@dataclass(frozen=True)
class Shared:
    """In a cell's ``args``: the ``index``-th of the job's ``shared`` inputs (put in Ray's
    object store once, handed to the task by reference)."""

    index: int


@dataclass(frozen=True)
class Cell:
    """One unit of a job.

    Attributes:
        key: unique name of the cell in its job (e.g. ``"salsa/seed3"``).
        input_hash: hex hash of everything the cell's outputs depend on (input files'
            SHA-256, settings, motionmatch version).
        outputs: the files it writes, relative to the job folder.
        args: the task's arguments (small, picklable; :class:`Shared` for a shared input).
        cost: a relative cost estimate: costlier cells are started first.
    """

    key: str
    input_hash: str
    outputs: tuple[str, ...]
    args: tuple = ()
    cost: float = 1.0


@dataclass
class CellOutcome:
    """What became of a cell: ``status`` is ``"done"`` (computed now), ``"skipped"`` (its
    outputs exist from an earlier run) or ``"failed"`` (``error`` says why)."""

    key: str
    status: str
    input_hash: str
    seconds: float = 0.0
    error: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)  # relative path -> SHA-256
    value: Any = None  # the task's result (done cells only; not saved)


@dataclass(frozen=True)
class JobStatus:
    """Progress of a running job, for a progress display: cells ``finished`` (done,
    skipped or failed) of ``total``; ``rate`` computed cells per second; ``eta_s`` seconds
    left; ``phase``: ``"starting Ray"`` or ``"running"``."""

    finished: int
    total: int
    failed: int
    skipped: int
    elapsed_s: float
    rate: float
    eta_s: float
    phase: str = "running"


@dataclass
class JobResult:
    """A finished job: every cell's outcome, the manifest written and the timings."""

    job: str
    folder: Path
    manifest: Path
    cells: list[CellOutcome]
    seconds: float
    ray_start_s: float = 0.0

    def _with(self, status: str) -> list[CellOutcome]:
        return [c for c in self.cells if c.status == status]

    @property
    def done(self) -> list[CellOutcome]:
        return self._with("done")

    @property
    def skipped(self) -> list[CellOutcome]:
        return self._with("skipped")

    @property
    def failed(self) -> list[CellOutcome]:
        return self._with("failed")

    def summary(self) -> str:
        """One line: cells computed, skipped and failed, and the time taken."""
        s = (f"{self.job}: {len(self.cells)} cells: {len(self.done)} computed, {len(self.skipped)} already done, "
             f"{len(self.failed)} failed in {self.seconds:.1f} s")
        return s + (f" (+ {self.ray_start_s:.1f} s starting Ray)" if self.ray_start_s else "")


def _previous(manifest: Path, journal: Path) -> dict[str, dict]:
    """Finished cells of earlier runs: the manifest's, then the journal's (newer)."""
    cells: dict[str, dict] = {}
    if manifest.is_file():
        try:
            cells.update(json.loads(manifest.read_text(encoding="utf-8")).get("cells", {}))
        except (OSError, ValueError, AttributeError) as e:
            warnings.warn(f"{manifest}: unreadable ({e}); every cell not in the journal is computed again",
                          stacklevel=2)
    if journal.is_file():
        for line in journal.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
                cells[entry["key"]] = entry
            except (ValueError, KeyError, TypeError):
                continue  # a line torn by a kill
    return cells


def _still_there(cell: Cell, entry: dict | None, folder: Path) -> dict[str, str] | None:
    """The outputs (path -> SHA-256) of ``cell`` from an earlier run with the same input
    hash, if all are there unchanged; else ``None``."""
    if not entry or entry.get("status") not in ("done", "skipped") or entry.get("input_hash") != cell.input_hash:
        return None
    recorded = entry.get("outputs") or {}
    if set(recorded) != set(cell.outputs):
        return None
    for rel, digest in recorded.items():
        p = folder / rel
        if not p.is_file() or sha256_file(p) != digest:
            return None
    return dict(recorded)


def _exception_line(e: BaseException) -> str:
    """An exception on one line, naming its type."""
    return f"{type(e).__name__}: {' '.join(str(e).split()) or type(e).__name__}"[:500]


def _run_group(task: Callable, n_shared: int, *args) -> list[tuple[bool, Any, float]]:
    """A Ray task: ``task`` on each cell of a group in turn (``args``: the ``n_shared`` shared
    inputs, then the cells' argument tuples with :class:`Shared` placeholders). Returns per
    cell ``(True, value, seconds)``, or ``(False, error line, seconds)`` when it raised: a
    cell's failure is its own, not its group's."""
    shared, group = args[:n_shared], args[n_shared]
    out = []
    for cell_args in group:
        t0 = time.perf_counter()
        try:
            value = task(*[shared[a.index] if isinstance(a, Shared) else a for a in cell_args])
            out.append((True, value, time.perf_counter() - t0))
        except Exception as e:
            out.append((False, _exception_line(e), time.perf_counter() - t0))
    return out


def _groups(todo: list[Cell], size: int) -> list[list[Cell]]:
    """``todo`` costliest first, in groups of ``size`` cells (one task each)."""
    ordered = sorted(todo, key=lambda c: -c.cost)
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]


def _group_size(ray, cells: int, per_task: int | None) -> int:
    """Cells per task: ``per_task`` as given, or (``None``) enough for about eight tasks
    per CPU of the cluster, at most eight cells each: a task's cost to the driver (about
    3 ms: submitting, waiting, receiving) is then spread over small cells (a clip's
    features take about 25 ms) while the CPUs stay evenly loaded to the end."""
    if per_task is not None:
        if per_task < 1:
            raise ValueError(f"cells per task must be >= 1, got {per_task}")
        return per_task
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    return max(1, min(8, cells // (8 * cpus)))


def _json_text(doc: Mapping[str, Any]) -> str:
    """``doc`` as JSON text, an entry of its top-level mappings per line: readable, and
    made by :mod:`json`'s C encoder (its pure-Python indenting encoder took about a quarter
    of a second for a job of 400 cells)."""
    lines = []
    for k, v in doc.items():
        if isinstance(v, Mapping) and v:
            inner = ",\n".join(f"    {json.dumps(str(kk))}: {json.dumps(vv, default=str)}" for kk, vv in v.items())
            lines.append(f"  {json.dumps(k)}: {{\n{inner}\n  }}")
        else:
            lines.append(f"  {json.dumps(k)}: {json.dumps(v, default=str)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_manifest(path: Path, doc: Mapping[str, Any]) -> None:
    """Write a manifest (JSON, :func:`_json_text`) atomically."""
    with atomic_write(path, "w", encoding="utf-8") as f:
        f.write(_json_text(doc))


def _error_line(ray, e: BaseException) -> str:
    """A failed task's error on one line, naming the exception."""
    cause = getattr(e, "cause", None) if isinstance(e, ray.exceptions.RayTaskError) else None
    err = cause if isinstance(cause, BaseException) else e
    line = _exception_line(err)
    if isinstance(err, ray.exceptions.RayError) and not isinstance(err, ray.exceptions.RayTaskError):
        line = line.split(". ")[0]
    return line


def run_cells(
    job: str,
    folder: str | Path,
    manifest: str | Path,
    cells: Sequence[Cell],
    task: Callable,
    save: Callable[[Cell, Any], Mapping[str, str] | None],
    *,
    shared: Sequence[Any] = (),
    inputs: Mapping[str, str] | None = None,
    settings: Mapping[str, Any] | None = None,
    progress: Callable[[JobStatus], None] | None = None,
    retries: int = 1,
    address: str | None = None,
    workers: int | None = None,
    cells_per_task: int | None = 1,
) -> JobResult:
    """Run a job's cells on Ray (:func:`~motionmatch.batch.cluster.ray_session`, started
    only when some cell is left to compute).

    Args:
        job: the job's name (``"build"``, ``"genmm"``, ``"sweep"``).
        folder: where the cells' outputs go (their paths are relative to it).
        manifest: the manifest file to write at the end (JSON); its folder holds the journal.
        cells: the cells, with unique keys.
        task: a module-level function ``task(*cell.args)`` run in a Ray task (each
            :class:`Shared` argument replaced by that shared input); its return value goes
            to ``save``; an exception it raises fails that cell alone.
        save: ``save(cell, value)``, run here, writes the cell's outputs (atomically) and
            may return their SHA-256 (relative path -> hex digest; else the files are read
            back to hash them).
        shared: large read-only inputs, put in the object store once for all tasks.
        inputs: the job's input files (path -> SHA-256), for the manifest.
        settings: the job's settings, for the manifest.
        progress: called with a :class:`JobStatus` at the start and after every cell; an
            exception it raises stops the job (tasks still running are cancelled; finished
            cells are kept for the next run).
        retries: times Ray re-runs a task whose worker died.
        address, workers: the Ray cluster to join, or the embedded Ray's workers.
        cells_per_task: cells run in turn by one task (``None``: chosen from the number
            of cells and the cluster's CPUs, for jobs of many small cells).
    """
    ray = import_ray()
    folder, manifest = Path(folder), Path(manifest)
    keys = [c.key for c in cells]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{job}: duplicate cell keys")
    t0 = time.perf_counter()
    journal = journal_path(manifest)
    before = _previous(manifest, journal)
    outcomes: dict[str, CellOutcome] = {}
    todo: list[Cell] = []
    for c in cells:
        kept = _still_there(c, before.get(c.key), folder)
        if kept is None:
            todo.append(c)
        else:
            outcomes[c.key] = CellOutcome(c.key, "skipped", c.input_hash, seconds=before[c.key].get("seconds", 0.0),
                                          outputs=kept)
    total, skipped = len(cells), len(outcomes)

    since = [t0]  # the clock of the rate: from the start of the tasks (Ray's start-up left out)

    def status() -> JobStatus:
        elapsed = time.perf_counter() - since[0]
        computed = len(outcomes) - skipped
        rate = computed / elapsed if elapsed > 0 else 0.0
        left = total - len(outcomes)
        return JobStatus(len(outcomes), total, sum(o.status == "failed" for o in outcomes.values()), skipped,
                         elapsed, rate, left / rate if rate > 0 else float("inf"))

    if progress:
        progress(status())
    pending: dict[Any, list[Cell]] = {}
    manifest.parent.mkdir(parents=True, exist_ok=True)
    start_s = 0.0
    with ExitStack() as stack:
        if todo:
            if progress:
                progress(replace(status(), phase="starting Ray"))
            start_s = stack.enter_context(ray_session(address, workers))
            since[0] = time.perf_counter()
            refs = [ray.put(x) for x in shared]
            remote = ray.remote(max_retries=retries)(_run_group)
            for group in _groups(todo, _group_size(ray, len(todo), cells_per_task)):
                pending[remote.remote(task, len(refs), *refs, [c.args for c in group])] = group
        _collect(ray, pending, outcomes, journal, folder, save, progress, status)
    ordered = [outcomes[k] for k in keys]
    seconds = time.perf_counter() - t0 - start_s
    doc = {
        "job": job,
        "versions": versions(),
        "settings": dict(settings or {}),
        "inputs": dict(inputs or {}),
        "outputs": {rel: d for o in ordered for rel, d in o.outputs.items()},
        "cells": {o.key: {"status": o.status, "input_hash": o.input_hash, "seconds": round(o.seconds, 4),
                          "error": o.error, "outputs": o.outputs} for o in ordered},
        "failed": {o.key: o.error for o in ordered if o.status == "failed"},
        "timings": {"job_s": round(seconds, 3), "ray_start_s": round(start_s, 3),
                    "cells_s": round(sum(o.seconds for o in ordered if o.status == "done"), 3)},
    }
    write_manifest(manifest, doc)
    journal.unlink(missing_ok=True)
    return JobResult(job, folder, manifest, ordered, seconds, start_s)


def _collect(ray, pending: dict, outcomes: dict, journal: Path, folder: Path, save: Callable,
             progress: Callable | None, status: Callable[[], JobStatus]) -> None:
    """Wait for the tasks in ``pending`` (each a group of cells): save each finished cell's
    outputs, note it in the journal, report progress; an exception (from ``progress``, or an
    interrupt) cancels what is still running. Every wait takes all the tasks finished by then
    (one wait per finished task would cost the driver, on the cores the workers need, a pass
    over every pending task each time: quadratic in the tasks)."""
    try:
        with open(journal, "a", encoding="utf-8") as jf:
            while pending:
                ray.wait(list(pending), num_returns=1)  # (blocks until one is done)
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
                for ref in ready:
                    group = pending.pop(ref)
                    try:
                        results = ray.get(ref)
                    except (ray.exceptions.RayError, Exception) as e:  # the task itself: a worker lost
                        results = [(False, _error_line(ray, e), 0.0)] * len(group)
                    for cell, (ok, value, seconds) in zip(group, results):
                        out = _finish(cell, ok, value, seconds, folder, save)
                        outcomes[cell.key] = out
                        entry = {"key": out.key, "status": out.status, "input_hash": out.input_hash,
                                 "seconds": round(out.seconds, 4), "error": out.error, "outputs": out.outputs}
                        jf.write(json.dumps(entry) + "\n")
                    jf.flush()
                    if progress:
                        progress(status())
    except BaseException:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # a task on a node that is gone: nothing to cancel
                pass
        raise


def _finish(cell: Cell, ok: bool, value: Any, seconds: float, folder: Path, save: Callable) -> CellOutcome:
    """A cell's outcome from its task's result: its outputs saved, or why it failed."""
    if not ok:
        return CellOutcome(cell.key, "failed", cell.input_hash, seconds=seconds, error=value)
    try:
        digests = save(cell, value)
        outputs = {rel: digests[rel] if digests else sha256_file(folder / rel) for rel in cell.outputs}
    except Exception as e:
        return CellOutcome(cell.key, "failed", cell.input_hash, seconds=seconds, error=_exception_line(e))
    return CellOutcome(cell.key, "done", cell.input_hash, seconds=seconds, outputs=outputs, value=value)


def add_outputs_to_manifest(result: JobResult, extra: Mapping[str, Any], files: Iterable[str | Path] = ()) -> None:
    """Add fields (``extra``) and job-level output files (their SHA-256) to a finished job's manifest."""
    doc = json.loads(result.manifest.read_text(encoding="utf-8"))
    doc.update(extra)
    for p in files:
        p = Path(p)
        rel = p.relative_to(result.folder).as_posix() if p.is_relative_to(result.folder) else str(p)
        doc["outputs"][rel] = sha256_file(p)
    write_manifest(result.manifest, doc)
