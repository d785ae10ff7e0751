"""What a real pose estimator does to keypoints, measured, and added to rendered keypoints.

The classifiers train on keypoints of motion-capture joints filmed by the virtual camera
(:mod:`.render`). A real estimator (MediaPipe Pose on video of the skinned body,
``benchmarks/bench_pose_camera.py --fit``) differs from them in ways a little Gaussian
noise does not imitate; :class:`EstimatorNoise` holds what was measured, frame by frame
against the rendered keypoints of the same frames, as a function of the **view**: the
camera's azimuth relative to the performer's facing (degrees, 0 in front, +90 on their
left; :func:`view_azimuth`), in :data:`BINS` bins of 30 degrees:

* ``offset [B, K, 2]``: the median difference per keypoint (torso lengths, x right, y up):
  where the estimator puts a joint on the body (seen from the front MediaPipe's elbows,
  wrists and ankles sit 0.1-0.15 torso lengths above the skeleton's joints), per view;
* ``noise [B, K, 2]``: the robust spread (1.4826 x the median absolute deviation) of the
  rest, with ``ar [K]`` its frame-to-frame correlation (AR(1) at 30 Hz);
* ``missing [B, K]``: the chance that a keypoint is missing (confidence under 0.2) while
  the body is found (the far arm seen side on);
* ``lost [B]`` and ``lost_run``: the chance that no body is found at all, and the mean
  length of those runs (frames);
* ``swap [B]`` and ``swap_run``: the chance that the estimator takes the performer's left
  for their right (the whole body mirrored; counted where the view separates the left and
  right shoulders and hips clearly), and the mean run length.

Every number is measured on a view and its mirror image together (a view from the left
is a view from the right with left and right swapped), so the model is symmetric.

:func:`imitate_estimator` adds all of it to rendered keypoints (``RenderSettings(estimator=
"mediapipe")``): the offsets and the correlated noise in the current frame's torso
lengths, missing keypoints, lost bodies and swapped sides as runs drawn from two-state
Markov chains with the measured rates per view. Bins with too few measured frames take
the pooled value of all views. The file shipped with the package
(``estimator_mediapipe.json``) holds only these derived numbers.
"""

from __future__ import annotations

import functools
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.signal import lfilter

from motionmatch._limits import read_json
from motionmatch.control.pose.keypoints import KEYPOINTS, KP, MIRROR
from motionmatch.errors import MotionMatchError

__all__ = ["BINS", "EstimatorNoise", "fit_estimator_noise", "imitate_estimator", "load_estimator_noise",
           "view_azimuth"]

#: View bins: 12 bins of 30 degrees, the first centred on -165 degrees.
BINS = 12
#: Fewest frames a bin needs for its own numbers (else the pooled ones).
MIN_FRAMES = 40
#: Left and right shoulders (and hips) this far apart in the image (torso lengths) tell a
#: swapped view from an unswapped one.
SWAP_SEPARATION = 0.25
#: Shipped models by name.
SHIPPED = {"mediapipe": Path(__file__).with_name("estimator_mediapipe.json")}
FORMAT = "motionmatch-estimator-noise"


def view_bin(azimuth_deg: np.ndarray) -> np.ndarray:
    """``[F]`` int: the bin of each view azimuth (degrees, any range)."""
    a = (np.asarray(azimuth_deg, dtype=np.float64) + 180.0) % 360.0
    return np.minimum((a // (360.0 / BINS)).astype(np.int64), BINS - 1)


def _mirror_bin(b: np.ndarray) -> np.ndarray:
    """The bin of the mirrored view (azimuth negated)."""
    return BINS - 1 - np.asarray(b)


def view_azimuth(kp: np.ndarray, facing: np.ndarray, cameras: list, anchors: list[int]) -> np.ndarray:
    """``[F]`` the camera's azimuth relative to the performer's facing, degrees in (-180, 180]:
    0 in front, +90 on their left (the convention of :func:`~.render.render_keypoints`).

    Args:
        kp: ``[F, K, 3]`` world keypoints (m).
        facing: ``[F, 3]`` unit ground-plane facing.
        cameras, anchors: the cameras and their first frames (:class:`~.render.RenderInfo`).
    """
    F = kp.shape[0]
    hips = 0.5 * (kp[:, KP["left_hip"]] + kp[:, KP["right_hip"]])
    seg = np.searchsorted(np.asarray(anchors), np.arange(F), side="right") - 1
    pos = np.stack([cameras[s].position for s in seg]) if F else np.zeros((0, 3))
    d = pos - hips
    left = np.stack([facing[:, 2], np.zeros(F), -facing[:, 0]], axis=1)   # up x facing
    return np.degrees(np.arctan2((d * left).sum(axis=1), (d * facing).sum(axis=1)))


@dataclass(frozen=True)
class EstimatorNoise:
    """A pose estimator's measured behaviour (module docstring); arrays per view bin."""

    offset: np.ndarray     # [B, K, 2] torso lengths, y up
    noise: np.ndarray      # [B, K, 2] torso lengths
    ar: np.ndarray         # [K]
    missing: np.ndarray    # [B, K]
    lost: np.ndarray       # [B]
    lost_run: float
    swap: np.ndarray       # [B]
    swap_run: float
    frames: np.ndarray     # [B] measured frames per bin (information)
    source: str = ""

    def to_dict(self) -> dict:
        r = lambda a: np.round(np.asarray(a, dtype=np.float64), 4).tolist()  # noqa: E731
        return {"format": FORMAT, "version": 1, "keypoints": list(KEYPOINTS), "bins": BINS, "source": self.source,
                "offset": r(self.offset), "noise": r(self.noise), "ar": r(self.ar), "missing": r(self.missing),
                "lost": r(self.lost), "lost_run": round(float(self.lost_run), 3), "swap": r(self.swap),
                "swap_run": round(float(self.swap_run), 3), "frames": [int(v) for v in self.frames]}

    @classmethod
    def from_dict(cls, d: dict, where: str = "<estimator noise>") -> EstimatorNoise:
        if d.get("format") != FORMAT or list(d.get("keypoints", [])) != list(KEYPOINTS) or d.get("bins") != BINS:
            raise MotionMatchError(f"{where}: not a {FORMAT} file for {BINS} view bins of the 13 keypoints; "
                                   "measure it again with benchmarks/bench_pose_camera.py --fit")
        a = lambda k: np.asarray(d[k], dtype=np.float64)  # noqa: E731
        return cls(a("offset"), a("noise"), a("ar"), a("missing"), a("lost"), float(d["lost_run"]), a("swap"),
                   float(d["swap_run"]), np.asarray(d["frames"], dtype=np.int64), str(d.get("source", "")))

    def save(self, path: str | Path) -> Path:
        from motionmatch._files import atomic_write

        with atomic_write(Path(path), "w") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")
        return Path(path)


@functools.lru_cache(maxsize=4)
def load_estimator_noise(name_or_path: str = "mediapipe") -> EstimatorNoise:
    """A shipped model by name (``"mediapipe"``) or a file written by :meth:`EstimatorNoise.save`."""
    p = SHIPPED.get(name_or_path, Path(name_or_path))
    if not p.is_file():
        raise MotionMatchError(f"{name_or_path}: no such estimator noise model; use one of {', '.join(SHIPPED)} "
                               "or a file written by benchmarks/bench_pose_camera.py --fit")
    d = read_json(p, "estimator noise model", error=MotionMatchError)
    return EstimatorNoise.from_dict(d, str(p))


# ----------------------------------------------------------------------------- fitting
def _lr_cost(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.nansum(np.linalg.norm(a - b, axis=-1), axis=-1)


def _runs(x: np.ndarray) -> list[int]:
    """Lengths of the runs of True in ``x``."""
    if not x.any():
        return []
    d = np.diff(np.r_[0, x.astype(np.int8), 0])
    return list(np.flatnonzero(d == -1) - np.flatnonzero(d == 1))


def _per_bin(values: np.ndarray, bins: np.ndarray, mirrored: np.ndarray, stat, pooled) -> tuple[np.ndarray, np.ndarray]:
    """``stat`` of ``values`` (rows) per view bin, each bin pooled with its mirror image
    (``mirrored``: the rows as the mirrored view sees them); bins with too few rows get ``pooled``."""
    out, n = [], []
    for b in range(BINS):
        rows = np.concatenate([values[bins == b], mirrored[bins == BINS - 1 - b]])
        n.append(len(rows))
        out.append(stat(rows) if len(rows) >= MIN_FRAMES else pooled)
    return np.stack(out), np.asarray(n)


def _mirror_xy(r: np.ndarray) -> np.ndarray:
    """Per-keypoint values ``[..., K, 2]`` (x right) as the mirror image sees them."""
    out = r[..., MIRROR, :].copy()
    out[..., 0] *= -1.0
    return out


def fit_estimator_noise(samples: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
                        source: str = "") -> EstimatorNoise:
    """Measure an estimator against rendered keypoints of the same frames.

    Args:
        samples: per clip ``(true [F, K, 2], estimated [F, K, 2], confidence [F, K], view [F])``:
            the rendered keypoints without noise and the estimator's, image pixels, y down;
            confidence in ``[0, 1]`` (NaN keypoints: not found); the view azimuth (degrees).
    """
    from motionmatch.control.pose.keypoints import MIN_CONFIDENCE

    res, miss, views, lost, swapped, lost_runs, swap_runs, ac_num, ac_den = [], [], [], [], [], [], [], 0.0, 0.0
    for true, est, conf, view in samples:
        true = np.asarray(true, dtype=np.float64)
        est = np.asarray(est, dtype=np.float64).copy()
        conf = np.asarray(conf, dtype=np.float64)
        ok = np.isfinite(est).all(axis=2) & (conf >= MIN_CONFIDENCE)
        found = ok[:, [KP["left_hip"], KP["right_hip"], KP["left_shoulder"], KP["right_shoulder"]]].all(axis=1)
        est[~ok] = np.nan
        # sides swapped: both shoulders and hips in the mirrored order, where the view
        # separates them clearly (frames where it does not are not counted)
        torso = np.linalg.norm(0.5 * (true[:, KP["left_shoulder"]] + true[:, KP["right_shoulder"]])
                               - 0.5 * (true[:, KP["left_hip"]] + true[:, KP["right_hip"]]), axis=1)
        clear, flipped = found.copy(), found.copy()
        for a, b in (("left_shoulder", "right_shoulder"), ("left_hip", "right_hip")):
            sep = true[:, KP[a], 0] - true[:, KP[b], 0]
            with np.errstate(invalid="ignore"):
                clear &= np.abs(sep) > SWAP_SEPARATION * torso
                flipped &= np.sign(est[:, KP[a], 0] - est[:, KP[b], 0]) == -np.sign(sep)
        sw = clear & flipped & (_lr_cost(est[:, MIRROR], true) < _lr_cost(est, true))
        est[sw] = est[sw][:, MIRROR]
        ok[sw] = ok[sw][:, MIRROR]
        r = (est - true) / np.maximum(torso, 1e-6)[:, None, None]
        r[..., 1] *= -1.0
        r[~ok] = np.nan
        res.append(r[found])
        miss.append(~ok[found])
        views.append(np.asarray(view)[found])
        lost.append((~found, np.asarray(view)))
        swapped.append((sw[clear], np.asarray(view)[clear]))
        lost_runs += _runs(~found)
        swap_runs += _runs(sw)
        # frame-to-frame correlation of the residual (its slow part: the clip's mean removed)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # keypoints never found in a clip
            rc = r[found] - np.nanmedian(r[found], axis=0) if found.sum() > 2 else np.zeros((0, len(KEYPOINTS), 2))
        both = np.isfinite(rc[1:]) & np.isfinite(rc[:-1]) & found[found][1:, None, None]
        a, b = np.where(both, rc[1:], 0.0), np.where(both, rc[:-1], 0.0)
        ac_num = ac_num + (a * b).sum(axis=(0, 2))
        ac_den = ac_den + 0.5 * (a * a + b * b).sum(axis=(0, 2))
    R = np.concatenate(res)
    M = np.concatenate(miss).astype(np.float64)
    V = view_bin(np.concatenate(views))
    Rm = _mirror_xy(R)

    med = lambda x: np.nan_to_num(np.nanmedian(x, axis=0))  # noqa: E731
    offset, frames = _per_bin(R, V, Rm, med, med(np.concatenate([R, Rm])))

    def spread(x: np.ndarray) -> np.ndarray:
        return np.nan_to_num(1.4826 * np.nanmedian(np.abs(x - np.nanmedian(x, axis=0)), axis=0))

    noise, _ = _per_bin(R, V, Rm, spread, spread(np.concatenate([R, Rm])))
    frac = lambda x: x.mean(axis=0)  # noqa: E731
    missing, _ = _per_bin(M, V, M[:, MIRROR], frac, frac(np.concatenate([M, M[:, MIRROR]])))
    lf = np.concatenate([x for x, _ in lost]).astype(np.float64)
    lv = view_bin(np.concatenate([v for _, v in lost]))
    lost_p, _ = _per_bin(lf, lv, lf, frac, frac(lf))
    sf = np.concatenate([x for x, _ in swapped]).astype(np.float64)
    sv = view_bin(np.concatenate([v for _, v in swapped]))
    swap_p, _ = _per_bin(sf, sv, sf, frac, frac(sf))
    ar = np.clip(ac_num / np.maximum(ac_den, 1e-12), 0.0, 0.95)
    return EstimatorNoise(offset, noise, ar, missing, lost_p, float(np.mean(lost_runs)) if lost_runs else 1.0,
                          swap_p, float(np.mean(swap_runs)) if swap_runs else 1.0, frames, source)


# ----------------------------------------------------------------------------- imitation
def _markov_runs(p: np.ndarray, mean_run: float, rng: np.random.Generator) -> np.ndarray:
    """``[F]`` bool: runs of True with frame-wise stationary probability ``p [F]`` and mean
    length ``mean_run`` frames (a two-state Markov chain: on -> off with ``1 / mean_run``,
    off -> on with what keeps ``p``). One uniform number per frame decides both ways (its
    low end switches off, its high end on), so the chain is the last decisive frame's state."""
    F = p.shape[0]
    leave = 1.0 / max(mean_run, 1.0)
    p = np.clip(p, 0.0, 0.95)
    enter = np.minimum(leave * p / np.maximum(1.0 - p, 1e-6), 1.0 - leave)
    u = rng.random(F)
    state = np.where(u < leave, 0, np.where(u > 1.0 - enter, 1, -1))
    if F:
        state[0] = int(u[0] < p[0]) if state[0] < 0 else state[0]
    last = np.maximum.accumulate(np.where(state >= 0, np.arange(F), 0)) if F else np.zeros(0, np.int64)
    return state[last] == 1


def imitate_estimator(uv: np.ndarray, view: np.ndarray, model: EstimatorNoise,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rendered keypoints as the estimator would give them.

    Args:
        uv: ``[F, K, 2]`` rendered keypoints without noise (pixels, y down).
        view: ``[F]`` view azimuth per frame (degrees, :func:`view_azimuth`).
        model: the estimator's measured behaviour.
        rng: random numbers.

    Returns ``(keypoints [F, K, 2], confidence [F, K])``: missing keypoints and frames
    without a body are NaN with confidence 0.
    """
    F, K, _ = uv.shape
    b = view_bin(view)
    torso = np.linalg.norm(0.5 * (uv[:, KP["left_shoulder"]] + uv[:, KP["right_shoulder"]])
                           - 0.5 * (uv[:, KP["left_hip"]] + uv[:, KP["right_hip"]]), axis=1)
    # AR(1) noise with the measured per-bin spread and per-keypoint correlation
    e = rng.normal(size=(F, K, 2))
    start = rng.normal(size=(K, 2))         # the state before the first frame: stationary from the start
    z = np.empty_like(e)
    for k, a in enumerate(np.asarray(model.ar, dtype=np.float64)):
        if F:
            z[:, k], _ = lfilter([np.sqrt(1.0 - a * a)], [1.0, -a], e[:, k], axis=0, zi=(a * start[k])[None])
    d = model.offset[b] + model.noise[b] * z
    d[..., 1] *= -1.0                                  # y up -> image y down
    out = uv + d * torso[:, None, None]
    conf = np.ones((F, K))
    miss = rng.random((F, K)) < model.missing[b]
    out[miss] = np.nan
    conf[miss] = 0.0
    swap = _markov_runs(model.swap[b], model.swap_run, rng)
    out[swap] = out[swap][:, MIRROR]
    conf[swap] = conf[swap][:, MIRROR]
    lost = _markov_runs(model.lost[b], model.lost_run, rng)
    out[lost] = np.nan
    conf[lost] = 0.0
    return out, conf
