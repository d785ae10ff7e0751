"""Keypoint normalisation: centred on the hips, scaled by the torso, y up.

For every frame of a :class:`~.keypoints.KeypointStream` (canonical keypoints, 2D, or
the ``x, y`` of 3D camera coordinates):

* the **centre** is the midpoint of the two hips;
* the **scale** is the torso length, estimated so that a foreshortened torso (a person
  crawling toward the camera) does not blow the pose up: per frame the largest of the
  torso (hips' to shoulders' midpoint), the mean thigh / 0.85, the mean shin / 0.85 and
  the mean upper arm / 0.65 (typical ratios of those bones to the torso, so each is an
  estimate of the torso length that projection can only shorten), then the median of
  these estimates over the last 9 frames since the last reset;
* the **pose** is ``(keypoint - centre) / scale`` with ``y`` up: the same for any camera
  distance, image size and body size;
* a **reset** marks where the track starts again: the first frame, a gap of more than
  0.25 s, the centre moving more than one torso length in one frame, or the scale
  changing by more than 35% in one frame (a camera cut, another person). Velocities are
  never taken across a reset.

A frame needs both hips and both shoulders; without them the previous pose is held
(for at most 15 frames, then zeros) and the frame is marked invalid. Missing limbs are
filled in the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from motionmatch.control.pose.keypoints import KEYPOINTS, KP, KeypointStream

SEGMENT_RATIOS = (
    (("left_hip", "left_knee"), ("right_hip", "right_knee"), 0.85),
    (("left_knee", "left_ankle"), ("right_knee", "right_ankle"), 0.85),
    (("left_shoulder", "left_elbow"), ("right_shoulder", "right_elbow"), 0.65),
)
SCALE_WINDOW = 9
MAX_GAP_S = 0.25
MAX_JUMP_TORSO = 1.0
MAX_SCALE_CHANGE = 1.35
MAX_HOLD = 15


@dataclass
class NormalizedPoses:
    """Normalised keypoints over time.

    Attributes:
        times: ``[T]`` seconds.
        poses: ``[T, K, 2]`` hips-centred, torso-scaled, y up.
        centre: ``[T, 2]`` hips' midpoint in the input's units, y up.
        scale: ``[T]`` smoothed torso length (input units).
        raw_scale: ``[T]`` the per-frame estimate before smoothing.
        valid: ``[T]`` bool, hips and shoulders seen.
        reset: ``[T]`` bool, the track starts again here.
    """

    times: np.ndarray
    poses: np.ndarray
    centre: np.ndarray
    scale: np.ndarray
    raw_scale: np.ndarray
    valid: np.ndarray
    reset: np.ndarray

    def __len__(self) -> int:
        return self.times.shape[0]

    def __getitem__(self, sl) -> NormalizedPoses:
        out = NormalizedPoses(self.times[sl], self.poses[sl], self.centre[sl], self.scale[sl], self.raw_scale[sl],
                              self.valid[sl], self.reset[sl].copy())
        if len(out):
            out.reset[0] = True
        return out


def _hold(x: np.ndarray, ok: np.ndarray, limit: int = MAX_HOLD) -> tuple[np.ndarray, np.ndarray]:
    """Fill rows where ``ok`` is False with the last good row (at most ``limit`` rows on)."""
    T = ok.shape[0]
    idx = np.where(ok, np.arange(T), -1)
    idx = np.maximum.accumulate(idx) if T else idx
    age = np.arange(T) - idx
    fill = (idx >= 0) & (age <= limit)
    out = np.zeros_like(x)
    out[fill] = x[idx[fill]]
    return out, fill


def _segment(p: np.ndarray, a: str, b: str) -> np.ndarray:
    return np.linalg.norm(p[:, KP[a]] - p[:, KP[b]], axis=1)


def raw_torso_scale(p: np.ndarray) -> np.ndarray:
    """``[T]`` per-frame torso-length estimate of 2D keypoints ``[T, K, 2]`` (NaN-aware)."""
    hips = 0.5 * (p[:, KP["left_hip"]] + p[:, KP["right_hip"]])
    sh = 0.5 * (p[:, KP["left_shoulder"]] + p[:, KP["right_shoulder"]])
    cands = [np.linalg.norm(sh - hips, axis=1)]
    for left, right, ratio in SEGMENT_RATIOS:
        pair = np.stack([_segment(p, *left), _segment(p, *right)])
        n = np.isfinite(pair).sum(axis=0)
        seg = np.where(n > 0, np.nansum(pair, axis=0) / np.maximum(n, 1), np.nan)   # both missing: NaN, quietly
        cands.append(seg / ratio)
    c = np.stack(cands, axis=1)
    with np.errstate(all="ignore"):
        out = np.nanmax(np.where(np.isfinite(c), c, -np.inf), axis=1)
    return np.where(np.isfinite(out) & (out > 0), out, np.nan)


def normalize_stream(stream: KeypointStream) -> NormalizedPoses:
    """Normalise a whole stream (causal: frame ``t`` depends only on frames ``<= t``)."""
    s = stream.canonical()
    T = len(s)
    K = len(KEYPOINTS)
    xy = s.keypoints[:, :, :2].copy()
    if s.y_down:
        xy[..., 1] *= -1.0
    present = s.present()
    xy[~present] = np.nan
    need = [KP["left_hip"], KP["right_hip"], KP["left_shoulder"], KP["right_shoulder"]]
    valid = present[:, need].all(axis=1)
    centre = 0.5 * (xy[:, KP["left_hip"]] + xy[:, KP["right_hip"]])
    raw = raw_torso_scale(xy)
    valid &= np.isfinite(raw)
    centre_h, c_ok = _hold(np.nan_to_num(centre), valid)
    raw_h, _ = _hold(np.nan_to_num(raw, nan=1.0), valid)
    raw_h = np.where(c_ok, raw_h, 1.0)
    # resets
    reset = np.zeros(T, dtype=bool)
    if T:
        reset[0] = True
        dt = np.diff(s.times)
        reset[1:] |= dt > MAX_GAP_S
        reset |= ~c_ok & np.r_[True, c_ok[:-1]]  # losing the track
        reset[1:] |= c_ok[1:] & ~c_ok[:-1]        # finding it again
    # smoothed scale: median of the last SCALE_WINDOW estimates since the last reset,
    # with resets also where the centre or the scale jumps
    # (a loop over Python floats: each frame depends on the previous one's scale, and a
    # median of at most 9 numbers is cheaper sorted here than through numpy, which matters
    # to the live classifier that normalises its history at every camera frame)
    jump = np.hypot(*np.diff(centre_h, axis=0).T).tolist() if T else []
    raw_l = raw_h.tolist()
    flags = reset.tolist()
    scale_l = [0.0] * T
    start = 0
    for t in range(T):
        r = raw_l[t]
        if t > 0 and not flags[t]:
            prev = scale_l[t - 1]
            if jump[t - 1] > MAX_JUMP_TORSO * prev or r > MAX_SCALE_CHANGE * prev or r * MAX_SCALE_CHANGE < prev:
                flags[t] = True
        if flags[t]:
            start = t
        w = sorted(raw_l[max(start, t - SCALE_WINDOW + 1): t + 1])
        n = len(w)
        scale_l[t] = w[n // 2] if n % 2 else (w[n // 2 - 1] + w[n // 2]) / 2.0
    reset = np.asarray(flags, dtype=bool)
    scale = np.asarray(scale_l, dtype=np.float64)
    poses = (xy - centre_h[:, None, :]) / scale[:, None, None]
    kp_ok = np.isfinite(poses).all(axis=2)
    filled = np.empty_like(poses)
    for k in range(K):
        filled[:, k], _ = _hold(np.nan_to_num(poses[:, k]), kp_ok[:, k])
    return NormalizedPoses(s.times.copy(), filled, centre_h, scale, raw_h, valid, reset)
