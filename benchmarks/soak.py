"""Soak: long simulated runs that must stay sane and flat in memory (issue 15, item 7).

    python benchmarks/soak.py                       # the full soak (1 h single + 10 min crowd)
    python benchmarks/soak.py --single-minutes 2 --crowd-minutes 0.5 --json soak.json

Two runs, stepped as fast as the machine goes (faster than real time), both on one
:class:`~motionmatch.runtime.world.World` each, at 60 Hz:

* **single**: one character driven as the viewer drives it (a ``KeyboardInput`` bent
  around obstacles by ``AroundObstacles``, the viewer's controller defaults) by random
  keys held for random durations (0.2-6 s): W/A/S/D alone and diagonal, Shift (sprint),
  C (creep), J (jump), P (dance), Up/Down (speed steps) and no key (idle). Beyond
  ``--arena`` metres from the origin the direction keys point home, so the character
  keeps meeting the arena's obstacles. Default one simulated hour (216,000 frames).
* **crowd**: ``--agents`` (50) crowd-steering agents (``SteeringInput``, environment-aware
  search, other agents as obstacles) walking and jogging to random goals in an arena
  with obstacles; an agent that arrives gets a new goal. Default 10 simulated minutes.

Checks, over every agent and frame (the run fails, exit status 1, if one fails):

* ``nan``: no non-finite value in the local poses (rotations, translations), the roots
  or the yaws.
* ``root height``: the character root's height (joint 0) within the database's range of
  root heights widened by ``--height-margin`` (0.1 m).
* ``hip height``: the hips' world height within the database's range (all its frames)
  widened by the same margin.
* ``feet``: a foot joint (the database's ``foot_joints``) lower than the floor,
  ``min(0, the database's lowest foot) - --foot-tolerance`` (0.05 m), is counted and
  reported; it fails when it stays below the floor longer than ``--max-below`` seconds
  (0.5: stuck in the ground) or goes deeper than ``--foot-depth`` metres (0.3: through
  the floor). Short dips are expected: a transition's inertialization blends the old
  pose's offset out over a fraction of a second without regard for the ground.
* ``contacts``: the foot locks (``FrameResult.contacts``) not stuck: no lock held while
  the root travels more than ``--max-lock-travel`` metres (2.0; a stance at a sprint covers
  about one), and, in runs longer than a minute, each foot locked in at least 2% and at
  most 98% of the frames in which the root moves faster than 0.5 m/s.
* ``memory``: the process's resident memory (psutil, else ``/proc/self/statm``) is
  sampled every ``--rss-every`` simulated seconds (after ``gc.collect()``); the
  least-squares slope of RSS over simulated time, after the first ``--warmup`` fraction
  of the samples (compilation, caches filled once), is at most ``--max-slope`` MB per
  simulated hour.

Progress goes to stderr (a line every ``--progress-every`` wall seconds, with the
simulated time, the speed against real time, the estimated time left and the RSS);
``--json FILE`` writes every number (``-``: stdout). The database is ``--data`` (a folder
of BVH files, built once and cached as the viewer does: mirrored, schema classic-3d),
default ``$MOTIONMATCH_DATA/lafan1-60fps``, or ``--db DB.npz``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FPS = 60.0
MOVING_SPEED = 0.5  # m/s: frames faster than this count for the contact fractions


# ---------------------------------------------------------------------------- memory
def rss_bytes() -> int:
    """Resident set size of this process in bytes (psutil if installed, else /proc)."""
    try:
        import psutil
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return int(psutil.Process().memory_info().rss)


def rss_slope(sim_seconds, rss, warmup: float = 0.1) -> dict:
    """Least-squares slope of resident memory over simulated time.

    Args:
        sim_seconds: ``[S]`` simulated time of each sample (s).
        rss: ``[S]`` resident memory at each sample (bytes).
        warmup: fraction of the samples (the first ones) left out of the fit.

    Returns:
        ``{"slope_mb_per_hour", "start_mb", "end_mb", "peak_mb", "samples", "fitted"}``:
        the slope in MB (1e6 bytes) per simulated hour (0 with fewer than 3 samples
        fitted), the first fitted and the last sample, the largest sample (MB).
    """
    t = np.asarray(sim_seconds, dtype=np.float64)
    m = np.asarray(rss, dtype=np.float64) / 1e6
    first = min(math.ceil(warmup * len(t)), max(len(t) - 3, 0))
    ft, fm = t[first:], m[first:]
    slope = float(np.polyfit(ft / 3600.0, fm, 1)[0]) if len(ft) >= 3 and np.ptp(ft) > 0 else 0.0
    return {"slope_mb_per_hour": slope, "start_mb": float(fm[0]) if len(fm) else float("nan"),
            "end_mb": float(m[-1]) if len(m) else float("nan"), "peak_mb": float(m.max()) if len(m) else float("nan"),
            "samples": len(t), "fitted": len(ft)}


class RssSampler:
    """RSS samples against simulated time, every ``every`` simulated seconds."""

    def __init__(self, every: float):
        self.every = float(every)
        self.times: list[float] = []
        self.rss: list[int] = []
        self._next = 0.0

    def maybe(self, sim_time: float) -> None:
        if sim_time + 1e-9 >= self._next:
            self.take(sim_time)
            self._next = sim_time + self.every

    def take(self, sim_time: float) -> None:
        gc.collect()
        self.times.append(float(sim_time))
        self.rss.append(rss_bytes())


# ---------------------------------------------------------------------------- plausibility
@dataclass(frozen=True)
class Bands:
    """What counts as plausible, from the database (m).

    Attributes:
        root: ``(low, high)`` the character root's height (joint 0).
        hips: ``(low, high)`` the hips' world height.
        foot_floor: the lowest a foot joint may go.
        hips_joint: the hips' joint index; feet: the foot joints.
    """

    root: tuple[float, float]
    hips: tuple[float, float]
    foot_floor: float
    hips_joint: int
    feet: tuple[int, ...]


def database_bands(db, margin: float = 0.1, foot_tolerance: float = 0.05) -> Bands:
    """:class:`Bands` from every frame of ``db`` (forward kinematics over the database)."""
    from motionmatch.anim.kinematics import forward_kinematics
    from motionmatch.anim.root import find_hips

    hips = find_hips(db.skeleton)
    feet = tuple(int(j) for j in db.foot_joints)
    wp, _ = forward_kinematics(db.skeleton.parents, db.rotations, db.translations)
    root_y, hip_y, foot_y = wp[:, 0, 1], wp[:, hips, 1], wp[:, list(feet), 1]
    return Bands(root=(float(root_y.min()) - margin, float(root_y.max()) + margin),
                 hips=(float(hip_y.min()) - margin, float(hip_y.max()) + margin),
                 foot_floor=min(0.0, float(foot_y.min())) - foot_tolerance, hips_joint=hips, feet=feet)


def run_lengths(flags: np.ndarray, carry: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lengths of the runs of ``True`` in ``flags [n, ...]`` along the first axis: ``(runs
    [n, ...], carry')``, ``runs[t]`` the frames the run through ``t`` has lasted so far
    (0 where ``flags[t]`` is false), counting ``carry [...]`` frames of a run open before
    the first frame; ``carry'`` the same for the next chunk."""
    n = len(flags)
    if not n:
        return np.zeros_like(flags, dtype=np.int64), carry
    prev = np.concatenate([(carry > 0)[None], flags[:-1]], axis=0)
    t = np.arange(n).reshape(-1, *([1] * (flags.ndim - 1)))
    last_begin = np.maximum.accumulate(np.where(flags & ~prev, t, -1), axis=0)
    runs = np.where(last_begin >= 0, t - last_begin + 1, carry[None] + t + 1)
    runs = np.where(flags, runs, 0)
    return runs, runs[-1].copy()


@dataclass
class _Range:
    low: float = math.inf
    high: float = -math.inf
    outside: int = 0

    def add(self, values: np.ndarray, band: tuple[float, float]) -> None:
        if values.size:
            self.low = min(self.low, float(np.nanmin(values)))
            self.high = max(self.high, float(np.nanmax(values)))
            self.outside += int(np.count_nonzero((values < band[0]) | (values > band[1])))

    def as_dict(self, band: tuple[float, float]) -> dict:
        return {"min_m": self.low, "max_m": self.high, "band_m": list(band), "frames_outside": self.outside}


class FrameChecks:
    """Plausibility of ``A`` agents' frames, gathered ``chunk`` frames at a time and checked
    with vectorised forward kinematics per chunk.

    Per frame, :meth:`add` takes every agent's local pose (``[A, J, 4]`` rotations,
    ``[A, J, 3]`` translations: joint 0 is the character root in the world), foot locks
    ``[A, K]``, root positions ``[A, 3]``, yaws ``[A]`` and the database frames played
    ``[A]`` (for :attr:`worst_below`, where the longest stay below the floor ended). Lock runs carry across chunks:
    the root's horizontal travel (m) while a foot stays locked, and the run's length.
    """

    def __init__(self, db, agents: int, bands: Bands, chunk: int = 600, fps: float = FPS):
        J = db.skeleton.num_joints
        K = len(bands.feet)
        self.parents = db.skeleton.parents
        self.bands = bands
        self.fps = float(fps)
        self.A, self.K, self.chunk = int(agents), K, int(chunk)
        self.rot = np.empty((chunk, agents, J, 4))
        self.trs = np.empty((chunk, agents, J, 3))
        self.locks = np.empty((chunk, agents, K), dtype=bool)
        self.root = np.empty((chunk, agents, 3))
        self.yaw = np.empty((chunk, agents))
        self.db_frame = np.zeros((chunk, agents), dtype=np.int64)
        self.clip_of = lambda f: int(db.frame_clip[f])
        self.clip_names = db.clip_names
        self.n = 0
        self.frames = 0  # agent frames checked
        self.nan_frames = 0
        self.root_h, self.hip_h = _Range(), _Range()
        self.foot_min = math.inf
        self.feet_below = 0
        self._below_run = np.zeros((agents, K), dtype=np.int64)  # frames below the floor so far, per foot
        self.max_below_frames = 0
        #: where the longest stay of a foot below the floor ended (agent, foot, time, clip, ...)
        self.worst_below: dict | None = None
        # lock runs: per agent and foot
        self._prev_root: np.ndarray | None = None
        self._travel = np.zeros(agents)  # cumulative horizontal root travel (m)
        self._locked = np.zeros((agents, K), dtype=bool)
        self._run_start = np.zeros((agents, K))  # travel at the start of the current lock run
        self._run_frames = np.zeros((agents, K), dtype=np.int64)
        self.lock_frames = np.zeros(K, dtype=np.int64)
        self.lock_starts = np.zeros(K, dtype=np.int64)
        self.moving_frames = 0
        self.moving_locked = np.zeros(K, dtype=np.int64)
        self.max_lock_travel = 0.0
        self.max_lock_seconds = 0.0

    def add(self, rotations, translations, locks, root, yaw, db_frames=0) -> None:
        """One frame of every agent (see the class docstring for the shapes)."""
        n = self.n
        self.rot[n], self.trs[n], self.locks[n] = rotations, translations, locks
        self.root[n], self.yaw[n], self.db_frame[n] = root, yaw, db_frames
        self.n = n + 1
        if self.n == self.chunk:
            self.flush()

    def flush(self) -> None:
        """Check the frames gathered so far."""
        n = self.n
        if not n:
            return
        rot, trs, root, yaw = self.rot[:n], self.trs[:n], self.root[:n], self.yaw[:n]
        finite = (np.isfinite(rot).all(axis=(2, 3)) & np.isfinite(trs).all(axis=(2, 3))
                  & np.isfinite(root).all(axis=2) & np.isfinite(yaw))  # [n, A]
        self.nan_frames += int(np.count_nonzero(~finite))
        self.frames += n * self.A
        self._heights(rot, trs, finite)
        self._lock_runs(self.locks[:n], np.where(np.isfinite(root), root, 0.0))
        self.n = 0

    def _heights(self, rot, trs, finite) -> None:
        from motionmatch.anim.kinematics import forward_kinematics

        J = rot.shape[2]
        wp, _ = forward_kinematics(self.parents, np.where(finite[..., None, None], rot, [1.0, 0, 0, 0]).reshape(-1, J, 4),
                                   np.where(finite[..., None, None], trs, 0.0).reshape(-1, J, 3))
        wp = wp.reshape(*rot.shape[:2], J, 3)
        b = self.bands
        ok = wp[finite]  # [frames, J, 3], finite frames only
        self.root_h.add(ok[:, 0, 1], b.root)
        self.hip_h.add(ok[:, b.hips_joint, 1], b.hips)
        feet = wp[:, :, list(b.feet), 1]  # [n, A, K]
        if ok.size:
            self.foot_min = min(self.foot_min, float(ok[:, list(b.feet), 1].min()))
        below = (feet < b.foot_floor) & finite[..., None]
        self.feet_below += int(np.count_nonzero(below.any(axis=2)))
        runs, self._below_run = run_lengths(below, self._below_run)
        if runs.size and runs.max() > self.max_below_frames:
            t, a, k = np.unravel_index(int(np.argmax(runs)), runs.shape)
            self.max_below_frames = int(runs[t, a, k])
            f = int(self.db_frame[t, a])
            self.worst_below = {"agent": int(a), "foot": int(k), "end_s": (self.frames // self.A - len(runs) + t + 1)
                                / self.fps, "seconds": self.max_below_frames / self.fps,
                                "foot_height_m": float(feet[t, a, k]), "locked": bool(self.locks[t, a, k]),
                                "db_frame": f, "clip": str(self.clip_names[self.clip_of(f)])}

    def _lock_runs(self, locks: np.ndarray, root: np.ndarray) -> None:
        """Lock statistics of ``locks [n, A, K]`` with roots ``root [n, A, 3]``, carrying
        the runs open at the chunk's end into the next."""
        n = len(locks)
        prev = self._prev_root if self._prev_root is not None else root[0]
        pts = np.concatenate([prev[None], root], axis=0)[:, :, [0, 2]]
        step = np.hypot(*np.moveaxis(np.diff(pts, axis=0), -1, 0))  # [n, A]
        travel = self._travel + np.cumsum(step, axis=0)  # [n, A]
        moving = step * self.fps > MOVING_SPEED
        prev_locked = np.concatenate([self._locked[None], locks[:-1]], axis=0)
        begins = locks & ~prev_locked  # [n, A, K]
        t = np.arange(n)[:, None, None]
        last_begin = np.maximum.accumulate(np.where(begins, t, -1), axis=0)
        tr_at = np.broadcast_to(travel[:, :, None], locks.shape)
        start = np.where(last_begin >= 0,
                         np.take_along_axis(tr_at, np.maximum(last_begin, 0), axis=0), self._run_start[None])
        run, self._run_frames = run_lengths(locks, self._run_frames)
        during = np.where(locks, tr_at - start, 0.0)
        if locks.any():
            self.max_lock_travel = max(self.max_lock_travel, float(during.max()))
            self.max_lock_seconds = max(self.max_lock_seconds, float(run.max()) / self.fps)
        self.lock_frames += locks.sum(axis=(0, 1))
        self.lock_starts += begins.sum(axis=(0, 1))
        self.moving_frames += int(moving.sum())
        self.moving_locked += (locks & moving[:, :, None]).sum(axis=(0, 1))
        self._locked = locks[-1].copy()
        self._run_start = start[-1].copy()
        self._travel = travel[-1].copy()
        self._prev_root = root[-1].copy()

    def summary(self) -> dict:
        """Every number gathered (call :meth:`flush` first)."""
        b = self.bands
        per = max(self.frames, 1)
        return {
            "agent_frames": int(self.frames), "nan_frames": int(self.nan_frames),
            "root_height": self.root_h.as_dict(b.root), "hip_height": self.hip_h.as_dict(b.hips),
            "foot_min_m": self.foot_min, "foot_floor_m": b.foot_floor, "feet_below_frames": int(self.feet_below),
            "feet_below_fraction": round(self.feet_below / per, 6),
            "longest_below_floor_s": self.max_below_frames / self.fps, "longest_below_floor": self.worst_below,
            "contacts": {
                "locked_fraction": (self.lock_frames / per).round(4).tolist(),
                "locks_started": self.lock_starts.tolist(),
                "moving_frames": int(self.moving_frames),
                "locked_fraction_moving": (self.moving_locked / max(self.moving_frames, 1)).round(4).tolist(),
                "max_travel_while_locked_m": self.max_lock_travel,
                "longest_lock_s": self.max_lock_seconds,
            },
        }


@dataclass(frozen=True)
class Limits:
    """Pass/fail thresholds (see the module docstring)."""

    max_slope_mb_per_hour: float = 16.0
    max_lock_travel_m: float = 2.0
    max_below_floor_s: float = 0.5
    foot_depth_m: float = 0.3
    min_locked_moving: float = 0.02
    max_locked_moving: float = 0.98
    contact_min_seconds: float = 60.0


def failures(run: dict, limits: Limits) -> list[str]:
    """The checks ``run`` (one run's result: ``checks``, ``memory``, ``simulated_s``) fails,
    as one line each (empty: it passes)."""
    c, mem = run["checks"], run["memory"]
    out = []
    if c["nan_frames"]:
        out.append(f"{c['nan_frames']} agent frames with NaN or inf")
    for key, label in (("root_height", "root height"), ("hip_height", "hip height")):
        h = c[key]
        if h["frames_outside"]:
            out.append(f"{label} left its band {h['band_m']} in {h['frames_outside']} frames "
                       f"(range {h['min_m']:.3f} .. {h['max_m']:.3f} m)")
    if c["longest_below_floor_s"] > limits.max_below_floor_s:
        out.append(f"a foot stayed below {c['foot_floor_m']:.3f} m for {c['longest_below_floor_s']:.2f} s "
                   f"(limit {limits.max_below_floor_s} s)")
    if c["foot_min_m"] < -limits.foot_depth_m:
        out.append(f"a foot went {-c['foot_min_m']:.3f} m below the ground (limit {limits.foot_depth_m} m)")
    k = c["contacts"]
    if k["max_travel_while_locked_m"] > limits.max_lock_travel_m:
        out.append(f"a foot stayed locked while the root travelled {k['max_travel_while_locked_m']:.2f} m "
                   f"(limit {limits.max_lock_travel_m} m)")
    if run["simulated_s"] >= limits.contact_min_seconds and k["moving_frames"] > 0:
        for foot, frac in enumerate(k["locked_fraction_moving"]):
            if not limits.min_locked_moving <= frac <= limits.max_locked_moving:
                out.append(f"foot {foot} locked in {frac:.1%} of the moving frames "
                           f"(expected {limits.min_locked_moving:.0%} .. {limits.max_locked_moving:.0%}): stuck")
    if mem["slope_mb_per_hour"] > limits.max_slope_mb_per_hour:
        out.append(f"memory grows {mem['slope_mb_per_hour']:.1f} MB per simulated hour "
                   f"(limit {limits.max_slope_mb_per_hour}; RSS {mem['start_mb']:.0f} -> {mem['end_mb']:.0f} MB)")
    return out


# ---------------------------------------------------------------------------- inputs
#: (weight, kind) of the random key holds
HOLDS = ((0.12, "idle"), (0.30, "walk"), (0.14, "sprint"), (0.10, "creep"), (0.10, "jump"), (0.10, "dance"),
         (0.07, "speed"), (0.07, "walk_jump"))
DIRECTIONS = (("w",), ("a",), ("s",), ("d",), ("w", "a"), ("w", "d"), ("s", "a"), ("s", "d"))


@dataclass
class RandomKeys:
    """Random keys held for random durations (the single character's driver).

    With ``camera_yaw = 0``: W = +Z, A = +X, S = -Z, D = -X. Beyond ``arena`` metres from
    the origin the direction keys are those pointing most nearly home."""

    rng: np.random.Generator
    arena: float = 12.0
    hold: tuple[float, float] = (0.2, 6.0)
    until: float = 0.0
    keys: frozenset = frozenset()
    counts: dict = field(default_factory=dict)

    def keys_at(self, t: float, root_xz) -> frozenset | None:
        """The keys to hold from ``t`` on, or ``None`` while the current hold lasts."""
        if t < self.until:
            return None
        kinds, weights = zip(*((k, w) for w, k in HOLDS))
        kind = str(self.rng.choice(kinds, p=np.asarray(weights) / sum(weights)))
        self.counts[kind] = self.counts.get(kind, 0) + 1
        lo, hi = (0.2, 0.8) if kind in ("jump", "speed") else self.hold
        self.until = t + float(self.rng.uniform(lo, hi))
        d = self._direction(root_xz)
        keys = {"idle": (), "walk": d, "sprint": ("shift", *d), "creep": ("c", *d), "jump": ("j",),
                "dance": ("p",), "speed": (str(self.rng.choice(["up", "down"])), *d), "walk_jump": ("j", *d)}[kind]
        self.keys = frozenset(keys)
        return self.keys

    def _direction(self, root_xz) -> tuple[str, ...]:
        x, z = float(root_xz[0]), float(root_xz[1])
        if math.hypot(x, z) <= self.arena:
            return DIRECTIONS[int(self.rng.integers(len(DIRECTIONS)))]
        home = np.array([-x, -z]) / math.hypot(x, z)
        best, score = DIRECTIONS[0], -2.0
        for d in DIRECTIONS:
            v = np.array([("a" in d) - ("d" in d), ("w" in d) - ("s" in d)], dtype=np.float64)
            s = float(v @ home / np.linalg.norm(v))
            if s > score:
                best, score = d, s
        return best


def arena_scene(rng: np.random.Generator, radius: float, count: int):
    """A :class:`~motionmatch.environment.scene.Scene` of ``count`` random disks and boxes
    within ``radius`` metres of the origin, none within 2.5 m of it."""
    from motionmatch.environment.obstacles import box, disk
    from motionmatch.environment.scene import Scene

    obs = []
    while len(obs) < count:
        x, z = rng.uniform(-radius, radius, 2)
        if math.hypot(x, z) < 2.5 or math.hypot(x, z) > radius:
            continue
        if len(obs) % 2:
            obs.append(box(float(x), float(z), float(rng.uniform(0.5, 2.0)), float(rng.uniform(0.3, 1.0)),
                           float(rng.uniform(-math.pi, math.pi))))
        else:
            obs.append(disk(float(x), float(z), float(rng.uniform(0.2, 0.6))))
    return Scene(obs)


# ---------------------------------------------------------------------------- runs
class Progress:
    """Lines on stderr: simulated time, speed against real time, time left, RSS."""

    def __init__(self, label: str, total_s: float, every: float, enabled: bool = True):
        self.label, self.total, self.every, self.enabled = label, float(total_s), float(every), enabled
        self.t0 = time.perf_counter()
        self._next = self.t0 + self.every

    def maybe(self, sim: float, extra: str = "") -> None:
        now = time.perf_counter()
        if self.enabled and now >= self._next:
            self._next = now + self.every
            self.line(sim, extra)

    def line(self, sim: float, extra: str = "") -> None:
        wall = time.perf_counter() - self.t0
        speed = sim / wall if wall > 0 else 0.0
        left = (self.total - sim) / speed if speed > 0 else float("inf")
        print(f"[{self.label}] {sim / 60:6.1f} / {self.total / 60:.1f} min simulated  {wall:7.1f} s wall  "
              f"{speed:5.1f}x real time  ETA {_clock(left)}  RSS {rss_bytes() / 1e6:.0f} MB{extra}",
              file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _gather(checks: FrameChecks, agents) -> None:
    """One frame of ``agents`` into ``checks``."""
    A, J = len(agents), checks.rot.shape[2]
    rot, trs = np.empty((A, J, 4)), np.empty((A, J, 3))
    locks, root, yaw = np.empty((A, checks.K), dtype=bool), np.empty((A, 3)), np.empty(A)
    frames = np.empty(A, dtype=np.int64)
    for i, a in enumerate(agents):
        r = a.result
        rot[i], trs[i], locks[i], frames[i] = r.rotations, r.translations, r.contacts, r.frame
        root[i], yaw[i] = a.ctrl.root_pos, a.ctrl.root_yaw
    checks.add(rot, trs, locks, root, yaw, frames)


def _searches(agents) -> int:
    """Searches logged by the agents' choosers (``len(log.times)`` where a log has no
    ``count``: a source tree from before the logs were bounded, for a before/after run)."""
    logs = [a.chooser.log for a in agents if a.chooser is not None]
    return int(sum(getattr(lg, "count", None) or len(lg.times) for lg in logs))


def _finish(label: str, checks: FrameChecks, rss: RssSampler, sim: float, frames: int, wall: float,
            warmup: float, extra: dict) -> dict:
    checks.flush()
    rss.take(sim)
    return {"run": label, "frames": int(frames), "simulated_s": float(sim), "wall_s": float(wall),
            "realtime_factor": float(sim / wall) if wall > 0 else None, "checks": checks.summary(),
            "memory": rss_slope(rss.times, rss.rss, warmup), **extra}


def soak_single(db, seconds: float, *, seed: int = 0, arena: float = 12.0, obstacles: int = 8,
                rss_every: float = 10.0, warmup: float = 0.1, progress_every: float = 30.0, progress: bool = True,
                bands: Bands | None = None, matcher=None) -> dict:
    """One keyboard-driven character for ``seconds`` simulated seconds at 60 Hz (see the
    module docstring); returns the run's numbers (``checks``, ``memory``, ...)."""
    from motionmatch.control.intent import Intent
    from motionmatch.runtime.controller import ControllerSettings
    from motionmatch.runtime.environment_matching import EnvironmentMatcher
    from motionmatch.runtime.inputs import AroundObstacles, KeyboardInput
    from motionmatch.runtime.world import World

    rng = np.random.default_rng(seed)
    world = World(db, arena_scene(rng, arena, obstacles), matcher=matcher or EnvironmentMatcher(db),
                  controller=ControllerSettings(), stagger=False, record_poses=False, fps=FPS)
    agent = world.add_agent("soak", (0.0, 0.0), (0.0, 1.0))
    keys = KeyboardInput(agent.ctrl.gaits)
    agent.source = AroundObstacles(keys, world)
    agent.result = agent.ctrl.update(0.0, Intent.idle())
    driver = RandomKeys(rng, arena=arena)
    checks = FrameChecks(db, 1, bands or database_bands(db))
    rss = RssSampler(rss_every)
    n = round(seconds * FPS)
    bar = Progress("single", seconds, progress_every, progress)
    modes: dict[str, int] = {}
    t0 = time.perf_counter()
    for f in range(n):
        sim = f / FPS
        held = driver.keys_at(sim, agent.root_xz)
        if held is not None:
            keys.set_keys(held)
        world.step(1.0 / FPS)
        _gather(checks, world.agents)
        m = agent.result.mode
        modes[m] = modes.get(m, 0) + 1
        rss.maybe(sim)
        bar.maybe(sim + 1 / FPS)
    wall = time.perf_counter() - t0
    bar.line(n / FPS)
    return _finish("single", checks, rss, n / FPS, n, wall, warmup,
                   {"agents": 1, "mode_frames": modes, "holds": dict(driver.counts),
                    "searches": _searches([agent]),
                    "final_root": [float(x) for x in agent.ctrl.root_pos]})


def soak_crowd(db, seconds: float, agents: int = 50, *, seed: int = 1, arena: float = 15.0, obstacles: int = 10,
               rss_every: float = 5.0, warmup: float = 0.1, progress_every: float = 30.0, progress: bool = True,
               bands: Bands | None = None, matcher=None) -> dict:
    """``agents`` crowd-steering agents to random goals for ``seconds`` simulated seconds at
    60 Hz (see the module docstring); returns the run's numbers."""
    from motionmatch.runtime.crowd import SteeringInput, SteeringSettings
    from motionmatch.runtime.environment_matching import EnvironmentMatcher
    from motionmatch.runtime.world import World

    rng = np.random.default_rng(seed)
    world = World(db, arena_scene(rng, arena, obstacles), matcher=matcher or EnvironmentMatcher(db), record_poses=False,
                  fps=FPS)
    steer = SteeringSettings()
    side = math.ceil(math.sqrt(agents))
    speeds = rng.choice([1.0, 1.3, 1.6, 2.6], size=agents, p=[0.3, 0.3, 0.25, 0.15])

    def goal() -> np.ndarray:
        while True:
            g = rng.uniform(-arena, arena, 2)
            if np.hypot(*g) <= arena:
                return g

    for i in range(agents):
        start = ((i % side - (side - 1) / 2) * 1.2, (i // side - (side - 1) / 2) * 1.2)
        a = world.add_agent(f"agent {i}", start, tuple(rng.normal(size=2)))
        a.source = SteeringInput(world, goal(), float(speeds[i]), steer, side=1.0 if i % 2 else -1.0)
    checks = FrameChecks(db, agents, bands or database_bands(db))
    rss = RssSampler(rss_every)
    n = round(seconds * FPS)
    bar = Progress("crowd", seconds, progress_every, progress)
    arrivals = 0
    t0 = time.perf_counter()
    for f in range(n):
        world.step(0.0 if f == 0 else 1.0 / FPS)
        _gather(checks, world.agents)
        for i, a in enumerate(world.agents):
            if a.source.arrived:  # a new goal
                arrivals += 1
                a.source = SteeringInput(world, goal(), float(speeds[i]), steer, side=a.source.side)
        rss.maybe(f / FPS)
        bar.maybe((f + 1) / FPS, f"  arrivals {arrivals}")
    wall = time.perf_counter() - t0
    bar.line(n / FPS, f"  arrivals {arrivals}")
    return _finish("crowd", checks, rss, n / FPS, n, wall, warmup,
                   {"agents": agents, "arrivals": arrivals,
                    "searches": _searches(world.agents)})


# ---------------------------------------------------------------------------- main
def load_database(data: str | None, db_path: str | None, log=print):
    """The database: ``db_path`` (an ``.npz``), else the folder ``data`` built and cached
    as the viewer builds it; returns ``(db, description, seconds)``."""
    from motionmatch.viewer.data import open_database

    t0 = time.perf_counter()
    if db_path is None and data is None:
        root = os.environ.get("MOTIONMATCH_DATA") or str(REPO.parent / "shared" / "data")
        data = str(Path(root) / "lafan1-60fps")
    db, src = open_database(db_path, data, progress=False, log=log)
    return db, src.description, time.perf_counter() - t0


def machine() -> dict:
    """Where the soak ran."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "platform": platform.platform()}


def parse_args(argv=None) -> argparse.Namespace:
    class Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
        pass

    p = argparse.ArgumentParser(prog="soak.py", description=__doc__, formatter_class=Help,
                                epilog="Exit status: 0 every check passed, 1 a check failed (each printed), 2 usage.")
    p.add_argument("--data", help="folder of BVH files (default $MOTIONMATCH_DATA/lafan1-60fps)")
    p.add_argument("--db", help="a database .npz (motionmatch build) instead of --data")
    p.add_argument("--single-minutes", type=float, default=60.0, help="simulated minutes of the keyboard character "
                   "(0: skip)")
    p.add_argument("--crowd-minutes", type=float, default=10.0, help="simulated minutes of the crowd (0: skip)")
    p.add_argument("--agents", type=int, default=50, help="agents in the crowd")
    p.add_argument("--seed", type=int, default=0, help="random seed (keys, goals, obstacles)")
    p.add_argument("--rss-every", type=float, default=10.0, help="simulated seconds between RSS samples")
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of the RSS samples left out of the slope")
    p.add_argument("--max-slope", type=float, default=16.0, help="largest RSS slope allowed, MB per simulated hour")
    p.add_argument("--max-lock-travel", type=float, default=2.0, help="metres the root may travel while a foot "
                   "stays locked")
    p.add_argument("--max-below", type=float, default=0.5, help="seconds a foot may stay below the floor")
    p.add_argument("--foot-depth", type=float, default=0.3, help="metres below the ground no foot may reach")
    p.add_argument("--height-margin", type=float, default=0.1, help="metres beyond the database's root and hip "
                   "heights still plausible")
    p.add_argument("--foot-tolerance", type=float, default=0.05, help="metres a foot may go below the ground "
                   "(or the database's lowest foot)")
    p.add_argument("--progress-every", type=float, default=30.0, help="wall seconds between progress lines")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--json", metavar="FILE", help="write every number as JSON to FILE ('-': stdout)")
    a = p.parse_args(argv)
    if a.single_minutes < 0 or a.crowd_minutes < 0 or a.agents < 1 or a.rss_every <= 0 or not 0 <= a.warmup < 1:
        p.error("minutes must be >= 0, --agents >= 1, --rss-every > 0 and 0 <= --warmup < 1")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    say = (lambda *m: None) if a.quiet else (lambda *m: print(*m, file=sys.stderr, flush=True))
    from motionmatch.errors import MotionMatchError

    try:
        db, desc, load_s = load_database(a.data, a.db, log=say)
    except MotionMatchError as e:
        print(f"soak.py: error: {e}", file=sys.stderr)
        return 2
    say(f"database: {desc}, {db.num_frames} frames ({load_s:.1f} s)")
    bands = database_bands(db, a.height_margin, a.foot_tolerance)
    limits = Limits(max_slope_mb_per_hour=a.max_slope, max_lock_travel_m=a.max_lock_travel,
                    max_below_floor_s=a.max_below, foot_depth_m=a.foot_depth)
    runs = []
    from motionmatch.runtime.environment_matching import EnvironmentMatcher

    common = dict(seed=a.seed, warmup=a.warmup, progress_every=a.progress_every, progress=not a.quiet, bands=bands,
                  matcher=EnvironmentMatcher(db))
    if a.single_minutes > 0:
        runs.append(soak_single(db, a.single_minutes * 60.0, rss_every=a.rss_every, **common))
    if a.crowd_minutes > 0:
        runs.append(soak_crowd(db, a.crowd_minutes * 60.0, a.agents, rss_every=a.rss_every / 2, **{**common,
                                                                                              "seed": a.seed + 1}))
    for r in runs:
        r["failures"] = failures(r, limits)
    report = {"command": "python benchmarks/soak.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "database": desc, "database_frames": int(db.num_frames), "machine": machine(),
              "limits": limits.__dict__, "runs": runs, "passed": not any(r["failures"] for r in runs)}
    for r in runs:
        c, m = r["checks"], r["memory"]
        print(f"{r['run']}: {r['frames']} frames x {r['agents']} agents ({r['simulated_s'] / 60:.1f} min simulated, "
              f"{r['wall_s']:.0f} s wall), NaN frames {c['nan_frames']}, hips {c['hip_height']['min_m']:.2f}.."
              f"{c['hip_height']['max_m']:.2f} m, lowest foot {c['foot_min_m']:.3f} m "
              f"(below {c['foot_floor_m']:.3f} m in {c['feet_below_fraction']:.2%} of frames, at most "
              f"{c['longest_below_floor_s']:.2f} s), RSS {m['start_mb']:.0f} -> "
              f"{m['end_mb']:.0f} MB ({m['slope_mb_per_hour']:+.1f} MB/h): "
              + ("PASS" if not r["failures"] else "FAIL\n  " + "\n  ".join(r["failures"])),
              file=sys.stderr if a.json == "-" else sys.stdout)
    if a.json:
        text = json.dumps(report, indent=2)
        if a.json == "-":
            print(text)
        else:
            Path(a.json).write_text(text + "\n")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
