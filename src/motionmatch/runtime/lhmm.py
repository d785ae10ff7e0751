"""Long-horizon motion matching (LHMM, the paper's Algorithm 1) as a controller chooser.

Basic motion matching picks the frame nearest to the query now. LHMM(k, l) looks ``l``
matching steps ahead: the ``k`` nearest frames to the query are candidates; for each,
the character is advanced by one matching interval (``N`` database frames) along the
candidate's own clip, a new query is made there (its pose part is database frame
``c + N``, its future part comes from a :class:`Planner`, e.g. the drawn path seen from
where the character's root would then be) and searched again, recursively, down to
level ``l`` where only the nearest frame is needed. The candidate whose cheapest
continuation has the smallest total (cumulative squared distance over the levels) wins.
LHMM(1, 1) is plain motion matching.

The search tree is expanded level by level: the ``k`` candidates' queries are built
together (one batched call of the planner), searched, and their ``k`` children each
expanded the same way; each node's distance comes from the k-NN search that found it
and is never recomputed, and totals are folded back up the tree at the end. There are
``1 + k + k^2 + ... + k^(l-1)`` k-NN searches per match (13 for k = l = 3), counted in
:attr:`LongHorizonMatcher.knn_calls`.

Candidates: a candidate ``c`` is always a *valid* frame (its future of
``schema.max_offset`` seconds stays in its clip), so ``c + N`` is in the clip whenever the
interval is no longer than that horizon; otherwise ``c + N`` is clamped to the clip's last
frame (the character then stands on that frame for the rest of the interval).

Use it as ``controller.chooser = LongHorizonMatcher(k, l, planner=...)``: the controller
calls it with the query it built (current pose + desired trajectory) whenever it searches.

Every node's k nearest frames come from a :class:`NodeSearch`, told where the node's
character stands and how far ahead in time it is: :class:`PlainNodeSearch` (the default)
is the controller's exact nearest-frame search; an environment-aware one
(:class:`motionmatch.runtime.node_search.PenalizedNodeSearch`) adds each frame's obstacle
penalty seen from the node's root, so a path follower plans ahead *and* avoids obstacles.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Any, Protocol

import numpy as np

from motionmatch._jit import no_refcount
from motionmatch.anim import quat

__all__ = ["LongHorizonMatcher", "NodeSearch", "PlainNodeSearch", "Planner", "advance_roots"]


class Planner(Protocol):
    """Makes the queries of the deeper LHMM levels (``compute_query`` and
    ``update_context`` of the paper's Algorithm 1, for many states at once)."""

    def start_state(self, controller) -> Any:
        """The context of the top-level query (one state)."""
        ...

    def take(self, state: Any, rows: np.ndarray) -> Any:
        """The states of ``rows`` (indices into ``state``'s states)."""
        ...

    def queries(self, controller, frames: np.ndarray, positions: np.ndarray, yaws: np.ndarray, state: Any,
                view: str, step: float) -> tuple[np.ndarray, Any]:
        """Normalised queries ``[M, D]`` (float32) for characters playing database ``frames [M]``
        with roots at ``positions [M, 3]`` / ``yaws [M]`` (rad), ``step`` seconds after
        the states ``state`` (``M`` of them); returns the queries and the updated states."""
        ...


class NodeSearch(Protocol):
    """The k nearest frames of many LHMM nodes (the search seam of long-horizon matching)."""

    def nearest(self, controller, queries: np.ndarray, mask: np.ndarray, k: int, seeds: np.ndarray,
                positions: np.ndarray, yaws: np.ndarray, ahead: float) -> tuple[np.ndarray, np.ndarray]:
        """``(frames [M, k] int64, costs [M, k] float64)``, cheapest first, for ``queries [M, D]``
        (the controller's feature view) of characters with roots at ``positions [M, 3]``,
        ``yaws [M]`` (rad), ``ahead`` seconds after now; ``mask [N]`` the allowed frames;
        ``seeds [M]`` a frame likely near each answer (may be invalid)."""
        ...

    def cost(self, controller, query: np.ndarray, frame: int) -> float:
        """The cost :meth:`nearest` gives ``frame`` for ``query`` at the controller's root now."""
        ...


class PlainNodeSearch:
    """Exact nearest frames by feature distance (the controller's searcher of ``view``), all
    of a level's nodes in one call, each seeded with its own frame."""

    def __init__(self, view: str = "planar"):
        self.view = view

    def nearest(self, controller, queries, mask, k, seeds, positions, yaws, ahead):
        return controller.searcher().nearest_batch(queries, mask=mask, k=k, weights=controller.view_weights(self.view),
                                                   init_indices=seeds)

    def cost(self, controller, query, frame):
        return controller.view_cost(query, frame, self.view)


class _RootTrack:
    """The database's root positions ``[N, 3]``, yaws ``[N]`` and clip ends, as float64 arrays."""

    def __init__(self, db):
        self.pos = db.translations[:, 0].astype(np.float64)
        self.yaw = quat.yaw_angle(db.rotations[:, 0].astype(np.float64))
        self.last = (db.clip_stops[db.frame_clip] - 1).astype(np.int64)


_TRACKS: dict[int, tuple[Any, _RootTrack]] = {}


def _track(db) -> _RootTrack:
    hit = _TRACKS.get(id(db))
    if hit is None or hit[0] is not db:
        hit = (db, _RootTrack(db))
        _TRACKS.clear()  # one database at a time is the common case; keep memory bounded
        _TRACKS[id(db)] = hit
    return hit[1]


def advance_roots(db, frames: np.ndarray, positions: np.ndarray, yaws: np.ndarray, n: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where characters playing ``frames [M]`` with roots ``positions [M, 3]``, ``yaws [M]``
    are after ``n`` more database frames of their clips: ``(frames + n`` clamped to the
    clip's last frame, positions, yaws)``. The clip's root displacement is turned from
    the clip's heading at the start frame into the character's (one compiled call)."""
    tr = _track(db)
    M = len(frames)
    out_f = np.empty(M, dtype=np.int64)
    out_p = np.empty((M, 3))
    out_y = np.empty(M)
    _advance_rows(np.asarray(frames, dtype=np.int64), np.ascontiguousarray(positions, dtype=np.float64),
                  np.ascontiguousarray(yaws, dtype=np.float64), int(n), tr.pos, tr.yaw, tr.last, out_f, out_p, out_y)
    return out_f, out_p, out_y


@no_refcount
def _advance_rows(frames, positions, yaws, n, track_pos, track_yaw, last, out_f, out_p, out_y):
    """:func:`advance_roots` into ``out_f [M]``, ``out_p [M, 3]``, ``out_y [M]`` (rad, in [-pi, pi))."""
    for m in range(frames.shape[0]):
        f = frames[m]
        nf = min(f + n, last[f])
        dx = track_pos[nf, 0] - track_pos[f, 0]
        dz = track_pos[nf, 2] - track_pos[f, 2]
        turn = yaws[m] - track_yaw[f]
        c = math.cos(turn)
        s = math.sin(turn)
        out_p[m, 0] = positions[m, 0] + (c * dx + s * dz)
        out_p[m, 1] = positions[m, 1]
        out_p[m, 2] = positions[m, 2] + (-s * dx + c * dz)
        ny = yaws[m] + (track_yaw[nf] - track_yaw[f])
        out_y[m] = (ny + math.pi) % (2 * math.pi) - math.pi
        out_f[m] = nf


#: matches whose time and k-NN calls a :class:`LongHorizonMatcher` keeps (at six matches a
#: second, about 11 minutes); :attr:`~LongHorizonMatcher.matches` and
#: :attr:`~LongHorizonMatcher.knn_calls` count them all
MATCH_LOG_KEEP = 4096


class LongHorizonMatcher:
    """LHMM(k, l) as a :class:`~motionmatch.runtime.controller.Controller` chooser.

    Args:
        k: candidates per level (nearest neighbours).
        levels: ``l``, matching steps looked ahead (1: plain motion matching).
        interval: seconds between matches (the paper: 1/6 s); ``N = round(interval * fps)``.
        planner: builds the deeper levels' queries (required when ``levels > 1``).
        hysteresis: also evaluate continuing the clip playing now (its own tree, extra
            k-NN calls) and switch only when the best total is below the controller's
            ``transition_ratio`` times continuing's. Off (the paper): go to the best frame,
            unless it is the clip playing now a few frames ahead (the controller's rule).
        node_search: where each node's k nearest frames come from (default
            :class:`PlainNodeSearch` of the view the controller searches).

    Statistics: :attr:`matches`, :attr:`knn_calls` (totals), :attr:`seconds` (wall time of
    each of the last ``keep`` calls, seconds), :attr:`calls_per_match` (of the same calls),
    :attr:`last_choice` (chosen frame, its total). ``keep`` (default :data:`MATCH_LOG_KEEP`)
    bounds the memory of a matcher that runs for hours.
    """

    def __init__(self, k: int = 3, levels: int = 3, interval: float = 1 / 6, planner: Planner | None = None, *,
                 hysteresis: bool = False, node_search: NodeSearch | None = None, keep: int | None = None):
        if int(k) != k or k < 1 or int(levels) != levels or levels < 1:
            raise ValueError(f"LHMM needs integers k >= 1 and levels >= 1, got k={k!r}, levels={levels!r}")
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
        if levels > 1 and planner is None:
            raise ValueError("LHMM with levels > 1 needs a planner to make the future queries")
        self.k = int(k)
        self.levels = int(levels)
        self.interval = float(interval)
        self.planner = planner
        self.hysteresis = bool(hysteresis)
        self.node_search = node_search
        self._plain: dict[str, PlainNodeSearch] = {}
        self.keep = MATCH_LOG_KEEP if keep is None else int(keep)
        self.reset_stats()

    def reset_stats(self) -> None:
        self.matches = 0
        self.knn_calls = 0
        self.seconds: deque[float] = deque(maxlen=self.keep)
        self.calls_per_match: deque[int] = deque(maxlen=self.keep)
        self.last_choice: tuple[int, float] | None = None

    @property
    def expected_calls(self) -> int:
        """k-NN searches per match without hysteresis: ``1 + k + ... + k^(l-1)``."""
        return sum(self.k**i for i in range(self.levels))

    # ------------------------------------------------------------------ search
    def __call__(self, controller, query: np.ndarray, mask: np.ndarray, view: str) -> tuple[np.ndarray, np.ndarray]:
        nodes = self.node_search
        if nodes is None:
            nodes = self._plain.get(view) or self._plain.setdefault(view, PlainNodeSearch(view))
        controller.searcher()  # built on first use: not part of the match's time
        tr = _track(controller.db)  # (the same)
        t0 = time.perf_counter()
        db = controller.db
        cur = int(controller.frame)
        calls = 1
        k1 = 1 if self.levels == 1 else self.k
        if self.levels == 1 and self.node_search is None:  # plain motion matching: the searcher directly
            searcher = controller.searcher()
            idx, dist = searcher.nearest(query, mask=mask, k=1, weights=controller.view_weights(view),
                                         init_index=cur if (searcher.valid[cur] and mask[cur]) else None)
        else:
            root = np.asarray(controller.root_pos, dtype=np.float64)[None]
            root_yaw = np.array([float(controller.root_yaw)])
            idx, dist = nodes.nearest(controller, query[None], mask, k1, np.array([cur]), root, root_yaw, 0.0)
            idx, dist = idx[0], dist[0]
        if self.levels == 1:
            self._done(t0, calls, int(idx[0]), float(dist[0]))
            # with hysteresis the controller's own rule (transition_ratio) decides, on the same costs
            return idx[:1], (dist[:1] if self.hysteresis else np.zeros(1))
        n = max(1, round(self.interval * db.fps))
        cands, cost1 = idx.astype(np.int64), dist.astype(np.float64)
        cont = -1  # row of the "keep playing" candidate, if evaluated
        if self.hysteresis and cur + n <= tr.last[cur]:
            hit = np.flatnonzero(cands == cur)
            if hit.size:
                cont = int(hit[0])
            else:
                d_cur = nodes.cost(controller, query, cur)
                cands = np.append(cands, cur)
                cost1 = np.append(cost1, d_cur)
                cont = len(cands) - 1
        # level by level: the costs of each level's nodes; the kk children of node m are rows
        # m * kk .. m * kk + kk - 1 of the next level
        costs = [cost1]
        frames = cands
        M = len(frames)
        pos = np.repeat(root, M, axis=0)
        yaw = np.repeat(root_yaw, M)
        state = self.planner.take(self.planner.start_state(controller), np.zeros(M, dtype=np.int64))
        for lev in range(2, self.levels + 1):
            nf, pos, yaw = advance_roots(db, frames, pos, yaw, n)
            Q, state = self.planner.queries(controller, nf, pos, yaw, state, view, self.interval)
            kk = self.k if lev < self.levels else 1
            found, D = nodes.nearest(controller, Q, mask, kk, nf, pos, yaw, (lev - 1) * self.interval)
            calls += len(Q)
            par = np.repeat(np.arange(len(nf)), kk)
            costs.append(D.reshape(-1).astype(np.float64))
            if lev < self.levels:
                frames = found.reshape(-1)
                pos, yaw = pos[par], yaw[par]
                state = self.planner.take(state, par)
        # fold totals back up: total(node) = cost(node) + min over its children
        total = costs[-1]
        for lev in range(len(costs) - 2, -1, -1):
            total = costs[lev] + total.reshape(len(costs[lev]), -1).min(axis=1)
        best = int(np.argmin(total))
        self._done(t0, calls, int(cands[best]), float(total[best]))
        out_cost = 0.0
        if cont >= 0:
            ratio = float(getattr(controller.s, "transition_ratio", 1.0))
            if total[best] >= ratio * total[cont] or best == cont:
                # keep playing: return the playing frame itself (the controller continues)
                return np.array([cur]), np.array([float(cost1[cont])])
            out_cost = float(total[best] / max(total[cont], 1e-12) * cost1[cont])
        return np.array([int(cands[best])]), np.array([out_cost])

    def _done(self, t0: float, calls: int, frame: int, total: float) -> None:
        self.matches += 1
        self.knn_calls += calls
        self.calls_per_match.append(calls)
        self.seconds.append(time.perf_counter() - t0)
        self.last_choice = (frame, total)
