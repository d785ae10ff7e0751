"""Batch jobs on Ray: databases, GenMM sets and evaluation sweeps, one task per cell.

``pip install 'motionmatch[ray]'``. With no address a job starts Ray inside this process
(the embedded default, every core or ``workers``); ``address="HOST:PORT"`` joins a
running cluster. Every job is resumable, writes its outputs atomically and a manifest,
and reports failed cells instead of stopping (:mod:`motionmatch.batch.jobs`).

    from motionmatch import batch

    batch.build(["../shared/data/lafan1-60fps"], "lafan.npz", mirror_copies=True)
    batch.genmm(["salsa.bvh"], "out/", seeds=range(8))
    batch.sweep("sweep.json", "results/")
"""

from motionmatch.batch.build import build, clip_files
from motionmatch.batch.cluster import BatchError, import_ray, ray_session
from motionmatch.batch.genmm import genmm
from motionmatch.batch.jobs import Cell, CellOutcome, JobResult, JobStatus, run_cells
from motionmatch.batch.sweep import sweep
from motionmatch.batch.sweep_spec import SweepSpec, load_sweep

__all__ = ["BatchError", "Cell", "CellOutcome", "JobResult", "JobStatus", "SweepSpec", "build", "clip_files", "genmm",
           "import_ray", "load_sweep", "ray_session", "run_cells", "sweep"]
