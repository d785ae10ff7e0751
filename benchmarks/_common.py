"""Shared set-up for the benchmarks: where the data is, and the scripted inputs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def data_root(arg: str | None = None) -> Path:
    root = Path(arg or os.environ.get("MOTIONMATCH_DATA") or REPO.parent / "shared" / "data")
    if not root.is_dir():
        sys.exit(f"motion data not found at {root}; pass --data or set MOTIONMATCH_DATA")
    return root


# Walking with 90 and 180 degree turns, running, stopping: the inputs the ablations use.
TURNS_SCRIPT = {
    "duration": 48.0,
    "events": [{"t": 4.0 * i, "keys": k.split()} for i, k in enumerate(
        ["w", "d", "s", "a", "w", "a", "s", "d", "w shift", "d shift", "", "w"])],
}
