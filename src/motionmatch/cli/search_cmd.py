"""``motionmatch bench search``: time exact nearest-neighbour search against numpy brute force.

The main CLI calls :func:`register_bench` with the ``add_subparsers()`` object of its
``bench`` command; the parser added here sets ``func``, a function of the parsed arguments
returning the exit code. The measuring is :func:`motionmatch.search.bench.run_benchmark`,
shared with ``benchmarks/bench_search.py``.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["cmd_bench_search", "register_bench"]

DESCRIPTION = """\
Time exact nearest-neighbour search over feature databases: numpy brute force (BLAS threads
as they are, and one thread) against each searcher method, single queries (k = 1, 3, 10:
median and p95 microseconds, speed-up over numpy in the same run) and batched queries, and
check the answers (against exact_cost.npy when the folder has it).

--data is a folder holding features_normalized.npy [frames, dims] (optional:
queries_normalized.npy, valid_mask.npy, exact_index.npy/exact_cost.npy), or a folder of
such folders. Default: $MOTIONMATCH_BENCH, else $MOTIONMATCH_DATA/../bench/search-reference,
else ../shared/bench/search-reference beside the repository.
"""

EPILOG = """\
examples:
  motionmatch bench search
  motionmatch bench search --data ../shared/bench/search-reference/db_b --queries 5000
  motionmatch bench search --data my_db_folder --json
"""


def register_bench(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``search`` subcommand to the ``bench`` command's subparsers; returns its parser."""
    p = subparsers.add_parser(
        "search",
        help="time exact nearest-neighbour search against numpy brute force",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", default=None, metavar="DIR", help="database folder, or a folder of database folders")
    p.add_argument("--queries", type=int, default=1000, metavar="N", help="single queries per database and k (default 1000)")
    p.add_argument("--batch", type=int, default=1000, metavar="N", help="queries in the batched measurement (default 1000)")
    p.add_argument("--methods", default="brute,box", help="comma-separated searcher methods (default brute,box)")
    p.add_argument("--k", default="1,3,10", help="comma-separated k values (default 1,3,10)")
    p.add_argument("--block", type=int, default=50, metavar="N",
                   help="queries each contender runs in a row before the next takes its turn "
                        "(default 50; 1 alternates on every query: colder caches)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object keyed by database folder name (k=1 medians in numpy_us, best_us, ...)")
    p.set_defaults(func=cmd_bench_search)
    return p


def _error(message: str) -> int:
    print(f"motionmatch bench search: error: {message}".replace("\n", " "), file=sys.stderr)
    return 1


def cmd_bench_search(args: argparse.Namespace) -> int:
    """Run the benchmark; print tables, or JSON with ``--json``. Returns the exit code."""
    from motionmatch.search import SearchError
    from motionmatch.search.bench import format_report, run_benchmark

    try:
        ks = [int(k) for k in str(args.k).split(",") if k.strip()]
    except ValueError:
        return _error(f"--k: expected comma-separated integers, got {args.k!r}")
    if args.queries is not None and args.queries < 1:
        return _error(f"--queries: expected at least 1, got {args.queries}")
    if args.batch < 1:
        return _error(f"--batch: expected at least 1, got {args.batch}")
    try:
        res = run_benchmark(
            args.data,
            n_queries=args.queries,
            methods=[m.strip() for m in str(args.methods).split(",") if m.strip()],
            ks=ks,
            batch=args.batch,
            block=args.block,
            progress=None if args.json else (lambda msg: print(msg, file=sys.stderr, flush=True)),
        )
    except (SearchError, OSError, ValueError) as e:
        return _error(str(e))
    print(json.dumps(res, indent=2) if args.json else format_report(res))
    return 0
