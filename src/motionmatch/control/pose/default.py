"""The default classifiers: trained on keypoints rendered from the shared motion capture.

:func:`prepare` renders the data of a :class:`TrainConfig` (:mod:`.dataset`),
:func:`train` fits the kNN baseline and the improved classifier on its training side,
:func:`evaluate` scores both on the held-out side (:mod:`.evaluate`), and
:func:`default_classifiers` returns the trained pair, cached in
``$MOTIONMATCH_CACHE/pose`` (default: the user cache folder) under a hash of the data
files, the configuration and the package version, so it is built once, on first use
(about a minute or two on a laptop) and rebuilt when any of those change.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from motionmatch.control.pose.classify import (
    KNNPoseClassifier,
    MLPPoseClassifier,
    PoseClassifier,
    load_classifier,
)
from motionmatch.control.pose.dataset import (
    Clip,
    DataConfig,
    RenderedClip,
    class_counts,
    inputs_hash,
    load_clips,
    render_clips,
    training_set,
)
from motionmatch.control.pose.evaluate import Evaluation, Transition, evaluate_renders, latencies, transition_renders
from motionmatch.errors import DatasetError

DEFAULT_DATA = DataConfig(
    folders=(("lafan1-60fps", 1, "*.bvh"), ("lafan1", 1, "*.bvh"), ("bandai-namco/dataset-1", 1, "*.bvh"),
             ("bandai-namco/dataset-2", 4, "*.bvh"), ("genmm-examples", 1, "Joe_Salsa*"),
             ("genmm-examples", 1, "Malcolm_Gangnam*")),
    extra_tags=(("Malcolm_Gangnam*", "dance"),),
)
#: A small configuration for tests: a third of the clips, one network, fewer windows.
QUICK_DATA = DataConfig(
    folders=(("lafan1", 1, "*.bvh"), ("lafan1-60fps", 3, "*.bvh"), ("bandai-namco/dataset-1", 5, "*.bvh"),
             ("bandai-namco/dataset-1", 1, "*punch*"), ("bandai-namco/dataset-1", 1, "*dance*")),
    train_passes=1, rare_passes=3,
)


@dataclass(frozen=True)
class TrainConfig:
    """Data and training settings of the default classifiers."""

    data: DataConfig = field(default_factory=lambda: DEFAULT_DATA)
    knn_max_per_class: int = 3000
    mlp_max_per_class: int = 4000
    mlp_min_per_class: int = 2000
    train_transitions: int = 1200
    test_transitions: int = 100
    members: int = 3
    max_iter: int = 30
    seed: int = 0

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self)))


QUICK = TrainConfig(data=QUICK_DATA, knn_max_per_class=1200, mlp_max_per_class=1500, mlp_min_per_class=800,
                    train_transitions=300, test_transitions=40, members=1, max_iter=25)


@dataclass
class PoseData:
    """Rendered training and test data."""

    config: TrainConfig
    clips: list[Clip]
    train: list[RenderedClip]
    test: list[RenderedClip]
    train_transitions: list[Transition]
    test_transitions: list[Transition]
    seconds: float = 0.0

    def counts(self) -> dict[str, dict[str, int]]:
        return {"train": class_counts(self.train), "test": class_counts(self.test)}


def resolve_root(root: str | Path | None) -> Path:
    """The motion-capture root: ``root``, else ``$MOTIONMATCH_DATA`` / ``../shared/data``."""
    if root is not None:
        return Path(root)
    from motionmatch.datasets import data_root

    r = data_root()
    if r is None:
        raise DatasetError("no motion data found: set MOTIONMATCH_DATA to the shared data folder (with lafan1-60fps, "
                           "lafan1, bandai-namco) or pass --data DIR")
    return r


def prepare(root: str | Path | None = None, config: TrainConfig | None = None, progress: bool = False) -> PoseData:
    """Load, split and render the data of ``config`` (see :mod:`.dataset`)."""
    cfg = config or TrainConfig()
    t0 = time.perf_counter()
    clips = load_clips(resolve_root(root), cfg.data, progress=progress)
    renders = render_clips(clips, cfg.data)
    train = [r for r in renders if r.split == "train"]
    test = [r for r in renders if r.split == "test"]
    tt = transition_renders(clips, cfg.data, pairs=cfg.train_transitions, split="train", seed=cfg.seed + 1)
    te = transition_renders(clips, cfg.data, pairs=cfg.test_transitions, split="test", seed=cfg.seed)
    return PoseData(cfg, clips, train, test, tt, te, time.perf_counter() - t0)


def train(data: PoseData) -> tuple[KNNPoseClassifier, MLPPoseClassifier]:
    """Fit the kNN baseline (training renders) and the improved classifier (training
    renders plus two-part training performances)."""
    cfg = data.config
    knn = KNNPoseClassifier()
    X, y = training_set(data.train, knn.features, max_per_class=cfg.knn_max_per_class, seed=cfg.seed)
    knn.fit(X, y)
    mlp = MLPPoseClassifier(members=cfg.members)
    X, y = training_set(data.train + [t.render for t in data.train_transitions], mlp.features,
                        max_per_class=cfg.mlp_max_per_class, min_per_class=cfg.mlp_min_per_class, seed=cfg.seed)
    mlp.fit(X, y, seed=cfg.seed, max_iter=cfg.max_iter)
    meta = {"trained_on": "rendered motion capture", "config": cfg.to_dict()}
    knn.meta, mlp.meta = dict(meta), dict(meta)
    return knn, mlp


@dataclass
class PoseEvaluation:
    """Both classifiers on the held-out renders."""

    results: dict[str, Evaluation]
    latency: dict[str, dict]
    counts: dict[str, dict[str, int]]

    def to_dict(self) -> dict:
        out = {name: {**ev.to_dict(), "latency": self.latency[name]} for name, ev in self.results.items()}
        out["best"] = dict(out["improved"], name="improved")
        out["class_counts"] = self.counts
        return out


def evaluate(data: PoseData, knn: PoseClassifier, improved: PoseClassifier) -> PoseEvaluation:
    results = {"knn": evaluate_renders(knn, data.test), "improved": evaluate_renders(improved, data.test)}
    lat = {"knn": latencies(knn, data.test_transitions), "improved": latencies(improved, data.test_transitions)}
    return PoseEvaluation(results, lat, data.counts())


def _cache_dir(cache_dir: str | Path | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    from motionmatch.datasets import default_cache_dir

    return default_cache_dir() / "pose"


def cache_key(root: Path, config: TrainConfig) -> str:
    h = hashlib.sha256()
    h.update(inputs_hash(root, config.data).encode())
    h.update(json.dumps(config.to_dict(), sort_keys=True).encode())
    return h.hexdigest()[:16]


def default_classifiers(root: str | Path | None = None, config: TrainConfig | None = None,
                        cache_dir: str | Path | None = None, retrain: bool = False, progress: bool = False,
                        data: PoseData | None = None) -> tuple[KNNPoseClassifier, MLPPoseClassifier]:
    """The trained ``(knn, improved)`` pair: from the cache, or trained and cached."""
    cfg = config or TrainConfig()
    r = resolve_root(root)
    key = cache_key(r, cfg)
    d = _cache_dir(cache_dir)
    paths = d / f"knn-{key}.npz", d / f"improved-{key}.npz"
    if not retrain and all(p.is_file() for p in paths):
        try:
            knn, imp = (load_classifier(p) for p in paths)
            if isinstance(knn, KNNPoseClassifier) and isinstance(imp, MLPPoseClassifier):
                return knn, imp
        except Exception:  # a damaged cache is rebuilt, not trusted
            pass
    data = data if data is not None and data.config == cfg else prepare(r, cfg, progress)
    knn, imp = train(data)
    d.mkdir(parents=True, exist_ok=True)
    knn.save(paths[0])
    imp.save(paths[1])
    return knn, imp


def default_classifier(kind: str = "improved", **kw) -> PoseClassifier:
    """One of the default classifiers: ``"improved"`` (alias ``"best"``) or ``"knn"``."""
    knn, imp = default_classifiers(**kw)
    if kind in ("improved", "best", "mlp"):
        return imp
    if kind == "knn":
        return knn
    raise ValueError(f"unknown classifier kind {kind!r}; use improved or knn")


def with_seed(config: TrainConfig, seed: int) -> TrainConfig:
    return replace(config, seed=seed, data=replace(config.data, seed=seed))


def summary_line(ev: PoseEvaluation) -> str:
    parts = []
    for name, res in ev.results.items():
        lat = ev.latency[name]
        parts.append(f"{name}: macro-F1 {res.smoothed['macro_f1']:.3f}, flicker {res.flicker_per_s:.2f}/s, "
                     f"latency median {lat['median_s'] if lat['median_s'] is not None else float('nan'):.3f} s")
    return "; ".join(parts)


__all__ = ["DEFAULT_DATA", "QUICK", "QUICK_DATA", "PoseData", "PoseEvaluation", "TrainConfig", "default_classifier",
           "default_classifiers", "evaluate", "prepare", "summary_line", "train", "with_seed"]
