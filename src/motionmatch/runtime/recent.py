"""Bounded per-step records: the last rows of a series kept in full, the older ones folded
away, so that a character, a search log or a path follower can run for hours in constant
memory.

:class:`RecentRows` keeps named columns (numpy arrays, one row per step or per search).
It holds between ``keep`` and ``keep + block`` rows: when ``keep + block`` rows are
there, the oldest ``block`` are handed to an ``on_drop(columns)`` callback (which folds
them into running aggregates: sums, counts, masks) and forgotten. Rows stay contiguous
and in order (no wrap-around), so a column is a plain ``[n, ...]`` view; dropping costs
one copy of ``keep`` rows every ``block`` appends. With ``packed=True`` a row's values lie
side by side (one record of a structured array, the columns its fields' views): appending
then touches one or two cache lines, not one per column, which counts when thousands of
series are appended to in turn (a crowd's search logs).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["RecentRows"]


class RecentRows:
    """The last ``keep`` (to ``keep + block``) rows of named columns.

    Args:
        keep: rows always kept (the recent window), at least 1.
        block: rows dropped at a time once ``keep + block`` are held (default
            ``max(keep // 8, 1)``).
        on_drop: ``on_drop({name: [block, ...] array})`` is called with the rows about to
            be dropped (oldest first), e.g. to fold them into aggregates.
        initial: rows allocated at first (the buffers double up to ``keep + block``);
            ``None``: ``keep + block`` at once (fixed memory from the start).
        packed: the rows' values side by side in one structured buffer (columns are then
            strided views, not contiguous arrays).

    The first :meth:`append` fixes the columns: their names, each row's shape and dtype
    (from the values given; pass numpy scalars or arrays to choose a dtype).
    """

    def __init__(self, keep: int, block: int | None = None, on_drop: Callable[[dict], None] | None = None,
                 initial: int | None = 64, packed: bool = False):
        if int(keep) < 1:
            raise ValueError(f"keep must be >= 1, got {keep!r}")
        self.keep = int(keep)
        self.block = max(int(block if block is not None else self.keep // 8), 1)
        self.on_drop = on_drop
        self._initial = self.capacity if initial is None else max(min(int(initial), self.capacity), 1)
        self._cols: dict[str, np.ndarray] = {}
        self._packed = bool(packed)
        self._buf: np.ndarray | None = None  # (packed: the structured buffer whose fields are the columns)
        self._n = 0
        #: rows dropped so far (folded away): the row held at index ``i`` is row ``dropped + i`` of the series
        self.dropped = 0

    @property
    def capacity(self) -> int:
        """The most rows ever held: ``keep + block``."""
        return self.keep + self.block

    def __len__(self) -> int:
        return self._n

    @property
    def total(self) -> int:
        """Rows appended so far (held and dropped)."""
        return self.dropped + self._n

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._cols)

    def nbytes(self) -> int:
        """Bytes of the buffers allocated now."""
        return sum(a.nbytes for a in self._cols.values())

    def append(self, **values) -> None:
        """Add one row: a value (scalar or array) per column."""
        if not self._cols:
            kinds = {name: np.asarray(v) for name, v in values.items()}
            if self._packed:
                self._buf = np.empty(self._initial, dtype=[(name, v.dtype, v.shape) for name, v in kinds.items()])
                self._cols = {name: self._buf[name] for name in kinds}
            else:
                self._cols = {name: np.empty((self._initial, *v.shape), dtype=v.dtype) for name, v in kinds.items()}
        elif values.keys() != self._cols.keys():
            raise KeyError(f"columns are {sorted(self._cols)}, got {sorted(values)}")
        self._put(values.values())

    def append_values(self, *values) -> None:
        """:meth:`append` of a row given as one value per column in the columns' order
        (fixed by the first :meth:`append`, which must have come before): the short path
        of a log appended to many times a frame."""
        if not self._cols:
            raise KeyError("no columns yet: the first row is added with append(name=value, ...)")
        if len(values) != len(self._cols):
            raise KeyError(f"{len(values)} values for the {len(self._cols)} columns {list(self._cols)}")
        self._put(values)

    def _put(self, values) -> None:
        """Write one row (a value per column, in their order) after the held ones."""
        if self._n == self.capacity:
            self._drop_block()
        elif self._n == len(next(iter(self._cols.values()))):
            self._grow()
        n = self._n
        if self._buf is not None:
            self._buf[n] = tuple(values)
        else:
            for a, v in zip(self._cols.values(), values):
                a[n] = v
        self._n = n + 1

    def column(self, name: str) -> np.ndarray:
        """``[n, ...]`` the held rows of column ``name``, oldest first (a view: copy to keep)."""
        if name not in self._cols:
            if not self._cols:
                raise KeyError(f"no rows yet (column {name!r})")
            raise KeyError(f"no column {name!r}; columns: {sorted(self._cols)}")
        return self._cols[name][: self._n]

    def clear(self) -> None:
        """Forget every row (the columns and their buffers stay)."""
        self.dropped += self._n
        self._n = 0

    def _grow(self) -> None:
        size = min(2 * len(next(iter(self._cols.values()))), self.capacity)
        if self._buf is not None:
            b = np.empty(size, dtype=self._buf.dtype)
            b[: self._n] = self._buf[: self._n]
            self._buf = b
            self._cols = {name: b[name] for name in self._cols}
            return
        for name, a in self._cols.items():
            b = np.empty((size, *a.shape[1:]), dtype=a.dtype)
            b[: self._n] = a[: self._n]
            self._cols[name] = b

    def _drop_block(self) -> None:
        """Hand the oldest ``block`` rows to ``on_drop`` and move the rest to the front."""
        k = self.block
        if self.on_drop is not None:
            self.on_drop({name: a[:k] for name, a in self._cols.items()})
        if self._buf is not None:
            self._buf[: self._n - k] = self._buf[k: self._n]  # (numpy copies overlapping slices safely)
        else:
            for a in self._cols.values():
                a[: self._n - k] = a[k: self._n]
        self._n -= k
        self.dropped += k
