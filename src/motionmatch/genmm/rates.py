"""Which frame rates GenMM takes at face value, and what it does with the others.

GenMM synthesizes at one rate (:attr:`~motionmatch.genmm.GenMMConfig.fps`, 30 by
default) and resamples every example clip to it. A clip's rate comes from its BVH
``Frame Time``; a keyframe-like file (``Frame Time: 1.0``: one pose per second) or a
wrong header makes that rate implausible, and resampling it silently turns a few hundred
poses into thousands of interpolated frames (a 300-frame file at 1 fps becomes 8,971
frames at 30 fps, and a synthesis of minutes instead of a second).

So a clip resampled from a rate outside :data:`PLAUSIBLE_FPS` is

* **warned about** (:class:`FrameRateWarning`, one line naming the file, its rate and the
  fix) when it stays small, and
* **refused** (:class:`~motionmatch.errors.MotionError`) when resampling would multiply
  its frames to more than :data:`MAX_RESAMPLED_FRAMES`.

The fix is to keep the clip's frames as they are: ``fps=None`` in the API
(``--fps native`` on the command line) synthesizes at the examples' own rate. A clip
that is not resampled (its rate is the synthesis rate) is never warned about. Key poses
(:meth:`~motionmatch.genmm.Keyframes.from_bvh`) are not resampled either: there a
``Frame Time`` of 1 s is the legitimate spacing of the keys.
"""

from __future__ import annotations

import math
import warnings

from motionmatch.anim.motion import Motion
from motionmatch.errors import MotionError

__all__ = ["FIX", "MAX_RESAMPLED_FRAMES", "PLAUSIBLE_FPS", "FrameRateWarning", "check_rate", "resampled_frames"]

PLAUSIBLE_FPS: tuple[float, float] = (10.0, 480.0)
"""Frame rates (frames per second) of motion data taken at face value: 12-30 for hand
animation, film and games, 50-120 for most motion capture, 240-480 for high-speed
capture. A rate below 10 fps (a ``Frame Time`` over 0.1 s) is keyframes or a wrong
header; one above 480 fps (under about 2.1 ms) is a wrong header."""

MAX_RESAMPLED_FRAMES = 1000
"""The most frames (at the synthesis rate) that resampling may grow a clip at an
implausible rate to; beyond it the clip is refused. 1,000 frames at 30 fps are 33 s, a
synthesis of a few seconds on 2 cores; the time grows with the square of the length."""

FIX = ("pass --fps native on the command line (fps=None in the API) to synthesize at the examples' "
       "own rate without resampling, or correct the file's Frame Time")
"""What to do about a clip at an implausible rate (the end of every message here)."""


class FrameRateWarning(UserWarning):
    """An example clip at an implausible frame rate is being resampled (see :mod:`.rates`)."""


def resampled_frames(frames: int, fps: float, to_fps: float) -> int:
    """Frames of a clip of ``frames`` frames at ``fps`` resampled to ``to_fps`` (the count
    :func:`motionmatch.anim.resample.resample` makes: the same time span, ``(frames - 1) /
    fps`` seconds)."""
    return math.floor((frames - 1) / fps * to_fps + 1e-6) + 1


def _describe(motion: Motion, what: str) -> str:
    who = str(motion.source) if motion.source is not None else (motion.name or "a clip")
    return f"{who}: {what} at {motion.fps:g} fps (Frame Time {1.0 / motion.fps:g} s)"


def check_rate(motion: Motion, to_fps: float | None, what: str = "example") -> None:
    """Check a clip about to be resampled from ``motion.fps`` to ``to_fps`` frames per second.

    Nothing happens when the rate is plausible or the clip is not resampled (``to_fps``
    ``None`` or equal). Otherwise a :class:`FrameRateWarning` is issued, or, when the clip
    would grow to more than :data:`MAX_RESAMPLED_FRAMES` frames, a
    :class:`~motionmatch.errors.MotionError` is raised before any work is done.

    Args:
        motion: the clip (its ``source`` or ``name`` names it in the message).
        to_fps: the synthesis rate in frames per second, or ``None`` (no resampling).
        what: what the clip is, for the message ("example", "completion clip").
    """
    low, high = PLAUSIBLE_FPS
    if to_fps is None or abs(motion.fps - to_fps) < 1e-9 or low <= motion.fps <= high:
        return
    n = motion.num_frames
    m = resampled_frames(n, motion.fps, to_fps)
    head = (f"{_describe(motion, what)} is not a plausible motion rate ({low:g}-{high:g} fps; keyframes or a "
            f"wrong header?)")
    if m > max(n, MAX_RESAMPLED_FRAMES):
        raise MotionError(f"{head}: resampling it to {to_fps:g} fps would turn its {n:,} frames into {m:,} and "
                          f"take minutes; refused: {FIX}")
    warnings.warn(f"{head}: resampled to {to_fps:g} fps, its {n:,} frames become {m:,}; if that is not meant, {FIX}",
                  FrameRateWarning, stacklevel=2)
