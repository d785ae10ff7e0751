"""Writing motion to the file a user names: BVH or binary glTF, chosen by the suffix.

Every command that writes motion goes through :func:`write_motion`, so that ``-o`` takes
the same formats everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from motionmatch.anim.motion import Motion
from motionmatch.errors import MotionMatchError

__all__ = ["MOTION_SUFFIXES", "write_motion"]

#: File suffixes :func:`write_motion` writes.
MOTION_SUFFIXES = (".bvh", ".glb")


def write_motion(path: str | Path, motion: Motion | Sequence[tuple[str, Motion]], *, units: str | float | None = None,
                 obstacles: Sequence = ()) -> Path:
    """Write motion to ``path`` (atomically), as BVH or glTF binary by its suffix.

    Args:
        path: a ``.bvh`` or ``.glb`` file.
        motion: one motion, or ``(name, motion)`` pairs (several characters: ``.glb`` only).
        units: BVH length unit (``"m"``, ``"cm"``, ... or metres per unit); ``None`` keeps
            the motion's own. glTF is always in metres.
        obstacles: obstacles drawn in a ``.glb`` file (ignored by BVH).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".glb":
        from motionmatch.io.gltf import Character, write_glb

        chars = ([Character(motion.name or path.stem, motion)] if isinstance(motion, Motion)
                 else [Character(n, m) for n, m in motion])
        return write_glb(path, chars, obstacles)
    if suffix == ".bvh":
        from motionmatch.anim.bvh import save_bvh

        if not isinstance(motion, Motion):
            raise MotionMatchError(f"{path}: a BVH file holds one character; write several to a .glb file")
        return save_bvh(motion, path, units=units)
    raise MotionMatchError(f"{path}: motion is written as {' or '.join(MOTION_SUFFIXES)}; give a file name ending in one")
