"""glTF 2.0 binary (``.glb``) export: skinned mannequins, skeletons and their animation.

:func:`write_glb` writes one or more characters (and optional obstacles) into one file:

- per character, one node per joint under a node named after the character (joint
  names kept), a skin whose inverse bind matrices are the mannequin's bind pose
  (:mod:`motionmatch.anim.mannequin`), a skinned mesh with its own colour, and one
  animation named after the character: every joint's rotation, the translation of
  every joint whose translation changes (the root's and any other position channels),
  keyed at the motion's frame rate (linear interpolation, one key per frame);
- the character's ground track: when joint 0 is not already a root bone on the ground
  (a ``SimulationBone``), a node ``<name>_ground`` carries the root's ground position and
  facing (:func:`motionmatch.anim.root.extract_root`), animated alongside;
- obstacles as simple meshes: boxes and cylinders (disks, ellipses) of their height
  (2 m when unbounded), moving ones animated by their position at each frame;
- the ground (a :class:`~motionmatch.environment.terrain.Terrain`, when given) as a mesh
  named ``terrain`` (:func:`motionmatch.io.ground.ground_mesh`).

glTF is Y up, metres and quaternions ``(x, y, z, w)``: our frame, our units; quaternions
are reordered at the boundary. The file is written atomically (complete or absent). The
container is written with ``pygltflib``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pygltflib as g

from motionmatch._files import atomic_path
from motionmatch.anim.mannequin import Mannequin, mannequin_for
from motionmatch.anim.motion import Motion
from motionmatch.anim.root import extract_root, root_bone_forward_axis

__all__ = ["CHARACTER_COLOURS", "Character", "write_glb"]

#: Base colours (linear RGB) of the characters, in turn.
CHARACTER_COLOURS = (
    (0.90, 0.45, 0.15), (0.15, 0.45, 0.85), (0.20, 0.65, 0.30), (0.80, 0.20, 0.35), (0.55, 0.35, 0.80),
    (0.85, 0.70, 0.15), (0.15, 0.65, 0.70), (0.60, 0.40, 0.25),
)
OBSTACLE_COLOUR = (0.55, 0.55, 0.58)
#: Height (m) of obstacles without a vertical extent.
UNBOUNDED_HEIGHT = 2.0
CYLINDER_SIDES = 24


@dataclass(frozen=True)
class Character:
    """One animated character of a ``.glb`` file: a name and its motion (and, optionally,
    the mannequin to skin; by default :func:`~motionmatch.anim.mannequin.mannequin_for`)."""

    name: str
    motion: Motion
    body: Mannequin | None = None


class _Builder:
    """Accumulates a glTF document and its one binary buffer."""

    def __init__(self) -> None:
        self.doc = g.GLTF2(asset=g.Asset(generator="motionmatch", version="2.0"), scene=0,
                           scenes=[g.Scene(nodes=[])], buffers=[g.Buffer(byteLength=0)])
        self.blob = bytearray()

    def accessor(self, data: np.ndarray, component: int, kind: str, target: int | None = None,
                 bounds: bool = False) -> int:
        data = np.ascontiguousarray(data)
        while len(self.blob) % 4:
            self.blob.append(0)
        view = g.BufferView(buffer=0, byteOffset=len(self.blob), byteLength=data.nbytes, target=target)
        self.blob.extend(data.tobytes())
        self.doc.bufferViews.append(view)
        rows = data.reshape(data.shape[0], -1)
        acc = g.Accessor(bufferView=len(self.doc.bufferViews) - 1, componentType=component, count=data.shape[0],
                         type=kind)
        if bounds:
            acc.min = [float(v) for v in rows.min(axis=0)]
            acc.max = [float(v) for v in rows.max(axis=0)]
        self.doc.accessors.append(acc)
        return len(self.doc.accessors) - 1

    def node(self, **kw) -> int:
        self.doc.nodes.append(g.Node(**kw))
        return len(self.doc.nodes) - 1

    def material(self, name: str, colour: Sequence[float]) -> int:
        self.doc.materials.append(g.Material(
            name=name, pbrMetallicRoughness=g.PbrMetallicRoughness(
                baseColorFactor=[*map(float, colour), 1.0], metallicFactor=0.0, roughnessFactor=0.7)))
        return len(self.doc.materials) - 1

    def mesh(self, name: str, vertices, normals, triangles, material: int, joints=None, weights=None) -> int:
        attrs = g.Attributes(
            POSITION=self.accessor(vertices.astype(np.float32), g.FLOAT, g.VEC3, g.ARRAY_BUFFER, bounds=True),
            NORMAL=self.accessor(normals.astype(np.float32), g.FLOAT, g.VEC3, g.ARRAY_BUFFER))
        if joints is not None:
            attrs.JOINTS_0 = self.accessor(joints.astype(np.uint16), g.UNSIGNED_SHORT, g.VEC4, g.ARRAY_BUFFER)
            attrs.WEIGHTS_0 = self.accessor(weights.astype(np.float32), g.FLOAT, g.VEC4, g.ARRAY_BUFFER)
        idx = self.accessor(triangles.astype(np.uint32).reshape(-1), g.UNSIGNED_INT, g.SCALAR,
                            g.ELEMENT_ARRAY_BUFFER)
        self.doc.meshes.append(g.Mesh(name=name, primitives=[g.Primitive(attributes=attrs, indices=idx,
                                                                          material=material)]))
        return len(self.doc.meshes) - 1

    def animation(self, name: str, times: np.ndarray, tracks: list[tuple[int, str, np.ndarray]]) -> None:
        """``tracks``: (node, "rotation" | "translation", values ``(F, 4 | 3)``)."""
        t = self.accessor(times.astype(np.float32), g.FLOAT, g.SCALAR, bounds=True)
        anim = g.Animation(name=name, samplers=[], channels=[])
        for node, path, values in tracks:
            kind = g.VEC4 if path == "rotation" else g.VEC3
            out = self.accessor(values.astype(np.float32), g.FLOAT, kind)
            anim.samplers.append(g.AnimationSampler(input=t, output=out, interpolation="LINEAR"))
            anim.channels.append(g.AnimationChannel(sampler=len(anim.samplers) - 1,
                                                    target=g.AnimationChannelTarget(node=int(node), path=path)))
        self.doc.animations.append(anim)

    def save(self, path: Path) -> None:
        while len(self.blob) % 4:
            self.blob.append(0)
        self.doc.buffers[0].byteLength = len(self.blob)
        self.doc.set_binary_blob(bytes(self.blob))
        with atomic_path(path) as tmp:
            self.doc.save_binary(str(tmp))


def _xyzw(q: np.ndarray) -> np.ndarray:
    """Our ``(w, x, y, z)`` as glTF's ``(x, y, z, w)``, unit and sign-continuous over frames."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    if q.ndim == 2 and len(q) > 1:  # keep consecutive keys in one hemisphere (linear interpolation)
        flip = np.cumprod(np.where(np.sum(q[1:] * q[:-1], axis=-1) < 0, -1.0, 1.0))
        q = q.copy()
        q[1:] *= flip[:, None]
    return q[..., [1, 2, 3, 0]]


def _add_character(b: _Builder, ch: Character, colour: Sequence[float]) -> None:
    m = ch.motion
    skel = m.skeleton
    body = ch.body if ch.body is not None else mannequin_for(m)
    J = skel.num_joints
    first = len(b.doc.nodes)
    for j in range(J):
        b.node(name=skel.names[j], translation=[float(v) for v in m.translations[0, j]],
               rotation=[float(v) for v in _xyzw(m.rotations[0, j])])
    for j in range(1, J):
        parent = b.doc.nodes[first + int(skel.parents[j])]
        parent.children = [*(parent.children or []), first + j]
    group = b.node(name=ch.name, children=[first])
    ibm = np.transpose(body.inverse_bind_matrices(), (0, 2, 1)).reshape(J, 16)  # column-major
    b.doc.skins.append(g.Skin(name=f"{ch.name}_skin", joints=list(range(first, first + J)), skeleton=first,
                              inverseBindMatrices=b.accessor(ibm.astype(np.float32), g.FLOAT, g.MAT4)))
    mat = b.material(f"{ch.name}_body", colour)
    mesh = b.mesh(f"{ch.name}_body", body.vertices, body.normals, body.triangles, mat, body.joints, body.weights)
    body_node = b.node(name=f"{ch.name}_body", mesh=mesh, skin=len(b.doc.skins) - 1)
    b.doc.scenes[0].nodes += [group, body_node]
    times = np.arange(m.num_frames) / m.fps
    tracks = [(first + j, "rotation", _xyzw(m.rotations[:, j])) for j in range(J)]
    moving = np.ptp(m.translations, axis=0).max(axis=1) > 1e-9
    tracks += [(first + int(j), "translation", m.translations[:, j]) for j in np.flatnonzero(moving)]
    if m.num_frames > 2 and J > 2 and root_bone_forward_axis(m) is None:
        root = extract_root(m)
        ground = b.node(name=f"{ch.name}_ground")
        b.doc.scenes[0].nodes.append(ground)
        tracks += [(ground, "translation", root.positions), (ground, "rotation", _xyzw(root.rotations))]
    b.animation(ch.name, times, tracks)


def _unit_box() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A unit cube, x and z in [-0.5, 0.5], y in [0, 1], flat normals, outward faces."""
    verts, norms, tris = [], [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            n = np.zeros(3)
            n[axis] = sign
            u, v = np.eye(3)[(axis + 1) % 3], np.eye(3)[(axis + 2) % 3]
            centre = 0.5 * n
            quad = [centre + su * 0.5 * u + sv * 0.5 * v for su, sv in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
            base = len(verts)
            verts += quad
            norms += [n] * 4
            tris += [[base, base + 1, base + 2], [base, base + 2, base + 3]] if sign > 0 else \
                [[base, base + 2, base + 1], [base, base + 3, base + 2]]
    v = np.array(verts)
    v[:, 1] += 0.5
    return v, np.array(norms), np.array(tris)


def _unit_cylinder(sides: int = CYLINDER_SIDES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A cylinder of radius 1, y in [0, 1]: side with smooth normals, flat caps."""
    a = 2 * np.pi * np.arange(sides) / sides
    ring = np.stack([np.sin(a), np.zeros(sides), np.cos(a)], axis=1)
    up = np.array([0.0, 1.0, 0.0])
    side = np.concatenate([ring, ring + up])
    side_n = np.concatenate([ring, ring])
    i = np.arange(sides)
    k = (i + 1) % sides
    side_t = np.concatenate([np.stack([i, k, k + sides], 1), np.stack([i, k + sides, i + sides], 1)])
    top = np.concatenate([[up], ring + up])
    top_t = np.stack([np.zeros(sides, int), 1 + i, 1 + k], 1)
    bottom = np.concatenate([[np.zeros(3)], ring])
    bottom_t = np.stack([np.zeros(sides, int), 1 + k, 1 + i], 1)
    v = np.concatenate([side, top, bottom])
    n = np.concatenate([side_n, np.tile(up, (sides + 1, 1)), np.tile(-up, (sides + 1, 1))])
    t = np.concatenate([side_t, top_t + 2 * sides, bottom_t + 3 * sides + 1])
    return v, n, t


def _add_obstacles(b: _Builder, obstacles: Sequence, times: np.ndarray | None) -> None:
    if not obstacles:
        return
    mat = b.material("obstacle", OBSTACLE_COLOUR)
    shapes: dict[str, int] = {}
    moving_tracks = []
    for i, o in enumerate(obstacles):
        kind = "box" if o.shape == "box" else "cylinder"
        if kind not in shapes:
            v, n, t = _unit_box() if kind == "box" else _unit_cylinder()
            shapes[kind] = b.mesh(f"obstacle_{kind}", v, n, t, mat)
        bottom, top = o.height if o.height is not None else (0.0, UNBOUNDED_HEIGHT)
        if o.shape == "box":
            scale = [o.size[1], top - bottom, o.size[0]]
        elif o.shape == "ellipse":
            scale = [o.axes[1], top - bottom, o.axes[0]]
        else:
            scale = [o.radius, top - bottom, o.radius]
        rot = [0.0, float(np.sin(o.yaw / 2)), 0.0, float(np.cos(o.yaw / 2))]
        node = b.node(name=getattr(o, "name", None) or f"obstacle_{i}", mesh=shapes[kind],
                      translation=[float(o.center[0]), float(bottom), float(o.center[1])], rotation=rot,
                      scale=[float(s) for s in scale])
        b.doc.scenes[0].nodes.append(node)
        if o.moving and times is not None:
            xz = np.array([o.position(float(t)) for t in times])
            moving_tracks.append((node, "translation", np.stack([xz[:, 0], np.full(len(xz), bottom), xz[:, 1]], 1)))
    if moving_tracks:
        b.animation("obstacles", times, moving_tracks)


def _add_terrain(b: _Builder, terrain) -> None:
    from motionmatch.io.ground import GROUND_COLOUR, ground_mesh

    v, n, t = ground_mesh(terrain)
    mesh = b.mesh("terrain", v, n, t, b.material("terrain", GROUND_COLOUR))
    b.doc.scenes[0].nodes.append(b.node(name="terrain", mesh=mesh))


def write_glb(path: str | Path, characters: Sequence[Character] | Motion, obstacles: Sequence = (),
              terrain=None) -> Path:
    """Write characters (or one motion), optional obstacles and the ground as a binary glTF file.

    Args:
        path: the ``.glb`` file to write (atomically).
        characters: the characters, each with its own nodes, skin, mesh and animation;
            a single :class:`Motion` is one character named after it.
        obstacles: :class:`~motionmatch.environment.obstacles.Obstacle`-like objects
            (``shape``, ``center``, ``radius``/``axes``/``size``, ``yaw``, ``height``,
            ``moving``, ``position(t)``) drawn as boxes and cylinders.
        terrain: the ground (:class:`~motionmatch.environment.terrain.Terrain`), drawn as
            a mesh named ``terrain``; ``None``: no ground in the file.
    """
    if isinstance(characters, Motion):
        characters = [Character(characters.name or "character", characters)]
    b = _Builder()
    for i, ch in enumerate(characters):
        _add_character(b, ch, CHARACTER_COLOURS[i % len(CHARACTER_COLOURS)])
    times = None
    if characters:
        longest = max(characters, key=lambda c: c.motion.duration).motion
        times = np.arange(longest.num_frames) / longest.fps
    _add_obstacles(b, obstacles, times)
    if terrain is not None:
        _add_terrain(b, terrain)
    path = Path(path)
    b.save(path)
    return path
