"""Writing motion to the file a user names: BVH, binary glTF, FBX or USD, chosen by the suffix.

Every command that writes motion goes through :func:`write_motion`, so that ``-o`` takes
the same formats everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from motionmatch.anim.motion import Motion
from motionmatch.errors import MotionMatchError

__all__ = ["MOTION_SUFFIXES", "check_writer", "write_motion"]

#: File suffixes :func:`write_motion` writes.
MOTION_SUFFIXES = (".bvh", ".glb", ".fbx", ".usd", ".usda", ".usdc")


def check_writer(path: str | Path) -> None:
    """Refuse now, in one line naming the extra to install, a format whose writer is missing
    (FBX without bpy or ``$MOTIONMATCH_BLENDER_PYTHON``, USD without usd-core), so that a
    command fails before its run rather than after it."""
    suffix = Path(path).suffix.lower()
    if suffix == ".fbx":
        from motionmatch.io.fbx import require_fbx_writer

        require_fbx_writer(path)
    elif suffix in (".usd", ".usda", ".usdc"):
        from motionmatch.io.usd import require_usd

        require_usd()


def write_motion(path: str | Path, motion: Motion | Sequence[tuple[str, Motion]], *, units: str | float | None = None,
                 obstacles: Sequence = (), body: str | Path | None = None, terrain=None) -> Path:
    """Write motion to ``path`` (atomically), as BVH or glTF binary by its suffix.

    Args:
        path: a ``.bvh``, ``.glb``, ``.fbx`` (Blender's exporter: the ``blender`` extra or
            ``$MOTIONMATCH_BLENDER_PYTHON``) or ``.usd``/``.usda``/``.usdc`` (the ``usd`` extra) file;
            all but BVH carry each character's skinned mannequin.
        motion: one motion, or ``(name, motion)`` pairs (several characters: all but ``.bvh``).
        units: BVH length unit (``"m"``, ``"cm"``, ... or metres per unit); ``None`` keeps
            the motion's own. glTF is always in metres.
        obstacles: obstacles drawn in a ``.glb`` file (ignored by the other formats).
        body: a glTF file whose skinned mesh replaces the generated mannequin
            (:func:`motionmatch.io.user_mesh.body_for`; ignored by BVH).
        terrain: the ground (:class:`~motionmatch.environment.terrain.Terrain`) as a mesh
            in a ``.glb`` or USD file (ignored by BVH and FBX).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".glb":
        from motionmatch.io.gltf import Character, write_glb
        from motionmatch.io.user_mesh import body_for

        pairs = [(motion.name or path.stem, motion)] if isinstance(motion, Motion) else list(motion)
        chars = [Character(n, m, body_for(m, body) if body is not None else None) for n, m in pairs]
        return write_glb(path, chars, obstacles, terrain)
    if suffix in (".fbx", ".usd", ".usda", ".usdc"):
        from motionmatch.io.user_mesh import body_for

        pairs = [(motion.name or path.stem, motion)] if isinstance(motion, Motion) else list(motion)
        names, motions = [n for n, _ in pairs], [m for _, m in pairs]
        bodies: dict[int, object] = {}  # one body per skeleton (a scenario's agents share one)
        for m in motions:
            if id(m.skeleton) not in bodies:
                bodies[id(m.skeleton)] = body_for(m, body)
        meshes = [bodies[id(m.skeleton)] for m in motions]
        if suffix == ".fbx":
            from motionmatch.io.fbx import save_fbx

            return save_fbx(motions, path, meshes=meshes, names=names)
        from motionmatch.io.usd import save_usd

        return save_usd(motions, path, meshes=meshes, names=names, terrain=terrain)
    if suffix == ".bvh":
        from motionmatch.anim.bvh import save_bvh

        if not isinstance(motion, Motion):
            raise MotionMatchError(f"{path}: a BVH file holds one character; write several to a .glb file")
        return save_bvh(motion, path, units=units)
    raise MotionMatchError(f"{path}: motion is written as {' or '.join(MOTION_SUFFIXES)}; give a file name ending in one")
