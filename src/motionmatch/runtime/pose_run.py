"""A recorded keypoint stream drives a character (the offline path of ``motionmatch pose run``).

The stream is classified as it would be live (causally,
:meth:`~motionmatch.control.pose.classify.PoseClassifier.classify`), each controller frame
takes the command emitted by the most recent pose at or before its time,
:class:`~motionmatch.control.pose.commands.CommandMapper` turns it into an intent, and
:func:`~motionmatch.runtime.offline.run_input` plays the character (a
:class:`CommandInput` of a World's agent). Its numbers:
:func:`motionmatch.metrics.report.pose_run_report`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from motionmatch.control.pose.classify import ClassifiedStream, PoseClassifier
from motionmatch.control.pose.commands import CommandMapper
from motionmatch.control.pose.keypoints import KeypointStream
from motionmatch.runtime.inputs import InputSource, Want
from motionmatch.runtime.offline import RunRecord, run_input

__all__ = ["CommandInput", "PoseRun", "commands_at", "run_keypoints"]


@dataclass
class PoseRun:
    """What :func:`run_keypoints` produced.

    Attributes:
        record: the controller's :class:`~motionmatch.runtime.offline.RunRecord`.
        commands: ``[F]`` command in force at each controller frame (``""`` before any).
        classified: the classifier's output on the stream.
        times: ``[F]`` stream time of each controller frame.
    """

    record: RunRecord
    commands: np.ndarray
    classified: ClassifiedStream
    times: np.ndarray

    def segments(self) -> list[dict]:
        """``[{"command", "start_s", "end_s"}]``: runs of one command over the run."""
        out = []
        c = self.commands
        d = np.flatnonzero(np.r_[True, c[1:] != c[:-1], True])
        for a, b in itertools.pairwise(d):
            out.append({"command": str(c[a]), "start_s": round(float(self.times[a] - self.times[0]), 3),
                        "end_s": round(float(self.times[b - 1] - self.times[0]), 3)})
        return out


def commands_at(classified: ClassifiedStream, times: np.ndarray) -> np.ndarray:
    """The emitted command in force at each of ``times`` (the latest pose at or before it)."""
    names = np.asarray(classified.names("smoothed") + [""], dtype=object)
    j = np.searchsorted(classified.times, times + 1e-9, side="right") - 1
    j = np.where(j < 0, len(names) - 1, j)
    return names[j].astype(str)


def run_keypoints(db, stream: KeypointStream, classifier: PoseClassifier, settings=None, fps: float = 60.0,
                  progress: bool = False, name: str = "pose_run", mapper: CommandMapper | None = None) -> PoseRun:
    """Drive a character from ``db`` with a recorded keypoint stream (module docstring)."""
    cls = classifier.classify(stream)
    t0 = float(stream.times[0]) if len(stream) else 0.0
    duration = float(stream.times[-1] - t0) if len(stream) else 0.0
    n = int(np.floor(duration * fps + 1e-9)) + 1
    times = t0 + np.arange(n) / fps
    cmds = commands_at(cls, times)
    rec = run_input(db, lambda agent: CommandInput(cmds, mapper or CommandMapper(agent.ctrl.gaits)), n, settings,
                    fps=fps, progress=progress, name=name)
    return PoseRun(rec, cmds, cls, times)


class CommandInput(InputSource):
    """Pose commands, one per frame (``commands [F]``, ``""``: none yet), as intents
    (:class:`~motionmatch.control.pose.commands.CommandMapper`)."""

    def __init__(self, commands: np.ndarray, mapper: CommandMapper):
        self.commands = commands
        self.mapper = mapper
        self._i = 0

    def intent(self, agent, t: float, dt: float) -> Want:
        c = self.commands[min(self._i, len(self.commands) - 1)]
        self._i += 1
        return Want(self.mapper.update(c, dt))
