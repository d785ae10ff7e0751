"""Obstacles: disks, ellipses and oriented boxes on the ground, with a height range, static
or moving along a timed path.

Coordinates are world metres on the ground plane ``(x, z)`` (Y up). As for characters, a
yaw ``θ`` turns +Z toward +X, so the first axis of a box or an ellipse with ``yaw = θ`` points along
``(sin θ, cos θ)``; with ``yaw = 0`` it points along +Z (``size[0]`` / ``axes[0]`` lie along
+Z, ``size[1]`` / ``axes[1]`` along X).

A moving obstacle follows ``path``: timed waypoints ``[[t, x, z], ...]`` (linear in
between, holding the first/last position outside their times), or a constant
``velocity`` ``[vx, vz]`` from its centre at ``t = 0``. Its *predicted* position at
``t + dt`` (what a character plans against) is extrapolated from its current velocity
(:meth:`Obstacle.predicted`), not read from the future of its path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from motionmatch.errors import MotionMatchError
from motionmatch.geometry.shapes import T_BOX, T_DISK, T_ELLIPSE, make_row

__all__ = ["Obstacle", "ObstacleError", "box", "disk", "ellipse"]

SHAPES = ("disk", "ellipse", "box")


class ObstacleError(MotionMatchError, ValueError):
    """An obstacle description is malformed."""


@dataclass(frozen=True)
class Obstacle:
    """One obstacle.

    Attributes:
        shape: ``"disk"``, ``"ellipse"`` or ``"box"``.
        center: ``(x, z)`` at time 0 (static: always).
        radius: disks: radius (m).
        axes: ellipses: semi-axes ``(along the first axis, across)`` (m).
        size: boxes: full extents ``(along the first axis, across)`` (m).
        yaw: rotation (rad) of the first axis, which points along ``(sin yaw, cos yaw)``.
        height: ``(bottom, top)`` (m) of its vertical extent; ``None``: unbounded (a 2D
            obstacle that no jump or crouch avoids).
        velocity: ``(vx, vz)`` m/s, constant (moving obstacles).
        path: ``[[t, x, z], ...]`` timed waypoints (moving obstacles; overrides velocity).
        name: free label (reports).
    """

    shape: str
    center: tuple[float, float] = (0.0, 0.0)
    radius: float = 0.0
    axes: tuple[float, float] = (0.0, 0.0)
    size: tuple[float, float] = (0.0, 0.0)
    yaw: float = 0.0
    height: tuple[float, float] | None = None
    velocity: tuple[float, float] | None = None
    path: tuple[tuple[float, float, float], ...] | None = None
    name: str = ""
    _path: np.ndarray | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ObstacleError(f"obstacle {self.name!r}: shape must be one of {SHAPES}, got {self.shape!r}")
        c = tuple(float(v) for v in self.center)
        if len(c) != 2 or not all(map(math.isfinite, c)):
            raise ObstacleError(f"obstacle {self.name!r}: center must be [x, z], got {self.center!r}")
        object.__setattr__(self, "center", c)
        if self.shape == "disk" and not self.radius > 0:
            raise ObstacleError(f"obstacle {self.name!r}: a disk needs radius > 0")
        if self.shape == "ellipse" and not (len(self.axes) == 2 and min(self.axes) > 0):
            raise ObstacleError(f"obstacle {self.name!r}: an ellipse needs axes [along, across] > 0")
        if self.shape == "box" and not (len(self.size) == 2 and min(self.size) > 0):
            raise ObstacleError(f"obstacle {self.name!r}: a box needs size [along, across] > 0")
        if self.height is not None:
            h = tuple(float(v) for v in self.height)
            if len(h) != 2 or not h[0] < h[1]:
                raise ObstacleError(f"obstacle {self.name!r}: height must be [bottom, top] with bottom < top")
            object.__setattr__(self, "height", h)
        if self.path is not None:
            p = np.asarray(self.path, dtype=np.float64)
            if p.ndim != 2 or p.shape[1] != 3 or len(p) < 1 or np.any(np.diff(p[:, 0]) <= 0) \
                    or not np.all(np.isfinite(p)):
                raise ObstacleError(f"obstacle {self.name!r}: path must be [[t, x, z], ...] with increasing t")
            object.__setattr__(self, "_path", p)
        elif self.velocity is not None:
            v = tuple(float(x) for x in self.velocity)
            if len(v) != 2 or not all(map(math.isfinite, v)):
                raise ObstacleError(f"obstacle {self.name!r}: velocity must be [vx, vz]")
            object.__setattr__(self, "velocity", v)

    # ------------------------------------------------------------------ motion
    @property
    def moving(self) -> bool:
        return self._path is not None or (self.velocity is not None and any(self.velocity))

    def position(self, t: float) -> np.ndarray:
        """Centre ``[2]`` (x, z) at time ``t``."""
        if self._path is not None:
            p = self._path
            return np.array([np.interp(t, p[:, 0], p[:, 1]), np.interp(t, p[:, 0], p[:, 2])])
        c = np.array(self.center)
        if self.velocity is not None:
            c = c + np.array(self.velocity) * t
        return c

    def velocity_at(self, t: float) -> np.ndarray:
        """Velocity ``[2]`` (m/s) at time ``t`` (of the path segment containing ``t``)."""
        if self._path is not None:
            p = self._path
            if len(p) < 2 or t < p[0, 0] or t >= p[-1, 0]:
                return np.zeros(2)
            j = int(np.searchsorted(p[:, 0], t, side="right")) - 1
            return (p[j + 1, 1:] - p[j, 1:]) / (p[j + 1, 0] - p[j, 0])
        return np.array(self.velocity) if self.velocity is not None else np.zeros(2)

    def predicted(self, t: float, dt: float) -> np.ndarray:
        """Expected centre ``dt`` seconds after ``t``: extrapolated from the current velocity."""
        return self.position(t) + self.velocity_at(t) * dt

    # ------------------------------------------------------------------ packing
    @property
    def axis(self) -> tuple[float, float]:
        return (math.sin(self.yaw), math.cos(self.yaw))

    @property
    def bounding_radius(self) -> float:
        if self.shape == "disk":
            return float(self.radius)
        if self.shape == "ellipse":
            return float(max(self.axes))
        return float(math.hypot(*self.size) / 2)

    def row(self, centre: Sequence[float] | None = None, ident: int = -1) -> np.ndarray:
        """The packed row (:mod:`motionmatch.geometry.shapes`) at ``centre`` (default: the
        centre at time 0)."""
        x, z = (self.center if centre is None else centre)
        ux, uz = self.axis
        ymin, ymax = self.height if self.height is not None else (-np.inf, np.inf)
        if self.shape == "disk":
            return make_row(T_DISK, x, z, ux, uz, self.radius, self.radius, ymin, ymax, ident)
        if self.shape == "ellipse":
            return make_row(T_ELLIPSE, x, z, ux, uz, self.axes[0], self.axes[1], ymin, ymax, ident)
        return make_row(T_BOX, x, z, ux, uz, self.size[0] / 2, self.size[1] / 2, ymin, ymax, ident)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        d: dict = {"shape": self.shape, "center": list(self.center)}
        if self.shape == "disk":
            d["radius"] = self.radius
        elif self.shape == "ellipse":
            d["axes"] = list(self.axes)
        else:
            d["size"] = list(self.size)
        if self.yaw:
            d["yaw_deg"] = math.degrees(self.yaw)
        if self.height is not None:
            d["height"] = list(self.height)
        if self._path is not None:
            d["path"] = self._path.tolist()
        elif self.velocity is not None:
            d["velocity"] = list(self.velocity)
        if self.name:
            d["name"] = self.name
        return d

    @classmethod
    def from_dict(cls, d: Mapping, where: str = "obstacle") -> Obstacle:
        if not isinstance(d, Mapping):
            raise ObstacleError(f"{where}: expected an object, got {type(d).__name__}")
        known = {"shape", "type", "center", "radius", "axes", "size", "yaw_deg", "height", "velocity", "path", "name"}
        extra = sorted(set(d) - known)
        if extra:
            raise ObstacleError(f"{where}: unknown field(s) {extra}; known: {sorted(known)}")
        try:
            return cls(
                shape=d.get("shape", d.get("type", "")),
                center=tuple(d.get("center", (0.0, 0.0))),
                radius=float(d.get("radius", 0.0)),
                axes=tuple(d.get("axes", (0.0, 0.0))),
                size=tuple(d.get("size", (0.0, 0.0))),
                yaw=math.radians(float(d.get("yaw_deg", 0.0))),
                height=tuple(d["height"]) if d.get("height") is not None else None,
                velocity=tuple(d["velocity"]) if d.get("velocity") is not None else None,
                path=tuple(tuple(p) for p in d["path"]) if d.get("path") is not None else None,
                name=str(d.get("name", "")),
            )
        except ObstacleError as e:
            raise ObstacleError(f"{where}: {e}") from None
        except (TypeError, ValueError) as e:
            raise ObstacleError(f"{where}: {e}") from None


def disk(x: float, z: float, radius: float, **kw) -> Obstacle:
    return Obstacle("disk", (x, z), radius=radius, **kw)


def ellipse(x: float, z: float, along: float, across: float, yaw: float = 0.0, **kw) -> Obstacle:
    return Obstacle("ellipse", (x, z), axes=(along, across), yaw=yaw, **kw)


def box(x: float, z: float, along: float, across: float, yaw: float = 0.0, **kw) -> Obstacle:
    """A box of full extents ``along`` (its first axis, +Z at yaw 0) and ``across`` (X at yaw 0)."""
    return Obstacle("box", (x, z), size=(along, across), yaw=yaw, **kw)

