"""Motion data for environment-aware matching: LAFAN1 plus its jumping and crawling takes.

:func:`environment_clips` returns the ``lafan1-60fps`` segments (tags from their names) and,
optionally, the original ``lafan1/obstacles1_subject1`` take (walking and jogging over
obstacles: tagged ``jump``, ``obstacle``) and ``lafan1/ground1_subject4`` (crawling: tagged
``crawl``). ``obstacles1`` also walks on platforms about 1 m high, where its root (projected
to y = 0) would make the body look a metre above the ground: only the stretches where a
foot touches the floor (y ~ 0) at least once every 1.5 s are kept, as separate clips
(:func:`floor_segments`).

Those stretches keep the take's passages *over* obstacles: jogging onto a box about 0.48 m
high and off it again in one go (0.2-1.4 s with a foot on it, at 0.8-2 m/s, from floor to
floor; at 64.5, 86, 88.4, 132, 141 and 146.5 s). They are the only frames of LAFAN1 whose
lowest joint is more than 0.25 m above the floor while the body travels forward (the
``lafan1-60fps`` ``jumps1_*`` segments have no flight phase at all: their lowest joint
never rises 5 cm above the floor): the motion with which a character gets over a fence.

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
                   margin_s: float = 1.0, min_length_s: float = 3.0, over_max_s: float = 1.5,
                   over_min_speed: float = 0.7) -> list[tuple[int, int]]:
    """Frame ranges ``[a, b)`` on the floor, at least ``min_length_s`` long.

    On the floor: the lowest foot touches it (below ``floor`` m) at least once in every
    ``window_s`` seconds, and no *platform* is within ``margin_s``. A foot standing still
    (slower than 0.5 m/s) higher than ``elevated`` m is on something; such moments closer
    than 0.3 s to each other form an episode. An episode of at most ``over_max_s`` seconds
    in which the root moves at ``over_min_speed`` m/s or more on average is a passage over
    an obstacle (a foot put on a box on the way across, as in LAFAN1's obstacle takes) and
    is kept; a longer or slower one is a platform (standing or walking on it) and is cut
    out with its margin.

    Args:
        motion: the take (joint 0 its root; feet found by :func:`find_feet`).

    Returns:
        ``[(a, b), ...]`` frame ranges, in order.
    """
    feet = find_feet(motion.skeleton)
    fp = motion.world_positions[:, feet]
    low = fp[:, :, 1].min(axis=1)
    F = len(low)
    half = max(1, round(window_s * motion.fps / 2))
    pad = np.concatenate([np.full(half, np.inf), low, np.full(half, np.inf)])
    win = np.lib.stride_tricks.sliding_window_view(pad, 2 * half + 1).min(axis=1)[:F]
    speed = np.linalg.norm(np.gradient(fp, 1.0 / motion.fps, axis=0), axis=2)
    standing_high = ((speed < 0.5) & (fp[:, :, 1] > elevated)).any(axis=1)
    platform = np.zeros(F, dtype=bool)
    root = motion.world_positions[:, 0, :][:, [0, 2]]
    step = np.r_[0.0, np.linalg.norm(np.diff(root, axis=0), axis=1)]
    path = np.cumsum(step)
    for a, b in _episodes(standing_high, max(1, round(0.3 * motion.fps))):
        dur = (b - a) / motion.fps
        mean_speed = (path[b - 1] - path[a]) / max(dur, 1e-9)
        if dur > over_max_s or mean_speed < over_min_speed:
            platform[a:b] = True
    m = max(1, round(margin_s * motion.fps))
    padb = np.concatenate([np.zeros(m, bool), platform, np.zeros(m, bool)])
    near_high = np.lib.stride_tricks.sliding_window_view(padb, 2 * m + 1).any(axis=1)[:F]
    ok = (win < floor) & ~near_high
    segs = []
    d = np.diff(np.r_[0, ok.astype(np.int8), 0])
    for a, b in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
        if (b - a) / motion.fps >= min_length_s:
            segs.append((int(a), int(b)))
    return segs


def _episodes(flags: np.ndarray, max_gap: int) -> list[tuple[int, int]]:
    """Runs ``[a, b)`` of ``True`` in ``flags [F]``, runs less than ``max_gap`` frames apart merged."""
    d = np.diff(np.r_[0, np.asarray(flags, dtype=np.int8), 0])
    starts, stops = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    if starts.size == 0:
        return []
    keep = np.r_[True, (starts[1:] - stops[:-1]) > max_gap]  # a run that starts a new episode
    first = starts[keep]
    last = np.r_[stops[np.flatnonzero(keep)[1:] - 1], stops[-1]]
    return list(zip(first.tolist(), last.tolist()))


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
