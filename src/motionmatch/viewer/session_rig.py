"""The rig part of a :class:`~motionmatch.viewer.session.Session`: "Use my character" and
"Use the mannequin". :class:`RigMessages` is a part of the session (its base class), kept in
a file of its own: it reads and writes the session's own state.

With a rig in use (:mod:`motionmatch.viewer.rig`), every motion-matching character of the
session is drawn on it: the pose frames carry the rig's joints (:meth:`RigMessages._rig_poses`,
one retargeting call per tick for all of them), the characters name the rig's skeleton
(its own entry in ``skeletons``, with its body), and exports are written on it
(:meth:`RigMessages._rig_export`). The rig comes
from ``motionmatch viewer --rig RIG`` (every session starts with it) or from the page
(``POST /api/rig/{session}``, :mod:`motionmatch.viewer.server`; the session applies it on its
own thread, ``_rig_loaded``); ``rig_clear`` goes back to the database's skeleton and its
mannequin. The page is told with a ``rig`` message (:meth:`RigMessages.rig_state`) and a
``characters`` message.
"""

from __future__ import annotations

from motionmatch._limits import MAX_RIG_UPLOAD_BYTES
from motionmatch.viewer.characters import MMCharacter
from motionmatch.viewer.protocol import CharacterPose
from motionmatch.viewer.rig import ViewerRig

__all__ = ["RigMessages"]


class RigMessages:
    """The rig part of :class:`~motionmatch.viewer.session.Session`."""

    rig: ViewerRig | None = None
    #: the skeleton id (in ``skeletons``) of the rig in use
    rig_skeleton: int | None = None
    #: the characters' last poses on the rig (:meth:`~motionmatch.viewer.rig.ViewerRig.play`)
    rig_cache: dict | None = None

    def _rig_poses(self, poses: list[CharacterPose]) -> list[CharacterPose]:
        """The tick's poses (in ``self.chars`` order), the motion-matching characters' on the rig in use."""
        if self.rig is None:
            return poses
        return self.rig.play(poses, [isinstance(ch, MMCharacter) for ch in self.chars.values()], self.rig_cache)

    def character_skeleton(self) -> int:
        """The skeleton id a motion-matching character is drawn with now."""
        return self.rig_skeleton if self.rig_skeleton is not None else 0

    def use_rig(self, rig: ViewerRig | None, *, announce: bool = True) -> None:
        """Draw every motion-matching character on ``rig`` (``None``: the database's
        skeleton and its mannequin again). The scrub history is cleared (its frames carry
        the other skeleton's joints)."""
        if self.rig_skeleton is not None:
            self.skeletons.pop(self.rig_skeleton, None)
        self.rig, self.rig_skeleton, self.rig_cache = rig, None, {}
        if rig is not None:
            self.rig_skeleton = self._next_skeleton
            self._next_skeleton += 1
            self.skeletons[self.rig_skeleton] = rig.info
        for ch in self.chars.values():
            if isinstance(ch, MMCharacter):
                ch.skeleton_id = self.character_skeleton()
        self.history.clear()
        self.scrub_back = 0
        if announce:
            self.send({"type": "rig", **self.rig_state()})
            self._send_characters()

    def rig_state(self) -> dict:
        """For the page: the rig in use (``active``, its ``name``, ``joints``, ``skinned``,
        ``warnings``) and where to upload another (``upload``: the URL, with the key the
        upload must carry in its ``X-Rig-Key`` header, and its ``max_bytes``)."""
        out = {"active": self.rig is not None, "upload": f"/api/rig/{self.id}", "key": self.upload_key,
               "max_bytes": MAX_RIG_UPLOAD_BYTES}
        if self.rig is not None:
            out.update(name=self.rig.name, joints=self.rig.joints, skinned=self.rig.file.skinned,
                       skeleton=self.rig_skeleton, warnings=list(self.rig.warnings))
        return out

    def _rig_export(self, make):
        """``(make, mannequin)`` of an export on the rig in use: ``make()``'s recorded motion
        retargeted onto it (on the export's worker; with foot IK, as a take is) and the body
        the page draws for it."""
        rig, source = self.rig, self.viewer.rigs.source

        def on_rig():
            return rig.file.retarget(make(), source=source)

        return on_rig, lambda skeleton: rig.body

    def _on_rig_clear(self, m):
        self.use_rig(None)
        return {"active": False}

    def _on_rig_loaded(self, m):
        """A rig the page uploaded, read on the server's worker (:mod:`motionmatch.viewer.server`)."""
        self.use_rig(m["rig"])
        return {"active": True}
