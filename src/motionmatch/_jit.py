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
"""

from __future__ import annotations

import functools

import numba

#: ``@no_refcount`` or ``@no_refcount(fastmath=...)``: ``numba.njit`` with
#: ``cache=True, nogil=True`` and no reference counting (see the module docstring).
no_refcount = functools.partial(numba.njit, cache=True, nogil=True, _nrt=False)
