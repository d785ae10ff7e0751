"""Numba decorators shared by the hot kernels.

:func:`no_refcount` compiles a kernel without Numba's reference-counting runtime (NRT).
With it, every array passed to an inlined helper, and every view such as ``obs[k, m]``,
costs an atomic increment and decrement that the refcount-pruning pass cannot remove
across branches and loops (numba/numba#2350). In the penalised search these atomics took
about a sixth of the time. The price: such a kernel cannot allocate arrays or return one.
Its scratch space comes from the caller, and every kernel it calls must be compiled the
same way (a callee is compiled with its own options).

Helpers are plain calls, not ``inline="always"``: LLVM inlines the small ones anyway, and
Numba-level inlining re-typed every helper at every call site, which made the penalised
search's first compile 2.3 times as long (50 s of CPU against 22 s on a 2-core machine)
for no measurable speed (``benchmarks/bench_environment.py --quick``: search 0.131 against
0.127 ms, same run conditions).

Kernels take their arguments in named tuples (``typing.NamedTuple`` classes defined at
module level, so that ``cache=True`` works), grouped by what travels together. An entry
point called from Python takes each group as a plain tuple, ``tuple(named)`` built once
where the arrays are long-lived, and names it again on entry (``Frames(*fr)``, free in
compiled code): to type a named tuple argument, Numba's dispatcher encodes its class and
field names on every call (about 0.2 us a field, several microseconds for a search's
arguments), a plain tuple costs it a few nanoseconds.
"""

from __future__ import annotations

import functools

import numba
import numpy as np

#: ``@no_refcount`` or ``@no_refcount(fastmath=...)``: ``numba.njit`` with
#: ``cache=True, nogil=True`` and no reference counting (see the module docstring).
no_refcount = functools.partial(numba.njit, cache=True, nogil=True, _nrt=False)


def readonly(a):
    """``a`` as a read-only array: ``a`` itself when it is one, else a read-only view.

    Numba compiles a kernel once per argument types, and whether an array is read-only is
    part of its type. A kernel that gets a writable array from one caller and a read-only
    one from another is compiled twice (the penalised search: 20 s of CPU each time, in the
    middle of a session). Entry points pass arrays that may be either through this."""
    if not a.flags.writeable:
        return a
    v = a.view()
    v.flags.writeable = False
    return v


class compile_intervals:
    """Record Numba's compilations (not its loads from the disk cache) while in the ``with``
    block: ``intervals``, a list of ``(start, end)`` in :func:`time.perf_counter` seconds,
    one per outermost compilation (a kernel's callees compile inside it), and ``names``,
    the kernel of each.

    Reports use it to keep one-off warm-up apart from steady-state timings: a search that
    overlaps an interval paid for a compilation."""

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []
        self.names: list[str] = []

    @property
    def seconds(self) -> float:
        """Total time spent compiling."""
        return float(sum(b - a for a, b in self.intervals))

    def __enter__(self) -> compile_intervals:
        import time

        from numba.core import event

        intervals, names = self.intervals, self.names
        depth = [0, 0.0]

        class _Listener(event.Listener):
            def on_start(self, ev) -> None:
                if depth[0] == 0:
                    depth[1] = time.perf_counter()
                    names.append(ev.data["dispatcher"].py_func.__qualname__)
                depth[0] += 1

            def on_end(self, ev) -> None:
                depth[0] -= 1
                if depth[0] == 0:
                    intervals.append((depth[1], time.perf_counter()))

        self._listener = _Listener()
        event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc) -> None:
        from numba.core import event

        event.unregister("numba:compile", self._listener)


def overlapping(starts, durations, intervals) -> np.ndarray:
    """``[N]`` bool: which of the timed calls ``[starts, starts + durations]`` (seconds,
    :func:`time.perf_counter`) overlap one of ``intervals`` (:class:`compile_intervals`)."""
    s = np.asarray(starts, dtype=np.float64)
    e = s + np.asarray(durations, dtype=np.float64)
    out = np.zeros(s.shape, dtype=bool)
    for a, b in intervals:
        out |= (s < b) & (e > a)
    return out
