"""A tab's background work (GenMM synthesis, exports) on the viewer's worker pool:
bounded, and stopped with the tab.

* At most one job of each kind runs at a time per *client* (:class:`ClientJobs`: the
  address the page connects from), not per connection: a tab closed and opened again,
  or a second tab, does not start a second synthesis beside the first.
* Closing the tab cancels its jobs (:meth:`TabJobs.cancel`): one still waiting for a
  worker never starts; a running one stops at its next :meth:`TabJobs.check` (GenMM
  checks after every iteration, an export between its steps), and its result is dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from motionmatch.errors import MotionMatchError

__all__ = ["Cancelled", "ClientJobs", "JobRefused", "TabJobs"]


class Cancelled(Exception):
    """Raised inside a job whose tab has closed (by :meth:`TabJobs.check`)."""


class JobRefused(MotionMatchError):
    """A job of this kind is already running for the client."""


class ClientJobs:
    """Which ``(client, kind)`` jobs run now, across all tabs (thread-safe)."""

    def __init__(self) -> None:
        self._running: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def claim(self, client: str, kind: str) -> bool:
        with self._lock:
            if (client, kind) in self._running:
                return False
            self._running.add((client, kind))
            return True

    def release(self, client: str, kind: str) -> None:
        with self._lock:
            self._running.discard((client, kind))

    def running(self, kind: str | None = None) -> int:
        with self._lock:
            return sum(1 for _, k in self._running if kind is None or k == kind)

    def is_running(self, client: str, kind: str) -> bool:
        with self._lock:
            return (client, kind) in self._running


class TabJobs:
    """The jobs of one tab (see the module doc)."""

    def __init__(self, pool: Executor, clients: ClientJobs, client: str):
        self.pool, self.clients, self.client = pool, clients, client
        self._cancelled = threading.Event()
        self._futures: set[Future] = set()
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check(self) -> None:
        """Raise :class:`Cancelled` once the tab has closed (called by the jobs, often)."""
        if self._cancelled.is_set():
            raise Cancelled("the tab was closed")

    def submit(self, kind: str, what: str, fn: Callable[[], Any],
               done: Callable[[Any, BaseException | None], None]) -> None:
        """Run ``fn`` on the pool, then ``done(result, None)`` or ``done(None, error)`` on
        the worker's thread (not when the tab has closed meanwhile). Raises
        :class:`JobRefused` (``what`` names the job) when one of this ``kind`` runs for the
        client already."""
        if self.cancelled or not self.clients.claim(self.client, kind):
            raise self._refused(what)

        def finished(fut: Future) -> None:
            self.clients.release(self.client, kind)
            with self._lock:
                self._futures.discard(fut)
            if self.cancelled or fut.cancelled():
                return
            error = fut.exception()
            if isinstance(error, Cancelled):
                return
            done(None if error is not None else fut.result(), error)

        fut = self.pool.submit(fn)
        with self._lock:
            self._futures.add(fut)
        fut.add_done_callback(finished)

    @staticmethod
    def _refused(what: str) -> JobRefused:
        return JobRefused(f"{what} is already running for this client (this tab or another of it); "
                          "wait for it to finish")

    def ensure_free(self, kind: str, what: str) -> None:
        """Raise :class:`JobRefused` now when :meth:`submit` of ``kind`` would (before a
        costly preparation, e.g. copying a recording)."""
        if self.cancelled or self.clients.is_running(self.client, kind):
            raise self._refused(what)

    def cancel(self) -> None:
        """The tab closed: jobs not started never start, running ones stop at their next check."""
        self._cancelled.set()
        with self._lock:
            futures = list(self._futures)
        for f in futures:
            f.cancel()

    def running(self) -> int:
        with self._lock:
            return sum(1 for f in self._futures if not f.done())
