"""Small helpers shared by the CLI commands.

The argparse types refuse out-of-range numbers as usage errors (exit code 2, one line
naming the option); :func:`output_file` refuses an output path before any work is done,
so that a refused command leaves no file behind.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path

from motionmatch.errors import MotionMatchError

MAX_FPS = 1000.0
"""The highest frame rate an option accepts."""
MAX_SECONDS = 3600.0
"""The longest run, recording or output an option asks for (an hour)."""
MAX_FRAMES = 216_000
"""The most frames an option asks for (an hour at 60 fps)."""


def number(convert: Callable[[str], float], ok: Callable[[float], bool], expected: str) -> Callable[[str], float]:
    """An argparse ``type``: ``convert(text)`` if ``ok`` accepts it, else a usage error
    saying ``expected`` (NaN fails every comparison, so it is refused by any range)."""

    def parse(text: str) -> float:
        try:
            value = convert(text)
        except (ValueError, OverflowError):
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


def float_range(low: float, high: float, *, above: bool = False) -> Callable[[str], float]:
    """Numbers from ``low`` (or, with ``above``, more than ``low``) to ``high``."""
    if above:
        return number(float, lambda v: low < v <= high, f"a number above {low:g} and at most {high:g}")
    return number(float, lambda v: low <= v <= high, f"a number from {low:g} to {high:g}")


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    """Whole numbers from ``low`` to ``high`` (no upper bound when ``None``)."""
    if high is None:
        return number(int, lambda v: v >= low, f"a whole number >= {low}")
    return number(int, lambda v: low <= v <= high, f"a whole number from {low} to {high}")


finite = number(float, math.isfinite, "a finite number")
positive = number(float, lambda v: 0 < v < math.inf, "a number above 0")
non_negative = number(float, lambda v: 0 <= v < math.inf, "a number >= 0")
fps = float_range(0, MAX_FPS, above=True)
seconds = float_range(0, MAX_SECONDS, above=True)
frames = int_range(1, MAX_FRAMES)


def units(text: str) -> str | float:
    """A BVH length unit: ``auto``, a unit name (``m``, ``cm``, ...) or metres per file unit."""
    from motionmatch.anim.bvh import UNIT_SCALES

    if text == "auto" or text in UNIT_SCALES:
        return text
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected auto, one of {', '.join(sorted(UNIT_SCALES))} or metres per "
                                         f"file unit (a number above 0), got {text!r}")
    return value


def folder(text: str) -> str:
    """A folder that exists or can be made (argparse type: not a file)."""
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"expected a folder, {text!r} is a file")
    return text


def existing_folder(text: str) -> str:
    """A folder that exists (argparse type)."""
    if not Path(text).is_dir():
        what = "a file" if Path(text).exists() else "no such folder"
        raise argparse.ArgumentTypeError(f"expected a folder, got {text!r} ({what})")
    return text


def output_file(path: str | Path | None, suffixes: tuple[str, ...], what: str) -> Path | None:
    """``path`` as a ``Path`` if it is a file this command can write with one of ``suffixes``
    (``None`` passes through); otherwise a one-line error naming it and what to give."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise MotionMatchError(f"{p}: is a folder; give the {what} a file name ending in {' or '.join(suffixes)}")
    if p.suffix.lower() not in suffixes:
        raise MotionMatchError(f"{p}: the {what} must be a {' or '.join(suffixes)} file")
    folder = p.absolute().parent
    while not folder.exists():  # missing folders are made on writing
        folder = folder.parent
    if not folder.is_dir():
        raise MotionMatchError(f"{p}: cannot write the {what}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise MotionMatchError(f"{p}: cannot write the {what}: no permission to write in {folder}")
    return p
