"""Body keypoints over time: the keypoint set, :class:`KeypointStream` and its files.

The keypoint set is COCO's 17 body keypoints without the eyes and ears (13, in COCO's
order): :data:`KEYPOINTS`. Streams from other estimators are mapped by name
(:func:`canonical_name` understands COCO, MediaPipe Pose and OpenPose spellings:
``left_shoulder``, ``LShoulder``, ``shoulder_l``, ``RIGHT_KNEE``, ...).

Coordinates. 2D keypoints are image coordinates of the raw (not mirrored) camera image:
``x`` to the right and, by default, ``y`` down (``y_down=True``, what pose estimators
produce), in pixels or any other unit (only ratios matter after normalisation). 3D
keypoints are camera coordinates ``x`` right, ``y`` down, ``z`` away from the camera; the
classifiers use their ``x, y``. A missing keypoint is ``NaN`` (``null`` in JSON) or has
confidence 0.

Files (:func:`load_keypoints`, :func:`save_keypoints`), JSON or NPZ with the same fields:

==============  ==================  ==========================================================
field           shape / type        meaning
==============  ==================  ==========================================================
``times``       ``[T]`` float       seconds, strictly increasing (any rate, gaps allowed)
``keypoints``   ``[T, K, 2|3]``     coordinates as above; JSON ``null`` / NPZ ``NaN`` = missing
``names``       ``[K]`` str         keypoint names (any set containing hips and shoulders)
``confidence``  ``[T, K]`` float    optional, in ``[0, 1]``; below 0.2 counts as missing
``y_down``      bool                optional, default ``true``; ``false`` for y-up data
``image_size``  ``[2]`` int         optional ``[width, height]``, informational
``labels``      ``[T]`` str         optional per-frame command (recordings, rendered data);
                                    ``""`` = unlabelled
``meta``        object              optional, free JSON (NPZ: ``meta_json``, a JSON string)
==============  ==================  ==========================================================

JSON files carry ``"format": "motionmatch-keypoints", "version": 1``. NPZ files are
read with ``allow_pickle=False``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from motionmatch._files import atomic_write, not_npz
from motionmatch._limits import loads_json, read_json, read_npz
from motionmatch.errors import MotionMatchError

MAX_KEYPOINT_BYTES = 256 * 2**20
"""Uncompressed bytes of a keypoint ``.npz`` file's arrays: 256 MiB, about 20 hours of 13
keypoints in 3D at 30 fps (JSON files: :data:`motionmatch._limits.MAX_JSON_BYTES`)."""

#: The keypoints the pose pipeline uses (COCO order, without eyes and ears).
KEYPOINTS: tuple[str, ...] = (
    "nose",
    "left_shoulder", "right_shoulder",
    "left_elbow", "right_elbow",
    "left_wrist", "right_wrist",
    "left_hip", "right_hip",
    "left_knee", "right_knee",
    "left_ankle", "right_ankle",
)
#: Index of each keypoint in :data:`KEYPOINTS`.
KP = {name: i for i, name in enumerate(KEYPOINTS)}
#: The left/right partner of each keypoint (index permutation used for mirroring).
MIRROR = np.array([KP[n.replace("left", "@").replace("right", "left").replace("@", "right")] for n in KEYPOINTS])



def standing_pose(scale: float = 100.0, centre=(320.0, 240.0)) -> np.ndarray:
    """``[13, 2]`` image keypoints (pixels, y down) of a person standing, facing the
    camera, about ``3 * scale`` pixels tall around ``centre`` (tests, and warming up a
    classifier before the first real frame)."""
    p = np.zeros((len(KEYPOINTS), 2))
    # performer facing the camera: their left appears on the image's right (+x)
    table = {"nose": (0.0, -1.35), "left_shoulder": (0.4, -1.0), "right_shoulder": (-0.4, -1.0),
             "left_elbow": (0.5, -0.45), "right_elbow": (-0.5, -0.45), "left_wrist": (0.55, 0.05),
             "right_wrist": (-0.55, 0.05), "left_hip": (0.2, 0.0), "right_hip": (-0.2, 0.0),
             "left_knee": (0.22, 0.85), "right_knee": (-0.22, 0.85), "left_ankle": (0.22, 1.7),
             "right_ankle": (-0.22, 1.7)}
    for k, (x, y) in table.items():
        p[KP[k]] = (centre[0] + scale * x, centre[1] + scale * y)
    return p


#: COCO's 17 keypoint names (for writing COCO-ordered data).
COCO17: tuple[str, ...] = (
    "nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
    "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip",
    "left_knee", "right_knee", "left_ankle", "right_ankle",
)

FORMAT = "motionmatch-keypoints"
VERSION = 1
MIN_CONFIDENCE = 0.2

_PARTS = {
    "nose": "nose", "head": "nose",
    "shoulder": "shoulder", "elbow": "elbow", "wrist": "wrist", "hand": "wrist",
    "hip": "hip", "knee": "knee", "ankle": "ankle", "foot": "ankle",
}
_SIDE_WORDS = {"left": "left", "l": "left", "right": "right", "r": "right"}


class KeypointError(MotionMatchError, ValueError):
    """A keypoint stream or file is malformed (the message names the file and the fix)."""


def canonical_name(name: str) -> str | None:
    """The :data:`KEYPOINTS` name a keypoint name stands for, or ``None``.

    >>> canonical_name("LShoulder"), canonical_name("RIGHT_KNEE"), canonical_name("left_eye")
    ('left_shoulder', 'right_knee', None)
    """
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", str(name).strip())
    s = re.sub(r"^([LR])(?=[A-Z])", r"\1_", s)
    words = [w for w in re.split(r"[^a-z0-9]+", s.lower()) if w]
    side = part = None
    for w in words:
        if w in _SIDE_WORDS and side is None:
            side = _SIDE_WORDS[w]
        elif w in _PARTS and part is None:
            part = _PARTS[w]
        elif w in ("eye", "ear", "mouth", "index", "pinky", "thumb", "heel", "inner", "outer", "toe", "big", "small"):
            return None
    if part is None:
        return None
    if part == "nose":
        return "nose" if side is None else None
    if side is None:
        return None
    return f"{side}_{part}"


@dataclass(eq=False)
class KeypointStream:
    """Keypoints over time (see the module docstring for the conventions).

    Attributes:
        times: ``[T]`` seconds, strictly increasing.
        keypoints: ``[T, K, D]`` with ``D`` 2 or 3; ``NaN`` where missing.
        names: ``K`` keypoint names.
        confidence: ``[T, K]`` in ``[0, 1]`` or ``None`` (all present keypoints trusted).
        y_down: whether ``y`` points down (image convention).
        image_size: ``(width, height)`` or ``None``.
        labels: ``[T]`` per-frame command names (``""`` = none) or ``None``.
        meta: free JSON-serialisable information.
    """

    times: np.ndarray
    keypoints: np.ndarray
    names: tuple[str, ...] = KEYPOINTS
    confidence: np.ndarray | None = None
    y_down: bool = True
    image_size: tuple[int, int] | None = None
    labels: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.times = np.asarray(self.times, dtype=np.float64).reshape(-1)
        self.keypoints = np.asarray(self.keypoints, dtype=np.float64)
        self.names = tuple(str(n) for n in self.names)
        T = self.times.shape[0]
        if self.keypoints.ndim != 3 or self.keypoints.shape[0] != T or self.keypoints.shape[2] not in (2, 3):
            raise KeypointError(f"keypoints must have shape [T={T}, K, 2|3], got {list(self.keypoints.shape)}")
        if self.keypoints.shape[1] != len(self.names):
            raise KeypointError(f"{len(self.names)} names for {self.keypoints.shape[1]} keypoints per frame")
        if len(set(self.names)) != len(self.names):
            raise KeypointError(f"keypoint names must be unique, got {list(self.names)}")
        if T and not np.all(np.isfinite(self.times)):
            raise KeypointError("times must be finite seconds")
        if T > 1 and np.any(np.diff(self.times) <= 0):
            i = int(np.flatnonzero(np.diff(self.times) <= 0)[0])
            raise KeypointError(f"times must be strictly increasing (frame {i + 1}: {self.times[i + 1]} after "
                                f"{self.times[i]})")
        if np.any(np.isinf(self.keypoints)):
            raise KeypointError("keypoints contain infinite values (use NaN for missing keypoints)")
        if self.confidence is not None:
            self.confidence = np.asarray(self.confidence, dtype=np.float64)
            if self.confidence.shape != self.keypoints.shape[:2]:
                raise KeypointError(f"confidence must have shape [T, K] = {list(self.keypoints.shape[:2])}, "
                                    f"got {list(self.confidence.shape)}")
        if self.labels is not None:
            self.labels = np.asarray(["" if x is None else str(x) for x in np.asarray(self.labels).reshape(-1)],
                                     dtype=str)
            if self.labels.shape != (T,):
                raise KeypointError(f"labels must have one entry per frame ({T}), got {self.labels.shape[0]}")
        if self.image_size is not None:
            w, h = (int(v) for v in self.image_size)
            self.image_size = (w, h)
        self.y_down = bool(self.y_down)

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return self.times.shape[0]

    @property
    def dims(self) -> int:
        return int(self.keypoints.shape[2])

    @property
    def duration(self) -> float:
        return float(self.times[-1] - self.times[0]) if len(self) > 1 else 0.0

    @property
    def fps(self) -> float:
        """Median frame rate (Hz)."""
        return float(1.0 / np.median(np.diff(self.times))) if len(self) > 1 else 0.0

    def __repr__(self) -> str:
        return f"KeypointStream({len(self)} frames, {len(self.names)} keypoints x {self.dims}D, {self.duration:.2f} s)"

    def present(self) -> np.ndarray:
        """``[T, K]`` bool: finite and (if given) confident enough."""
        ok = np.all(np.isfinite(self.keypoints), axis=2)
        if self.confidence is not None:
            ok &= self.confidence >= MIN_CONFIDENCE
        return ok

    def __getitem__(self, frames) -> KeypointStream:
        """Frames ``frames`` (a slice or an index array) as a new stream."""
        idx = np.arange(len(self))[frames]
        return replace(self, times=self.times[idx], keypoints=self.keypoints[idx],
                       confidence=None if self.confidence is None else self.confidence[idx],
                       labels=None if self.labels is None else self.labels[idx], meta=dict(self.meta))

    def canonical(self) -> KeypointStream:
        """The stream on :data:`KEYPOINTS` (in that order, 2D or 3D as given), mapped by
        :func:`canonical_name`; keypoints it lacks are ``NaN``. Raises :class:`KeypointError`
        when hips or shoulders cannot be found."""
        if self.names == KEYPOINTS:
            return self
        src: dict[str, int] = {}
        for i, n in enumerate(self.names):
            c = canonical_name(n)
            if c is not None and c not in src:
                src[c] = i
        need = ("left_shoulder", "right_shoulder", "left_hip", "right_hip")
        missing = [n for n in need if n not in src]
        if missing:
            raise KeypointError(f"keypoints {missing} not found among names {list(self.names)}; name them "
                                f"like COCO ({', '.join(KEYPOINTS)})")
        T, _, D = self.keypoints.shape
        kp = np.full((T, len(KEYPOINTS), D), np.nan)
        conf = np.zeros((T, len(KEYPOINTS))) if self.confidence is not None else None
        for j, n in enumerate(KEYPOINTS):
            if n in src:
                kp[:, j] = self.keypoints[:, src[n]]
                if conf is not None:
                    conf[:, j] = self.confidence[:, src[n]]
        return replace(self, keypoints=kp, names=KEYPOINTS, confidence=conf, meta=dict(self.meta))

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict[str, Any]:
        kp = [[[None if not np.isfinite(v) else round(float(v), 5) for v in p] for p in f] for f in self.keypoints]
        out: dict[str, Any] = {"format": FORMAT, "version": VERSION, "names": list(self.names),
                               "times": [round(float(t), 6) for t in self.times], "keypoints": kp,
                               "y_down": self.y_down}
        if self.confidence is not None:
            out["confidence"] = np.round(self.confidence, 4).tolist()
        if self.image_size is not None:
            out["image_size"] = list(self.image_size)
        if self.labels is not None:
            out["labels"] = self.labels.tolist()
        if self.meta:
            out["meta"] = self.meta
        return out


def stream_from_dict(d: dict[str, Any], where: str = "<keypoints>") -> KeypointStream:
    """A :class:`KeypointStream` from the JSON structure of the module docstring."""
    if not isinstance(d, dict):
        raise KeypointError(f"{where}: expected a JSON object with times, keypoints and names")
    if d.get("format", FORMAT) != FORMAT:
        raise KeypointError(f"{where}: format {d.get('format')!r} is not {FORMAT!r}")
    if int(d.get("version", VERSION)) > VERSION:
        raise KeypointError(f"{where}: version {d.get('version')} is newer than this reader ({VERSION})")
    for k in ("times", "keypoints", "names"):
        if k not in d:
            raise KeypointError(f"{where}: missing field {k!r} (need times [T], keypoints [T, K, 2|3], names [K])")
    try:
        kp = np.array([[[np.nan if v is None else v for v in p] if p is not None else [np.nan, np.nan]
                        for p in f] for f in d["keypoints"]], dtype=np.float64)
        if kp.size == 0:
            kp = kp.reshape(0, len(d["names"]), 2)
        return KeypointStream(
            times=np.asarray(d["times"], dtype=np.float64), keypoints=kp, names=tuple(d["names"]),
            confidence=None if d.get("confidence") is None else np.asarray(d["confidence"], dtype=np.float64),
            y_down=bool(d.get("y_down", True)),
            image_size=None if d.get("image_size") is None else tuple(d["image_size"]),
            labels=None if d.get("labels") is None else np.asarray(d["labels"], dtype=str),
            meta=dict(d.get("meta") or {}),
        )
    except KeypointError as e:
        raise KeypointError(f"{where}: {e}") from None
    except (TypeError, ValueError) as e:
        raise KeypointError(f"{where}: cannot read keypoints ({e}); expected numbers or null in "
                            "keypoints[T][K][2|3]") from None


def load_keypoints(path: str | Path) -> KeypointStream:
    """Read a keypoint file (``.json`` or ``.npz``, see the module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise KeypointError(f"{p}: no such keypoint file")
    if p.suffix.lower() == ".json":
        return stream_from_dict(read_json(p, "keypoint", error=KeypointError), str(p))
    if p.suffix.lower() == ".npz":
        kind = not_npz(p)
        if kind:
            raise KeypointError(f"{p}: {kind}; a keypoint .npz file holds times, keypoints and names")
        d = read_npz(p, "keypoint", "a keypoint .npz file holds times, keypoints and names",
                     max_bytes=MAX_KEYPOINT_BYTES, error=KeypointError)
        for k in ("times", "keypoints", "names"):
            if k not in d:
                raise KeypointError(f"{p}: missing array {k!r} (need times [T], keypoints [T, K, 2|3], names [K])")
        meta = loads_json(str(d["meta_json"]), f"{p}: meta_json", error=KeypointError) if "meta_json" in d else {}
        if not isinstance(meta, dict):
            raise KeypointError(f"{p}: meta_json: expected a JSON object")
        try:
            return KeypointStream(
                times=d["times"], keypoints=d["keypoints"], names=tuple(str(n) for n in d["names"]),
                confidence=d.get("confidence"), y_down=bool(d["y_down"]) if "y_down" in d else True,
                image_size=tuple(int(v) for v in d["image_size"]) if "image_size" in d else None,
                labels=d.get("labels"), meta=meta,
            )
        except KeypointError as e:
            raise KeypointError(f"{p}: {e}") from None
    raise KeypointError(f"{p}: unknown keypoint file type {p.suffix!r}; use .json or .npz")


def save_keypoints(stream: KeypointStream, path: str | Path) -> Path:
    """Write ``stream`` as ``.json`` or ``.npz`` (atomically); returns the path."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        with atomic_write(p, "w") as f:
            json.dump(stream.to_dict(), f, separators=(",", ":"))
        return p
    if p.suffix.lower() == ".npz":
        arrays: dict[str, np.ndarray] = {"times": stream.times, "keypoints": stream.keypoints,
                                         "names": np.asarray(stream.names, dtype=str),
                                         "y_down": np.asarray(stream.y_down)}
        if stream.confidence is not None:
            arrays["confidence"] = stream.confidence
        if stream.image_size is not None:
            arrays["image_size"] = np.asarray(stream.image_size, dtype=np.int64)
        if stream.labels is not None:
            arrays["labels"] = stream.labels
        if stream.meta:
            arrays["meta_json"] = np.asarray(json.dumps(stream.meta))
        with atomic_write(p, "wb") as f:
            np.savez_compressed(f, **arrays)
        return p
    raise KeypointError(f"{p}: unknown keypoint file type {p.suffix!r}; use .json or .npz")


def concatenate_streams(streams: list[KeypointStream], gap: float | None = None) -> KeypointStream:
    """Streams one after another (same names); each later stream's times are shifted to
    start ``gap`` seconds (default: one median frame) after the previous one ends."""
    if not streams:
        raise KeypointError("nothing to concatenate")
    names = streams[0].names
    out_t, out_k, out_c, out_l = [], [], [], []
    t0 = 0.0
    for s in streams:
        if s.names != names:
            raise KeypointError("cannot concatenate streams with different keypoint names")
        dt = gap if gap is not None else (1.0 / s.fps if len(s) > 1 else 1 / 30)
        shift = (t0 - s.times[0]) if out_t else -s.times[0]
        out_t.append(s.times + shift)
        out_k.append(s.keypoints)
        out_c.append(s.confidence if s.confidence is not None else np.ones(s.keypoints.shape[:2]))
        out_l.append(s.labels if s.labels is not None else np.full(len(s), "", dtype=str))
        t0 = out_t[-1][-1] + dt
    any_conf = any(s.confidence is not None for s in streams)
    any_lab = any(s.labels is not None for s in streams)
    return KeypointStream(np.concatenate(out_t), np.concatenate(out_k), names,
                          np.concatenate(out_c) if any_conf else None, streams[0].y_down, streams[0].image_size,
                          np.concatenate(out_l) if any_lab else None, dict(streams[0].meta))
