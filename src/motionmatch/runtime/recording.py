"""The one recorder of offline runs: a world's steps, as columns over its agents.

:meth:`World.record <motionmatch.runtime.world.World.record>` is the one loop that steps a
world for a number of frames and hands each step to a :class:`StepRecorder`; the records
users read are made from its columns: :class:`~motionmatch.runtime.world.WorldRecord`
(``World.run``: scenarios, crowds) and :class:`~motionmatch.runtime.offline.RunRecord`
(``run_script`` / ``run_input``: ``motionmatch run``, pose runs).

A step is recorded from its :class:`~motionmatch.runtime.agents.StepResults` (the poses,
frames, modes, contacts of all its agents, copied out of the controllers' batch at once)
and from the batch's columns (the roots): a few array copies per step, whatever the number
of agents. Only the agents that searched are read one by one (their new desired
trajectory), and, when asked for, each agent's intent velocity.
"""

from __future__ import annotations

import numpy as np

from motionmatch.runtime._batch_kernels import MODES

__all__ = ["StepRecorder"]


class StepRecorder:
    """Columns ``[A, F, ...]`` of ``A`` agents over ``F`` frames (arrays allocated at once).

    Args:
        agents, frames: the agents recorded (a world's, fixed during the run) and the frames.
        joints, contacts, offsets: the skeleton's joints, the feet, the desired trajectory's samples.
        poses: keep the local poses (``rotations [A, F, J, 4]``, ``translations [A, F, J, 3]``)
            in ``pose_dtype`` (float32 halves the memory of a crowd; float64 keeps them as played).
        velocities: keep each agent's intent velocity (``velocities [A, F, 3]``, m/s).
        desired_dtype: of ``desired [A, F, K, 3]``: the last desired future positions (world,
            m; NaN before the agent's first search).

    Columns: ``root_positions [A, F, 3]``, ``root_yaws [A, F]`` (rad), ``frames [A, F]``,
    ``modes [A, F]`` (indices of :data:`~motionmatch.runtime._batch_kernels.MODES`),
    ``searched``, ``transitioned`` ``[A, F]``, ``contacts [A, F, C]``, ``desired``, and the
    optional ones; ``starts``, ``seconds`` ``[F]`` when each step began
    (:func:`time.perf_counter`) and its wall time; ``count`` frames recorded.
    """

    def __init__(self, agents: list, frames: int, *, joints: int, contacts: int, offsets: int, poses: bool,
                 pose_dtype=np.float32, velocities: bool = False, desired_dtype=np.float32):
        A, F = len(agents), int(frames)
        self.agents = list(agents)
        self.root_positions = np.zeros((A, F, 3))
        self.root_yaws = np.zeros((A, F))
        self.frames = np.zeros((A, F), dtype=np.int64)
        self.modes = np.zeros((A, F), dtype=np.int8)
        self.searched = np.zeros((A, F), dtype=bool)
        self.transitioned = np.zeros((A, F), dtype=bool)
        self.contacts = np.zeros((A, F, max(int(contacts), 1)), dtype=bool)
        self.desired = np.full((A, F, offsets, 3), np.nan, dtype=desired_dtype)
        self.rotations = np.zeros((A, F, joints, 4), dtype=pose_dtype) if poses else None
        self.translations = np.zeros((A, F, joints, 3), dtype=pose_dtype) if poses else None
        self.velocities = np.zeros((A, F, 3)) if velocities else None
        self.seconds = np.zeros(F)
        self.starts = np.zeros(F)
        self.count = 0

    def add(self, roots: tuple[np.ndarray, np.ndarray], start: float, seconds: float) -> None:
        """Record the agents' last step: ``roots``, their ``(positions [A, 3], yaws [A])``
        (the controllers' batch columns at their rows), when the step started
        (:func:`time.perf_counter`) and its wall time (s)."""
        f = self.count
        self.starts[f], self.seconds[f] = start, seconds
        self.root_positions[:, f], self.root_yaws[:, f] = roots
        if f > 0:  # (a search keeps its trajectory: the last one until the next)
            self.desired[:, f] = self.desired[:, f - 1]
        else:  # (the trajectories of searches before the recording)
            for i, a in enumerate(self.agents):
                if a.ctrl.last_desired is not None:
                    self.desired[i, 0] = a.ctrl.last_desired.positions
        for step, ks, ids in self._steps():
            self.frames[ids, f] = step.frames[ks]
            self.modes[ids, f] = step.modes[ks]
            decided = [step.decided[k] for k in ks.tolist()]
            self.transitioned[ids, f] = [t for _, t in decided]
            searched = np.fromiter((step.searched(k) for k in ks.tolist()), dtype=bool, count=len(ks))
            self.searched[ids, f] = searched
            c = step.contacts[ks]
            self.contacts[ids, f, : c.shape[1]] = c
            for k, i in zip(ks[searched].tolist(), ids[searched].tolist()):
                d = step.desired(k)
                if d is not None:
                    self.desired[i, f] = d.positions
            if self.rotations is not None:
                self.rotations[ids, f] = step.rotations[ks]
                self.translations[ids, f] = step.translations[ks]
        if self.velocities is not None:
            for i, a in enumerate(self.agents):
                self.velocities[i, f] = a.intent.velocity
        self.count = f + 1

    def _steps(self):
        """``(step, rows of the step [n], agents' indices [n])`` for each step object the
        agents' last steps belong to (one for a world stepped whole)."""
        first = self.agents[0].last_step if self.agents else None
        if first is not None and all(a.last_step is not None and a.last_step[0] is first[0] for a in self.agents):
            ks = np.fromiter((a.last_step[1] for a in self.agents), dtype=np.int64, count=len(self.agents))
            return [(first[0], ks, np.arange(len(self.agents)))]
        groups: dict[int, tuple] = {}
        for i, a in enumerate(self.agents):
            if a.last_step is not None:
                step, k = a.last_step
                groups.setdefault(id(step), (step, [], []))
                groups[id(step)][1].append(k)
                groups[id(step)][2].append(i)
        return [(s, np.asarray(ks, dtype=np.int64), np.asarray(ids, dtype=np.int64)) for s, ks, ids in groups.values()]

    def mode_names(self, agent: int) -> np.ndarray:
        """``[F]`` the mode names of one agent's recorded frames."""
        return np.asarray(MODES, dtype=object)[self.modes[agent, : self.count]].astype(str)
