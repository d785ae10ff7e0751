"""Atomic file writing: a file we write is either complete or absent, never partial."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix) for the body to write; renamed onto
    ``path`` when the body succeeds, removed when it fails, so that ``path`` is either
    complete or untouched. An OS error names ``path``, never the temporary file."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder; give a file name", str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=path.parent)
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
