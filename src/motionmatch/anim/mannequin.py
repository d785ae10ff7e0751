"""A skinned mannequin body for any skeleton, built from the skeleton alone.

Shape: every bone (a joint to each child joint or end site) is a tapered capsule whose
radius comes from how much body hangs below it (the longest path from the bone's joint to
a leaf, its *reach*): spines are thick, fingers thin, a leaf bone (head, toes, hands
without fingers) rounded to a fraction of its length. A humanoid also gets a head and,
where its hands have no finger joints, mittens with thumbs, sized from its height
(:mod:`motionmatch.anim.body_parts`). Twist, roll and share bones that end a chain
(:func:`~motionmatch.anim.humanoid.helper_joints`) add no capsule of their own. The capsules' signed distances are
joined by a smooth union (log-sum-exp) on a voxel grid and the surface is extracted with
*surface nets* (one vertex per surface cell, one quad per sign-changing grid edge),
which gives a closed mesh: every edge of it is shared by an even number of faces.

Skin: each vertex belongs to the joint of the nearest capsule, blended with that joint's
parent or child in a thin band around the joint the two share (:func:`_skin_weights`);
then each joint's weight is spread over the mesh around it, about a limb's radius, to the
joints up to two bones along its chain, each vertex its own joint's most, at most four
joints per vertex (:func:`~motionmatch.anim.skin_smooth.smooth_weights`). The near-rigid
weights alone kept every vertex within 4 % of its bind-pose distance to its bones in any
pose, but tore the mesh where two parts turn against each other (the hips and shoulders of
a walk: triangles stretched 9-12 times); the spread weights bend there as an artist's do,
a vertex on the outside of a far bend moving somewhat off its bones (issue 32).
Joints whose offset from their parent changes in the motion (the elephant's clavicles and
thighs: :func:`sliding_joints`) own the bone into them.

Bind pose: the mesh is built in one pose of the skeleton, its *bind pose*: the rest pose
(identity local rotations and the skeleton's offsets) unless one is given. Some files'
rest poses fold every bone onto one line (LAFAN1's bones all point along +X, Bandai-Namco's
legs lie along the spine), where no body can be built; :func:`bind_pose` picks a pose of a
motion where the limbs stand apart, and :func:`mannequin_for` builds the body in it. The
joints' world transforms of the bind pose are part of :class:`Mannequin` (glTF's inverse
bind matrices, three.js' bone inverses): skin with them, not with the rest pose.

Joints that only carry the character over the ground (LAFAN1's ``SimulationBone``,
Bandai-Namco's ``joint_Root``, a Character Creator ``BoneRoot``: the joints above a
humanoid's hips, one child each) have no body: their bones are left out (no pedestal from
the floor to the pelvis) and no vertex is weighted to them (:func:`body_joints`).

Everything is vectorized numpy; the result is cached per skeleton and bind pose.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from motionmatch.anim import kinematics, quat
from motionmatch.anim.body_parts import HumanoidShape, humanoid_shape, stands
from motionmatch.anim.humanoid import HumanoidError, carrier_joints, find_humanoid, helper_joints
from motionmatch.anim.motion import Motion
from motionmatch.anim.skeleton import Skeleton
from motionmatch.anim.skin_smooth import smooth_weights
from motionmatch.anim.standing import rolled_like, standing_pose

__all__ = ["Mannequin", "bind_pose", "body_joints", "bone_distances", "mannequin", "mannequin_for", "sliding_joints"]

#: Cells along the longest side of the body's bounding box.
GRID_CELLS = 88
#: Bone radius per metre of reach (the longest path from the bone's joint to a leaf).
RADIUS_PER_REACH = 0.085
#: A leaf bone's radius as a fraction of its length (heads, toes, fingertips).
LEAF_RADIUS = 0.38
#: Smallest radius, in grid cells (so that thin bones stay connected and their joints inside).
MIN_RADIUS_CELLS = 1.3
#: Smooth-union blend width, in grid cells.
BLEND_CELLS = 0.7
#: How much farther from its bones the seed weights (:func:`_skin_weights`) may take a blended
#: vertex than it is in the bind pose, as a fraction (in any pose; issue 16 allowed 5 %).
BLEND_SLACK = 0.04
#: A joint whose offset from its parent changes by more than this (metres) in a motion is *sliding*.
SLIDE_TOLERANCE = 1e-4
#: :func:`bind_pose` counts two limbs' bones as touching within this many grid cells.
FUSE_MARGIN_CELLS = 2.0
#: Most frames of a motion :func:`bind_pose` looks at.
BIND_CANDIDATES = 64


@dataclass(frozen=True, eq=False)
class Mannequin:
    """A closed skinned mesh in its bind pose (metres, Y up, the skeleton's own frame).

    Attributes:
        vertices: ``(V, 3)`` float32 vertex positions in the bind pose, metres.
        normals: ``(V, 3)`` float32 unit normals pointing outwards.
        triangles: ``(F, 3)`` uint32 vertex indices, counter-clockwise seen from outside.
        joints: ``(V, 4)`` uint16 joint indices into the skeleton's joints.
        weights: ``(V, 4)`` float32 skin weights, each row sums to 1 (unused slots 0).
        bind_positions: ``(J, 3)`` float64 world joint positions of the bind pose (m).
        bind_rotations: ``(J, 4)`` float64 world joint rotations ``(w, x, y, z)`` of the bind pose.
    """

    vertices: np.ndarray
    normals: np.ndarray
    triangles: np.ndarray
    joints: np.ndarray
    weights: np.ndarray
    bind_positions: np.ndarray
    bind_rotations: np.ndarray

    def inverse_bind_matrices(self) -> NDArray[np.float32]:
        """``(J, 4, 4)`` float32 row-major matrices taking world points of the bind pose into
        each joint's frame (transpose each for glTF's column-major layout)."""
        J = self.bind_positions.shape[0]
        r_inv = quat.to_matrix(quat.conjugate(self.bind_rotations))
        m = np.zeros((J, 4, 4))
        m[:, :3, :3] = r_inv
        m[:, :3, 3] = -np.einsum("jab,jb->ja", r_inv, self.bind_positions)
        m[:, 3, 3] = 1.0
        return m.astype(np.float32)

    def skin(self, world_positions: np.ndarray, world_rotations: np.ndarray) -> NDArray[np.float64]:
        """Vertex positions ``(..., V, 3)`` under joint world transforms ``(..., J, 3)`` and
        ``(..., J, 4)`` (linear-blend skinning from the bind pose)."""
        wp = np.asarray(world_positions, dtype=np.float64)
        wr = np.asarray(world_rotations, dtype=np.float64)
        delta_r = quat.mul(wr, quat.conjugate(self.bind_rotations))  # (..., J, 4)
        mats = quat.to_matrix(delta_r)  # (..., J, 3, 3)
        trans = wp - np.einsum("...jab,jb->...ja", mats, self.bind_positions)
        v = self.vertices.astype(np.float64)
        out = np.zeros(wp.shape[:-2] + v.shape)
        for k in range(4):
            j = self.joints[:, k].astype(np.intp)
            w = self.weights[:, k].astype(np.float64)[:, None]
            out += w * (np.einsum("...vab,vb->...va", mats[..., j, :, :], v) + trans[..., j, :])
        return out


# ----------------------------------------------------------------------------- bones
def body_joints(skeleton: Skeleton) -> NDArray[np.bool_]:
    """``(J,)`` bool: joints that carry the body (all but those that only move the
    character over the ground: :func:`~motionmatch.anim.humanoid.carrier_joints`, e.g. a
    ``SimulationBone`` above a Character Creator ``BoneRoot`` above the hips)."""
    mask = np.ones(skeleton.num_joints, dtype=bool)
    mask[list(carrier_joints(skeleton))] = False
    return mask


def _bones(skeleton: Skeleton, positions: np.ndarray, rotations: np.ndarray):
    """Segments of the body in the bind pose: owner joint, start, end, start and end radius."""
    J = skeleton.num_joints
    parents = skeleton.parents
    body = body_joints(skeleton)
    helper = helper_joints(skeleton)  # twist and share bones: no body part of their own
    es_pos = positions[skeleton.end_site_parents] + quat.rotate(
        rotations[skeleton.end_site_parents], skeleton.end_site_offsets)
    # reach: the longest path from each joint down to a leaf (joint or end site)
    reach = np.zeros(J)
    for e, p in enumerate(skeleton.end_site_parents):
        reach[p] = max(reach[p], float(np.linalg.norm(es_pos[e] - positions[p])))
    for j in range(J - 1, 0, -1):
        p = parents[j]
        reach[p] = max(reach[p], reach[j] + float(np.linalg.norm(positions[j] - positions[p])))
    owner, start, end, end_joint, kind, child = [], [], [], [], [], []  # kind: 0 inner bone, 1 leaf bone, 2 ball
    has_end_site = np.zeros(J, dtype=bool)
    has_end_site[skeleton.end_site_parents] = True
    for j in range(1, J):
        if body[parents[j]] and not helper[j]:
            owner.append(parents[j])
            start.append(positions[parents[j]])
            end.append(positions[j])
            inner = bool(np.any(parents == j)) or has_end_site[j]
            end_joint.append(j if inner else -1)
            kind.append(0 if inner else 1)
            child.append(j)
    for e, p in enumerate(skeleton.end_site_parents):
        if body[p]:
            owner.append(p)
            start.append(positions[p])
            end.append(es_pos[e])
            end_joint.append(-1)
            kind.append(1)
            child.append(-1)
    has_bone = np.zeros(J, dtype=bool)
    has_bone[owner] = True
    for j in np.flatnonzero(body & ~has_bone & ~helper):  # a leaf joint without end site: a ball
        owner.append(int(j))
        start.append(positions[j])
        end.append(positions[j])
        end_joint.append(-1)
        kind.append(2)
        child.append(-1)
    owner_a = np.asarray(owner, dtype=np.int64)
    end_j = np.asarray(end_joint, dtype=np.int64)
    kind_a = np.asarray(kind)
    a, b = np.asarray(start, dtype=np.float64).reshape(-1, 3), np.asarray(end, dtype=np.float64).reshape(-1, 3)
    length = np.linalg.norm(b - a, axis=1)
    r0 = RADIUS_PER_REACH * reach[owner_a]
    r1 = np.where(end_j >= 0, RADIUS_PER_REACH * reach[np.maximum(end_j, 0)], r0)
    leafy = kind_a == 1
    r0[leafy] = np.maximum(r0[leafy], LEAF_RADIUS * length[leafy])
    r1[leafy] = np.maximum(r1[leafy], LEAF_RADIUS * length[leafy])
    balls = kind_a == 2
    if np.any(balls):  # a bare leaf joint: a ball as thick as a fraction of its parent bone
        pj = np.maximum(parents[owner_a[balls]], 0)
        r_ball = LEAF_RADIUS * np.linalg.norm(positions[owner_a[balls]] - positions[pj], axis=1)
        r0[balls] = r1[balls] = r_ball
    return owner_a, a, b, r0, r1, reach, np.asarray(child, dtype=np.int64)


# -------------------------------------------------------------------------- the field
def _capsule_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray, r0: float, r1: float):
    """Signed distance of points ``p (..., 3)`` to a capsule tapering from ``r0`` at ``a``
    to ``r1`` at ``b`` (the radius interpolated at the closest point of the axis)."""
    ab = b - a
    ll = float(ab @ ab)
    ap = p - a
    t = np.clip((ap @ ab) / ll, 0.0, 1.0) if ll > 1e-18 else np.zeros(p.shape[:-1])
    d = np.linalg.norm(ap - t[..., None] * ab, axis=-1)
    return d - (r0 + (r1 - r0) * t), t


def _surface_nets(field: np.ndarray, origin: np.ndarray, h: float):
    """Closed quad mesh of ``field < 0`` (the field must be positive on the grid's border):
    vertices ``(V, 3)`` and triangles ``(F, 3)`` counter-clockwise seen from outside."""
    inside = field < 0
    nx, ny, nz = field.shape
    # crossing points on the grid edges of each axis, summed into the 4 cells around each edge
    acc = np.zeros((nx - 1, ny - 1, nz - 1, 3))
    cnt = np.zeros((nx - 1, ny - 1, nz - 1))
    grid = np.stack(np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"), axis=-1).astype(np.float64)
    for ax in range(3):
        lo = [slice(None)] * 3
        hi = [slice(None)] * 3
        lo[ax], hi[ax] = slice(0, -1), slice(1, None)
        f0, f1 = field[tuple(lo)], field[tuple(hi)]
        cross = inside[tuple(lo)] != inside[tuple(hi)]
        t = np.where(cross, f0 / np.where(cross, f0 - f1, 1.0), 0.0)
        pt = grid[tuple(lo)].copy()
        pt[..., ax] += t
        pt *= cross[..., None]
        others = [o for o in range(3) if o != ax]
        for d0 in (0, 1):
            for d1 in (0, 1):
                sl = [slice(None)] * 3
                sl[others[0]] = slice(d0, d0 + field.shape[others[0]] - 1)
                sl[others[1]] = slice(d1, d1 + field.shape[others[1]] - 1)
                acc += pt[tuple(sl)]
                cnt += cross[tuple(sl)]
    active = cnt > 0
    index = np.full(active.shape, -1, dtype=np.int64)
    index[active] = np.arange(int(active.sum()))
    verts = acc[active] / cnt[active][:, None]
    quads = []
    for ax in range(3):
        b, c = (ax + 1) % 3, (ax + 2) % 3  # cyclic, so that b x c = ax
        lo = [slice(None)] * 3
        hi = [slice(None)] * 3
        lo[ax], hi[ax] = slice(0, -1), slice(1, None)
        cross = inside[tuple(lo)] != inside[tuple(hi)]
        out_plus = inside[tuple(lo)]  # inside at the low end: the surface faces +ax
        e = np.argwhere(cross)
        e = e[(e[:, b] > 0) & (e[:, c] > 0) & (e[:, b] < field.shape[b] - 1) & (e[:, c] < field.shape[c] - 1)]
        ring = []
        for db, dc in ((-1, -1), (0, -1), (0, 0), (-1, 0)):
            cell = e.copy()
            cell[:, b] += db
            cell[:, c] += dc
            ring.append(index[cell[:, 0], cell[:, 1], cell[:, 2]])
        q = np.stack(ring, axis=1)
        flip = ~out_plus[e[:, 0], e[:, 1], e[:, 2]]
        q[flip] = q[flip][:, ::-1]
        quads.append(q)
    q = np.concatenate(quads)
    # split each quad along its shorter diagonal
    d02 = np.linalg.norm(verts[q[:, 0]] - verts[q[:, 2]], axis=1)
    d13 = np.linalg.norm(verts[q[:, 1]] - verts[q[:, 3]], axis=1)
    short02 = d02 <= d13
    tri = np.concatenate([
        np.where(short02[:, None], q[:, [0, 1, 2]], q[:, [0, 1, 3]]),
        np.where(short02[:, None], q[:, [0, 2, 3]], q[:, [1, 2, 3]]),
    ])
    return origin + verts * h, tri


def _vertex_normals(v: np.ndarray, tri: np.ndarray) -> np.ndarray:
    fn = np.cross(v[tri[:, 1]] - v[tri[:, 0]], v[tri[:, 2]] - v[tri[:, 0]])  # area-weighted
    n = np.zeros_like(v)
    for k in range(3):
        np.add.at(n, tri[:, k], fn)
    return n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)


# ------------------------------------------------------------------------- the body
def _humanoid_radii(skeleton: Skeleton, shape: HumanoidShape, owner: np.ndarray, child: np.ndarray,
                    r0: np.ndarray, r1: np.ndarray) -> tuple[np.ndarray, np.ndarray, NDArray[np.bool_]]:
    """The bones' radii with a humanoid's proportions (the bones between roles as
    ``shape.bone_radii`` says) and which bones stay: not those of a joint ``shape`` draws
    whole (``shape.replaced``: the head, the toes) or of any joint below one."""
    r0, r1 = r0.copy(), r1.copy()
    for i, (o, c) in enumerate(zip(owner.tolist(), child.tolist())):
        if (o, c) in shape.bone_radii:
            r0[i], r1[i] = shape.bone_radii[(o, c)]
    keep = np.array([not any(skeleton.descends_from(o, j) for j in shape.replaced) for o in owner.tolist()],
                    dtype=bool)
    return r0, r1, keep


def _build(skeleton: Skeleton, local_rot: np.ndarray, local_trans: np.ndarray, sliding: NDArray[np.bool_]) -> Mannequin:
    wp, wr = kinematics.forward_kinematics(skeleton.parents, local_rot[None], local_trans[None])
    wp, wr = wp[0], wr[0]
    owner, a, b, r0, r1, _, child = _bones(skeleton, wp, wr)
    shape = humanoid_shape(skeleton, wp)  # a humanoid's proportions, head, mittens and feet
    if shape is not None:
        r0, r1, keep = _humanoid_radii(skeleton, shape, owner, child, r0, r1)
        owner, a, b, r0, r1, child = owner[keep], a[keep], b[keep], r0[keep], r1[keep], child[keep]
        owner, a, b = np.r_[owner, shape.owner], np.concatenate([a, shape.a]), np.concatenate([b, shape.b])
        r0, r1, child = np.r_[r0, shape.r0], np.r_[r1, shape.r1], np.r_[child, shape.child]
    pts = np.concatenate([a, b])
    size = float(np.max(pts.max(0) - pts.min(0)))
    size = max(size, float(np.max(np.maximum(r0, r1))) * 2, 1e-6)
    h = size / GRID_CELLS
    r0 = np.maximum(r0, MIN_RADIUS_CELLS * h)
    r1 = np.maximum(r1, MIN_RADIUS_CELLS * h)
    k = BLEND_CELLS * h
    lo_all = np.minimum(a, b) - np.maximum(r0, r1)[:, None]
    hi_all = np.maximum(a, b) + np.maximum(r0, r1)[:, None]
    pad = 3 * h + 2 * k
    origin = lo_all.min(0) - pad
    shape = np.ceil((hi_all.max(0) + pad - origin) / h).astype(int) + 1
    # smooth union: field = -k log(sum_i exp(-d_i / k)); each capsule only near its box
    reach_out = 12.0 * k
    total = np.full(tuple(shape), np.exp(-reach_out / k))
    for i in range(len(owner)):
        i0 = np.maximum(np.floor((lo_all[i] - reach_out - origin) / h).astype(int), 0)
        i1 = np.minimum(np.ceil((hi_all[i] + reach_out - origin) / h).astype(int) + 1, shape)
        axes = [origin[c] + h * np.arange(i0[c], i1[c]) for c in range(3)]
        p = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
        d, _ = _capsule_distance(p, a[i], b[i], r0[i], r1[i])
        total[i0[0]:i1[0], i0[1]:i1[1], i0[2]:i1[2]] += np.exp(-np.minimum(d, reach_out) / k)
    field = -k * np.log(total)
    field[field == 0.0] = 1e-12  # no grid point exactly on the surface
    verts, tri = _surface_nets(field, origin, h)
    normals = _vertex_normals(verts, tri)
    joints, weights, depth = _skin_weights(verts, skeleton, wp, wr, owner, a, b, r0, r1, child, sliding)
    joints, weights = smooth_weights(verts, tri, joints, weights, depth, skeleton.parents, body_joints(skeleton),
                                     sliding)
    return Mannequin(
        vertices=verts.astype(np.float32),
        normals=normals.astype(np.float32),
        triangles=tri.astype(np.uint32),
        joints=joints.astype(np.uint16),
        weights=weights.astype(np.float32),
        bind_positions=wp,
        bind_rotations=wr,
    )


def _skin_weights(v: np.ndarray, skeleton: Skeleton, wp: np.ndarray, wr: np.ndarray, owner: np.ndarray,
                  a: np.ndarray, b: np.ndarray, r0: np.ndarray, r1: np.ndarray, child: np.ndarray,
                  sliding: NDArray[np.bool_]):
    """Skin weights of vertices ``v (V, 3)`` in the bind pose (joint world transforms ``wp``,
    ``wr``): joint indices and weights ``(V, 4)``, at most two joints per vertex, and ``(V,)``
    each vertex's distance to the bone of its capsule (the body's thickness there, m); the
    seed of :func:`~motionmatch.anim.skin_smooth.smooth_weights`.

    Each vertex belongs to the joint of the capsule whose surface is nearest (its *owner*).
    Near the end of its bone it may blend with the joint there (the owner's child), near the
    start with the owner's parent: a parent and a child only, blended around the point
    ``P`` they share (the child joint). Linear blending of two transforms that both move
    ``P`` to the same place keeps a vertex as close to ``P`` as it was in the bind pose
    (the blend of two points at one distance from ``P`` is no farther from it), and ``P``
    lies on a bone of each of the two joints; so a vertex whose bind-pose distance to ``P``
    is at most ``1 + BLEND_SLACK`` times its distance to the two joints' bones stays within
    that factor of its bind-pose distance to its bones, whatever the pose. Blends are kept
    to that region (a slab about ``±0.3`` limb radii wide across a straight joint, wider on
    the outside of a bent one): the partner's weight falls smoothly from 1/2 where ``P`` is
    the nearest point of the bones to 0 at its edge, and every other vertex is rigid, so
    keeps its distance to its joint's bones exactly.

    A *sliding* joint (``sliding (J,)``: its offset from its parent changes in the motion)
    does not share a fixed point with its parent: the bone into it belongs to it, not to
    the parent, a vertex of the parent nearer to that bone than to the parent's other bones
    goes to it, and it is never blended with its parent.
    """
    V = len(v)
    parents = skeleton.parents
    body = body_joints(skeleton)
    seg_slides = (child >= 0) & sliding[np.maximum(child, 0)]
    owner = np.where(seg_slides, child, owner)  # the bone into a sliding joint is the joint's
    child = np.where(seg_slides, -1, child)
    ab = b - a
    ll = np.maximum(np.einsum("sc,sc->s", ab, ab), 1e-18)
    t = np.clip(np.einsum("vsc,sc->vs", v[:, None, :] - a[None], ab) / ll, 0.0, 1.0)  # (V, S)
    radius = r0[None] + (r1 - r0)[None] * t
    s = np.linalg.norm(v[:, None, :] - (a[None] + t[..., None] * ab[None]), axis=-1) - radius
    nearest = np.argmin(s, axis=1)
    own = owner[nearest]
    t_near = t[np.arange(V), nearest]
    # the partner: the bone's child joint near its end, the owner's parent near its start
    c = child[nearest]
    par = np.where(own > 0, parents[own], -1)
    par_ok = (par >= 0) & body[np.maximum(par, 0)] & ~sliding[own]
    to_child = (t_near >= 0.5) & (c >= 0)
    partner = np.where(to_child, c, np.where(par_ok, par, -1))
    shared = np.where(to_child, c, own)  # the joint at the point the two share
    seg_a, seg_b, mask, seg_end = _joint_bones(skeleton, wp, wr)

    def to_bones(pts: np.ndarray, joint: np.ndarray, keep: NDArray[np.bool_]) -> np.ndarray:
        """Distance of points ``(n, 3)`` to the bones (``keep (J, K)``) of their joints ``(n,)``."""
        best = np.full(len(joint), np.inf)
        for k in range(mask.shape[1]):
            aa, bb = seg_a[joint, k], seg_b[joint, k]
            sab = bb - aa
            tt = np.clip(np.sum((pts - aa) * sab, axis=-1) / np.maximum(np.sum(sab * sab, axis=-1), 1e-18), 0.0, 1.0)
            d = np.linalg.norm(pts - aa - tt[:, None] * sab, axis=-1)
            best = np.where(keep[joint, k], np.minimum(best, d), best)
        return best

    # a vertex of a joint nearest to one of its sliding bones goes to the sliding joint
    slide_slot = mask & (seg_end >= 0) & sliding[np.maximum(seg_end, 0)]
    for _ in range(len(parents)):
        cand = np.flatnonzero(slide_slot[own].any(axis=1))
        if not len(cand):
            break
        d_fixed = to_bones(v[cand], own[cand], mask & ~slide_slot)
        moved = False
        for k in range(mask.shape[1]):
            d_k = to_bones(v[cand], own[cand], np.eye(mask.shape[1], dtype=bool)[k][None] & slide_slot)
            go = d_k < d_fixed
            if np.any(go):
                own[cand[go]] = seg_end[own[cand[go]], k]
                partner[cand[go]] = -1
                d_fixed[go] = np.inf
                moved = True
        if not moved:
            break
    pb = partner >= 0
    w_partner = np.zeros(V)
    if np.any(pb):
        v_sel = v[pb]
        d_bones = np.minimum(to_bones(v_sel, own[pb], mask), to_bones(v_sel, partner[pb], mask))
        g = np.linalg.norm(v_sel - wp[shared[pb]], axis=-1) / np.maximum(d_bones, 1e-12)
        x = np.sqrt(np.clip((g - 1.0) / BLEND_SLACK, 0.0, 1.0))  # 0 where P is nearest, 1 at the edge
        u = 0.5 * (1.0 - x)
        w_partner[pb] = u * u * (3.0 - 2.0 * u)  # smoothstep: 1/2 -> 0
    joints = np.zeros((V, 4), dtype=np.int64)
    weights = np.zeros((V, 4))
    joints[:, 0] = own
    weights[:, 0] = 1.0 - w_partner
    blended = w_partner > 0
    joints[blended, 1] = partner[blended]
    weights[blended, 1] = w_partner[blended]
    depth = s[np.arange(V), nearest] + radius[np.arange(V), nearest]
    return joints, weights, depth


@functools.lru_cache(maxsize=32)
def _cached(key: tuple) -> Mannequin:
    names, parents, offsets, es_par, es_off, channels, rot, trans, sliding, J = key
    skel = Skeleton(names, np.frombuffer(parents, dtype=np.int64), np.frombuffer(offsets).reshape(J, 3),
                    np.frombuffer(es_par, dtype=np.int64), np.frombuffer(es_off).reshape(-1, 3), channels)
    slides = np.zeros(J, dtype=bool)
    slides[list(sliding)] = True
    return _build(skel, np.frombuffer(rot).reshape(J, 4), np.frombuffer(trans).reshape(J, 3), slides)


def mannequin(skeleton: Skeleton, pose: tuple[np.ndarray, np.ndarray] | None = None,
              sliding: Sequence[int] = ()) -> Mannequin:
    """The mannequin of ``skeleton``, built in ``pose`` (local rotations ``(J, 4)`` and
    translations ``(J, 3)``), by default its rest pose. ``sliding``: joints whose offset
    from their parent changes in the motions it will be skinned with
    (:func:`sliding_joints`); none by default. Deterministic and cached."""
    J = skeleton.num_joints
    if pose is None:
        rot = np.tile([1.0, 0.0, 0.0, 0.0], (J, 1))
        trans = skeleton.offsets
    else:
        rot = quat.normalize(np.asarray(pose[0], dtype=np.float64).reshape(J, 4))
        trans = np.asarray(pose[1], dtype=np.float64).reshape(J, 3)
    key = (skeleton.names, skeleton.parents.tobytes(), np.ascontiguousarray(skeleton.offsets).tobytes(),
           skeleton.end_site_parents.tobytes(), np.ascontiguousarray(skeleton.end_site_offsets).tobytes(),
           skeleton.channels, np.ascontiguousarray(rot).tobytes(), np.ascontiguousarray(trans).tobytes(),
           tuple(sorted({int(j) for j in sliding})), J)
    return _cached(key)


def bind_pose(motion: Motion) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A pose to build ``motion``'s body in: local rotations ``(J, 4)`` and translations
    ``(J, 3)``.

    The rest pose or one of (at most :data:`BIND_CANDIDATES`) frames of the motion: the one
    where the fewest bones of different limbs touch (their capsules, with
    :data:`FUSE_MARGIN_CELLS` grid cells to spare, overlap: they would be meshed as one
    piece and stretch apart as the limbs move), then the one with the straightest limbs
    (the mean cosine between the bones into and out of each joint with one child). Bones
    count as different limbs when their joints are three or more bones apart. The rest pose
    wins ties. A rest pose that folds the skeleton onto a line (LAFAN1's bones all point
    along +X) fuses legs with the spine and loses to a frame of the motion. Where none of
    them keeps a humanoid's limbs apart (a tired walk's arms hang against a person's hips),
    and the motion stands, its A pose made from the skeleton
    (:func:`~motionmatch.anim.standing.standing_pose`: the arms 45 degrees out from the body)
    is taken if it fuses fewer (a frame of the motion is nearer the poses it is skinned in:
    skinning from the A pose to arms hanging tears the shoulders more), its bones rolled
    about themselves as in the motion's straightest standing frame
    (:func:`~motionmatch.anim.standing.rolled_like`: skinned across a roll of half a turn,
    the hips and shoulders tear). A humanoid's frames that do not stand (a crawl) are never
    taken (its head, torso and feet are built only in a standing pose). The root is moved
    over the origin (its height kept).
    """
    skel = motion.skeleton
    J = skel.num_joints
    rest_rot = np.tile([1.0, 0.0, 0.0, 0.0], (1, J, 1))
    frames = np.unique(np.linspace(0, motion.num_frames - 1, min(BIND_CANDIDATES, motion.num_frames)).astype(int))
    rots = np.concatenate([rest_rot, motion.rotations[frames]])
    trans = np.concatenate([skel.offsets[None], motion.translations[frames]])
    n_own = len(rots)  # the rest pose and the frames; then perhaps the A pose
    standing = np.ones(n_own, dtype=bool)
    try:  # a humanoid standing in an A pose, with the motion's bone lengths
        roles = find_humanoid(skel)
        own_pos = kinematics.forward_kinematics(skel.parents, rots, trans)[0]
        standing = np.array([stands(p, roles) for p in own_pos])
        if standing[1:].any():  # not an animal rigged with humanoid names
            stand_rot, stand_tr = standing_pose(skel, motion.translations[0])
            rots = np.concatenate([rots, stand_rot[None]])
            trans = np.concatenate([trans, stand_tr[None]])
        else:
            standing[:] = True
    except HumanoidError:
        pass
    pos, wrot = kinematics.forward_kinematics(skel.parents, rots, trans)
    fused = _fused_bone_pairs(skel, pos, wrot)
    # a humanoid's body (head, torso, feet) is built in a pose that stands: a crawl's frame never
    fused[:n_own][~standing] = np.iinfo(np.int64).max
    straight = _straightness(skel, pos)
    best_fused = fused[:n_own].min()
    candidates = np.flatnonzero(fused[:n_own] == best_fused)
    best = 0 if candidates[0] == 0 else int(candidates[np.argmax(straight[candidates])])
    if len(rots) > n_own and fused[n_own] < best_fused:  # the A pose only where it fuses fewer limbs
        best = n_own
    rot, tr = rots[best].copy(), trans[best].copy()
    if best == n_own:  # the A pose's bones rolled as the motion's straightest standing frame rolls them
        ok = np.flatnonzero(standing[1:n_own]) + 1
        if len(ok):
            rot = rolled_like(skel, rot, tr, rots[int(ok[np.argmax(straight[ok])])])
    tr[0, [0, 2]] = 0.0
    return rot, tr


def sliding_joints(motion: Motion) -> tuple[int, ...]:
    """Joints of the body whose offset from their parent changes in ``motion`` by more than
    :data:`SLIDE_TOLERANCE` (e.g. the elephant's clavicles and thighs; none in most data)."""
    tr = motion.translations
    moved = np.linalg.norm(tr - tr[:1], axis=-1).max(axis=0) > SLIDE_TOLERANCE
    parents = motion.skeleton.parents
    body = body_joints(motion.skeleton)
    return tuple(int(j) for j in range(1, motion.num_joints) if moved[j] and body[parents[j]])


def _fused_bone_pairs(skel: Skeleton, positions: np.ndarray, rotations: np.ndarray) -> NDArray[np.int64]:
    """Per pose ``(P, J, 3)``, ``(P, J, 4)``: how many pairs of bones of different limbs
    (owner joints three or more bones apart) touch: ``(P,)``."""
    owner, a, b, r0, r1, _, child = _bones(skel, positions[0], rotations[0])
    size = float(np.max(np.ptp(np.concatenate([a, b]), axis=0)))
    keep = np.ones(len(owner), dtype=bool)
    shape = next((sh for sh in map(lambda p: humanoid_shape(skel, p), positions) if sh is not None), None)
    if shape is not None:  # a humanoid's limbs and torso are as thick as a person's
        girth = dataclasses.replace(shape, bone_radii=shape.bone_girth)
        r0, r1, keep = _humanoid_radii(skel, girth, owner, child, r0, r1)
    # the same segments in every pose (in _bones' order): to a child joint, an end site, or a ball
    body = body_joints(skel)
    helper = helper_joints(skel)
    es = positions[:, skel.end_site_parents] + quat.rotate(rotations[:, skel.end_site_parents], skel.end_site_offsets)
    to_joints = [positions[:, j] for j in range(1, skel.num_joints) if body[skel.parents[j]] and not helper[j]]
    to_sites = [es[:, e] for e, p in enumerate(skel.end_site_parents) if body[p]]
    balls = [positions[:, j] for j in owner[len(to_joints) + len(to_sites):]]
    end_pts = np.stack(to_joints + to_sites + balls, axis=1)
    t = np.linspace(0.0, 1.0, 5)
    start_pts = positions[:, owner]
    pts = start_pts[:, :, None] + t[None, None, :, None] * (end_pts - start_pts)[:, :, None]  # (P, B, 5, 3)
    rad = r0[:, None] + t[None, :] * (r1 - r0)[:, None]  # (B, 5)
    pts, rad, owner = pts[:, keep], rad[keep], owner[keep]
    hops = _tree_distance(skel.parents)[np.ix_(owner, owner)]
    apart = np.triu(hops >= 3, 1)
    margin = FUSE_MARGIN_CELLS * max(size, 1e-6) / GRID_CELLS
    P, B = pts.shape[:2]
    reach = (rad[:, :, None, None] + rad[None, None, :, :] + margin).reshape(B * 5, B * 5)
    touching = np.zeros((P, B, B), dtype=bool)
    for k in range(P):  # one pose at a time: (5B)^2 distances
        flat = pts[k].reshape(B * 5, 3)
        sq = np.einsum("ij,ij->i", flat, flat)
        d2 = sq[:, None] + sq[None, :] - 2.0 * flat @ flat.T
        touching[k] = (d2 < reach * reach).reshape(B, 5, B, 5).any(axis=(1, 3)) & apart
    return touching.sum(axis=(1, 2)).astype(np.int64)


def _straightness(skel: Skeleton, pos: np.ndarray) -> NDArray[np.float64]:
    """Per pose ``(P, J, 3)``: the mean cosine between the bones into and out of each body
    joint with one child, ``(P,)`` (1 for a skeleton without such joints)."""
    body = body_joints(skel)
    single = [j for j in range(1, skel.num_joints) if body[skel.parents[j]] and len(skel.children(j)) == 1]
    if not single:
        return np.ones(len(pos))
    kid = np.array([skel.children(j)[0] for j in single])
    j_ = np.array(single)
    d_in = pos[:, j_] - pos[:, skel.parents[j_]]
    d_out = pos[:, kid] - pos[:, j_]
    norms = np.linalg.norm(d_in, axis=-1) * np.linalg.norm(d_out, axis=-1)
    cos = np.where(norms > 1e-12, np.sum(d_in * d_out, axis=-1) / np.maximum(norms, 1e-12), 1.0)
    return cos.mean(axis=1)


def mannequin_for(motion: Motion) -> Mannequin:
    """The mannequin of ``motion``'s skeleton in its :func:`bind_pose`, with its
    :func:`sliding_joints`."""
    return mannequin(motion.skeleton, bind_pose(motion), sliding_joints(motion))


def _tree_distance(parents: np.ndarray) -> NDArray[np.int64]:
    """``(J, J)`` number of bones between every two joints."""
    J = len(parents)
    depth = np.zeros(J, dtype=np.int64)
    anc = np.zeros((J, J), dtype=bool)  # anc[j, a]: a is j or an ancestor of j
    for j in range(J):
        anc[j, j] = True
        if parents[j] >= 0:
            depth[j] = depth[parents[j]] + 1
            anc[j] |= anc[parents[j]]
    common = anc.astype(np.int64) @ anc.T.astype(np.int64)  # shared ancestors incl. self
    return depth[:, None] + depth[None, :] - 2 * (common - 1)


def _joint_bones(skeleton: Skeleton, world_positions: np.ndarray, world_rotations: np.ndarray):
    """Each joint's bones as padded segments: starts and ends ``(..., J, K, 3)``, a mask
    ``(J, K)`` and the joint at each end ``(J, K)`` (-1: an end site or none); a joint's
    bones run from it to each child and end site (a point, the joint itself, when it has none)."""
    J = skeleton.num_joints
    ends: list[list[tuple[str, int]]] = [[] for _ in range(J)]
    for j in range(1, J):
        ends[skeleton.parents[j]].append(("j", j))
    for e, p in enumerate(skeleton.end_site_parents):
        ends[p].append(("e", e))
    K = max(1, max(len(x) for x in ends))
    es = world_positions[..., skeleton.end_site_parents, :] + quat.rotate(
        world_rotations[..., skeleton.end_site_parents, :], skeleton.end_site_offsets)
    b = np.repeat(world_positions[..., :, None, :], K, axis=-2).copy()  # default: the joint itself
    mask = np.zeros((J, K), dtype=bool)
    mask[:, 0] = True
    end = np.full((J, K), -1, dtype=np.int64)
    for j in range(J):
        for k, (kind, i) in enumerate(ends[j]):
            b[..., j, k, :] = world_positions[..., i, :] if kind == "j" else es[..., i, :]
            mask[j, k] = True
            if kind == "j":
                end[j, k] = i
    a = np.repeat(world_positions[..., :, None, :], K, axis=-2)
    return a, b, mask, end


def bone_distances(body: Mannequin, skeleton: Skeleton, world_positions: np.ndarray,
                   world_rotations: np.ndarray, vertices: np.ndarray | None = None) -> NDArray[np.float64]:
    """Distance ``(..., V)`` in metres of each vertex to *its bones*: the nearest bone of the
    joints it is weighted to, under joint world transforms ``(..., J, 3)``, ``(..., J, 4)``.

    A joint's bones are the segments from it to its children and end sites (the joint itself
    when it has none): the part of the skeleton that moves rigidly with the joint. Why this
    is the measure: a vertex can only follow the joints it is weighted to, so those joints'
    bones are the skeleton it is asked to stay on; a rigidly weighted vertex keeps its
    distance to them exactly (so any change is the skinning's doing), and a vertex blended
    across a joint may be measured against the bone on either side (the nearest), since it
    lies between them. Issue 16's rule was that no vertex ends farther than its bind-pose
    distance plus 5 %: :func:`_skin_weights` (the seed) keeps every vertex within
    ``1 + BLEND_SLACK`` of it in any pose, but tears at the joints; the weights spread
    around the joints (:func:`~motionmatch.anim.skin_smooth.smooth_weights`, issue 32)
    move some vertices on the outside of far bends farther (``tests/test_mannequin.py``
    bounds how many).

    ``vertices`` ``(..., V, 3)`` are the skinned vertices (by default
    ``body.skin(world_positions, world_rotations)``).
    """
    wp = np.asarray(world_positions, dtype=np.float64)
    wr = np.asarray(world_rotations, dtype=np.float64)
    v = body.skin(wp, wr) if vertices is None else np.asarray(vertices, dtype=np.float64)
    a, b, mask, _ = _joint_bones(skeleton, wp, wr)
    best = np.full(v.shape[:-1], np.inf)
    for k in range(4):
        used = body.weights[:, k] > 0
        j = body.joints[:, k].astype(np.intp)
        for s in range(mask.shape[1]):
            ok = used & mask[j, s]
            aa, bb = a[..., j, s, :], b[..., j, s, :]
            ab = bb - aa
            t = np.clip(np.sum((v - aa) * ab, axis=-1) / np.maximum(np.sum(ab * ab, axis=-1), 1e-18), 0.0, 1.0)
            d = np.linalg.norm(v - aa - t[..., None] * ab, axis=-1)
            best = np.where(ok, np.minimum(best, d), best)
    return best
