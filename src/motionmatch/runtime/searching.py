"""A controller's search and the transition it may start: the search over the database
(its own searcher, or a frame chooser such as the environment-aware one, possibly deferred
so that a world runs a step's searches together), the comparison with the cost of
continuing the clip, and the inertialized transition to the frame chosen (quintic ones of
many controllers in one compiled call, :func:`~motionmatch.runtime._batch_kernels.
quintic_transitions`).

:class:`Searching` is a part of :class:`~motionmatch.runtime.controller.Controller` (its
base class), kept in a file of its own: it reads and writes the controller's own state."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from motionmatch.control.intent import Intent
from motionmatch.runtime import _batch_kernels as BK
from motionmatch.runtime.frame_result import GroupCosts

if TYPE_CHECKING:
    from motionmatch.runtime.controller import Controller

__all__ = ["Searching"]


class Searching:
    """The search-and-transition part of :class:`~motionmatch.runtime.controller.Controller`."""

    def _search(self, intent: Intent, tags: str, vertical: np.ndarray | None, force: bool,
                only_near_obstacles: bool = False, defer: list | None = None) -> bool | None:
        """Search and transition if clearly better (or ``force``); with
        ``only_near_obstacles``, only if the chooser found an obstacle near (its ``near``).
        Returns whether it transitioned.

        ``defer``: a list to which a chooser that can split its choice (``begin``/``end``, an
        :class:`~motionmatch.runtime.chooser.EnvironmentChooser`) appends ``(self, job,
        rest)`` instead of choosing now; this returns ``None`` and :meth:`_search_end` finishes
        the search once the job has run (a world runs its agents' jobs on another thread).
        When ``defer`` has a ``plan`` method (a world's) and the query is the planar common
        case, even the query and the job are left to it (``plan(self, intent, mask, rest
        after the query)``: a world makes them for all of a step's planned searches at once,
        :meth:`_planned_queries`)."""
        view = "planar" if vertical is None else "full"
        ch = self.chooser
        plan = getattr(defer, "plan", None) if ch is not None else None
        planned = plan is not None and self._desired_override is None and vertical is None \
            and self.predictor.batched(intent) and hasattr(ch, "begin")
        if not planned:
            q, traj = self._query(intent, vertical)
            self.last_desired = traj
        mask = self.mask(tags)
        cur = self.frame
        # Continuing is possible to the clip's real end (also through its last second, whose
        # frames a search may not return), if the clip matches the tags.
        cur_ok = bool(self._clip_allowed(tags)[self.db.frame_clip[cur]]) and self.frame_pos + 1 < self._clip_last(cur)
        self.search_forced = bool(force)
        self.searches += 1
        self._since_search = 0.0
        if planned:
            # the query (the planar common case), the obstacles and the kernel's arguments
            # are made later, for all of the step's planned searches at once (defer.plan:
            # a world's DeferredSearches; see _planned_queries)
            plan(self, intent, mask, (cur, cur_ok, view, force, only_near_obstacles))
            return None
        self.last_query = (q, mask, view)
        rest = (q, cur, cur_ok, view, force, only_near_obstacles)
        if ch is None:
            idx, cost = self.searcher().nearest(q, mask=mask, k=1, init_index=cur if mask[cur] else None,
                                                weights=self._view_weights[view])
        elif defer is not None and hasattr(ch, "begin"):
            defer.append((self, ch.begin(self, q, mask, view), rest))
            return None
        else:
            idx, cost = ch(self, q, mask, view)
        return self._searched(idx, cost, *rest)

    def _search_end(self, job, rest: tuple, later: list | None = None) -> bool:
        """Finish a search deferred by :meth:`_search` (``job``, ``rest``: its entry) once the
        job has run; returns whether it transitioned (``later``: see :meth:`_searched`)."""
        idx, cost = self.chooser.end(job)
        return self._searched(idx, cost, *rest, later=later)

    def _searched(self, idx: np.ndarray, cost: np.ndarray, q: np.ndarray, cur: int, cur_ok: bool, view: str,
                  force: bool, only_near_obstacles: bool, later: list | None = None) -> bool:
        """The end of :meth:`_search` once the chooser answered (``idx``, ``cost``: its
        nearest frame and cost): transition if clearly better; returns whether it did.
        ``later``: a list that takes ``(self, frame)`` for a quintic transition, to be made
        with others by :meth:`_transition_rows` (before anything reads this controller's
        pose or clip time)."""
        best, best_cost = int(idx[0]), float(cost[0])
        if best < 0:  # no frame admitted (an empty mask): keep playing
            self.last_costs = {}
            return False
        self.last_costs = GroupCosts(self.db, q, best)
        if only_near_obstacles and not getattr(self.chooser, "near", False):
            return False
        if cur_ok and not force:
            cur_cost = self.view_cost(q, cur, view)
            # a match just ahead in the same clip continues it; in locomotion, one of the plain
            # search just behind would replay what was shown a moment ago (a loop of a fraction
            # of a second when the clip's next frames match a little worse: Unreal's pose
            # reselect history). A frame chooser's may: stepping back is how it waits in front
            # of an obstacle or keeps to a path's timing (benchmarks/bench_reselect.py)
            back = self._reselect_frames if self.chooser is None and self.mode == "locomotion" else 0
            near_in_clip = self.db.frame_clip[best] == self.db.frame_clip[cur] \
                and -back <= best - cur <= self.s.same_clip_window
            if near_in_clip or best_cost >= self.s.transition_ratio * cur_cost:
                return False
        if later is not None and self.inert.method == "quintic":
            later.append((self, best))
        else:
            self._transition_to(best)
        return True

    @staticmethod
    def _transition_rows(moves: list[tuple[Controller, int]]) -> None:
        """:meth:`_transition_to` for many controllers (``(controller, frame)`` each, quintic
        inertialization), those of one batch and database in one compiled call
        (:func:`~motionmatch.runtime._batch_kernels.quintic_transitions`: the same numbers)."""
        c0 = moves[0][0]
        b, db = c0._batch, c0.db
        if any(c._batch is not b or c.db is not db for c, _ in moves):
            for c, frame in moves:
                c._transition_to(frame)
            return
        n = len(moves)
        rows = np.fromiter((c._row for c, _ in moves), dtype=np.int64, count=n)
        frames = np.fromiter((f for _, f in moves), dtype=np.int64, count=n)
        blend = np.fromiter((c.inert.blend_time for c, _ in moves), dtype=np.float64, count=n)
        clip_last = (db.clip_stops[db.frame_clip[frames]] - 1).astype(np.int64)
        st, ir = b.state, b.inert
        BK.quintic_transitions(rows, frames, clip_last, blend, db.rotations, db.translations, float(db.fps),
                               c0._db_root_pos, c0._db_root_yaw, st.shown_rot, st.shown_pos, st.shown_slot,
                               st.last_dt, st.frame, st.frame_pos, st.play_rate, st.db_root_pos, st.db_root_yaw,
                               ir.rot_offset, ir.rot_axis, ir.rot_coeffs, ir.pos_offset, ir.pos_dir, ir.pos_coeffs,
                               ir.started, ir.elapsed)
        for c, _ in moves:
            c.transitions += 1

    def _transition_to(self, frame: int) -> None:
        """Play database ``frame`` next, blending from the pose shown by inertialization."""
        self.transitions += 1
        db = self.db
        nxt = min(frame + 1, self._clip_last(frame))
        (src_rot, src_pos), (prev_rot, prev_pos) = self._shown, self._prev_shown
        self.inert.transition_to_frame(db.rotations, db.translations, frame, nxt, db.fps, src_rot, src_pos, prev_rot,
                                       prev_pos, self._last_dt)
        self.frame = frame
        self.frame_pos = float(frame)
        self.play_rate = 1.0
        self._db_root = self._db_root_at(self.frame_pos)
