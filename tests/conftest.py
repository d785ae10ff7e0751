"""Shared fixtures: where the real motion data is, and skipping when it is absent."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_CONFIG: pytest.Config | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _CONFIG
    _CONFIG = config


def say(message: str) -> None:
    """One line on the terminal now, past pytest's output capture (progress of a long
    set-up, so that a run never sits silent for minutes)."""
    capman = _CONFIG.pluginmanager.getplugin("capturemanager") if _CONFIG is not None else None
    ctx = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
    with ctx:
        sys.stderr.write(f"\n  [{message}]")
        sys.stderr.flush()


@contextlib.contextmanager
def long_step(what: str, about_s: float):
    """Say that ``what`` starts (it takes about ``about_s`` seconds on 2 cores) and when it ends."""
    say(f"{what}: about {about_s:.0f} s on 2 cores ...")
    t0 = time.perf_counter()
    yield
    say(f"{what}: done in {time.perf_counter() - t0:.0f} s")


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
