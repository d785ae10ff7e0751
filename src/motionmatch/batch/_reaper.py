"""Ends an embedded Ray's processes with the command that started them, even when that
command is killed (``kill -9``), which gives Ray no chance to shut down.

Ray ends its own head processes with the command (they watch their parent), but the
agents its raylet starts (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) outlive it.
The command (:func:`motionmatch.batch.cluster.ray_session`) starts this file as a script
(standard library only: no package import, no NumPy) in its own session once Ray is up,
with the command's process id as its argument and a pipe as its standard input. Every
:data:`LOOK_S` it records the command's descendants (Ray's processes, which start theirs
over time) and their start times. The command writes one byte when it has shut Ray down
itself; if the pipe closes without it, the command died, and this process ends every
recorded process and everything they started, SIGTERM first, SIGKILL after
:data:`GRACE_S`. A process is only signalled while its start time is the one recorded,
so a process id reused meanwhile is left alone. Needs ``/proc`` (Linux); elsewhere the
command runs without it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

LOOK_S = 0.5
"""Seconds between two records of the command's descendants."""
GRACE_S = 2.0
"""Seconds Ray's processes get to end after SIGTERM before SIGKILL."""
DONE = b"d"
"""What the command writes when it shut Ray down itself."""


def start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks after boot), ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[19])


def children_of(pids: set[int]) -> list[int]:
    """Every live descendant of ``pids`` (not ``pids`` themselves), parents first."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
                parent[int(name)] = int(stat[stat.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError):
                continue
    found: list[int] = []
    frontier = set(pids)
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in found and p not in pids}
        found.extend(sorted(frontier))
    return found


def reap(recorded: dict[int, int]) -> None:
    """End the recorded processes (``pid -> start time``) that still run, and their descendants."""
    alive = {p: t for p, t in recorded.items() if start_time(p) == t}
    targets = {p: start_time(p) for p in children_of(set(alive))}
    targets.update(alive)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, t in targets.items():
            if t is not None and start_time(pid) == t:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and any(start_time(p) == t for p, t in targets.items() if t is not None):
            time.sleep(0.05)


def main(argv: list[str]) -> int:
    command = int(argv[0])
    recorded: dict[int, int] = {}
    me = os.getpid()
    said = None
    while said is None:
        for pid in children_of({command}):
            t = start_time(pid)
            if pid != me and t is not None:
                recorded[pid] = t
        try:
            ready, _, _ = select.select([sys.stdin.buffer], [], [], LOOK_S)
            if ready:
                said = sys.stdin.buffer.read(1)  # the command's byte, or b"" when it died
        except OSError:
            said = b""
    if said != DONE:
        reap(recorded)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C to the terminal's group is the command's
    sys.exit(main(sys.argv[1:]))
