"""Tag queries: boolean expressions over clip tags, e.g. ``walk | run``, ``jump``, ``!dance``.

Grammar: ``expr := term ('|' term)*``, ``term := factor ('&' factor)*`` (juxtaposition
also means AND), ``factor := '!' factor | '(' expr ')' | TAG``. Tags are case-insensitive
words made of letters, digits, ``_`` and ``-``. ``*`` matches every frame.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from motionmatch.errors import MotionMatchError


class TagQueryError(MotionMatchError, ValueError):
    """A tag query cannot be parsed or names no known tag."""


_TOKENS = re.compile(r"\s*(?:([()!|&*])|([A-Za-z0-9_\-]+))")


def _tokenize(text: str) -> list[str]:
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOKENS.match(text, pos)
        if not m or m.end() == pos:
            raise TagQueryError(f"tag query {text!r}: unexpected character at position {pos}: {text[pos]!r}")
        out.append(m.group(1) or m.group(2).lower())
        pos = m.end()
    return out


def tag_mask(query: str, clip_tags: Sequence[Sequence[str]], frame_clip: np.ndarray, *,
             known: set[str] | None = None, strict: bool = True) -> np.ndarray:
    """Frames ``[N]`` bool whose clip's tags satisfy ``query``.

    Args:
        query: the expression.
        clip_tags: tags of each clip.
        frame_clip: ``[N]`` clip index of each frame.
        known: all tags of the database; a tag outside it is an error (typo protection).
        strict: ``False``: a tag outside ``known`` is no error but a tag no clip has (so
            the engine's own queries, e.g. ``!dance & !punch``, mean the same on data
            without some of their tags).
    """
    tokens = _tokenize(query)
    if not tokens:
        raise TagQueryError("empty tag query; use '*' for all frames")
    sets = [frozenset(t.lower() for t in tags) for tags in clip_tags]
    known = {t.lower() for s in sets for t in s} if known is None else {k.lower() for k in known}
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def expr() -> np.ndarray:
        v = term()
        while peek() == "|":
            take()
            v = v | term()
        return v

    def term() -> np.ndarray:
        v = factor()
        while peek() is not None and peek() not in ("|", ")"):
            if peek() == "&":
                take()
            v = v & factor()
        return v

    def factor() -> np.ndarray:
        t = peek()
        if t is None:
            raise TagQueryError(f"tag query {query!r} ends unexpectedly")
        take()
        if t == "!":
            return ~factor()
        if t == "(":
            v = expr()
            if peek() != ")":
                raise TagQueryError(f"tag query {query!r}: missing ')'")
            take()
            return v
        if t == "*":
            return np.ones(len(sets), dtype=bool)
        if t in (")", "|", "&"):
            raise TagQueryError(f"tag query {query!r}: unexpected {t!r}")
        if t not in known:
            if not strict:
                return np.zeros(len(sets), dtype=bool)
            raise TagQueryError(f"tag query {query!r}: unknown tag {t!r}; known tags: {', '.join(sorted(known))}")
        return np.array([t in s for s in sets], dtype=bool)

    clip_mask = expr()
    if pos != len(tokens):
        raise TagQueryError(f"tag query {query!r}: unexpected {tokens[pos]!r}")
    return clip_mask[np.asarray(frame_clip)]
