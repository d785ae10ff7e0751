"""Pose commands turned into the controller's :class:`~motionmatch.control.intent.Intent`.

==============  =================================================================
command         intent (offline world axes; in the viewer relative to the camera)
==============  =================================================================
walk_forward    walk toward +Z (like W): ``gaits.walk`` m/s
walk_left       walk toward +X (like A: the character's left when it faces +Z)
walk_right      walk toward -X (like D)
run_*           the same directions at ``gaits.run`` m/s, gait ``"run"``
creep_*         the same directions at ``gaits.creep`` m/s with the ``creep`` action (like C)
jump            the ``jump`` action, keeping the last locomotion velocity for up to
                ``jump_carry_s`` (a running jump), else in place; re-triggered every
                ``jump_repeat_s`` while the command lasts
dance           standing, with the ``dance`` action (like P)
stand_still     standing (no input)
punch           standing, with the ``punch`` action (like F): one punch per command
==============  =================================================================

"Forward" is toward the performer's camera and "left" the performer's left; they map
to W and A, so a performer facing their webcam steers the character as the keys would
from a camera behind it. ``camera_yaw`` turns the directions like the keyboard's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from motionmatch.control.intent import GaitSpeeds, Intent
from motionmatch.control.keyboard import camera_axes
from motionmatch.control.pose.labels import COMMANDS

_DIRS = {"forward": (1.0, 0.0), "left": (0.0, 1.0), "right": (0.0, -1.0)}


class CommandMapper:
    """Turns a stream of commands (one per update) into intents.

    Args:
        gaits: speeds (use the database's: ``Controller(db).gaits``).
        camera_yaw: heading of the camera (radians), as for the keyboard.
        jump_repeat_s: while ``jump`` lasts, trigger a new jump this often.
        jump_carry_s: a jump right after locomotion keeps its velocity.
        actions: extra actions per command (e.g. ``{"punch": {"stop"}}``).
    """

    def __init__(self, gaits: GaitSpeeds | None = None, camera_yaw: float = 0.0, jump_repeat_s: float = 1.2,
                 jump_carry_s: float = 0.5, actions: Mapping[str, set[str]] | None = None):
        self.gaits = gaits or GaitSpeeds()
        self.camera_yaw = float(camera_yaw)
        self.jump_repeat_s = float(jump_repeat_s)
        self.jump_carry_s = float(jump_carry_s)
        self.extra = {k: frozenset(v) for k, v in (actions or {}).items()}
        self.reset()

    def reset(self) -> None:
        self.time = 0.0
        self._last_velocity = np.zeros(3)
        self._last_move_t = -math.inf
        self._jump_t = -math.inf
        self._prev = ""

    def direction(self, name: str) -> np.ndarray:
        fwd, left = camera_axes(self.camera_yaw)
        a, b = _DIRS[name]
        return a * fwd + b * left

    def update(self, command: str, dt: float = 0.0) -> Intent:
        """The intent for ``command`` (one of :data:`~.labels.COMMANDS`, or ``""`` for
        none yet), ``dt`` seconds after the previous update."""
        if command and command not in COMMANDS:
            raise ValueError(f"unknown pose command {command!r}; expected one of {', '.join(COMMANDS)}")
        self.time += max(float(dt), 0.0)
        extra = self.extra.get(command, frozenset())
        intent: Intent
        if command.startswith(("walk_", "run_", "creep_")):
            kind, d = command.split("_", 1)
            speed = {"walk": self.gaits.walk, "run": self.gaits.run, "creep": self.gaits.creep}[kind]
            gait = "run" if kind == "run" else "walk"
            acts = {"creep"} if kind == "creep" else set()
            v = self.direction(d) * speed
            intent = Intent(v, None, gait, frozenset(acts) | extra)
            self._last_velocity = v
            self._last_move_t = self.time
        elif command == "jump":
            v = self._carry()
            gait = "idle" if not v.any() else ("run" if np.linalg.norm(v) > 0.5 * (self.gaits.walk + self.gaits.run)
                                                else "walk")
            acts = {"jump"}
            if self._prev != "jump":
                self._jump_t = self.time  # a new jump
            elif self.time - self._jump_t >= self.jump_repeat_s:
                acts = set()  # one update without the action re-arms the controller's trigger
                command = "jump-rearm"
            intent = Intent(v, None, gait, frozenset(acts) | extra)
        elif command in ("dance", "punch"):
            intent = Intent.idle(frozenset({command}) | extra)
        else:  # stand_still, or nothing yet
            intent = Intent.idle(extra)
        self._prev = command
        return intent

    def _carry(self) -> np.ndarray:
        if self.time - self._last_move_t <= self.jump_carry_s:
            return self._last_velocity.copy()
        return np.zeros(3)
