"""Motion data for environment-aware matching: LAFAN1 plus its jumping and crawling takes.

:func:`environment_clips` returns the ``lafan1-60fps`` segments (tags from their names) and,
optionally, the original ``lafan1/obstacles1_subject1`` take (walking and jogging over
obstacles: tagged ``jump``, ``obstacle``) and ``lafan1/ground1_subject4`` (crawling: tagged
``crawl``). ``obstacles1`` also walks on platforms about 1 m high, where its root (projected
to y = 0) would make the body look a metre above the ground: only the stretches where a
foot touches the floor (y ~ 0) at least once every 1.5 s are kept, as separate clips.

Build a database with body ellipses and heights from the command line::

    python -m motionmatch.environment.data OUT.npz [--data DIR] [--no-extra]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from motionmatch.anim import Motion, load_bvh
from motionmatch.anim.contacts import find_feet

__all__ = ["data_root", "environment_clips", "floor_segments"]


def data_root(arg: str | Path | None = None) -> Path:
    """``arg``, ``$MOTIONMATCH_DATA``, or ``../shared/data`` beside the repository."""
    if arg:
        return Path(arg)
    env = os.environ.get("MOTIONMATCH_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3].parent / "shared" / "data"


def floor_segments(motion: Motion, *, floor: float = 0.08, window_s: float = 1.5, elevated: float = 0.15,
                   margin_s: float = 1.0, min_length_s: float = 3.0) -> list[tuple[int, int]]:
    """Frame ranges ``[a, b)`` on the floor: the lowest foot touches it (below ``floor`` m) at
    least once in every ``window_s`` seconds, and no foot stands still (slower than 0.5 m/s)
    higher than ``elevated`` m within ``margin_s`` (jumps are kept, platforms are not); at
    least ``min_length_s`` long."""
    feet = find_feet(motion.skeleton)
    fp = motion.world_positions[:, feet]
    low = fp[:, :, 1].min(axis=1)
    F = len(low)
    half = max(1, round(window_s * motion.fps / 2))
    pad = np.concatenate([np.full(half, np.inf), low, np.full(half, np.inf)])
    win = np.lib.stride_tricks.sliding_window_view(pad, 2 * half + 1).min(axis=1)[:F]
    speed = np.linalg.norm(np.gradient(fp, 1.0 / motion.fps, axis=0), axis=2)
    standing_high = ((speed < 0.5) & (fp[:, :, 1] > elevated)).any(axis=1)
    m = max(1, round(margin_s * motion.fps))
    padb = np.concatenate([np.zeros(m, bool), standing_high, np.zeros(m, bool)])
    near_high = np.lib.stride_tricks.sliding_window_view(padb, 2 * m + 1).any(axis=1)[:F]
    ok = (win < floor) & ~near_high
    segs = []
    d = np.diff(np.r_[0, ok.astype(np.int8), 0])
    for a, b in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
        if (b - a) / motion.fps >= min_length_s:
            segs.append((int(a), int(b)))
    return segs


def environment_clips(root: str | Path | None = None, *, extra: bool = True, progress: bool = False) -> list[Motion]:
    """The clips of an environment-aware LAFAN1 database (see the module docstring)."""
    from motionmatch.datasets import load_folder

    base = data_root(root)
    clips = list(load_folder(base / "lafan1-60fps", progress=progress))
    if extra:
        obst = base / "lafan1" / "obstacles1_subject1.bvh"
        ground = base / "lafan1" / "ground1_subject4.bvh"
        if obst.exists():
            m = load_bvh(obst)
            for n, (a, b) in enumerate(floor_segments(m)):
                seg = m[a:b]
                seg.name = f"obstacles1_subject1_floor{n}"
                seg.tags = ("jump", "obstacle")
                clips.append(seg)
        if ground.exists():
            g = load_bvh(ground)
            g.tags = ("crawl",)
            clips.append(g)
    return clips


def main(argv: list[str] | None = None) -> int:
    from motionmatch.database import MotionDatabase
    from motionmatch.database.schema import environment_schema

    p = argparse.ArgumentParser(prog="python -m motionmatch.environment.data",
                                description="Build an environment-aware LAFAN1 database (body ellipses + heights).")
    p.add_argument("output", metavar="OUT.npz")
    p.add_argument("--data", help="data folder (default $MOTIONMATCH_DATA or ../shared/data)")
    p.add_argument("--no-extra", action="store_true", help="only lafan1-60fps (no jumping/crawling takes)")
    p.add_argument("--no-mirror", action="store_true", help="no mirrored copies")
    a = p.parse_args(argv)
    clips = environment_clips(a.data, extra=not a.no_extra, progress=sys.stderr.isatty())
    db = MotionDatabase.build(clips, mirror_copies=not a.no_mirror, schema=environment_schema(heights=True),
                              progress=sys.stderr.isatty())
    db.save(a.output)
    print(f"wrote {a.output}: {db.num_frames} frames, {db.schema.dims}-D '{db.schema.name}', tags {', '.join(db.tags)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
