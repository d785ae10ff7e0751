"""A real pose estimator on real images: MediaPipe Pose on frames read by OpenCV.

The ``webcam`` extra (``pip install 'motionmatch[webcam]'``) brings ``mediapipe`` and
OpenCV. What the MediaPipe wheels ship decides what works offline:

* ``mediapipe`` 0.10.x up to 0.10.14 carries the legacy Pose solution
  (``mediapipe.solutions.pose``) with its person detector and the **full** landmark model
  inside the wheel; the lite and heavy models are fetched from Google on first use, so
  offline only ``model="full"`` works (a clear :class:`WebcamError` otherwise). Those wheels
  pin ``protobuf<5``, which is why the extra installs best into its own virtual
  environment.
* ``mediapipe`` 1.x ships no pose model at all (only the Tasks API, which needs a
  ``pose_landmarker_*.task`` file): pass one with ``model_path``.

:class:`PoseEstimator` turns one RGB image into :data:`~.keypoints.KEYPOINTS` (pixels,
x right, y down, the raw -- not mirrored -- image) with MediaPipe's visibility as the
confidence; :func:`video_frames` reads a camera or a video file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from motionmatch.control.pose.keypoints import KEYPOINTS
from motionmatch.errors import MotionMatchError

__all__ = ["MEDIAPIPE_INDEX", "MODELS", "PoseEstimator", "WebcamError", "require_cv2", "video_frames"]

#: MediaPipe Pose landmark index of each of :data:`~.keypoints.KEYPOINTS`.
MEDIAPIPE_INDEX = {"nose": 0, "left_shoulder": 11, "right_shoulder": 12, "left_elbow": 13, "right_elbow": 14,
                   "left_wrist": 15, "right_wrist": 16, "left_hip": 23, "right_hip": 24, "left_knee": 25,
                   "right_knee": 26, "left_ankle": 27, "right_ankle": 28}
_INDEX = np.array([MEDIAPIPE_INDEX[n] for n in KEYPOINTS])
#: Landmark models by name, as MediaPipe's ``model_complexity``.
MODELS = {"lite": 0, "full": 1, "heavy": 2}
EXTRA = "pip install 'motionmatch[webcam]' (mediapipe and OpenCV; see the README's webcam section)"


class WebcamError(MotionMatchError, RuntimeError):
    """The camera, the video or the pose estimator is unavailable (the message says what to install or fetch)."""


def require_cv2():
    """OpenCV, or a :class:`WebcamError` naming the extra."""
    try:
        import cv2
    except ImportError:
        raise WebcamError(f"camera and video input need OpenCV: {EXTRA}") from None
    return cv2


def _require_mediapipe():
    try:
        import mediapipe as mp
    except ImportError:
        raise WebcamError(f"the pose estimator needs MediaPipe: {EXTRA}") from None
    return mp


class PoseEstimator:
    """MediaPipe Pose, one person, tracking from frame to frame (video mode).

    Args:
        model: ``"lite"``, ``"full"`` or ``"heavy"`` (the legacy solution; only ``full`` is
            inside the wheel, see the module docstring).
        model_path: a MediaPipe Tasks ``pose_landmarker_*.task`` file (used when given, and
            needed with ``mediapipe`` 1.x).

    ``estimate(rgb, t)`` takes an ``[H, W, 3]`` uint8 RGB image and its time (s, increasing)
    and returns ``(keypoints [13, 2] pixels, confidence [13])``; no body: NaN and 0.
    """

    def __init__(self, model: str = "full", model_path: str | Path | None = None):
        if model not in MODELS:
            raise WebcamError(f"unknown pose model {model!r}; use one of {', '.join(MODELS)}")
        mp = _require_mediapipe()
        self.model = model
        self._legacy = None
        self._tasks = None
        self._mp = mp
        solutions = getattr(mp, "solutions", None)
        if model_path is None and solutions is not None and hasattr(solutions, "pose"):
            try:
                self._legacy = solutions.pose.Pose(model_complexity=MODELS[model], smooth_landmarks=True,
                                                   min_detection_confidence=0.5, min_tracking_confidence=0.5)
            except Exception as e:  # lite and heavy are downloaded on first use
                raise WebcamError(f"MediaPipe could not load its {model} pose model ({type(e).__name__}: {e}); "
                                  "only the full model is inside the mediapipe wheel, the others are downloaded "
                                  "on first use (needs internet): use --model full") from None
        else:
            if model_path is None or not Path(model_path).is_file():
                raise WebcamError(f"mediapipe {getattr(mp, '__version__', '?')} ships no pose model; install a "
                                  "mediapipe that does (pip install 'mediapipe>=0.10.9,<0.10.15'), or download a "
                                  "pose landmarker model (pose_landmarker_full.task, from Google's MediaPipe models "
                                  "page) and pass it with --model-path FILE")
            from mediapipe.tasks.python import BaseOptions, vision

            opts = vision.PoseLandmarkerOptions(base_options=BaseOptions(model_asset_path=str(model_path)),
                                                running_mode=vision.RunningMode.VIDEO)
            self._tasks = vision.PoseLandmarker.create_from_options(opts)
        self._last_ms = -1

    def estimate(self, rgb: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        h, w = rgb.shape[:2]
        if self._legacy is not None:
            res = self._legacy.process(np.ascontiguousarray(rgb))
            lms = res.pose_landmarks.landmark if res.pose_landmarks else None
        else:
            ms = max(int(t * 1000), self._last_ms + 1)
            self._last_ms = ms
            img = self._mp.Image(image_format=self._mp.ImageFormat.SRGB, data=np.ascontiguousarray(rgb))
            res = self._tasks.detect_for_video(img, ms)
            lms = res.pose_landmarks[0] if res.pose_landmarks else None
        kp = np.full((len(KEYPOINTS), 2), np.nan)
        conf = np.zeros(len(KEYPOINTS))
        if lms is not None:
            for j, i in enumerate(_INDEX):
                lm = lms[int(i)]
                kp[j] = (lm.x * w, lm.y * h)
                conf[j] = float(getattr(lm, "visibility", 1.0) or 0.0)
        return kp, conf

    def close(self) -> None:
        if self._legacy is not None:
            self._legacy.close()
        if self._tasks is not None:
            self._tasks.close()


def video_frames(source: int | str | Path, max_seconds: float | None = None) -> Iterator[tuple[float, np.ndarray]]:
    """``(t, rgb [H, W, 3] uint8)`` frames of a camera (an index) or a video file.

    A file's times are its frame times (frame index / its frame rate); a camera's are
    seconds since it opened. Stops at the end of a file or after ``max_seconds``."""
    cv2 = require_cv2()
    is_file = not isinstance(source, int)
    if is_file and not Path(source).is_file():
        raise WebcamError(f"{source}: no such video file")
    cap = cv2.VideoCapture(str(source) if is_file else source)
    if not cap.isOpened():
        raise WebcamError(f"{source}: cannot open the video (a format OpenCV reads: mp4, avi, y4m, ...)" if is_file
                          else f"cannot open camera {source} (is a webcam connected and free?)")
    fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0) if is_file else 0.0
    fps = fps if 1.0 <= fps <= 1000.0 else 30.0
    t0 = time.monotonic()
    i = 0
    try:
        while True:
            ok, frame = cap.read()
            if not ok:
                if i == 0 and is_file:
                    raise WebcamError(f"{source}: no frames could be read (an empty or unsupported video)")
                return
            t = i / fps if is_file else time.monotonic() - t0
            if max_seconds is not None and t > max_seconds:
                return
            yield t, cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
            i += 1
    finally:
        cap.release()
