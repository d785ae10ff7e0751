"""Exception types, one per failure family.

Every message names the file (and line, where there is one), what was found and what
was expected, so that a user can fix the input without reading our code.
"""

from __future__ import annotations

from pathlib import Path


class MotionMatchError(Exception):
    """Base class of every error this package raises on purpose."""


class BVHError(MotionMatchError, ValueError):
    """A BVH file is malformed: bad hierarchy, bad channel, bad or missing frame data.

    Attributes:
        path: the file (or ``"<string>"`` for text parsed from memory).
        line: 1-based line number of the problem, or ``None`` when it is not tied to one line.
    """

    def __init__(self, path: str | Path | None, line: int | None, message: str):
        self.path = str(path) if path is not None else "<string>"
        self.line = line
        self.reason = message
        where = self.path if line is None else f"{self.path}, line {line}"
        super().__init__(f"{where}: {message}")


class SkeletonError(MotionMatchError, ValueError):
    """A skeleton is inconsistent, or a joint name/pattern does not match it."""


class MotionError(MotionMatchError, ValueError):
    """Motion arrays have wrong shapes, non-finite values, or clips cannot be combined."""


class DatasetError(MotionMatchError):
    """A dataset cannot be found, downloaded or verified."""


class InputError(MotionMatchError, ValueError):
    """A file is refused before it is read in full: larger than a documented limit, nested
    too deep, with a number too large, or declaring counts or shapes its own size cannot
    hold (:mod:`motionmatch._limits`). The message names the file, the field and the fix."""


class DataWarning(UserWarning):
    """Input data that loads but is implausible (a person 0.96 m tall, feet under the
    floor) or was changed to fit (put on the ground, a ground root dropped): one line
    naming the file, what was found and what was done or what to try. The command line
    shows each as ``motionmatch COMMAND: warning: ...``."""


class ModeWarning(UserWarning):
    """A mode asked for (jump, dance, creep, idle) that the database cannot play, and why:
    said once per character, whatever input asked (keys, a script, a pose command)."""
