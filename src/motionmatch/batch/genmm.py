"""``batch genmm``: GenMM variants of many examples, one Ray task per (example, seed).

Each cell synthesizes one motion from one example clip with one seed (the settings of
``motionmatch genmm EXAMPLE -o OUT --seed S``, so the file is the same), writes it as
``DIR/<example>/<example>_seed<S>.bvh`` (or ``.glb``) with its metrics row beside it
(``.json``: coverage, global and local patch distance from
:func:`motionmatch.metrics.genmm.evaluate`, synthesis time), and the job ends with
``DIR/metrics.csv`` (one row per cell) and ``DIR/manifest.json``. Each example is put in
Ray's object store once and shared by its seeds' tasks.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path

from motionmatch._files import atomic_write
from motionmatch.anim.motion import Motion
from motionmatch.batch.cluster import BatchError
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
from motionmatch.genmm import GenMMConfig

__all__ = ["METRIC_COLUMNS", "genmm", "genmm_cell", "writer"]

METRIC_COLUMNS = ("example", "seed", "output", "frames", "fps", "coverage", "global_patch_distance",
                  "local_patch_distance", "synthesis_s", "metrics_error")
"""The columns of ``metrics.csv``, one row per (example, seed)."""


def writer(fmt: str) -> Callable[[Motion, Path], object]:
    """The function that writes a motion in format ``fmt`` (``bvh``, or ``glb`` where this
    motionmatch has a ``.glb`` writer, routed by the file's suffix), or a :class:`BatchError`."""
    from motionmatch.anim import save_bvh

    if fmt == "bvh":
        return save_bvh
    if fmt == "glb":
        import importlib

        for module in ("motionmatch.io", "motionmatch.anim"):
            save = getattr(importlib.import_module(module), "save_motion", None)
            if save is not None:
                return save
        raise BatchError("--format glb: this motionmatch has no .glb writer; use --format bvh")
    raise BatchError(f"--format: expected bvh or glb, got {fmt!r}")


def genmm_cell(example: Motion, seed: int, config: dict, frames: int | None, loop: bool) -> tuple[Motion, dict]:
    """One variant (a Ray task): the motion GenMM makes from ``example`` with ``seed``, and
    its metrics row (``None`` metrics, and ``metrics_error``, when the clips are too short
    for the metrics' windows)."""
    from motionmatch.genmm import GenMM
    from motionmatch.metrics.genmm import evaluate

    # A task is one core's work (the workers are one per core): one thread unless the
    # settings say otherwise (the output is the same on any number).
    gen = GenMM([example], GenMMConfig(**{**config, "threads": config.get("threads") or 1}))
    res = gen.sample(frames, seed=seed, loop=loop)
    row = {"frames": res.motion.num_frames, "fps": res.motion.fps, "synthesis_s": round(res.synthesis_s, 4),
           "coverage": None, "global_patch_distance": None, "local_patch_distance": None, "metrics_error": None}
    try:
        m = evaluate(gen.examples, [res.motion])
        row.update({k: m[k] for k in ("coverage", "global_patch_distance", "local_patch_distance")})
    except ValueError as e:
        row["metrics_error"] = " ".join(str(e).split())
    return res.motion, row


def genmm(
    examples: Sequence[str | Path],
    output: str | Path,
    *,
    seeds: Iterable[int] = (0,),
    frames: int | None = None,
    config: GenMMConfig | None = None,
    loop: bool = False,
    fmt: str = "bvh",
    units: str | float = "auto",
    up: str = "auto",
    address: str | None = None,
    workers: int | None = None,
    progress: Callable[[JobStatus], None] | None = None,
) -> JobResult:
    """Make a variant of every example for every seed.

    Args:
        examples: example BVH files (each its own GenMM; names must differ).
        output: the folder to write into.
        seeds: the seeds (each gives one variant per example).
        frames: output frames (default: twice the example's, as ``motionmatch genmm``).
        config: GenMM settings (default: the paper's; CPU only).
        loop: endless loops (``motionmatch genmm --loop``).
        fmt: ``bvh`` or ``glb`` (see :func:`writer`).
        units, up: how the examples are read (``motionmatch genmm``'s ``--units``, ``--up``).
        address, workers, progress: see :func:`motionmatch.batch.build`.
    """

    out = Path(output)
    if out.exists() and not out.is_dir():
        raise BatchError(f"{out}: is a file; give a folder for the outputs")
    write = writer(fmt)
    seeds = sorted({int(s) for s in seeds})
    if not seeds or seeds[0] < 0:
        raise BatchError("--seeds: give one or more whole numbers >= 0")
    cfg = config or GenMMConfig()
    if cfg.device != "cpu":
        raise BatchError("batch genmm runs GenMM on the CPU (device 'cpu')")
    paths = [Path(e) for e in examples]
    for p in paths:
        if not p.is_file():
            raise BatchError(f"{p}: no such example file")
    stems = [p.stem for p in paths]
    if len(set(stems)) != len(stems):
        raise BatchError("examples must have different file names (they name the output folders)")
    from motionmatch.datasets import load_takes

    motions = load_takes(paths, units=units, up=up)  # read as 'motionmatch genmm' reads them
    cfg_dict = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(cfg).items()}
    inputs = {str(p): sha256_file(p) for p in paths}
    settings = {"config": cfg_dict, "frames": frames, "loop": loop, "format": fmt, "seeds": seeds,
                "motionmatch": versions()["motionmatch"]}
    cells = []
    for i, p in enumerate(paths):
        for s in seeds:
            name = f"{p.stem}/{p.stem}_seed{s}"
            cells.append(Cell(
                key=name, outputs=(f"{name}.{fmt}", f"{name}.json"), cost=motions[i].num_frames,
                input_hash=sha256_json({"example": inputs[str(p)], "seed": s, "config": cfg_dict, "frames": frames,
                                        "loop": loop, "format": fmt, "motionmatch": settings["motionmatch"]}),
                args=(Shared(i), s, cfg_dict, frames, loop)))

    def save(cell: Cell, value: tuple[Motion, dict]) -> None:
        motion, row = value
        write(motion, out / cell.outputs[0])
        example, seed = cell.key.split("/")[0], int(cell.key.rsplit("_seed", 1)[1])
        row = {"example": example, "seed": seed, "output": cell.outputs[0], **row}
        with atomic_write(out / cell.outputs[1], "w", encoding="utf-8") as f:
            json.dump(row, f, indent=2)

    result = run_cells("genmm", out, out / "manifest.json", cells, genmm_cell, save, shared=motions,
                       inputs=inputs, settings=settings, progress=progress, address=address, workers=workers)
    table = out / "metrics.csv"
    write_metrics_table(table, [out / c.outputs[1] for c, o in zip(cells, result.cells) if o.status != "failed"])
    add_outputs_to_manifest(result, {}, [table])
    return result


def write_metrics_table(path: Path, rows: Sequence[Path]) -> None:
    """``metrics.csv`` from the cells' metrics rows (JSON files), atomically."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=METRIC_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(json.loads(r.read_text(encoding="utf-8")))
    with atomic_write(path, "w", encoding="utf-8") as f:
        f.write(buf.getvalue())
