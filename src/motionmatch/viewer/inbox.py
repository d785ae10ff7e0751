"""A tab's queue of messages from its page: bounded, charged by cost, closed with the tab.

The server's event loop (which streams every tab's pose frames) only *offers* the page's
raw text (:meth:`Inbox.offer`: constant time, no parsing): refused at once, with a
:class:`~motionmatch.viewer.messages.MessageError`, when the tab sends more messages per
second than ``Limits.rate``, or when its queue holds ``Limits.queued_messages`` messages
or ``Limits.queued_bytes`` of text already.

The session's own thread takes the messages (:meth:`Inbox.drain`): it parses and validates
each one and carries it out, and charges the time this took to the tab's budget of
server time (``Limits.cost_rate`` seconds per second, ``Limits.cost_burst`` at once). A tab
that owes time (at most ``Limits.cost_debt`` seconds: one very expensive message) has its
messages wait until it has paid: one that sends expensive messages (large scenes, long
paths) gets its share of the machine, whatever the number of messages, its queue fills
and further messages are refused; other tabs keep their share. A tick spends at most
``budget`` seconds on messages (the rest wait for the next tick, so the tab's own poses
keep flowing); closing the inbox (the tab closed) drops what waits and stops a drain
between two messages.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable

from motionmatch.viewer.messages import Limits, MessageError, RateLimiter, check_size, parse

__all__ = ["Inbox"]

_SEQ = re.compile(r'"seq"\s*:\s*(\d{1,16})[,}\s]')


def _seq(raw: str | bytes) -> int | None:
    """The ``seq`` a refused message seems to carry, for the reply: looked for only near its
    start and end (where the page writes it), so that refusing costs nothing per byte."""
    if not isinstance(raw, str):
        return None
    m = _SEQ.search(raw, 0, 256) or _SEQ.search(raw, max(len(raw) - 64, 0))
    return int(m.group(1)) if m else None


class Inbox:
    """The messages of one tab waiting for its session (see the module doc)."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.rate = RateLimiter(limits.rate, limits.burst)
        #: seconds of server time the tab may still use (it may owe some: then it is refused)
        self.cost = RateLimiter(limits.cost_rate, limits.cost_burst)
        self._items: deque[str | dict] = deque()
        self._bytes = 0
        self._lock = threading.Lock()
        self._closed = False
        self.charged = 0.0  # seconds charged in all

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        return self._closed

    def offer(self, raw: str | bytes) -> None:
        """Queue the page's raw message (the event loop); raises ``MessageError`` when it
        is refused (too large, binary, too many per second, the queue is full)."""
        lim = self.limits
        check_size(raw, lim)
        if not self.rate.allow():
            raise MessageError("rate_limited", f"more than {lim.rate:g} messages per second; message dropped",
                               _seq(raw))
        with self._lock:
            if self._closed:
                return
            if len(self._items) >= lim.queued_messages or self._bytes + len(raw) > lim.queued_bytes:
                raise MessageError("busy", f"this tab has {len(self._items)} messages ({self._bytes // 1024} KiB) "
                                   f"waiting: its messages cost more than its share ({1e3 * lim.cost_rate:.0f} ms of "
                                   "server time per second); message dropped: send fewer or smaller ones",
                                   _seq(raw))
            self._items.append(raw)
            self._bytes += len(raw)

    def put(self, msg: dict) -> None:
        """Queue a message made by the server itself (a job's result, the warm-up's end);
        dropped once closed."""
        with self._lock:
            if not self._closed:
                self._items.append(msg)

    def close(self) -> None:
        """The tab is gone: drop what waits, take nothing more, stop a drain."""
        with self._lock:
            self._closed = True
            self._items.clear()
            self._bytes = 0

    def _pop(self) -> str | dict | None:
        with self._lock:
            if self._closed or not self._items:
                return None
            item = self._items.popleft()
            if isinstance(item, str):
                self._bytes -= len(item)
            return item

    def drain(self, handle: Callable[[dict], None], refuse: Callable[[MessageError], None], budget: float) -> None:
        """Carry out waiting messages in order (the session's thread): each raw one parsed
        and validated (``refuse`` answers those that fail), then ``handle``\\ d; each
        charged its time. Returns when the queue is empty or closed, after ``budget``
        seconds (one message at least), or while the tab owes time."""
        end = time.perf_counter() + budget
        while self.cost.allow(0.0) and (item := self._pop()) is not None:
            t0 = time.perf_counter()
            try:
                msg = item if isinstance(item, dict) else parse(item, self.limits)
            except MessageError as e:
                refuse(e)
            else:
                handle(msg)
            t1 = time.perf_counter()
            self.cost.charge(t1 - t0, floor=-self.limits.cost_debt)
            self.charged += t1 - t0
            if t1 >= end:
                return
