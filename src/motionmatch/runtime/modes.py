"""What the database says about its gaits and special actions (speeds, jump/creep targets)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from motionmatch.control.intent import GaitSpeeds
from motionmatch.database import MotionDatabase
from motionmatch.database.tags import TagQueryError


def _has_tag(db: MotionDatabase, tag: str) -> bool:
    return tag in db.tags


def gait_speeds_from_database(db: MotionDatabase) -> GaitSpeeds:
    """Typical gait speeds measured from the database: the median root speed of moving
    frames of clips tagged walk / run / sprint / creep (defaults where a tag is absent)."""
    speed = db.root_speeds()
    d = GaitSpeeds()

    def median(tag: str, default: float, q: float = 50) -> float:
        if not _has_tag(db, tag):
            return default
        m = db.mask(tag) & (speed > 0.5)
        return float(np.percentile(speed[m], q)) if m.sum() > 30 else default

    walk = median("walk", d.walk)
    run = max(median("run", d.run), walk + 0.5)
    sprint = max(median("sprint", d.sprint), median("run", d.sprint, 90), run)
    creep_mask = db.mask("creep") & (speed > 0.2) if _has_tag(db, "creep") else None
    creep = float(np.median(speed[creep_mask])) if creep_mask is not None and creep_mask.sum() > 30 else d.creep
    return GaitSpeeds(walk=walk, run=run, sprint=sprint, creep=creep)


def vertical_columns(db: MotionDatabase) -> np.ndarray:
    """Indices of the vertical (height / vertical velocity) feature dimensions."""
    cols = []
    for t in db.schema.terms:
        if t.is_trajectory and t.vertical:
            start = db.schema.slice(t.name).start
            cols.extend(start + 3 * i + 1 for i in range(len(t.offsets)))
    return np.asarray(cols, dtype=np.int64)


def foot_heights(db: MotionDatabase) -> np.ndarray | None:
    """``[N, 2]`` heights (m) of the contact feet above the ground, from the schema's
    ``bone_position`` features of the feet (the root is on the ground), if it has them."""
    for t in db.schema.terms:
        if t.kind == "bone_position" and tuple(t.joints[:2]) == ("left_foot", "right_foot"):
            start = db.schema.slice(t.name).start
            return db.raw_features[:, [start + 1, start + 4]].astype(np.float64)
    return None


def flight_starts(db: MotionDatabase, min_flight_s: float = 0.11, clearance: float = 0.12) -> np.ndarray:
    """Frames where a flight phase starts: both feet out of contact and higher than
    ``clearance`` (m), with the hips above 70% of their median height (upright, not
    crawling), for at least ``min_flight_s`` (longer than a running stride's ~0.07 s
    airborne time)."""
    if db.contacts.shape[1] < 2:
        return np.zeros(0, dtype=np.int64)
    air = ~db.contacts.any(axis=1)
    h = foot_heights(db)
    if h is not None:
        air &= h.min(axis=1) > clearance
    hips = db.translations[:, 1, 1].astype(np.float64)  # joint 1's height above the ground root
    air &= hips > 0.7 * np.median(hips[db.valid])
    same = np.r_[False, db.frame_clip[1:] == db.frame_clip[:-1]]
    start = air & ~(np.r_[False, air[:-1]] & same)
    n = max(1, round(min_flight_s * db.fps))
    # airborne frames in the n frames from each start, within its clip
    csum = np.r_[0, np.cumsum(air)]
    idx = np.arange(len(air))
    end = np.minimum(idx + n, db.clip_stops[db.frame_clip])
    long_enough = (csum[end] - csum[idx]) >= n
    return np.flatnonzero(start & long_enough)


def takeoff_mask(db: MotionDatabase, lead_s: tuple[float, float] = (0.1, 0.45)) -> np.ndarray:
    """``[N]`` valid frames from which a jump (a flight phase, see :func:`flight_starts`)
    begins ``lead_s`` seconds later, in the same clip: where a jump search should land."""
    out = np.zeros(db.num_frames, dtype=bool)
    lo, hi = (round(x * db.fps) for x in lead_s)
    for f in flight_starts(db):
        a = max(int(db.clip_starts[db.frame_clip[f]]), f - hi)
        out[a: max(a, f - lo + 1)] = True
    return out & db.valid


def punch_strikes(db: MotionDatabase, lead_s: tuple[float, float] = (0.15, 0.5), apart_s: float = 0.4
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Where a punch search should land and when its punch lands: ``([N]`` bool, valid
    frames of ``punch`` clips ``lead_s`` seconds before a strike, ``[N]`` int64 the frame
    of the next strike in the same clip, -1 where none follows``)``.

    A strike is a moment where a hand reaches furthest from the chest on the ground plane:
    a local maximum of the farther hand's reach, at least 1.5 times the clip's median reach
    and 15 cm beyond it, ``apart_s`` seconds from a stronger one (a clip of five punches
    has five strikes). Hands and chest are the skeleton's humanoid roles; a rig without
    them, or data without ``punch`` clips, has none."""
    from motionmatch.anim.humanoid import HumanoidError, find_humanoid
    from motionmatch.anim.kinematics import forward_kinematics

    land = np.zeros(db.num_frames, dtype=bool)
    nxt = np.full(db.num_frames, -1, dtype=np.int64)
    if "punch" not in db.tags:
        return land, nxt
    try:
        roles = find_humanoid(db.skeleton)
    except HumanoidError:
        return land, nxt
    hands = [j for j in (roles.get("left_hand"), roles.get("right_hand")) if j is not None]
    centre = roles.get("chest") or roles.get("spine") or roles.hips
    if not hands:
        return land, nxt
    lo, hi = (round(x * db.fps) for x in lead_s)
    apart = max(1, round(apart_s * db.fps))
    for c in np.flatnonzero(np.bincount(db.frame_clip[db.mask("punch")], minlength=len(db.clip_names))):
        a, b = int(db.clip_starts[c]), int(db.clip_stops[c])
        wp, _ = forward_kinematics(db.skeleton.parents, db.rotations[a:b].astype(np.float64),
                                   db.translations[a:b].astype(np.float64))
        reach = np.max([np.linalg.norm((wp[:, h] - wp[:, centre])[:, [0, 2]], axis=1) for h in hands], axis=0)
        med = float(np.median(reach))
        strong = reach >= max(1.5 * med, med + 0.15)
        strikes = []
        for f in np.argsort(-reach):  # strongest first; each keeps its neighbourhood
            if not strong[f]:
                break
            if all(abs(int(f) - g) >= apart for g in strikes):
                strikes.append(int(f))
        for f in sorted(strikes, reverse=True):
            nxt[a: a + f + 1] = a + f
            land[max(a, a + f - hi): max(a, a + f - lo + 1)] = True
    return land & db.valid, nxt


@dataclass
class VerticalTargets:
    """Raw vertical feature values to ask for when jumping and creeping (3D schemas)."""

    jump: np.ndarray | None
    creep: np.ndarray | None


def vertical_targets(db: MotionDatabase) -> VerticalTargets:
    """Typical vertical features of take-offs in ``jump`` clips and of ``creep`` clips.

    Jump: take-off frames (:func:`takeoff_mask`), or if the data has no flight phases,
    the 3% of jump-tagged frames whose future hips rise the most. Creep: creep-tagged frames whose future hips are below 60% of the
    database's median future hips height. Each target is the mean of those frames'
    vertical features (heights in m, vertical velocities in m/s).
    """
    cols = vertical_columns(db)
    if cols.size == 0:
        return VerticalTargets(None, None)
    heights = [db.schema.slice(t.name).start + 3 * i + 1
               for t in db.schema.terms if t.kind == "trajectory_position" and t.vertical for i in range(len(t.offsets))]
    raw = db.raw_features
    h = raw[:, heights]
    jump = creep = None
    takeoff = takeoff_mask(db)
    if takeoff.sum() > 10:
        jump = raw[takeoff][:, cols].mean(axis=0)
    elif _has_tag(db, "jump"):
        m = db.mask("jump")
        rise = h.max(axis=1) - db.translations[:, 1, 1]  # joint 1 (hips) height above the root
        if m.sum() > 30:
            sel = m & (rise >= np.percentile(rise[m], 97))
            jump = raw[sel][:, cols].mean(axis=0)
    if _has_tag(db, "creep"):
        m = db.mask("creep")
        low = m & (h.max(axis=1) < 0.6 * np.median(h[db.valid]))
        if low.sum() > 30:
            creep = raw[low][:, cols].mean(axis=0)
    return VerticalTargets(jump, creep)


#: Why a mode cannot be played, when the database lacks what it plays.
UNAVAILABLE = {
    "jump": "this database has no jump (no flight phase, no clip tagged jump); the character goes on as it was",
    "dance": "this database has no dance clip (none is tagged dance); the character goes on as it was",
    "creep": "this database has no crawling clip (none is tagged creep); the character goes on as it was",
    "punch": "this database has no punch (no clip tagged punch); the character goes on as it was",
    "idle": "this database has no standing clip (no second of standing still); the character holds its pose",
}


def refuse_mode(refused: dict[str, str], mode: str, said: set[str]) -> None:
    """Note in ``refused`` (one character's ``{mode: reason}``) that ``mode`` cannot be
    played and why, and say so (a :class:`~motionmatch.errors.ModeWarning`, one line) once
    per database: ``said``, the modes said already (a crowd of a hundred says it once)."""
    import warnings

    from motionmatch.errors import ModeWarning

    if mode not in refused:
        refused[mode] = UNAVAILABLE[mode]
        if mode not in said:
            said.add(mode)
            warnings.warn(f"{mode}: {UNAVAILABLE[mode]}", ModeWarning, stacklevel=3)


@dataclass(frozen=True)
class IdleClip:
    """The standing stretch of the data that idle plays: frames ``[start, stop)`` of one clip.

    Attributes:
        start, stop: database frames (stop exclusive), in one clip.
        entries: ``[N]`` bool, the frames of its first part that a search may land on when
            idle begins or loops: valid frames at least 2 s before ``stop`` (half the
            stretch if that is shorter), so that idle transitions at most every 2 s.
        cost: the stretch's mean stillness cost (see :func:`idle_clip`; lower is stiller).
    """

    start: int
    stop: int
    entries: np.ndarray
    cost: float

    @property
    def frames(self) -> int:
        return self.stop - self.start


def _root_frame_positions(db: MotionDatabase, frames: np.ndarray) -> np.ndarray:
    """``[n, J, 3]`` joint positions of ``frames`` in their character root's frame (m)."""
    from motionmatch.anim.kinematics import forward_kinematics

    rot = db.rotations[frames].astype(np.float64)
    pos = db.translations[frames].astype(np.float64)
    rot[:, 0] = (1.0, 0.0, 0.0, 0.0)
    pos[:, 0] = 0.0
    return forward_kinematics(db.skeleton.parents, rot, pos)[0]


def _asymmetry(db: MotionDatabase, wp: np.ndarray) -> np.ndarray:
    """``[n]`` mean distance (m) between each joint and its left/right partner reflected
    across the character's sagittal plane (0 for a symmetric pose; zeros when the
    skeleton's joints cannot be paired by name)."""
    from motionmatch.anim.mirror import mirror_pairs
    from motionmatch.errors import SkeletonError

    try:
        pairs = mirror_pairs(db.skeleton)
    except SkeletonError:
        return np.zeros(len(wp))
    return np.linalg.norm(wp * (-1.0, 1.0, 1.0) - wp[:, pairs], axis=-1)[:, 1:].mean(axis=1)


def idle_clip(db: MotionDatabase, tags: str | None = None, seconds: float = 4.0,
              max_root_speed: float = 0.3) -> IdleClip | None:
    """The stillest ``seconds``-long standing stretch of the clips ``tags`` admits, for
    idle to play (the paper's "pre-selected stand-still animation", chosen from the data
    by a rule that works on any dataset). ``None`` when the data has no standing stretch
    of at least a second.

    Every frame gets a stillness cost, the sum of (all in m/s or m, of similar size):
    the root's planar speed; the mean speed of the joints in the character's frame
    (fidgeting); the mean distance of its joints to the typical standing pose (the
    per-joint median over the candidate frames: a lifted arm, a crouch or a T-pose is far
    from it); its asymmetry (:func:`_asymmetry`); and 0.5 for each frame without both feet
    on the ground. Candidates are upright (hips at least 85% of their median height over
    the valid frames) with the root slower than ``max_root_speed``. The stretch is the
    run of consecutive candidate frames of one clip with the lowest mean cost, of
    ``seconds`` (or the longest run, when none is that long).
    """
    speed = db.root_speeds()
    hips = db.translations[:, 1, 1].astype(np.float64)  # joint 1's height above the ground root
    if not db.valid.any():
        return None
    try:
        admitted = db.mask(tags, strict=False)  # (a tag the data lacks: no clip has it)
    except TagQueryError:  # not a query: every clip (as the controller's searches)
        admitted = db.valid
    clips = np.bincount(db.frame_clip[admitted], minlength=len(db.clip_names)) > 0
    allowed = clips[db.frame_clip]  # every frame of the clips the tags admit, their last second included
    cand = allowed & (speed < max_root_speed) & (hips > 0.85 * np.median(hips[db.valid]))
    idx = np.flatnonzero(cand)
    if idx.size < db.fps:
        return None
    wp = _root_frame_positions(db, idx)
    same = np.r_[db.frame_clip[idx[1:]] == db.frame_clip[idx[:-1]], False] & (np.diff(np.r_[idx, -1]) == 1)
    joint_speed = np.zeros(idx.size)
    step = np.linalg.norm(wp[1:] - wp[:-1], axis=-1)[:, 1:].mean(axis=1) * db.fps
    joint_speed[:-1] = np.where(same[:-1], step, 0.0)
    joint_speed[1:] = np.maximum(joint_speed[1:], np.where(same[:-1], step, 0.0))
    typical = np.median(wp, axis=0)
    atypical = np.linalg.norm(wp - typical, axis=-1)[:, 1:].mean(axis=1)
    both_feet = db.contacts[idx].all(axis=1) if db.contacts.shape[1] else np.ones(idx.size, bool)
    cost = speed[idx] + joint_speed + atypical + _asymmetry(db, wp) + 0.5 * ~both_feet
    # runs of consecutive candidate frames in one clip
    breaks = np.flatnonzero(~same[:-1]) + 1
    runs = np.split(np.arange(idx.size), breaks)
    longest = max(len(r) for r in runs)
    n = min(max(1, round(seconds * db.fps)), longest)
    if n < db.fps:
        return None
    csum = np.r_[0.0, np.cumsum(cost)]
    best, best_cost = -1, np.inf
    for r in runs:
        if len(r) < n:
            continue
        means = (csum[r[0] + n: r[-1] + 2] - csum[r[0]: r[-1] + 2 - n]) / n
        k = int(np.argmin(means))
        if means[k] < best_cost:
            best, best_cost = int(r[0] + k), float(means[k])
    start = int(idx[best])
    stop = start + n
    entries = np.zeros(db.num_frames, dtype=bool)
    # each entry plays at least 2 s (half the stretch if shorter) before idle loops
    entries[start: stop - max(n // 2, min(round(2.0 * db.fps), n - 1))] = True
    entries &= db.valid
    if not entries.any():
        return None
    return IdleClip(start, stop, entries, best_cost)


@dataclass(frozen=True)
class JumpSpring:
    """The paper's jump trajectory (Sec. 3.3.1): the hips are given an upward velocity
    ``v_up`` (m/s) and their vertical velocity is sprung toward ``-v_up`` by the
    critically damped velocity spring of the trajectory (half-life ``halflife`` s, see
    :func:`motionmatch.control.springs.spring_velocity`); the height never goes below
    where it started (the ground under the hips). The apex comes ``halflife`` seconds
    after take-off, ``0.565 * v_up * halflife`` m above it (``(1 + u) e^-u = 1/2`` at the
    apex, ``u`` the damping times ``halflife``).
    """

    v_up: float
    halflife: float
    base: float = 0.0  #: the hips' height (m) at take-off, where the rise counts from

    def state_after(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Height above the take-off height (m, >= 0) and vertical velocity (m/s, 0 once
        landed) ``t`` seconds (``[K]``) after take-off."""
        from motionmatch.control.springs import spring_velocity

        t = np.asarray(t, dtype=np.float64)
        h, v, _ = spring_velocity(0.0, self.v_up, 0.0, -self.v_up, self.halflife, t)
        landed = (h <= 0.0) & (t > self.halflife)
        return np.where(landed, 0.0, np.maximum(h, 0.0)), np.where(landed, 0.0, v)

    @property
    def landing_time(self) -> float:
        """Seconds from take-off until the height is back to 0."""
        t = np.arange(1, 2401) / 240.0 * max(4 * self.halflife, 1e-3)
        h, _ = self.state_after(t)
        down = np.flatnonzero((h <= 0) & (t > self.halflife))
        return float(t[down[0]]) if down.size else float(t[-1])


def fit_jump_spring(offsets: np.ndarray, rise: np.ndarray, velocity: np.ndarray) -> tuple[JumpSpring, float]:
    """The :class:`JumpSpring` that best explains the hips' rise (m above their height at
    take-off) and vertical velocity (m/s) ``offsets`` seconds (``[K]``) after take-off
    (``rise``, ``velocity``: ``[K]``, e.g. means over the data's take-offs): least squares
    over a grid of ``v_up`` (0.05-5 m/s, steps of 0.05) and ``halflife`` (0.05-1 s, steps of 0.01), velocities weighed by
    ``1/3 s``, which makes their errors about the size of the heights'. Returns it and the
    share of the data's squared size it leaves unexplained (0: exact, 1: no better than
    nothing)."""
    offsets, rise, velocity = (np.asarray(a, dtype=np.float64) for a in (offsets, rise, velocity))
    v_up = np.linspace(0.05, 5.0, 100)
    halflife = np.linspace(0.05, 1.0, 96)
    best, best_err = None, np.inf
    for hl in halflife:
        h, v = JumpSpring(1.0, float(hl)).state_after(offsets)  # linear in v_up (landing does not depend on it)
        err = ((np.outer(v_up, h) - rise) ** 2).sum(axis=1) + ((np.outer(v_up, v) - velocity) / 3.0) ** 2 @ np.ones(
            len(offsets))
        k = int(np.argmin(err))
        if err[k] < best_err:
            best, best_err = JumpSpring(float(v_up[k]), float(hl)), float(err[k])
    size = float((rise ** 2).sum() + ((velocity / 3.0) ** 2).sum())
    return best, best_err / size if size > 0 else 1.0


def jump_spring(db: MotionDatabase, max_unexplained: float = 0.5, lead_s: float = 0.45,
                horizon_s: float = 0.5) -> JumpSpring | None:
    """The jump spring the data's jumps follow, when the data allows it: the hips' height
    over the ``horizon_s`` seconds from the lowest point of their crouch (within
    ``lead_s`` before each flight phase, :func:`flight_starts`), relative to it, and its
    rate, averaged over the jumps and fitted by :func:`fit_jump_spring` at every frame;
    its ``base`` is the crouch's mean height.
    ``None`` (a jump then asks for the take-offs' mean features,
    :func:`vertical_targets`) without a vertical (3D) schema, flight phases, a rise of at
    least 5 cm, or a fit explaining at least half the curve (``max_unexplained``). On
    LAFAN1's hurdle jumps it leaves about a third unexplained: the spring starts at its
    full upward speed, where the hips accelerate through the push-off."""
    if vertical_columns(db).size == 0:
        return None
    hips = db.translations[:, 1, 1].astype(np.float64)  # joint 1's height above the ground root
    n = round(horizon_s * db.fps)
    curves, bases = [], []
    for f in flight_starts(db):
        c = db.frame_clip[f]
        a = max(int(db.clip_starts[c]), f - round(lead_s * db.fps))
        t0 = a + int(np.argmin(hips[a: f + 1]))
        if t0 + n + 1 <= db.clip_stops[c]:
            curves.append(hips[t0: t0 + n + 1] - hips[t0])
            bases.append(hips[t0])
    if not curves:
        return None
    rise = np.mean(curves, axis=0)
    velocity = np.gradient(rise) * db.fps
    if rise.max() < 0.05:
        return None
    spring, unexplained = fit_jump_spring(np.arange(n + 1) / db.fps, rise, velocity)
    if unexplained > max_unexplained:
        return None
    return JumpSpring(spring.v_up, spring.halflife, float(np.mean(bases)))


def jump_query(db: MotionDatabase, spring: JumpSpring, t: float) -> np.ndarray:
    """Raw vertical features (in :func:`vertical_columns` order) that ask for the jump
    ``t`` seconds after take-off: the hips' height (the spring's ``base`` plus its rise)
    and vertical velocity at each trajectory offset ahead."""
    out = []
    for term in db.schema.terms:
        if term.is_trajectory and term.vertical:
            rise, velocity = spring.state_after(t + np.asarray(term.offsets, dtype=np.float64))
            out.append(spring.base + rise if term.kind == "trajectory_position" else velocity)
    return np.concatenate(out) if out else np.zeros(0)


def takeoff_crouch(db: MotionDatabase, lead_s: float = 0.45) -> np.ndarray:
    """``[N]`` for each frame up to ``lead_s`` before a flight phase (:func:`flight_starts`),
    the frame where the hips are lowest before it (the crouch the jump springs from; the
    moment :func:`jump_spring` counts from), and -1 for the other frames."""
    out = np.full(db.num_frames, -1, dtype=np.int64)
    hips = db.translations[:, 1, 1].astype(np.float64)
    for f in flight_starts(db):
        a = max(int(db.clip_starts[db.frame_clip[f]]), f - round(lead_s * db.fps))
        out[a: f + 1] = a + int(np.argmin(hips[a: f + 1]))
    return out
