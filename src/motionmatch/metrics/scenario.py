"""The numbers of a world run (``motionmatch scenario --report``): search time, diversity,
path error, collisions, per agent and overall, and the bodies' ellipse tracks they are
measured on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from motionmatch._jit import overlapping
from motionmatch.environment.body import motion_ellipses
from motionmatch.environment.collision import body_distances, collision_summary, intersection_runs, pair_distances
from motionmatch.geometry.polyline import distance_to_path
from motionmatch.metrics.ground import ground_samples, summarise
from motionmatch.metrics.torso import torso_rotation, torso_summary
from motionmatch.runtime.world import World, WorldRecord

__all__ = ["body_tracks", "scenario_report", "torso_rotations"]


def body_tracks(world: World, rec: WorldRecord) -> np.ndarray:
    """``[A, F, 8]`` each agent's body ellipse per frame: from the recorded poses, or (when
    poses were not recorded) from the database frame played, placed at the root."""
    return _tracks(world, rec)[0]


def torso_rotations(world: World, rec: WorldRecord) -> np.ndarray | None:
    """``[A, F]`` each agent's torso rotation per frame in degrees (0: shoulders square to
    the direction of travel, 90: along it; ``NaN`` while not moving;
    :func:`motionmatch.metrics.torso.torso_rotation`), from the recorded poses; ``None``
    when poses were not recorded."""
    return _tracks(world, rec)[1]


def _tracks(world: World, rec: WorldRecord) -> tuple[np.ndarray, np.ndarray | None, list | None]:
    """Body ellipse tracks ``[A, F, 8]``, torso rotations ``[A, F]`` and each agent's
    ground samples (:func:`~motionmatch.metrics.ground.ground_samples` on the world's
    terrain) (both ``None`` without recorded poses), the poses' forward kinematics done once."""
    A, F = rec.frames.shape
    out = np.zeros((A, F, 8))
    if rec.rotations is not None:
        torso = np.zeros((A, F))
        grounds = []
        for i in range(A):
            m = rec.motion(i, world.db.skeleton)
            wp = m.world_positions
            out[i] = motion_ellipses(wp, m.world_rotations[:, 0], rec.fps)
            torso[i] = torso_rotation(wp, world.db.skeleton, rec.fps)
            grounds.append(ground_samples(wp, rec.frames[i], world.db, world.scene.terrain))
        return out, torso, grounds
    cur = world.matcher.played_ellipses
    for i in range(A):
        e = cur[rec.frames[i]]  # [F, 7] character frame
        c, s = np.cos(rec.root_yaws[i]), np.sin(rec.root_yaws[i])
        x, z = rec.root_positions[i, :, 0], rec.root_positions[i, :, 2]
        out[i, :, 0] = x + c * e[:, 0] + s * e[:, 1]
        out[i, :, 1] = z - s * e[:, 0] + c * e[:, 1]
        out[i, :, 2] = c * e[:, 2] + s * e[:, 3]
        out[i, :, 3] = -s * e[:, 2] + c * e[:, 3]
        out[i, :, 4:8] = e[:, 4:8]
    return out, None, None


def scenario_report(world: World, rec: WorldRecord, scenario=None,
                    compiles: Sequence[tuple[float, float]] = ()) -> dict:
    """Numbers of a run: search time, diversity, path error, collisions (per agent and overall).

    ``compiles``: the run's Numba compilations (:class:`motionmatch._jit.compile_intervals`);
    a search that overlaps one paid a one-off warm-up and is left out of the search times.

    Keys: ``ms_per_search`` (mean chooser time over every search of every agent, warm-up
    left out; over the last searches each agent's log keeps, 1024, and all of them in
    runs shorter than about three minutes), ``ms_per_search_median``, ``warm_up`` (``searches`` left out, their
    ``ms_per_search``, and ``compile_s``: the time spent compiling during the run), ``search_call_ms`` (mean thread CPU time of the search call
    alone, without obstacle gathering and bookkeeping; ``null`` when not logged), ``searches``, ``diversity`` (distinct database frames
    played, all agents), ``error_m`` (mean distance from the root to the agent's target
    path, over path-following agents; ``null`` without any), ``collision_time_s`` (mean
    duration of an intersection of a body with an obstacle or another body),
    ``collision_fraction`` (share of agent-frames in some intersection), ``collisions``,
    ``obstacle_collision_fraction`` / ``agent_collision_fraction``, ``step_ms`` (mean wall
    time of a world step), ``realtime_factor`` (simulated / wall time), ``torso_rotation_deg`` (``mean``, ``p90``,
    ``max`` over every agent's moving frames: the shoulders' turn away from square to the
    direction of travel, :mod:`motionmatch.metrics.torso`; ``None`` without recorded
    poses), the ground's ``foot_ground_error_m``, ``foot_penetration_m``,
    ``foot_penetration_extra_m``, ``hips_height_change`` (:mod:`motionmatch.metrics.ground`,
    on the world's terrain, over every agent; with recorded poses), ``agents`` (per
    agent: the same measures, final position, distance to goal).
    """
    A, F = rec.frames.shape
    fps = rec.fps
    tracks, torso, grounds = _tracks(world, rec)
    times = np.arange(F) / fps
    scene = world.scene
    if scene.moving_ids.size:
        rows = np.stack([scene.rows_at(t) for t in times])
    else:
        rows = scene.rows_at(0.0)
    per = []
    all_times = []
    call_times = []
    warm_times: list[float] = []
    total_searches = 0
    errors = []
    inside_any = np.zeros((A, F), dtype=bool)
    obstacle_in = np.zeros((A, F), dtype=bool)
    agent_in = np.zeros((A, F), dtype=bool)
    run_lengths = []
    for i in range(A):
        d_obs = body_distances(tracks[i], rows) if len(scene) else np.zeros((F, 0))
        others = [pair_distances(tracks[i], tracks[j]) for j in range(A) if j != i]
        d_ag = np.stack(others, axis=1) if others else np.zeros((F, 0))
        d_all = np.concatenate([d_obs, d_ag], axis=1)
        summ = collision_summary(d_all, fps)
        run_lengths.extend(n for _, _, n in intersection_runs(d_all < 0))
        obstacle_in[i] = (d_obs < 0).any(axis=1) if d_obs.shape[1] else False
        agent_in[i] = (d_ag < 0).any(axis=1) if d_ag.shape[1] else False
        inside_any[i] = obstacle_in[i] | agent_in[i]
        a = world.agents[i]
        entry = {"name": rec.names[i], **summ,
                 "final_position": [float(rec.root_positions[i, -1, 0]), float(rec.root_positions[i, -1, 2])]}
        if torso is not None:
            entry["torso_rotation_deg"] = torso_summary(torso[i])
            entry.update(summarise(grounds[i]))
        if a.path is not None:
            e = distance_to_path(rec.root_positions[i], np.stack([a.path[:, 0], np.zeros(len(a.path)),
                                                                    a.path[:, 1]], axis=1))
            entry["error_m"] = float(e.mean())
            errors.append(e)
        if a.goal is not None:
            entry["goal_distance_m"] = float(np.hypot(*(rec.root_positions[i, -1, [0, 2]] - a.goal)))
        lg = rec.logs[i]
        if lg is not None and lg.times:
            warm = overlapping(lg.starts, lg.times, compiles)
            steady = np.asarray(lg.times)[~warm]
            entry["ms_per_search"] = float(np.mean(steady) * 1e3) if steady.size else None
            entry["searches"] = lg.count
            total_searches += lg.count
            all_times.extend(steady.tolist())
            warm_times.extend(np.asarray(lg.times)[warm].tolist())
            call_times.extend(np.asarray(lg.search_cpu_times)[~warm].tolist())
        per.append(entry)
    report = {
        "scenario": getattr(scenario, "name", None),
        "agents_count": A,
        "frames": F,
        "duration_s": F / fps,
        "ms_per_search": float(np.mean(all_times) * 1e3) if all_times else 0.0,
        "ms_per_search_median": float(np.median(all_times) * 1e3) if all_times else 0.0,
        "search_call_ms": float(np.mean(call_times) * 1e3) if call_times else None,
        "searches": total_searches,
        "warm_up": {"searches": len(warm_times),
                    "ms_per_search": float(np.mean(warm_times) * 1e3) if warm_times else None,
                    "compile_s": round(float(sum(b - a for a, b in compiles)), 3)},
        "diversity": int(np.unique(rec.frames).size),
        "error_m": float(np.concatenate(errors).mean()) if errors else None,
        "collision_time_s": float(np.mean(run_lengths) / fps) if run_lengths else 0.0,
        "collision_fraction": float(inside_any.mean()),
        "collisions": len(run_lengths),
        "obstacle_collision_fraction": float(obstacle_in.mean()),
        "agent_collision_fraction": float(agent_in.mean()),
        "step_ms": float(rec.step_seconds[1:].mean() * 1e3) if F > 1 else 0.0,
        "realtime_factor": float((F / fps) / max(rec.step_seconds.sum(), 1e-9)),
        "torso_rotation_deg": torso_summary(torso.ravel()) if torso is not None else None,
        **(summarise({k: np.concatenate([g[k] for g in grounds]) for k in grounds[0]}) if grounds else {}),
        "agents": per,
    }
    return report
