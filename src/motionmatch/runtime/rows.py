"""Named arrays that share their first axis: the state of many objects of one kind, one row
each (a struct of arrays), so that compiled loops can run over any set of rows.

A :class:`RowArrays` is made from a spec ``{name: (shape of a row, dtype)}``; each name is
an attribute holding a ``[capacity, *shape]`` array. Rows are handed out by :meth:`take`
and given back by :meth:`give_back` (the next :meth:`take` reuses them); when none is free
the arrays grow (doubling) and their rows keep their indices. Growing replaces the arrays:
hold a row's index, not a view of it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["RowArrays", "row_field"]


class RowArrays:
    """Arrays named by ``spec`` (``{name: (row shape, dtype)}``) with ``capacity`` rows, all zero."""

    def __init__(self, spec: dict[str, tuple[tuple[int, ...], type]], capacity: int = 1):
        self._spec = dict(spec)
        self.capacity = max(int(capacity), 1)
        for name, (shape, dtype) in self._spec.items():
            setattr(self, name, np.zeros((self.capacity, *shape), dtype=dtype))
        self._free = list(range(self.capacity - 1, -1, -1))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._spec)

    def take(self) -> int:
        """A free row (its values are whatever the last holder left: set them)."""
        if not self._free:
            self.grow_to(2 * self.capacity)
        return self._free.pop()

    def give_back(self, row: int) -> None:
        """Row ``row`` is free again."""
        self._free.append(int(row))

    def view(self, cls):
        """The arrays as a ``cls`` (a named tuple whose fields are some of the names): one
        value to hand to a compiled kernel (valid until the arrays grow)."""
        return cls(*(getattr(self, name) for name in cls._fields))

    def copy_row(self, src: RowArrays, i: int, j: int) -> None:
        """Row ``j`` of these arrays := row ``i`` of ``src`` (same spec)."""
        for name in self._spec:
            getattr(self, name)[j] = getattr(src, name)[i]

    def grow_to(self, capacity: int) -> None:
        """At least ``capacity`` rows (new ones free, zero); the arrays are replaced."""
        old = self.capacity
        if capacity <= old:
            return
        for name, (shape, dtype) in self._spec.items():
            a = np.zeros((capacity, *shape), dtype=dtype)
            a[:old] = getattr(self, name)
            setattr(self, name, a)
        self.capacity = capacity
        self._free.extend(range(capacity - 1, old - 1, -1))


def row_field(where, name: str, cast=None, doc: str | None = None) -> property:
    """A property for one row of one array: ``where(obj) -> (row_arrays, row)`` says which,
    ``name`` the array. Reading gives ``cast(value)`` (a view of the row when ``cast`` is
    ``None``); assigning writes into the row."""
    def get(obj):
        arrays, row = where(obj)
        v = getattr(arrays, name)[row]
        return v if cast is None else cast(v)

    def put(obj, value) -> None:
        arrays, row = where(obj)
        getattr(arrays, name)[row] = value

    return property(get, put, doc=doc)
