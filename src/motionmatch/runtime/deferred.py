"""A world step's deferred searches (:class:`DeferredSearches`): planned in the agents'
turns, made ready together (their queries in one compiled call, their obstacles in
another), their jobs run at once on the world's threads, then ended in the agents' order
by :meth:`Controller.step_many <motionmatch.runtime.controller.Controller.step_many>`."""

from __future__ import annotations

import numpy as np

from motionmatch.control.intent import Intent
from motionmatch.runtime.chooser import EnvironmentChooser, ObstaclePool
from motionmatch.runtime.controller import Controller
from motionmatch.search.penalized import run_jobs

__all__ = ["DeferredSearches"]


class DeferredSearches(list):
    """A step's deferred searches, ``[controller, job, rest]`` each (see :meth:`Controller.
    _search <motionmatch.runtime.controller.Controller._search>`), whose jobs :meth:`run`
    runs at once, on two threads with a pool (a job's kernel holds no lock and releases
    the interpreter's).

    A planned search (:meth:`plan`: the common case, a planar query and an environment
    chooser) is made ready with the step's other planned searches by :meth:`prepare`:
    their queries in one compiled call, their obstacles in another, then each one's
    kernel arguments (:meth:`EnvironmentChooser.begin`'s, as if each had begun alone)."""

    def __init__(self, pool, obstacles: ObstaclePool):
        super().__init__()
        self.pool = pool
        self._obstacles = obstacles
        self._planned: list[tuple] = []  # (index into the list, intent, mask)

    def plan(self, ctrl: Controller, intent: Intent, mask: np.ndarray, tail: tuple) -> None:
        """Take a search of ``ctrl`` whose query and job :meth:`prepare` makes (``tail``:
        its ``rest`` after the query, see :meth:`Controller._search`)."""
        self._planned.append((len(self), intent, mask))
        self.append([ctrl, None, tail])

    def prepare(self) -> None:
        """Make the planned searches ready: their queries (:meth:`Controller._planned_queries`),
        their obstacles and their jobs (:meth:`EnvironmentChooser.begin_many`)."""
        if not self._planned:
            return
        entries = [self[i] for i, _, _ in self._planned]
        ctrls = [e[0] for e in entries]
        masks = [m for _, _, m in self._planned]
        queries = Controller._planned_queries(ctrls, [it for _, it, _ in self._planned], masks)
        jobs = EnvironmentChooser.begin_many(ctrls, queries, masks, self._obstacles)
        for e, q, job in zip(entries, queries, jobs):
            e[1] = job
            e[2] = (q, *e[2])
        self._planned.clear()

    def run(self) -> None:
        """Run every job: with a pool, its thread and this one each take the next job not
        taken yet from one iterator (a list's iterator hands each item out once, under the
        interpreter's lock), so that the two finish together however the jobs' costs vary
        (they vary threefold in a dense crowd: every other job to each thread left one
        waiting about a tenth of the time)."""
        self.prepare()
        jobs = [job for _, job, _ in self if job.runs]
        if len(jobs) < 2 or self.pool is None:
            run_jobs(jobs)
            return
        shared = iter(jobs)
        there = self.pool.submit(run_jobs, shared)
        run_jobs(shared)
        there.result()
