"""A world's agents stepped in several processes at once, in lockstep (:class:`ShardedWorld`).

A :class:`~motionmatch.runtime.world.World`'s agents meet each other only through where
they all stand at the start of a step: the crowd steering reads everyone's ground
position and the environment-aware searches everyone's future body ellipses, both taken
before anyone moves (:meth:`World.ground_positions <motionmatch.runtime.world.World.ground_positions>`,
:meth:`World.agent_rows <motionmatch.runtime.world.World.agent_rows>`). So the agents can be
shared out among several worlds built alike, each stepping its part and seeing the others
as *peers* (:meth:`World.split <motionmatch.runtime.world.World.split>`), provided each
learns, before every step, where the others stand: each agent then takes the very steps it
would take in the whole world, to the last bit.

Why processes: a step of many agents is mostly Python (each agent's input, decision and
bookkeeping, each search's preparation), which one process runs on one core at a time
whatever its threads; the compiled parts alone (poses, search kernels) use a second
thread. A second process steps half of the agents on the second core.

:class:`ShardedWorld` builds the world in every process with the same function (a
module-level callable and its arguments, so that a new process can import it), keeps the
first part in the calling process and starts one process per other part. Before each step
every part reads the others' states (database frame, root and yaw per agent) from a
buffer in shared memory, steps, and writes its own agents' for the next step there; the
calling process tells the others to step through a pipe and waits for each one's answer.
"""

from __future__ import annotations

import mmap
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection

import numpy as np

from motionmatch.runtime.world import World

__all__ = ["ShardedWorld", "parts_of"]

#: a state row in the shared buffer: the database frame, the root (x, y, z, m) and the yaw (rad)
_STATE = 5


def parts_of(count: int, parts: int, runs: int = 8) -> list[np.ndarray]:
    """The agents each of ``parts`` parts steps: ``range(count)`` cut into ``runs`` runs of
    consecutive agents, each run shared among the parts in pieces of consecutive agents
    (the longer pieces going to each part in turn). Each part holds agents of every group
    of a scenario and of every frame of a staggered search, and about as many as the others
    (a few more at most), so the parts' steps cost about the same."""
    got: list[list[np.ndarray]] = [[] for _ in range(parts)]
    for r, run in enumerate(np.array_split(np.arange(count), runs)):
        for j, piece in enumerate(np.array_split(run, parts)):
            got[(j + r) % parts].append(piece)
    return [np.concatenate(g) if g else np.zeros(0, dtype=np.int64) for g in got]


class ShardedWorld:
    """The agents of ``build(*args)`` (a :class:`World`) stepped by ``processes`` worlds at once.

    Args:
        build: makes the whole world, the same in every process (a module-level function,
            e.g. :func:`motionmatch.runtime.scenarios.door_crowd_world`; a new process imports it).
        args: its arguments (picklable: e.g. a database's path rather than the database).
        processes: how many worlds step the agents (this process's and ``processes - 1``
            more); at most the number of agents.
        threads: each world's threads (:attr:`World.threads`; default: the machine's cores
            shared among the processes, at least one).
        start_timeout: seconds a new process may take to build its world.

    Attributes:
        world: this process's part (a split :class:`World`: its agents, the others as peers).
        agents: how many agents in all.

    The agents' states after each step: :meth:`state`. Use it as a context manager, or
    :meth:`close` it: its processes end with it (and with this process).
    """

    def __init__(self, build: Callable[..., World], args: tuple = (), *, processes: int = 2,
                 threads: int | None = None, start_timeout: float = 300.0):
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        if processes > 1 and os.name == "nt":
            raise ValueError("a world in several processes needs a POSIX system (Linux, macOS): use processes=1")
        self._steps = 0
        self._cpu = 0.0
        self._conns: list = []
        self._procs: list = []
        self._file = tempfile.TemporaryFile(prefix="motionmatch-shards-")  # (no name: nothing to clean up)
        self._finalizer = weakref.finalize(self, _stop, self._conns, self._procs)
        try:
            for _ in range(1, processes):  # (they build their worlds while this one builds its own)
                self._start(build, args)
            self.world = build(*args)
            G = self.agents = len(self.world.agents)
            processes = self.processes = min(processes, max(1, G))
            for conn, proc in zip(self._conns[processes - 1:], self._procs[processes - 1:]):  # (more than agents)
                proc.kill()
                proc.wait()
                conn.close()
            del self._conns[processes - 1:], self._procs[processes - 1:]
            self.threads = threads or max(1, (os.cpu_count() or 1) // processes)
            self.world.threads = self.threads
            self._parts = parts_of(G, processes)
            self._file.truncate(_buffer_bytes(G))
            self._buf = _state_buffer(self._file.fileno(), G)
            names = [a.name for a in self.world.agents]
            for p, conn in enumerate(self._conns, start=1):
                conn.send(("part", self._parts[p], names, self.threads))
            if processes > 1:
                self.world.split(self._parts[0])
                _publish(self.world, self._buf[0], self._parts[0])
            deadline = time.monotonic() + start_timeout
            for p, conn in enumerate(self._conns, start=1):
                self._answer(p, conn, max(0.0, deadline - time.monotonic()), "building its world")
        except BaseException:
            self.close()
            raise

    def _start(self, build: Callable[..., World], args: tuple) -> None:
        """Start a part's process (``python -m motionmatch.runtime.shards``: a new interpreter
        that imports ``build`` by name and nothing of the caller's script) and send it what
        to build."""
        ours, theirs = socket.socketpair()
        with theirs:
            proc = subprocess.Popen([sys.executable, "-m", "motionmatch.runtime.shards", str(theirs.fileno()),
                                     str(self._file.fileno())], pass_fds=(theirs.fileno(), self._file.fileno()))
        conn = Connection(ours.detach())
        self._conns.append(conn)
        self._procs.append(proc)
        conn.send(("build", build, args))

    @property
    def frame(self) -> int:
        """Steps taken (as :attr:`World.frame`)."""
        return self.world.frame

    @property
    def cpu_seconds(self) -> float:
        """The other processes' CPU time (s) in the last :meth:`step` (this one's: read it with :func:`time.process_time`)."""
        return self._cpu

    def step(self, dt: float) -> None:
        """Every agent steps ``dt`` seconds (each part at once, from the state all stood in)."""
        if not self._finalizer.alive:
            raise ValueError("the sharded world is closed")
        f = self._steps
        for p, conn in enumerate(self._conns, start=1):
            try:
                conn.send(("step", float(dt), f))
            except OSError:
                self.close()
                raise RuntimeError(f"sharded world: process {p} ended while stepping") from None
        try:
            _advance(self.world, self._buf, f, dt, self._parts[0], len(self._conns) > 0)
        finally:
            cpu = 0.0
            for p, conn in enumerate(self._conns, start=1):
                cpu += self._answer(p, conn, None, "stepping")
        self._cpu = cpu
        self._steps += 1

    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(frames [G], root_pos [G, 3], root_yaw [G])``: every agent's database frame, root
        (m) and yaw (rad) now, in the order of the whole world's agents (copies)."""
        if not self._conns:
            return self.world.everyone()[:3]  # (indexed by rows: copies)
        b = self._buf[self._steps % 2]
        return b[:, 0].astype(np.int64), b[:, 1:4].copy(), b[:, 4].copy()

    def close(self) -> None:
        """End the other processes (their worlds are lost; this process's part stays readable)."""
        self._finalizer()

    def __enter__(self) -> ShardedWorld:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _answer(self, part: int, conn, timeout: float | None, doing: str) -> float:
        """Part ``part``'s answer: its CPU seconds; ``RuntimeError`` (the others stopped) if it
        failed, ended or did not answer within ``timeout`` seconds."""
        if timeout is not None and not conn.poll(timeout):
            self.close()
            raise RuntimeError(f"sharded world: process {part} took over {timeout:.0f} s {doing}")
        try:
            kind, value = conn.recv()
        except (EOFError, OSError):
            self.close()
            raise RuntimeError(f"sharded world: process {part} ended while {doing}") from None
        if kind == "error":
            self.close()
            raise RuntimeError(f"sharded world: process {part} failed while {doing}: {value}")
        return float(value)


def _publish(world: World, out: np.ndarray, mine: np.ndarray) -> None:
    """Write ``world``'s agents' states (rows ``mine`` of ``out [G, 5]``)."""
    out[mine, 0], out[mine, 1:4], out[mine, 4] = world.states()


def _advance(world: World, buf: np.ndarray, f: int, dt: float, mine: np.ndarray, split: bool) -> None:
    """Step ``world`` (a part) from the states of step ``f`` in ``buf[f % 2]``; its agents'
    states after it into ``buf[(f + 1) % 2]``."""
    if split:
        b = buf[f % 2]
        peers = world.peer_places
        world.set_peer_state(b[peers, 0].astype(np.int64), b[peers, 1:4], b[peers, 4])
    world.step(dt)
    if split:
        _publish(world, buf[(f + 1) % 2], mine)


def _buffer_bytes(count: int) -> int:
    """The shared buffer's size for ``count`` agents: two steps' states (at least one byte)."""
    return max(2 * count * _STATE * 8, 8)


def _state_buffer(fd: int, count: int) -> np.ndarray:
    """The shared file ``fd`` mapped as ``[2, count, 5]`` float64: two steps' states of
    ``count`` agents (the view keeps the map open)."""
    shared = mmap.mmap(fd, _buffer_bytes(count))
    return np.frombuffer(shared, dtype=np.float64, count=2 * count * _STATE).reshape(2, count, _STATE)


def _serve(conn: Connection, buffer_fd: int) -> None:
    """A part's process: receive ``("build", build, args)`` and build the world, then
    ``("part", mine, names, threads)``: its agents must be named ``names``, in that order,
    and it keeps the agents ``mine``; then step on request (``("step", dt, f)``, answered
    ``("done", CPU seconds)``) until the connection closes or another message comes (``("close",
    None)``). A failure is answered ``("error", message)``."""
    try:
        msg = _receive(conn)
        world = msg[1](*msg[2])
        msg = _receive(conn)
        if msg[0] != "part":
            return
        _, mine, names, threads = msg
        count = len(names)
        if [a.name for a in world.agents] != names:
            raise RuntimeError(f"the world was built with other agents here ({len(world.agents)}) than in the first "
                               f"process ({count}): the build must make the same world in every process")
        world.threads = threads
        world.split(mine)
        buf = _state_buffer(buffer_fd, count)
        _publish(world, buf[0], mine)
        conn.send(("ready", 0.0))
        while True:
            msg = _receive(conn)
            if msg[0] != "step":
                return
            _, dt, f = msg
            c0 = time.process_time()
            _advance(world, buf, f, dt, mine, True)
            conn.send(("done", time.process_time() - c0))
    except _Gone:
        return  # (the first process ended: nothing to answer)
    except BaseException as e:  # (the caller raises it, with where it happened)
        where = traceback.extract_tb(e.__traceback__)[-1:]
        at = f" ({where[0].filename}:{where[0].lineno})" if where else ""
        try:
            conn.send(("error", f"{type(e).__name__}: {e}{at}"))
        except (EOFError, OSError):
            pass


class _Gone(Exception):
    """The first process's end of the connection closed."""


def _receive(conn: Connection) -> tuple:
    """The next message; :class:`_Gone` when the first process has ended."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        raise _Gone from None


def _stop(conns: list, procs: list) -> None:
    """Tell every part's process to end, then make sure it has."""
    for conn in conns:
        try:
            conn.send(("close", None))
        except (EOFError, OSError):
            pass
    for proc in procs:
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5.0)
    for conn in conns:
        conn.close()
    conns.clear()
    procs.clear()


if __name__ == "__main__":  # a part's process (ShardedWorld._start)
    _serve(Connection(int(sys.argv[1])), int(sys.argv[2]))
