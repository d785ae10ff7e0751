"""The 13 pose commands and the rules that label motion capture with them.

Commands (the paper's, Sec. 3.4.3): :data:`COMMANDS`. Directions are relative to the
camera, as a performer in front of a webcam means them: *forward* is toward the camera,
*left* / *right* are the performer's left / right when facing the camera, i.e. motion
across the view toward the camera's right / left (image ``+x`` / ``-x`` of the raw,
unmirrored image). Moving away from the camera is no command.

Labelling rules (:func:`label_frames`), per frame of a clip at the render rate, first
match wins; a frame no rule labels is unlabelled (``""``) and left out of training and
scoring:

1. clip tags: ``dance`` -> dance, ``punch`` -> punch; ``kick`` -> unlabelled (not a command);
   except where the performer is still (the keypoints' mean speed relative to the hips,
   averaged over 1 s, below 0.06 m/s: the idle lead-in and ending of a take), where the
   other rules decide (standing still, usually);
2. jump: a flight phase (no foot joint in contact) of 0.2-0.9 s, or of at least 0.1 s
   during which the hips rise above 103% of their standing height, with the body
   upright (hips above 70% of standing height, trunk within 45° of vertical), never above 150% (climbing), and within 0.3 s
   before and after it somewhere below 110% (taking off from and landing on the
   floor, not an obstacle), and isolated: no other flight (>= 2 frames) within 0.35 s
   before or after it (a running stride is one of a series); labelled from 0.25 s before
   take-off to 0.3 s after landing;
3. creep: hips below 60% of their standing height (standing height = thigh + shin +
   the ankle's resting height, measured on the clip), or below 80% with the trunk more
   than 55° from the vertical (crawling on hands and feet); moving (>= 0.15 m/s) ->
   creep_<direction>, else unlabelled;
4. crouching (hips 60-80%) while slower than 0.5 m/s -> unlabelled;
5. stand_still: slower than 0.3 m/s and airborne less than 5% of the time;
6. 0.3-0.5 m/s -> unlabelled (shuffling, turning on the spot);
7. locomotion: *run* when airborne (no foot in contact) at least 8% of the time over
   0.63 s or faster than 2.8 m/s; *walk* when airborne at most 3% and slower than
   2.3 m/s; otherwise unlabelled; plus the direction.

Speeds are of the hips projected to the ground, smoothed (Savitzky-Golay, 0.5 s).
The direction is the angle of that velocity from "toward the camera": within 35° ->
forward, 55-125° to the camera's right -> left (the performer's left), to its left ->
right; other angles (the dead zones and moving away) -> unlabelled.

8. clean-up: each labelled frame takes the most frequent label of the 0.3 s around it,
   and runs of one label shorter than 0.4 s become unlabelled.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import uniform_filter1d

from motionmatch.anim.contacts import find_feet, foot_contacts
from motionmatch.anim.motion import Motion
from motionmatch.control.pose.keypoints import KP

#: The 13 commands, in a fixed order (classifier outputs use it).
COMMANDS: tuple[str, ...] = (
    "creep_forward", "creep_left", "creep_right", "dance", "jump", "punch",
    "run_forward", "run_left", "run_right", "stand_still", "walk_forward", "walk_left", "walk_right",
)
COMMAND_INDEX = {c: i for i, c in enumerate(COMMANDS)}

# rule thresholds (see the module docstring)
CREEP_RATIO = 0.6
CREEP_LEAN_DEG = 55.0
JUMP_MAX_LEAN_DEG = 45.0
CROUCH_RATIO = 0.8
CREEP_MIN_SPEED = 0.15
STAND_SPEED = 0.3
WALK_MIN_SPEED = 0.5
RUN_AIR = 0.08
WALK_AIR = 0.03
RUN_SPEED = 2.8
WALK_MAX_SPEED = 2.3
AIR_WINDOW_S = 0.63
FORWARD_DEG = 35.0
SIDE_DEG = (55.0, 125.0)
JUMP_FLIGHT_S = 0.2
JUMP_SHORT_FLIGHT_S = 0.1
JUMP_RISE = 1.03
JUMP_MAX_FLIGHT_S = 0.9
JUMP_MAX_RISE = 1.5
GROUND_RATIO = 1.1
JUMP_ISOLATION_S = 0.35
JUMP_BEFORE_S = 0.25
JUMP_AFTER_S = 0.3
MODE_WINDOW_S = 0.3
MIN_RUN_S = 0.4
STILL_SPEED = 0.06
STILL_WINDOW_S = 1.0


def _savgol(x: np.ndarray, fps: float, window_s: float = 0.5) -> np.ndarray:
    from motionmatch.control.pose.render import _smooth

    return _smooth(x, fps, window_s)


_FIELDS = ("velocity", "speed", "hips_ratio", "airborne", "jump", "lean", "forced")


@dataclass
class MotionFacts:
    """What the labelling rules read from a clip (per frame at ``fps``).

    Attributes:
        velocity: ``[F, 3]`` planar velocity of the hips' ground projection (m/s, smoothed).
        speed: ``[F]`` its magnitude.
        hips_ratio: ``[F]`` hips height over the standing hips height.
        airborne: ``[F]`` fraction of the surrounding 0.63 s with no foot joint in contact.
        jump: ``[F]`` bool, frames labelled jump (rule 2).
        lean: ``[F]`` angle (degrees) of the trunk (hips' to shoulders' midpoint) from the vertical.
        forced: ``[F]`` label set by the clip's tags (rule 1): ``"dance"``, ``"punch"``,
            ``"-"`` (unlabelled) or ``""`` (the other rules decide).
    """

    fps: float
    velocity: np.ndarray
    speed: np.ndarray
    hips_ratio: np.ndarray
    airborne: np.ndarray
    jump: np.ndarray
    lean: np.ndarray
    forced: np.ndarray

    def _with(self, **kw) -> MotionFacts:
        d = {k: getattr(self, k) for k in _FIELDS}
        d.update(kw)
        return MotionFacts(self.fps, **d)

    def mirrored(self) -> MotionFacts:
        v = self.velocity.copy()
        v[:, 0] *= -1.0
        return self._with(velocity=v)

    def rotated(self, yaw: float) -> MotionFacts:
        """The facts of the clip turned by ``yaw`` radians about +Y."""
        c, s = np.cos(yaw), np.sin(yaw)
        v = self.velocity
        return self._with(velocity=np.stack([c * v[:, 0] + s * v[:, 2], v[:, 1], -s * v[:, 0] + c * v[:, 2]], axis=1))

    @staticmethod
    def concatenate(parts: list[MotionFacts]) -> MotionFacts:
        return MotionFacts(parts[0].fps, *(np.concatenate([getattr(p, k) for p in parts]) for k in _FIELDS))

    def __getitem__(self, sl: slice) -> MotionFacts:
        return MotionFacts(self.fps, *(getattr(self, k)[sl] for k in _FIELDS))

    @property
    def crawling(self) -> np.ndarray:
        """``[F]`` bool: hips below 60% of standing, or below 80% with the trunk bent over
        more than 55° from the vertical (crawling on hands and feet)."""
        return (self.hips_ratio < CREEP_RATIO) | ((self.hips_ratio < CROUCH_RATIO) & (self.lean > CREEP_LEAN_DEG))


def forced_label(tags) -> str:
    """Rule 1: the label a clip's tags impose on all its frames (``""``: none)."""
    t = set(tags)
    if "dance" in t:
        return "dance"
    if "punch" in t:
        return "punch"
    if "kick" in t:
        return "-"
    return ""


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``(start, stop)`` of the runs of True."""
    d = np.diff(np.r_[0, mask.astype(np.int8), 0])
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)))


def motion_facts(motion: Motion, kp: np.ndarray) -> MotionFacts:
    """:class:`MotionFacts` of a clip and its world keypoints ``[F, K, 3]`` (same frames)."""
    fps = motion.fps
    F = motion.num_frames
    hips = 0.5 * (kp[:, KP["left_hip"]] + kp[:, KP["right_hip"]])
    ground = hips.copy()
    ground[:, 1] = 0.0
    ground = _savgol(ground, fps)
    vel = np.gradient(ground, 1.0 / fps, axis=0) if F > 1 else np.zeros_like(ground)
    vel[:, 1] = 0.0
    speed = np.hypot(vel[:, 0], vel[:, 2])
    legs = []
    for s in ("left", "right"):
        legs.append(np.linalg.norm(kp[:, KP[f"{s}_hip"]] - kp[:, KP[f"{s}_knee"]], axis=1)
                    + np.linalg.norm(kp[:, KP[f"{s}_knee"]] - kp[:, KP[f"{s}_ankle"]], axis=1))
    ankles = kp[:, [KP["left_ankle"], KP["right_ankle"]], 1]
    rest = float(np.clip(np.percentile(ankles, 5), 0.03, 0.15))
    stand = float(np.median(np.concatenate(legs))) + rest
    ratio = hips[:, 1] / stand
    skel = motion.skeleton
    try:
        feet = find_feet(skel)
        joints = sorted(set(feet) | {skel.parents[f] for f in feet if skel.parents[f] > 0})
        contact = foot_contacts(motion, feet=joints, velocity_threshold=0.7).contacts.any(axis=1)
    except Exception:  # no feet found by name: use the ankles' heights
        contact = (ankles.min(axis=1) < rest + 0.06)
    air = ~contact
    n_air = max(1, round(AIR_WINDOW_S * fps) | 1)
    airborne = uniform_filter1d(air.astype(np.float64), n_air, mode="nearest")
    trunk = 0.5 * (kp[:, KP["left_shoulder"]] + kp[:, KP["right_shoulder"]]) - hips
    lean = np.degrees(np.arccos(np.clip(trunk[:, 1] / np.maximum(np.linalg.norm(trunk, axis=1), 1e-9), -1.0, 1.0)))
    lean = _savgol(lean, fps, 0.3)
    jump = np.zeros(F, dtype=bool)
    around = round(0.3 * fps)
    gap = round(JUMP_ISOLATION_S * fps)
    flights = [(a, b) for a, b in _runs(air) if b - a >= 2]
    for k, (a, b) in enumerate(flights):
        if (k > 0 and a - flights[k - 1][1] < gap) or (k + 1 < len(flights) and flights[k + 1][0] - b < gap):
            continue  # one of a series of strides: running, not jumping
        dur = (b - a) / fps
        if dur < JUMP_SHORT_FLIGHT_S - 1e-9 or dur > JUMP_MAX_FLIGHT_S:
            continue
        if np.median(ratio[a:b]) < 0.7 or ratio[a:b].max() > JUMP_MAX_RISE or np.median(lean[a:b]) > JUMP_MAX_LEAN_DEG:
            continue  # crawling, or climbing onto something
        before, after = ratio[max(0, a - around):a], ratio[b:b + around]
        if (before.size and before.min() > GROUND_RATIO) or (after.size and after.min() > GROUND_RATIO):
            continue  # took off from or landed on something higher than the floor
        if dur >= JUMP_FLIGHT_S - 1e-9 or ratio[a:b].max() > JUMP_RISE:
            jump[max(0, a - round(JUMP_BEFORE_S * fps)): min(F, b + round(JUMP_AFTER_S * fps))] = True
    forced = np.full(F, forced_label(motion.tags), dtype="<U8")
    if forced[0] and F > 1:  # a tagged take's still parts are not its action (rule 1)
        rel = kp - hips[:, None]
        body = np.linalg.norm(np.gradient(rel, 1.0 / fps, axis=0), axis=2).mean(axis=1)
        body = uniform_filter1d(body, max(1, round(STILL_WINDOW_S * fps)), mode="nearest")
        forced[body < STILL_SPEED] = ""
    return MotionFacts(fps, vel, speed, ratio, airborne, jump, lean, forced)


def direction_labels(velocity: np.ndarray, cam_forward: np.ndarray, cam_right: np.ndarray) -> np.ndarray:
    """``[F]`` ``"forward" | "left" | "right" | ""`` of planar velocities relative to the camera."""
    toward = -(velocity * cam_forward).sum(axis=1)
    lateral = (velocity * cam_right).sum(axis=1)  # camera right = the left of a performer facing it
    ang = np.degrees(np.arctan2(lateral, toward))
    out = np.full(velocity.shape[0], "", dtype=object)
    out[np.abs(ang) <= FORWARD_DEG] = "forward"
    out[(ang >= SIDE_DEG[0]) & (ang <= SIDE_DEG[1])] = "left"
    out[(ang <= -SIDE_DEG[0]) & (ang >= -SIDE_DEG[1])] = "right"
    return out


def label_frames(facts: MotionFacts, cam_forward: np.ndarray, cam_right: np.ndarray) -> np.ndarray:
    """``[F]`` command per frame (``""`` = unlabelled) by the rules of the module docstring."""
    F = facts.speed.shape[0]
    out = np.full(F, "", dtype=object)
    d = direction_labels(facts.velocity, cam_forward, cam_right)
    sp, r, air = facts.speed, facts.hips_ratio, facts.airborne
    forced = facts.forced != ""
    done = forced | facts.jump
    out[~forced & facts.jump] = "jump"
    creep = ~done & facts.crawling
    mv = creep & (sp >= CREEP_MIN_SPEED) & (d != "")
    out[mv] = np.char.add("creep_", d[mv].astype(str))
    done |= creep
    crouch = ~done & (r < CROUCH_RATIO) & (sp < WALK_MIN_SPEED)
    done |= crouch
    still = ~done & (sp < STAND_SPEED)
    out[still & (air < 0.05)] = "stand_still"
    done |= still | (~done & (sp < WALK_MIN_SPEED))
    run = ~done & ((air >= RUN_AIR) | (sp >= RUN_SPEED)) & (d != "")
    walk = ~done & ~run & (air <= WALK_AIR) & (sp < WALK_MAX_SPEED) & (d != "")
    out[run] = np.char.add("run_", d[run].astype(str))
    out[walk] = np.char.add("walk_", d[walk].astype(str))
    out[forced] = np.where(facts.forced[forced] == "-", "", facts.forced[forced])
    return clean_labels(out.astype("<U16"), facts.fps)


def clean_labels(labels: np.ndarray, fps: float, window_s: float = MODE_WINDOW_S, min_s: float = MIN_RUN_S) -> np.ndarray:
    """Rule 8: the most frequent label within ``window_s`` (centred) replaces each
    labelled frame's, then runs of one label shorter than ``min_s`` become unlabelled
    (thresholds crossed for a moment are not a command)."""
    out = labels.copy()
    F = out.shape[0]
    h = round(window_s * fps) // 2
    if h > 0 and F:
        codes = {c: i for i, c in enumerate(COMMANDS)}
        idx = np.array([codes.get(str(x), -1) for x in labels])
        onehot = np.zeros((F + 1, len(COMMANDS)))
        onehot[1:][idx >= 0, idx[idx >= 0]] = 1.0
        cs = np.cumsum(onehot, axis=0)
        lo = np.clip(np.arange(F) - h, 0, F)
        hi = np.clip(np.arange(F) + h + 1, 0, F)
        counts = cs[hi] - cs[lo]
        best = np.argmax(counts, axis=1)
        lab = idx >= 0
        out[lab] = np.asarray(COMMANDS)[best[lab]]
    n_min = round(min_s * fps)
    d = np.flatnonzero(np.r_[True, out[1:] != out[:-1], True])
    for a, b in itertools.pairwise(d):
        if b - a < n_min:
            out[a:b] = ""
    return out


def label_indices(labels: np.ndarray) -> np.ndarray:
    """``[F]`` int index into :data:`COMMANDS` (``-1`` for unlabelled)."""
    return np.array([COMMAND_INDEX.get(str(x), -1) for x in labels], dtype=np.int64)
