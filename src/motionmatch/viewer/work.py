"""What a tab's jobs do on the viewer's worker threads (:mod:`motionmatch.viewer.jobs`):
GenMM synthesis and export files. Each takes ``check``, called between its steps, which
raises once the tab has closed (:meth:`~motionmatch.viewer.jobs.TabJobs.check`), so the
work stops within an iteration of the close."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["export_file", "synthesize"]


def synthesize(paths, keyframes, seconds: float, seed: int, loop: bool, variants: int,
               check: Callable[[], None]):
    """``variants`` GenMM motions from the example files ``paths`` (and BVH ``keyframes``):
    ``(fps, results, seconds taken)``; ``check`` after every iteration."""
    from motionmatch.genmm import GenMM, Keyframes

    t0 = time.perf_counter()
    # One core left to the session's own stepping and messages (GenMM's output is the same
    # on any number of threads).
    gen = GenMM([str(p) for p in paths], threads=max(1, _cores() - 1))
    check()
    frames = max(round(seconds * gen.fps), 16)
    keys = Keyframes.from_bvh(keyframes) if keyframes is not None else None
    results = []
    for i in range(variants):
        check()
        results.append(gen.sample(frames, seed=seed + i, loop=loop, keyframes=keys, progress=lambda _p: check()))
    return gen.fps, results, time.perf_counter() - t0


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def export_file(motion, fmt: str, mannequin, check: Callable[[], None]) -> tuple[bytes, str]:
    """``motion`` as a file's bytes and content type: BVH, or binary glTF (``fmt="glb"``)
    with the body ``mannequin(skeleton)``."""
    check()
    with tempfile.TemporaryDirectory() as d:
        if fmt == "glb":
            from motionmatch.io.gltf import Character, write_glb

            p = write_glb(Path(d) / "export.glb", [Character(motion.name or "character", motion,
                                                             mannequin(motion.skeleton))])
        else:
            from motionmatch.anim import save_bvh

            p = save_bvh(motion, Path(d) / "export.bvh")
        check()
        data = p.read_bytes()
    return data, "model/gltf-binary" if fmt == "glb" else "application/octet-stream"
