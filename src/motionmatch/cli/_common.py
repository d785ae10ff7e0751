"""Small helpers shared by the CLI commands."""

from __future__ import annotations

from pathlib import Path

from motionmatch.errors import MotionMatchError


def require_suffix(path: str | Path | None, suffixes: tuple[str, ...], what: str) -> Path | None:
    """``path`` as a ``Path`` if its extension is one of ``suffixes`` (``None`` passes
    through); otherwise a one-line error naming the option and the allowed extensions."""
    if path is None:
        return None
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise MotionMatchError(f"{p}: the {what} must be a {' or '.join(suffixes)} file")
    return p
