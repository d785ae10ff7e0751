"""Helpers shared by the batch-job tests (test_batch.py, test_batch_cluster.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

#: The three smallest LAFAN1 (60 fps) clips: a quick database.
BUILD_CLIPS = ("multipleActions1_subject1_jog.bvh", "multipleActions1_subject1_run.bvh",
               "ground1_subject4_backward.bvh")
GENMM_EXAMPLE = "genmm-examples/Xia_normal.bvh"
FRAMES = 40  # GenMM output frames (at 30 fps)


def same_npz(a: Path, b: Path) -> bool:
    """Whether two .npz files hold the same arrays (names, dtypes, values)."""
    with np.load(a) as x, np.load(b) as y:
        return sorted(x.files) == sorted(y.files) and all(
            x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k]) for k in x.files)


def write_short_example(src: Path, dst: Path) -> Path:
    """A 3-frame cut of an example: too short for GenMM's patches, so its cells fail."""
    from motionmatch.anim import load_bvh, save_bvh

    return save_bvh(load_bvh(src)[0:3], dst)


def write_sweep(tmp: Path, db: Path) -> Path:
    """A small sweep: one scenario and one path x one setting x one seed, short runs."""
    spec = {"database": str(db), "scenarios": [str(REPO / "scenarios" / "zigzag-cones.json")],
            "paths": [str(REPO / "paths" / "square.json")],
            "settings": {"exact": {"method": "linear", "k": 1, "levels": 1}}, "seeds": [0], "duration": 1.0}
    p = tmp / "sweep.json"
    p.write_text(json.dumps(spec))
    return p
