"""Live pose control: poses pushed as they arrive become an intent every frame.

:class:`PoseControl` classifies the stream causally
(:class:`~.classify.StreamingClassifier`) and turns the current command into an intent
with :class:`~.commands.CommandMapper`. The offline path (a recorded stream playing a
character) is :func:`motionmatch.runtime.pose_run.run_keypoints`.
"""

from __future__ import annotations

from motionmatch.control.intent import GaitSpeeds, Intent
from motionmatch.control.pose.classify import PoseClassifier, StreamingClassifier
from motionmatch.control.pose.commands import CommandMapper

__all__ = ["PoseControl"]


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
