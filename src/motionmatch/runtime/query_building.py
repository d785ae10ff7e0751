"""How a controller turns its state and an intent into a search query: the layout of the
trajectory features in the query, the query of one controller (any desired trajectory)
and the planar common case, one row or many rows in one compiled call
(:func:`~motionmatch.runtime._batch_kernels.planar_query`, ``planar_queries``).

:class:`QueryBuilding` is a part of :class:`~motionmatch.runtime.controller.Controller`
(its base class), kept in a file of its own: it reads the controller's own state (its
batch row, predictor, database and shared arrays)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from motionmatch.control.intent import Intent
from motionmatch.control.trajectory import PredictedTrajectory, RootState
from motionmatch.runtime import _batch_kernels as BK
from motionmatch.runtime.batch import intent_goal_tuple, intent_goals

if TYPE_CHECKING:
    from motionmatch.runtime.controller import Controller

__all__ = ["QueryBuilding"]


class QueryBuilding:
    """The query-building part of :class:`~motionmatch.runtime.controller.Controller`
    (queries are normalised ``[D]`` float32 feature vectors; positions in metres in the
    character's frame)."""

    def _query_layout(self) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
        """Where the query's trajectory features go: ``(x column, z column, trajectory
        sample)`` of every future position, and of every future direction."""
        pos, dirs = [], []
        for term, sl, ks in self._term_layout:
            step = 3 if term.vertical else 2
            out = pos if term.kind == "trajectory_position" else dirs
            for n, k in enumerate(ks):
                out.append((sl.start + step * n, sl.start + step * n + step - 1, k))
        return pos, dirs

    def _query(self, intent: Intent, vertical: np.ndarray | None) -> tuple[np.ndarray, PredictedTrajectory]:
        """The normalised query ``[D]`` (float32) for this frame and the desired trajectory it encodes."""
        if self._desired_override is None and vertical is None and self.predictor.batched(intent):
            return self._planar_query(intent)
        if self._desired_override is not None:
            traj = self._desired_override
        else:
            sim = self.predictor.state
            state = RootState._trusted(self.root_pos.copy(), sim.velocity, sim.acceleration, self.root_yaw,
                                       float(sim.angular_velocity[1]))
            traj = self.predictor.predict(intent, state=state)
        # the trajectory in the character's frame (inverse of the rotation by root_yaw about +Y)
        c, s_ = math.cos(self.root_yaw), math.sin(self.root_yaw)
        rx, _, rz = self.root_pos.tolist()
        P, D = traj.positions.tolist(), traj.directions.tolist()
        raw = self.db.raw_features[self.frame].tolist()
        for cx, cz, k in self._query_pos:
            x, z = P[k][0] - rx, P[k][2] - rz
            raw[cx], raw[cz] = c * x - s_ * z, s_ * x + c * z
        for cx, cz, k in self._query_dir:
            x, z = D[k][0], D[k][2]
            raw[cx], raw[cz] = c * x - s_ * z, s_ * x + c * z
        raw = np.array(raw)
        if vertical is not None and self.vcols.size:
            raw[self.vcols] = vertical
        q = self.db.normalize(raw)
        if vertical is None and self.vcols.size:
            q[self.vcols] = 0.0
        if self._batch.ground is not None:  # (the terrain's rise along the way: runtime/ground.py)
            self._batch.ground.fill_query_heights(self.db, q[None], traj.positions[None], self.root_pos[None])
        return q, traj

    def _planar_query(self, intent: Intent) -> tuple[np.ndarray, PredictedTrajectory]:
        """:meth:`_query` of the common case (the spring prediction toward a plain intent,
        the planar view) in one compiled call on the batch row (:func:`~motionmatch.runtime.
        _batch_kernels.planar_query`: the same operations in the same order)."""
        qa = self._planar_query_arrays()
        st, r = self._batch.state, self._row
        times = self.predictor.times
        T = len(times)
        pos, vel, dirs, rot = np.empty((T, 3)), np.empty((T, 3)), np.empty((T, 3)), np.empty((T, 4))
        goal = np.array(intent_goal_tuple(intent))
        q = np.empty(self.db.features.shape[1], dtype=np.float32)
        BK.planar_query(r, st.root_pos, st.root_yaw, st.sim_vel, st.sim_acc, st.sim_rate, st.velocity_halflife,
                        st.facing_halflife, goal, times, self.db.raw_features[int(st.frame[r])], *qa, q, pos, vel,
                        dirs, rot)
        if self._batch.ground is not None:
            self._batch.ground.fill_query_heights(self.db, q[None], pos[None], st.root_pos[r][None])
        return q, PredictedTrajectory(times.copy(), pos, vel, dirs, rot)

    def _planar_query_arrays(self) -> tuple:
        """The database's arrays of :func:`~motionmatch.runtime._batch_kernels.planar_query`
        (made on first use, shared by the database's controllers)."""
        sh = self._shared
        qa = sh.get("query_arrays")
        if qa is None:
            db = self.db
            qa = sh["query_arrays"] = (
                np.asarray(self._query_pos, dtype=np.int64).reshape(-1, 3),
                np.asarray(self._query_dir, dtype=np.int64).reshape(-1, 3),
                np.ascontiguousarray(db.mean, dtype=np.float64), np.ascontiguousarray(db.scale, dtype=np.float64),
                np.ascontiguousarray(db.weights, dtype=np.float64), np.ascontiguousarray(self.vcols, dtype=np.int64))
        return qa

    @staticmethod
    def _planned_queries(ctrls: list[Controller], intents: list[Intent], masks: list[np.ndarray]) -> list[np.ndarray]:
        """The queries of searches planned by :meth:`_search` (controllers of one batch and
        database, each its intent and its search's mask), all in one compiled call
        (:func:`~motionmatch.runtime._batch_kernels.planar_queries`: :meth:`_planar_query`'s
        numbers): sets each controller's ``last_desired`` and ``last_query`` as
        :meth:`_search` does; returns the queries ``[D]`` (float32)."""
        c0 = ctrls[0]
        c0._planar_query_arrays()  # (made once per database, shared)
        sh, st, times = c0._shared, c0._batch.state, c0.predictor.times
        if any(c._shared is not sh or c._batch is not c0._batch or (c.predictor.times is not times
               and not np.array_equal(c.predictor.times, times)) for c in ctrls):
            out = []
            for c, it, m in zip(ctrls, intents, masks):
                q, c.last_desired = c._planar_query(it)
                c.last_query = (q, m, "planar")
                out.append(q)
            return out
        n, T, D = len(ctrls), len(times), c0.db.features.shape[1]
        rows = np.fromiter((c._row for c in ctrls), dtype=np.int64, count=n)
        Q = np.empty((n, D), dtype=np.float32)
        pos, vel, dirs, rot = np.empty((n, T, 3)), np.empty((n, T, 3)), np.empty((n, T, 3)), np.empty((n, T, 4))
        BK.planar_queries(rows, intent_goals(intents), st.root_pos, st.root_yaw, st.sim_vel, st.sim_acc, st.sim_rate,
                          st.velocity_halflife, st.facing_halflife, st.frame, times, c0.db.raw_features,
                          *sh["query_arrays"], Q, pos, vel, dirs, rot)
        if c0._batch.ground is not None:
            c0._batch.ground.fill_query_heights(c0.db, Q, pos, st.root_pos[rows])
        out = list(Q)
        for i, (c, m, q) in enumerate(zip(ctrls, masks, out)):
            c.last_desired = PredictedTrajectory(times.copy(), pos[i], vel[i], dirs[i], rot[i])
            c.last_query = (q, m, "planar")
        return out
