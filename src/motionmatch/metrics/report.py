"""The numbers of an offline run (``motionmatch run --report``)."""

from __future__ import annotations

import numpy as np

from motionmatch.anim.contacts import foot_contacts
from motionmatch.control.script import Script
from motionmatch.database import MotionDatabase
from motionmatch.metrics.control import mean_response_time, response_time, transitions_per_second
from motionmatch.metrics.feet import foot_skating
from motionmatch.metrics.ground import ground_report, ground_under_feet
from motionmatch.metrics.sanity import count_nan_frames, upright_fraction
from motionmatch.metrics.smoothness import jerk_motion
from motionmatch.runtime.offline import RunRecord
from motionmatch.runtime.pose_run import PoseRun


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


def future_trajectory_error(record: RunRecord, horizon: int = -1) -> float:
    """Mean horizontal distance (m) between the desired future root position the query
    asked for at each frame (its ``horizon``-th offset, default the furthest) and where the
    root actually was at that time."""
    m = record.motion
    k = horizon % record.desired.shape[1]
    times = record.desired_times
    if times is None:
        return float("nan")
    lag = round(times[k] * m.fps)
    root = m.world_positions[:, 0]
    ok = np.isfinite(record.desired[:, k, 0])
    ok[max(len(ok) - lag, 0):] = False
    if not ok.any():
        return float("nan")
    idx = np.flatnonzero(ok)
    d = record.desired[idx, k][:, [0, 2]] - root[idx + lag][:, [0, 2]]
    return float(np.linalg.norm(d, axis=1).mean())


def acceleration_percentile(motion, q: float = 99.0) -> float:
    """Pose pops: the ``q``-th percentile over frames of the mean joint acceleration (m/s^2).

    A cut moves every joint at once, so it raises the mean over joints in a few frames; a
    high percentile over frames shows them, where an average over the clip (jerk) or a
    percentile over single joints (dominated by swinging hands) does not."""
    wp = motion.world_positions
    if len(wp) < 3:
        return float("nan")
    acc = np.linalg.norm(wp[2:] - 2 * wp[1:-1] + wp[:-2], axis=-1) * motion.fps**2
    return float(np.percentile(acc.mean(axis=1), q))


def update_timing(record) -> dict:
    """Wall time per update of a run, steady state apart from one-off warm-up:
    ``update_ms_mean``, ``update_ms_median``, ``update_ms_p95`` over the updates that did
    not pay a Numba compilation, and ``warm_up``: ``frames`` (the updates that did),
    ``ms`` (their total) and ``compile_s`` (the compilation time)."""
    secs = np.asarray(record.update_seconds, dtype=np.float64)
    warm = getattr(record, "warm_up", None)
    warm = np.zeros(secs.shape, dtype=bool) if warm is None else np.asarray(warm, dtype=bool)
    steady = secs[~warm] if (~warm).any() else secs
    return {
        "update_ms_mean": float(steady.mean() * 1e3) if steady.size else 0.0,
        "update_ms_median": float(np.median(steady) * 1e3) if steady.size else 0.0,
        "update_ms_p95": float(np.percentile(steady, 95) * 1e3) if steady.size else 0.0,
        "warm_up": {"frames": int(warm.sum()), "ms": round(float(secs[warm].sum() * 1e3), 3),
                    "compile_s": round(float(getattr(record, "compile_seconds", 0.0)), 3)},
    }


def idle_stillness(record: RunRecord) -> dict:
    """How still the character stands while idle: ``idle_seconds`` (frames in ``idle``
    mode), ``idle_transitions_per_s`` (transitions on those frames, entering idle
    included, per idle second; ``None`` without idle frames) and ``idle_root_speed_mps``
    (mean planar root speed over them)."""
    fps = record.motion.fps
    idle = np.asarray(record.modes) == "idle"
    seconds = float(idle.sum() / fps)
    if not idle.any():
        return {"idle_seconds": 0.0, "idle_transitions_per_s": None, "idle_root_speed_mps": None}
    root = record.motion.world_positions[:, 0]
    speed = np.r_[0.0, np.linalg.norm(np.diff(root[:, [0, 2]], axis=0), axis=1) * fps]
    return {"idle_seconds": seconds, "idle_transitions_per_s": float(record.transitioned[idle].sum() / seconds),
            "idle_root_speed_mps": float(speed[idle].mean())}


def jump_spring_error(record: RunRecord, db: MotionDatabase) -> float | None:
    """How closely the first jump of a run follows the database's vertical spring
    (:func:`motionmatch.runtime.modes.jump_spring`): the RMS difference (m) between the
    output's hips height and the spring's (its base plus its rise), from the crouch of the
    take-off the jump began with (:func:`~motionmatch.runtime.modes.takeoff_crouch`, else
    the jump's first frame) until the spring lands. ``None`` without a jump or a spring."""
    from motionmatch.runtime.modes import jump_spring, takeoff_crouch

    jump = np.flatnonzero(np.asarray(record.modes) == "jump")
    spring = jump_spring(db) if jump.size else None
    if spring is None:
        return None
    f0 = int(jump[0])
    crouch = int(takeoff_crouch(db)[record.frames[f0]])
    start = f0 + (crouch - int(record.frames[f0]) if crouch >= 0 else 0)
    fps = record.motion.fps
    n = round(spring.landing_time * fps) + 1
    hips = record.motion.world_positions[start: start + n, 1, 1]  # joint 1, as the spring was fitted
    rise, _ = spring.state_after(np.arange(len(hips)) / fps)
    return float(np.sqrt(np.mean((hips - spring.base - rise) ** 2)))


def run_report(record: RunRecord, db: MotionDatabase, script: Script | None = None, *,
               playback_skating: float | None = None, terrain=None) -> dict:
    """Metrics of a run, under the keys the CLI's ``--report`` writes.

    ``frames``, ``nan_frames``, ``foot_skating_mps`` (output), ``playback_foot_skating_mps``
    (the database's clips, same measure), ``response_time_s`` (mean over the script's
    direction changes that were reached; ``response_times_s`` lists each, ``null`` when
    not reached), ``searches_per_s``, ``transitions_per_s``, ``jerk_mps3``, ``acceleration_p99_mps2`` (pose pops),
    ``upright_fraction``, ``trajectory_error_m`` (desired vs actual root position 1 s
    later), ``update_ms_mean`` / ``update_ms_median`` / ``update_ms_p95`` (wall time per
    update, one-off warm-up left out), ``warm_up`` (see :func:`update_timing`) and
    ``idle_seconds``, ``idle_transitions_per_s``, ``idle_root_speed_mps`` (see
    :func:`idle_stillness`), ``jump_spring_rms_m`` (see :func:`jump_spring_error`), and the
    ground's ``foot_ground_error_m``, ``foot_penetration_m``, ``foot_penetration_extra_m``
    and ``hips_height_change`` (:mod:`motionmatch.metrics.ground`) on ``terrain`` (a
    :class:`~motionmatch.environment.terrain.Terrain` the run stood on; ``None``: the
    floor; foot contacts for the skating found above the ground under the feet).
    """
    m = record.motion
    fps = m.fps
    feet = list(db.foot_joints)
    con = foot_contacts(m, feet=feet, ground_height=ground_under_feet(m.world_positions, feet, terrain))
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
        "acceleration_p99_mps2": acceleration_percentile(m, 99.0),
        "upright_fraction": float(upright_fraction(m)),
        "trajectory_error_m": future_trajectory_error(record),
        **update_timing(record),
        "modes": {str(k): float(v) / m.num_frames for k, v in zip(*np.unique(record.modes, return_counts=True))},
        **idle_stillness(record),
        "jump_spring_rms_m": jump_spring_error(record, db),
        **ground_report(m.world_positions, record.frames, db, terrain),
    }
    if script is not None:
        changes = script.direction_changes(include_starts=False)
        times = response_time(root, fps, changes) if changes else []
        out["response_times_s"] = [None if t is None else float(t) for t in times]
        out["response_time_s"] = float(mean_response_time(root, fps, changes)) if changes else None
    return out


def pose_run_report(run: PoseRun, db: MotionDatabase) -> dict:
    """The run's metrics (as ``motionmatch run --report``) plus the command timeline and
    the share of frames in each controller mode."""
    rep = run_report(run.record, db)
    modes, counts = np.unique(run.record.modes, return_counts=True)
    rep["pose_commands"] = run.segments()
    rep["mode_fractions"] = {str(m): round(float(c) / len(run.record.modes), 4) for m, c in zip(modes, counts)}
    rep["pose_frames"] = len(run.classified.times)
    return rep
