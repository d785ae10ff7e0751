"""GenMM's CPU path: compiled kernels over rows, on a few threads.

The synthesis core (:mod:`~motionmatch.genmm._core`) is array-API code (numpy or PyTorch).
On the numpy backend an iteration runs here instead (:class:`Matcher`): Numba kernels that
hold no GIL (:mod:`~motionmatch.genmm._cpu_kernels`), each over a range of rows, on
:class:`Workers`, the calling thread plus ``threads - 1`` threads of a shared pool. The
product of synthesis and example frames is BLAS's, one call per thread on its share of
the frames, BLAS itself on one thread (:func:`one_blas_thread`). The threads meet once
per iteration (see :class:`Matcher`). The operations are the array-API code's, in the same
order, except the synthesis patches' squared norms, summed in float64 here (numpy's
float32 sums there). On one thread this takes 0.33-0.7 of the time numpy's array code
took (benchmarks/README.md, "GenMM on two threads"): its votes gathered whole rows ``p``
times and its distances made temporaries of the whole distance matrix.

**The same numbers whatever the thread count.** Every row of every kernel's output is
computed by one thread, with the same operations in the same order as on one thread:
cutting the rows differently changes which thread computes a row, never how. The one
reduction across rows, the per-example-patch minimum of the distances (the completeness
normaliser), is a minimum: exact, the same in any order. The frame products are BLAS's:
OpenBLAS (numpy's) computes each row of a product the same way whichever rows it is given
with, which ``tests/test_genmm_threads.py`` checks along with whole syntheses on 1-8
threads, bit for bit.

Why a pool of Python threads and not ``numba.prange``: a synthesis runs on the viewer's
worker threads while other threads step the world; Numba's ``workqueue`` threading layer
(what a machine without TBB or OpenMP gets) aborts the process when two threads launch
parallel kernels at once. Plain ``nogil`` kernels on our own threads have no such limit.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from motionmatch.genmm import _core
from motionmatch.genmm import _cpu_kernels as K

# ----------------------------------------------------------------------------- threads

_POOL: ThreadPoolExecutor | None = None
_POOL_PID = 0  # the process that made it: a forked child makes its own
_POOL_LOCK = threading.Lock()

#: The least work of one thread's share of a step, in estimated nanoseconds (the ``NS_*``
#: costs below, measured on one core of a 2.3 GHz AVX-512 Xeon): a step of less runs on
#: fewer threads. Handing a share to another thread costs the caller about 10 us, and the
#: other thread as long again to wake up.
MIN_PART_NS = 25_000
NS_PRODUCT = 0.013  # one multiply-add of the frame products (BLAS, float32)
NS_PATCH_SUM = 0.1  # one of the p shifted additions of patch distances
NS_ARGMIN = 1.3  # one normalised distance compared in the nearest-neighbour search
NS_VOTE = 0.27  # one value added in voting
NS_CENTER = 0.95  # one value centred (and squared)
NS_RESAMPLE = 0.52  # one value resampled
NS_NORMAL = 11.5  # one Gaussian draw (numpy)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _pool() -> ThreadPoolExecutor:
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        if _POOL is None or _POOL_PID != os.getpid():
            # A forked child inherits the parent's pool object but none of its threads.
            _POOL = ThreadPoolExecutor(max_workers=64, thread_name_prefix="genmm")
            _POOL_PID = os.getpid()
        return _POOL


class Workers:
    """Runs a row kernel over rows ``0 .. n - 1`` on ``threads`` threads (the caller's and
    ``threads - 1`` from a pool shared by all syntheses).

    The rows are cut into ``threads`` contiguous ranges (fewer when the work is small);
    kernels must compute each row on its own (see the module doc), so the cut never
    changes a number.
    """

    def __init__(self, threads: int | None = None):
        t = available_cores() if threads is None else int(threads)
        if t < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.threads = t

    def parts(self, n: int, ns_per_row: float) -> int:
        """How many ranges :meth:`rows` cuts ``n`` rows of ``ns_per_row`` into: one per
        thread, fewer where a share would be under :data:`MIN_PART_NS`."""
        if MIN_PART_NS <= 0:
            return max(1, min(self.threads, n))
        return max(1, min(self.threads, n, int(n * ns_per_row // MIN_PART_NS)))

    def rows(self, fn: Callable[[int, int, int], None], n: int, ns_per_row: float) -> int:
        """``fn(r0, r1, part)`` for :meth:`parts` contiguous ranges ``r0 .. r1 - 1`` covering
        ``0 .. n - 1`` (``part`` numbers them from 0), at once; returns how many. Each row
        is estimated to take ``ns_per_row`` nanoseconds on one core."""
        if n <= 0:
            return 0
        parts = self.parts(n, ns_per_row)
        cuts = [n * k // parts for k in range(parts + 1)]
        _at_once([lambda k=k: fn(cuts[k], cuts[k + 1], k) for k in range(parts)])
        return parts

    def jobs(self, fns: Sequence[Callable[[], object]], ns: Sequence[float]) -> list:
        """``[fn() for fn in fns]``, the calls shared among the threads (each call on one
        thread; the longest first, each to the least loaded thread, by the estimated
        nanoseconds ``ns``). For independent steps (a stage's examples, the first noise)."""
        total = float(sum(ns))
        groups = max(1, min(self.threads, len(fns), int(total // MIN_PART_NS) if MIN_PART_NS > 0 else len(fns)))
        load = [0.0] * groups
        mine: list[list[int]] = [[] for _ in range(groups)]
        for j in sorted(range(len(fns)), key=lambda j: -ns[j]):
            g = load.index(min(load))
            mine[g].append(j)
            load[g] += ns[j]
        out: list = [None] * len(fns)

        def run(g: int) -> None:
            for j in mine[g]:
                out[j] = fns[j]()

        _at_once([lambda g=g: run(g) for g in range(groups)])
        return out


def _at_once(calls: list[Callable[[], None]]) -> None:
    """Run ``calls`` at once: the first on the calling thread, the others on the pool."""
    if len(calls) == 1:
        calls[0]()
        return
    futures = [_pool().submit(c) for c in calls[1:]]
    try:
        calls[0]()
    finally:
        for f in futures:
            f.result()


@functools.cache
def _blas_controller():
    """threadpoolctl's controller of numpy's BLAS, or ``None`` (not installed, or a BLAS
    it does not know)."""
    try:
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController()
    except Exception:
        return None


_BLAS_LOCK = threading.Lock()
_BLAS_USERS = [0, None]  # syntheses inside one_blas_thread; the limiter to restore after the last


def syntheses_holding_blas() -> int:
    """How many syntheses are inside :func:`one_blas_thread` now."""
    with _BLAS_LOCK:
        return _BLAS_USERS[0]


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """A context in which numpy's BLAS runs on the calling thread only (where threadpoolctl
    is installed; else it changes nothing). :class:`Workers` call BLAS from several threads
    at once: BLAS's own threads on top would oversubscribe the cores, and OpenBLAS's spin
    after each call, taking the CPU from the workers. Syntheses running at once share one
    limit, lifted when the last one leaves."""
    c = _blas_controller()
    if c is None:
        yield
        return
    with _BLAS_LOCK:
        if _BLAS_USERS[0] == 0:
            _BLAS_USERS[1] = c.limit(limits=1, user_api="blas")
        _BLAS_USERS[0] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS[0] -= 1
            if _BLAS_USERS[0] == 0:
                _BLAS_USERS[1].restore_original_limits()
                _BLAS_USERS[1] = None


# ------------------------------------------------------------------------ the steps


def centered(workers: Workers, X: np.ndarray, mean: np.ndarray, columns: np.ndarray | None, dtype,
             rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``X[:, columns] - mean`` as ``dtype`` ``[rows, d]`` (rows past ``len(X)`` wrap around
    to its start: a loop's patches) and the rows' squared norms ``[rows]`` (float64)."""
    rows = X.shape[0] if rows is None else int(rows)
    cols = np.arange(X.shape[1], dtype=np.int64) if columns is None else np.asarray(columns, dtype=np.int64)
    out = np.empty((rows, cols.shape[0]), dtype=dtype)
    frame_sq = np.empty(rows)
    _center_into(workers, X, cols, np.asarray(mean, dtype=np.float64), out, frame_sq)
    return out, frame_sq


def _center_into(workers: Workers, X: np.ndarray, cols: np.ndarray, mean: np.ndarray, out: np.ndarray,
                 frame_sq: np.ndarray) -> None:
    n_src = X.shape[0]
    workers.rows(lambda r0, r1, _: K.center_rows(X, cols, mean, n_src, out, frame_sq, r0, r1), out.shape[0],
                 NS_CENTER * cols.shape[0])


def patch_sums(frame_sq: np.ndarray, p: int, dtype) -> np.ndarray:
    """``[len - p + 1]`` sums of ``p`` consecutive frame norms (float64 sums, then ``dtype``)."""
    out = np.empty(frame_sq.shape[0] - p + 1, dtype=dtype)
    K.patch_sums(frame_sq, p, out)
    return out


def _normalisers(colmins: np.ndarray, parts: int, alpha: float | None, p: int, d: int) -> np.ndarray:
    """``1 / (alpha p d + min_i D[i, j])`` per example patch from the first ``parts`` rows
    of column minima ``colmins`` (``inf`` for patches across clips; ones without ``alpha``)."""
    inv = np.empty(colmins.shape[1], dtype=colmins.dtype)
    a = colmins.dtype.type(0.0 if alpha is None else float(alpha) * p * d)
    K.normalisers(colmins, max(1, parts), alpha is not None, a, inv)
    return inv


def nearest_patches(workers: Workers, Xe: np.ndarray, xx: np.ndarray, Y: np.ndarray, yy: np.ndarray, p: int,
                    alpha: float | None, n_patches: int, *, block_bytes: int) -> np.ndarray:
    """For each of ``n_patches`` synthesis patches (centred frames ``Xe [n_patches + p - 1,
    d]``, patch norms ``xx``), the example patch (centred frames ``Y [Ly, d]``, ``m`` patch
    norms ``yy``) of least completeness-normalised distance, as
    :func:`motionmatch.genmm._core.nearest_patches` (see there); ``alpha=None``: plain
    nearest neighbours. Returns ``[n_patches]`` int64.

    In tiles of ``block_bytes``, each computed twice (column minima, then row minima), so
    memory stays bounded however long the output: the path of outputs whose distances do
    not fit in memory at once (:class:`Matcher` keeps them otherwise). Per tile: the frame
    products (one BLAS call per thread, on its share of the frames), then the distances
    (rows shared among the threads, each lowering its own row of column minima)."""
    m = yy.shape[0]
    d = Xe.shape[1]
    dtype = Xe.dtype
    Yt = Y.T
    tile = max(1, min(n_patches, block_bytes // ((2 * m + p) * dtype.itemsize)))
    tiles = [(i, min(i + tile, n_patches)) for i in range(0, n_patches, tile)]
    out = np.empty(n_patches, dtype=np.int64)
    colmins = np.full((workers.threads, m), np.inf, dtype=dtype)

    def distances(i0: int, i1: int) -> np.ndarray:
        frames = i1 - i0 + p - 1
        G = np.empty((frames, m + p - 1), dtype=dtype)
        workers.rows(lambda r0, r1, _: np.matmul(Xe[i0 + r0:i0 + r1], Yt, out=G[r0:r1]), frames,
                     NS_PRODUCT * (m + p) * d)
        D = np.empty((i1 - i0, m), dtype=dtype)
        xs = xx[i0:i1]
        workers.rows(lambda r0, r1, k: K.patch_rows(G, 0, xs, yy, p, D, colmins[k], r0, r1), i1 - i0,
                     NS_PATCH_SUM * m * p)
        return D

    for i0, i1 in tiles:
        distances(i0, i1)
    inv = _normalisers(colmins, colmins.shape[0], alpha, p, d)
    for i0, i1 in tiles:
        D = distances(i0, i1)
        workers.rows(lambda r0, r1, _, D=D, i0=i0: K.argmin_rows(D, inv, out, i0, r0, r1), i1 - i0,
                     NS_ARGMIN * m)
    return out


def vote(workers: Workers, Y64: np.ndarray, nn: np.ndarray, n: int, p: int, *, periodic: bool = False,
         weights: np.ndarray | None = None) -> np.ndarray:
    """Voting (see :func:`motionmatch.genmm._core.vote`): ``[n, d]`` float64."""
    out = np.empty((n, Y64.shape[1]))
    w = _core.vote_weights(p, None) if weights is None else np.asarray(weights, dtype=np.float64)
    workers.rows(lambda r0, r1, _: K.vote_rows(Y64, nn, p, periodic, w, out, r0, r1), n,
                 NS_VOTE * p * Y64.shape[1])
    return out


class Matcher:
    """One part's match-and-blend at one stage on the CPU: :meth:`load` a synthesis,
    :meth:`iterate` as often as wanted.

    Two kinds of passes over the threads. (A) Each thread multiplies its share of the
    synthesis frames with the example frames (BLAS; ``p - 1`` frames more than its
    patches, so the shares are independent) and sums the products into its patches'
    distances, keeping its own column minima. (B) With the completeness normalisers from
    all column minima, each thread finds the nearest neighbours of the patches covering
    its share of the output frames (those shared with the next share are found by both,
    the same way), votes its frames and, when the result is the next iteration's input,
    centres them and goes on with pass (A) of the next iteration on its share: the ``p -
    1`` frames after its share that its last patches need, it votes and centres itself
    (as the next share does, the same way). So an iteration is one pass (two for the first
    of a stage, one B alone for the last), and the threads meet once per iteration, for
    the column minima. Outputs whose distances do not fit in ``block_bytes`` go through
    :func:`nearest_patches` (tiles, computed twice) and :func:`vote` instead.

    Args:
        bank: the part's examples at this stage.
        n: synthesis frames; ``periodic``: a loop (``n`` patches, wrapping around).
        columns: ``[c]`` the part's columns of the synthesis (``None``: all).
        weights: ``[p]`` voting weight of each place in a patch (:func:`~motionmatch.genmm._core.vote_weights`;
            ``None``: average voting).
    """

    def __init__(self, workers: Workers, bank: _core.Bank, p: int, alpha: float | None, n: int, periodic: bool,
                 columns: np.ndarray | None, num_columns: int, block_bytes: int, weights: np.ndarray | None = None):
        self.workers = workers
        self.bank = bank
        self.p = p
        self.alpha = alpha
        self.n = n
        self.periodic = periodic
        self.k = n if periodic else n - p + 1
        self.cols = np.arange(num_columns, dtype=np.int64) if columns is None else np.asarray(columns, np.int64)
        self.dtype = bank.Y.dtype
        d = bank.Y.shape[1]
        self.Xc = np.empty((self.k + p - 1, d), dtype=self.dtype)
        self.frame_sq = np.empty(self.k + p - 1)
        m = bank.starts
        # This iteration's distances and the next one's (pass B reads the first while it
        # makes the second).
        self.keep = self.k * (3 * m + p) * self.dtype.itemsize <= block_bytes
        self.block_bytes = block_bytes
        self.weights = _core.vote_weights(p, None) if weights is None else np.asarray(weights, dtype=np.float64)
        self.loaded = False
        self._ready = None  # (D, colmins, parts) of the loaded synthesis, made by the last pass B
        self._pairs: list = []  # two (D, colmins) buffers: one read while the other is made

    def _buffers(self, not_this: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A ``(D, colmins)`` pair of this stage's buffers (made once; not the pair whose
        ``D`` is ``not_this``), the column minima set to ``inf``."""
        if not self._pairs:
            m = self.bank.starts
            self._pairs = [(np.empty((self.k, m), dtype=self.dtype),
                            np.empty((self.workers.threads, m), dtype=self.dtype)) for _ in range(2)]
        D, colmins = self._pairs[1] if self._pairs[0][0] is not_this else self._pairs[0]
        colmins.fill(np.inf)
        return D, colmins

    def load(self, X: np.ndarray) -> None:
        """Take the synthesis ``X [n, D]`` (float64): its part's columns, centred."""
        _center_into(self.workers, X, self.cols, self.bank.mean, self.Xc, self.frame_sq)
        self.loaded = True
        self._ready = None

    def _ns_a(self) -> float:
        m, d = self.bank.starts, self.bank.Y.shape[1]
        return NS_PRODUCT * (m + self.p) * d + NS_PATCH_SUM * m * self.p

    def _distances(self) -> tuple[np.ndarray, np.ndarray, int]:
        """Pass A on the loaded synthesis: ``(D, colmins, parts)``."""
        b, p, w, Xc, Yt = self.bank, self.p, self.workers, self.Xc, self.bank.Y.T
        xx = patch_sums(self.frame_sq, p, self.dtype)
        D, colmins = self._buffers()
        parts = w.rows(lambda r0, r1, t: K.patch_rows(Xc[r0:r1 + p - 1] @ Yt, r0, xx[r0:], b.yy, p, D, colmins[t],
                                                       r0, r1), self.k, self._ns_a())
        return D, colmins, parts

    def _share_distances(self, r0: int, r1: int, ext_Xc: np.ndarray, ext_sq: np.ndarray, D: np.ndarray,
                         colmin: np.ndarray) -> None:
        """Pass A for the patches starting in ``r0 .. r1 - 1``, from this share's centred
        frames in ``Xc`` and its own copies ``ext_Xc``, ``ext_sq`` of the frames after it."""
        b, p = self.bank, self.p
        a1 = min(r1, self.k)
        if a1 <= r0:
            return
        rows = a1 - r0 + p - 1  # frames r0 .. a1 + p - 2: ours up to r1, then our copies
        own = min(r1, r0 + rows) - r0
        G = np.empty((rows, b.starts + p - 1), dtype=self.dtype)
        np.matmul(self.Xc[r0:r0 + own], b.Y.T, out=G[:own])
        if rows > own:
            np.matmul(ext_Xc[:rows - own], b.Y.T, out=G[own:])
        xx = patch_sums(np.concatenate([self.frame_sq[r0:r0 + own], ext_sq[:rows - own]]), p, self.dtype)
        K.patch_rows(G, r0, xx, b.yy, p, D, colmin, r0, a1)

    def start(self, X_prev: np.ndarray, i0: np.ndarray, i1: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Resample the previous stage's synthesis ``X_prev`` to this stage (rows
        ``X_prev[i0] + (X_prev[i1] - X_prev[i0]) w``), load it and make its distances (pass A),
        all in one pass over the threads: each share resamples and centres the ``p - 1``
        frames after it itself. Returns the resampled synthesis ``[n, D]`` (float64). For a
        whole-body part whose synthesis nothing changes between resampling and matching."""
        b, p, wk, n, k = self.bank, self.p, self.workers, self.n, self.k
        D_all = X_prev.shape[1]
        X = np.empty((n, D_all))
        D, colmins = self._buffers()
        cols, mean = self.cols, b.mean

        def share(r0: int, r1: int, t: int) -> None:
            K.resample_rows(X_prev, i0, i1, w, False, X, r0, r1)
            K.center_rows(X, cols, mean, n, self.Xc, self.frame_sq, r0, r1)
            if self.periodic and r0 == 0:  # the first frames again after the last: a loop's patches
                fr = np.arange(p - 1) % n
                wrap = np.empty((p - 1, D_all))
                K.resample_rows(X_prev, i0[fr], i1[fr], w[fr], False, wrap, 0, p - 1)
                K.center_rows(wrap, cols, mean, p - 1, self.Xc[n:], self.frame_sq[n:], 0, p - 1)
            a1 = min(r1, k)
            e = max(0, min(a1 + p - 1 - r1, p - 1)) if a1 > r0 else 0
            fr = (r1 + np.arange(e)) % n
            ext = np.empty((e, D_all))
            K.resample_rows(X_prev, i0[fr], i1[fr], w[fr], False, ext, 0, e)
            ext_Xc, ext_sq = np.empty((e, len(cols)), dtype=self.dtype), np.empty(e)
            K.center_rows(ext, cols, mean, e, ext_Xc, ext_sq, 0, e)
            self._share_distances(r0, r1, ext_Xc, ext_sq, D, colmins[t])

        ns = NS_RESAMPLE * D_all + NS_CENTER * len(cols) + self._ns_a()
        parts = wk.rows(share, n, ns)
        self.loaded = True
        self._ready = (D, colmins, parts)
        return X

    def iterate(self, recenter: bool) -> np.ndarray:
        """One match-and-blend of the loaded synthesis: ``[n, c]`` float64, the part's
        columns. ``recenter``: the result (all columns of the synthesis: one part) is
        loaded for the next iteration on the way; else :meth:`load` it again."""
        if not self.loaded:
            raise RuntimeError("Matcher.iterate before load")
        b, p, w = self.bank, self.p, self.workers
        m, d = b.starts, b.Y.shape[1]
        if not self.keep:
            xx = patch_sums(self.frame_sq, p, self.dtype)
            nn = nearest_patches(w, self.Xc, xx, b.Y, b.yy, p, self.alpha, self.k, block_bytes=self.block_bytes)
            out = vote(w, b.Y64, nn, self.n, p, periodic=self.periodic, weights=self.weights)
            self.loaded = False
            if recenter:
                self.load(out)
            return out
        D, colmins, parts = self._ready if self._ready is not None else self._distances()
        inv = _normalisers(colmins, parts, self.alpha, p, d)
        out = np.empty((self.n, d))
        cols = np.arange(d if recenter else 0, dtype=np.int64)
        # Not on a loop, the next iteration's pass A rides along (see the class doc).
        fuse = recenter and not self.periodic
        D_next, colmins_next = self._buffers(not_this=D) if fuse else (None, None)
        n, dtype = self.n, self.dtype

        def share(r0: int, r1: int, t: int) -> None:
            e = min(p - 1, n - r1) if fuse else 0
            ext_out, ext_Xc, ext_sq = np.empty((e, d)), np.empty((e, d), dtype=dtype), np.empty(e)
            K.match_vote_rows(D, inv, b.Y64, p, self.periodic, self.weights, np.empty(r1 - r0 + 2 * p, np.int64),
                              out, recenter, cols, b.mean, self.Xc, self.frame_sq, ext_out, ext_Xc, ext_sq, r0, r1)
            if fuse:
                self._share_distances(r0, r1, ext_Xc, ext_sq, D_next, colmins_next[t])

        ns = NS_ARGMIN * m + NS_VOTE * p * d + (NS_CENTER * d if recenter else 0.0) + (self._ns_a() if fuse else 0.0)
        parts_next = w.rows(share, n, ns)
        self.loaded = recenter
        self._ready = (D_next, colmins_next, parts_next) if fuse else None
        return out


def resample(workers: Workers, X: np.ndarray, i0: np.ndarray, i1: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Rows ``X[i0] + (X[i1] - X[i0]) * w`` ``[len(i0), d]`` in ``X``'s dtype."""
    out = np.empty((i0.shape[0], X.shape[1]), dtype=X.dtype)
    workers.rows(lambda r0, r1, _: K.resample_rows(X, i0, i1, w, False, out, r0, r1), i0.shape[0],
                 NS_RESAMPLE * X.shape[1])
    return out


def make_bank(workers: Workers, clips: list[np.ndarray], lengths: list[int], mean: np.ndarray, p: int,
              dtype) -> _core.Bank:
    """The :class:`~motionmatch.genmm._core.Bank` of example ``clips [L_e, d]`` (float64)
    linearly resampled to ``lengths`` frames (each at least ``p``), as
    :func:`~motionmatch.genmm._core.make_bank` builds it, working dtype ``dtype``."""
    d = clips[0].shape[1]
    Y64 = np.empty((sum(lengths), d))
    start = 0
    for clip, n in zip(clips, lengths):
        i0, i1, w = _core.resample_indices(clip.shape[0], n, False)
        dst = Y64[start:start + n]
        workers.rows(lambda r0, r1, _, c=clip, a=i0, b=i1, w=w, o=dst: K.resample_rows(c, a, b, w, True, o, r0, r1),
                     n, NS_RESAMPLE * d)
        start += n
    Y, frame_sq = centered(workers, Y64, mean, None, dtype)
    yy = patch_sums(frame_sq, p, np.float64)
    # Patches crossing a clip boundary are not example patches.
    end = 0
    for n in lengths[:-1]:
        end += n
        yy[max(end - p + 1, 0):end] = np.inf
    return _core.Bank(Y, Y64, np.asarray(mean, dtype=np.float64), yy.astype(dtype), Y64.shape[0] - p + 1)
