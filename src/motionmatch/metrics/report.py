"""The numbers of an offline run (``motionmatch run --report``)."""

from __future__ import annotations

import numpy as np

from motionmatch.anim.contacts import foot_contacts
from motionmatch.control.script import Script
from motionmatch.database import MotionDatabase
from motionmatch.metrics.control import mean_response_time, response_time, transitions_per_second
from motionmatch.metrics.feet import foot_skating
from motionmatch.metrics.sanity import count_nan_frames, upright_fraction
from motionmatch.metrics.smoothness import jerk_motion
from motionmatch.runtime.offline import RunRecord


def playback_foot_skating(db: MotionDatabase) -> float:
    """Foot skating (m/s) of the database's own clips played back unchanged: the same
    measure as for a run's output, averaged over clips weighted by their contact frames."""
    total, weight = 0.0, 0
    for c in range(len(db.clip_names)):
        m = db.clip_motion(c)
        con = foot_contacts(m, feet=list(db.foot_joints))
        n = int((con.contacts[1:] & con.contacts[:-1]).sum())
        if n == 0:
            continue
        total += foot_skating(m.world_positions[:, list(db.foot_joints)], con.contacts, m.fps) * n
        weight += n
    return total / weight if weight else 0.0


def run_report(record: RunRecord, db: MotionDatabase, script: Script | None = None, *,
               playback_skating: float | None = None) -> dict:
    """Metrics of a run, under the keys the CLI's ``--report`` writes.

    ``frames``, ``nan_frames``, ``foot_skating_mps`` (output), ``playback_foot_skating_mps``
    (the database's clips, same measure), ``response_time_s`` (mean over the script's
    direction changes that were reached; ``response_times_s`` lists each, ``null`` when
    not reached), ``searches_per_s``, ``transitions_per_s``, ``jerk_mps3``,
    ``upright_fraction``, ``update_ms_mean`` / ``update_ms_p95`` (wall time per update).
    """
    m = record.motion
    fps = m.fps
    feet = list(db.foot_joints)
    con = foot_contacts(m, feet=feet)
    root = m.world_positions[:, 0]
    out = {
        "frames": int(m.num_frames),
        "duration_s": float(m.num_frames / fps),
        "nan_frames": int(count_nan_frames(m)),
        "foot_skating_mps": float(foot_skating(m.world_positions[:, feet], con.contacts, fps)),
        "playback_foot_skating_mps": float(playback_foot_skating(db) if playback_skating is None else playback_skating),
        "searches_per_s": float(record.searched.sum() / (m.num_frames / fps)),
        "transitions_per_s": float(transitions_per_second(record.transitioned.cumsum(), fps, step=0)),
        "jerk_mps3": float(jerk_motion(m)) if m.num_frames >= 4 else float("nan"),
        "upright_fraction": float(upright_fraction(m)),
        "update_ms_mean": float(record.update_seconds.mean() * 1e3),
        "update_ms_p95": float(np.percentile(record.update_seconds, 95) * 1e3),
        "modes": {str(k): float(v) / m.num_frames for k, v in zip(*np.unique(record.modes, return_counts=True))},
    }
    if script is not None:
        changes = script.direction_changes(include_starts=False)
        times = response_time(root, fps, changes) if changes else []
        out["response_times_s"] = [None if t is None else float(t) for t in times]
        out["response_time_s"] = float(mean_response_time(root, fps, changes)) if changes else None
    return out
