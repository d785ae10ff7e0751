"""The numbers of a path-following run (``motionmatch follow --report``)."""

from __future__ import annotations

import numpy as np

from motionmatch.anim.contacts import foot_contacts
from motionmatch.metrics.feet import foot_skating
from motionmatch.metrics.report import acceleration_percentile
from motionmatch.runtime.follow import FollowRecord

__all__ = ["follow_report"]


def follow_report(record: FollowRecord) -> dict:
    """The numbers of a path-following run (``motionmatch follow --report``):
    ``mean_distance_m`` (the paper's measure), ``max_distance_m``, ``completed``, ``completion_time_s``,
    ``reached_end``, ``coverage``, ``knn_calls_per_match``, ``ms_per_match`` (median;
    ``_mean``, ``_p95`` too), ``matches``, ``transitions_per_s``, ``update_ms_mean``,
    ``foot_skating_mps``, ``acceleration_p99_mps2`` (pose pops), ``nan_frames``, and the
    path's duration and length."""
    m = record.motion
    ms = record.match_seconds * 1e3
    matches = len(record.match_seconds)
    skating = float("nan")
    if record.feet:
        feet = list(record.feet)
        con = foot_contacts(m, feet=feet)
        skating = float(foot_skating(m.world_positions[:, feet], con.contacts, m.fps))
    d = record.distances()
    return {
        "mean_distance_m": float(d.mean()),
        "max_distance_m": float(d.max()),
        "completed": bool(record.completed),
        "completion_time_s": float(record.completion_frame / record.fps) if record.completed else None,
        "reached_end": bool(record.completion_frame >= 0),
        "coverage": float(record.coverage),
        "path_duration_s": float(record.path.duration),
        "path_length_m": float(record.path.length),
        "frames": int(m.num_frames),
        "duration_s": float(m.num_frames / m.fps),
        "matches": int(matches),
        "knn_calls": int(record.knn_calls),
        "knn_calls_per_match": float(record.knn_calls / matches) if matches else 0.0,
        "ms_per_match": float(np.median(ms)) if matches else 0.0,
        "ms_per_match_mean": float(ms.mean()) if matches else 0.0,
        "ms_per_match_p95": float(np.percentile(ms, 95)) if matches else 0.0,
        "transitions_per_s": float(record.transitioned.sum() / (m.num_frames / m.fps)),
        "update_ms_mean": float(record.update_seconds.mean() * 1e3),
        "foot_skating_mps": skating,
        "acceleration_p99_mps2": acceleration_percentile(m, 99.0),
        "nan_frames": int(np.count_nonzero(~np.isfinite(m.rotations).all(axis=(1, 2)))),
    }
