"""Small helpers shared by the CLI commands.

The argparse types refuse out-of-range numbers as usage errors (exit code 2, one line
naming the option); :func:`output_file` refuses an output path before any work is done,
so that a refused command leaves no file behind. :class:`Progress` shows a long step's
progress (share done, elapsed, time left) on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

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


UP_CHOICES = ("auto", "y", "z")
UP_HELP = "up axis of the BVH files: auto (default: found from the data), y or z (converted to Y up)"
UNITS_HELP = "length unit of the BVH files: auto (default: from the skeleton's size), m, cm, mm, in, or metres per unit"


def add_bvh_options(parser: argparse.ArgumentParser) -> None:
    """``--units`` and ``--up``, the options of every command that reads BVH files."""
    parser.add_argument("--units", type=units, default="auto", help=UNITS_HELP)
    parser.add_argument("--up", choices=UP_CHOICES, default="auto", help=UP_HELP)


@contextlib.contextmanager
def warnings_as_lines(prog: str, *always: type[Warning]) -> Iterator[None]:
    """Show warnings as one line each on stderr, ``PROG: warning: MESSAGE``, as they
    happen; every :class:`~motionmatch.errors.DataWarning` (and every warning of the
    ``always`` classes) is shown, and every :class:`~motionmatch.errors.ModeWarning` once
    per message; others as Python's filters say (once per place)."""
    import warnings

    from motionmatch.errors import DataWarning, ModeWarning

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"{prog}: warning: {' '.join(str(message).split())}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        for cls in (DataWarning, *always):
            warnings.simplefilter("always", cls)
        warnings.simplefilter("default", ModeWarning)  # once per message (a crowd: once, not per agent)
        warnings.showwarning = show
        yield


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


PROGRESS_DELAY_S = 3.0
"""Seconds a step runs before :class:`Progress` shows anything (quick steps stay silent)."""
PROGRESS_INTERVAL_S = 10.0
"""Seconds between progress lines when stderr is not a terminal (a pipe or a log file)."""
_REDRAW_S = 0.25  # seconds between redraws of the progress line on a terminal


def duration(seconds: float) -> str:
    """Seconds as a short duration: ``"8 s"``, ``"2 min 05 s"``, ``"1 h 02 min"``."""
    if not math.isfinite(seconds):
        return "?"
    s = round(max(seconds, 0.0))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Progress:
    """A long step's progress on stderr: what is being done, the share done, the seconds
    elapsed and the time left, estimated from the share done so far
    (``elapsed * (1 - done) / done``).

    Nothing is shown during the first :data:`PROGRESS_DELAY_S` seconds, so quick runs
    print nothing. After that, on a terminal one line is rewritten in place; otherwise (a
    pipe, a log) a new line is printed at most every :data:`PROGRESS_INTERVAL_S` seconds.
    :meth:`close` (or leaving the ``with`` block) ends the line with the total time if
    anything was shown. ::

        with Progress("motionmatch genmm", enabled=not args.quiet) as bar:
            for i in range(k):
                bar.update(f"sample {i + 1}/{k}", done=i / k)

    Args:
        label: the first word of every line (the command).
        enabled: ``False`` shows nothing (``--quiet``).
        stream: where to write (default ``sys.stderr``).
        clock: seconds from an arbitrary start (default :func:`time.monotonic`).
    """

    def __init__(self, label: str, *, enabled: bool = True, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.label = label
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.start = clock()
        self.shown = False
        self._last = -math.inf
        self._width = 0
        self._what = ""
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close(ok=exc[0] is None)

    def update(self, what: str, done: float | None = None, *, eta_s: float | None = None,
               phase: bool = False) -> None:
        """Report ``what`` is being done and the share ``done`` (0-1) of the whole step
        (``None``: unknown, no estimate); shown when due (see the class), or with
        ``phase`` (a new phase that may not report again) as soon as the delay is over.
        ``eta_s`` (seconds left), when the caller knows better, replaces the estimate
        from ``done``."""
        self._what = what
        now = self.clock()
        elapsed = now - self.start
        due = 0.0 if phase else _REDRAW_S if self._tty else PROGRESS_INTERVAL_S
        if not self.enabled or elapsed < PROGRESS_DELAY_S or now - self._last < due:
            return
        self._last = now
        text = f"{self.label}: {what}"
        if done is not None and done > 0:
            done = min(done, 1.0)
            left = elapsed * (1 - done) / done if eta_s is None else eta_s
            text += f": {100 * done:.0f}% done, {duration(elapsed)} elapsed, about {duration(left)} left"
        else:
            text += f": {duration(elapsed)} elapsed"
        self._write(text)

    def close(self, ok: bool = True) -> None:
        """End the progress: if anything was shown, a last line with the total time
        (``ok=False``: the line is only ended, as an error follows)."""
        if not self.shown:
            return
        if ok:
            self._write(f"{self.label}: {self._what}: done in {duration(self.clock() - self.start)}")
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()
        self.shown = False

    def _write(self, text: str) -> None:
        if self._tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.shown = True


def missing_command(parser: argparse.ArgumentParser,
                    subparsers: argparse._SubParsersAction) -> Callable[[argparse.Namespace], int]:
    """The ``func`` of a group command (``datasets``, ``pose``) run without a subcommand:
    a one-line usage error on stderr listing the subcommands; returns exit code 2, as
    argparse's usage errors."""

    def missing(args: argparse.Namespace) -> int:
        print(f"{parser.prog}: error: give a command: {', '.join(subparsers.choices)} "
              f"(see '{parser.prog} --help')", file=sys.stderr)
        return 2

    return missing


PREVIEW_WRITERS = {".mp4": ("imageio_ffmpeg", "imageio-ffmpeg"), ".gif": ("PIL", "Pillow")}
"""The module (and package) that writes each kind of preview video; all need matplotlib."""


def preview_file(path: str | Path | None) -> Path | None:
    """``path`` checked as a preview video to write (``.mp4`` or ``.gif``, see
    :func:`output_file`) whose optional packages (``motionmatch[viz]``) are installed,
    before any work is done; ``None`` passes through."""
    p = output_file(path, tuple(PREVIEW_WRITERS), "preview")
    if p is None:
        return None
    import importlib.util

    for module, package in (("matplotlib", "matplotlib"), PREVIEW_WRITERS[p.suffix.lower()]):
        if importlib.util.find_spec(module) is None:
            raise MotionMatchError(f"{p}: writing a {p.suffix.lower()} preview needs the {package!r} package, which "
                                   f"is not installed; pip install 'motionmatch[viz]' (or leave out --preview)")
    return p


