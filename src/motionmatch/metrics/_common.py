"""Small shared helpers for the metrics: input checking."""

from __future__ import annotations

import numpy as np


def check_fps(fps: float) -> float:
    fps = float(fps)
    if not (np.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be a positive number, got {fps}")
    return fps
