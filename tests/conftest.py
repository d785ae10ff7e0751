"""Shared fixtures: where the real motion data is, and skipping when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def data_root() -> Path:
    """``$MOTIONMATCH_DATA``, or ``../shared/data`` beside the repository."""
    env = os.environ.get("MOTIONMATCH_DATA")
    return Path(env) if env else (REPO.parent / "shared" / "data")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    root = data_root()
    if not root.is_dir():
        pytest.skip(f"motion data not found at {root}; set MOTIONMATCH_DATA to the shared data folder")
    return root
