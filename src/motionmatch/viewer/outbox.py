"""Messages from a session's thread to its websocket, bounded.

JSON replies and events go out in order, pose frames coalesced (a page that reads slower
than 60 Hz gets the newest frame, not a backlog). A page that reads slowly does not make
the server grow: of the periodic reports (``stats``, ``debug``, ``pose_status``) only the
newest unsent one of each kind is kept, and once ``max_bytes`` of text waits, further
messages are dropped and counted; when the page has caught up it is told how many with
one ``warning`` (``code: "dropped"``).

Thread-safe: the session's thread (and the worker threads of its jobs) :meth:`put`, the
event loop :meth:`take`\\ s; the loop is woken once per batch, not once per message.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from typing import Any

import numpy as np

__all__ = ["LATEST_ONLY", "Outbox", "dumps"]

#: message types of which only the newest unsent one matters
LATEST_ONLY = frozenset({"stats", "debug", "pose_status"})


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=_json_default, separators=(",", ":"), allow_nan=False)


class Outbox:
    """One websocket's waiting messages (see the module doc)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_bytes: int = 8 * 1024 * 1024):
        self.loop = loop
        self.max_bytes = int(max_bytes)
        self.event = asyncio.Event()
        self.closed = False
        self.coalesced = 0   # pose frames replaced by a newer one before they went out
        self.dropped = 0     # messages dropped because max_bytes waited
        self._told = 0
        self._lock = threading.Lock()
        self._json: deque[list] = deque()     # [type, text]; text None: replaced by a newer one
        self._latest: dict[str, list] = {}    # LATEST_ONLY type -> its waiting entry
        self._bytes = 0
        self._pose: bytes | None = None
        self._woken = False

    @property
    def waiting_bytes(self) -> int:
        return self._bytes + (len(self._pose) if self._pose is not None else 0)

    def put(self, item: dict | str | bytes) -> None:
        """Queue a message: a ``dict`` (JSON, serialised here, on the caller's thread), text,
        or ``bytes`` (a pose frame)."""
        if self.closed:
            return
        kind = item.get("type") if isinstance(item, dict) else None
        if not isinstance(item, (bytes, bytearray, str)):
            item = dumps(item)
        with self._lock:
            if isinstance(item, (bytes, bytearray)):
                if self._pose is not None:
                    self.coalesced += 1
                self._pose = bytes(item)
            elif not self._add(kind, item):
                return
            wake, self._woken = not self._woken, True
        if wake:
            try:
                self.loop.call_soon_threadsafe(self.event.set)
            except RuntimeError:  # the loop is closing
                self.closed = True

    def _add(self, kind: str | None, text: str) -> bool:
        old = self._latest.get(kind) if kind in LATEST_ONLY else None
        grow = len(text) - (len(old[1]) if old is not None else 0)
        if self._bytes + grow > self.max_bytes:
            self.dropped += 1
            return False
        self._bytes += grow
        if old is not None:
            old[1] = text
        else:
            entry = [kind, text]
            self._json.append(entry)
            if kind in LATEST_ONLY:
                self._latest[kind] = entry
        return True

    def take(self) -> str | bytes | None:
        """The next message to send (the event loop): JSON first, then the newest pose
        frame; ``None`` when nothing waits (the next :meth:`put` sets ``event`` again)."""
        with self._lock:
            if self._json:
                entry = self._json.popleft()
                kind, text = entry
                if self._latest.get(kind) is entry:
                    del self._latest[kind]
                self._bytes -= len(text)
                return text
            if self.dropped > self._told:  # caught up: say what was lost
                n, self._told = self.dropped - self._told, self.dropped
                return dumps({"type": "warning", "code": "dropped",
                              "message": f"{n} messages to this page were dropped: it read them too slowly "
                                         f"({self.max_bytes // 2**20} MiB were waiting)"})
            pose, self._pose = self._pose, None
            if pose is None:
                self._woken = False
            return pose
