"""Is this a person? Checks that a humanoid take has plausible size, floor and speed.

A wrong up axis or unit gives a take that loads without error and is wrong everywhere
after it (a 0.96 m person walking at 0.12 m/s, a body waist-deep in the floor).
:func:`humanoid_warnings` says so, one line per finding, naming the take and what to try.
Skeletons with no humanoid (a crab, a dog) are not checked.
"""

from __future__ import annotations

import numpy as np

from motionmatch.anim.grounding import GROUND_TOLERANCE, floor_height
from motionmatch.anim.humanoid import HumanoidError, HumanoidRoles, find_humanoid
from motionmatch.anim.motion import Motion
from motionmatch.anim.root import extract_root
from motionmatch.anim.summary import body_height
from motionmatch.errors import MotionMatchError

__all__ = ["FLOOR_LIMIT", "HEIGHT_RANGE", "SLOWEST_WALK", "humanoid_warnings"]

#: A person's height (m).
HEIGHT_RANGE = (1.2, 2.3)
#: Feet further from the floor than this (m) where they touch it (what grounding moves).
FLOOR_LIMIT = GROUND_TOLERANCE
#: A take tagged walk whose root moves slower than this (m/s) on average.
SLOWEST_WALK = 0.3
_UNITS = (("m", 1.0), ("cm", 0.01), ("mm", 0.001), ("in", 0.0254))


def _unit_hint(motion: Motion, height: float) -> str:
    if HEIGHT_RANGE[0] / 5 <= height <= HEIGHT_RANGE[1] * 5:  # not a factor of a unit off: the axis
        return "check --up (y or z), then --units"
    for name, scale in _UNITS:
        h = height / motion.file_scale * scale
        if HEIGHT_RANGE[0] <= h <= HEIGHT_RANGE[1] and abs(scale - motion.file_scale) > 1e-12:
            return f"the file may be in {name}: try --units {name}"
    return "check --up (y or z) and --units"


def _four_legged(motion: Motion, roles: HumanoidRoles) -> bool:
    wp = motion.world_positions
    hips = wp[:, roles.hips]
    feet = 0.5 * (wp[:, roles["left_ankle"]] + wp[:, roles["right_ankle"]])
    top = next((roles.get(r) for r in ("head", "neck", "chest") if roles.get(r) is not None), None)
    if top is None:
        return False

    def mean_up(v: np.ndarray) -> float:
        return float(np.mean(v[:, 1] / np.maximum(np.linalg.norm(v, axis=1), 1e-9)))

    return mean_up(hips - feet) > 0.7 and mean_up(wp[:, top] - hips) < 0.5


def humanoid_warnings(motion: Motion, *, grounded: bool = False) -> list[str]:
    """One line per implausible finding on a humanoid take (``[]`` when it looks like a
    person or is no humanoid): a height outside :data:`HEIGHT_RANGE`; feet further than
    :data:`FLOOR_LIMIT` from the floor where they touch it (not checked when ``grounded``:
    the take was put on the ground already); a take tagged ``walk`` (not ``stop``,
    ``idle``, ``turn`` or ``slow``) slower than :data:`SLOWEST_WALK` on average. A
    quadruped rigged with humanoid names (its legs point down, its head does not point
    up: a dog's ``LeftUpLeg``) is not checked; a person read with the wrong up axis (legs
    and head both level) is."""
    try:
        roles = find_humanoid(motion.skeleton)
    except HumanoidError:
        return []
    if _four_legged(motion, roles):
        return []
    name = str(motion.source) if motion.source else (motion.name or "<motion>")
    out = []
    height = body_height(motion)
    if not HEIGHT_RANGE[0] <= height <= HEIGHT_RANGE[1]:
        out.append(f"{name}: the body is {height:.2f} m tall, implausible for a person "
                   f"({HEIGHT_RANGE[0]:g}-{HEIGHT_RANGE[1]:g} m); {_unit_hint(motion, height)}")
    if not grounded:
        floor = floor_height(motion)
        if floor is not None and abs(floor) > FLOOR_LIMIT:
            out.append(f"{name}: the feet are {abs(floor):.2f} m {'under' if floor < 0 else 'above'} the floor "
                       "where they touch it (build, viewer and genmm put such a take on the ground)")
    if "walk" in motion.tags and not {"stop", "idle", "turn", "slow"} & set(motion.tags) and motion.num_frames > 1:
        try:
            speed = float(np.linalg.norm(extract_root(motion).velocities(motion.fps), axis=1).mean())
        except MotionMatchError:
            speed = None
        if speed is not None and speed < SLOWEST_WALK:
            out.append(f"{name}: a walk at {speed:.2f} m/s on average, implausibly slow (under {SLOWEST_WALK:g} m/s); "
                       "check --up (y or z) and --units")
    return out
