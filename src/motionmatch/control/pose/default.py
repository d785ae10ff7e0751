"""The default classifiers: trained on keypoints rendered from the shared motion capture.

:func:`prepare` renders the data of a :class:`TrainConfig` (:mod:`.dataset`: training,
validation and test clips, each filmed from its own camera azimuths), :func:`train`
fits the kNN baseline and the improved classifier, choosing the improved one's settings
on the validation side only and then refitting on training plus validation data,
:func:`evaluate` scores both, once, on the test side (:mod:`.evaluate`), and
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

from motionmatch._files import training_lock
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
from motionmatch.control.pose.tune import choose_smoother
from motionmatch.errors import DatasetError

DEFAULT_DATA = DataConfig(
    folders=(("lafan1-60fps", 1, "*.bvh"), ("lafan1", 1, "*.bvh"), ("bandai-namco/dataset-1", 1, "*.bvh"),
             ("bandai-namco/dataset-2", 4, "*.bvh"), ("genmm-examples", 1, "Joe_Salsa*"),
             ("genmm-examples", 1, "Malcolm_Gangnam*")),
    extra_tags=(("Malcolm_Gangnam*", "dance"),),
    # a video estimator keeps only part of the limbs' swing (render.damp_limbs): trained
    # with each limb's swing scaled by 0.3-1, the classifier reads a damped run as a run
    limb_gain=(0.3, 1.0),
    # (estimator_fps, renders thinned to a slow estimator's rate, is not on: trained with it
    # the classifier read thinned renders better but the page's estimator's run as a dance;
    # benchmarks/README.md, "Slow estimators")
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
    val_transitions: int = 100
    members: int = 5
    max_iter: int = 30
    hidden: tuple[int, ...] = (128, 64)
    alpha: float = 0.3
    long: int = 60
    refit: bool = True
    tune_bias: bool = True
    mirror_average: bool = True
    tree_weight: float = 0.7
    tree_iter: int = 300
    seed: int = 0

    def to_dict(self) -> dict:
        return {**json.loads(json.dumps(asdict(self))), "data": self.data.to_dict()}


#: The quick configuration of the tests: its own settings, fixed (one network, L2 alpha 0.1, no
#: mirror averaging, no trees), not the default classifier's.
QUICK = TrainConfig(data=QUICK_DATA, knn_max_per_class=1200, mlp_max_per_class=1500, mlp_min_per_class=800,
                    train_transitions=300, test_transitions=40, members=1, max_iter=25, alpha=0.1,
                    mirror_average=False, tree_weight=0.0)


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
    val: list[RenderedClip] = field(default_factory=list)
    val_transitions: list[Transition] = field(default_factory=list)

    def counts(self) -> dict[str, dict[str, int]]:
        return {"train": class_counts(self.train), "val": class_counts(self.val), "test": class_counts(self.test)}


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
    val = [r for r in renders if r.split == "val"]
    test = [r for r in renders if r.split == "test"]
    tt = transition_renders(clips, cfg.data, pairs=cfg.train_transitions, split="train", seed=cfg.seed + 1)
    tv = transition_renders(clips, cfg.data, pairs=cfg.val_transitions, split="val", seed=cfg.seed + 2)
    te = transition_renders(clips, cfg.data, pairs=cfg.test_transitions, split="test", seed=cfg.seed)
    return PoseData(cfg, clips, train, test, tt, te, time.perf_counter() - t0, val, tv)


def _fit_mlp(cfg: TrainConfig, renders: list[RenderedClip]) -> MLPPoseClassifier:
    mlp = MLPPoseClassifier(members=cfg.members, hidden=cfg.hidden, long=cfg.long, alpha=cfg.alpha,
                            mirror_average=cfg.mirror_average, tree_weight=cfg.tree_weight, tree_iter=cfg.tree_iter)
    X, y = training_set(renders, mlp.features, max_per_class=cfg.mlp_max_per_class,
                        min_per_class=cfg.mlp_min_per_class, seed=cfg.seed)
    return mlp.fit(X, y, seed=cfg.seed, max_iter=cfg.max_iter)


def train(data: PoseData) -> tuple[KNNPoseClassifier, MLPPoseClassifier]:
    """Fit the kNN baseline and the improved classifier; the test renders are not touched.

    1. *Selection*: the improved classifier is trained on the training renders plus the
       two-part training performances, and its per-class offsets and smoother settings
       are chosen on the validation renders and validation performances
       (:func:`~.tune.choose_smoother`).
    2. *Refit*: with those settings fixed, the improved classifier is trained again on the
       training and validation renders (plus the training performances), and the kNN
       baseline (the paper's fixed settings, nothing to choose) on the same renders.

    Without validation renders (a custom configuration with ``val_modulo=0``) the
    smoother keeps its defaults and step 2 is step 1.
    """
    cfg = data.config
    train_perf = [t.render for t in data.train_transitions]
    sel = _fit_mlp(cfg, data.train + train_perf)
    meta = {"trained_on": "rendered motion capture", "config": cfg.to_dict()}
    if data.val:
        choice = choose_smoother(sel, data.val, data.val_transitions, tune_bias=cfg.tune_bias)
        mlp = _fit_mlp(cfg, data.train + data.val + train_perf) if cfg.refit else sel
        mlp.stay, mlp.power, mlp.margin = choice.stay, choice.power, choice.margin
        mlp.bias = choice.bias if cfg.tune_bias else None
        meta["smoother_validation"] = {**choice.best, "bias": [round(float(v), 3) for v in choice.bias]}
        meta["refit_on_validation"] = bool(cfg.refit)
    else:
        mlp = sel
    knn = KNNPoseClassifier()
    X, y = training_set(data.train + (data.val if cfg.refit else []), knn.features,
                        max_per_class=cfg.knn_max_per_class, seed=cfg.seed)
    knn.fit(X, y)
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


def cache_folder(cache_dir: str | Path | None = None) -> Path:
    """Where the trained classifiers are cached: ``cache_dir``, else ``$MOTIONMATCH_CACHE/pose``
    (default: the user cache folder)."""
    if cache_dir is not None:
        return Path(cache_dir)
    from motionmatch.datasets import default_cache_dir

    return default_cache_dir() / "pose"


def cache_key(root: Path, config: TrainConfig) -> str:
    h = hashlib.sha256()
    h.update(inputs_hash(root, config.data).encode())
    h.update(json.dumps(config.to_dict(), sort_keys=True).encode())
    return h.hexdigest()[:16]


def _cache_paths(root: Path, cfg: TrainConfig, cache_dir: str | Path | None) -> tuple[Path, Path]:
    key = cache_key(root, cfg)
    d = cache_folder(cache_dir)
    return d / f"knn-{key}.npz", d / f"improved-{key}.npz"


def cached_classifiers(root: str | Path | None = None, config: TrainConfig | None = None,
                       cache_dir: str | Path | None = None) -> tuple[KNNPoseClassifier, MLPPoseClassifier] | None:
    """The ``(knn, improved)`` pair of ``config`` if it is trained and cached already
    (:func:`default_classifiers` caches it), else ``None``; a damaged cache is ``None``."""
    paths = _cache_paths(resolve_root(root), config or TrainConfig(), cache_dir)
    if not all(p.is_file() for p in paths):
        return None
    try:
        knn, imp = (load_classifier(p) for p in paths)
    except Exception:  # a damaged cache is rebuilt, not trusted
        return None
    if isinstance(knn, KNNPoseClassifier) and isinstance(imp, MLPPoseClassifier):
        return knn, imp
    return None


def default_classifiers(root: str | Path | None = None, config: TrainConfig | None = None,
                        cache_dir: str | Path | None = None, retrain: bool = False, progress: bool = False,
                        data: PoseData | None = None) -> tuple[KNNPoseClassifier, MLPPoseClassifier]:
    """The trained ``(knn, improved)`` pair: from the cache, or trained and cached."""
    cfg = config or TrainConfig()
    r = resolve_root(root)
    if not retrain:
        pair = cached_classifiers(r, cfg, cache_dir)
        if pair is not None:
            return pair
    # one process trains a configuration at a time; the others wait, then read its cache
    with training_lock(_cache_paths(r, cfg, cache_dir)[1]):
        if not retrain:
            pair = cached_classifiers(r, cfg, cache_dir)
            if pair is not None:
                return pair
        data = data if data is not None and data.config == cfg else prepare(r, cfg, progress)
        knn, imp = train(data)
        cache_classifiers(knn, imp, r, cfg, cache_dir)
    return knn, imp


_training_lock = training_lock  # (the name the tests and older callers use)


def cache_classifiers(knn: KNNPoseClassifier, improved: MLPPoseClassifier, root: str | Path | None = None,
                      config: TrainConfig | None = None, cache_dir: str | Path | None = None) -> None:
    """Keep a trained ``(knn, improved)`` pair of ``config`` where :func:`cached_classifiers`
    (and so `pose run` and the viewer) find it."""
    paths = _cache_paths(resolve_root(root), config or TrainConfig(), cache_dir)
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    knn.save(paths[0])
    improved.save(paths[1])


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


def protocol(data: PoseData, improved: PoseClassifier | None = None) -> dict:
    """How the data were split and the settings chosen (for reports): azimuths and clip
    counts per split, the whole validation and test clips, the takes cut into 4 s blocks
    shared out between the splits (:mod:`.dataset`), and the smoother setting chosen on
    validation (from ``improved.meta``)."""
    cfg = data.config

    def names(split: str) -> list[str]:
        return sorted(c.name for c in data.clips if c.split == split and "@" not in c.name)

    out = {
        "summary": ("clips split three ways (test: crc32(name) % 4 == 0; validation: a fifth of the rest); each "
                    "split filmed from its own camera azimuths; the smoother chosen on validation renders and "
                    "validation two-part performances only; both classifiers then refit on training + validation; "
                    "the test split is scored once"),
        "azimuths": {s: list(cfg.data.azimuths(s)) for s in ("train", "val", "test")},
        "clips": {s: len([c for c in data.clips if c.split == s]) for s in ("train", "val", "test")},
        "val_clips": names("val"),
        "test_clips": names("test"),
        "cut_takes": sorted({c.name.split("@")[0] for c in data.clips if "@" in c.name}),
        "refit_on_validation": bool(cfg.refit),
    }
    if improved is not None and "smoother_validation" in improved.meta:
        out["smoother_validation"] = improved.meta["smoother_validation"]
    return out


def summary_line(ev: PoseEvaluation) -> str:
    parts = []
    for name, res in ev.results.items():
        lat = ev.latency[name]
        parts.append(f"{name}: macro-F1 {res.smoothed['macro_f1']:.3f}, flicker {res.flicker_per_s:.2f}/s, "
                     f"latency median {lat['median_s'] if lat['median_s'] is not None else float('nan'):.3f} s")
    return "; ".join(parts)


__all__ = ["DEFAULT_DATA", "QUICK", "QUICK_DATA", "PoseData", "PoseEvaluation", "TrainConfig", "default_classifier",
           "default_classifiers", "evaluate", "prepare", "protocol", "summary_line", "train", "with_seed"]
