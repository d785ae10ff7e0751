"""The mannequin: a closed, skinned body for every skeleton in the data, that stays on its bones."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from motionmatch.anim import kinematics, load_bvh, quat
from motionmatch.anim.mannequin import _cached, body_joints, mannequin, mannequin_for
from motionmatch.datasets import SKELETON_SAMPLES as TAKES

pytestmark = pytest.mark.data


def winding_numbers(points: np.ndarray, vertices: np.ndarray, triangles: np.ndarray, chunk: int = 4) -> np.ndarray:
    """Generalised winding number of each point ``(P, 3)`` w.r.t. a triangle mesh (1 inside, 0
    outside); float32 per triangle, a few points at a time (within 1e-6 of float64 here)."""
    corners = [np.ascontiguousarray(vertices[triangles[:, k]], dtype=np.float32) for k in range(3)]
    out = np.empty(len(points))
    for s in range(0, len(points), chunk):
        p = np.asarray(points[s:s + chunk], dtype=np.float32)[:, None]
        a, b, c = (x[None] - p for x in corners)
        la, lb, lc = (np.sqrt(np.einsum("pfi,pfi->pf", x, x)) for x in (a, b, c))
        det = np.einsum("pfi,pfi->pf", a, np.cross(b, c))
        den = (la * lb * lc + np.einsum("pfi,pfi->pf", a, b) * lc + np.einsum("pfi,pfi->pf", b, c) * la
               + np.einsum("pfi,pfi->pf", c, a) * lb)
        out[s:s + chunk] = np.arctan2(det, den).sum(axis=1, dtype=np.float64) / (2 * np.pi)
    return out


def segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance of points ``(..., V, 3)`` to segments ``(..., V, 3)``-``(..., V, 3)``."""
    ab = b - a
    ll = np.maximum(np.sum(ab * ab, axis=-1), 1e-18)
    t = np.clip(np.sum((p - a) * ab, axis=-1) / ll, 0.0, 1.0)
    return np.linalg.norm(p - a - t[..., None] * ab, axis=-1)


def bone_distances(skel, wp, wr, verts, joints, weights):
    """Distance of each vertex to the nearest bone of the joints it is weighted to: a joint's
    bones are the segments from it to its children and end sites (the joint itself when it
    has none); ``wp (F, J, 3)``, ``wr (F, J, 4)``, ``verts (F, V, 3)`` -> ``(F, V)``."""
    J = skel.num_joints
    es = wp[:, skel.end_site_parents] + quat.rotate(wr[:, skel.end_site_parents], skel.end_site_offsets)
    ends = [[] for _ in range(J)]  # per joint: ("j", child) or ("e", end site)
    for j in range(1, J):
        ends[skel.parents[j]].append(("j", j))
    for e, p in enumerate(skel.end_site_parents):
        ends[p].append(("e", e))
    best = np.full(verts.shape[:2], np.inf)
    for k in range(4):
        used = weights[:, k] > 0
        jk = joints[:, k].astype(np.intp)
        for j in np.unique(jk[used]):
            sel = used & (jk == j)
            targets = ends[j] or [("j", j)]
            for kind, i in targets:
                b = wp[:, i] if kind == "j" else es[:, i]
                d = segment_distance(verts[:, sel], wp[:, j][:, None], b[:, None])
                best[:, sel] = np.minimum(best[:, sel], d)
    return best


@pytest.fixture(scope="module", params=TAKES, ids=lambda t: t.split("/")[-1][:24])
def take(request, data_dir):
    path = data_dir / request.param
    if not path.exists():
        pytest.skip(f"{path} not in the data folder")
    motion = load_bvh(path)
    return motion, mannequin_for(motion)


def test_closed_oriented_and_weighted(take):
    motion, body = take
    tri = body.triangles.astype(np.int64)
    edges = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    assert np.all(counts % 2 == 0), "boundary edges: the mesh is not closed"
    v = body.vertices.astype(np.float64)
    volume = np.einsum("ij,ij->i", v[tri[:, 0]], np.cross(v[tri[:, 1]], v[tri[:, 2]])).sum() / 6
    assert volume > 0, "triangles must be counter-clockwise seen from outside"
    assert body.vertices.dtype == np.float32 and body.triangles.dtype == np.uint32
    assert body.joints.dtype == np.uint16 and body.weights.shape == (len(v), 4)
    np.testing.assert_allclose(body.weights.sum(axis=1), 1.0, atol=1e-5)
    assert np.all(body.weights >= 0)
    assert np.all(body.joints < motion.num_joints)
    assert not np.any(np.isin(body.joints[body.weights > 0], np.flatnonzero(~body_joints(motion.skeleton))))
    np.testing.assert_allclose(np.linalg.norm(body.normals, axis=1), 1.0, atol=1e-4)
    # vertex normals agree with the faces around them (outwards, since the volume is positive)
    faces = np.cross(v[tri[:, 1]] - v[tri[:, 0]], v[tri[:, 2]] - v[tri[:, 0]])
    around = np.zeros_like(v)
    for k in range(3):
        np.add.at(around, tri[:, k], faces)
    assert np.mean(np.einsum("ij,ij->i", body.normals, around) > 0) > 0.999, "normals must point outwards"


def test_every_joint_inside_in_the_bind_pose(take):
    motion, body = take
    joints = body.bind_positions[body_joints(motion.skeleton)]
    w = winding_numbers(joints, body.vertices.astype(np.float64), body.triangles.astype(np.int64))
    outside = [motion.skeleton.names[j] for j, wn in zip(np.flatnonzero(body_joints(motion.skeleton)), w)
               if wn < 0.5]
    assert not outside, f"joints outside the mesh: {outside}"
    # and a point far away is outside
    far = body.bind_positions.max(0) + 10.0
    assert abs(winding_numbers(far[None], body.vertices.astype(np.float64), body.triangles.astype(np.int64))[0]) < 1e-6


def edge_stretch(body, posed) -> np.ndarray:
    """``(T,)`` each triangle's longest edge over the poses ``posed (F, V, 3)``, in its bind-pose
    length (edges shorter than the median edge counted at the median: surface nets leaves some
    edges of a fraction of a millimetre)."""
    tri = body.triangles.astype(np.int64)

    def edges(v):
        return np.stack([np.linalg.norm(v[..., tri[:, (i + 1) % 3], :] - v[..., tri[:, i], :], axis=-1)
                         for i in range(3)], -1)

    bind = edges(body.vertices.astype(np.float64))
    return (edges(posed) / np.maximum(bind, np.median(bind))).max(axis=-1).max(axis=0)


def test_vertices_stay_on_their_bones_under_the_motion(take):
    motion, body = take
    skel = motion.skeleton
    frames = np.linspace(0, motion.num_frames - 1, 24).astype(int)
    wp, wr = motion.world_positions[frames], motion.world_rotations[frames]
    posed = body.skin(wp, wr)
    rest = bone_distances(skel, body.bind_positions[None], body.bind_rotations[None],
                          body.vertices.astype(np.float64)[None], body.joints, body.weights)[0]
    moved = bone_distances(skel, wp, wr, posed, body.joints, body.weights)
    # vertices stay near their bones: linear blending across a joint moves a vertex on the
    # outside of a bend a little off them (an elbow bent far, the crab's thin legs), the
    # rest stay within a quarter of their bind-pose distance
    ratio = moved.max(axis=0) / np.maximum(rest, 1e-9)
    assert np.mean(ratio > 1.25) <= 0.05 and np.mean(ratio > 1.5) <= 0.02, (
        f"{np.sum(ratio > 1.25)} of {len(ratio)} vertices leave their bones by > 25 %, {np.sum(ratio > 1.5)} by > 50 %")
    # no piece of surface is stretched between limbs (limbs fused in the bind pose pull their
    # shared triangles metres long as they move apart: LAFAN1's rest pose folds legs onto the spine)
    tri = body.triangles.astype(np.int64)
    def longest_edge(v):
        return max(float(np.linalg.norm(v[..., tri[:, i], :] - v[..., tri[:, (i + 1) % 3], :], axis=-1).max())
                   for i in range(3))
    assert longest_edge(posed) < 8 * longest_edge(body.vertices.astype(np.float64))
    # the measure can fail: weights on the wrong joints (each vertex's shifted by one) drag vertices away
    shifted = np.where(body.weights > 0, (body.joints.astype(np.int64) + 1) % skel.num_joints, 0)
    wrong = dataclasses.replace(body, joints=shifted.astype(np.uint16)).skin(wp, wr)
    assert np.mean(bone_distances(skel, wp, wr, wrong, body.joints, body.weights).max(axis=0) > 1.25 * rest) > 0.15


def test_no_seams_open_at_the_joints_under_the_motion(take):
    """Issue 32: the skin bends at the hips and shoulders without tearing. Near-rigid
    weights (each vertex on one joint but for a thin band) stretched the triangles between
    a thigh and the pelvis up to 9-12 times the median edge (a torn seam) and the worst
    1 % of triangles 3-7 times in every take; the weights spread around the joints keep the
    worst 1 % under 3.5 times."""
    motion, body = take
    frames = np.linspace(0, motion.num_frames - 1, 24).astype(int)
    stretch = edge_stretch(body, body.skin(motion.world_positions[frames], motion.world_rotations[frames]))
    assert np.percentile(stretch, 99) < 3.5, f"1 % of the triangles stretched over {np.percentile(stretch, 99):.2f}x"
    # the measure can fail: the same body with every vertex on its largest weight's joint alone (rigid) tears
    top = np.argmax(body.weights, axis=1)
    joints = np.zeros_like(body.joints)
    weights = np.zeros_like(body.weights)
    joints[:, 0], weights[:, 0] = body.joints[np.arange(len(top)), top], 1.0
    rigid = dataclasses.replace(body, joints=joints, weights=weights)
    torn = edge_stretch(rigid, rigid.skin(motion.world_positions[frames], motion.world_rotations[frames]))
    assert np.percentile(torn, 99) > np.percentile(stretch, 99)


def test_vertices_stay_on_their_bones_in_any_pose(take):
    """The weights hold in every pose, not only the motion's: random joint rotations (with the
    bind pose's offsets) keep 95 % of the vertices within half their rest distance again; a
    wide blend (every vertex 30 % on its joint's parent) does not."""
    motion, body = take
    skel = motion.skeleton
    rng = np.random.default_rng(7)
    J = skel.num_joints
    local = body.bind_rotations.copy()
    local[1:] = quat.mul(quat.conjugate(body.bind_rotations[skel.parents[1:]]), body.bind_rotations[1:])
    trans = np.zeros((J, 3))
    trans[0] = body.bind_positions[0]
    trans[1:] = quat.rotate(quat.conjugate(body.bind_rotations[skel.parents[1:]]),
                            body.bind_positions[1:] - body.bind_positions[skel.parents[1:]])
    axis = rng.normal(size=(6, J, 3))
    angle = rng.uniform(-2.0, 2.0, size=(6, J, 1))  # up to 115 degrees at every joint
    turn = np.concatenate([np.cos(angle / 2), np.sin(angle / 2) * axis / np.linalg.norm(axis, axis=-1, keepdims=True)], -1)
    rots = quat.mul(local[None], turn)
    wp, wr = kinematics.forward_kinematics(skel.parents, rots, np.broadcast_to(trans, (6, J, 3)))
    rest = bone_distances(skel, body.bind_positions[None], body.bind_rotations[None],
                          body.vertices.astype(np.float64)[None], body.joints, body.weights)[0]
    moved = bone_distances(skel, wp, wr, body.skin(wp, wr), body.joints, body.weights)
    ratio = moved.max(axis=0) / np.maximum(rest, 1e-9)
    # blends across the joints (issue 32: no seams) move vertices on the outside of a bend off
    # their bones; far bends at every joint at once keep 95 % of them within half their distance
    assert np.mean(ratio > 1.5) <= 0.05, f"{np.sum(ratio > 1.5)} of {len(ratio)} vertices leave their bones by > 50 %"
    # the measure can fail: every vertex 30 % on its joint's parent (a blend over whole bones)
    own = body.joints[:, 0].astype(np.int64)
    par = skel.parents[own]
    ok = (par >= 0) & body_joints(skel)[np.maximum(par, 0)]
    joints = np.zeros_like(body.joints)
    weights = np.zeros_like(body.weights)
    joints[:, 0], weights[:, 0] = own, 1.0
    joints[ok, 1], weights[ok, 0], weights[ok, 1] = par[ok], 0.7, 0.3
    wide = dataclasses.replace(body, joints=joints, weights=weights)
    rest = bone_distances(skel, body.bind_positions[None], body.bind_rotations[None],
                          body.vertices.astype(np.float64)[None], joints, weights)[0]
    moved = bone_distances(skel, wp, wr, wide.skin(wp, wr), joints, weights)
    assert np.mean(moved.max(axis=0) > 1.5 * rest) > 0.12


def test_skinning_the_bind_pose_gives_the_mesh_and_a_rigid_motion_moves_it_rigidly(take):
    _, body = take
    np.testing.assert_allclose(body.skin(body.bind_positions, body.bind_rotations), body.vertices, atol=1e-5)
    q = quat.from_angle_y(np.array(0.7))
    shift = np.array([1.0, 0.2, -3.0])
    moved = body.skin(quat.rotate(q, body.bind_positions) + shift, quat.mul(q, body.bind_rotations))
    np.testing.assert_allclose(moved, quat.rotate(q, body.vertices.astype(np.float64)) + shift, atol=1e-4)
    ibm = body.inverse_bind_matrices()
    p = np.c_[body.bind_positions, np.ones(len(body.bind_positions))]
    np.testing.assert_allclose(np.einsum("jab,jb->ja", ibm, p)[:, :3], 0.0, atol=1e-4)


def test_deterministic_and_cached(data_dir):
    path = data_dir / "genmm-examples/Joe_Salsa-Dancing-6.bvh"
    if not path.exists():
        pytest.skip(f"{path} not in the data folder")
    skel = load_bvh(path).skeleton
    a = mannequin(skel)
    assert mannequin(skel) is a
    assert mannequin(skel.with_offsets(skel.offsets.copy())) is a  # cached by value, not identity
    _cached.cache_clear()
    rebuilt = mannequin(skel)
    assert rebuilt is not a  # built again: the same body
    np.testing.assert_array_equal(a.triangles, rebuilt.triangles)
    np.testing.assert_array_equal(a.vertices, rebuilt.vertices)
    np.testing.assert_array_equal(a.weights, rebuilt.weights)


def test_the_a_pose_bind_rolls_each_bone_as_the_motion_does(data_dir):
    """Issue 32: the A pose a body is built in (LAFAN1's walk: its frames fuse limbs) turns
    each bone from the rest pose by the least turn, which left LAFAN1's thighs 160-165 and
    clavicles about 178 degrees from every frame of the walk, rolled about themselves: the
    mesh blended between the pelvis and a thigh collapsed and tore. The bind pose now rolls
    them as the motion does (within 35 degrees at the median frame), its joints where the A
    pose has them."""
    from motionmatch.anim.mannequin import bind_pose
    from motionmatch.anim.standing import standing_pose
    from rigs import lafan_clip

    clip = lafan_clip(data_dir, 300)
    rot, tr = bind_pose(clip)
    a_rot, a_tr = standing_pose(clip.skeleton, clip.translations[0])
    a_tr[0, [0, 2]] = 0.0
    pos = kinematics.forward_kinematics(clip.skeleton.parents, rot[None], tr[None])[0][0]
    a_pos = kinematics.forward_kinematics(clip.skeleton.parents, a_rot[None], a_tr[None])[0][0]
    assert np.abs(pos - a_pos).max() < 1e-9  # the A pose's joints (the walk's frames fuse limbs)
    names = clip.skeleton.names
    limbs = [names.index(n) for n in ("LeftUpLeg", "RightUpLeg", "LeftShoulder", "RightShoulder", "LeftArm",
                                      "RightArm", "LeftFoot", "RightFoot")]

    def median_angle(local):
        cos = np.abs(np.sum(clip.rotations[:, limbs] * local[None, limbs], axis=-1))
        return np.degrees(2 * np.arccos(np.clip(np.median(cos, axis=0), 0.0, 1.0)))

    assert median_angle(rot).max() < 35.0, median_angle(rot)
    assert median_angle(a_rot).max() > 150.0  # the measure can fail: the A pose as it was
