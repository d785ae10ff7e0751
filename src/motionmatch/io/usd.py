"""USD export with UsdSkel: skeleton, animation and (optionally) a skinned mesh per character.

:func:`save_usd` writes ``.usda`` (text), ``.usdc`` (binary crate) or ``.usd`` (crate) files
that USD-aware tools (usdview, Omniverse, Houdini, Blender, Unreal, Unity's USD package)
open: metres (``metersPerUnit = 1``), Y up, time codes at the motion's frame rate (frame
``i`` at time code ``i``). Each character is a ``SkelRoot`` under ``/World`` holding

- ``Skeleton``: the joints as UsdSkel paths (``Hips``, ``Hips/Spine``, ...; names made valid
  USD identifiers) with the original names in ``jointNames``; ``restTransforms`` are the
  rest offsets, ``bindTransforms`` the joints' world transforms in the pose the mesh was
  made in (a :class:`~motionmatch.anim.mannequin.Mannequin`'s ``bind_positions`` and
  ``bind_rotations``), else the rest pose (every joint unrotated);
- ``Animation``: a ``SkelAnimation`` with one time sample per frame of the joints' local
  ``translations`` and ``rotations`` (and unit ``scales``);
- ``Body`` (when a mesh is given): a skinned ``Mesh`` in the rest pose with
  ``primvars:skel:jointIndices`` / ``jointWeights`` (four per vertex).

The ground, when given (a :class:`~motionmatch.environment.terrain.Terrain`), is the
``Mesh`` ``/World/Terrain`` (:func:`motionmatch.io.ground.ground_mesh`).

Needs the optional ``usd-core`` package (``pip install 'motionmatch[usd]'``); a missing one
is reported in one line. The file is written atomically (complete or absent).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from motionmatch._files import atomic_path
from motionmatch.anim.motion import Motion
from motionmatch.errors import MotionMatchError
from motionmatch.io.preview import MissingDependencyError

__all__ = ["USD_SUFFIXES", "joint_paths", "require_usd", "save_usd"]

#: File suffixes :func:`save_usd` writes.
USD_SUFFIXES = (".usd", ".usda", ".usdc")


def require_usd() -> ModuleType:
    """The ``pxr`` package, or a one-line :class:`MissingDependencyError` naming the extra."""
    try:
        pxr = importlib.import_module("pxr")
        for sub in ("Usd", "UsdGeom", "UsdSkel", "Sdf", "Gf", "Vt", "Tf"):
            importlib.import_module(f"pxr.{sub}")
    except ImportError as e:
        raise MissingDependencyError(
            "writing USD needs the 'usd-core' package, which is not installed; "
            "install it with `pip install 'motionmatch[usd]'`"
        ) from e
    return pxr


def joint_paths(names: Sequence[str], parents: np.ndarray) -> list[str]:
    """UsdSkel joint paths (``"Hips/Spine/Chest"``) for joints ``names`` with ``parents``:
    each name made a valid USD identifier, unique among its siblings."""
    from pxr import Tf

    paths: list[str] = []
    taken: dict[int, set[str]] = {}
    for j, name in enumerate(names):
        p = int(parents[j])
        base = Tf.MakeValidIdentifier(str(name)) or f"joint{j}"
        siblings = taken.setdefault(p, set())
        ident, k = base, 1
        while ident in siblings:
            ident, k = f"{base}_{k}", k + 1
        siblings.add(ident)
        paths.append(ident if p < 0 else f"{paths[p]}/{ident}")
    return paths


def save_usd(motions: Motion | Sequence[Motion], path: str | Path, *, meshes: Sequence[Any] | None = None,
             names: Sequence[str] | None = None, terrain: Any = None) -> Path:
    """Write one or several characters' motions to a USD file.

    Args:
        motions: one motion or several (e.g. a scenario's agents); all must share one frame
            rate. Each becomes ``/World/<name>`` with its own skeleton and animation.
        path: the file, ending in ``.usda``, ``.usdc`` or ``.usd``.
        meshes: optional skinned rest-pose meshes, one per motion (``None`` entries for none):
            objects with ``vertices [V, 3]``, ``triangles [T, 3]``, ``joints [V, 4]``,
            ``weights [V, 4]`` and optionally ``normals [V, 3]`` (e.g.
            :class:`motionmatch.anim.mannequin.Mannequin`), in metres, Y up.
        names: prim names of the characters (default each motion's name, or ``character<i>``).
        terrain: the ground (:class:`~motionmatch.environment.terrain.Terrain`), written as
            the mesh ``/World/Terrain``; ``None``: none.

    Returns the path written.
    """
    require_usd()
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdSkel, Vt

    path = Path(path)
    if path.suffix.lower() not in USD_SUFFIXES:
        raise MotionMatchError(f"{path}: a USD file must end in {', '.join(USD_SUFFIXES)}")
    motions = [motions] if isinstance(motions, Motion) else list(motions)
    if not motions:
        raise MotionMatchError(f"{path}: no motion to write")
    fps = motions[0].fps
    if any(abs(m.fps - fps) > 1e-6 for m in motions):
        raise MotionMatchError(f"{path}: the characters of one USD file must share a frame rate "
                               f"(got {sorted({m.fps for m in motions})})")
    meshes = list(meshes) if meshes is not None else [None] * len(motions)
    if len(meshes) != len(motions):
        raise MotionMatchError(f"{path}: {len(meshes)} meshes for {len(motions)} motions")
    prim_names = _prim_names(motions, names)

    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.y)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    stage.SetTimeCodesPerSecond(fps)
    stage.SetFramesPerSecond(fps)
    stage.SetStartTimeCode(0)
    stage.SetEndTimeCode(max(m.num_frames for m in motions) - 1)
    world = UsdGeom.Xform.Define(stage, "/World")
    stage.SetDefaultPrim(world.GetPrim())

    for motion, mesh, prim_name in zip(motions, meshes, prim_names):
        root_path = Sdf.Path("/World").AppendChild(prim_name)
        UsdSkel.Root.Define(stage, root_path)
        skel = motion.skeleton
        joints = Vt.TokenArray(joint_paths(skel.names, skel.parents))
        rest_world = _rest_world_positions(motion)

        skeleton = UsdSkel.Skeleton.Define(stage, root_path.AppendChild("Skeleton"))
        skeleton.CreateJointsAttr(joints)
        skeleton.CreateJointNamesAttr(Vt.TokenArray(list(skel.names)))
        skeleton.CreateRestTransformsAttr(Vt.Matrix4dArray([Gf.Matrix4d(1.0).SetTranslate(Gf.Vec3d(*map(float, o)))
                                                             for o in skel.offsets]))
        bind_pos, bind_rot = rest_world, np.tile([1.0, 0.0, 0.0, 0.0], (skel.num_joints, 1))
        if mesh is not None and hasattr(mesh, "bind_positions"):  # the pose the mesh was made in
            bind_pos, bind_rot = np.asarray(mesh.bind_positions), np.asarray(mesh.bind_rotations)
        skeleton.CreateBindTransformsAttr(Vt.Matrix4dArray([_matrix(p, q) for p, q in zip(bind_pos, bind_rot)]))

        anim = UsdSkel.Animation.Define(stage, root_path.AppendChild("Animation"))
        anim.CreateJointsAttr(joints)
        translations = anim.CreateTranslationsAttr()
        rotations = anim.CreateRotationsAttr()
        anim.CreateScalesAttr().Set(Vt.Vec3hArray.FromNumpy(np.ones((skel.num_joints, 3), np.float16)))
        xyzw = np.ascontiguousarray(motion.rotations[..., [1, 2, 3, 0]], dtype=np.float32)  # GfQuatf's layout
        trans = np.ascontiguousarray(motion.translations, dtype=np.float32)
        for f in range(motion.num_frames):
            translations.Set(Vt.Vec3fArray.FromNumpy(trans[f]), Usd.TimeCode(f))
            rotations.Set(Vt.QuatfArray.FromNumpy(xyzw[f]), Usd.TimeCode(f))
        binding = UsdSkel.BindingAPI.Apply(skeleton.GetPrim())
        binding.CreateAnimationSourceRel().SetTargets([anim.GetPath()])

        if mesh is not None:
            _define_mesh(stage, root_path.AppendChild("Body"), mesh, skeleton, skel.num_joints)

    if terrain is not None:
        _define_terrain(stage, terrain)

    with atomic_path(path) as tmp:
        if not stage.GetRootLayer().Export(str(tmp)):
            raise MotionMatchError(f"{path}: USD could not write the file")
    return path


def _matrix(position: np.ndarray, rotation: np.ndarray):
    """A USD (row-vector) matrix rotating by ``rotation`` (w, x, y, z), then moving to ``position``."""
    from pxr import Gf

    w, x, y, z = map(float, rotation)
    m = Gf.Matrix4d(1.0)
    m.SetRotateOnly(Gf.Quatd(w, Gf.Vec3d(x, y, z)))
    m.SetTranslateOnly(Gf.Vec3d(*map(float, position)))
    return m


def _prim_names(motions: Sequence[Motion], names: Sequence[str] | None) -> list[str]:
    from pxr import Tf

    wanted = list(names) if names is not None else [m.name or f"character{i}" for i, m in enumerate(motions)]
    if len(wanted) != len(motions):
        raise MotionMatchError(f"{len(wanted)} names for {len(motions)} motions")
    out: list[str] = []
    for i, n in enumerate(wanted):
        ident = Tf.MakeValidIdentifier(str(n)) or f"character{i}"
        out.append(ident if ident not in out else f"{ident}_{i}")
    return out


def _rest_world_positions(motion: Motion) -> np.ndarray:
    """``[J, 3]`` joint positions in the rest pose (every joint unrotated, offsets as translations)."""
    skel = motion.skeleton
    pos = np.zeros((skel.num_joints, 3))
    for j in range(skel.num_joints):
        p = skel.parents[j]
        pos[j] = skel.offsets[j] + (pos[p] if p >= 0 else 0.0)
    return pos


def _define_mesh(stage, path, mesh, skeleton, num_joints: int) -> None:
    from pxr import Gf, UsdGeom, UsdSkel, Vt

    verts = np.asarray(mesh.vertices, dtype=np.float32)
    tris = np.asarray(mesh.triangles, dtype=np.int32)
    joints = np.asarray(mesh.joints, dtype=np.int32)
    weights = np.asarray(mesh.weights, dtype=np.float32)
    if verts.ndim != 2 or verts.shape[1] != 3 or tris.ndim != 2 or tris.shape[1] != 3:
        raise MotionMatchError("the mesh must have vertices [V, 3] and triangles [T, 3]")
    if joints.shape != (len(verts), 4) or weights.shape != (len(verts), 4):
        raise MotionMatchError("the mesh must have joints and weights of shape [V, 4]")
    if joints.size and (joints.min() < 0 or joints.max() >= num_joints):
        raise MotionMatchError(f"the mesh's joint indices must lie in 0..{num_joints - 1}")
    geom = UsdGeom.Mesh.Define(stage, path)
    geom.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(verts))
    geom.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(tris), 3, np.int32)))
    geom.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(tris.reshape(-1)))
    geom.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    normals = getattr(mesh, "normals", None)
    if normals is not None:
        geom.CreateNormalsAttr(Vt.Vec3fArray.FromNumpy(np.asarray(normals, dtype=np.float32)))
        geom.SetNormalsInterpolation(UsdGeom.Tokens.vertex)
    lo, hi = verts.min(axis=0), verts.max(axis=0)
    geom.CreateExtentAttr(Vt.Vec3fArray([Gf.Vec3f(*map(float, lo)), Gf.Vec3f(*map(float, hi))]))
    binding = UsdSkel.BindingAPI.Apply(geom.GetPrim())
    binding.CreateSkeletonRel().SetTargets([skeleton.GetPath()])
    binding.CreateJointIndicesPrimvar(False, 4).Set(Vt.IntArray.FromNumpy(joints.reshape(-1)))
    binding.CreateJointWeightsPrimvar(False, 4).Set(Vt.FloatArray.FromNumpy(weights.reshape(-1)))
    binding.CreateGeomBindTransformAttr(Gf.Matrix4d(1.0))


def _define_terrain(stage, terrain) -> None:
    from pxr import Gf, UsdGeom, Vt

    from motionmatch.io.ground import GROUND_COLOUR, ground_mesh

    v, n, t = ground_mesh(terrain)
    geom = UsdGeom.Mesh.Define(stage, "/World/Terrain")
    geom.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(v.astype(np.float32)))
    geom.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(t), 3, np.int32)))
    geom.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(t.astype(np.int32).reshape(-1)))
    geom.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    geom.CreateNormalsAttr(Vt.Vec3fArray.FromNumpy(n.astype(np.float32)))
    geom.SetNormalsInterpolation(UsdGeom.Tokens.vertex)
    geom.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(*GROUND_COLOUR)]))
    lo, hi = v.min(axis=0), v.max(axis=0)
    geom.CreateExtentAttr(Vt.Vec3fArray([Gf.Vec3f(*map(float, lo)), Gf.Vec3f(*map(float, hi))]))
