"""The viewer's pose-command input: a recorded keypoint file or webcam keypoints drive the
selected character.

A :class:`ViewerPoseSource` is made per ``pose_source`` message:

* ``kind="file"``: a keypoint file (JSON/NPZ, :func:`~motionmatch.control.pose.keypoints.load_keypoints`)
  from the viewer's data folders is played back in simulation time (it pauses with the
  session), from its first frame to its last;
* ``kind="webcam"``: the page sends one frame of keypoints at a time (``pose_keypoints``:
  ``[[x, y, score], ...]`` in the order of :data:`~motionmatch.control.pose.keypoints.KEYPOINTS`,
  image coordinates of the raw, unmirrored camera image, y down), passed to
  :meth:`ViewerPoseSource.push`: the page's "Use camera" runs MediaPipe's PoseLandmarker
  in the browser (``web/src/camera.js``), or any other program sends them. The first
  :data:`~motionmatch.control.pose.calibrate.CALIBRATION_S` seconds calibrate
  (:mod:`motionmatch.control.pose.calibrate`: the performer stands still, facing the
  camera); later frames are corrected by the calibration before they are classified.
  ``status()["intent_ms"]`` (``"intent_ms_p95"``) is the median (95th percentile) time from
  a frame's arrival to the intent it produced, over the last 90 frames (the server's part
  of the camera-to-intent latency). The frames that came since the session's last tick are
  classified together (:meth:`~motionmatch.control.pose.classify.StreamingClassifier.push_many`),
  so a session slowed down by a loaded machine catches up instead of falling behind.

Either way the frames go through a :class:`~motionmatch.control.pose.classify.StreamingClassifier`
(the default classifier, :func:`~motionmatch.control.pose.default.default_classifier`,
trained from the shared motion capture on first use and cached; loaded on a worker
thread so the session never stalls), and the current command becomes an intent through
:class:`~motionmatch.control.pose.commands.CommandMapper` (directions relative to the
viewer's camera, like the keys). Until the classifier is ready, or after the recording
ends, the source gives no intent and the keyboard drives the character.
:meth:`ViewerPoseSource.status` is what the page's pose panel shows. Each change of command is
kept at the time of the frame that made it, in seconds of the camera's (the recording's)
clock since its first frame: the last ones in ``status()["history"]``, all of them in
:attr:`ViewerPoseSource.timeline`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path

import numpy as np

from motionmatch.control.pose.calibrate import CALIBRATION_S, Calibration, CalibrationError, Calibrator
from motionmatch.control.pose.classify import PoseClassifier, StreamingClassifier
from motionmatch.control.pose.commands import CommandMapper
from motionmatch.control.pose.keypoints import KEYPOINTS, KeypointError, KeypointStream, load_keypoints, standing_pose
from motionmatch.runtime.inputs import IDLE, InputSource, KeyboardInput, Want

__all__ = ["ClassifierLoader", "ViewerPoseSource", "close_loader", "set_classifier"]


class ClassifierLoader:
    """Loads the pose classifier once per process, on a worker thread.

    With the default classifier cached, that is the one. On first use (nothing cached) it
    trains the quick classifier (:func:`~motionmatch.control.pose.firstuse.quick_classifier`,
    seconds), hands it out at once, then trains the default one in a low-priority
    background process (:class:`~motionmatch.control.pose.firstuse.BackgroundTraining`)
    and hands that out when it is done: live streams switch to it
    (:meth:`~motionmatch.control.pose.classify.StreamingClassifier.use`).
    :attr:`description` says which one is in use (the page shows it).

    ``get()`` returns the classifier to use now, or ``None`` while none is ready;
    ``error`` holds why loading failed (e.g. no motion capture to train from and nothing
    cached). ``root``, ``cache_dir`` and ``config``: the motion capture, the cache and the
    training configuration (default ``$MOTIONMATCH_DATA``, ``$MOTIONMATCH_CACHE/pose`` and
    the default one)."""

    POLL_S = 2.0

    def __init__(self, root: Path | None = None, cache_dir: Path | None = None, config=None) -> None:
        self.root = root
        self.cache_dir = cache_dir
        self.config = config
        self._lock = threading.Lock()
        self._custom: PoseClassifier | None = None
        self._custom_description = ""
        self._clf: PoseClassifier | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self.background = None  # the background training, while there is one
        self.error: str | None = None
        self._description = "default (improved) classifier"
        self.started_at: float | None = None      # monotonic time of the first get()
        self.ready_s: dict[str, float] = {}       # seconds from the first get() to each classifier in use

    @property
    def description(self) -> str:
        with self._lock:
            return self._custom_description if self._custom is not None else self._description

    def set(self, classifier: PoseClassifier | None, description: str = "custom classifier") -> None:
        """Use ``classifier`` (``None``: the loader's own again)."""
        with self._lock:
            self._custom = classifier
            self._custom_description = description
            if classifier is not None:
                self.error = None

    def _offer(self, closing: threading.Event, clf: PoseClassifier, name: str, description: str) -> None:
        _warm_up(clf)
        with self._lock:
            if closing.is_set():      # closed meanwhile: this load's results are not wanted
                return
            self._clf = clf
            self._description = description
            self.ready_s[name] = round(time.monotonic() - self.started_at, 2)

    def _load(self, closing: threading.Event) -> None:
        try:
            from motionmatch.control.pose import default as d

            root = d.resolve_root(self.root)
            pair = d.cached_classifiers(root, self.config, self.cache_dir)
            if pair is not None:
                self._offer(closing, pair[1], "default", "default (improved) classifier")
                return
            from motionmatch.control.pose.firstuse import BackgroundTraining, quick_classifier

            with self._lock:
                self._description = ("first use, nothing trained yet: training a quick classifier from the motion "
                                     "capture (about half a minute)")
            t0 = time.monotonic()
            quick = quick_classifier(root, self.config, cache_dir=self.cache_dir)
            self._offer(closing, quick, "quick", f"quick classifier (ready in {time.monotonic() - t0:.0f} s; the default "
                        "one is training in the background, about ten minutes, and takes over when done)")
            if closing.is_set():
                return
            bg = BackgroundTraining(root, self.cache_dir, config=self.config)
            self.background = bg
            bg.start()
            pair = None
            while pair is None and bg.poll() is None:
                if closing.wait(self.POLL_S):
                    bg.stop()
                    return
                # (another process, e.g. `motionmatch pose eval`, may cache it first)
                pair = d.cached_classifiers(root, self.config, self.cache_dir)
            bg.stop()
            pair = pair or d.cached_classifiers(root, self.config, self.cache_dir)
            if pair is None:
                with self._lock:
                    self._description = (f"quick classifier (training the default one in the background failed: "
                                         f"{bg.error()}; `motionmatch pose eval` trains it)")
                return
            self._offer(closing, pair[1], "default", f"default (improved) classifier: trained in the background in "
                        f"{(time.monotonic() - bg.started_at) / 60:.1f} min, now in use instead of the quick one")
        except Exception as e:
            with self._lock:
                if closing.is_set():
                    return
                self.error = (f"the default pose classifier could not be loaded or trained: {type(e).__name__}: {e} "
                              "(it is trained from the motion capture in $MOTIONMATCH_DATA on first use; "
                              "`motionmatch pose eval` trains and caches it)")

    def get(self) -> PoseClassifier | None:
        with self._lock:
            if self._custom is not None:
                return self._custom
            if self._clf is not None or self.error is not None:
                return self._clf
            if self._thread is None:
                self.started_at = time.monotonic()
                self._closing = threading.Event()
                self._thread = threading.Thread(target=self._load, args=(self._closing,), name="pose-classifier",
                                                daemon=True)
                self._thread.start()
            return None

    def close(self) -> None:
        """Stop the background training (if any) and forget the loaded classifiers; a later
        ``get()`` starts again (from the cache, when the training got that far)."""
        self._closing.set()
        bg = self.background
        if bg is not None:
            bg.stop()
        if self._thread is not None:
            self._thread.join(30)
        with self._lock:
            self._thread, self._clf, self.error, self.background = None, None, None, None
            self._description = "default (improved) classifier"
            self.ready_s = {}


_loader = ClassifierLoader()


def _warm_up(clf: PoseClassifier) -> None:
    """Classify a second of a standing figure, here on the loader's thread: the first
    classification compiles the classifier's kernels (Numba), which must not happen in a
    session's 60 Hz loop."""
    stream = StreamingClassifier(clf, KEYPOINTS, True)
    pose = standing_pose()
    for i in range(30):
        stream.push(i / 30.0, pose + np.array([0.5 * np.sin(i / 5.0), 0.0]), None)


def set_classifier(classifier: PoseClassifier | None, description: str = "custom classifier") -> None:
    """Use ``classifier`` for every viewer pose source from now on (``None``: the default)."""
    _loader.set(classifier, description)


def close_loader() -> None:
    """Stop the process-wide loader's background training (the viewer closes)."""
    _loader.close()


class ViewerPoseSource(InputSource):
    """One pose input of a viewer session (see the module doc): the
    :class:`~motionmatch.runtime.inputs.InputSource` of the character it drives.

    Args:
        kind: ``"file"`` or ``"webcam"``.
        path: the keypoint file (``kind="file"``).
        loader: where the classifier comes from (default: the process-wide one).
        fallback: the input that drives while there is no command (the character's keys;
            their camera yaw also turns the commands' directions).
        calibrate_s: seconds of stand-still calibration at the start of a webcam (0: none).
    """

    #: webcam frames kept while waiting for the session's next tick (older ones are dropped)
    MAX_PENDING = 120

    def __init__(self, kind: str, path: Path | None = None, loader: ClassifierLoader | None = None,
                 fallback: KeyboardInput | None = None, calibrate_s: float = CALIBRATION_S):
        if kind not in ("file", "webcam"):
            raise ValueError(f"pose source kind must be 'file' or 'webcam', got {kind!r}")
        self.kind = kind
        self.fallback = fallback
        self.loader = loader or _loader
        self.path = None if path is None else Path(path)
        self.stream: KeypointStream | None = None
        if kind == "file":
            if self.path is None:
                raise ValueError("choose a keypoint file (pose_source with kind 'file' needs 'file')")
            s = load_keypoints(self.path).canonical()
            if len(s) < 2:
                raise KeypointError(f"{self.path.name}: a recording needs at least 2 frames, got {len(s)}")
            self.stream = s
        self.names = KEYPOINTS
        self.y_down = True if self.stream is None else self.stream.y_down
        self.t = 0.0                # seconds of the recording played (file) / since the first frame (webcam)
        self._next = 0              # next recorded frame to feed
        self._clf_stream: StreamingClassifier | None = None
        self.mapper: CommandMapper | None = None
        self.command = ""
        self.history: list[tuple[float, str]] = []  # (time, command) at each change, the last 20
        # every change: (seconds of the camera's / recording's clock since its first frame, command)
        self.timeline: deque[tuple[float, str]] = deque(maxlen=2000)
        self._t_first: float | None = None if self.stream is None else float(self.stream.times[0])
        self.frames_in = 0          # frames classified
        self.frames_received = 0    # webcam frames pushed (calibration and dropped ones included)
        self.dropped = 0
        self._pending: list[tuple[float, np.ndarray, np.ndarray, float]] = []
        self.calibrate_s = float(calibrate_s)
        self.calibrator = Calibrator(self.calibrate_s) if kind == "webcam" and self.calibrate_s > 0 else None
        self.calibration: Calibration | None = None
        self.calibration_error: str | None = None
        self._delays: deque[float] = deque(maxlen=90)

    # ------------------------------------------------------------------ input
    def push(self, keypoints: np.ndarray, t: float | None = None) -> None:
        """One webcam frame: ``keypoints [K, 2|3]`` (x, y[, score]) in :data:`KEYPOINTS`
        order, at page time ``t`` seconds (``None``: 1/30 s after the previous frame)."""
        if self.kind != "webcam":
            raise ValueError("this pose source plays a recorded file; switch to 'webcam' to send keypoints")
        self.frames_received += 1
        kp = np.asarray(keypoints, dtype=np.float64)
        if kp.ndim != 2 or kp.shape[0] != len(KEYPOINTS) or kp.shape[1] not in (2, 3):
            raise KeypointError(f"a webcam frame must be [{len(KEYPOINTS)}, 2|3] keypoints in the order "
                                f"{', '.join(KEYPOINTS)}; got {list(kp.shape)}")
        conf = kp[:, 2].copy() if kp.shape[1] == 3 else np.ones(len(KEYPOINTS))
        if t is None:
            t = (self._pending[-1][0] if self._pending else self.t) + 1.0 / 30.0
        if self._pending and t <= self._pending[-1][0]:
            self.dropped += 1
            return
        if self._t_first is None:
            self._t_first = float(t)
        self._pending.append((float(t), kp[:, :2], conf, time.monotonic()))
        if len(self._pending) > self.MAX_PENDING:   # the session has stalled for seconds: keep the newest
            self.dropped += len(self._pending) - self.MAX_PENDING
            del self._pending[:-self.MAX_PENDING]

    def _classifier_stream(self) -> StreamingClassifier | None:
        clf = self.loader.get()
        if self._clf_stream is None:
            if clf is None:
                return None
            self._clf_stream = StreamingClassifier(clf, self.names, self.y_down)
        elif clf is not None and clf is not self._clf_stream.clf:
            self._clf_stream.use(clf)     # the better classifier is ready: the stream goes on with it
        return self._clf_stream

    def _calibrate(self, t: float, kp: np.ndarray, conf: np.ndarray) -> None:
        """One frame of the stand-still step."""
        if not self.calibrator.push(t, kp, conf):
            return
        try:
            self.calibration = self.calibrator.result()
            self.calibration_error = None
        except CalibrationError as e:  # try again with the next frames
            self.calibration_error = str(e)
            self.calibrator = Calibrator(self.calibrate_s)

    def _feed(self, dt: float) -> None:
        if self.stream is None and self.calibrator is not None and self.calibration is None:
            while self._pending and self.calibration is None:
                self._calibrate(*self._pending.pop(0)[:3])
        cs = self._classifier_stream()
        if cs is None:
            return
        if self.stream is not None:
            s = self.stream
            self.t += dt
            end = s.times[0] + self.t
            i = self._next
            while self._next < len(s) and s.times[self._next] <= end + 1e-9:
                self._next += 1
            if self._next > i:
                cs.push_many(s.times[i:self._next], s.keypoints[i:self._next, :, :2],
                             None if s.confidence is None else s.confidence[i:self._next])
                self.frames_in += self._next - i
        else:
            self.t += dt
            received = []
            pending, self._pending = self._pending, []
            if pending:
                # every frame that came since the last tick, classified together: the cost of a
                # tick hardly grows with the frames it takes, so a session that fell behind (a
                # loaded machine) catches up instead of falling further behind
                kps = np.stack([kp for _, kp, _, _ in pending])
                if self.calibration is not None:
                    kps = self.calibration.apply(kps)
                try:
                    cs.push_many([t for t, _, _, _ in pending], kps, [c for _, _, c, _ in pending])
                    self.frames_in += len(pending)
                    received = [at for _, _, _, at in pending]
                except KeypointError:
                    emitted = []
                    for (t, _, conf, at), kp in zip(pending, kps):
                        try:
                            cs.push(t, kp, conf)
                            emitted += cs.emitted
                            self.frames_in += 1
                            received.append(at)
                        except KeypointError:
                            self.dropped += 1
                    cs.emitted = emitted
            now = time.monotonic()
            self._delays.extend(now - at for at in received)
        # each change at the time of the frame that made it (a tick may classify several)
        emitted, cs.emitted = cs.emitted, []
        for t, c in emitted:
            cmd = cs.clf.commands[c] if c >= 0 else ""
            if cmd != self.command:
                self.command = cmd
                self.timeline.append((round(t - self._t_first, 3), cmd))
                self.history.append(self.timeline[-1])
                del self.history[:-20]

    @property
    def finished(self) -> bool:
        return self.stream is not None and self._next >= len(self.stream)

    def intent(self, agent, t: float, dt: float) -> Want:
        """The intent of the current pose command (none yet, or the recording has ended:
        the fallback input, the keys, drives)."""
        self._feed(dt)
        if self.finished or not self.command:
            return self.fallback.intent(agent, t, dt) if self.fallback is not None else IDLE
        if self.mapper is None:
            self.mapper = CommandMapper(agent.ctrl.gaits)
        self.mapper.camera_yaw = float(self.fallback.keyboard.camera_yaw) if self.fallback is not None else 0.0
        return Want(self.mapper.update(self.command, dt))

    def status(self) -> dict:
        """For the page: state (``loading``, ``waiting``, ``running``, ``finished``,
        ``error``), the current command, progress and the last command changes."""
        self._classifier_stream()  # ready as soon as the classifier is
        if self.loader.error is not None and self._clf_stream is None:
            state = "error"
        elif self._clf_stream is None:
            state = "loading"
        elif self.finished:
            state = "finished"
        elif self.calibrator is not None and self.calibration is None and self.calibrator.elapsed > 0:
            state = "calibrating"
        elif self.kind == "webcam" and self.frames_in == 0:
            state = "waiting"
        else:
            state = "running"
        out = {"kind": self.kind, "state": state, "command": self.command, "t": round(self.t, 2),
               "frames": self.frames_in, "received": self.frames_received, "classifier": self.loader.description,
               "history": [[t, c] for t, c in self.history[-6:]]}
        if self.stream is not None:
            out["file"] = self.path.name if self.path is not None else ""
            out["duration"] = round(float(self.stream.duration), 2)
        if state == "error":
            out["message"] = self.loader.error
        if state == "loading":
            out["message"] = f"pose classifier: {out['classifier']}"
        if state == "waiting":
            out["message"] = ("waiting for keypoints: press Use camera (the page's pose estimator), or send "
                              "pose_keypoints messages (13 COCO body keypoints, x, y, score)")
        if state == "calibrating":
            out["message"] = (f"calibrating: stand still, facing the camera ({self.calibrator.elapsed:.1f} of "
                              f"{self.calibrate_s:g} s)" + (f"; {self.calibration_error}" if self.calibration_error
                                                           else ""))
        if self.calibration is not None:
            out["calibration"] = self.calibration.to_dict()
        if self._delays:
            out["intent_ms"] = round(1000.0 * float(np.median(self._delays)), 1)
            out["intent_ms_p95"] = round(1000.0 * float(np.percentile(self._delays, 95)), 1)
        if self.dropped:
            out["dropped"] = self.dropped
        cs = self._clf_stream
        if cs is not None and cs.last_proba is not None:
            top = np.argsort(cs.last_proba)[::-1][:3]
            out["top"] = [[cs.clf.commands[i], round(float(cs.last_proba[i]), 3)] for i in top]
        return out
