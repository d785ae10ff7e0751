"""Keypoints rendered from motion capture through a virtual camera.

:func:`world_keypoints` maps a skeleton's joints to :data:`~.keypoints.KEYPOINTS` (3D,
world, metres): wrists are the joints named hand/wrist, elbows and shoulders their parent
and grandparent, ankles the joints named foot/ankle (not toe), knees and hips their parent
and grandparent; the nose is a point 9 cm in front of and 4 cm above the head joint, in
the head's own frame (its forward axis calibrated per clip against the chest's facing).
So any humanoid BVH works (LAFAN1, Bandai-Namco, Mixamo, ...); ``overrides`` fixes odd names.

:func:`render_keypoints` films the keypoints with a pinhole (or orthographic) camera that
stands still in the world like a webcam. The camera is placed ("anchored") ``distance``
metres from the performer, ``height`` metres above the ground, looking at them, at an
``azimuth`` relative to the performer's facing at that moment (0: in front, facing them;
+90: on their left). When the performer leaves the usable view (closer than
``min_distance``, farther than ``max_distance``, more than ``max_angle_deg`` off the
optical axis) or after ``max_segment_s``, the camera is anchored again in front of them
(a cut, flagged in :attr:`RenderInfo.cuts`). Images are ``width x height`` pixels with
``y`` down; Gaussian noise (``noise_px`` plus ``noise_rel`` of the torso's image length)
and random keypoint dropouts imitate an estimator, or, with ``estimator`` set (``"mediapipe"``),
the behaviour of a real estimator measured on video of the skinned body (:mod:`.imitate`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from scipy.signal import savgol_filter

from motionmatch.anim import quat
from motionmatch.anim.motion import Motion
from motionmatch.anim.resample import resample
from motionmatch.anim.root import side_of
from motionmatch.anim.skeleton import Skeleton
from motionmatch.control.pose.keypoints import KEYPOINTS, KP, MIRROR, KeypointStream
from motionmatch.errors import SkeletonError

UP = np.array([0.0, 1.0, 0.0])
NOSE_FORWARD = 0.09
NOSE_UP = 0.04

_HAND_WORDS = ("hand", "wrist")
_FOOT_WORDS = ("foot", "ankle")
_NOT = ("toe", "finger", "thumb", "index", "end", "site", "nub", "ball", "heel")


def _named(skeleton: Skeleton, words: tuple[str, ...], side: str) -> int | None:
    best = None
    depth = skeleton.depth()
    for j, n in enumerate(skeleton.names):
        low = n.lower()
        if any(w in low for w in words) and not any(w in low for w in _NOT) and side_of(n) == side:
            if best is None or depth[j] < depth[best]:
                best = j
    return best


def joint_map(skeleton: Skeleton, overrides: dict[str, str] | None = None) -> dict[str, int]:
    """Joint index of each keypoint (``"nose"`` maps to the head joint).

    ``overrides`` maps keypoint names to joint names. Raises :class:`SkeletonError` when
    a limb cannot be found from the names.
    """
    out: dict[str, int] = {}
    p = skeleton.parents
    for side, s in (("left", "L"), ("right", "R")):
        hand = _named(skeleton, _HAND_WORDS, s)
        foot = _named(skeleton, _FOOT_WORDS, s)
        if hand is None or foot is None or p[hand] <= 0 or p[p[hand]] <= 0 or p[foot] <= 0 or p[p[foot]] <= 0:
            raise SkeletonError(f"cannot find the {side} arm and leg (joints named hand/wrist and foot/ankle with "
                                f"two parents) in {', '.join(skeleton.names)}; pass overrides={{keypoint: joint}}")
        out[f"{side}_wrist"], out[f"{side}_elbow"], out[f"{side}_shoulder"] = hand, p[hand], p[p[hand]]
        out[f"{side}_ankle"], out[f"{side}_knee"], out[f"{side}_hip"] = foot, p[foot], p[p[foot]]
    heads = [j for j, n in enumerate(skeleton.names) if "head" in n.lower() and "end" not in n.lower()]
    if not heads:
        raise SkeletonError(f"no joint named head in {', '.join(skeleton.names)}; pass overrides={{'nose': joint}}")
    out["nose"] = min(heads, key=lambda j: skeleton.depth()[j])
    for k, v in (overrides or {}).items():
        if k not in KP:
            raise SkeletonError(f"unknown keypoint {k!r}; expected one of {', '.join(KEYPOINTS)}")
        out[k] = skeleton.index(v)
    return out


def body_facing(kp: np.ndarray) -> np.ndarray:
    """``[F, 3]`` unit ground-plane facing of world keypoints ``[F, K, 3]``: the left-to-right
    axis through shoulders and hips crossed with the vertical."""
    lat = (kp[:, KP["left_shoulder"]] - kp[:, KP["right_shoulder"]]) + (kp[:, KP["left_hip"]] - kp[:, KP["right_hip"]])
    f = np.cross(lat, UP)
    f[:, 1] = 0.0
    n = np.linalg.norm(f, axis=1, keepdims=True)
    return np.where(n > 1e-9, f / np.maximum(n, 1e-9), np.array([0.0, 0.0, 1.0]))


def world_keypoints(motion: Motion, overrides: dict[str, str] | None = None) -> np.ndarray:
    """``[F, K, 3]`` world positions (m, Y up) of :data:`KEYPOINTS` for a clip."""
    jm = joint_map(motion.skeleton, overrides)
    wp = motion.world_positions
    kp = np.empty((motion.num_frames, len(KEYPOINTS), 3))
    for name, j in jm.items():
        kp[:, KP[name]] = wp[:, j]
    head = jm["nose"]
    rot = motion.world_rotations[:, head]
    facing = body_facing(kp)
    up = np.broadcast_to(UP, facing.shape)
    lf = quat.inv_rotate(rot, facing).mean(axis=0)
    lu = quat.inv_rotate(rot, up).mean(axis=0)
    lu = lu / max(np.linalg.norm(lu), 1e-9)
    lf = lf - lu * (lf @ lu)
    lf = lf / max(np.linalg.norm(lf), 1e-9)
    kp[:, KP["nose"]] = wp[:, head] + quat.rotate(rot, np.broadcast_to(NOSE_FORWARD * lf + NOSE_UP * lu, facing.shape))
    return kp


def mirror_keypoints(kp: np.ndarray) -> np.ndarray:
    """World keypoints reflected left/right (``x -> -x``, left and right keypoints swapped)."""
    out = kp[:, MIRROR].copy()
    out[..., 0] *= -1.0
    return out


def _smooth(x: np.ndarray, fps: float, window_s: float) -> np.ndarray:
    n = x.shape[0]
    win = round(window_s * fps) | 1
    if n < 5 or win < 5:
        return x.copy()
    win = min(win, n if n % 2 else n - 1)
    return savgol_filter(x, win, 2, axis=0, mode="interp") if win > 2 else x.copy()


@dataclass
class Camera:
    """A pinhole camera: ``x`` right, ``y`` down, ``z`` forward; pixels ``width x height``."""

    position: np.ndarray
    forward: np.ndarray
    focal: float = 600.0
    width: int = 640
    height: int = 480
    orthographic: bool = False
    ortho_depth: float = 4.0

    def __post_init__(self) -> None:
        self.position = np.asarray(self.position, dtype=np.float64)
        f = np.asarray(self.forward, dtype=np.float64)
        self.forward = f / np.linalg.norm(f)
        right = np.cross(self.forward, UP)
        right /= np.linalg.norm(right)
        down = np.cross(self.forward, right)
        self.rotation = np.stack([right, down, self.forward])  # rows: camera axes in the world

    @classmethod
    def look_at(cls, position, target, **kw) -> Camera:
        return cls(np.asarray(position, float), np.asarray(target, float) - np.asarray(position, float), **kw)

    @property
    def right(self) -> np.ndarray:
        return self.rotation[0]

    def to_camera(self, points: np.ndarray) -> np.ndarray:
        """World points ``[..., 3]`` in camera coordinates."""
        return (np.asarray(points) - self.position) @ self.rotation.T

    def project(self, points: np.ndarray) -> np.ndarray:
        """Image coordinates ``[..., 2]`` (pixels, y down) of world points ``[..., 3]``."""
        c = self.to_camera(points)
        z = np.full(c.shape[:-1], self.ortho_depth) if self.orthographic else np.maximum(c[..., 2], 1e-3)
        return np.stack([self.focal * c[..., 0] / z + 0.5 * self.width,
                         self.focal * c[..., 1] / z + 0.5 * self.height], axis=-1)


@dataclass
class RenderSettings:
    """The virtual camera and estimator noise (metres, degrees, pixels, seconds)."""

    fps: float = 30.0
    azimuths_deg: tuple[float, ...] = (0.0,)
    distance: tuple[float, float] = (3.5, 5.5)
    height: tuple[float, float] = (0.8, 1.6)
    target_height: float = 0.9
    focal: float = 600.0
    width: int = 640
    height_px: int = 480
    orthographic: bool = False
    noise_px: float = 1.0
    noise_rel: float = 0.015
    dropout: float = 0.0
    min_distance: float = 1.5
    max_distance: float = 9.0
    max_angle_deg: float = 30.0
    max_segment_s: float = 10.0
    estimator: str = ""
    limb_gain: tuple[float, float] = (1.0, 1.0)
    #: estimates per second of a pose estimator slower than the camera (a range, per camera
    #: segment; ``(0, 0)``: one estimate per frame), see :func:`thin_frame_rate`
    estimator_fps: tuple[float, float] = (0.0, 0.0)

    def to_dict(self) -> dict:
        from dataclasses import asdict

        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


@dataclass
class RenderInfo:
    """Where the camera was, frame by frame.

    Attributes:
        cuts: ``[F]`` bool, True on the first frame after the camera was (re-)anchored.
        cam_forward: ``[F, 3]`` the camera's horizontal viewing direction (unit).
        cam_right: ``[F, 3]`` the camera's right axis (unit, horizontal): the left of a
            performer who faces the camera.
        azimuth_deg: ``[F]`` the azimuth the camera was anchored at.
        cameras: the cameras, one per anchor, with ``anchors`` their first frames.
    """

    cuts: np.ndarray
    cam_forward: np.ndarray
    cam_right: np.ndarray
    azimuth_deg: np.ndarray
    cameras: list[Camera] = field(default_factory=list)
    anchors: list[int] = field(default_factory=list)


def _anchor(kp: np.ndarray, facing: np.ndarray, i: int, azimuth: float, s: RenderSettings,
            rng: np.random.Generator) -> Camera:
    hips = 0.5 * (kp[i, KP["left_hip"]] + kp[i, KP["right_hip"]])
    ground = np.array([hips[0], 0.0, hips[2]])
    a = np.radians(azimuth)
    f = facing[i]
    # rotate the facing by the azimuth about +Y (positive: toward the performer's left)
    d = np.array([f[0] * np.cos(a) + f[2] * np.sin(a), 0.0, -f[0] * np.sin(a) + f[2] * np.cos(a)])
    dist = rng.uniform(*s.distance)
    h = rng.uniform(*s.height)
    pos = ground + d * dist + np.array([0.0, h, 0.0])
    target = ground + np.array([0.0, s.target_height, 0.0])
    return Camera.look_at(pos, target, focal=s.focal, width=s.width, height=s.height_px,
                          orthographic=s.orthographic, ortho_depth=dist)


#: the keypoints of each limb whose fast motion :func:`damp_limbs` scales together
LIMBS = (("left_elbow", "left_wrist"), ("right_elbow", "right_wrist"), ("left_knee", "left_ankle"),
         ("right_knee", "right_ankle"))
#: seconds: a limb's motion about its moving average over this long (a stride) is scaled
DAMP_WINDOW_S = 1.0


def damp_limbs(uv: np.ndarray, fps: float, anchors: list[int], gain: tuple[float, float],
               rng: np.random.Generator) -> np.ndarray:
    """Rendered keypoints ``uv [F, K, 2]`` (pixels) with each limb's fast motion scaled,
    as a video pose estimator does: measured against the rendered keypoints of the same
    frames, MediaPipe keeps only about half of the wrists' and ankles' swing about their
    mean (relative to the hips) on 15 fps video of a run (benchmarks/README.md, "limb
    damping"), and a classifier trained on full swings reads the damped run as a dance.
    Each limb of :data:`LIMBS` gets its own gain, drawn uniformly from ``gain`` for every
    camera segment (``anchors``: their first frames): the part of its motion (relative to
    the hips' midpoint) that a moving average over :data:`DAMP_WINDOW_S` does not follow
    is multiplied by it."""
    from scipy.ndimage import uniform_filter1d

    F = uv.shape[0]
    out = uv.copy()
    hips = 0.5 * (uv[:, KP["left_hip"]] + uv[:, KP["right_hip"]])
    win = max(2, round(DAMP_WINDOW_S * fps))
    bounds = [*anchors, F]
    for a, b in itertools.pairwise(bounds):
        for limb in LIMBS:
            g = rng.uniform(*gain)
            idx = [KP[n] for n in limb]
            rel = uv[a:b, idx] - hips[a:b, None]
            slow = uniform_filter1d(rel, win, axis=0, mode="nearest")
            out[a:b, idx] = hips[a:b, None] + slow + g * (rel - slow)
    return out


def thin_frame_rate(uv: np.ndarray, conf: np.ndarray, fps: float, anchors: list[int], rate: tuple[float, float],
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Keypoints ``uv [F, K, 2]`` and confidences ``conf [F, K]`` at ``fps`` as a slower
    estimator delivers them once resampled to ``fps``: an estimator that manages ``r``
    frames a second (drawn uniformly from ``rate`` for every camera segment, ``anchors``:
    their first frames) reads every ``fps / r``-th camera frame (from a random first one),
    and the classifier's resampling (:func:`~motionmatch.control.pose.classify.
    resample_stream`) draws straight lines between its estimates. On a loaded machine the
    page's estimator makes 5-8 estimates a second (benchmarks/README.md, "Page camera under
    load"): a run's limbs then swing in straight strokes, which a classifier trained on
    30 Hz keypoints alone reads as a dance or a creep. Frames missing in an estimate (NaN)
    stay missing on the frames it decides. Returns new arrays."""
    F = uv.shape[0]
    out, out_conf = uv.copy(), conf.copy()
    bounds = [*anchors, F]
    for a, b in itertools.pairwise(bounds):
        r = rng.uniform(*rate)
        step = fps / max(r, 1e-6)
        if b - a < 2 or step <= 1.0:
            continue
        picks = np.unique(np.minimum(a + np.round(rng.uniform(0.0, step) + step * np.arange(int((b - a) / step) + 1))
                                     .astype(np.int64), b - 1))
        frames = np.arange(a, b)
        # each frame between two estimates: the line between them (before the first and after
        # the last: held)
        j = np.clip(np.searchsorted(picks, frames, side="right") - 1, 0, len(picks) - 1)
        k = np.minimum(j + 1, len(picks) - 1)
        span = np.maximum(picks[k] - picks[j], 1)
        w = np.clip((frames - picks[j]) / span, 0.0, 1.0)[:, None, None]
        out[a:b] = (1.0 - w) * uv[picks[j]] + w * uv[picks[k]]
        nearer = np.where(w[:, 0, 0] < 0.5, picks[j], picks[k])
        out_conf[a:b] = conf[nearer]
    return out, out_conf


def render_keypoints(kp: np.ndarray, fps: float, settings: RenderSettings | None = None,
                     rng: np.random.Generator | int | None = 0, azimuth: float | None = None,
                     labels: np.ndarray | None = None) -> tuple[KeypointStream, RenderInfo]:
    """Film world keypoints ``[F, K, 3]`` (at ``fps``) with the virtual camera.

    Each anchor picks its azimuth from ``settings.azimuths_deg`` at random, or uses
    ``azimuth``. Returns the 2D stream (image pixels, y down, times ``i / fps``) and
    where the camera was.
    """
    s = settings or RenderSettings()
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    F = kp.shape[0]
    facing = _smooth(body_facing(kp), fps, 0.5)
    facing[:, 1] = 0.0
    facing /= np.maximum(np.linalg.norm(facing, axis=1, keepdims=True), 1e-9)
    hips = 0.5 * (kp[:, KP["left_hip"]] + kp[:, KP["right_hip"]])
    uv = np.empty((F, kp.shape[1], 2))
    cuts = np.zeros(F, dtype=bool)
    cf = np.empty((F, 3))
    cr = np.empty((F, 3))
    az = np.empty(F)
    cams: list[Camera] = []
    anchors: list[int] = []
    tan_max = np.tan(np.radians(s.max_angle_deg))
    max_len = max(1, round(s.max_segment_s * fps))
    i = 0
    while i < F:
        a = float(azimuth) if azimuth is not None else float(rng.choice(np.asarray(s.azimuths_deg, dtype=float)))
        cam = _anchor(kp, facing, i, a, s, rng)
        stop = min(F, i + max_len)
        c = cam.to_camera(hips[i:stop])
        bad = (c[:, 2] < s.min_distance) | (c[:, 2] > s.max_distance) | (np.abs(c[:, 0]) > tan_max * np.maximum(c[:, 2], 1e-3))
        bad[0] = False
        n = int(np.argmax(bad)) if bad.any() else stop - i
        n = max(n, 1)
        uv[i:i + n] = cam.project(kp[i:i + n])
        cuts[i] = True
        fwd = cam.forward.copy()
        fwd[1] = 0.0
        fwd /= max(np.linalg.norm(fwd), 1e-9)
        cf[i:i + n] = fwd
        cr[i:i + n] = cam.right
        az[i:i + n] = a
        cams.append(cam)
        anchors.append(i)
        i += n
    if s.limb_gain != (1.0, 1.0):
        uv = damp_limbs(uv, fps, anchors, s.limb_gain, rng)
    if s.estimator:   # a real estimator's measured behaviour instead of Gaussian noise
        from motionmatch.control.pose.imitate import imitate_estimator, load_estimator_noise, view_azimuth

        view = view_azimuth(kp, facing, cams, anchors)
        uv, conf = imitate_estimator(uv, view, load_estimator_noise(s.estimator), rng)
        meta = {"source": "virtual-camera", "fps": fps, "estimator": s.estimator}
    else:
        # estimator noise: absolute pixels plus a fraction of the torso's image length
        torso = np.linalg.norm(0.5 * (uv[:, KP["left_shoulder"]] + uv[:, KP["right_shoulder"]])
                               - 0.5 * (uv[:, KP["left_hip"]] + uv[:, KP["right_hip"]]), axis=1)
        sigma = s.noise_px + s.noise_rel * torso
        uv = uv + rng.normal(size=uv.shape) * sigma[:, None, None]
        conf = np.ones(uv.shape[:2])
        if s.dropout > 0:
            drop = rng.random(conf.shape) < s.dropout
            drop[:, [KP["left_hip"], KP["right_hip"]]] = False
            conf[drop] = 0.0
            uv[drop] = np.nan
        meta = {"source": "virtual-camera", "fps": fps}
    if tuple(s.estimator_fps) != (0.0, 0.0):
        uv, conf = thin_frame_rate(uv, conf, fps, anchors, s.estimator_fps, rng)
    stream = KeypointStream(np.arange(F) / fps, uv, KEYPOINTS, conf, True, (s.width, s.height_px), labels, meta)
    return stream, RenderInfo(cuts, cf, cr, az, cams, anchors)


def render_motion(motion: Motion, settings: RenderSettings | None = None, rng: np.random.Generator | int | None = 0,
                  azimuth: float | None = None, mirrored: bool = False,
                  overrides: dict[str, str] | None = None) -> tuple[KeypointStream, RenderInfo]:
    """:func:`render_keypoints` of a clip, resampled to ``settings.fps`` (optionally mirrored)."""
    s = settings or RenderSettings()
    m = motion if abs(motion.fps - s.fps) < 1e-6 else resample(motion, s.fps)
    kp = world_keypoints(m, overrides)
    if mirrored:
        kp = mirror_keypoints(kp)
    return render_keypoints(kp, s.fps, s, rng, azimuth)
