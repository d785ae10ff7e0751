"""Skin weights spread over the mesh around the joints, so that a skinned body bends
without seams.

Near-rigid weights (each vertex on one joint, blended with a neighbour only in a thin band
at the joint) tear a mesh wherever two parts turn against each other: the surface between a
thigh and the pelvis, or between an upper arm and the chest, is stretched across one row of
triangles (LAFAN1's mannequin walking: the worst 1 % of the triangles 3.6-6.7 times their
bind-pose edges, up to 9-10). :func:`smooth_weights` spreads each joint's weight to the
vertices around it along the mesh (a diffusion over the mesh's edges, each joint's as far as
:data:`BLEND_DEPTHS` times its body's thickness), so the turn is shared out over a band about
a limb's radius wide, as an artist's or Blender's automatic weights do:

* a vertex takes weight only from joints within :data:`HOPS` bones of its own joint along
  its chain (its parent and grandparent, its children and grandchildren: an upper arm
  blends with the clavicle and the chest), never from a joint of another limb (the two
  thighs, a hand resting on a hip);
* where two parts that must not blend meet in the mesh (the inner thighs at the crotch),
  the vertices of that boundary are given to the joint the two limbs hang from (the
  pelvis), which then spreads over both: the crotch follows the pelvis, not either leg;
* each vertex keeps its own joint's weight the largest (a small part, a head on a thick
  neck, is not taken over by its neighbour: the body's parts stay what they were);
* a joint whose offset from its parent changes (a *sliding* joint) is not blended with its
  parent; joints without a body (a ground root) take no weight;
* at most four joints per vertex (glTF's and three.js' limit), weights under
  :data:`MIN_WEIGHT` dropped, each row summing to 1.

Blending needs the bind pose's bones rolled as the motion rolls them
(:func:`~motionmatch.anim.standing.rolled_like`): across a roll of half a turn the blended
vertices collapse. Linear blending pulls a blended vertex toward the joint on the inside of
a bend and, on the outside (the buttock when the thigh is raised), a little away from the
bones: the worst 1 % of the vertices of the data's takes end 5-55 % farther from their
bones than in the bind pose (``benchmarks/bench_mannequin.py``; ``tests/test_mannequin.py``
bounds it), where the near-rigid weights kept every vertex within 4 % and tore.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

__all__ = ["BLEND_DEPTHS", "HOPS", "ITERATIONS", "MIN_WEIGHT", "smooth_weights"]

#: Bones along a chain between two joints that may share a vertex.
HOPS = 2
#: Diffusion steps (each moves half a vertex's weight to the mean of its neighbours): the
#: blend reaches about ``sqrt(ITERATIONS / 2)`` cells each side of a boundary.
ITERATIONS = 32
#: How far a blend reaches from a boundary, in the body's thickness there (its distance from
#: the bone): a thigh's blend is wider than a finger's.
BLEND_DEPTHS = 1.2
#: Weights under this are dropped (the rest renormalised).
MIN_WEIGHT = 0.01


def _chain_pairs(parents: np.ndarray, body: NDArray[np.bool_], sliding: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``(J, J)`` which joints may share a vertex: a joint and its ancestors up to
    :data:`HOPS` bones away (both with a body), not across a sliding joint's bone."""
    J = len(parents)
    ok = np.eye(J, dtype=bool) & body[:, None]
    for a in range(J):
        p = a
        for _ in range(HOPS):
            if sliding[p] or parents[p] < 0:
                break
            p = int(parents[p])
            if not body[p]:
                break
            if body[a]:
                ok[a, p] = ok[p, a] = True
    return ok


def _common_ancestor(parents: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[n]`` the lowest common ancestor of joints ``a[k]`` and ``b[k]`` (-1 if none)."""
    J = len(parents)
    depth = np.zeros(J, dtype=np.int64)
    above = np.eye(J, dtype=bool)  # above[j, i]: i is j or one of its ancestors
    for j in range(J):  # parents come before their children
        if parents[j] >= 0:
            depth[j] = depth[parents[j]] + 1
            above[j] |= above[parents[j]]
    both = above[a] & above[b]
    best = np.argmax(np.where(both, depth[None], -1), axis=1)
    return np.where(both.any(axis=1), best, -1)


def smooth_weights(vertices: np.ndarray, triangles: np.ndarray, joints: np.ndarray, weights: np.ndarray,
                   depth: np.ndarray, parents: np.ndarray, body: NDArray[np.bool_],
                   sliding: NDArray[np.bool_]) -> tuple[np.ndarray, np.ndarray]:
    """Weights ``(V, 4)`` (joint indices and weights) spread over the mesh (see the module).

    Args:
        vertices: ``(V, 3)`` the mesh in its bind pose (m).
        triangles: ``(T, 3)`` the mesh's vertex indices.
        joints, weights: ``(V, K)`` the starting weights (each vertex's own joint first:
            its largest weight).
        depth: ``(V,)`` each vertex's distance to its bone (m): a joint's weight reaches
            :data:`BLEND_DEPTHS` times its body's thickness (the median over its vertices).
        parents: ``(J,)`` the skeleton's parents (-1: a root); parents before children.
        body: ``(J,)`` joints that may carry vertices.
        sliding: ``(J,)`` joints whose offset from their parent changes in the motion.
    """
    V, J = len(joints), len(parents)
    parents = np.asarray(parents, dtype=np.int64)
    tri = np.asarray(triangles, dtype=np.int64)
    w = np.zeros((V, J))
    for k in range(joints.shape[1]):
        np.add.at(w, (np.arange(V), joints[:, k].astype(np.int64)), weights[:, k])
    own = joints[:, 0].astype(np.int64)
    ok = _chain_pairs(parents, body, sliding)
    i = np.concatenate([tri[:, 0], tri[:, 1], tri[:, 2]])
    j = np.concatenate([tri[:, 1], tri[:, 2], tri[:, 0]])
    # the boundary between parts that must not blend: its vertices to the joint both hang from
    apart = ~ok[own[i], own[j]]
    if np.any(apart):
        lca = _common_ancestor(parents, own[i[apart]], own[j[apart]])
        good = lca >= 0
        good[good] = body[lca[good]] & ok[lca[good], own[i[apart]][good]] & ok[lca[good], own[j[apart]][good]]
        for side in (i[apart][good], j[apart][good]):
            w[side] = 0.0
            w[side, lca[good]] = 1.0
    adj = sp.coo_matrix((np.ones(len(i)), (i, j)), shape=(V, V)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.float64)
    mean = sp.diags(1.0 / np.maximum(np.asarray(adj.sum(axis=1)).ravel(), 1.0)) @ adj
    v = np.asarray(vertices, dtype=np.float64)
    edge = float(np.median(np.linalg.norm(v[i] - v[j], axis=1)))
    # a diffusion of N steps at rate a reaches about sqrt(N a) edges: each joint's weight spreads
    # at the rate of its own reach (its body's thickness)
    thick = np.zeros(J)
    for jj in np.unique(own):
        thick[jj] = np.median(np.asarray(depth, dtype=np.float64)[own == jj])
    reach = BLEND_DEPTHS * thick
    rate = np.clip((reach / max(edge, 1e-12)) ** 2 / ITERATIONS, 0.0, 0.5)[None, :]
    for _ in range(ITERATIONS):
        w += rate * (mean @ w - w)
    # each vertex stays its own joint's (the most weight): a small part (a head on a thick
    # neck) is not taken over by its neighbour
    mine = w[np.arange(V), own]
    others = np.where(ok[own] & (np.arange(J)[None] != own[:, None]), w, 0.0).max(axis=1)
    w[np.arange(V), own] = np.maximum(mine, 1.001 * others)
    w *= ok[own]
    K = min(4, J)
    top = np.argsort(-w, axis=1, kind="stable")[:, :K]
    tw = np.take_along_axis(w, top, axis=1)
    tw[tw < MIN_WEIGHT] = 0.0
    total = tw.sum(axis=1, keepdims=True)
    lost = total[:, 0] <= 0.0  # cannot happen (its own joint keeps weight), kept rigid if it does
    tw[lost] = 0.0
    tw[lost, 0] = 1.0
    top[lost, 0] = own[lost]
    tw /= np.maximum(tw.sum(axis=1, keepdims=True), 1e-12)
    out_j = np.zeros((V, 4), dtype=np.int64)
    out_w = np.zeros((V, 4))
    out_j[:, :K], out_w[:, :K] = np.where(tw > 0, top, 0), tw
    return out_j, out_w
