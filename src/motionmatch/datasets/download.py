"""Find, download, verify and extract motion datasets.

Where data comes from, in the order :func:`resolve` tries:

1. a local copy under :func:`data_root` (``$MOTIONMATCH_DATA``, else ``../shared/data``);
2. the user's cache (:func:`default_cache_dir`: ``$MOTIONMATCH_CACHE``, else
   ``platformdirs.user_cache_dir("motionmatch")``), filled by an earlier :func:`fetch`;
3. a download (:func:`fetch`).

Cache layout::

    <cache>/downloads/<dataset>/<archive>        verified archive (kept, for re-extraction offline)
    <cache>/downloads/<dataset>/<archive>.part   partial download, continued by the next attempt
    <cache>/datasets/<dataset>/                  extracted archive, with a .motionmatch-extracted.json marker
    <cache>/checksums.json                       size and SHA-256 recorded on first download

Downloads use :mod:`urllib` only. They resume with HTTP ``Range`` requests from the
``.part`` file (and start over when a server ignores ``Range``), show a :mod:`tqdm` progress
bar on stderr, and are checked by size and SHA-256: against the catalogue where it knows
them, otherwise against the values recorded the first time (trust on first use). A file
that fails a check is deleted and a :class:`~motionmatch.errors.DatasetError` names the
file, the expected and the actual values. Archives are extracted into a temporary folder
beside the destination and renamed into place, so a folder in the cache is complete or
absent; members with absolute paths, ``..`` components, links or device entries are refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

import platformdirs
from tqdm.auto import tqdm

from motionmatch import __version__
from motionmatch._files import atomic_write
from motionmatch.datasets.catalogue import Dataset, get_dataset, guess_format
from motionmatch.errors import DatasetError

__all__ = [
    "CHECKSUMS_FILE",
    "ENV_CACHE",
    "ENV_DATA",
    "EXTRACTED_MARKER",
    "archive_path",
    "cached",
    "data_root",
    "default_cache_dir",
    "download_file",
    "extract_archive",
    "fetch",
    "find_local",
    "resolve",
    "sha256_file",
    "verify_file",
]

#: Environment variable naming the download cache folder.
ENV_CACHE = "MOTIONMATCH_CACHE"
#: Environment variable naming the folder of local dataset copies.
ENV_DATA = "MOTIONMATCH_DATA"
#: File (in the cache folder) recording sizes and digests seen on first download.
CHECKSUMS_FILE = "checksums.json"
#: Marker written into an extracted folder: archive digest and the extracted files' sizes.
EXTRACTED_MARKER = ".motionmatch-extracted.json"

_CHUNK = 1 << 16
_RETRY_BASE_DELAY = 0.5  # seconds; the n-th retry waits n times this (tests set it to 0)
_USER_AGENT = f"motionmatch/{__version__} (python-urllib)"


# ------------------------------------------------------------------------- places
def default_cache_dir() -> Path:
    """The download cache: ``$MOTIONMATCH_CACHE`` if set, else the platform's user cache folder."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("motionmatch"))


def data_root() -> Path | None:
    """The folder of local dataset copies.

    ``$MOTIONMATCH_DATA`` if set (returned even if it does not exist, so that messages can
    name it), else ``../shared/data`` relative to the current directory if that folder
    exists, else ``None``.
    """
    env = os.environ.get(ENV_DATA)
    if env:
        return Path(env).expanduser()
    guess = Path.cwd().parent / "shared" / "data"
    return guess if guess.is_dir() else None


def _has_bvh(folder: Path) -> bool:
    for pattern in ("*.bvh", "*.BVH"):
        if next(folder.rglob(pattern), None) is not None:
            return True
    return False


def find_local(name: str | Dataset, *, root: str | Path | None = None) -> Path | None:
    """A local copy of dataset ``name`` under ``root`` (default :func:`data_root`), or ``None``.

    The catalogue entry's ``local_names`` are tried in order (for ``lafan1``: ``lafan1``,
    then ``lafan1-60fps``; for ``bandai-namco-1``: ``bandai-namco/dataset-1``, ...); the first
    existing folder with at least one BVH file wins.

    Raises:
        DatasetError: ``name`` is not in the catalogue.
    """
    ds = get_dataset(name)
    base = Path(root).expanduser() if root is not None else data_root()
    if base is None or not base.is_dir():
        return None
    for sub in ds.local_names:
        folder = base / sub
        if folder.is_dir() and _has_bvh(folder):
            return folder
    return None


def _cache_root(cache_dir: str | Path | None) -> Path:
    return Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()


def archive_path(name: str | Dataset, *, cache_dir: str | Path | None = None) -> Path:
    """Where the archive of dataset ``name`` is (or will be) stored in the cache.

    Saving a manually downloaded archive at this path lets :func:`fetch` use it without
    network access (it is still checked against the known size and SHA-256).
    """
    ds = get_dataset(name)
    return _cache_root(cache_dir) / "downloads" / ds.name / ds.filename


def _extract_dir(ds: Dataset, root: Path) -> Path:
    return root / "datasets" / ds.name


# ------------------------------------------------------------------------- checksums
def sha256_file(path: str | Path) -> str:
    """Lower-case hex SHA-256 of a file's content."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_file(
    path: str | Path,
    *,
    size: int | None = None,
    sha256: str | None = None,
    source: str = "expected",
    hint: str = "",
) -> tuple[int, str]:
    """Check a file's size (bytes) and SHA-256; delete it and raise if either differs.

    Args:
        path: the file.
        size: expected size in bytes, or ``None`` to skip the size check.
        sha256: expected hex digest, or ``None`` to skip the digest check.
        source: where the expectation comes from, for the message (``"catalogue"``, ...).
        hint: a sentence appended to the error message.

    Returns:
        ``(size, sha256)`` actually found.

    Raises:
        DatasetError: a mismatch; the message names the file, expected and actual values.
    """
    path = Path(path)
    actual_size = path.stat().st_size
    problem = None
    if size is not None and actual_size != size:
        problem = f"size mismatch: expected {size} bytes ({source}), got {actual_size} bytes"
        digest = None
    else:
        digest = sha256_file(path)
        if sha256 is not None and digest != sha256.lower():
            problem = f"SHA-256 mismatch: expected {sha256.lower()} ({source}), got {digest}"
    if problem is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        msg = f"{path}: {problem}; the file was deleted."
        raise DatasetError(f"{msg} {hint}".strip())
    assert digest is not None
    return actual_size, digest


def _records_path(root: Path) -> Path:
    return root / CHECKSUMS_FILE


def _load_records(root: Path) -> dict[str, dict[str, Any]]:
    path = _records_path(root)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DatasetError(f"{path}: cannot read the checksum records ({e}); delete the file to start afresh") from e
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object of checksum records; delete the file to start afresh")
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def _save_record(root: Path, key: str, record: Mapping[str, Any]) -> None:
    records = _load_records(root)
    records[key] = dict(record)
    with atomic_write(_records_path(root), "w", encoding="utf-8") as f:
        json.dump(records, f, indent=2, sort_keys=True)
        f.write("\n")


def _record_key(ds: Dataset) -> str:
    return f"{ds.name}/{ds.filename}"


# ------------------------------------------------------------------------- downloading
class _Interrupted(Exception):
    """A transient failure: the ``.part`` file is kept and the download may be retried."""


_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)", re.IGNORECASE)


def _parse_content_range(value: str | None) -> tuple[int, int | None] | None:
    """``"bytes 100-199/1000"`` -> ``(100, 1000)``; total ``None`` for ``*``."""
    if not value:
        return None
    m = _CONTENT_RANGE.match(value.strip())
    if not m:
        return None
    total = None if m.group(3) == "*" else int(m.group(3))
    return int(m.group(1)), total


def _total_from_416(value: str | None) -> int | None:
    m = re.match(r"bytes\s+\*/(\d+)", value or "", re.IGNORECASE)
    return int(m.group(1)) if m else None


def _int_header(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _download_once(
    url: str,
    part: Path,
    *,
    expected_size: int | None,
    progress: bool,
    timeout: float,
    desc: str,
    source: str = "expected",
    hint: str = "",
) -> None:
    """One HTTP request continuing ``part``; returns when the server has sent everything.

    Raises:
        _Interrupted: the connection dropped, timed out or the server sent a 5xx; ``part``
            keeps what arrived.
        urllib.error.HTTPError / URLError / OSError: the request failed outright.
        DatasetError: the server announces a size other than the expected one.
    """
    offset = part.stat().st_size if part.exists() else 0
    if expected_size is not None and offset > expected_size:
        part.unlink()
        offset = 0
    if expected_size is not None and offset == expected_size and offset > 0:
        return  # complete already (an earlier run was stopped before verification)
    headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:
            total = _total_from_416(e.headers.get("Content-Range"))
            e.close()
            if total == offset:
                return  # the part file already holds the whole file
            part.unlink()
            raise _Interrupted(f"the server refused to resume at byte {offset}; starting over") from e
        if e.code >= 500:
            e.close()
            raise _Interrupted(f"HTTP {e.code} {e.reason}") from e
        raise
    except (TimeoutError, ConnectionResetError, http.client.RemoteDisconnected) as e:
        raise _Interrupted(f"{type(e).__name__}: {e}") from e

    with response:
        length = _int_header(response.headers.get("Content-Length"))
        if response.status == 206:
            parsed = _parse_content_range(response.headers.get("Content-Range"))
            if parsed is None or parsed[0] != offset:
                part.unlink(missing_ok=True)
                raise _Interrupted(
                    f"the server sent range {response.headers.get('Content-Range')!r} for a request "
                    f"from byte {offset}; starting over"
                )
            total = parsed[1]
            mode = "ab"
        else:
            # 200: the whole file, whatever we asked for (servers may ignore Range).
            offset = 0
            total = length
            mode = "wb"
        if expected_size is not None and total is not None and total != expected_size:
            part.unlink(missing_ok=True)
            msg = (
                f"{part.name[: -len('.part')]} from {url}: size mismatch: expected {expected_size} bytes ({source}), "
                f"the server announces {total} bytes; nothing was kept."
            )
            raise DatasetError(f"{msg} {hint}".strip())
        received = 0
        with (
            open(part, mode) as f,
            tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=desc,
                disable=not progress,
                leave=True,
            ) as bar,
        ):
            while True:
                try:
                    chunk = response.read(_CHUNK)
                except (OSError, http.client.HTTPException) as e:
                    raise _Interrupted(
                        f"connection lost after {offset + received} bytes ({type(e).__name__}: {e})"
                    ) from e
                if not chunk:
                    break
                f.write(chunk)
                received += len(chunk)
                bar.update(len(chunk))
        if length is not None and received < length:
            raise _Interrupted(f"connection closed after {offset + received} of {offset + length} bytes")


def _describe(e: BaseException) -> str:
    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code} {e.reason}"
    if isinstance(e, urllib.error.URLError):
        reason = e.reason
        return str(reason.strerror or reason) if isinstance(reason, OSError) else str(reason)
    return f"{type(e).__name__}: {e}"


def download_file(
    urls: str | Sequence[str],
    dest: str | Path,
    *,
    size: int | None = None,
    sha256: str | None = None,
    progress: bool = True,
    retries: int = 3,
    timeout: float = 30.0,
    source: str = "expected",
    hint: str = "",
    verify_hint: str = "",
) -> tuple[int, str]:
    """Download a file to ``dest``, resuming from ``dest + ".part"``, and verify it.

    Mirrors in ``urls`` are tried in order; an interrupted transfer is retried up to
    ``retries`` times per URL, each time continuing the ``.part`` file with a ``Range``
    request. The file is renamed onto ``dest`` only once complete and verified.

    Args:
        urls: one URL or several mirrors of the same file.
        dest: final path of the file.
        size: expected size in bytes, or ``None``.
        sha256: expected hex SHA-256, or ``None``.
        progress: show a tqdm progress bar on stderr.
        retries: attempts after an interruption, per URL.
        timeout: socket timeout in seconds.
        source: where ``size``/``sha256`` come from, for error messages.
        hint: what the user can do if every URL fails; appended to the error message.
        verify_hint: what the user can do if verification fails; appended to the message.

    Returns:
        ``(size, sha256)`` of the downloaded file.

    Raises:
        DatasetError: every URL failed (the message lists why), or verification failed
            (the bad file is deleted).
    """
    url_list = (urls,) if isinstance(urls, str) else tuple(urls)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    errors: list[str] = []
    done = False
    for url in url_list:
        attempt = 0
        while True:
            try:
                _download_once(
                    url,
                    part,
                    expected_size=size,
                    progress=progress,
                    timeout=timeout,
                    desc=dest.name,
                    source=source,
                    hint=verify_hint,
                )
                done = True
                break
            except _Interrupted as e:
                attempt += 1
                if attempt > retries:
                    errors.append(f"{url}: {e}")
                    break
                time.sleep(_RETRY_BASE_DELAY * attempt)
            except DatasetError:
                raise
            except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
                errors.append(f"{url}: {_describe(e)}")
                break
        if done:
            break
    if not done:
        kept = part.stat().st_size if part.exists() else 0
        resume = f" {kept} bytes are kept in {part}; run again to resume." if kept else ""
        msg = f"cannot download {dest.name}: " + "; ".join(errors) + "." + resume
        raise DatasetError(f"{msg} {hint}".strip())
    result = verify_file(part, size=size, sha256=sha256, source=source, hint=verify_hint)
    os.replace(part, dest)
    return result


# ------------------------------------------------------------------------- extraction
def _member_path(name: str, archive: Path) -> PurePosixPath | None:
    """The safe relative path of an archive member, ``None`` to skip it.

    Raises:
        DatasetError: absolute path, drive letter or ``..`` component.
    """
    norm = name.replace("\\", "/")
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        raise DatasetError(f"{archive}: unsafe archive member {name!r} (absolute path); refusing to extract")
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise DatasetError(f"{archive}: unsafe archive member {name!r} ('..' in the path); refusing to extract")
    if not parts or parts[0] == "__MACOSX" or parts[-1].startswith("._"):
        return None  # empty name or macOS resource-fork litter
    return PurePosixPath(*parts)


def _inside(root: Path, rel: PurePosixPath, archive: Path, name: str) -> Path:
    target = (root / rel).resolve()
    if not target.is_relative_to(root.resolve()):
        raise DatasetError(f"{archive}: unsafe archive member {name!r} (leaves the extraction folder)")
    return target


def _zip_members(archive: Path, zf: zipfile.ZipFile) -> Iterator[tuple[zipfile.ZipInfo, PurePosixPath]]:
    for info in zf.infolist():
        rel = _member_path(info.filename, archive)
        if rel is None:
            continue
        mode = (info.external_attr >> 16) & 0o170000
        if mode and mode not in (0o100000, 0o040000):  # neither a regular file nor a folder
            raise DatasetError(f"{archive}: unsafe archive member {info.filename!r} (a link or special file)")
        yield info, rel


def _extract_zip(archive: Path, out: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        members = list(_zip_members(archive, zf))  # check every member before writing any
        for info, rel in members:
            target = _inside(out, rel, archive, info.filename)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)


_TAR_MODES = {"tar": "r:", "tar.gz": "r:gz", "tar.bz2": "r:bz2", "tar.xz": "r:xz"}


def _extract_tar(archive: Path, out: Path, fmt: str) -> None:
    with tarfile.open(archive, _TAR_MODES[fmt]) as tf:
        members = []
        for m in tf.getmembers():  # check every member before writing any
            rel = _member_path(m.name, archive)
            if rel is None:
                continue
            if not (m.isfile() or m.isdir()):
                raise DatasetError(f"{archive}: unsafe archive member {m.name!r} (a link or special file)")
            members.append((m, rel))
        for m, rel in members:
            target = _inside(out, rel, archive, m.name)
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(m)
            if src is None:
                continue
            with src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)


def _file_sizes(folder: Path) -> dict[str, int]:
    return {
        p.relative_to(folder).as_posix(): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != EXTRACTED_MARKER
    }


def _replace_dir(new: Path, dest: Path) -> None:
    """Rename folder ``new`` onto ``dest``, replacing any folder there."""
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(dest, old)
        try:
            os.replace(new, dest)
        except BaseException:
            os.replace(old, dest)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(new, dest)


def extract_archive(
    archive: str | Path,
    dest: str | Path,
    *,
    archive_format: str | None = None,
    marker: Mapping[str, Any] | None = None,
) -> Path:
    """Extract a zip or tar archive into folder ``dest``, safely and atomically.

    Every member is checked before anything is written: absolute paths, ``..``
    components, links and special files are refused. The archive is extracted into a
    temporary folder beside ``dest`` that is then renamed onto ``dest`` (replacing an
    existing folder), so ``dest`` is never half-written. A marker file
    (:data:`EXTRACTED_MARKER`) records ``marker`` and the size of every extracted file.

    Args:
        archive: the archive file.
        dest: the folder to create (or replace).
        archive_format: one of ``zip``, ``tar``, ``tar.gz``, ``tar.bz2``, ``tar.xz``;
            default: guessed from the file name.
        marker: extra JSON data to store in the marker (e.g. the archive's SHA-256).

    Returns:
        ``dest``.

    Raises:
        DatasetError: unsafe member, or the archive is damaged or not of that format.
    """
    archive = Path(archive)
    dest = Path(dest)
    fmt = archive_format or guess_format(archive.name)
    if fmt != "zip" and fmt not in _TAR_MODES:
        raise DatasetError(f"{archive}: unsupported archive format {fmt!r}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".extracting", dir=dest.parent))
    try:
        try:
            if fmt == "zip":
                _extract_zip(archive, tmp)
            else:
                _extract_tar(archive, tmp, fmt)
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as e:
            raise DatasetError(
                f"{archive}: cannot extract it as a {fmt} archive ({type(e).__name__}: {e}); "
                "delete the file and run again to download it afresh"
            ) from e
        info = dict(marker or {})
        info["archive"] = archive.name
        info["extracted"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        info["files"] = _file_sizes(tmp)
        (tmp / EXTRACTED_MARKER).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        _replace_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _extraction_ok(folder: Path, sha256: str | None) -> bool:
    """``folder`` holds a complete extraction of the archive with digest ``sha256``."""
    marker = folder / EXTRACTED_MARKER
    if not marker.is_file():
        return False
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
        files = info["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if sha256 is not None and info.get("sha256") != sha256:
        return False
    for rel, size in files.items():
        p = folder / rel
        try:
            if p.stat().st_size != size:
                return False
        except OSError:
            return False
    return True


def _bvh_folder(folder: Path, ds: Dataset) -> Path:
    """The folder of ``ds``'s BVH files inside its extracted archive."""
    for sub in ds.bvh_subdirs:
        candidate = folder / sub if sub else folder
        if candidate.is_dir() and any(p.suffix.lower() == ".bvh" for p in candidate.iterdir()):
            return candidate
    found = [p for p in folder.rglob("*") if p.suffix.lower() == ".bvh" and p.is_file()]
    if not found:
        raise DatasetError(f"{folder}: the archive of {ds.name!r} contains no .bvh files")
    return Path(os.path.commonpath([str(p.parent) for p in found]))


# ------------------------------------------------------------------------- datasets
def _expectations(ds: Dataset, root: Path) -> tuple[int | None, str | None, str, dict[str, Any] | None]:
    """Expected (size, sha256), a description of their source, and the TOFU record if any."""
    record = None
    if ds.size is None or ds.sha256 is None:
        record = _load_records(root).get(_record_key(ds))
    size = ds.size if ds.size is not None else (record or {}).get("size")
    sha = ds.sha256 if ds.sha256 is not None else (record or {}).get("sha256")
    if record is not None:
        source = f"recorded on first download in {_records_path(root)}"
    else:
        source = "catalogue"
    return size, sha, source, record


def _offline_hint(ds: Dataset, archive: Path) -> str:
    if ds.local_names:
        subs = " or ".join(repr(n) for n in ds.local_names)
        local = f"set {ENV_DATA} to a folder with a sub-folder {subs} holding its BVH files"
    else:
        local = "load a local copy of its BVH files with load_folder()"
    return (
        f"If this machine is offline, use a local copy of {ds.title}: {local}; "
        f"or download {ds.urls[0]} by hand, save it as {archive}, and run again."
    )


def cached(name: str | Dataset, *, cache_dir: str | Path | None = None) -> Path | None:
    """The folder of BVH files of dataset ``name`` in the cache, or ``None`` if not there.

    Never touches the network; checks the extraction marker (archive digest, file sizes).
    """
    ds = get_dataset(name)
    root = _cache_root(cache_dir)
    folder = _extract_dir(ds, root)
    try:
        _, sha, _, _ = _expectations(ds, root)
    except DatasetError:
        sha = ds.sha256
    if not _extraction_ok(folder, sha):
        return None
    try:
        return _bvh_folder(folder, ds)
    except DatasetError:
        return None


def fetch(
    name: str | Dataset,
    *,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    force: bool = False,
    retries: int = 3,
    timeout: float = 30.0,
) -> Path:
    """Download (if needed), verify and extract dataset ``name``; return its BVH folder.

    A second call finds the extraction in the cache and returns at once, without network.
    If only the archive is cached (e.g. saved there by hand, see :func:`archive_path`), it
    is verified and extracted without network.

    Args:
        name: a catalogue name (see :func:`~motionmatch.datasets.list_datasets`) or a
            :class:`~motionmatch.datasets.Dataset`.
        cache_dir: the cache folder (default :func:`default_cache_dir`).
        progress: show a progress bar on stderr while downloading.
        force: delete the cached archive and extraction and download again (the download
            is still checked against the catalogue or the first-download record).
        retries: attempts after an interrupted transfer, per URL.
        timeout: socket timeout in seconds.

    Returns:
        The folder holding the dataset's BVH files.

    Raises:
        DatasetError: unknown name; download impossible (the message says how to use a
            local copy or where to put a manual download); size or SHA-256 mismatch (the bad
            file is deleted); unsafe or damaged archive.
    """
    ds = get_dataset(name)
    root = _cache_root(cache_dir)
    archive = root / "downloads" / ds.name / ds.filename
    folder = _extract_dir(ds, root)
    size, sha, source, record = _expectations(ds, root)
    tofu_hint = ""
    if record is not None:
        tofu_hint = (
            f"If the file upstream changed on purpose, delete the entry {_record_key(ds)!r} "
            f"from {_records_path(root)} and run again."
        )

    if force:
        shutil.rmtree(folder, ignore_errors=True)
        for p in (archive, archive.with_name(archive.name + ".part")):
            p.unlink(missing_ok=True)
    elif _extraction_ok(folder, sha):
        return _bvh_folder(folder, ds)

    if archive.is_file():
        got_size, got_sha = verify_file(archive, size=size, sha256=sha, source=source, hint=tofu_hint)
    else:
        got_size, got_sha = download_file(
            ds.urls,
            archive,
            size=size,
            sha256=sha,
            progress=progress,
            retries=retries,
            timeout=timeout,
            source=source,
            hint=_offline_hint(ds, archive),
            verify_hint=tofu_hint,
        )
    if record is None and (ds.size is None or ds.sha256 is None):
        _save_record(
            root,
            _record_key(ds),
            {
                "size": got_size,
                "sha256": got_sha,
                "url": ds.urls[0],
                "first_seen": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            },
        )
    extract_archive(
        archive,
        folder,
        archive_format=ds.archive_format,
        marker={"dataset": ds.name, "size": got_size, "sha256": got_sha},
    )
    return _bvh_folder(folder, ds)


def resolve(
    name: str | Dataset,
    *,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    download: bool = True,
) -> Path:
    """The folder of BVH files of dataset ``name``: local copy, else cache, else download.

    Args:
        name: catalogue name or :class:`~motionmatch.datasets.Dataset`.
        cache_dir: the cache folder (default :func:`default_cache_dir`).
        progress: show a progress bar if a download is needed.
        download: allow a download; if ``False`` and there is no local or cached copy,
            raise.

    Raises:
        DatasetError: as :func:`fetch`, or no copy found with ``download=False``.
    """
    ds = get_dataset(name)
    local = find_local(ds)
    if local is not None:
        return local
    hit = cached(ds, cache_dir=cache_dir)
    if hit is not None:
        return hit
    if not download:
        root = _cache_root(cache_dir)
        raise DatasetError(
            f"dataset {ds.name!r} is neither in {ENV_DATA} ({data_root()}) nor in the cache ({root}); "
            f"run `motionmatch datasets fetch {ds.name}` or set {ENV_DATA} to a local copy"
        )
    return fetch(ds, cache_dir=cache_dir, progress=progress)
