"""Exact nearest-neighbour search: motionmatch's searchers against numpy brute force.

    python benchmarks/bench_search.py [--data DIR] [--queries N] [--batch N] [--methods M,...] [--k K,...]
                                      [--block N] [--weights] [--json]

Times exact nearest-neighbour search over feature databases: numpy brute force (BLAS
threads as they are, and one thread) against each searcher method, single queries
(k = 1, 3, 10: median and p95 microseconds, speed-up over numpy in the same run) and
batched queries (``--batch`` queries at once), and checks the answers (against
``exact_cost.npy`` when the folder has it). ``--weights`` also times weighted queries
(``weights=w``, random weights in [0.5, 2] per dimension: rows ``<method>+w``) and prints
their ratio to the unweighted ones.

``--data`` is a folder holding ``features_normalized.npy [frames, dims]`` (optional:
``queries_normalized.npy``, ``valid_mask.npy``, ``exact_index.npy``/``exact_cost.npy``), or
a folder of such folders; default: ``$MOTIONMATCH_BENCH``, else
``$MOTIONMATCH_DATA/../bench/search-reference``, else ``../shared/bench/search-reference``
beside the repository (three real 27-D databases of 53k/104k/215k frames, 5000 queries
each, exact answers). The measuring itself is :func:`search_timing.run_benchmark`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from motionmatch.search import SearchError
from search_timing import KS, default_reference_dir, format_report, run_benchmark

EPILOG = """\
examples:
  python benchmarks/bench_search.py
  python benchmarks/bench_search.py --data ../shared/bench/search-reference/db_b --queries 5000
  python benchmarks/bench_search.py --data my_db_folder --json
  python benchmarks/bench_search.py --queries 2000 --weights
"""


def _error(message: str) -> int:
    """Print ``message`` as the command's error; returns the exit code 1."""
    print(f"bench_search.py: error: {message}".replace("\n", " "), file=sys.stderr)
    return 1


def build_parser() -> argparse.ArgumentParser:
    """The command's options."""
    p = argparse.ArgumentParser(prog="python benchmarks/bench_search.py", description=__doc__,
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, metavar="DIR",
                   help=f"database folder, or a folder of database folders (default {default_reference_dir()})")
    p.add_argument("--queries", type=int, default=1000, metavar="N", help="single queries per database and k (default 1000)")
    p.add_argument("--batch", type=int, default=1000, metavar="N", help="queries in the batched measurement (default 1000)")
    p.add_argument("--methods", default="brute,box", help="comma-separated searcher methods (default brute,box)")
    p.add_argument("--k", default=",".join(map(str, KS)), help="comma-separated k values (default 1,3,10)")
    p.add_argument("--block", type=int, default=50, metavar="N",
                   help="queries each contender runs in a row before the next takes its turn (default 50; "
                        "1 alternates on every query: colder caches)")
    p.add_argument("--weights", action="store_true",
                   help="also time weighted queries (per-dimension weights uniform in [0.5, 2], one vector per "
                        "database): contenders <method>+w, and their ratio to the unweighted medians")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object keyed by database folder name (k=1 medians in numpy_us, best_us, ...)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print tables, or JSON with ``--json``. Returns the exit code."""
    a = build_parser().parse_args(argv)
    try:
        ks = [int(k) for k in str(a.k).split(",") if k.strip()]
    except ValueError:
        return _error(f"--k: expected comma-separated integers, got {a.k!r}")
    if a.queries < 1:
        return _error(f"--queries: expected at least 1, got {a.queries}")
    if a.batch < 1:
        return _error(f"--batch: expected at least 1, got {a.batch}")
    try:
        res = run_benchmark(
            a.data, n_queries=a.queries, methods=[m.strip() for m in str(a.methods).split(",") if m.strip()],
            ks=ks, batch=a.batch, block=a.block, weights=a.weights,
            progress=None if a.json else (lambda msg: print(msg, file=sys.stderr, flush=True)),
        )
    except (SearchError, OSError, ValueError) as e:
        return _error(str(e))
    print(json.dumps(res, indent=2) if a.json else format_report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
