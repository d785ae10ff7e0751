"""Pose-command classifiers: the paper's kNN baseline and an improved temporal classifier.

Both take a :class:`~.keypoints.KeypointStream`, resample it to their rate (30 Hz),
normalise it (:mod:`.normalize`) and classify every frame from the window of poses
ending there (:mod:`.features`); a smoother then turns the per-frame labels into the
emitted command:

* :class:`KNNPoseClassifier`: the paper's scheme (Sec. 3.4.3): 10 consecutive poses
  concatenated, a k-nearest-neighbour vote (scikit-learn's ``KNeighborsClassifier``,
  ``k = 5``, Euclidean), and the most frequent label of the last 5 frames
  (:class:`MajorityVote`).
* :class:`MLPPoseClassifier` (the improved one): velocity, motion-energy, 0.67 s
  context and 2 s long-context features (motion energy, pose spread, the hips' vertical
  motion and path straightness, frequency bands of the hips' and limbs' oscillations;
  :func:`~.features.motion_features`), an ensemble of small neural networks (two hidden
  ReLU layers, trained with scikit-learn's ``MLPClassifier``, evaluated here in numpy)
  blended with gradient-boosted trees (scikit-learn's ``HistGradientBoostingClassifier``,
  kept as arrays: :mod:`.trees`), both trained also on performances that switch
  from one motion to another (so it learns to follow changes quickly), and a
  hidden-Markov forward filter over the commands (:class:`HMMFilter`) that needs
  evidence to switch but switches as soon as the evidence is there; its settings are
  chosen on validation data (:mod:`.tune`).

Models are saved as ``.npz`` (no pickle) with :meth:`save` and read with
:func:`load_classifier`. Training needs scikit-learn (``pip install 'motionmatch[pose]'``);
predicting with a saved improved classifier needs only numpy and numba.
"""

from __future__ import annotations

import contextlib
import functools
import json
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from motionmatch._files import atomic_write, not_npz
from motionmatch._limits import loads_json, read_npz
from motionmatch.control.pose.features import (
    CONTEXT,
    LONG,
    WINDOW,
    mirror_motion_features,
    motion_features,
    pose_window_features,
)
from motionmatch.control.pose.keypoints import KeypointError, KeypointStream
from motionmatch.control.pose.labels import COMMANDS
from motionmatch.control.pose.normalize import NormalizedPoses, normalize_stream
from motionmatch.control.pose.trees import BoostedTrees
from motionmatch.errors import MotionMatchError

RATE = 30.0
#: Longest gap between two frames that resampling interpolates across (s); across a longer
#: one the resampled frames are missing and the track starts again.
MAX_INTERPOLATED_GAP_S = 0.25
MODEL_FORMAT = "motionmatch-pose-classifier"
MODEL_VERSION = 2  # 2: the improved classifier may hold boosted trees (a version-1 reader would ignore them)


class ClassifierError(MotionMatchError, ValueError):
    """A classifier file is malformed or a classifier is used wrongly."""


def require_sklearn():
    """Import scikit-learn or fail with the extra to install."""
    try:
        import sklearn
    except ImportError:  # pragma: no cover - depends on the environment
        raise MotionMatchError("training pose classifiers needs scikit-learn: pip install 'motionmatch[pose]'") from None
    return sklearn


# ----------------------------------------------------------------------------- resampling
def resample_stream(stream: KeypointStream, fps: float = RATE) -> KeypointStream:
    """The stream at ``fps`` (times ``t0 + k / fps``), keypoints linearly interpolated
    between neighbouring frames less than 0.25 s apart (missing across longer gaps)."""
    if len(stream) == 0:
        return stream
    if len(stream) > 1 and abs(stream.fps - fps) < 1e-3 * fps and np.allclose(np.diff(stream.times), 1 / fps, atol=1e-4):
        return stream
    t0, t1 = stream.times[0], stream.times[-1]
    n = int(np.floor((t1 - t0) * fps + 1e-6)) + 1
    t = t0 + np.arange(n) / fps
    j = np.clip(np.searchsorted(stream.times, t, side="right") - 1, 0, len(stream) - 1)
    j1 = np.minimum(j + 1, len(stream) - 1)
    span = stream.times[j1] - stream.times[j]
    a = np.where(span > 0, (t - stream.times[j]) / np.where(span > 0, span, 1.0), 0.0)
    a = np.clip(a, 0.0, 1.0)
    kp = stream.keypoints
    out = (1 - a)[:, None, None] * kp[j] + a[:, None, None] * kp[j1]
    exact = np.isclose(t, stream.times[j], atol=1e-6)
    out[exact] = kp[j[exact]]
    gap = (span > MAX_INTERPOLATED_GAP_S) & ~exact
    out[gap] = np.nan
    conf = None
    if stream.confidence is not None:
        conf = np.minimum(stream.confidence[j], stream.confidence[j1])
        conf[exact] = stream.confidence[j[exact]]
    labels = None if stream.labels is None else stream.labels[np.where(a < 0.5, j, j1)]
    return KeypointStream(t, out, stream.names, conf, stream.y_down, stream.image_size, labels, dict(stream.meta))


# ----------------------------------------------------------------------------- smoothers
class MajorityVote:
    """The paper's smoother: the most frequent of the last ``n`` labels (ties: keep the
    current output if it is among them, else the most recent of the tied labels)."""

    name = "majority"

    def __init__(self, n: int = 5, num_classes: int = len(COMMANDS)):
        self.n = n
        self.C = num_classes
        self.reset()

    def reset(self) -> None:
        self._last: deque[int] = deque(maxlen=self.n)
        self.current = -1

    def update(self, proba: np.ndarray) -> int:
        self._last.append(int(np.argmax(proba)))
        counts = np.bincount(np.asarray(self._last), minlength=self.C)
        best = np.flatnonzero(counts == counts.max())
        if self.current in best:
            return self.current
        for lab in reversed(self._last):
            if lab in best:
                self.current = int(lab)
                break
        return self.current


class HMMFilter:
    """Forward filtering of a hidden command that stays with probability ``stay`` from
    frame to frame and otherwise moves to a command drawn from ``natural`` (how common
    each command is); the classifier's posteriors divided by its training ``priors`` are
    the observation likelihoods (tempered by ``power``). Emits the most probable command,
    changing it only when another one is ``margin`` times more probable (hysteresis)."""

    name = "hmm"

    def __init__(self, priors: np.ndarray, stay: float = 0.7, power: float = 1.0, margin: float = 1.0,
                 natural: np.ndarray | None = None):
        self.priors = np.maximum(np.asarray(priors, dtype=np.float64), 1e-6)
        self.priors /= self.priors.sum()
        nat = np.ones_like(self.priors) if natural is None else np.maximum(np.asarray(natural, dtype=np.float64), 1e-6)
        self.natural = nat / nat.sum()
        self.stay, self.power, self.margin = float(stay), float(power), float(margin)
        self.C = self.priors.shape[0]
        self.reset()

    def reset(self) -> None:
        self.belief = self.natural.copy()
        self.current = -1

    def update(self, proba: np.ndarray) -> int:
        prior = self.stay * self.belief + (1.0 - self.stay) * self.natural
        lik = np.maximum(np.asarray(proba, dtype=np.float64), 1e-6) / self.priors
        b = prior * lik ** self.power
        self.belief = b / b.sum()
        best = int(np.argmax(self.belief))
        if self.current < 0 or self.belief[best] > self.margin * self.belief[self.current]:
            self.current = best
        return self.current


def hmm_filter_grid(proba: np.ndarray, reset: np.ndarray, priors: np.ndarray, natural: np.ndarray | None,
                    stay: np.ndarray, power: np.ndarray, margin: np.ndarray) -> np.ndarray:
    """:class:`HMMFilter` run over one stream for ``G`` settings at once (for choosing them
    on validation data): ``proba [T, C]``, ``reset [T]`` bool (the filter restarts there),
    ``stay``, ``power``, ``margin`` ``[G]``. Returns ``[G, T]`` emitted command indices,
    identical to feeding the frames one by one to ``HMMFilter`` with each setting."""
    P = np.maximum(np.asarray(proba, dtype=np.float64), 1e-6)
    T, C = P.shape
    pri = np.maximum(np.asarray(priors, dtype=np.float64), 1e-6)
    pri = pri / pri.sum()
    nat = np.ones(C) if natural is None else np.maximum(np.asarray(natural, dtype=np.float64), 1e-6)
    nat = nat / nat.sum()
    stay, power, margin = (np.asarray(v, dtype=np.float64).reshape(-1) for v in (stay, power, margin))
    G = stay.shape[0]
    if power.shape[0] != G or margin.shape[0] != G:
        raise ClassifierError("stay, power and margin must have the same length")
    lik = (P / pri)[:, None, :] ** power[None, :, None]          # [T, G, C]
    out = np.empty((G, T), dtype=np.int64)
    belief = np.tile(nat, (G, 1))
    current = np.full(G, -1)
    rows = np.arange(G)
    s, ns = stay[:, None], (1.0 - stay)[:, None] * nat[None, :]
    for t in range(T):
        if reset[t]:
            belief = np.tile(nat, (G, 1))
            current[:] = -1
        b = (s * belief + ns) * lik[t]
        belief = b / b.sum(axis=1, keepdims=True)
        best = np.argmax(belief, axis=1)
        cur_b = np.where(current >= 0, belief[rows, np.maximum(current, 0)], 0.0)
        switch = (current < 0) | (belief[rows, best] > margin * cur_b)
        current = np.where(switch, best, current)
        out[:, t] = current
    return out


# ----------------------------------------------------------------------------- classifiers
@dataclass
class PoseClassifier(ABC):
    """Base: features of a normalised stream, class probabilities, a smoother."""

    commands: tuple[str, ...] = COMMANDS
    rate: float = RATE
    window: int = WINDOW
    priors: np.ndarray = field(default_factory=lambda: np.full(len(COMMANDS), 1 / len(COMMANDS)))
    meta: dict = field(default_factory=dict)
    kind = "base"

    # subclasses implement these three
    @abstractmethod
    def features(self, norm: NormalizedPoses, indices: np.ndarray | None = None) -> np.ndarray:
        """``[N, D]`` features of the frames ``indices`` (default all) of a normalised stream."""

    @abstractmethod
    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """``[N, C]`` class probabilities of feature rows ``X``."""

    @abstractmethod
    def make_smoother(self):
        """A fresh label smoother for a live stream."""

    # shared
    def classify(self, stream: KeypointStream | NormalizedPoses) -> ClassifiedStream:
        """Classify every frame of a stream (resampled to :attr:`rate` first); the result
        holds the raw per-frame labels, the smoothed (emitted) commands and probabilities."""
        norm = stream if isinstance(stream, NormalizedPoses) else normalize_stream(resample_stream(stream, self.rate))
        if len(norm) == 0:
            z = np.zeros(0, dtype=np.int64)
            return ClassifiedStream(norm.times, z, z, np.zeros((0, len(self.commands))), self.commands)
        P = self.predict_proba(self.features(norm))
        raw = np.argmax(P, axis=1)
        sm = self.make_smoother()
        out = np.empty(len(norm), dtype=np.int64)
        for t in range(len(norm)):
            if norm.reset[t]:
                sm.reset()
            out[t] = sm.update(P[t])
        return ClassifiedStream(norm.times, raw, out, P, self.commands)

    def save(self, path: str | Path) -> Path:
        arrays = self._arrays()
        header = {"format": MODEL_FORMAT, "version": MODEL_VERSION, "kind": self.kind, "commands": list(self.commands),
                  "rate": self.rate, "window": self.window, "meta": self.meta, **self._params()}
        arrays["header_json"] = np.asarray(json.dumps(header))
        arrays["priors"] = np.asarray(self.priors, dtype=np.float64)
        p = Path(path)
        with atomic_write(p, "wb") as f:
            np.savez_compressed(f, **arrays)
        return p

    def _arrays(self) -> dict[str, np.ndarray]:
        return {}

    def _params(self) -> dict:
        return {}


@dataclass
class ClassifiedStream:
    """Per-frame classification of a stream at the classifier's rate.

    Attributes:
        times: ``[T]`` seconds.
        raw: ``[T]`` per-frame argmax label (index into ``commands``).
        smoothed: ``[T]`` emitted command after the smoother (-1 before any).
        proba: ``[T, C]`` class probabilities.
    """

    times: np.ndarray
    raw: np.ndarray
    smoothed: np.ndarray
    proba: np.ndarray
    commands: tuple[str, ...]

    def names(self, which: str = "smoothed") -> list[str]:
        arr = self.smoothed if which == "smoothed" else self.raw
        return [self.commands[i] if i >= 0 else "" for i in arr]


@dataclass
class KNNPoseClassifier(PoseClassifier):
    """The paper's baseline: concatenated poses, kNN, majority of the last 5 labels."""

    k: int = 5
    vote: int = 5
    X: np.ndarray | None = None
    y: np.ndarray | None = None
    kind = "knn"

    def __post_init__(self) -> None:
        self._model = None

    def features(self, norm, indices=None):
        return pose_window_features(norm, indices, self.window)

    def fit(self, X: np.ndarray, y: np.ndarray) -> KNNPoseClassifier:
        self.X = np.ascontiguousarray(X, dtype=np.float32)
        self.y = np.asarray(y, dtype=np.int64)
        self.priors = np.bincount(self.y, minlength=len(self.commands)) / max(len(self.y), 1)
        self._model = None
        return self

    def _knn(self):
        if self._model is None:
            if self.X is None:
                raise ClassifierError("the kNN classifier has no training data; call fit() first")
            require_sklearn()
            from sklearn.neighbors import KNeighborsClassifier

            self._model = KNeighborsClassifier(n_neighbors=self.k, algorithm="brute", n_jobs=1)
            self._model.fit(self.X, self.y)
        return self._model

    def predict_proba(self, X):
        m = self._knn()
        P = np.zeros((X.shape[0], len(self.commands)))
        for a in range(0, X.shape[0], 4096):
            P[a:a + 4096][:, m.classes_] = m.predict_proba(np.asarray(X[a:a + 4096], dtype=np.float32))
        return P

    def make_smoother(self):
        return MajorityVote(self.vote, len(self.commands))

    def _arrays(self):
        return {"X": self.X, "y": self.y}

    def _params(self):
        return {"k": self.k, "vote": self.vote}


@functools.lru_cache(maxsize=8)
def mirror_commands(commands: tuple[str, ...]) -> np.ndarray:
    """``[C]`` int: the index of each command's mirror image (``*_left`` <-> ``*_right``,
    the others themselves); cached per command list, read-only."""
    index = {c: i for i, c in enumerate(commands)}

    def image(c: str) -> str:
        if c.endswith("_left"):
            return c[:-5] + "_right"
        if c.endswith("_right"):
            return c[:-6] + "_left"
        return c

    out = np.array([index.get(image(c), i) for i, c in enumerate(commands)], dtype=np.int64)
    out.flags.writeable = False
    return out


@dataclass
class MLPPoseClassifier(PoseClassifier):
    """Velocity and context features, an ensemble of small MLPs, an HMM filter (the
    improved classifier). ``members`` networks with different seeds are averaged;
    ``bias`` (``[C]``, optional) adds log-offsets to the averaged class probabilities
    (per-class decision thresholds, chosen on validation data by :mod:`.tune`). With
    ``mirror_average`` the probabilities are averaged with those of the mirror image of the
    input (left and right swapped: :func:`~.features.mirror_motion_features`), mapped back
    through :func:`mirror_commands` (``walk_left`` of the mirror image is ``walk_right``):
    the networks see every motion and its mirror image in training, and the two answers
    differ by their errors. With ``tree_weight > 0`` gradient-boosted trees
    (:class:`~.trees.BoostedTrees`, ``tree_iter`` boosting iterations at most) are fitted
    on the same features and their probabilities blended in with that weight."""

    hidden: tuple[int, ...] = (128, 64)
    members: int = 3
    alpha: float = 0.1
    context: int = CONTEXT
    long: int = LONG
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    nets: list[tuple[list[np.ndarray], list[np.ndarray]]] = field(default_factory=list)
    stay: float = 0.7
    power: float = 1.0
    margin: float = 1.0
    natural: np.ndarray | None = None
    bias: np.ndarray | None = None
    mirror_average: bool = False
    tree_weight: float = 0.0
    tree_iter: int = 300
    trees: BoostedTrees | None = None
    kind = "mlp"

    def features(self, norm, indices=None):
        return motion_features(norm, self.rate, indices, self.window, self.context, self.long)

    def fit(self, X: np.ndarray, y: np.ndarray, seed: int = 0, max_iter: int = 30) -> MLPPoseClassifier:
        """Train ``members`` networks (scikit-learn ``MLPClassifier``, Adam, L2 ``alpha``,
        early stopping on 10% of the data) on standardised features."""
        require_sklearn()
        import warnings

        from sklearn.neural_network import MLPClassifier

        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.int64)
        C = len(self.commands)
        if len(np.unique(y)) < 3:
            raise ClassifierError("the MLP needs training data of at least three commands")
        self.mean = X.mean(axis=0)
        self.std = X.std(axis=0) + 1e-6
        Z = ((X - self.mean) / self.std).astype(np.float32)   # float32: half the training time
        self.nets = []
        for m in range(self.members):
            mlp = MLPClassifier(hidden_layer_sizes=self.hidden, alpha=self.alpha, batch_size=256,
                                learning_rate_init=1e-3, max_iter=max_iter, early_stopping=True,
                                validation_fraction=0.1, n_iter_no_change=5, random_state=seed + m)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mlp.fit(Z, y)
            W_last = np.zeros((mlp.coefs_[-1].shape[0], C))
            b_last = np.full(C, -30.0)  # commands absent from the training data: never predicted
            W_last[:, mlp.classes_] = mlp.coefs_[-1]
            b_last[mlp.classes_] = mlp.intercepts_[-1]
            Ws = [np.asarray(w, dtype=np.float32) for w in mlp.coefs_[:-1]] + [W_last.astype(np.float32)]
            bs = [np.asarray(b, dtype=np.float32) for b in mlp.intercepts_[:-1]] + [b_last.astype(np.float32)]
            self.nets.append((Ws, bs))
        self.trees = None
        if self.tree_weight > 0:
            self.trees = BoostedTrees.fit(X, y, C, seed=seed, max_iter=self.tree_iter)
        self.priors = np.bincount(y, minlength=C) / max(len(y), 1)
        return self

    def predict_proba(self, X):
        if not self.nets:
            raise ClassifierError("the MLP classifier is not trained; call fit() first")
        out = self._ensemble_proba(X)
        if self.mirror_average:
            mirrored = self._ensemble_proba(mirror_motion_features(np.asarray(X), self.window, self.context, self.long))
            out = 0.5 * (out + mirrored[:, mirror_commands(self.commands)])
        if self.bias is not None:
            out *= np.exp(np.asarray(self.bias, dtype=np.float64))[None, :]
            out /= out.sum(axis=1, keepdims=True)
        return out

    def _ensemble_proba(self, X):
        z0 = (np.asarray(X, dtype=np.float32) - self.mean.astype(np.float32)) / self.std.astype(np.float32)
        out = np.zeros((z0.shape[0], len(self.commands)))
        for Ws, bs in self.nets:
            h = z0
            for w, b in zip(Ws[:-1], bs[:-1]):
                h = np.maximum(h @ w + b, 0.0)
            z = h @ Ws[-1] + bs[-1]
            z = z - z.max(axis=1, keepdims=True)
            e = np.exp(z)
            out += e / e.sum(axis=1, keepdims=True)
        out /= len(self.nets)
        if self.trees is not None and self.tree_weight > 0:
            out = (1.0 - self.tree_weight) * out + self.tree_weight * self.trees.proba(X)
        return out

    def make_smoother(self):
        return HMMFilter(self.priors, self.stay, self.power, self.margin, self.natural)

    def _arrays(self):
        out = {"mean": self.mean, "std": self.std}
        if self.natural is not None:
            out["natural"] = np.asarray(self.natural, dtype=np.float64)
        if self.bias is not None:
            out["bias"] = np.asarray(self.bias, dtype=np.float64)
        for m, (Ws, bs) in enumerate(self.nets):
            for i, (w, b) in enumerate(zip(Ws, bs)):
                out[f"W{m}_{i}"], out[f"b{m}_{i}"] = w, b
        if self.trees is not None:
            out.update(self.trees.to_arrays())
        return out

    def _params(self):
        return {"hidden": list(self.hidden), "members": len(self.nets), "layers": len(self.nets[0][0]) if self.nets else 0,
                "alpha": self.alpha, "context": self.context, "long": self.long, "stay": self.stay, "power": self.power,
                "margin": self.margin, "mirror_average": self.mirror_average, "tree_weight": self.tree_weight,
                "tree_iter": self.tree_iter}


def load_classifier(path: str | Path) -> PoseClassifier:
    """Read a classifier written by :meth:`PoseClassifier.save`."""
    p = Path(path)
    kind = not_npz(p)
    if kind:
        raise ClassifierError(f"{p}: {kind}; a pose classifier is an .npz file from 'motionmatch pose train' "
                              "(or use improved or knn)")
    d = read_npz(p, "pose classifier", "train one with 'motionmatch pose train' (or use improved or knn)",
                 error=ClassifierError)
    if "header_json" not in d:
        raise ClassifierError(f"{p}: not a motionmatch pose classifier (no header)")
    h = loads_json(str(d["header_json"]), f"{p}: header_json", error=ClassifierError)
    if not isinstance(h, dict):
        raise ClassifierError(f"{p}: header_json: expected a JSON object; train the classifier again")
    if h.get("format") != MODEL_FORMAT:
        raise ClassifierError(f"{p}: format {h.get('format')!r} is not {MODEL_FORMAT!r}")
    if int(h.get("version", 0)) > MODEL_VERSION:
        raise ClassifierError(f"{p}: classifier version {h.get('version')} is newer than this reader ({MODEL_VERSION})")
    common = {"commands": tuple(h["commands"]), "rate": float(h["rate"]), "window": int(h["window"]),
              "priors": d["priors"], "meta": h.get("meta", {})}
    if h["kind"] == "knn":
        return KNNPoseClassifier(**common, k=int(h["k"]), vote=int(h["vote"]), X=d["X"], y=d["y"])
    if h["kind"] == "mlp":
        n, k = int(h["layers"]), int(h["members"])
        nets = [([d[f"W{m}_{i}"] for i in range(n)], [d[f"b{m}_{i}"] for i in range(n)]) for m in range(k)]
        try:
            trees = BoostedTrees.from_arrays(d)
        except ValueError as e:
            raise ClassifierError(f"{p}: {e}; retrain or re-save the classifier") from None
        return MLPPoseClassifier(**common, hidden=tuple(h["hidden"]), members=k, alpha=float(h["alpha"]),
                                 context=int(h["context"]), long=int(h.get("long", 0)), mean=d["mean"], std=d["std"], nets=nets,
                                 stay=float(h["stay"]), power=float(h["power"]), margin=float(h["margin"]),
                                 natural=d.get("natural"), bias=d.get("bias"),
                                 mirror_average=bool(h.get("mirror_average", False)),
                                 tree_weight=float(h.get("tree_weight", 0.0)), tree_iter=int(h.get("tree_iter", 300)),
                                 trees=trees)
    raise ClassifierError(f"{p}: unknown classifier kind {h['kind']!r}")


# ----------------------------------------------------------------------------- streaming
@functools.cache
def _blas_threads():
    """threadpoolctl's controller of numpy's BLAS (installed with scikit-learn), or ``None``."""
    try:
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController()
    except Exception:  # not installed, or an unknown BLAS
        return None


def one_blas_thread():
    """A context in which numpy's BLAS runs on the calling thread only (where threadpoolctl
    is installed; else it changes nothing). The live classifier multiplies a few rows at a
    time, which a second BLAS thread does not speed up; on a loaded machine every matrix
    product then also waits for that thread to be scheduled (and it spins afterwards,
    taking CPU from the session): a viewer session stalled for 1-3 s per tick."""
    c = _blas_threads()
    return contextlib.nullcontext() if c is None else c.limit(limits=1, user_api="blas")


class StreamingClassifier:
    """Feed poses one at a time (live use); get the current command after each.

    ``push(t, keypoints, confidence=None)`` takes the time (s) and one frame ``[K, 2|3]``
    of keypoints named ``names``; frames are resampled to the classifier's rate, so any
    input rate works. Returns the emitted command (or ``""`` before the first). The
    output is the same as :meth:`PoseClassifier.classify` on the whole stream.

    After each call, ``emitted`` holds the ``(time, command index)`` of every resampled
    frame it classified (none when the frame did not reach the next 30 Hz time).

    ``push_many`` takes several frames at once (a live source that fell behind) and gives
    the same commands as pushing them one by one, at about the cost of one push: the
    resampled frames of a call are normalised, described and classified together, so a
    live source that falls behind catches up instead of falling further behind (one
    frame at a time, each 30 Hz frame costs a normalisation of the history, its features
    and the networks: about a core's time at a camera's 10 frames a second on a 2-core
    machine).
    """

    HISTORY = 90

    def __init__(self, classifier: PoseClassifier, names: tuple[str, ...], y_down: bool = True):
        self.clf = classifier
        self.names = tuple(names)
        self.y_down = y_down
        self.reset()

    def reset(self) -> None:
        self._times: list[float] = []
        self._kp: list[np.ndarray] = []
        self._conf: list[np.ndarray] = []
        self._raw_t: list[float] = []
        self._raw_kp: list[np.ndarray] = []
        self._raw_c: list[np.ndarray] = []
        self._next_t: float | None = None
        self._smoother = self.clf.make_smoother()
        self.command = -1
        self.last_proba: np.ndarray | None = None
        self.emitted: list[tuple[float, int]] = []   # (time, command) of each frame the last call classified

    @property
    def command_name(self) -> str:
        return self.clf.commands[self.command] if self.command >= 0 else ""

    def use(self, classifier: PoseClassifier) -> None:
        """Classify the frames from now on with ``classifier`` (the same commands and rate),
        keeping the frame history, so its context features are whole at once; its own
        smoother starts afresh, and the current command stays until it emits one."""
        if tuple(classifier.commands) != tuple(self.clf.commands) or classifier.rate != self.clf.rate:
            raise ClassifierError("a live stream can only switch to a classifier of the same commands and rate")
        self.clf = classifier
        self._smoother = classifier.make_smoother()

    def _emit(self, times: list[float], kps: list[np.ndarray], confs: list[np.ndarray]) -> None:
        """Classify resampled frames (in order) with the history before them."""
        self.emitted = []
        if not times:
            return
        h = len(self._times)
        self._times += times
        self._kp += kps
        self._conf += confs
        s = KeypointStream(np.asarray(self._times), np.stack(self._kp), self.names, np.stack(self._conf), self.y_down)
        norm = normalize_stream(s)
        # the normaliser is causal with a bounded memory, so the tail equals the full stream's
        new = np.arange(h, len(norm))
        with one_blas_thread():
            P = self.clf.predict_proba(self.clf.features(norm, new))
        for row, i in enumerate(new):
            if norm.reset[i]:
                self._smoother.reset()
            self.command = self._smoother.update(P[row])
            self.emitted.append((self._times[i], self.command))
        self.last_proba = P[-1]
        del self._times[:-self.HISTORY], self._kp[:-self.HISTORY], self._conf[:-self.HISTORY]

    def push(self, t: float, keypoints: np.ndarray, confidence: np.ndarray | None = None) -> str:
        return self.push_many([t], [keypoints], None if confidence is None else [confidence])

    def push_many(self, times, keypoints, confidence=None) -> str:
        """Frames ``keypoints [N][K, 2|3]`` at ``times [N]`` (s, increasing), with
        ``confidence [N][K]`` or ``None``; returns the command after the last. A bad frame
        raises :class:`~.keypoints.KeypointError` before any frame is taken."""
        frames = []
        last = self._raw_t[-1] if self._raw_t else None
        for i, t in enumerate(times):
            kp = np.asarray(keypoints[i], dtype=np.float64)
            if kp.ndim != 2 or kp.shape[0] != len(self.names):
                raise KeypointError(f"one frame must be [K={len(self.names)}, 2|3], got {list(kp.shape)}")
            c = None if confidence is None else confidence[i]
            conf = np.ones(kp.shape[0]) if c is None else np.asarray(c, dtype=np.float64)
            if last is not None and t <= last:
                raise KeypointError(f"times must increase: {t} after {last}")
            last = float(t)
            frames.append((float(t), kp, conf))
        dt = 1.0 / self.clf.rate
        out_t: list[float] = []
        out_k: list[np.ndarray] = []
        out_c: list[np.ndarray] = []
        for t, kp, conf in frames:
            self._raw_t.append(t)
            self._raw_kp.append(kp)
            self._raw_c.append(conf)
            if self._next_t is None:
                self._t0, self._k = t, 0
                self._next_t = t
            # every resampled time in (previous frame, this frame] lies between the last two frames
            while self._next_t <= t + 1e-9:
                tn = self._next_t
                if abs(tn - t) < 1e-6 or len(self._raw_t) < 2:
                    k, c = kp, conf
                else:
                    t0, k0, c0 = self._raw_t[-2], self._raw_kp[-2], self._raw_c[-2]
                    if t - t0 > MAX_INTERPOLATED_GAP_S:
                        k, c = np.full_like(kp, np.nan), np.zeros_like(conf)
                    else:
                        a = (tn - t0) / (t - t0)
                        k, c = (1 - a) * k0 + a * kp, np.minimum(c0, conf)
                out_t.append(tn)
                out_k.append(k)
                out_c.append(c)
                self._k += 1
                self._next_t = self._t0 + self._k * dt
            del self._raw_t[:-2], self._raw_kp[:-2], self._raw_c[:-2]
        self._emit(out_t, out_k, out_c)
        return self.command_name
