"""Where the viewer's data comes from: the database, and the files the page may load.

Database (:func:`open_database`): ``--db DB.npz`` as built by ``motionmatch build``;
else a folder of BVH files (``--data DIR``); else the default dataset
(:data:`DEFAULT_DATASET`) found by :func:`motionmatch.datasets.resolve`: a local copy in
``$MOTIONMATCH_DATA``, else the download cache, else a download (with a progress bar).
A folder is turned into a database once (mirrored copies, the 3D schema so that jump and
creep work) and cached under the download cache's ``viewer/`` folder, rebuilt when the
clips or settings change.

Files (:class:`FileCatalog`): the page never sends a path. It asks for a list of files of
a kind (``bvh``, ``scenario``, ``path``, ``keypoints``) and gets ids of the form
``"root:relative/path"``; ``root`` names one of the configured data folders. An id is
resolved inside its folder only: no absolute paths, no ``..``, no links leading out, only
the kind's extensions, and at most ``max_bytes``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TypeVar

from motionmatch.errors import MotionMatchError

__all__ = ["DEFAULT_DATASET", "DataError", "FileCatalog", "OfflineError", "default_roots", "open_database"]

DEFAULT_DATASET = "lafan1"

T = TypeVar("T")

KINDS: dict[str, tuple[str, ...]] = {
    "bvh": (".bvh",),
    "scenario": (".json",),
    "path": (".json", ".csv"),
    "keypoints": (".json", ".npz", ".csv"),
}


class DataError(MotionMatchError):
    """The viewer cannot find or open its data."""


class OfflineError(DataError):
    """The default dataset is not here and cannot be downloaded."""


def _offline_message(cause: BaseException) -> str:
    from motionmatch.datasets import ENV_DATA, archive_path, default_cache_dir

    return (
        f"the default dataset {DEFAULT_DATASET!r} is not on this machine and could not be downloaded ({cause}).\n"
        "What to do:\n"
        f"  * connect to the internet and run `motionmatch datasets fetch {DEFAULT_DATASET}` (or start the viewer "
        "again), or\n"
        f"  * point {ENV_DATA} at a folder holding a copy ({ENV_DATA}/{DEFAULT_DATASET}/*.bvh), or\n"
        f"  * put the archive, downloaded elsewhere, at {archive_path(DEFAULT_DATASET)} "
        f"(cache: {default_cache_dir()}), or\n"
        "  * start the viewer on your own data: `motionmatch viewer --data DIR` (a folder of BVH files) or "
        "`--db DB.npz` (from `motionmatch build`)."
    )


def default_dataset_folder(*, progress: bool = True, download: bool = True) -> Path:
    """The default dataset's folder: local copy, cache, else a download (progress bar)."""
    from motionmatch.datasets import resolve
    from motionmatch.errors import DatasetError

    try:
        return resolve(DEFAULT_DATASET, progress=progress, download=download)
    except DatasetError as e:
        text = str(e).lower()
        network = any(w in text for w in ("urlopen", "network", "connection", "resolve", "timed out", "unreachable",
                                          "name or service", "temporary failure", "cannot download", "http"))
        if network or not download:
            raise OfflineError(_offline_message(e)) from e
        raise DataError(str(e)) from e
    except OSError as e:  # a network error that escaped the downloader's wrapping
        raise OfflineError(_offline_message(e)) from e


def _slug(path: Path) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.resolve().as_posix().strip("/"))[-80:]
    return s or "data"


def database_cache_path(folder: Path, schema: str, mirror: bool, cache_dir: Path | None = None) -> Path:
    from motionmatch.datasets import default_cache_dir

    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return base / "viewer" / f"{_slug(folder)}-{re.sub(r'[^A-Za-z0-9_-]+', '-', schema)}{'-mirror' if mirror else ''}.npz"


@dataclass
class DatabaseSource:
    """What :func:`open_database` opened: for the page's header and the log."""

    description: str
    folder: Path | None = None
    db_path: Path | None = None
    built: bool = False


def open_database(db: str | os.PathLike | None = None, data: str | os.PathLike | None = None, *,
                  schema: str = "classic-3d", mirror: bool = True, cache_dir: str | os.PathLike | None = None,
                  progress: bool = True, fetch_progress: bool | None = None, log=print,
                  units: str | float = "auto", up: str = "auto", roles: str | os.PathLike | None = None):
    """``(MotionDatabase, DatabaseSource)`` from ``db``, else ``data``, else the default dataset.

    ``progress``: bars while loading and building; ``fetch_progress`` (default: the same):
    the bar of a download of the default dataset. The folder's takes are read as
    ``motionmatch build`` reads them (:func:`motionmatch.datasets.load_takes` with
    ``units`` and ``up``, then brought to one skeleton); ``roles``: a roles map file
    (:func:`motionmatch.database.schema.load_roles`) added to the schema."""
    from motionmatch.database import MotionDatabase, schema_by_name
    from motionmatch.datasets import load_takes, one_skeleton

    if db is not None:
        p = Path(db).expanduser()
        if not p.is_file():
            raise DataError(f"{p}: no such database file (build one with `motionmatch build DATA -o {p.name}`)")
        return MotionDatabase.load(p), DatabaseSource(f"database {p}", db_path=p)
    if data is not None:
        folder = Path(data).expanduser()
        if not folder.is_dir():
            raise DataError(f"{folder}: not a folder of BVH files")
    else:
        folder = default_dataset_folder(progress=progress if fetch_progress is None else fetch_progress)
    cache = database_cache_path(folder, schema, mirror, Path(cache_dir) if cache_dir is not None else None)
    log(f"loading clips from {folder} ...")
    clips = one_skeleton(load_takes([folder], units=units, up=up, progress=progress))
    existed = cache.exists()
    if not existed:
        log(f"building the database ({len(clips)} clips{', mirrored' if mirror else ''}, schema {schema}); "
            f"cached at {cache}")
    cache.parent.mkdir(parents=True, exist_ok=True)
    sch = schema_by_name(schema)
    if roles is not None:
        from motionmatch.database.schema import load_roles

        sch = sch.with_roles(load_roles(roles))
    dbo = MotionDatabase.cached(cache, clips, mirror_copies=mirror, schema=sch, progress=progress)
    return dbo, DatabaseSource(f"{len(clips)} clips from {folder}", folder=folder, db_path=cache, built=not existed)


# ----------------------------------------------------------------------------- files
@dataclass
class FileCatalog:
    """Data folders the page may read from, by name, and the files in them.

    Args:
        roots: ``{name: folder}``; names are short words (letters, digits, ``-``, ``_``).
        max_bytes: the largest file the page may load.
        max_files: at most this many files are listed per kind.
    """

    roots: Mapping[str, Path] = field(default_factory=dict)
    max_bytes: int = 64 * 1024 * 1024
    max_files: int = 2000

    def __post_init__(self) -> None:
        clean = {}
        for name, folder in self.roots.items():
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", name):
                raise ValueError(f"data folder name {name!r} must be 1-32 letters, digits, '-' or '_'")
            p = Path(folder).expanduser()
            if p.is_dir():
                clean[name] = p.resolve()
        self.roots = clean

    def list(self, kind: str) -> list[dict]:
        """``[{"id", "name", "root", "size"}]`` of the files of ``kind``, sorted."""
        exts = KINDS[kind]
        out: list[dict] = []
        for name, root in self.roots.items():
            for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "node_modules")
                for f in sorted(filenames):
                    if f.startswith(".") or not f.lower().endswith(exts):
                        continue
                    p = Path(dirpath) / f
                    try:
                        if p.is_symlink() or not p.is_file():
                            continue
                        size = p.stat().st_size
                    except OSError:
                        continue
                    if not _content_fits(p, kind, size):
                        continue
                    rel = p.relative_to(root).as_posix()
                    out.append({"id": f"{name}:{rel}", "name": rel, "root": name, "size": size})
                    if len(out) >= self.max_files:
                        return out
        return out

    def resolve(self, file_id: str, kind: str) -> Path:
        """The file behind an id, checked to be inside its data folder; :class:`DataError` otherwise."""
        if not isinstance(file_id, str) or ":" not in file_id:
            raise DataError(f"{file_id!r} is not a file id (expected 'folder:relative/path' from a file list)")
        root_name, rel = file_id.split(":", 1)
        root = self.roots.get(root_name)
        if root is None:
            raise DataError(f"unknown data folder {root_name!r}; known: {', '.join(self.roots) or 'none'}")
        pp = PurePosixPath(rel)
        if not rel or pp.is_absolute() or "\\" in rel or any(part in ("..", "") for part in pp.parts) \
                or rel.startswith("/") or "\x00" in rel:
            raise DataError(f"{file_id!r}: only plain relative paths inside a data folder are allowed")
        if not rel.lower().endswith(KINDS[kind]):
            raise DataError(f"{file_id!r}: a {kind} file must end with {' or '.join(KINDS[kind])}")
        p = root.joinpath(*pp.parts)
        try:
            real = p.resolve(strict=True)
        except (OSError, RuntimeError):
            raise DataError(f"{file_id!r}: no such file") from None
        if not real.is_relative_to(root) or not real.is_file():
            raise DataError(f"{file_id!r}: not a file inside the data folder {root_name!r}")
        if real.stat().st_size > self.max_bytes:
            raise DataError(f"{file_id!r}: larger than {self.max_bytes // (1024 * 1024)} MiB")
        return real

    def read(self, file_id: str, kind: str, reader: Callable[[Path], T]) -> T:
        """``reader(path)`` of the file behind an id; any failure is a :class:`DataError`
        (:meth:`explain`)."""
        path = self.resolve(file_id, kind)
        try:
            return reader(path)
        except Exception as e:
            raise DataError(self.explain(e, kind, {file_id: path})) from None

    def explain(self, error: BaseException, kind: str, files: Mapping[str, Path]) -> str:
        """One line for the page about a reader's failure on ``files`` (``{id: path}``):
        the reader's own message with each path replaced by its id (this machine's folders
        are not the page's business), or, for a failure it did not foresee (a hostile
        file: deep nesting, huge sizes), what it was and what to do."""
        names = ", ".join(files)
        if not isinstance(error, (MotionMatchError, ValueError, OSError)):
            return (f"{names}: not a {kind} file the viewer can read ({type(error).__name__}); choose another, "
                    "or check it with the command line first")
        text = str(error)
        for file_id, path in files.items():
            text = text.replace(str(path), file_id)
        for root in self.roots.values():
            text = text.replace(str(root), "")
        return text if any(file_id in text for file_id in files) else f"{names}: {text}"


#: JSON files of these kinds are listed only when their first bytes name a field they need
_JSON_MARKERS = {"scenario": ('"obstacles"', '"agents"', '"groups"'), "keypoints": ('"keypoints"',)}


def _content_fits(p: Path, kind: str, size: int) -> bool:
    """Whether a ``.json`` file looks like a file of ``kind`` (so a scenario is not offered
    as a keypoint recording and vice versa); other files pass. Reads at most 64 KiB."""
    if not p.name.lower().endswith(".json") or kind not in _JSON_MARKERS:
        return True
    try:
        with open(p, encoding="utf-8", errors="replace") as f:
            head = f.read(65536)
    except OSError:
        return False
    return any(m in head for m in _JSON_MARKERS[kind])


def checkout_scenarios() -> Path | None:
    """The repository's ``scenarios/`` folder when motionmatch runs from a source checkout
    (an editable install), else ``None``."""
    import motionmatch

    top = Path(motionmatch.__file__).resolve().parent.parent.parent  # <checkout>/src/motionmatch
    sc = top / "scenarios"
    if (top / "pyproject.toml").is_file() and sc.is_dir():
        return sc
    return None


def default_roots(dataset_folder: Path | None, extra: Sequence[str | os.PathLike] = (),
                  scenarios: str | os.PathLike | None = None) -> dict[str, Path]:
    """The configured data folders: ``data`` ($MOTIONMATCH_DATA or ../shared/data), the
    dataset in use, ``scenarios`` (``--scenarios``, else ``./scenarios`` if present, else
    the checkout's ``scenarios/`` when running from a source checkout), ``paths``
    (``./paths`` if present) and each ``--allow`` folder (``extra0``, ``extra1``, ...)."""
    from motionmatch.datasets import data_root

    roots: dict[str, Path] = {}
    dr = data_root()
    if dr is not None and dr.is_dir():
        roots["data"] = dr
    if dataset_folder is not None and Path(dataset_folder).is_dir():
        inside = "data" in roots and Path(dataset_folder).resolve().is_relative_to(roots["data"].resolve())
        if not inside:
            roots["dataset"] = Path(dataset_folder)
    sc = Path(scenarios) if scenarios is not None else Path.cwd() / "scenarios"
    if not sc.is_dir() and scenarios is None:
        sc = checkout_scenarios() or sc
    if sc.is_dir():
        roots["scenarios"] = sc
    pth = Path.cwd() / "paths"
    if pth.is_dir():
        roots["paths"] = pth
    for i, e in enumerate(extra):
        roots[f"extra{i}"] = Path(e)
    return roots
