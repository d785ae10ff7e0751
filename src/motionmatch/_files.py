"""Atomic file writing: a file we write is either complete or absent, never partial, and
the temporary files of writers that died (killed, or their machine stopped) are removed by
the next write of the same file."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

STALE_TEMP_S = 600.0
"""Seconds after which a temporary file whose writer cannot be identified (one of another
machine, or one named before writers put their process id in the name) counts as left
behind by a dead writer and is removed."""

_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]
_WRITER = re.compile(r"([0-9a-f]{6})-(\d+)\.[^.]+")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_stale_temps(path: str | Path, now: float | None = None) -> list[Path]:
    """Remove the temporary files that interrupted writes of ``path`` left beside it
    (``.NAME.HOST-PID.XXXX.tmpSUFFIX``, :func:`atomic_path`'s): those of a process of this
    machine that is gone, and those older than :data:`STALE_TEMP_S` whose writer cannot be
    checked. A live writer's file is kept. Returns the files removed."""
    path = Path(path)
    head, tail = f".{path.name}.", f".tmp{path.suffix}"
    now = time.time() if now is None else now
    removed = []
    try:
        names = [n for n in os.listdir(path.parent or ".") if n.startswith(head) and n.endswith(tail)]
    except OSError:
        return removed
    for name in names:
        tmp = path.parent / name
        m = _WRITER.fullmatch(name[len(head):-len(tail)])
        try:
            if m and m.group(1) == _HOST:
                stale = not _alive(int(m.group(2)))
            else:
                stale = now - tmp.lstat().st_mtime > STALE_TEMP_S
            if stale and not tmp.is_dir():
                tmp.unlink()
                removed.append(tmp)
        except OSError:  # gone meanwhile, or not ours to remove
            continue
    return removed


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix) for the body to write; renamed onto
    ``path`` when the body succeeds, removed when it fails, so that ``path`` is either
    complete or untouched. An OS error names ``path``, never the temporary file. The
    temporary files of earlier writes of ``path`` whose writer died are removed first
    (:func:`remove_stale_temps`)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder; give a file name", str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_HOST}-{os.getpid()}.", suffix=f".tmp{path.suffix}",
                                   dir=path.parent)
    except OSError as e:
        raise type(e)(e.errno, f"cannot write here ({e.strerror})", str(path)) from None
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes files owner-only; use the usual permissions
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename in (tmp, Path(tmp)):
            raise type(e)(e.errno, e.strerror, str(path)) from None
        raise


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", **open_kwargs) -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success rename it onto ``path``.

    If the body raises, the temporary file is removed and ``path`` is left untouched.
    """
    with atomic_path(path) as tmp, open(tmp, mode, **open_kwargs) as f:
        yield f
        f.flush()
        os.fsync(f.fileno())


def not_npz(path: Path) -> str | None:
    """What ``path`` is when it is plainly no ``.npz`` (zip) file: ``"no such file"``, ``"a folder"``,
    ``"an empty file"``, ``"a BVH file"`` or ``"corrupt or not an .npz file"``; ``None`` for a zip file."""
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "a folder"
    with open(path, "rb") as f:
        head = f.read(4)
    if head == b"PK\x03\x04":
        return None
    if not head:
        return "an empty file"
    return "a BVH file" if head == b"HIER" or path.suffix.lower() == ".bvh" else "corrupt or not an .npz file"


@contextmanager
def training_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` + ``.lock`` while the body runs (POSIX ``flock``:
    released when the process ends, however it ends), so that one process trains and caches
    a model at a time and the others wait, then read its cache; where the platform has no
    ``flock`` (Windows), no lock."""
    try:
        import fcntl
    except ImportError:  # (Windows)
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
