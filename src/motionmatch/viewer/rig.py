"""The user's character in the viewer ("Use my character", ``motionmatch viewer --rig RIG``):
every motion-matching character drawn on a rig read from a file.

A :class:`ViewerRig` is a rig file (:func:`~motionmatch.io.rig_file.read_rig`: ``.glb``/``.gltf``
with a skeleton, optionally skinned, or ``.bvh``) made ready for the sessions: the
:class:`~motionmatch.anim.retarget.Retargeter` from the database's skeleton (in a standing
reference pose found once per viewer, :class:`RigLoader`) to the rig, the rig's body for
the page (its own skinned mesh, else the procedural mannequin of its skeleton in its
reference pose; :meth:`~motionmatch.viewer.body.Bodies.add`) and what the page needs to
draw its skeleton (:func:`~motionmatch.viewer.characters.skeleton_info`).

Every tick, :meth:`ViewerRig.play` turns the session's motion-matching characters' poses
(world joint positions and rotations of the database skeleton) into the rig's, all the
characters of the tick in one call (:meth:`~motionmatch.anim.retarget.Retargeter.world_poses`:
they are retargeted like the frames of one take, each scaled by the legs' ratio about its
own root on the ground, so a character stays where the simulation has it; the retargeting
and the rig's forward kinematics one compiled pass), then each character's feet put where the
database character's stand (on the ground, a planted foot where the source's is: the
compiled per-pose foot IK of :mod:`motionmatch.anim.pose_feet`, all characters in one call).

Uploaded rigs (:meth:`RigLoader.load_upload`) are read from a private temporary folder
that is removed at once; a refused file gives one line naming it and the fix
(:class:`~motionmatch.errors.MotionMatchError`), and nothing is kept.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.humanoid import HumanoidError, find_humanoid
from motionmatch.anim.mannequin import Mannequin, mannequin
from motionmatch.anim.retarget import Retargeter, RetargetSettings
from motionmatch.anim.retarget_map import Rig, reference_rig
from motionmatch.errors import MotionMatchError
from motionmatch.io.rig_file import RIG_SUFFIXES, RigFile, read_rig
from motionmatch.viewer.body import Bodies, database_sample
from motionmatch.viewer.characters import skeleton_info
from motionmatch.viewer.protocol import CharacterPose, pose_scale

__all__ = ["MAX_RIG_NAME", "RigLoader", "ViewerRig", "upload_name"]

#: Characters of an uploaded rig's file name (its suffix says its format).
MAX_RIG_NAME = 128
#: Frames of the database searched for its most upright pose (the source's reference).
SOURCE_FRAMES = 256
#: The retargeting of viewer characters: poses one by one, each pose's feet where the source's stand.
VIEWER_RETARGET = RetargetSettings(foot_ik=True)
_FOOT_ROLES = ("left_foot", "right_foot", "left_toe", "right_toe", "left_ankle", "right_ankle")


def upload_name(name: str | None) -> str:
    """A safe file name for an uploaded rig: the last part of ``name``, letters, digits,
    ``. _ -`` and spaces only, at most :data:`MAX_RIG_NAME` characters; its suffix one
    :func:`~motionmatch.io.rig_file.read_rig` reads (or ``.fbx``, which it refuses in one
    line). Raises :class:`~motionmatch.errors.MotionMatchError` otherwise."""
    base = re.split(r"[\\/]", (name or "").strip())[-1]
    base = re.sub(r"[^A-Za-z0-9._ -]", "_", base)[-MAX_RIG_NAME:].lstrip(". ") or "rig"
    suffix = Path(base).suffix.lower()
    if suffix not in (*RIG_SUFFIXES, ".fbx"):
        raise MotionMatchError(f"{base}: a rig is a {', '.join(RIG_SUFFIXES)} file (an .fbx: export it as .glb); "
                               "choose one of those")
    return base


@dataclass(eq=False)
class ViewerRig:
    """A rig file made ready for the viewer's sessions (see the module).

    Attributes:
        name: what the page shows (the file's name).
        file: the rig read from the file.
        retargeter: from the database's skeleton to the rig (per-pose foot IK).
        info: the page's description of the rig's skeleton (names, parents, feet, body URL).
        scale: the pose frames' quantisation step (m) for the rig's joints.
        body: what the page draws (its skinned mesh, or its skeleton's mannequin).
        warnings: what reading it warned about, one line each.
    """

    name: str
    file: RigFile
    retargeter: Retargeter
    info: dict
    scale: float
    body: Mannequin
    warnings: tuple[str, ...] = ()

    @property
    def joints(self) -> int:
        return self.file.rig.skeleton.num_joints

    def play(self, poses: list[CharacterPose], mm: list[bool], cache: dict | None = None) -> list[CharacterPose]:
        """``poses`` (fresh objects: changed in place, and returned) with those of the
        motion-matching characters (``mm[i]``) on the rig: one retargeting call and one
        forward kinematics for all of them (the others, clip players, are left as they are).

        ``cache`` (a dict the caller keeps, one per session): a character whose pose is the
        very array it was last time (not updated this tick: the session's level of detail
        updates background characters every few ticks, and a paused session none) keeps its
        retargeted pose; only the others are retargeted."""
        chosen = [p for p, is_mm in zip(poses, mm) if is_mm]
        if not chosen:
            return poses
        old = cache if cache is not None else {}
        todo, kept, scale = [], {}, self.scale
        for p in chosen:
            c = old.get(p.id)
            if c is None or c[0] is not p.positions:
                todo.append(p)
            else:  # not updated since: its pose on the rig as it was
                kept[p.id] = c
                p.positions, p.rotations, p.scale = c[1], c[2], scale
        if todo:
            n, js = len(todo), len(todo[0].positions)  # (concatenate: a third of np.stack's time)
            rot = np.concatenate([p.rotations for p in todo]).reshape(n, js, 4)
            pos = np.concatenate([p.positions for p in todo]).reshape(n, js, 3)
            ground = pos[:, 0]  # the database skeleton's joint 0: the character's root on the ground
            heading = None
            if self.retargeter.carries:  # only a ground root that carries the character turns with it
                heading = quat.from_angle_y(np.fromiter((p.yaw for p in todo), dtype=np.float64, count=len(todo)))
            wp, wr = self.retargeter.world_poses(rot, pos, floor=ground[:, 1], centres=ground, root_positions=ground,
                                                 root_rotations=heading)
            for p, a, b in zip(todo, wp, wr):
                kept[p.id] = (p.positions, a, b)
                p.positions, p.rotations, p.scale = a, b, scale
        if cache is not None:
            cache.clear()
            cache.update(kept)
        return poses


class RigLoader:
    """Makes :class:`ViewerRig` objects for one viewer (its database and bodies): the
    database skeleton's humanoid roles and standing reference pose are found once, on first
    use; at most two rigs are read at once (a rig file may be large)."""

    def __init__(self, db, bodies: Bodies):
        self.db = db
        self.bodies = bodies
        self._source: Rig | None = None
        self._lock = threading.Lock()
        self._reading = threading.BoundedSemaphore(2)

    @property
    def source(self) -> Rig:
        """The database skeleton as the retargeting's source: its roles (the schema's roles
        map overriding what is found) and its most upright pose of a sample of frames."""
        with self._lock:
            if self._source is None:
                db = self.db
                try:
                    roles = find_humanoid(db.skeleton, db.schema.roles_map or None)
                    self._source = reference_rig(database_sample(db, SOURCE_FRAMES), roles)
                except HumanoidError as e:
                    raise MotionMatchError(f"the database's skeleton cannot be retargeted ({e}); the characters stay "
                                           "on it") from None
            return self._source

    def make(self, rig: RigFile, name: str | None = None, warned: tuple[str, ...] = ()) -> ViewerRig:
        """The :class:`ViewerRig` of a rig read from a file (the file must still be there
        for a skinned rig's mesh)."""
        from motionmatch.io.user_mesh import read_user_mesh

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            retargeter = rig.retargeter(self.source, VIEWER_RETARGET)
        said = tuple(warned) + tuple(_one_line(w.message) for w in caught)
        target = rig.rig
        skel = target.skeleton
        if rig.skinned:
            body = read_user_mesh(rig.path, skel)
        else:
            body = mannequin(skel, (target.rotations, skel.offsets))
        tag = hashlib.sha1(np.ascontiguousarray(body.vertices).tobytes()).hexdigest()
        url = self.bodies.add(skel, body, tag)
        roles = target.roles
        source_roles = self.source.roles
        feet = []
        for f in self.db.foot_joints:
            role = next((r for r in _FOOT_ROLES if r in source_roles and source_roles[r] == int(f)), None)
            if role is not None and role in roles:
                feet.append(int(roles[role]))
        pos, _ = target.world()
        height = float(np.ptp(pos[:, 1]))
        extent = float(np.max(np.linalg.norm(pos - pos[:1], axis=1)))
        info = skeleton_info(skel, tuple(feet), ground_root=bool(roles.above_hips), height=height, body=url)
        # a few poses now: the compiled retargeting is ready before a session's tick needs it
        sample = database_sample(self.db, 4)
        retargeter.world_poses(sample.world_rotations, sample.world_positions)
        return ViewerRig(name or rig.path.name, rig, retargeter, info, pose_scale(max(extent, height) * 1.3), body,
                         said)

    def load(self, path: str | Path, **read) -> ViewerRig:
        """The :class:`ViewerRig` of a rig file (``read``: :func:`read_rig`'s options)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rig = read_rig(path, **read)
        return self.make(rig, Path(path).name, tuple(_one_line(w.message) for w in caught))

    def load_upload(self, data: bytes, name: str) -> ViewerRig:
        """The :class:`ViewerRig` of an uploaded rig file's bytes (``name``: its file name,
        :func:`upload_name`), read from a private temporary folder removed before this
        returns. Raises :class:`~motionmatch.errors.MotionMatchError`: one line naming
        the file (never the temporary folder)."""
        name = upload_name(name)
        with self._reading, tempfile.TemporaryDirectory(prefix="mm-rig-") as tmp:
            path = Path(tmp) / name
            path.write_bytes(data)
            try:
                return self.load(path)
            except MotionMatchError as e:
                line = _one_line(str(e).replace(str(path), name).replace(tmp, "."))
                line = line.replace("give its roles with --rig-roles MAP.json", "name its joints' roles on the command "
                                    f"line: motionmatch viewer --rig {name} --rig-roles MAP.json")
                raise MotionMatchError(line) from None
            except Exception as e:  # a file no reader expected (hostile input): one line, nothing kept
                raise MotionMatchError(f"{name}: cannot be read as a rig ({type(e).__name__}: "
                                       f"{_one_line(str(e).replace(tmp, '.'))[:200]}); export it again as glTF 2.0 "
                                       "(.glb) or BVH") from None


def _one_line(text) -> str:
    return " ".join(str(text).split())
