"""Exact nearest-neighbour search: motionmatch's searchers against numpy brute force.

    python benchmarks/bench_search.py [--data DIR] [--queries N] [--json]

``--data`` is a folder holding ``features_normalized.npy`` (and optionally
``queries_normalized.npy``, ``valid_mask.npy``, ``exact_index.npy``/``exact_cost.npy``), or a
folder of such folders; default: ``$MOTIONMATCH_BENCH``, else
``$MOTIONMATCH_DATA/../bench/search-reference``, else ``../shared/bench/search-reference``
beside the repository (three real 27-D databases of 53k/104k/215k frames, 5000 queries
each, exact answers). For each database and k = 1, 3, 10 it prints the median and p95
microseconds per single query of numpy brute force (BLAS threads as they are, and one
thread) and of each searcher, their speed-up over numpy in the same run, the batched
throughput (``--batch`` queries at once) and an exactness check. The measuring itself is
:func:`motionmatch.search.bench.run_benchmark` (shared with ``motionmatch bench search``).
"""

from __future__ import annotations

import argparse
import json
import sys

from motionmatch.search.bench import KS, default_reference_dir, format_report, run_benchmark


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help=f"database folder or folder of folders (default {default_reference_dir()})")
    p.add_argument("--queries", type=int, default=1000, help="single queries per database and k (default 1000)")
    p.add_argument("--batch", type=int, default=1000, help="queries in the batched measurement (default 1000)")
    p.add_argument("--methods", default="brute,box", help="comma-separated searcher methods (default brute,box)")
    p.add_argument("--k", default=",".join(map(str, KS)), help="comma-separated k values (default 1,3,10)")
    p.add_argument("--block", type=int, default=50,
                   help="queries each contender runs in a row before the next takes its turn (default 50; "
                        "1 alternates on every query: colder caches)")
    p.add_argument("--json", action="store_true", help="print one JSON object keyed by database folder name")
    a = p.parse_args(argv)
    res = run_benchmark(
        a.data, n_queries=a.queries, methods=[m for m in a.methods.split(",") if m],
        ks=[int(k) for k in a.k.split(",") if k], batch=a.batch, block=a.block,
        progress=None if a.json else (lambda msg: print(msg, file=sys.stderr, flush=True)),
    )
    print(json.dumps(res, indent=2) if a.json else format_report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
