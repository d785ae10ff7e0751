"""Shared, cached data for the pose tests (no tests here).

The quick configuration (:data:`motionmatch.control.pose.default.QUICK`) is rendered and
trained once per test session (a few seconds); the module is imported by the other
``test_pose_*`` modules so the cache is shared.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from motionmatch.control.pose.keypoints import KEYPOINTS, KP, KeypointStream, standing_pose


@functools.lru_cache(maxsize=1)
def quick_bundle(root: str):
    """``(data, knn, improved)`` of the quick configuration."""
    from conftest import long_step
    from motionmatch.control.pose import default as d

    with long_step("pose tests: rendering and training the quick classifiers", 90):
        data = d.prepare(root, d.QUICK)
        knn, imp = d.train(data)
    return data, knn, imp


@functools.lru_cache(maxsize=1)
def e2e_database(root: str):
    """LAFAN1 60 fps (mirrored) plus the creeping take, 3D schema: jumps and creeps work."""
    from conftest import long_step
    from motionmatch.anim import load_bvh
    from motionmatch.database import MotionDatabase, default_schema
    from motionmatch.datasets import load_folder

    with long_step("pose tests: building the LAFAN1 database", 20):
        clips = load_folder(Path(root) / "lafan1-60fps")
        ground = load_bvh(Path(root) / "lafan1" / "ground1_subject4.bvh")
        ground.tags = ("creep",)
        return MotionDatabase.build([*clips, ground], mirror_copies=True, schema=default_schema(vertical=True))


def pose_cli(argv: list[str]) -> int:
    """Run ``motionmatch pose ...`` through the command line's entry point."""
    from motionmatch.cli.main import main

    return main(["pose", *argv])


def synthetic_stream(frames: int = 60, fps: float = 30.0, vx: float = 0.0, scale: float = 100.0,
                     seed: int = 0, swing: float = 0.2) -> KeypointStream:
    """A standing person drifting sideways at ``vx`` pixels per frame, swinging the arms
    (``swing`` torso lengths), with noise."""
    rng = np.random.default_rng(seed)
    kps = []
    for i in range(frames):
        p = standing_pose(scale, (320.0 + vx * i, 240.0))
        p[KP["left_wrist"], 1] += swing * scale * np.sin(i / 3)
        p[KP["right_wrist"], 1] -= swing * scale * np.sin(i / 3)
        kps.append(p + rng.normal(0, 0.5, p.shape))
    return KeypointStream(np.arange(frames) / fps, np.stack(kps), KEYPOINTS)
