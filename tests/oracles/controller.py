"""The controller's per-frame stages in plain numpy: the reference the compiled path is checked against.

:class:`ReferenceController` is a :class:`~motionmatch.runtime.controller.Controller`
whose per-frame numeric stages are the straightforward array formulations the
controller had before they were fused into kernels: root motion and the root adjustment
on ``[3]`` arrays, the simulated root advanced and predicted with the array springs
(:func:`oracles.trajectory.advance_reference`, :func:`oracles.trajectory.predict_reference`),
the query built from :meth:`~motionmatch.control.trajectory.PredictedTrajectory.local`,
inertialization with :func:`oracles.inertialize.update_reference` and ``quat`` products,
and foot locking leg by leg in Python around the small IK kernels. The inertialization
transitions are the array version too, and the sharp-change test is
:meth:`~motionmatch.control.intent.Intent.changed_sharply` itself. The other decisions
(modes, search policy, transitions) are the controller's own, so both play the same poses
up to rounding; ``tests/test_controller_fast.py`` checks it and
``benchmarks/bench_controller.py`` measures the speed-up against it.
"""

from __future__ import annotations

import numpy as np

from motionmatch.anim import quat
from motionmatch.control.intent import Intent
from motionmatch.control.trajectory import PredictedTrajectory, RootState
from motionmatch.runtime import _kernels
from motionmatch.runtime.controller import Controller
from oracles.inertialize import update_reference
from oracles.trajectory import advance_reference, predict_reference

__all__ = ["ReferenceController"]


class ReferenceController(Controller):
    """:class:`Controller` with its per-frame stages in plain numpy (slow; for tests and benchmarks)."""

    def _db_root_at(self, fpos: float) -> tuple[np.ndarray, float]:
        i = int(fpos)
        j = min(i + 1, self._clip_last(i))
        a = fpos - i
        p = (1 - a) * self._db_root_pos[i] + a * self._db_root_pos[j]
        y0, y1 = self._db_root_yaw[i], self._db_root_yaw[j]
        dy = (y1 - y0 + np.pi) % (2 * np.pi) - np.pi
        return p, float(y0 + a * dy)

    def _playback(self, dt: float) -> tuple[bool, float, float]:
        db = self.db
        self.frame_pos += dt * db.fps * self.play_rate
        if self.play_rate >= 0:
            last = self._clip_last(self.frame)
            at_end = self.frame_pos >= last
        else:
            last = int(db.clip_starts[db.frame_clip[self.frame]])
            at_end = self.frame_pos <= last
        if at_end:
            self.frame_pos = float(last)
        self.frame = int(self.frame_pos)
        new_pos, new_yaw = self._db_root_at(self.frame_pos)
        old_pos, old_yaw = self._db_root
        d = np.asarray(new_pos) - np.asarray(old_pos)
        turn = self.root_yaw - old_yaw  # rotates the clip's world into the character's
        c, s_ = np.cos(turn), np.sin(turn)
        self.root_pos = self.root_pos + np.array([c * d[0] + s_ * d[2], d[1], -s_ * d[0] + c * d[2]])
        self.root_yaw = float((self.root_yaw + (new_yaw - old_yaw) + np.pi) % (2 * np.pi) - np.pi)
        self._db_root = (new_pos, new_yaw)
        if dt > 0:
            return at_end, float(np.hypot(d[0], d[2]) / dt), abs(new_yaw - old_yaw) / dt
        return at_end, 0.0, 0.0

    def _adjust_root(self, dt: float, speed: float, turn_rate: float) -> None:
        sim = self.predictor.state
        k = 1.0 - 0.5 ** (dt / self.s.adjust_halflife)
        delta = sim.position - self.root_pos
        delta[1] = 0.0
        step = delta * k
        limit = (self.s.adjust_max_ratio * speed + self.s.adjust_min_speed) * dt
        n = float(np.hypot(step[0], step[2]))
        if n > limit:
            step *= limit / n
        self.root_pos = self.root_pos + step
        dyaw = (sim.yaw - self.root_yaw + np.pi) % (2 * np.pi) - np.pi
        ystep = dyaw * k
        ylimit = (self.s.adjust_max_ratio * turn_rate + 2 * self.s.adjust_min_speed) * dt
        ystep = float(np.clip(ystep, -ylimit, ylimit))
        self.root_yaw = float((self.root_yaw + ystep + np.pi) % (2 * np.pi) - np.pi)
        off = sim.position - self.root_pos
        off[1] = 0.0
        dist = float(np.hypot(off[0], off[2]))
        if dist > self.s.sim_max_distance:
            self.predictor.state = sim.replace(position=self.root_pos + off * (self.s.sim_max_distance / dist))

    def _changed_sharply(self, intent: Intent, last: Intent) -> bool:
        return intent.changed_sharply(last, self.s.sharp_turn_deg)

    def _transition_to(self, frame: int) -> None:
        self.transitions += 1
        dst_rot, dst_pos = self._db_pose_at(float(frame))
        dst_w, dst_v = self._db_pose_velocity(frame)
        src_rot, src_pos = self._shown
        (prev_rot, prev_pos), dt = self._prev_shown, self._last_dt
        if dt > 0:
            src_w, src_v = quat.log(quat.mul_inv(src_rot, prev_rot)) / dt, (src_pos - prev_pos) / dt
        else:
            src_w, src_v = np.zeros_like(src_pos), np.zeros_like(src_pos)
        self.inert.transition(src_rot, src_w, dst_rot, dst_w, src_pos, src_v, dst_pos, dst_v)
        self.frame = frame
        self.frame_pos = float(frame)
        self._db_root = self._db_root_at(self.frame_pos)

    def _advance_sim(self, dt: float, intent: Intent) -> None:
        advance_reference(self.predictor, dt, intent)

    def _query(self, intent: Intent, vertical: np.ndarray | None) -> tuple[np.ndarray, PredictedTrajectory]:
        if self._desired_override is not None:
            traj = self._desired_override
        else:
            sim = self.predictor.state
            state = RootState(position=self.root_pos, velocity=sim.velocity, acceleration=sim.acceleration,
                              rotation=self.root_rot, angular_velocity=sim.angular_velocity)
            traj = predict_reference(self.predictor, intent, state=state)
        lp, ld, _ = traj.local(self.root_pos, self.root_rot)
        raw = self.db.raw_features[self.frame].astype(np.float64).copy()
        for term, sl, ks in self._term_layout:
            src = lp if term.kind == "trajectory_position" else ld
            step = 3 if term.vertical else 2
            for n, k in enumerate(ks):
                raw[sl.start + step * n] = src[k, 0]
                raw[sl.start + step * n + step - 1] = src[k, 2]
        if vertical is not None and self.vcols.size:
            raw[self.vcols] = vertical
        q = self.db.normalize(raw)
        if vertical is None and self.vcols.size:
            q[self.vcols] = 0.0
        return q, traj

    def _pose(self, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        update_reference(self.inert, dt)
        rot, pos = self._db_pose_at(self.frame_pos)
        if self.inert.method != "none":
            rot, pos = self.inert.apply(rot, pos)
        contacts = np.zeros(len(self._legs), dtype=bool)
        if self.s.foot_locking and self._legs:
            rot, contacts = self._lock_feet(rot, pos, dt)
        if dt > 0:
            self._prev_shown, self._last_dt = self._shown, dt
        self._shown = (rot, pos)
        J = self.db.skeleton.num_joints
        out_rot = np.empty((J, 4))
        out_pos = np.empty((J, 3))
        out_rot[0], out_pos[0] = self.root_rot, self.root_pos
        out_rot[1:], out_pos[1:] = rot, pos
        return out_rot, out_pos, contacts

    def _unlock(self, k: int, toe_p: np.ndarray) -> None:
        a = min(self._lock_t[k] / self.s.foot_lock_in_time, 1.0) if self.s.foot_lock_in_time > 0 else 1.0
        self._locked[k] = False
        self._release[k] = (self._lock_pos[k] - toe_p) * (a * a * (3 - 2 * a))
        self._release_t[k] = 0.0

    def _lock_feet(self, rot: np.ndarray, pos: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
        parents = self.db.skeleton.parents
        J = parents.shape[0]
        wp, wr = np.empty((J, 3)), np.empty((J, 4))
        _kernels.forward_kinematics(parents, self.root_pos, self.root_rot, rot, pos, wp, wr)
        rot = rot.copy()
        K = len(self._legs)
        shown = np.zeros(K, dtype=bool)
        contact_now = self.db.contacts[self.frame]
        new_a, new_b = np.empty(4), np.empty(4)
        for k, (hip, knee, ankle, toe) in enumerate(self._legs):
            toe_p = wp[toe]
            # a lock broken by distance fades out before the foot locks again
            broken = (self._release_t[k] < self.s.foot_blend_time
                      and self._release[k] @ self._release[k] >= self.s.foot_unlock_distance ** 2)
            if contact_now[k]:
                if not self._locked[k] and not broken:
                    self._locked[k] = True
                    self._lock_pos[k] = toe_p
                    self._lock_t[k] = 0.0
                    if self._release_t[k] < self.s.foot_blend_time:
                        a = self._release_t[k] / self.s.foot_blend_time
                        self._lock_pos[k] = toe_p + self._release[k] * (1 - a) ** 2 * (1 + 2 * a)
                        self._lock_t[k] = self.s.foot_lock_in_time
                    self._lock_pos[k, 1] = max(self._lock_pos[k, 1], 0.0)  # never below the floor
                    self._release_t[k] = np.inf
                elif self._locked[k] and np.linalg.norm(self._lock_pos[k] - toe_p) > self.s.foot_unlock_distance:
                    self._unlock(k, toe_p)
            elif self._locked[k]:
                self._unlock(k, toe_p)
            if self._locked[k]:
                self._lock_t[k] += dt
                a = min(self._lock_t[k] / self.s.foot_lock_in_time, 1.0) if self.s.foot_lock_in_time > 0 else 1.0
                offset = (self._lock_pos[k] - toe_p) * (a * a * (3 - 2 * a))
                shown[k] = True
            elif self._release_t[k] < self.s.foot_blend_time:
                self._release_t[k] += dt
                a = min(self._release_t[k] / self.s.foot_blend_time, 1.0)
                offset = self._release[k] * (1 - a) ** 2 * (1 + 2 * a)
            else:
                continue
            if offset @ offset < 1e-10:
                continue
            if _kernels.two_bone_ik(wp[hip], wp[knee], wp[ankle], wp[ankle] + offset, wr[hip], wr[knee], new_a, new_b):
                _kernels.local_from_world(wr[parents[hip]], new_a, rot[hip - 1])
                _kernels.local_from_world(new_a, new_b, rot[knee - 1])
                _kernels.local_from_world(new_b, wr[ankle], rot[ankle - 1])
        return rot, shown
