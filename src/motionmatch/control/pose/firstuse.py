"""The pose classifier on first use: a quick one at once, the default one trained in the background.

On a fresh install nothing is cached, and the default (improved) classifier takes about
ten minutes to train on 2 cores (:func:`~.default.default_classifiers`: five networks
and boosted trees, twice). So that a webcam drives the character within seconds of the
first "Use camera":

1. :func:`quick_classifier` trains the *quick* classifier (:data:`QUICK_START`): one
   small network on the default data's training renders and two-part performances, a few
   iterations, with its per-class offsets and smoother chosen on the validation side as
   the default one's are (:func:`~.tune.choose_smoother`; without that step the network
   reads the page estimator's damped run as a jump). About 26 s on a busy 2-core machine
   (load 9), 10 s of it rendering the motion capture; cached beside the default classifiers, so a second start
   before those are done takes a second.
2. :class:`BackgroundTraining` trains the default classifiers in a separate process at
   low priority (``nice`` 10: the page's estimator and the viewer's session keep the CPU;
   a process, not a thread, so the session never waits for the training's Python), which
   caches them where :func:`~.default.cached_classifiers` finds them.
3. The caller (the viewer's :class:`~motionmatch.viewer.pose.ClassifierLoader`) uses the
   default classifier from then on, and says so.

``python -m motionmatch.control.pose.firstuse DATA_ROOT [--cache-dir DIR]`` is the
background process (it trains and caches the default pair, then exits).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from motionmatch._files import training_lock
from motionmatch.control.pose.classify import MLPPoseClassifier, load_classifier, one_blas_thread
from motionmatch.control.pose.dataset import DataConfig, load_clips, render_clips, training_set
from motionmatch.control.pose.default import (
    DEFAULT_DATA,
    QUICK,
    PoseData,
    TrainConfig,
    cache_folder,
    cache_key,
    default_classifiers,
    resolve_root,
)
from motionmatch.control.pose.evaluate import transition_renders
from motionmatch.control.pose.tune import choose_bias, choose_smoother

__all__ = ["QUICK_START", "BackgroundTraining", "QuickConfig", "prepare_quick", "quick_classifier", "train_quick"]


#: The quick classifier's data: the default's, with a third of Bandai-Namco's first set
#: (its punches, kick and dance kept) and a third of the default's share of the second.
QUICK_START_DATA = replace(
    DEFAULT_DATA,
    folders=(("lafan1-60fps", 1, "*.bvh"), ("lafan1", 1, "*.bvh"), ("bandai-namco/dataset-1", 3, "*.bvh"),
             ("bandai-namco/dataset-1", 1, "*punch*"), ("bandai-namco/dataset-1", 1, "*kick*"),
             ("bandai-namco/dataset-1", 1, "*dance*"), ("bandai-namco/dataset-2", 12, "*.bvh"),
             ("genmm-examples", 1, "Joe_Salsa*"), ("genmm-examples", 1, "Malcolm_Gangnam*")))


@dataclass(frozen=True)
class QuickConfig:
    """The quick classifier: one network of ``hidden`` units, ``max_iter`` epochs at most,
    on at most ``max_per_class`` windows a command (half as many at least), averaged with
    its answer for the mirror image with ``mirror_average``, trained on the training
    renders and ``performances`` two-part training performances; its per-class offsets and
    smoother chosen from the grid ``stay`` x ``power`` x ``margin`` (a smaller one than the
    default's) on every ``val_every``-th validation render and ``val_performances_every``-th
    validation performance."""

    hidden: tuple[int, ...] = (128, 64)
    max_iter: int = 6
    max_per_class: int = 1500
    mirror_average: bool = False
    alpha: float = 0.3
    seed: int = 0
    performances: int = 600
    data: DataConfig = QUICK_START_DATA
    val_every: int = 6
    val_performances_every: int = 4
    tuning: str = "grid"
    val_stride: int = 3
    stay: tuple[float, ...] = (0.5, 0.7, 0.9)
    power: tuple[float, ...] = (1.0, 2.0)
    margin: tuple[float, ...] = (1.0, 1.5)

    def to_dict(self) -> dict:
        return {**json.loads(json.dumps({k: v for k, v in asdict(self).items() if k != "data"})),
                "data": self.data.to_dict()}


QUICK_START = QuickConfig()


def prepare_quick(root: str | Path | None = None, config: TrainConfig | None = None,
                  quick: QuickConfig = QUICK_START) -> PoseData:
    """The data the quick classifier needs: ``config``'s clips and renders (default:
    ``quick.data``'s), ``quick.performances`` two-part training performances and the
    validation ones (not the test ones)."""
    cfg = config or TrainConfig(data=quick.data)
    t0 = time.perf_counter()
    clips = load_clips(resolve_root(root), cfg.data)
    renders = render_clips(clips, cfg.data, splits=("train", "val"))
    train = [r for r in renders if r.split == "train"]
    val = [r for r in renders if r.split == "val"]
    tt = transition_renders(clips, cfg.data, pairs=quick.performances, split="train",
                            seed=cfg.seed + 1) if quick.performances else []
    tv = transition_renders(clips, cfg.data, pairs=cfg.val_transitions, split="val",
                            seed=cfg.seed + 2) if quick.tuning == "grid" else []
    return PoseData(cfg, clips, train, [], tt, [], time.perf_counter() - t0, val, tv)


def train_quick(data: PoseData, quick: QuickConfig = QUICK_START) -> MLPPoseClassifier:
    """Fit the quick classifier on ``data``'s training renders (and two-part training
    performances); choose its per-class offsets and smoother on the validation renders
    and performances (the test side is not touched). On one BLAS thread: its products are
    small, and on a busy machine a second BLAS thread only waits and spins (twice as fast
    with one, load 9)."""
    cfg = data.config
    clf = MLPPoseClassifier(members=1, hidden=quick.hidden, long=cfg.long, alpha=quick.alpha,
                            mirror_average=quick.mirror_average)
    X, y = training_set(data.train + [t.render for t in data.train_transitions], clf.features,
                        max_per_class=quick.max_per_class, min_per_class=quick.max_per_class // 2, seed=quick.seed,
                        sample_first=True)
    with one_blas_thread():
        clf.fit(X, y, seed=quick.seed, max_iter=quick.max_iter)
        _tune(clf, data, quick)
    clf.meta = {**clf.meta, "trained_on": "rendered motion capture", "quick": quick.to_dict(),
                "config": cfg.to_dict()}
    return clf


def _tune(clf: MLPPoseClassifier, data: PoseData, quick: QuickConfig) -> None:
    if data.val and quick.tuning == "grid":
        choose_smoother(clf, data.val[::quick.val_every], data.val_transitions[::quick.val_performances_every],
                        tune_bias=True,
                        grid={"stay": quick.stay, "power": quick.power, "margin": quick.margin})
    elif data.val:
        # the per-class offsets on every ``val_stride``-th validation frame; the smoother fixed
        Xv, yv = training_set(data.val, clf.features, stride=quick.val_stride, max_per_class=1 << 30,
                              sample_first=True)
        clf.bias = choose_bias(clf.predict_proba(Xv), yv)
        clf.stay, clf.power, clf.margin = quick.stay[0], quick.power[0], quick.margin[0]
        clf.meta = {**clf.meta, "smoother": {"stay": clf.stay, "power": clf.power, "margin": clf.margin,
                                             "bias": [round(float(v), 3) for v in clf.bias]}}


def quick_cache_path(root: Path, config: TrainConfig, quick: QuickConfig = QUICK_START,
                     cache_dir: str | Path | None = None) -> Path:
    h = hashlib.sha256(cache_key(root, config).encode())
    h.update(json.dumps(quick.to_dict(), sort_keys=True).encode())
    return cache_folder(cache_dir) / f"quick-{h.hexdigest()[:16]}.npz"


def quick_classifier(root: str | Path | None = None, config: TrainConfig | None = None,
                     quick: QuickConfig = QUICK_START, cache_dir: str | Path | None = None,
                     data: PoseData | None = None) -> MLPPoseClassifier:
    """The quick classifier of ``config``'s data: from the cache, or trained (from
    ``data`` when given, else rendered now) and cached."""
    cfg = config or TrainConfig(data=quick.data)
    r = resolve_root(root)
    path = quick_cache_path(r, cfg, quick, cache_dir)
    with training_lock(path):
        if path.is_file():
            try:
                clf = load_classifier(path)
                if isinstance(clf, MLPPoseClassifier):
                    return clf
            except Exception:  # a damaged cache is trained again, not trusted
                pass
        data = data if data is not None and data.config == cfg else prepare_quick(r, cfg, quick)
        clf = train_quick(data, quick)
        clf.save(path)
    return clf


class BackgroundTraining:
    """The default classifiers trained and cached by a separate process at low priority.

    Args:
        root: the motion-capture root.
        cache_dir: where the classifiers go (default: :func:`~.default.cache_folder`).
        config: the default configuration (``None``) or :data:`~.default.QUICK` (the tests').
        nice: added to the process's niceness (POSIX).
    """

    def __init__(self, root: str | Path, cache_dir: str | Path | None = None, config: TrainConfig | None = None,
                 nice: int = 10):
        if config is not None and config not in (TrainConfig(), QUICK):
            raise ValueError("the background training knows the default and the quick configuration only")
        self.quick = config == QUICK
        self.root = Path(root)
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.nice = int(nice)
        self.log_path = cache_folder(cache_dir) / "background-training.log"
        self._proc: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.seconds: float | None = None

    def start(self) -> None:
        import motionmatch

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "motionmatch.control.pose.firstuse", str(self.root), "--nice", str(self.nice),
                "--parent", str(os.getpid())]
        if self.cache_dir is not None:
            args += ["--cache-dir", str(self.cache_dir)]
        if self.quick:
            args.append("--quick")
        env = dict(os.environ)
        here = str(Path(motionmatch.__file__).resolve().parents[1])  # this motionmatch, however it was found
        env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        with open(self.log_path, "w") as log:
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          env=env)
        self.started_at = time.monotonic()

    def poll(self) -> int | None:
        """``None`` while it trains, else its exit status (0: trained and cached)."""
        if self._proc is None:
            return None
        rc = self._proc.poll()
        if rc is not None and self.seconds is None:
            self.seconds = time.monotonic() - self.started_at
        return rc

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def error(self) -> str:
        """The last line the process wrote (why it failed)."""
        try:
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no log"
        return lines[-1][-300:] if lines else "no output"

    def stop(self) -> None:
        """End the process (when it still runs) and wait for it."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


def _end_with_parent(parent: int) -> None:
    """End this process once ``parent`` has ended, however it ended (killed too: a viewer
    that died leaves no training behind)."""
    while True:
        time.sleep(2.0)
        if os.getppid() != parent:
            os._exit(1)


def main(argv: list[str] | None = None) -> int:
    """The background process: train and cache the default classifiers."""
    p = argparse.ArgumentParser(prog="python -m motionmatch.control.pose.firstuse",
                                description="train and cache the default pose classifiers (the viewer's background "
                                "training on first use)")
    p.add_argument("root", help="the motion-capture root")
    p.add_argument("--cache-dir", help="where to cache them (default: $MOTIONMATCH_CACHE/pose)")
    p.add_argument("--nice", type=int, default=10, help="niceness to add (default 10)")
    p.add_argument("--quick", action="store_true", help="the tests' quick configuration instead of the default")
    p.add_argument("--parent", type=int, help="end when this process (the viewer) has ended")
    a = p.parse_args(argv)
    if a.nice and hasattr(os, "nice"):
        os.nice(a.nice)
    if a.parent:
        threading.Thread(target=_end_with_parent, args=(a.parent,), daemon=True).start()
    t0 = time.perf_counter()
    default_classifiers(a.root, QUICK if a.quick else None, cache_dir=a.cache_dir)
    print(f"trained and cached the default pose classifiers in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - the background process
    sys.exit(main())
