"""Where keypoints come from: files, motion capture through the virtual camera, a webcam.

* :func:`~.keypoints.load_keypoints`: recorded keypoint files (JSON / NPZ).
* :func:`render_bvh`: keypoints of a BVH clip filmed by the virtual camera
  (:mod:`.render`), e.g. to make test streams (``motionmatch pose render``).
* :class:`WebcamSource`: live 2D keypoints from a webcam through MediaPipe Pose, an
  optional extra: ``pip install 'motionmatch[webcam]'`` (``mediapipe`` and
  ``opencv-python``). MediaPipe's legacy Pose solution ships its lite and full models
  inside the package; the heavy model (``model_complexity=2``) and the newer Tasks API
  (``model_path=`` a ``pose_landmarker_*.task`` file) need a model file downloaded from
  Google's MediaPipe model page first, which fails offline: a clear
  :class:`WebcamError` says so. Frames are read unmirrored, so the performer's left
  shoulder appears on the image's right when they face the camera, as the classifiers
  expect.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from motionmatch.control.pose.keypoints import KEYPOINTS, KeypointStream
from motionmatch.control.pose.render import RenderSettings, render_motion
from motionmatch.errors import MotionMatchError

#: MediaPipe Pose landmark index of each of :data:`~.keypoints.KEYPOINTS`.
MEDIAPIPE_INDEX = {"nose": 0, "left_shoulder": 11, "right_shoulder": 12, "left_elbow": 13, "right_elbow": 14,
                   "left_wrist": 15, "right_wrist": 16, "left_hip": 23, "right_hip": 24, "left_knee": 25,
                   "right_knee": 26, "left_ankle": 27, "right_ankle": 28}


class WebcamError(MotionMatchError, RuntimeError):
    """The webcam or the pose estimator is unavailable (the message says what to install or fetch)."""


def render_bvh(path: str | Path, azimuth: float = 0.0, settings: RenderSettings | None = None, seed: int = 0,
               mirrored: bool = False, label: bool = True) -> KeypointStream:
    """2D keypoints of a BVH clip filmed from ``azimuth`` degrees (0: in front of the
    performer). With ``label``, per-frame commands from the labelling rules are attached
    (:mod:`.labels`; clip tags from the file name)."""
    from motionmatch.anim import load_bvh
    from motionmatch.anim.resample import resample
    from motionmatch.control.pose.labels import label_frames, motion_facts
    from motionmatch.control.pose.render import mirror_keypoints, render_keypoints, world_keypoints
    from motionmatch.datasets import tags_from_name

    s = settings or RenderSettings()
    m = load_bvh(path)
    m.tags = tags_from_name(Path(path).stem)
    if not label:
        stream, _ = render_motion(m, s, seed, azimuth, mirrored)
        return stream
    m = m if abs(m.fps - s.fps) < 1e-6 else resample(m, s.fps)
    kp = world_keypoints(m)
    facts = motion_facts(m, kp)
    if mirrored:
        kp, facts = mirror_keypoints(kp), facts.mirrored()
    stream, info = render_keypoints(kp, s.fps, s, seed, azimuth)
    stream.labels = label_frames(facts, info.cam_forward, info.cam_right)
    stream.meta.update({"clip": Path(path).stem, "azimuth_deg": azimuth, "cuts": np.flatnonzero(info.cuts).tolist()})
    return stream


class WebcamSource:
    """Live keypoints from a webcam (MediaPipe Pose). Iterate to get ``(t, keypoints [13, 2],
    confidence [13])`` per frame, ``t`` in seconds since the start, keypoints in pixels
    (x right, y down) named :data:`~.keypoints.KEYPOINTS`.

    Args:
        camera: OpenCV camera index or video file.
        model_complexity: 0 (lite) or 1 (full) are bundled with MediaPipe's legacy Pose;
            2 (heavy) is downloaded on first use.
        model_path: a MediaPipe Tasks ``pose_landmarker_*.task`` file (used when given,
            or when the legacy solution is not available).
    """

    names = KEYPOINTS

    def __init__(self, camera: int | str = 0, model_complexity: int = 1, model_path: str | Path | None = None):
        try:
            import cv2
        except ImportError:
            raise WebcamError("webcam input needs OpenCV and MediaPipe: pip install 'motionmatch[webcam]'") from None
        try:
            import mediapipe as mp
        except ImportError:
            raise WebcamError("webcam input needs MediaPipe: pip install 'motionmatch[webcam]'") from None
        self._cv2 = cv2
        self._cap = cv2.VideoCapture(camera)
        if not self._cap.isOpened():
            raise WebcamError(f"cannot open camera {camera!r} (is a webcam connected and free?)")
        self._legacy = None
        self._tasks = None
        solutions = getattr(mp, "solutions", None)
        if model_path is None and solutions is not None and hasattr(solutions, "pose"):
            try:
                self._legacy = solutions.pose.Pose(model_complexity=model_complexity, smooth_landmarks=True)
            except Exception as e:  # the heavy model is downloaded on first use
                raise WebcamError(f"MediaPipe could not load its pose model (complexity {model_complexity}): {e}. "
                                  "Complexity 0 and 1 are bundled; 2 must be downloaded (needs internet).") from None
        else:
            if model_path is None or not Path(model_path).is_file():
                raise WebcamError("this MediaPipe has no bundled Pose solution; download a pose landmarker model "
                                  "(pose_landmarker_lite.task from Google's MediaPipe models page, needs internet) "
                                  "and pass it with --model FILE")
            from mediapipe.tasks.python import BaseOptions, vision

            opts = vision.PoseLandmarkerOptions(base_options=BaseOptions(model_asset_path=str(model_path)),
                                                running_mode=vision.RunningMode.VIDEO)
            self._tasks = vision.PoseLandmarker.create_from_options(opts)
            self._mp = mp
        self._t0 = time.monotonic()

    def close(self) -> None:
        self._cap.release()

    def __enter__(self) -> WebcamSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def read(self) -> tuple[float, np.ndarray, np.ndarray] | None:
        """The next frame's ``(t, keypoints, confidence)``; ``None`` at the end of a video."""
        ok, frame = self._cap.read()
        if not ok:
            return None
        t = time.monotonic() - self._t0
        h, w = frame.shape[:2]
        rgb = self._cv2.cvtColor(frame, self._cv2.COLOR_BGR2RGB)
        kp = np.full((len(KEYPOINTS), 2), np.nan)
        conf = np.zeros(len(KEYPOINTS))
        if self._legacy is not None:
            res = self._legacy.process(rgb)
            lms = res.pose_landmarks.landmark if res.pose_landmarks else None
        else:
            img = self._mp.Image(image_format=self._mp.ImageFormat.SRGB, data=rgb)
            res = self._tasks.detect_for_video(img, int(t * 1000))
            lms = res.pose_landmarks[0] if res.pose_landmarks else None
        if lms is not None:
            for j, name in enumerate(KEYPOINTS):
                lm = lms[MEDIAPIPE_INDEX[name]]
                kp[j] = (lm.x * w, lm.y * h)
                conf[j] = float(getattr(lm, "visibility", 1.0) or 0.0)
        return t, kp, conf

    def __iter__(self) -> Iterator[tuple[float, np.ndarray, np.ndarray]]:
        while True:
            r = self.read()
            if r is None:
                return
            yield r


def record(source, seconds: float, label: str | None = None) -> KeypointStream:
    """Record ``seconds`` of ``(t, keypoints, confidence)`` frames from ``source`` (e.g. a
    :class:`WebcamSource`) into a stream, every frame labelled ``label``."""
    ts, ks, cs = [], [], []
    for t, kp, conf in source:
        ts.append(t)
        ks.append(kp)
        cs.append(conf)
        if t - ts[0] >= seconds:
            break
    if not ts:
        raise WebcamError("no frames were read from the source")
    labels = None if label is None else np.full(len(ts), label)
    return KeypointStream(np.asarray(ts), np.stack(ks), KEYPOINTS, np.stack(cs), True, None, labels,
                          {"source": type(source).__name__})
