"""``motionmatch datasets``: list the dataset catalogue and fetch datasets into the cache.

The main CLI calls :func:`register` with its ``add_subparsers()`` object; every parser
added here sets ``func``, a function of the parsed arguments returning the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from motionmatch.cli import _common as arg
from motionmatch.datasets import catalogue, download
from motionmatch.errors import DatasetError

__all__ = ["cmd_fetch", "cmd_list", "register"]


def _human_size(n: int | None) -> str:
    """Bytes as a short human-readable size (``144051503`` -> ``"137.4 MiB"``); ``"?"`` if unknown."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def _error(message: str) -> int:
    print(f"motionmatch datasets: error: {message}".replace("\n", " "), file=sys.stderr)
    return 1


def _status(ds: catalogue.Dataset, cache_dir: str | None) -> dict[str, Any]:
    local = download.find_local(ds)
    try:
        hit = download.cached(ds, cache_dir=cache_dir)
    except (DatasetError, OSError):
        hit = None
    return {"local": str(local) if local else None, "cached": str(hit) if hit else None}


def cmd_list(args: argparse.Namespace) -> int:
    """Print the catalogue as a table (or JSON with ``--json``); returns the exit code."""
    try:
        rows = []
        for ds in catalogue.list_datasets():
            rows.append((ds, _status(ds, args.cache_dir)))
    except DatasetError as e:
        return _error(str(e))
    if args.json:
        out = []
        for ds, status in rows:
            d = ds.to_dict()
            d.update(status)
            out.append(d)
        print(json.dumps(out, indent=2))
        return 0
    header = ("NAME", "TITLE", "SIZE", "LICENCE", "LOCAL", "CACHED")
    table = [header]
    for ds, status in rows:
        table.append(
            (
                ds.name,
                ds.title,
                _human_size(ds.size),
                ds.licence,
                "yes" if status["local"] else "no",
                "yes" if status["cached"] else "no",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    root = download.data_root()
    print(f"\nlocal copies: {root if root is not None else f'(none; set {download.ENV_DATA})'}")
    print(f"cache: {Path(args.cache_dir) if args.cache_dir else download.default_cache_dir()}")
    print("All datasets are for non-commercial use only; see `motionmatch datasets list --json` for attribution.")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """Download, verify and extract a dataset; print its BVH folder; returns the exit code."""
    try:
        folder = download.fetch(
            args.name,
            cache_dir=args.cache_dir,
            progress=not args.no_progress,
            force=args.force,
        )
    except DatasetError as e:
        try:
            local = download.find_local(args.name)
        except DatasetError:
            local = None
        note = f" (a local copy exists at {local}; the library uses it without downloading)" if local else ""
        return _error(f"{e}{note}")
    print(folder)
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``datasets`` command (with ``list`` and ``fetch``) to ``subparsers``.

    Args:
        subparsers: the object returned by ``ArgumentParser.add_subparsers()``.

    Returns:
        The ``datasets`` parser.
    """
    parser = subparsers.add_parser(
        "datasets",
        help="list and download public motion-capture datasets",
        description=(
            "List the catalogue of public motion-capture datasets and download them into the cache "
            f"(${download.ENV_CACHE}, default: the user cache folder). Local copies under "
            f"${download.ENV_DATA} are used in preference to downloads by the library."
        ),
    )
    sub = parser.add_subparsers(dest="datasets_command", metavar="COMMAND")
    parser.set_defaults(func=arg.missing_command(parser, sub))

    p_list = sub.add_parser(
        "list",
        help="show the catalogue: name, title, size, licence, local/cached availability",
        description="Show every dataset in the catalogue, and whether a local copy or a cached download exists.",
    )
    p_list.add_argument("--json", action="store_true", help="print JSON (all catalogue fields) instead of a table")
    p_list.add_argument(
        "--cache-dir", type=arg.folder, metavar="DIR", default=None,
        help="cache folder to inspect (default: the user cache)",
    )
    p_list.set_defaults(func=cmd_list)

    p_fetch = sub.add_parser(
        "fetch",
        help="download, verify and extract a dataset into the cache; print its BVH folder",
        description=(
            "Download a dataset (resuming an interrupted download), check its size and SHA-256, extract it "
            "into the cache and print the folder holding its BVH files. A second call uses the cache."
        ),
    )
    p_fetch.add_argument("name", metavar="NAME", help="dataset name, as listed by `motionmatch datasets list`")
    p_fetch.add_argument("--cache-dir", type=arg.folder, metavar="DIR", default=None,
                         help="cache folder (default: the user cache)")
    p_fetch.add_argument("--force", action="store_true", help="delete the cached copy and download again")
    p_fetch.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    p_fetch.set_defaults(func=cmd_fetch)
    return parser
