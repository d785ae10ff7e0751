"""One-line facts about a clip, as printed by ``motionmatch inspect``."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from motionmatch.anim.contacts import foot_contacts
from motionmatch.anim.motion import Motion
from motionmatch.anim.root import extract_root
from motionmatch.errors import MotionMatchError


@dataclass
class ClipSummary:
    """What ``motionmatch inspect`` reports for one file (SI units)."""

    path: str
    name: str
    frames: int
    fps: float
    duration_s: float
    joints: int
    height_m: float
    feet: list[str]
    mean_speed_mps: float
    max_speed_mps: float
    contact_fraction: float
    root_from_bone: bool
    file_units_m: float

    def to_dict(self) -> dict:
        return asdict(self)


def body_height(motion: Motion) -> float:
    """The body's vertical extent (m): 95th percentile over frames of max - min height of
    all joints and end sites (robust to a few crouched or airborne frames)."""
    ys = motion.world_positions[..., 1]
    es = motion.end_site_positions()[..., 1]
    if es.shape[1]:
        ys = np.concatenate([ys, es], axis=1)
    return float(np.percentile(ys.max(axis=1) - ys.min(axis=1), 95))


def summarize(motion: Motion) -> ClipSummary:
    """Frames, rate, duration, size, feet, root speed and foot-contact share of a clip."""
    root = extract_root(motion)
    speed = np.linalg.norm(root.velocities(motion.fps), axis=1)
    try:
        contacts = foot_contacts(motion)
        feet = [motion.skeleton.names[j] for j in contacts.joints]
        contact_fraction = float(np.mean(contacts.contacts.any(axis=1)))
    except MotionMatchError:
        feet, contact_fraction = [], float("nan")
    return ClipSummary(
        path=str(motion.source) if motion.source else motion.name,
        name=motion.name,
        frames=motion.num_frames,
        fps=motion.fps,
        duration_s=motion.duration,
        joints=motion.num_joints,
        height_m=body_height(motion),
        feet=feet,
        mean_speed_mps=float(speed.mean()),
        max_speed_mps=float(speed.max()),
        contact_fraction=contact_fraction,
        root_from_bone=root.from_bone,
        file_units_m=motion.file_scale,
    )
