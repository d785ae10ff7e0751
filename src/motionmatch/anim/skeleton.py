"""The skeleton: joint names, hierarchy, rest offsets, end sites and BVH channel layout."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from motionmatch.errors import SkeletonError

POSITION_CHANNELS = ("Xposition", "Yposition", "Zposition")
ROTATION_CHANNELS = ("Xrotation", "Yrotation", "Zrotation")
DEFAULT_ROOT_CHANNELS = ("Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation")
DEFAULT_JOINT_CHANNELS = ("Zrotation", "Yrotation", "Xrotation")


@dataclass(frozen=True, eq=False)
class Skeleton:
    """A joint hierarchy in metres.

    Attributes:
        names: joint names, ``J`` of them, unique.
        parents: ``[J]`` int, parent index of each joint, ``-1`` for the root; every
            parent comes before its children (``parents[j] < j``).
        offsets: ``[J, 3]`` rest translation of each joint relative to its parent (m).
        end_site_parents: ``[E]`` int, the joint each BVH ``End Site`` hangs from.
        end_site_offsets: ``[E, 3]`` offsets of the end sites from their joints (m).
        channels: per joint, the BVH channel names in file order, e.g.
            ``("Zrotation", "Yrotation", "Xrotation")``. Position channels replace the
            joint's offset with an animated translation.
    """

    names: tuple[str, ...]
    parents: NDArray[np.int64]
    offsets: NDArray[np.float64]
    end_site_parents: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    end_site_offsets: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 3)))
    channels: tuple[tuple[str, ...], ...] | None = None

    def __post_init__(self) -> None:
        names = tuple(str(n) for n in self.names)
        parents = np.asarray(self.parents, dtype=np.int64).reshape(-1)
        offsets = np.asarray(self.offsets, dtype=np.float64)
        J = len(names)
        if J == 0:
            raise SkeletonError("a skeleton needs at least one joint")
        if parents.shape != (J,):
            raise SkeletonError(f"parents has {parents.shape[0]} entries for {J} joint names")
        if offsets.shape != (J, 3):
            raise SkeletonError(f"offsets must have shape [{J}, 3], got {list(offsets.shape)}")
        if not np.all(np.isfinite(offsets)):
            raise SkeletonError("offsets contain NaN or infinite values")
        if parents[0] != -1 or np.any(parents[1:] < 0) or np.any(parents[1:] >= np.arange(1, J)):
            raise SkeletonError("parents must be -1 for joint 0 and point to an earlier joint for every other joint")
        seen: dict[str, int] = {}
        for i, n in enumerate(names):
            if n in seen:
                raise SkeletonError(f"duplicate joint name {n!r} (joints {seen[n]} and {i}); joint names must be unique")
            seen[n] = i
        es_par = np.asarray(self.end_site_parents, dtype=np.int64).reshape(-1)
        es_off = np.asarray(self.end_site_offsets, dtype=np.float64).reshape(-1, 3)
        if es_par.shape[0] != es_off.shape[0] or np.any(es_par < 0) or np.any(es_par >= J):
            raise SkeletonError("end_site_parents and end_site_offsets disagree or point outside the skeleton")
        channels = self.channels
        if channels is None:
            channels = tuple(DEFAULT_ROOT_CHANNELS if j == 0 else DEFAULT_JOINT_CHANNELS for j in range(J))
        channels = tuple(tuple(c) for c in channels)
        if len(channels) != J:
            raise SkeletonError(f"channels lists {len(channels)} joints for {J} joint names")
        valid = set(POSITION_CHANNELS) | set(ROTATION_CHANNELS)
        for j, ch in enumerate(channels):
            bad = [c for c in ch if c not in valid]
            if bad or len(set(ch)) != len(ch):
                raise SkeletonError(f"joint {names[j]!r}: invalid or repeated channels {ch}")
        for name, value in (("names", names), ("parents", parents), ("offsets", offsets),
                            ("end_site_parents", es_par), ("end_site_offsets", es_off), ("channels", channels)):
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_index", seen)

    # ----------------------------------------------------------------- basic facts
    @property
    def num_joints(self) -> int:
        return len(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"Skeleton({self.num_joints} joints, root={self.names[0]!r})"

    @property
    def has_position_channels(self) -> NDArray[np.bool_]:
        """``[J]`` bool: joints whose translation is animated by the file."""
        return np.array([any(c in POSITION_CHANNELS for c in ch) for ch in self.channels])

    def rotation_order(self, j: int) -> str:
        """The joint's rotation channel axes in file order, e.g. ``"zyx"`` ('' if none)."""
        return "".join(c[0].lower() for c in self.channels[j] if c in ROTATION_CHANNELS)

    def children(self, j: int) -> list[int]:
        return [int(c) for c in np.flatnonzero(self.parents == j)]

    def descends_from(self, j: int, ancestor: int) -> bool:
        """Whether joint ``j`` is ``ancestor`` or below it."""
        while j >= 0 and j != ancestor:
            j = int(self.parents[j])
        return j == ancestor

    def depth(self) -> NDArray[np.int64]:
        """``[J]`` number of ancestors of each joint."""
        d = np.zeros(self.num_joints, dtype=np.int64)
        for j in range(1, self.num_joints):
            d[j] = d[self.parents[j]] + 1
        return d

    def same_topology(self, other: Skeleton) -> bool:
        return self.names == other.names and np.array_equal(self.parents, other.parents)

    def first_difference(self, other: Skeleton, mine: str = "here", theirs: str = "there") -> str | None:
        """``None`` for the same names and hierarchy, else the first joint (in order) that
        differs, in words: ``"joint 5 is 'LeftKnee' (under 'LeftUpLeg') here, 'LeftLeg'
        (under 'LeftUpLeg') there"`` (``mine`` and ``theirs`` name the two skeletons)."""
        if self.same_topology(other):
            return None

        def say(s: Skeleton, j: int) -> str:
            if j >= s.num_joints:
                return "missing"
            return f"{s.names[j]!r} (under {s.names[s.parents[j]]!r})" if s.parents[j] >= 0 else \
                f"{s.names[j]!r} (the root)"

        for j in range(max(self.num_joints, other.num_joints)):
            a = (self.names[j], self.parents[j]) if j < self.num_joints else None
            b = (other.names[j], other.parents[j]) if j < other.num_joints else None
            if a is None or b is None or a[0] != b[0] or (a[1] >= 0 and b[1] >= 0 and
                                                         self.names[a[1]] != other.names[b[1]]) or (a[1] < 0) != (b[1] < 0):
                return f"joint {j} is {say(self, j)} {mine}, {say(other, j)} {theirs}"
        return None

    def equivalent(self, other: Skeleton, atol: float = 1e-6) -> bool:
        """Same names, hierarchy and offsets (within ``atol`` metres)."""
        return self.same_topology(other) and np.allclose(self.offsets, other.offsets, atol=atol)

    # ------------------------------------------------------------------ name lookup
    def index(self, name: str) -> int:
        """Index of a joint by exact name; a clear error with suggestions otherwise."""
        try:
            return self._index[name]  # type: ignore[attr-defined]
        except KeyError:
            close = difflib.get_close_matches(name, self.names, n=3, cutoff=0.5)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            raise SkeletonError(
                f"unknown joint {name!r}; this skeleton has: {', '.join(self.names)}.{hint}"
            ) from None

    def indices(self, names: Iterable[str | int]) -> list[int]:
        """Indices for joint names (ints pass through after a range check)."""
        out = []
        for n in names:
            if isinstance(n, (int, np.integer)):
                if not 0 <= int(n) < self.num_joints:
                    raise SkeletonError(f"joint index {n} outside 0..{self.num_joints - 1}")
                out.append(int(n))
            else:
                out.append(self.index(n))
        return out

    def find(self, *keywords: str, exclude: Sequence[str] = ()) -> list[int]:
        """Joints whose lower-cased name contains any keyword and none of ``exclude``."""
        kws = [k.lower() for k in keywords]
        ex = [e.lower() for e in exclude]
        return [
            j for j, n in enumerate(self.names)
            if any(k in n.lower() for k in kws) and not any(e in n.lower() for e in ex)
        ]

    def with_offsets(self, offsets: ArrayLike, end_site_offsets: ArrayLike | None = None) -> Skeleton:
        return Skeleton(
            self.names, self.parents, offsets, self.end_site_parents,
            self.end_site_offsets if end_site_offsets is None else end_site_offsets, self.channels,
        )

    def scaled(self, factor: float) -> Skeleton:
        return self.with_offsets(self.offsets * factor, self.end_site_offsets * factor)
