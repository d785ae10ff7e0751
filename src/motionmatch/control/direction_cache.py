"""The default DirectionNet: trained on this machine on first use, from the user's motion data, and cached.

No trained network ships in the package: the paper's network learns from LAFAN1, whose
licence (CC BY-NC-ND 4.0) forbids distributing anything derived from it. So the first
``motionmatch follow --facing net`` (or :func:`default_direction_net`) trains one from the
user's own copy of the data (:data:`DEFAULT_RECIPE`: ``$MOTIONMATCH_DATA/lafan1-60fps``,
mirrored, locomotion only, subject 4 held out, 30 epochs, the past facings fed back; a
few minutes on one CPU thread, with a progress bar; needs PyTorch, ``pip install 'motionmatch[net]'``) and keeps it in
``$MOTIONMATCH_CACHE/direction-net`` (default: the user cache folder) under a hash of the
data files (names and sizes), the recipe and the package version. Later uses load it
(numpy only); a change of any of those trains a new one. Training is deterministic for a
seed (:func:`~motionmatch.control.direction_net.train_direction_net`), so every machine
with the same data, recipe and PyTorch gets the same weights.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from motionmatch._files import training_lock
from motionmatch.control.direction_net import (
    DirectionNet,
    DirectionNetConfig,
    require_torch,
    train_direction_net,
)
from motionmatch.errors import DatasetError, MotionMatchError

__all__ = ["DEFAULT_RECIPE", "DirectionNetRecipe", "cache_path", "cached_direction_net", "default_direction_net"]

CACHE_FOLDER = "direction-net"


@dataclass(frozen=True)
class DirectionNetRecipe:
    """What the default DirectionNet is trained on, and how.

    Attributes:
        folder: sub-folder of the data root holding the BVH clips (all of them, read
            recursively).
        pattern: file-name pattern of the clips to read.
        mirror: add each clip's mirror image (left and right swapped).
        tags: tag query of the clips to learn from (any frame of a clip admitted).
        holdout: leave out the clips whose name contains this (``None``: none).
        hidden: GRU units.
        feedback: the past facings fed back (the paper's formulation,
            :class:`~motionmatch.control.direction_net.DirectionNetConfig`); ``False``: the
            first format.
        epochs, stride, seed: training epochs, window stride (steps) and seed.
    """

    folder: str = "lafan1-60fps"
    pattern: str = "*.bvh"
    mirror: bool = True
    tags: str | None = "!dance & !creep & !jump"
    holdout: str | None = "subject4"
    hidden: int = 30
    feedback: bool = True
    epochs: int = 30
    stride: int = 5
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


#: The default network: the recipe of the one the package shipped before (benchmarks/README.md,
#: "Facing"), now with its past facings fed back ("DirectionNet with its past facings").
DEFAULT_RECIPE = DirectionNetRecipe()


def _root(root: str | Path | None) -> Path:
    if root is not None:
        return Path(root)
    from motionmatch.datasets import data_root

    r = data_root()
    if r is None:
        raise DatasetError("DirectionNet is trained on first use from motion capture, and no motion data was "
                           "found: set MOTIONMATCH_DATA to the data folder (with lafan1-60fps), or pass --net NET.npz")
    return r


def _files(root: Path, recipe: DirectionNetRecipe) -> list[Path]:
    folder = root / recipe.folder
    files = sorted(folder.rglob(recipe.pattern)) if folder.is_dir() else []
    if not files:
        raise DatasetError(f"{folder}: no {recipe.pattern} clips to train DirectionNet from (it is trained on first "
                           "use from LAFAN1, whose licence forbids shipping a trained network): set MOTIONMATCH_DATA "
                           "to the data folder holding lafan1-60fps, or pass --net NET.npz")
    return files


def cache_key(root: Path, recipe: DirectionNetRecipe) -> str:
    """A hash of the recipe, the package version, the network format and the clips (names and sizes)."""
    from motionmatch import __version__
    from motionmatch.control.direction_net import FORMAT

    h = hashlib.sha256()
    h.update(json.dumps(recipe.to_dict(), sort_keys=True).encode())
    h.update(f"{__version__}:{FORMAT}".encode())
    for f in _files(root, recipe):
        h.update(f"{f.relative_to(root)}:{f.stat().st_size}".encode())
    return h.hexdigest()[:16]


def cache_path(root: str | Path | None = None, recipe: DirectionNetRecipe = DEFAULT_RECIPE,
               cache_dir: str | Path | None = None) -> Path:
    """Where the network of ``recipe`` trained on the data under ``root`` is cached."""
    r = _root(root)
    if cache_dir is None:
        from motionmatch.datasets import default_cache_dir

        cache_dir = default_cache_dir() / CACHE_FOLDER
    return Path(cache_dir) / f"direction-net-{cache_key(r, recipe)}.npz"


def cached_direction_net(root: str | Path | None = None, recipe: DirectionNetRecipe = DEFAULT_RECIPE,
                         cache_dir: str | Path | None = None) -> DirectionNet | None:
    """The cached network of ``recipe``, or ``None`` when it is not trained yet (a damaged
    cache file is ``None`` too: it is trained again, not trusted)."""
    path = cache_path(root, recipe, cache_dir)
    if not path.is_file():
        return None
    try:
        return DirectionNet.load(path)
    except (MotionMatchError, ValueError, OSError):
        return None


def default_direction_net(root: str | Path | None = None, recipe: DirectionNetRecipe = DEFAULT_RECIPE,
                          cache_dir: str | Path | None = None, retrain: bool = False, progress: bool = False,
                          log: Callable[[str], None] | None = None) -> DirectionNet:
    """The default DirectionNet: from the cache, else trained now from the clips under
    ``root`` (default ``$MOTIONMATCH_DATA``) and cached (module doc). ``log`` receives one
    line before training starts (default: stderr); ``progress`` shows a progress bar.

    Raises:
        DatasetError: no data to train from (and nothing cached).
        MissingTorchError: training is needed and PyTorch is not installed.
    """
    r = _root(root)
    path = cache_path(r, recipe, cache_dir)
    if not retrain and (net := cached_direction_net(r, recipe, cache_dir)) is not None:
        return net
    require_torch()  # before the data are read: say what is missing at once
    with training_lock(path):  # one process trains; the others wait, then read its cache
        if not retrain and (net := cached_direction_net(r, recipe, cache_dir)) is not None:
            return net
        say = log if log is not None else (lambda m: print(m, file=sys.stderr, flush=True))
        say(f"training DirectionNet once on this machine from {r / recipe.folder} ({recipe.epochs} epochs, a few "
            f"minutes; no trained network ships with motionmatch, as LAFAN1's licence forbids it); cached in "
            f"{path.parent}")
        net = _train(r, recipe, progress)
        net.save(path)
    return net


def _train(root: Path, recipe: DirectionNetRecipe, progress: bool) -> DirectionNet:
    """Build the clips' database (as ``motionmatch train-direction-net --data`` does) and train."""
    from motionmatch.database import MotionDatabase
    from motionmatch.datasets import load_folder

    motions = load_folder(root / recipe.folder, pattern=recipe.pattern, progress=progress)
    db = MotionDatabase.build(motions, mirror_copies=recipe.mirror)
    config = DirectionNetConfig(hidden=recipe.hidden, feedback=recipe.feedback)
    return train_direction_net(db, config=config, epochs=recipe.epochs,
                               stride=recipe.stride, seed=recipe.seed, tags=recipe.tags, holdout=recipe.holdout,
                               progress=progress)
