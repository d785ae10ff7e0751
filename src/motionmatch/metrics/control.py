"""How well a controlled character does what it is asked: transitions, response time,
trajectory error (distances to a path: :mod:`motionmatch.geometry.polyline`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from motionmatch.geometry.polyline import as_points, horizontal
from motionmatch.metrics._common import check_fps


# --------------------------------------------------------------------------- transitions
def count_transitions(frame_indices: ArrayLike, step: float = 1) -> int:
    """Number of jumps in a played sequence of database frames.

    A transition happens at output frame ``i >= 1`` when ``frame_indices[i]`` is not
    ``frame_indices[i - 1] + step`` (``step`` is the playback step: 1 for playing every
    database frame once, 2 for a database at twice the output rate, ...).

    Args:
        frame_indices: ``[F]`` database frame played at each output frame (int, or float
            for fractional playback positions; compared with a 1e-6 tolerance).
        step: the expected advance per output frame.
    """
    idx = np.asarray(frame_indices, dtype=np.float64).reshape(-1)
    if idx.size < 2:
        return 0
    return int(np.count_nonzero(np.abs(np.diff(idx) - step) > 1e-6))


def transitions_per_second(frame_indices: ArrayLike, fps: float, step: float = 1) -> float:
    """Transitions (see :func:`count_transitions`) per second of output.

    Args:
        frame_indices: ``[F]`` database frame played at each output frame.
        fps: output frames per second; the duration is ``F / fps`` seconds.
        step: the expected advance per output frame.

    Returns:
        Transitions per second (1/s); ``0.0`` for an empty sequence.
    """
    fps = check_fps(fps)
    n = np.asarray(frame_indices).reshape(-1).size
    if n == 0:
        return 0.0
    return count_transitions(frame_indices, step) / (n / fps)


# ------------------------------------------------------------------------- response time
def travel_directions(
    root_positions: ArrayLike, fps: float, *, window_s: float = 0.1
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Direction and speed of horizontal travel, smoothed by a centred window.

    At frame ``f`` the velocity is ``(p[f + h] - p[f - h]) * fps / (2 h)`` on the (x, z)
    plane with ``h = max(1, round(window_s * fps / 2))`` (indices clamped at the clip ends,
    dividing by the frames actually spanned). A centred chord has no lag: on a circular
    arc it is exactly parallel to the tangent at ``f``.

    Args:
        root_positions: ``[F, 3]`` root positions (m).
        fps: frames per second.
        window_s: smoothing window (s).

    Returns:
        ``(directions [F, 3], speeds [F])``: unit directions in the ground plane (zero where
        the root does not move) and horizontal speeds in m/s.
    """
    p = as_points(root_positions, "root_positions", ndim=2)
    fps = check_fps(fps)
    F = p.shape[0]
    if F < 2:
        return np.zeros((F, 3)), np.zeros(F)
    h = max(1, round(window_s * fps / 2))
    f = np.arange(F)
    hi = np.minimum(f + h, F - 1)
    lo = np.maximum(f - h, 0)
    d = p[hi] - p[lo]
    d[:, 1] = 0.0
    dist = np.linalg.norm(d, axis=1)
    speed = dist * fps / (hi - lo)
    dirs = np.divide(d, dist[:, None], out=np.zeros_like(d), where=dist[:, None] > 1e-12)
    return dirs, speed


def response_time(
    root_positions: ArrayLike,
    fps: float,
    changes: Sequence[tuple[float, ArrayLike]],
    *,
    angle_deg: float = 20.0,
    min_speed: float = 0.1,
    window_s: float = 0.1,
) -> list[float | None]:
    """Seconds from each intent change until the root travels the new desired way.

    For a change at time ``t`` (s; frame ``f`` is at ``f / fps``) with desired direction
    ``d``, the response time is ``f / fps - t`` for the first frame ``f`` with
    ``f / fps >= t`` at which the direction of travel (:func:`travel_directions`,
    smoothed over ``window_s``) is within ``angle_deg`` of ``d`` on the ground plane,
    skipping frames whose horizontal speed is under ``min_speed`` (standing still has no
    direction). It is ``0.0`` when the root already travels that way, and ``None`` when
    that never happens before the next change (or the end of the clip).

    Args:
        root_positions: ``[F, 3]`` root positions (m).
        fps: frames per second.
        changes: ``(t_change, desired_direction)`` pairs in time order; each direction is
            a ``[3]`` vector whose horizontal (x, z) part must not be zero.
        angle_deg: tolerance (degrees).
        min_speed: slowest horizontal speed (m/s) at which a direction counts.
        window_s: velocity smoothing window (s).

    Returns:
        One entry per change: seconds, or ``None`` when the direction was not reached.
    """
    dirs, speed = travel_directions(root_positions, fps, window_s=window_s)
    fps = check_fps(fps)
    F = dirs.shape[0]
    times = [float(t) for t, _ in changes]
    if np.any(np.diff(times) < 0):
        raise ValueError(f"changes must be in time order, got times {times}")
    cos_tol = math.cos(math.radians(angle_deg))
    out: list[float | None] = []
    for i, (t, desired) in enumerate(changes):
        d = as_points(desired, f"changes[{i}] desired direction", ndim=1).copy()
        d[1] = 0.0
        n = np.linalg.norm(d)
        if n < 1e-12:
            raise ValueError(f"changes[{i}]: the desired direction {list(np.asarray(desired))} has no horizontal part")
        d /= n
        start = max(0, math.ceil(t * fps - 1e-9))
        end = F if i + 1 == len(changes) else min(F, math.ceil(times[i + 1] * fps - 1e-9))
        if start >= end:
            out.append(None)
            continue
        ok = (speed[start:end] >= min_speed) & (dirs[start:end] @ d >= cos_tol)
        hit = np.flatnonzero(ok)
        out.append(float((start + hit[0]) / fps - t) if hit.size else None)
    return out


def mean_response_time(
    root_positions: ArrayLike,
    fps: float,
    changes: Sequence[tuple[float, ArrayLike]],
    **kwargs,
) -> float:
    """Mean of :func:`response_time` over the changes that were reached (s).

    Changes never reached are left out of the mean (count them with
    :func:`response_time`); ``nan`` when none was reached. Keyword arguments are passed
    to :func:`response_time`.
    """
    times = [r for r in response_time(root_positions, fps, changes, **kwargs) if r is not None]
    return float(np.mean(times)) if times else float("nan")


# ------------------------------------------------------------------ trajectory and path
def trajectory_error(actual: ArrayLike, desired: ArrayLike) -> float:
    """Mean horizontal (x, z) distance (m) between matching points of two trajectories.

    Args:
        actual: ``[F, 3]`` (or any ``[..., 3]``) positions (m).
        desired: positions of the same shape (or broadcastable to it).
    """
    a = as_points(actual, "actual")
    b = as_points(desired, "desired")
    try:
        diff = horizontal(a) - horizontal(b)
    except ValueError:
        raise ValueError(f"actual {list(a.shape)} and desired {list(b.shape)} must have matching shapes") from None
    if diff.size == 0:
        raise ValueError("trajectory_error needs at least one point")
    return float(np.linalg.norm(diff, axis=-1).mean())
