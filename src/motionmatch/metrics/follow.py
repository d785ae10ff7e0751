"""The numbers of a path-following run (``motionmatch follow --report``), and, among
obstacles, its collisions measured as ``motionmatch scenario`` measures them (body
ellipses of the played poses against the scene: :mod:`motionmatch.environment.collision`)."""

from __future__ import annotations

import numpy as np

from motionmatch.anim.contacts import foot_contacts
from motionmatch.environment.body import motion_ellipses
from motionmatch.environment.collision import body_distances, collision_summary
from motionmatch.environment.scene import Scene
from motionmatch.metrics.feet import foot_skating
from motionmatch.metrics.ground import ground_report, ground_under_feet
from motionmatch.metrics.report import acceleration_percentile, update_timing
from motionmatch.runtime.follow import FollowRecord

__all__ = ["follow_collisions", "follow_report"]


def follow_collisions(record: FollowRecord, scene: Scene) -> dict:
    """Collisions of the run's body with ``scene`` (moving obstacles where they were at each
    frame): ``collision_fraction`` (share of frames in some intersection),
    ``collision_time_s`` (mean duration of an intersection), ``collisions`` (how many),
    ``penetration_m`` and ``min_clearance_m`` (smallest signed distance, m; negative: overlap)."""
    m = record.motion
    F = m.num_frames
    track = motion_ellipses(m.world_positions, m.world_rotations[:, 0], m.fps)
    if not len(scene):
        return collision_summary(np.zeros((F, 0)), m.fps)
    times = np.arange(F) / m.fps
    rows = np.stack([scene.rows_at(t) for t in times]) if scene.moving_ids.size else scene.rows_at(0.0)
    return collision_summary(body_distances(track, rows), m.fps)


def follow_report(record: FollowRecord, scene: Scene | None = None, db=None) -> dict:
    """The numbers of a path-following run (``motionmatch follow --report``):
    ``mean_distance_m`` (the paper's measure), ``max_distance_m``, ``completed``, ``completion_time_s``,
    ``reached_end``, ``coverage``, ``knn_calls_per_match``, ``ms_per_match`` (median;
    ``_mean``, ``_p95`` too), ``matches``, ``transitions_per_s``, ``update_ms_mean``,
    ``foot_skating_mps``, ``acceleration_p99_mps2`` (pose pops), ``nan_frames``, and the
    path's duration and length; with a ``scene``, :func:`follow_collisions` too. Over the
    whole run, also past the follower's bounded record (its last frames and matches kept in
    full, the rest in totals), except the match times (the last ones) and the pose measures
    (skating, pops, NaN: the kept frames). With ``db`` (the database played), the ground's
    keys too (:mod:`motionmatch.metrics.ground`, on the scene's terrain; the kept frames)."""
    m = record.motion
    ms = record.match_seconds * 1e3  # (the last matches: the matcher keeps a bounded window)
    matches = record.matches if record.matches >= 0 else len(record.match_seconds)
    frames = record.total_frames
    duration = frames / m.fps
    skating = float("nan")
    terrain = None if scene is None else scene.terrain
    if record.feet:
        feet = list(record.feet)
        con = foot_contacts(m, feet=feet, ground_height=ground_under_feet(m.world_positions, feet, terrain))
        skating = float(foot_skating(m.world_positions[:, feet], con.contacts, m.fps))
    out = {
        "mean_distance_m": record.mean_distance,
        "max_distance_m": record.max_distance,
        "completed": bool(record.completed),
        "completion_time_s": float(record.completion_frame / record.fps) if record.completed else None,
        "reached_end": bool(record.completion_frame >= 0),
        "coverage": float(record.coverage),
        "path_duration_s": float(record.path.duration),
        "path_length_m": float(record.path.length),
        "frames": int(frames),
        "duration_s": float(duration),
        "matches": int(matches),
        "knn_calls": int(record.knn_calls),
        "knn_calls_per_match": float(record.knn_calls / matches) if matches else 0.0,
        "ms_per_match": float(np.median(ms)) if ms.size else 0.0,
        "ms_per_match_mean": float(ms.mean()) if ms.size else 0.0,
        "ms_per_match_p95": float(np.percentile(ms, 95)) if ms.size else 0.0,
        "transitions_per_s": float((record.transitioned.sum() + record.dropped_transitions) / duration),
        **update_timing(record),
        "foot_skating_mps": skating,
        "acceleration_p99_mps2": acceleration_percentile(m, 99.0),
        "nan_frames": int(np.count_nonzero(~np.isfinite(m.rotations).all(axis=(1, 2)))),
    }
    if db is not None:
        out.update(ground_report(m.world_positions, record.frames, db, terrain))
    if scene is not None:
        out.update(follow_collisions(record, scene))
    return out
