"""Search benchmark: exact searchers against numpy brute force, in the same run.

The measuring and the report of ``benchmarks/bench_search.py`` (the command). For each
database folder (``features_normalized.npy [F, D]``, optionally ``queries_normalized.npy``,
``valid_mask.npy``, ``exact_index.npy``/``exact_cost.npy``: the layout of
``shared/bench/search-reference``) it measures:

* **single queries**, k = 1, 3, 10: microseconds per call (median and p95) of
  - ``numpy``: the plain numpy brute force ``argmin(‖f‖² − 2 F·q)`` (norms precomputed,
    invalid frames +inf; ``argpartition`` then a sort of the k for k > 1), with numpy's
    BLAS threads as they are (``numpy``) and limited to one (``numpy_1thread``);
  - every searcher method (``brute``: :class:`BruteForceSearch`, the exact numpy oracle,
    ``box``: :class:`BoxSearch`) through its public ``nearest``;

  the contenders take turns, ``block`` queries each (default 50), so that they see the same
  machine load while each runs queries in a row as in a search loop; ``block=1`` alternates
  on every query, so every call starts with caches that the others have just used (colder:
  the box search, which reads scattered memory, loses more there than numpy's streaming);
* **batched queries**: seconds for ``batch`` queries at once (``nearest_batch``) against the
  numpy batched brute force (blocked matrix products, ``argmin``/``argpartition``), best
  of a few repeats, each after a short pause (so that the other's threads are idle);
* **exactness**: every searcher's k = 1 distances against ``exact_cost`` when the folder
  has it (else against :class:`BruteForceSearch`);
* with ``weights=True``, **weighted queries** too: one random weight vector per database
  (uniform in [0.5, 2] per dimension, the high-level controls' range; seeded), every
  method's ``nearest(q, weights=w)`` as a contender ``<method>+w`` in the same turns (single
  queries; the numpy baseline stays unweighted) and ``nearest_batch(.., weights=w)`` in the
  batches, the ratio of weighted to unweighted medians per method, and the weighted k = 1
  distances against a float64 numpy oracle (:func:`weighted_reference`).

Numba compilation and first-touch costs are paid before timing (warm-up queries).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import platform
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numba
import numpy as np

from _common import REPO
from motionmatch.search import METHODS, SearchError, build_searcher

__all__ = [
    "BenchData",
    "blas_threads",
    "default_reference_dir",
    "find_databases",
    "format_report",
    "load_database",
    "run_benchmark",
]

FEATURES = "features_normalized.npy"
KS = (1, 3, 10)
#: Range of the random weights of ``--weights`` (uniform per dimension).
WEIGHT_RANGE = (0.5, 2.0)
#: Pause before each timed batch: the thread pools of the previous contender (OpenBLAS's
#: spin-waiting threads, numba's) go idle instead of competing for the 2 cores.
BATCH_PAUSE_S = 0.2


# ---------------------------------------------------------------- data
def default_reference_dir() -> Path:
    """``$MOTIONMATCH_BENCH``, else ``<$MOTIONMATCH_DATA>/../bench/search-reference``, else
    ``../shared/bench/search-reference`` beside the repository (may not exist)."""
    env = os.environ.get("MOTIONMATCH_BENCH")
    if env:
        return Path(env)
    shared = REPO.parent / "shared"
    data = os.environ.get("MOTIONMATCH_DATA")
    first = Path(data).parent / "bench" / "search-reference" if data else shared / "bench" / "search-reference"
    if first.is_dir():
        return first
    return shared / "bench" / "search-reference"


def find_databases(data: Path) -> list[Path]:
    """``data`` itself if it holds ``features_normalized.npy``, else its sub-folders that do."""
    data = Path(data)
    if (data / FEATURES).is_file():
        return [data]
    if not data.is_dir():
        raise SearchError(f"--data: {data} is not a folder")
    found = sorted(p for p in data.iterdir() if (p / FEATURES).is_file())
    if not found:
        raise SearchError(f"--data: no {FEATURES} in {data} or its sub-folders")
    return found


class BenchData:
    """One database folder: ``features [F, D]`` float32, ``valid [F]``, ``queries [Q, D]``,
    and ``exact_index``/``exact_cost [Q]`` when given."""

    def __init__(self, folder: Path, n_queries: int | None = None, seed: int = 0):
        folder = Path(folder)
        self.name = folder.name
        self.folder = folder
        self.features = np.ascontiguousarray(np.load(folder / FEATURES), dtype=np.float32)
        if self.features.ndim != 2:
            raise SearchError(f"{folder / FEATURES}: expected a 2-D array, got shape {self.features.shape}")
        f = self.features.shape[0]
        vpath = folder / "valid_mask.npy"
        self.valid = np.load(vpath).astype(bool) if vpath.is_file() else np.ones(f, dtype=bool)
        qpath = folder / "queries_normalized.npy"
        self.exact_index = self.exact_cost = None
        if qpath.is_file():
            self.queries = np.ascontiguousarray(np.load(qpath), dtype=np.float32)
            self.query_source = qpath.name
            ipath, cpath = folder / "exact_index.npy", folder / "exact_cost.npy"
            if ipath.is_file() and cpath.is_file():
                self.exact_index = np.load(ipath)
                self.exact_cost = np.load(cpath)
        else:
            # like the reference queries: a random valid frame plus Gaussian noise of 0.1
            rng = np.random.default_rng(seed)
            idx = rng.choice(np.flatnonzero(self.valid), size=min(5000, int(self.valid.sum())))
            noise = rng.normal(0.0, 0.1, size=(idx.size, self.features.shape[1]))
            self.queries = (self.features[idx] + noise).astype(np.float32)
            self.query_source = "random valid frames + N(0, 0.1) noise"
        if n_queries is not None:
            self.queries = self.queries[:n_queries]
            if self.exact_cost is not None:
                self.exact_index = self.exact_index[:n_queries]
                self.exact_cost = self.exact_cost[:n_queries]


def load_database(folder: Path, n_queries: int | None = None) -> BenchData:
    return BenchData(folder, n_queries)


# ---------------------------------------------------------------- BLAS threads
def _openblas_setter() -> tuple[Any, Any] | None:
    """(set, get) of the OpenBLAS numpy was loaded with, found in this process's mappings."""
    try:
        with open("/proc/self/maps") as fh:
            libs = {p for p in (line.split()[-1] for line in fh if line.strip()) if "openblas" in p.lower() and ".so" in p}
    except OSError:  # not Linux
        return None
    for path in sorted(libs):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas", "openblas"):
            for suffix in ("64_", ""):
                set_name, get_name = f"{prefix}_set_num_threads{suffix}", f"{prefix}_get_num_threads{suffix}"
                if hasattr(lib, set_name) and hasattr(lib, get_name):
                    return getattr(lib, set_name), getattr(lib, get_name)
    return None


@contextlib.contextmanager
def blas_threads(n: int) -> Iterator[str]:
    """Limit numpy's BLAS to ``n`` threads inside the block (threadpoolctl if installed, else
    OpenBLAS's own setter); yields how it was done (``"unchanged"`` if it could not be)."""
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-not-found]
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        with threadpool_limits(limits=n, user_api="blas"):
            yield "threadpoolctl"
        return
    funcs = _openblas_setter()
    if funcs is None:
        yield "unchanged"
        return
    set_threads, get_threads = funcs
    before = int(get_threads())
    set_threads(n)
    try:
        yield f"openblas_set_num_threads ({before} -> {n})"
    finally:
        set_threads(before)


def _limit_method() -> str:
    with blas_threads(1) as how:
        return how


def blas_thread_count() -> int | None:
    funcs = _openblas_setter()
    return int(funcs[1]()) if funcs else None


# ---------------------------------------------------------------- numpy baselines
class NumpyBrute:
    """The plain numpy brute force the README's reference timings use."""

    def __init__(self, features: np.ndarray, valid: np.ndarray):
        self.features = features
        norms = np.einsum("ij,ij->i", features.astype(np.float64), features.astype(np.float64))
        self.norms = np.where(valid, norms, np.inf).astype(np.float32)

    def nearest(self, q: np.ndarray, k: int) -> np.ndarray:
        s = self.norms - 2.0 * (self.features @ q)
        if k == 1:
            return np.array([np.argmin(s)])
        part = np.argpartition(s, k - 1)[:k]
        return part[np.argsort(s[part])]

    def nearest_batch(self, queries: np.ndarray, k: int, chunk_bytes: int = 32 << 20) -> np.ndarray:
        nq = queries.shape[0]
        out = np.empty((nq, k), dtype=np.int64)
        chunk = max(1, chunk_bytes // (4 * self.features.shape[0]))
        ft = self.features.T
        for a in range(0, nq, chunk):
            s = self.norms[None, :] - 2.0 * (queries[a : a + chunk] @ ft)
            if k == 1:
                out[a : a + chunk, 0] = np.argmin(s, axis=1)
            else:
                part = np.argpartition(s, k - 1, axis=1)[:, :k]
                order = np.argsort(np.take_along_axis(s, part, axis=1), axis=1)
                out[a : a + chunk] = np.take_along_axis(part, order, axis=1)
        return out


def weighted_reference(features: np.ndarray, valid: np.ndarray, queries: np.ndarray, w: np.ndarray,
                       chunk: int = 32, recheck: int = 8) -> np.ndarray:
    """``[Q]`` float64: the smallest ``Σ_d w_d (f_d - q_d)²`` over the valid frames, per query.

    Plain numpy, independent of the searchers: the expanded form ``Σ w f² - 2 F·(w q) + Σ w q²``
    in float64 (blocked matrix products) picks the ``recheck`` best frames of each query, whose
    distances are then computed directly in float64 (the expanded form's cancellation error,
    ~1e-16 of the norms, cannot move the best frame out of them on such data)."""
    f64 = features.astype(np.float64)
    norms = np.where(valid, (f64 * f64) @ w, np.inf)
    out = np.empty(queries.shape[0])
    r = min(recheck, int(valid.sum()))
    for a in range(0, queries.shape[0], chunk):
        q = queries[a : a + chunk].astype(np.float64)
        s = norms[None, :] - 2.0 * ((q * w) @ f64.T)
        best = np.argpartition(s, r - 1, axis=1)[:, :r]
        diff = f64[best] - q[:, None, :]
        out[a : a + chunk] = ((diff * diff) @ w).min(axis=1)
    return out


# ---------------------------------------------------------------- measuring
def _stats(seconds: Sequence[float]) -> dict[str, float]:
    us = np.asarray(seconds) * 1e6
    return {"median_us": float(np.median(us)), "p95_us": float(np.percentile(us, 95)), "mean_us": float(us.mean())}


def bench_database(
    data: BenchData,
    methods: Sequence[str] = ("brute", "box"),
    ks: Sequence[int] = KS,
    batch: int = 1000,
    batch_repeats: int = 3,
    warmup: int = 20,
    one_thread: bool = True,
    block: int = 50,
    weights: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Time one database; see the module docstring. Returns a JSON-ready dict.

    ``weights``: also time weighted queries (contenders ``<method>+w``, weights uniform in
    :data:`WEIGHT_RANGE` per dimension, drawn with ``seed``)."""
    feats, valid, queries = data.features, data.valid, data.queries
    nq = queries.shape[0]
    w = np.random.default_rng(seed).uniform(*WEIGHT_RANGE, feats.shape[1]) if weights else None
    numpy_bf = NumpyBrute(feats, valid)
    t0 = time.perf_counter()
    searchers = {}
    build_s = {}
    for m in methods:
        t = time.perf_counter()
        searchers[m] = build_searcher(feats, valid, method=m)
        build_s[m] = time.perf_counter() - t
    # warm-up: numba compilation (or cache loading), caches, BLAS threads
    first_call_s = {}
    for m, s in searchers.items():
        t = time.perf_counter()
        s.nearest(queries[0])
        first_call_s[m] = time.perf_counter() - t
        for k in ks:
            for q in queries[:warmup]:
                s.nearest(q, k=k)
                if w is not None:
                    s.nearest(q, k=k, weights=w)
            s.nearest_batch(queries[: min(nq, 64)], k=k)
            if w is not None:
                s.nearest_batch(queries[: min(nq, 64)], k=k, weights=w)
    for q in queries[:warmup]:
        numpy_bf.nearest(q, 1)

    with blas_threads(1) as how:
        can_limit = how != "unchanged"
    runners: dict[str, Any] = {"numpy": lambda q, k: numpy_bf.nearest(q, k)}
    if one_thread and can_limit:
        runners["numpy_1thread"] = runners["numpy"]  # same code, BLAS limited to one thread
    for m, s in searchers.items():
        runners[m] = lambda q, k, s=s: s.nearest(q, k=k)[1]
    weighted = [f"{m}+w" for m in methods] if w is not None else []
    for m, s in searchers.items():
        if w is not None:
            runners[f"{m}+w"] = lambda q, k, s=s: s.nearest(q, k=k, weights=w)[1]
    single: dict[str, dict[str, Any]] = {}
    exact: dict[str, Any] = {}
    block = max(1, int(block))
    for k in ks:
        times: dict[str, list[float]] = {name: [] for name in runners}
        results: dict[str, np.ndarray] = {m: np.empty(nq) for m in [*methods, *weighted]}
        gc.disable()
        try:
            # the runners take turns, `block` queries each: same machine load for all, and
            # each runs `block` queries in a row (its own data warm in the caches after the
            # first; block=1 measures every call just after the others ran: colder caches)
            for a in range(0, nq, block):
                for name, run in runners.items():
                    with blas_threads(1) if name == "numpy_1thread" else contextlib.nullcontext():
                        for i in range(a, min(a + block, nq)):
                            t = time.perf_counter()
                            r = run(queries[i], k)
                            times[name].append(time.perf_counter() - t)
                            if name in results:
                                results[name][i] = r[0]
        finally:
            gc.enable()
        single[f"k{k}"] = {name: _stats(ts) for name, ts in times.items()}
        if k == 1:
            ref = data.exact_cost
            if ref is None:
                oracle = searchers["brute"] if "brute" in searchers else build_searcher(feats, valid, "brute")
                ref = np.array([oracle.nearest(q)[1][0] for q in queries])
            for m in methods:
                err = np.abs(results[m] - ref) / np.maximum(ref, 1e-12)
                exact[m] = {"max_rel_error": float(err.max()), "mismatches": int((err > 1e-9).sum()),
                            "reference": "exact_cost.npy" if data.exact_cost is not None else "brute"}
            if weighted:
                wref = weighted_reference(feats, valid, queries, w)
                for m in weighted:
                    err = np.abs(results[m] - wref) / np.maximum(wref, 1e-12)
                    exact[m] = {"max_rel_error": float(err.max()), "mismatches": int((err > 1e-9).sum()),
                                "reference": "numpy float64 (weighted)"}

    # batched
    batch_q = queries[: min(batch, nq)]
    batch_res: dict[str, Any] = {"queries": int(batch_q.shape[0])}
    for k in ks:
        row: dict[str, Any] = {}
        best = np.inf
        for _ in range(batch_repeats):
            time.sleep(BATCH_PAUSE_S)
            t = time.perf_counter()
            numpy_bf.nearest_batch(batch_q, k)
            best = min(best, time.perf_counter() - t)
        row["numpy_s"] = best
        for m, s in searchers.items():
            for name, ww in ((m, None), (f"{m}+w", w)) if w is not None else ((m, None),):
                best_m = np.inf
                for _ in range(batch_repeats):
                    time.sleep(BATCH_PAUSE_S)
                    t = time.perf_counter()
                    s.nearest_batch(batch_q, k=k, weights=ww)
                    best_m = min(best_m, time.perf_counter() - t)
                row[f"{name}_s"] = best_m
                row[f"{name}_speedup"] = best / best_m
        batch_res[f"k{k}"] = row

    out: dict[str, Any] = {
        "frames": int(feats.shape[0]),
        "dims": int(feats.shape[1]),
        "valid_frames": int(valid.sum()),
        "queries": nq,
        "query_source": data.query_source,
        "build_s": build_s,
        "first_call_s": first_call_s,
        "single": single,
        "batch": batch_res,
        "exact": exact,
        "seconds": time.perf_counter() - t0,
    }
    # headline numbers (k = 1, single query, medians)
    k1 = single[f"k{ks[0]}"]
    numpy_us = k1["numpy"]["median_us"]
    best_method = min(methods, key=lambda m: k1[m]["median_us"])
    out.update(
        numpy_us=numpy_us,
        best_method=best_method,
        best_us=k1[best_method]["median_us"],
        speedup_vs_numpy=numpy_us / k1[best_method]["median_us"],
    )
    warnings = []
    if "numpy_1thread" in k1:
        out["numpy_1thread_us"] = k1["numpy_1thread"]["median_us"]
        out["speedup_vs_numpy_1thread"] = out["numpy_1thread_us"] / out["best_us"]
        if numpy_us > 2 * out["numpy_1thread_us"]:
            warnings.append(
                "numpy with its BLAS threads is much slower than with one thread: the machine is busy (a BLAS "
                "thread waits for a core), so numpy_us is inflated; compare with numpy_1thread_us, or rerun"
            )
    out["warnings"] = warnings
    for k in ks:
        sk = single[f"k{k}"]
        for m in methods:
            out[f"{m}_k{k}_us"] = sk[m]["median_us"]
            out[f"{m}_k{k}_speedup_vs_numpy"] = sk["numpy"]["median_us"] / sk[m]["median_us"]
        out[f"numpy_k{k}_us"] = sk["numpy"]["median_us"]
    if ks:
        b = batch_res[f"k{ks[0]}"]
        out["batch_numpy_s"] = b["numpy_s"]
        out["batch_best_s"] = min(b[f"{m}_s"] for m in methods)
        out["batch_speedup_vs_numpy"] = b["numpy_s"] / out["batch_best_s"]
    if w is not None:
        # weighted / unweighted medians (single queries) and times (batches), per method and k
        out["weights"] = {
            "range": list(WEIGHT_RANGE),
            "seed": seed,
            "single_ratio": {f"k{k}": {m: single[f"k{k}"][f"{m}+w"]["median_us"] / single[f"k{k}"][m]["median_us"]
                                       for m in methods} for k in ks},
            "batch_ratio": {f"k{k}": {m: batch_res[f"k{k}"][f"{m}+w_s"] / batch_res[f"k{k}"][f"{m}_s"]
                                      for m in methods} for k in ks},
        }
    return out


def run_benchmark(
    data: str | Path | None = None,
    n_queries: int | None = 1000,
    methods: Sequence[str] = ("brute", "box"),
    ks: Sequence[int] = KS,
    batch: int = 1000,
    block: int = 50,
    progress: Any = None,
    weights: bool = False,
) -> dict[str, Any]:
    """Benchmark every database under ``data`` (default :func:`default_reference_dir`);
    ``weights``: also weighted queries (see :func:`bench_database`).

    Returns ``{folder name: result}`` (see :func:`bench_database`); each result has a
    ``"meta"`` entry describing the machine, the timing protocol and numpy's threads.
    """
    root = Path(data) if data is not None else default_reference_dir()
    for m in methods:
        if m not in METHODS:
            raise SearchError(f"methods: unknown method {m!r}; expected some of {sorted(METHODS)}")
    folders = find_databases(root)
    results: dict[str, Any] = {}
    for folder in folders:
        if progress:
            progress(f"{folder.name}: loading")
        d = BenchData(folder, n_queries)
        if progress:
            progress(f"{folder.name}: {d.features.shape[0]} frames, {d.queries.shape[0]} queries")
        results[folder.name] = bench_database(d, methods=methods, ks=ks, batch=batch, block=block, weights=weights)
    meta = {
        "data": str(root),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "numba_threads": numba.get_num_threads(),
        "blas_threads_as_is": blas_thread_count(),
        "numpy_1thread_via": _limit_method(),
        "timing": f"time.perf_counter per call; numpy and the methods take turns, {block} queries each",
        "block": block,
    }
    for r in results.values():
        r["meta"] = meta
    return results


# ---------------------------------------------------------------- report
def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for j, r in enumerate(rows):
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_report(results: dict[str, Any]) -> str:
    """Human-readable tables of :func:`run_benchmark`'s result."""
    dbs = list(results)
    meta = results[dbs[0]].get("meta", {}) if dbs else {}
    out = []
    if meta:
        out.append(
            f"data: {meta.get('data')}  cpus: {meta.get('cpus')}  numpy {meta.get('numpy')}  numba {meta.get('numba')} "
            f"(threads {meta.get('numba_threads')})  BLAS threads as is: {meta.get('blas_threads_as_is')}"
        )
        out.append(f"timing: {meta.get('timing')}")
    for name in dbs:
        r = results[name]
        out.append("")
        out.append(f"{name}: {r['frames']:,} frames x {r['dims']} dims ({r['valid_frames']:,} valid), "
                   f"{r['queries']} queries ({r['query_source']})")
        ks = [k for k in r["single"]]
        names = list(r["single"][ks[0]].keys())
        rows = [["single query (us)", *[f"{k} median" for k in ks], *[f"{k} p95" for k in ks],
                 *[f"{k} vs numpy" for k in ks]]]
        for n in names:
            row = [n]
            row += [f"{r['single'][k][n]['median_us']:.1f}" for k in ks]
            row += [f"{r['single'][k][n]['p95_us']:.1f}" for k in ks]
            row += [f"{r['single'][k]['numpy']['median_us'] / r['single'][k][n]['median_us']:.2f}x" for k in ks]
            rows.append(row)
        out.append(_table(rows))
        b = r["batch"]
        methods = [n for n in names if not n.startswith("numpy")]
        rows = [[f"batch of {b['queries']} (ms)", *[k for k in ks], *[f"{k} vs numpy" for k in ks]]]
        rows.append(["numpy", *[f"{b[k]['numpy_s'] * 1e3:.1f}" for k in ks], *["1.00x" for _ in ks]])
        for m in methods:
            rows.append([m, *[f"{b[k][m + '_s'] * 1e3:.1f}" for k in ks], *[f"{b[k][m + '_speedup']:.2f}x" for k in ks]])
        out.append(_table(rows))
        if "weights" in r:
            wr = r["weights"]
            lo, hi = wr["range"]
            ratios = "; ".join(
                f"{m}: " + ", ".join(f"{k} {wr['single_ratio'][k][m]:.2f}x" for k in ks)
                + " (batch " + ", ".join(f"{wr['batch_ratio'][k][m]:.2f}x" for k in ks) + ")"
                for m in wr["single_ratio"][ks[0]])
            out.append(f"weighted (+w: weights uniform in [{lo:g}, {hi:g}], numpy unweighted) / unweighted, "
                       f"medians: {ratios}")
        out.extend(f"warning: {w}" for w in r.get("warnings", []))
        ex = ", ".join(f"{m}: {v['mismatches']} mismatches vs {v['reference']} (max rel. error {v['max_rel_error']:.1e})"
                       for m, v in r["exact"].items())
        out.append(f"exactness, k=1 distances: {ex}")
        out.append("build: " + ", ".join(f"{m} {s:.3f} s" for m, s in r["build_s"].items())
                   + "; first call: " + ", ".join(f"{m} {s:.3f} s" for m, s in r["first_call_s"].items()))
    return "\n".join(out)
