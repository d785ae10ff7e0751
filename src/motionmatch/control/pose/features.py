"""Window features of normalised poses, for the classifiers.

The baseline looks at the last ``window`` frames (10, at the classifiers' rate, 30 Hz),
the improved classifier at up to ``context`` frames (20); both end at the frame being
classified, so they are causal.

* :func:`pose_window_features` (the paper's baseline): the ``window`` normalised poses
  concatenated, oldest first (``window * K * 2`` numbers). Frames before the start of the
  stream repeat its first pose.
* :func:`motion_features` (the improved classifier's): within the current track (frames
  since the last reset, see :mod:`.normalize`), the normalised poses at 0, 3, 6 and 9
  frames back; each keypoint's mean speed over the window (torso lengths per second);
  the hips' velocity in the image (torso lengths per second, x right, y up) and the
  approach rate (the time derivative of the log torso length, 1/s: positive when the
  performer comes closer), fitted by least squares over the whole window and over its
  last 4 frames; the fraction of the window inside the track; and, over a longer
  context (``context`` frames, 20 = 0.67 s), the mean and spread of the pose, each
  keypoint's mean speed, the hips' velocity and approach rate, the hips' vertical range
  and the fraction of the context inside the track. Mirror images of a motion give
  mirrored features (:func:`mirror_motion_features`).
"""

from __future__ import annotations

import numpy as np

from motionmatch.control.pose.keypoints import KEYPOINTS, KP, MIRROR
from motionmatch.control.pose.normalize import NormalizedPoses

WINDOW = 10
CONTEXT = 20
LONG = 60
POSE_OFFSETS = (0, 3, 6, 9)
SHORT = 4
FFT_N = 32
#: FFT bins (of ``FFT_N`` frames at 30 Hz: 0.94 Hz apart) summed into frequency bands:
#: about 0.9-1.9 Hz, 2.8-3.8 Hz and 4.7-7.5 Hz.
BANDS = ((1, 3), (3, 5), (5, 9))


def _window_index(n: int, window: int, indices: np.ndarray, start: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``[N, window]`` frame indices ending at ``indices`` (oldest first), clamped to the
    track start, and a mask of the entries that are real (not clamped)."""
    off = np.arange(window - 1, -1, -1)
    idx = indices[:, None] - off[None, :]
    lo = np.zeros_like(indices) if start is None else start[indices]
    real = idx >= lo[:, None]
    idx = np.maximum(idx, lo[:, None])
    return np.clip(idx, 0, n - 1), real


def _track_start(reset: np.ndarray) -> np.ndarray:
    r = np.where(reset, np.arange(reset.shape[0]), 0)
    return np.maximum.accumulate(r) if r.size else r


def pose_window_features(norm: NormalizedPoses, indices: np.ndarray | None = None, window: int = WINDOW) -> np.ndarray:
    """``[N, window * K * 2]`` float32: the baseline's concatenated poses."""
    T = len(norm)
    indices = np.arange(T) if indices is None else np.asarray(indices, dtype=np.int64)
    idx, _ = _window_index(T, window, indices, None)
    return norm.poses[idx].reshape(len(indices), -1).astype(np.float32)


def _slope(tau: np.ndarray, y: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Least-squares slope of ``y [N, W, D]`` over ``tau [W]`` with mask ``m [N, W]``."""
    w = m.astype(np.float64)
    n = w.sum(axis=1)
    n_safe = np.maximum(n, 1.0)
    tm = (w * tau[None, :]).sum(axis=1) / n_safe
    ym = (w[..., None] * y).sum(axis=1) / n_safe[:, None]
    dt = (tau[None, :] - tm[:, None]) * w
    den = (dt * dt).sum(axis=1)
    num = (dt[..., None] * (y - ym[:, None, :])).sum(axis=1)
    out = num / np.maximum(den, 1e-12)[:, None]
    out[n < 2] = 0.0
    return out


def motion_features(norm: NormalizedPoses, fps: float, indices: np.ndarray | None = None,
                    window: int = WINDOW, context: int = CONTEXT, long: int = 0) -> np.ndarray:
    """``[N, D]`` float32: the improved classifier's features (see the module docstring)."""
    T = len(norm)
    indices = np.arange(T) if indices is None else np.asarray(indices, dtype=np.int64)
    N = len(indices)
    start = _track_start(norm.reset)
    idx, real = _window_index(T, window, indices, start)
    P = norm.poses[idx]                                    # [N, W, K, 2]
    parts = [P[:, window - 1 - o].reshape(N, -1) for o in POSE_OFFSETS if o < window]
    dP = np.linalg.norm(np.diff(P, axis=1), axis=3)        # [N, W-1, K]
    step_real = real[:, 1:]
    n_steps = np.maximum(step_real.sum(axis=1), 1)[:, None]
    parts.append((dP * step_real[..., None]).sum(axis=1) / n_steps * fps)
    s_now = norm.scale[indices]
    c = (norm.centre[idx] - norm.centre[indices][:, None, :]) / s_now[:, None, None]   # [N, W, 2]
    ls = np.log(np.maximum(norm.raw_scale[idx], 1e-9))[..., None]                      # [N, W, 1]
    tau = (np.arange(window) - (window - 1)) / fps
    y = np.concatenate([c, ls], axis=2)
    parts.append(_slope(tau, y, real))
    short = np.zeros_like(real)
    short[:, -SHORT:] = True
    parts.append(_slope(tau, y, real & short))
    parts.append(real.sum(axis=1, keepdims=True) / window)
    if context > window:
        idx, real = _window_index(T, context, indices, start)
        P = norm.poses[idx].reshape(N, context, -1)
        w = real[..., None].astype(np.float64)
        n = np.maximum(w.sum(axis=1), 1.0)
        mean = (P * w).sum(axis=1) / n
        parts.append(mean)
        parts.append(np.sqrt(np.maximum(((P - mean[:, None]) ** 2 * w).sum(axis=1) / n, 0.0)))
        dP = np.linalg.norm(np.diff(norm.poses[idx], axis=1), axis=3)
        sr = real[:, 1:]
        parts.append((dP * sr[..., None]).sum(axis=1) / np.maximum(sr.sum(axis=1), 1)[:, None] * fps)
        c = (norm.centre[idx] - norm.centre[indices][:, None, :]) / s_now[:, None, None]
        ls = np.log(np.maximum(norm.raw_scale[idx], 1e-9))[..., None]
        tau = (np.arange(context) - (context - 1)) / fps
        parts.append(_slope(tau, np.concatenate([c, ls], axis=2), real))
        cy = np.where(real, c[..., 1], np.nan)
        with np.errstate(all="ignore"):
            rng = np.nanmax(cy, axis=1) - np.nanmin(cy, axis=1)
        parts.append(np.nan_to_num(rng)[:, None])
        parts.append(real.sum(axis=1, keepdims=True) / context)
    if long > context:
        parts.append(long_features(norm, fps, indices, long))
    return np.concatenate(parts, axis=1).astype(np.float32)


def long_features(norm: NormalizedPoses, fps: float, indices: np.ndarray, long: int = LONG) -> np.ndarray:
    """``[N, 3K + 19]`` float64: features of the last ``long`` frames (2 s) within the track,
    for motions only seen over seconds (dance, gaits, standing): each keypoint's mean speed
    (torso lengths per second) and the spread of its normalised position (x and y); the
    hips' vertical range and the spread of their vertical velocity, the straightness of
    their path (net over travelled distance in the image), their least-squares velocity
    and approach rate; the amplitudes, in three frequency bands (:data:`BANDS`), over the
    last :data:`FFT_N` frames (Hann window, mean removed), of the hips' height, of the
    ankles' height difference (the legs' alternation in a gait), of the wrists' height
    difference and of the wrists' mean height (arm movements); the fraction of the
    ``long`` frames inside the track."""
    T = len(norm)
    N = len(indices)
    start = _track_start(norm.reset)
    idx, real = _window_index(T, long, indices, start)
    P = norm.poses[idx]                                            # [N, L, K, 2]
    w = real[..., None].astype(np.float64)
    n = np.maximum(w.sum(axis=1), 1.0)                              # [N, 1]
    parts = []
    dP = np.linalg.norm(np.diff(P, axis=1), axis=3)                # [N, L-1, K]
    sr = real[:, 1:]
    parts.append((dP * sr[..., None]).sum(axis=1) / np.maximum(sr.sum(axis=1), 1)[:, None] * fps)
    Pf = P.reshape(N, long, -1)
    mean = (Pf * w).sum(axis=1) / n
    parts.append(np.sqrt(np.maximum(((Pf - mean[:, None]) ** 2 * w).sum(axis=1) / n, 0.0)))
    s_now = norm.scale[indices]
    c = (norm.centre[idx] - norm.centre[indices][:, None, :]) / s_now[:, None, None]   # [N, L, 2]
    cy = np.where(real, c[..., 1], np.nan)
    with np.errstate(all="ignore"):
        vrange = np.nan_to_num(np.nanmax(cy, axis=1) - np.nanmin(cy, axis=1))
    vy = np.diff(c[..., 1], axis=1) * fps
    vm = (vy * sr).sum(axis=1) / np.maximum(sr.sum(axis=1), 1)
    vstd = np.sqrt(np.maximum(((vy - vm[:, None]) ** 2 * sr).sum(axis=1) / np.maximum(sr.sum(axis=1), 1), 0.0))
    step = np.linalg.norm(np.diff(c, axis=1), axis=2) * sr
    first = np.argmax(real, axis=1)
    net = np.linalg.norm(c[:, -1] - c[np.arange(N), first], axis=1)
    straight = net / np.maximum(step.sum(axis=1), 1e-3)
    parts.append(np.stack([vrange, vstd, straight], axis=1))
    ls = np.log(np.maximum(norm.raw_scale[idx], 1e-9))[..., None]
    tau = (np.arange(long) - (long - 1)) / fps
    parts.append(_slope(tau, np.concatenate([c, ls], axis=2), real))
    m = min(FFT_N, long)
    rm = real[:, -m:].astype(np.float64)
    Q = P[:, -m:]
    sig = np.stack([c[:, -m:, 1],
                    Q[:, :, KP["left_ankle"], 1] - Q[:, :, KP["right_ankle"], 1],
                    Q[:, :, KP["left_wrist"], 1] - Q[:, :, KP["right_wrist"], 1],
                    0.5 * (Q[:, :, KP["left_wrist"], 1] + Q[:, :, KP["right_wrist"], 1])], axis=2)   # [N, m, S]
    nm = np.maximum(rm.sum(axis=1), 1.0)[:, None]
    sig = (sig - (sig * rm[..., None]).sum(axis=1)[:, None] / nm[:, None]) * rm[..., None]
    amp = np.abs(np.fft.rfft(sig * np.hanning(m)[None, :, None], axis=1)) / m                   # [N, m/2+1, S]
    parts.append(np.concatenate([amp[:, a:b].sum(axis=1) for a, b in BANDS], axis=1))
    parts.append(real.sum(axis=1, keepdims=True) / long)
    return np.concatenate(parts, axis=1)


def mirror_motion_features(X: np.ndarray, window: int = WINDOW, context: int = CONTEXT, long: int = 0) -> np.ndarray:
    """The features of the mirror image (left/right swapped, x negated) of ``X``."""
    K = len(KEYPOINTS)
    X = X.copy()

    def pose_block(o: int, negate: bool) -> None:
        blk = X[:, o:o + K * 2].reshape(-1, K, 2)[:, MIRROR]
        if negate:
            blk[..., 0] *= -1
        X[:, o:o + K * 2] = blk.reshape(-1, K * 2)

    n_pose = len([o for o in POSE_OFFSETS if o < window])
    for k in range(n_pose):
        pose_block(k * K * 2, True)
    o = n_pose * K * 2
    X[:, o:o + K] = X[:, o:o + K][:, MIRROR]
    o += K
    X[:, o] *= -1          # vx (window)
    X[:, o + 3] *= -1      # vx (last frames)
    o += 7
    if context > window:
        pose_block(o, True)         # mean pose
        pose_block(o + 2 * K, False)  # pose spread
        o += 4 * K
        X[:, o:o + K] = X[:, o:o + K][:, MIRROR]
        X[:, o + K] *= -1  # vx (context)
        o += K + 5
    if long > context:
        X[:, o:o + K] = X[:, o:o + K][:, MIRROR]      # speeds
        pose_block(o + K, False)                      # spreads
        X[:, o + 3 * K + 3] *= -1                     # vx (long)
    return X
