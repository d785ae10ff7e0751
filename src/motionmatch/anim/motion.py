"""`Motion`: a clip of skeletal animation (local rotations and translations over frames)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from motionmatch.anim import kinematics, quat
from motionmatch.anim.skeleton import Skeleton
from motionmatch.errors import MotionError

Array = NDArray[np.float64]


@dataclass(eq=False)
class Motion:
    """A motion clip in metres, Y up, quaternions ``(w, x, y, z)``.

    Attributes:
        skeleton: the joint hierarchy.
        rotations: ``[F, J, 4]`` local joint rotations (unit quaternions).
        translations: ``[F, J, 3]`` local joint translations in metres: the animated
            position channels where the file has them, the skeleton's offset elsewhere.
        fps: frames per second.
        name: a short name (the file stem when loaded from a file).
        source: the file it was loaded from, if any.
        file_scale: metres per unit of the source file (0.01 for centimetres); writers use
            it to write back in the original units.
    """

    skeleton: Skeleton
    rotations: Array
    translations: Array
    fps: float
    name: str = ""
    source: Path | None = None
    file_scale: float = 1.0
    tags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        J = self.skeleton.num_joints
        self.rotations = np.ascontiguousarray(self.rotations, dtype=np.float64)
        self.translations = np.ascontiguousarray(self.translations, dtype=np.float64)
        who = self.name or "motion"
        if self.rotations.ndim != 3 or self.rotations.shape[1:] != (J, 4):
            raise MotionError(f"{who}: rotations must have shape [F, {J}, 4], got {list(self.rotations.shape)}")
        if self.translations.shape != self.rotations.shape[:2] + (3,):
            raise MotionError(
                f"{who}: translations must have shape [{self.rotations.shape[0]}, {J}, 3], "
                f"got {list(self.translations.shape)}"
            )
        if self.rotations.shape[0] == 0:
            raise MotionError(f"{who}: a motion needs at least one frame")
        if not (np.isfinite(self.fps) and self.fps > 0):
            raise MotionError(f"{who}: fps must be a positive number, got {self.fps}")
        for label, arr in (("rotations", self.rotations), ("translations", self.translations)):
            if not np.all(np.isfinite(arr)):
                f, j = np.argwhere(~np.isfinite(arr))[0][:2]
                raise MotionError(
                    f"{who}: {label} contain NaN or infinite values (first at frame {f}, "
                    f"joint {self.skeleton.names[j]!r})"
                )
        if self.source is not None:
            self.source = Path(self.source)
        self.fps = float(self.fps)
        self.tags = tuple(self.tags)

    # ----------------------------------------------------------------- basic facts
    @property
    def num_frames(self) -> int:
        return self.rotations.shape[0]

    def __len__(self) -> int:
        return self.num_frames

    @property
    def num_joints(self) -> int:
        return self.skeleton.num_joints

    @property
    def frame_time(self) -> float:
        return 1.0 / self.fps

    @property
    def duration(self) -> float:
        """Playback length in seconds: ``num_frames / fps``."""
        return self.num_frames / self.fps

    def __repr__(self) -> str:
        return f"Motion({self.name!r}, {self.num_frames} frames @ {self.fps:g} fps, {self.num_joints} joints)"

    # ---------------------------------------------------------------- derived data
    @cached_property
    def _fk(self) -> tuple[Array, Array]:
        return kinematics.forward_kinematics(self.skeleton.parents, self.rotations, self.translations)

    @property
    def world_positions(self) -> Array:
        """``[F, J, 3]`` joint positions in the world (m). Cached; do not modify."""
        return self._fk[0]

    @property
    def world_rotations(self) -> Array:
        """``[F, J, 4]`` joint rotations in the world. Cached; do not modify."""
        return self._fk[1]

    def world_velocities(self) -> Array:
        """``[F, J, 3]`` joint velocities in the world (m/s), central differences."""
        return kinematics.finite_difference_velocity(self.world_positions, self.fps)

    def world_angular_velocities(self) -> Array:
        """``[F, J, 3]`` joint angular velocities in the world (rad/s)."""
        return quat.angular_velocity(self.world_rotations, 1.0 / self.fps)

    def end_site_positions(self) -> Array:
        """``[F, E, 3]`` end-site positions in the world (m)."""
        s = self.skeleton
        return kinematics.end_site_positions(self.world_positions, self.world_rotations,
                                             s.end_site_parents, s.end_site_offsets)

    # ------------------------------------------------------------------ editing
    def copy(self) -> Motion:
        return replace(self, rotations=self.rotations.copy(), translations=self.translations.copy())

    def __getitem__(self, frames: slice | Sequence[int] | NDArray) -> Motion:
        """Frames of this clip as a new ``Motion`` (a slice, index list or mask)."""
        if isinstance(frames, (int, np.integer)):
            frames = slice(int(frames), int(frames) + 1 if frames != -1 else None)
        rot = self.rotations[frames]
        if rot.shape[0] == 0:
            raise MotionError(f"{self.name or 'motion'}: frame selection {frames!r} is empty")
        return replace(self, rotations=rot.copy(), translations=self.translations[frames].copy())

    def with_data(self, rotations: Array, translations: Array, **changes) -> Motion:
        """A new motion on the same skeleton with other arrays (and optional field changes)."""
        return replace(self, rotations=rotations, translations=translations, **changes)


def concatenate(motions: Sequence[Motion], name: str | None = None) -> Motion:
    """Join clips end to end; they must share skeleton (names, hierarchy, offsets) and fps."""
    if not motions:
        raise MotionError("concatenate needs at least one motion")
    first = motions[0]
    for m in motions[1:]:
        if not m.skeleton.same_topology(first.skeleton):
            raise MotionError(
                f"cannot concatenate {m.name!r} with {first.name!r}: different joints or hierarchy"
            )
        if not m.skeleton.equivalent(first.skeleton, atol=1e-4):
            raise MotionError(
                f"cannot concatenate {m.name!r} with {first.name!r}: bone offsets differ by more than 0.1 mm"
            )
        if abs(m.fps - first.fps) > 1e-6:
            raise MotionError(
                f"cannot concatenate {m.name!r} ({m.fps:g} fps) with {first.name!r} ({first.fps:g} fps); "
                "resample one of them first (motionmatch.anim.resample)"
            )
    return replace(
        first,
        rotations=np.concatenate([m.rotations for m in motions]),
        translations=np.concatenate([m.translations for m in motions]),
        name=name if name is not None else "+".join(m.name for m in motions),
        source=None,
    )
