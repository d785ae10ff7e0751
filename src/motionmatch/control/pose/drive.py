"""A keypoint stream drives a character: classify, map to intents, run the controller.

:func:`run_keypoints` is the offline path of ``motionmatch pose run``: the stream is
classified as it would be live (causally, :meth:`~.classify.PoseClassifier.classify`),
each controller frame takes the command emitted by the most recent pose at or before
its time, :class:`~.commands.CommandMapper` turns it into an intent, and
:func:`~motionmatch.runtime.offline.run_intents` plays the character.

:class:`PoseControl` is the live path (for a viewer): push poses as they arrive, ask
for the intent every frame.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from motionmatch.control.intent import GaitSpeeds, Intent
from motionmatch.control.pose.classify import ClassifiedStream, PoseClassifier, StreamingClassifier
from motionmatch.control.pose.commands import CommandMapper
from motionmatch.control.pose.keypoints import KeypointStream


@dataclass
class PoseRun:
    """What :func:`run_keypoints` produced.

    Attributes:
        record: the controller's :class:`~motionmatch.runtime.offline.RunRecord`.
        commands: ``[F]`` command in force at each controller frame (``""`` before any).
        classified: the classifier's output on the stream.
        times: ``[F]`` stream time of each controller frame.
    """

    record: object
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
    from motionmatch.runtime.controller import Controller
    from motionmatch.runtime.offline import run_intents

    cls = classifier.classify(stream)
    ctrl = Controller(db, settings)
    mapper = mapper or CommandMapper(ctrl.gaits)
    t0 = float(stream.times[0]) if len(stream) else 0.0
    duration = float(stream.times[-1] - t0) if len(stream) else 0.0
    n = int(np.floor(duration * fps + 1e-9)) + 1
    times = t0 + np.arange(n) / fps
    cmds = commands_at(cls, times)

    def intents():
        for i, c in enumerate(cmds):
            yield times[i], mapper.update(c, 0.0 if i == 0 else 1.0 / fps)

    rec = run_intents(ctrl, intents(), n, fps=fps, progress=progress, name=name)
    return PoseRun(rec, cmds, cls, times)


def pose_run_report(run: PoseRun, db) -> dict:
    """The run's metrics (as ``motionmatch run --report``) plus the command timeline and
    the share of frames in each controller mode."""
    from motionmatch.metrics.report import run_report

    rep = run_report(run.record, db)
    modes, counts = np.unique(run.record.modes, return_counts=True)
    rep["pose_commands"] = run.segments()
    rep["mode_fractions"] = {str(m): round(float(c) / len(run.record.modes), 4) for m, c in zip(modes, counts)}
    rep["pose_frames"] = len(run.classified.times)
    return rep


class PoseControl:
    """Live pose control: ``push`` poses as they arrive, ``intent(dt)`` every frame.

    >>> ctl = PoseControl(classifier, names=KEYPOINTS, gaits=controller.gaits)  # doctest: +SKIP
    >>> ctl.push(t, keypoints, confidence)                                     # doctest: +SKIP
    >>> controller.update(dt, ctl.intent(dt))                                   # doctest: +SKIP
    """

    def __init__(self, classifier: PoseClassifier, names, gaits: GaitSpeeds | None = None, camera_yaw: float = 0.0,
                 y_down: bool = True):
        self.stream = StreamingClassifier(classifier, tuple(names), y_down)
        self.mapper = CommandMapper(gaits, camera_yaw)

    @property
    def command(self) -> str:
        return self.stream.command_name

    def push(self, t: float, keypoints, confidence=None) -> str:
        return self.stream.push(t, keypoints, confidence)

    def intent(self, dt: float) -> Intent:
        return self.mapper.update(self.command, dt)
