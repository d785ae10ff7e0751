"""The input messages of a :class:`~motionmatch.viewer.session.Session`: keys, the set of
held keys, the gamepad's sticks, the camera's heading and the page's view of the ground.
A key asking for a mode the database cannot play is not passed on but answered with
``mode_unavailable`` and its reason. :class:`InputMessages` is a part of the session (its
base class), kept in a file of its own: it reads and writes the session's own state."""

from __future__ import annotations

import numpy as np

from motionmatch.control.keyboard import normalize_key
from motionmatch.viewer.characters import MMCharacter
from motionmatch.viewer.database_modes import MODE_KEYS

__all__ = ["InputMessages"]


class InputMessages:
    """The input part of :class:`~motionmatch.viewer.session.Session`."""

    def _set_yaw(self, yaw) -> None:
        if yaw is not None:
            self.camera_yaw = float(yaw)
            for ch in self.chars.values():
                if isinstance(ch, MMCharacter):
                    ch.kb.camera_yaw = self.camera_yaw

    def _unavailable_mode(self, key: str) -> str | None:
        """The mode key ``key`` asks for when the database cannot play it (else None)."""
        mode = MODE_KEYS.get(normalize_key(key))
        if mode is None or self.modes[mode]["available"]:
            return None
        return mode

    def _refuse_mode(self, mode: str, key: str) -> None:
        """Tell the page that ``mode`` cannot be played here, and why (one line)."""
        reason = self.modes[mode]["reason"]
        self.send({"type": "mode_unavailable", "mode": mode, "key": key, "reason": reason,
                   "message": f"{mode}: {reason}"})

    def _on_key(self, m):
        """A key-down or key-up of the selected character. A key asking for a mode the
        database cannot play is not passed on (so the character neither enters the mode
        nor claims it); its key-down is answered with ``mode_unavailable``."""
        self._set_yaw(m["yaw"])
        ch = self.chars.get(self.selected) if self.selected is not None else None
        if not isinstance(ch, MMCharacter):
            return
        mode = self._unavailable_mode(m["key"])
        if mode is not None:
            if m["down"]:
                self._refuse_mode(mode, normalize_key(m["key"]))
            return
        ch.set_key(m["key"], m["down"])

    def _on_keys(self, m):
        """The full set of held keys; keys of modes the database cannot play are dropped
        (and named in a ``mode_unavailable`` message)."""
        self._set_yaw(m["yaw"])
        ch = self.chars.get(self.selected) if self.selected is not None else None
        if not isinstance(ch, MMCharacter):
            return
        held = []
        for k in m["held"]:
            mode = self._unavailable_mode(k)
            if mode is None:
                held.append(k)
            else:
                self._refuse_mode(mode, normalize_key(k))
        ch.set_keys(held)

    def _on_camera(self, m):
        self._set_yaw(m["yaw"])

    def _on_stick(self, m):
        """The gamepad's sticks (the right one sets the facing) drive the selected character."""
        self._set_yaw(m["yaw"])
        if isinstance(ch := self.chars.get(self.selected) if self.selected is not None else None, MMCharacter):
            ch.set_sticks(m["left"], m["right"], m["sprint"])

    def _on_view(self, m):
        poly = m.get("polygon")
        self.view = None if poly is None else np.array(poly, dtype=np.float64)
