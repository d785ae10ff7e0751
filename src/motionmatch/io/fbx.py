"""FBX export through Blender's own FBX exporter (``bpy``, Blender as a Python module).

The FBX SDK is not on PyPI; Blender's exporter is, inside ``bpy``. :func:`save_fbx` builds
each character in an empty Blender scene (:mod:`motionmatch.io.blender_scene`: armature,
action with a key per frame, skinned mesh) and exports it: Y up, -Z forward, one FBX unit
scale with all transforms applied (``FBX_SCALE_ALL``, what Unity and Unreal import at scale
1), no added leaf bones, the animation baked at every frame without curve simplification,
at the motion's frame rate, frame ``i`` at FBX frame ``i``. No bone points at a child whose
location is animated (e.g. LAFAN1's ``Hips`` under ``SimulationBone``): Blender's FBX importer
would connect the two and drop that child's location keys
(:func:`motionmatch.io.blender_scene.moving_joints`).

Where ``bpy`` runs:

1. in this process, if ``bpy`` imports (``pip install 'motionmatch[blender]'``; bpy wheels
   need Python 3.11 for Blender 4.2-5.0 and pin numpy < 2);
2. otherwise in a subprocess run by the Python named by ``$MOTIONMATCH_BLENDER_PYTHON`` (or the
   ``blender_python`` argument): a Python that has ``bpy`` and motionmatch's dependencies
   (a separate venv). The motions travel as an ``.npz`` file; this package's own source is
   put first on that Python's path, so the same code writes the file;
3. otherwise a one-line :class:`~motionmatch.io.preview.MissingDependencyError` naming the
   extra and the variable.

In-process writing replaces ``bpy``'s current scene (an empty factory scene is loaded
first), so call it from scripts and the CLI, not from inside an interactive Blender session
(there, use Blender's own File > Export > FBX). The file is written atomically.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from motionmatch._files import atomic_path
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import MotionMatchError
from motionmatch.io.preview import MissingDependencyError

__all__ = ["BLENDER_PYTHON_ENV", "EXPORT_SETTINGS", "blender_python", "require_fbx_writer", "save_fbx"]

#: The environment variable naming a Python that has ``bpy`` (used when this one has not).
BLENDER_PYTHON_ENV = "MOTIONMATCH_BLENDER_PYTHON"

#: The options given to Blender's FBX exporter (``bpy.ops.export_scene.fbx``).
EXPORT_SETTINGS: dict[str, Any] = {
    "use_selection": False,
    "object_types": {"ARMATURE", "MESH"},
    "apply_scale_options": "FBX_SCALE_ALL",
    "axis_forward": "-Z",
    "axis_up": "Y",
    "add_leaf_bones": False,
    "primary_bone_axis": "Y",
    "secondary_bone_axis": "X",
    "armature_nodetype": "NULL",
    "mesh_smooth_type": "FACE",
    "bake_anim": True,
    "bake_anim_use_all_bones": True,
    "bake_anim_use_nla_strips": False,
    "bake_anim_use_all_actions": False,
    "bake_anim_force_startend_keying": True,
    "bake_anim_step": 1.0,
    "bake_anim_simplify_factor": 0.0,
}


def _has_bpy() -> bool:
    return importlib.util.find_spec("bpy") is not None


def blender_python(explicit: str | Path | None = None) -> str | None:
    """The Python to run ``bpy`` in when this process has none: ``explicit``, else
    ``$MOTIONMATCH_BLENDER_PYTHON``; ``None`` when neither is given."""
    chosen = str(explicit) if explicit else os.environ.get(BLENDER_PYTHON_ENV, "").strip()
    return chosen or None


def require_fbx_writer(path: str | Path = "", blender_python_path: str | Path | None = None) -> str | None:
    """How FBX will be written: ``None`` when ``bpy`` imports here, else the Python with bpy
    to run; a one-line :class:`~motionmatch.io.preview.MissingDependencyError` naming the
    extra and the variable when neither is there."""
    if _has_bpy():
        return None
    python = blender_python(blender_python_path)
    if python is None:
        raise MissingDependencyError(
            f"{path or 'FBX'}: writing FBX needs Blender's Python module 'bpy', which is not installed here; "
            f"install it with `pip install 'motionmatch[blender]'` (Python 3.11), or set {BLENDER_PYTHON_ENV} "
            "to a Python that has it"
        )
    return python


def save_fbx(motions: Motion | Sequence[Motion], path: str | Path, *, meshes: Sequence[Any] | None = None,
             names: Sequence[str] | None = None, blender_python_path: str | Path | None = None) -> Path:
    """Write one or several characters' motions (armature, animation, optional skinned mesh
    each) to an FBX file with Blender's exporter.

    Args:
        motions: one motion or several sharing a frame rate (e.g. a scenario's agents).
        path: the ``.fbx`` file.
        meshes: optional skinned rest-pose meshes, one per motion (``None`` for none), with
            ``vertices [V, 3]``, ``triangles [T, 3]``, ``joints [V, 4]``, ``weights [V, 4]``
            in metres, Y up (e.g. :class:`motionmatch.anim.mannequin.Mannequin`).
        names: object names of the characters (default each motion's name).
        blender_python_path: a Python with ``bpy`` to use when this one has none (default
            ``$MOTIONMATCH_BLENDER_PYTHON``).

    Returns the path written.
    """
    path = Path(path)
    if path.suffix.lower() != ".fbx":
        raise MotionMatchError(f"{path}: an FBX file must end in .fbx")
    motions = [motions] if isinstance(motions, Motion) else list(motions)
    if not motions:
        raise MotionMatchError(f"{path}: no motion to write")
    if any(abs(m.fps - motions[0].fps) > 1e-6 for m in motions):
        raise MotionMatchError(f"{path}: the characters of one FBX file must share a frame rate "
                               f"(got {sorted({m.fps for m in motions})})")
    meshes = list(meshes) if meshes is not None else [None] * len(motions)
    if len(meshes) != len(motions):
        raise MotionMatchError(f"{path}: {len(meshes)} meshes for {len(motions)} motions")
    names = list(names) if names is not None else [m.name or f"character{i}" for i, m in enumerate(motions)]
    if len(names) != len(motions):
        raise MotionMatchError(f"{path}: {len(names)} names for {len(motions)} motions")
    python = require_fbx_writer(path, blender_python_path)
    if python is None:
        with atomic_path(path) as tmp:
            _export_in_process(motions, meshes, names, tmp)
        return path
    with atomic_path(path) as tmp:
        _export_in_subprocess(python, motions, meshes, names, tmp)
    return path


def _export_in_process(motions: list[Motion], meshes: list[Any], names: list[str], out: Path) -> None:
    import bpy

    from motionmatch.io import blender_scene as bs

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bs.set_scene_fps(scene, motions[0].fps)
    scene.frame_start = 0
    scene.frame_end = max(m.num_frames for m in motions) - 1
    for motion, mesh, name in zip(motions, meshes, names):
        bs.build_character(motion, mesh=mesh, name=name)
    result = bpy.ops.export_scene.fbx(filepath=str(out), **EXPORT_SETTINGS)
    if "FINISHED" not in result:
        raise MotionMatchError(f"Blender's FBX exporter did not finish ({', '.join(result)})")


# ----------------------------------------------------------------- subprocess
_MESH_FIELDS = ("vertices", "triangles", "joints", "weights")
_MESH_OPTIONAL = ("normals", "bind_positions", "bind_rotations")  # the bind pose: the armature's rest pose


def pack(motions: Sequence[Motion], meshes: Sequence[Any], names: Sequence[str]) -> dict[str, np.ndarray]:
    """The arrays :func:`unpack` reads back (plain numbers and strings, no pickles)."""
    arrays: dict[str, np.ndarray] = {"count": np.array(len(motions)), "names": np.array(list(names), dtype=str)}
    for i, (m, mesh) in enumerate(zip(motions, meshes)):
        s = m.skeleton
        arrays.update({f"{i}_joints": np.array(s.names, dtype=str), f"{i}_parents": s.parents,
                       f"{i}_offsets": s.offsets, f"{i}_end_site_parents": s.end_site_parents,
                       f"{i}_end_site_offsets": s.end_site_offsets, f"{i}_rotations": m.rotations,
                       f"{i}_translations": m.translations, f"{i}_fps": np.array(m.fps)})
        if mesh is not None:
            arrays.update({f"{i}_mesh_{k}": np.asarray(getattr(mesh, k)) for k in _MESH_FIELDS})
            arrays.update({f"{i}_mesh_{k}": np.asarray(getattr(mesh, k)) for k in _MESH_OPTIONAL
                           if getattr(mesh, k, None) is not None})
    return arrays


class _Mesh:
    def __init__(self, **fields: np.ndarray) -> None:
        self.__dict__.update(fields)


def unpack(data: Any) -> tuple[list[Motion], list[Any], list[str]]:
    """Motions, meshes and names from :func:`pack`'s arrays (an opened ``.npz``)."""
    motions, meshes = [], []
    for i in range(int(data["count"])):
        skel = Skeleton(tuple(str(n) for n in data[f"{i}_joints"]), data[f"{i}_parents"], data[f"{i}_offsets"],
                        data[f"{i}_end_site_parents"], data[f"{i}_end_site_offsets"])
        motions.append(Motion(skel, data[f"{i}_rotations"], data[f"{i}_translations"], float(data[f"{i}_fps"])))
        has_mesh = f"{i}_mesh_vertices" in data
        fields = {k: data[f"{i}_mesh_{k}"] for k in _MESH_FIELDS + _MESH_OPTIONAL if f"{i}_mesh_{k}" in data}
        meshes.append(_Mesh(**fields) if has_mesh else None)
    return motions, meshes, [str(n) for n in data["names"]]


def _export_in_subprocess(python: str, motions: list[Motion], meshes: list[Any], names: list[str], out: Path) -> None:
    src = str(Path(__file__).resolve().parents[2])  # the folder holding this motionmatch package
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="motionmatch-fbx-") as tmp:
        data = Path(tmp) / "motions.npz"
        np.savez(data, **pack(motions, meshes, names))
        try:
            done = subprocess.run([python, "-m", "motionmatch.io.fbx", str(data), str(out)], env=env,
                                  capture_output=True, text=True, check=False)
        except OSError as e:
            raise MotionMatchError(f"{BLENDER_PYTHON_ENV}={python}: cannot run it ({e.strerror})") from None
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        raise MotionMatchError(f"{out.name}: Blender's Python ({python}) failed to write the FBX: "
                               f"{lines[-1] if lines else f'exit status {done.returncode}'}")


def _main(argv: list[str]) -> int:
    """``python -m motionmatch.io.fbx MOTIONS.npz OUT.fbx`` (run by :func:`save_fbx` in a Python with bpy)."""
    if len(argv) != 2:
        print("usage: python -m motionmatch.io.fbx MOTIONS.npz OUT.fbx", file=sys.stderr)
        return 2
    import bpy  # noqa: F401  (this Python must have it)

    with np.load(argv[0]) as data:
        motions, meshes, names = unpack(data)
    _export_in_process(motions, meshes, names, Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
