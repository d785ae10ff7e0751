"""Calibration: a few seconds of standing still fix the performer's scale, facing and
neutral pose, so that the classifier sees keypoints normalised as in training.

The classifiers were trained on keypoints of motion-capture joints. A real estimator
puts its keypoints elsewhere on the body (MediaPipe's hips sit higher and wider than a
skeleton's hip joints, its shoulders on the outline), and each performer has their own
proportions. During :data:`CALIBRATION_S` seconds of standing still, facing the camera,
:class:`Calibrator` measures

* the **scale**: the median torso length (the normaliser's estimate, input units);
* the **facing**: the performer must face the camera: in the raw (not mirrored) image
  their left shoulder is on the right (``x`` larger); standing with the back to the
  camera swaps left and right commands, so calibration refuses it;
* the **neutral pose**: the median normalised pose (hips-centred, torso-scaled, y up),

and :class:`Calibration` then moves every keypoint of every later frame by
``(TRAINING_NEUTRAL - neutral) * torso`` (:func:`neutral_target`) -- the difference between the neutral pose of
the training data and the performer's, in the current frame's torso lengths -- so a
performer standing still looks to the classifier like the training data standing still.
The offsets are capped at :data:`MAX_OFFSET` torso lengths.

Left and right are the performer's own, which is what the page's mirrored camera image
shows a user: stepping to your left moves your image to the left of the screen, and the
character, seen from behind, steps to its left.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from motionmatch.control.pose.keypoints import KEYPOINTS, KP, KeypointStream
from motionmatch.control.pose.normalize import raw_torso_scale
from motionmatch.errors import MotionMatchError

__all__ = ["CALIBRATION_S", "TRAINING_NEUTRAL", "Calibration", "CalibrationError", "Calibrator", "calibrate_stream"]

#: Seconds of standing still that calibration takes.
CALIBRATION_S = 3.0
#: Largest keypoint correction (torso lengths).
MAX_OFFSET = 0.35
#: Most the hips may move during calibration (torso lengths, spread), and the fewest
#: frames with a body (fraction).
MAX_SWAY = 0.25
MIN_SEEN = 0.6

#: ``[13, 2]`` the neutral pose of the training data (normalised: hips-centred, torso
#: lengths, y up): the median pose of the rendered motion capture's ``stand_still`` frames
#: filmed from the front (azimuth 0), measured by ``benchmarks/bench_pose_camera.py
#: --neutral`` and checked against the renders by ``tests/test_pose_camera.py``.
TRAINING_NEUTRAL = np.array([
    [0.00, 1.44], [0.26, 0.93], [-0.26, 0.93], [0.36, 0.34], [-0.42, 0.35], [0.47, -0.08], [-0.48, -0.09],
    [0.15, 0.00], [-0.15, 0.00], [0.18, -0.83], [-0.19, -0.83], [0.12, -1.60], [-0.16, -1.57],
])


def neutral_target() -> np.ndarray:
    """``[13, 2]`` :data:`TRAINING_NEUTRAL` rescaled to a torso estimate of exactly 1 (the
    median of normalised poses is not itself normalised, by a few percent)."""
    return TRAINING_NEUTRAL / float(raw_torso_scale(TRAINING_NEUTRAL[None])[0])


class CalibrationError(MotionMatchError, ValueError):
    """Calibration failed (the message says what the performer should do)."""


def _normalised(kp: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(poses [T, K, 2] y up, centre [T, 2], torso [T])`` of image keypoints ``[T, K, 2]`` (y down)."""
    xy = kp[..., :2].copy()
    xy[..., 1] *= -1.0
    centre = 0.5 * (xy[:, KP["left_hip"]] + xy[:, KP["right_hip"]])
    torso = raw_torso_scale(xy)
    return (xy - centre[:, None]) / torso[:, None, None], centre, torso


@dataclass(frozen=True)
class Calibration:
    """What calibration measured, and the correction it applies.

    Attributes:
        scale: the performer's torso length (input units, e.g. pixels).
        neutral: ``[13, 2]`` their neutral pose (normalised, y up).
        offset: ``[13, 2]`` the correction added to every later frame (torso lengths, y up).
        facing_ratio: shoulder width over torso length while standing (about 0.8 facing the
            camera, near 0 side on).
        frames: how many frames calibration used.
    """

    scale: float
    neutral: np.ndarray
    offset: np.ndarray
    facing_ratio: float
    frames: int

    def apply(self, keypoints: np.ndarray) -> np.ndarray:
        """Corrected image keypoints ``[..., 13, 2]`` (y down; missing stay NaN)."""
        kp = np.asarray(keypoints, dtype=np.float64)[..., :2]
        flat = kp.reshape(-1, len(KEYPOINTS), 2)
        xy = flat * np.array([1.0, -1.0])
        torso = raw_torso_scale(xy)
        torso = np.where(np.isfinite(torso), torso, self.scale)
        out = flat + (self.offset * np.array([1.0, -1.0]))[None] * torso[:, None, None]
        return out.reshape(kp.shape)

    def apply_stream(self, stream: KeypointStream) -> KeypointStream:
        """The stream with every frame corrected (canonical keypoints, 2D)."""
        from dataclasses import replace

        s = stream.canonical()
        kp = s.keypoints[..., :2]
        if not s.y_down:
            kp = kp * np.array([1.0, -1.0])
        out = self.apply(kp)
        if not s.y_down:
            out = out * np.array([1.0, -1.0])
        return replace(s, keypoints=out, meta={**s.meta, "calibration": self.to_dict()})

    def to_dict(self) -> dict:
        return {"scale": round(self.scale, 3), "facing_ratio": round(self.facing_ratio, 3), "frames": self.frames,
                "offset": np.round(self.offset, 3).tolist()}


class Calibrator:
    """Collects the frames of the stand-still step: ``push`` each frame's keypoints
    ``[13, 2]`` (image, y down) and confidence until ``done``, then ``result()``."""

    def __init__(self, seconds: float = CALIBRATION_S):
        self.seconds = float(seconds)
        self._t: list[float] = []
        self._kp: list[np.ndarray] = []
        self._seen: list[bool] = []

    def push(self, t: float, keypoints: np.ndarray, confidence: np.ndarray | None = None) -> bool:
        """Add a frame; returns whether calibration has seen enough time."""
        kp = np.asarray(keypoints, dtype=np.float64)[:, :2].copy()
        conf = np.ones(len(kp)) if confidence is None else np.asarray(confidence, dtype=np.float64)
        kp[conf < 0.2] = np.nan
        self._t.append(float(t))
        self._kp.append(kp)
        need = [KP["left_hip"], KP["right_hip"], KP["left_shoulder"], KP["right_shoulder"]]
        self._seen.append(bool(np.isfinite(kp[need]).all()))
        return self.done

    @property
    def done(self) -> bool:
        return len(self._t) > 1 and self._t[-1] - self._t[0] >= self.seconds

    @property
    def elapsed(self) -> float:
        return self._t[-1] - self._t[0] if self._t else 0.0

    def result(self) -> Calibration:
        """The calibration, or a :class:`CalibrationError` saying what went wrong."""
        if not self._t:
            raise CalibrationError("calibration saw no frames: stand still, facing the camera, for "
                                   f"{self.seconds:g} s at the start")
        seen = np.asarray(self._seen)
        if seen.mean() < MIN_SEEN:
            raise CalibrationError(f"calibration found a body in {100 * seen.mean():.0f}% of {len(seen)} frames: "
                                   "stand where the camera sees you from head to ankles, facing it")
        kp = np.stack(self._kp)[seen]
        poses, centre, torso = _normalised(kp)
        scale = float(np.nanmedian(torso))
        sway = float(np.nanmax(np.nanstd(centre, axis=0)) / scale)
        if sway > MAX_SWAY:
            raise CalibrationError(f"calibration saw the performer move ({sway:.2f} torso lengths): stand still, "
                                   f"facing the camera, for the first {self.seconds:g} s")
        width = (kp[:, KP["left_shoulder"], 0] - kp[:, KP["right_shoulder"], 0]) / torso
        ratio = float(np.nanmedian(width))
        if ratio < 0.25:
            raise CalibrationError(f"calibration saw the performer {'side on' if ratio > -0.25 else 'from behind'} "
                                   "(their left shoulder not on the image's right): face the camera while it "
                                   "calibrates")
        neutral = np.nanmedian(poses, axis=0)
        target = neutral_target()
        neutral = np.where(np.isfinite(neutral), neutral, target)
        offset = np.clip(target - neutral, -MAX_OFFSET, MAX_OFFSET)
        return Calibration(scale, neutral, offset, ratio, len(kp))


def calibrate_stream(stream: KeypointStream, seconds: float = CALIBRATION_S) -> tuple[Calibration, KeypointStream]:
    """Calibrate on the first ``seconds`` of ``stream`` and return the calibration and the
    rest of the stream, corrected."""
    s = stream.canonical()
    if not s.y_down:
        raise CalibrationError("calibration expects image keypoints (y down)")
    cal = Calibrator(seconds)
    conf = s.confidence if s.confidence is not None else np.ones(s.keypoints.shape[:2])
    n = 0
    for i in range(len(s)):
        n = i + 1
        if cal.push(float(s.times[i]), s.keypoints[i, :, :2], conf[i]):
            break
    if not cal.done:
        raise CalibrationError(f"the stream is {s.duration:.1f} s long; calibration needs the first "
                               f"{seconds:g} s standing still")
    c = cal.result()
    return c, c.apply_stream(s[n:])
