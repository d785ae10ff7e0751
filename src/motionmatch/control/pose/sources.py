"""Where keypoints come from: files, motion capture through the virtual camera, a webcam.

* :func:`~.keypoints.load_keypoints`: recorded keypoint files (JSON / NPZ).
* :func:`render_bvh`: keypoints of a BVH clip filmed by the virtual camera
  (:mod:`.render`), e.g. to make test streams (``motionmatch pose render``).
* :class:`WebcamSource`: live 2D keypoints from a webcam or a video file through
  MediaPipe Pose (:mod:`.estimator`), the optional ``webcam`` extra: ``pip install
  'motionmatch[webcam]'``. Which models work offline depends on the mediapipe wheel
  (see :mod:`.estimator`). Frames are read unmirrored, so the performer's left shoulder
  appears on the image's right when they face the camera, as the classifiers expect.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from motionmatch.control.pose.estimator import PoseEstimator, WebcamError, require_cv2, video_frames
from motionmatch.control.pose.keypoints import KEYPOINTS, KeypointStream
from motionmatch.control.pose.render import RenderSettings, render_motion

__all__ = ["WebcamError", "WebcamSource", "record", "render_bvh"]


def render_bvh(path: str | Path, azimuth: float = 0.0, settings: RenderSettings | None = None, seed: int = 0,
               mirrored: bool = False, label: bool = True, units: str | float = "auto",
               up: str = "y") -> KeypointStream:
    """2D keypoints of a BVH clip filmed from ``azimuth`` degrees (0: in front of the
    performer). With ``label``, per-frame commands from the labelling rules are attached
    (:mod:`.labels`; clip tags from the file name). ``units`` and ``up``: how the file is
    read (:func:`~motionmatch.anim.load_bvh`)."""
    from motionmatch.anim import load_bvh
    from motionmatch.anim.resample import resample
    from motionmatch.control.pose.labels import label_frames, motion_facts
    from motionmatch.control.pose.render import mirror_keypoints, render_keypoints, world_keypoints
    from motionmatch.datasets import tags_from_name

    s = settings or RenderSettings()
    m = load_bvh(path, units=units, up_axis=up)
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
    """Live keypoints from a camera or a video file through :class:`~.estimator.PoseEstimator`.
    Iterate to get ``(t, keypoints [13, 2], confidence [13])`` per frame, ``t`` in seconds
    (a file's frame times; a camera's since it opened), keypoints in pixels of the raw
    image (x right, y down) named :data:`~.keypoints.KEYPOINTS`.

    Args:
        camera: OpenCV camera index or video file.
        model: ``"lite"``, ``"full"`` or ``"heavy"`` (see :mod:`.estimator` for which ship).
        model_path: a MediaPipe Tasks ``pose_landmarker_*.task`` file.
        max_seconds: stop after this long.
    """

    names = KEYPOINTS

    def __init__(self, camera: int | str = 0, model: str = "full", model_path: str | Path | None = None,
                 max_seconds: float | None = None):
        require_cv2()
        self.estimator = PoseEstimator(model, model_path)
        self._frames = video_frames(camera, max_seconds)
        self.image_size: tuple[int, int] | None = None

    def close(self) -> None:
        self._frames.close()
        self.estimator.close()

    def __enter__(self) -> WebcamSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def read(self) -> tuple[float, np.ndarray, np.ndarray] | None:
        """The next frame's ``(t, keypoints, confidence)``; ``None`` at the end of a video."""
        nxt = next(self._frames, None)
        if nxt is None:
            return None
        t, rgb = nxt
        self.image_size = (int(rgb.shape[1]), int(rgb.shape[0]))
        kp, conf = self.estimator.estimate(rgb, t)
        return t, kp, conf

    def __iter__(self) -> Iterator[tuple[float, np.ndarray, np.ndarray]]:
        while True:
            r = self.read()
            if r is None:
                return
            yield r


def record(source, seconds: float | None, label: str | None = None) -> KeypointStream:
    """Record ``seconds`` (``None``: until the source ends) of ``(t, keypoints, confidence)`` frames from ``source`` (e.g. a
    :class:`WebcamSource`) into a stream, every frame labelled ``label``."""
    ts, ks, cs = [], [], []
    for t, kp, conf in source:
        ts.append(t)
        ks.append(kp)
        cs.append(conf)
        if seconds is not None and t - ts[0] >= seconds:
            break
    if not ts:
        raise WebcamError("no frames were read from the source")
    labels = None if label is None else np.full(len(ts), label)
    return KeypointStream(np.asarray(ts), np.stack(ks), KEYPOINTS, np.stack(cs), True,
                          getattr(source, "image_size", None), labels,
                          {"source": type(source).__name__})
