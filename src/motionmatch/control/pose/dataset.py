"""Training, validation and test data rendered from motion capture.

:func:`load_clips` reads the motion-capture folders of a :class:`DataConfig` (by default
``lafan1-60fps``, ``lafan1``, ``bandai-namco/dataset-1`` and every 4th file of
``bandai-namco/dataset-2`` under the data root), resamples them to 30 Hz, computes their
world keypoints and the facts the labelling rules need (:mod:`.labels`), and splits
them three ways, so that every hyper-parameter is chosen on data the test never sees:

* a clip is a **test** clip when ``crc32(name) % 4 == 0`` (about a quarter, stable);
* of the others, a clip is a **validation** clip when ``crc32(name + ":val") % 5 == 0``
  (about a fifth of them); the rest are **training** clips;
* a kind of motion (creep, dance, jump, punch, run, stand_still, walk) with fewer than
  ``min_test_frames`` test frames gets test material from the training clip richest in
  it (for creep the only one, ``ground1_subject4``): that clip is cut into blocks of
  ``block_s`` (4 s) and every third block goes to the test side, 0.5 s away from the
  training blocks, so every command is tested on motion never trained on, and both
  sides see the take's different styles; the validation side is completed the same way
  (``min_val_frames``), from whole training clips when there are any, else from the
  training blocks of a clip already cut (every third of them, 0.5 s trimmed off each end).

:func:`render_clips` films each split from its own camera azimuths (relative to the
performer's facing): training clips from :data:`TRAIN_AZIMUTHS` (``train_passes``
times, clips with rare motions -- creep, jump, punch -- ``rare_passes`` times, to see
them from more views), validation clips from :data:`VAL_AZIMUTHS` and test clips from
:data:`TEST_AZIMUTHS`, three disjoint sets, and labels every frame. Mirroring swaps
left and right commands, which balances them.

:func:`training_set` turns renders into window features and labels for a classifier,
at most ``max_per_class`` windows per command (smaller commands are repeated up to
``min_per_class``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import json
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from motionmatch.anim.motion import Motion
from motionmatch.anim.resample import resample
from motionmatch.control.pose.features import WINDOW
from motionmatch.control.pose.keypoints import KP, KeypointStream
from motionmatch.control.pose.labels import COMMAND_INDEX, COMMANDS, MotionFacts, label_frames, motion_facts
from motionmatch.control.pose.normalize import NormalizedPoses, normalize_stream
from motionmatch.control.pose.render import RenderSettings, mirror_keypoints, render_keypoints, world_keypoints
from motionmatch.errors import DatasetError

TRAIN_AZIMUTHS: tuple[float, ...] = (0.0, 25.0, -25.0, 70.0, -70.0, 100.0, -100.0)
TEST_AZIMUTHS: tuple[float, ...] = (12.0, -12.0, 45.0, -45.0, 85.0, -85.0)
VAL_AZIMUTHS: tuple[float, ...] = (6.0, -6.0, 35.0, -35.0, 58.0, -58.0, 92.0, -92.0)
SPLITS = ("train", "val", "test")
FAMILIES = ("creep", "dance", "jump", "punch", "run", "stand", "walk")
RARE = ("creep", "jump", "punch")
CACHE_VERSION = 2


@dataclass(frozen=True)
class DataConfig:
    """Which motion capture to render and how.

    ``folders`` are ``(sub-folder of the data root, take every n-th file, file-name
    pattern)``; a file selected twice is read once. ``extra_tags`` add tags to files
    whose stem matches a pattern (e.g. a dance whose name does not say so). With
    ``estimator`` (a model of :mod:`.imitate`, ``"mediapipe"``) one in ``estimator_every``
    renders of the ``estimator_splits`` imitates that estimator instead of adding Gaussian
    noise (frames where the imitated estimator loses the body are unlabelled). With
    ``limb_gain`` (a range, not ``(1, 1)``) one in ``limb_gain_every`` training renders
    has each limb's swing scaled by a gain drawn from it
    (:func:`~motionmatch.control.pose.render.damp_limbs`: what a video estimator does).
    With ``estimator_fps`` (a range of estimates per second, not ``(0, 0)``), one in
    ``estimator_fps_every`` training renders is thinned to an estimator that slow
    (:func:`~motionmatch.control.pose.render.thin_frame_rate`: a loaded machine's).
    """

    folders: tuple[tuple[str, int, str], ...] = (("lafan1-60fps", 1, "*.bvh"), ("lafan1", 1, "*.bvh"),
                                                 ("bandai-namco/dataset-1", 1, "*.bvh"),
                                                 ("bandai-namco/dataset-2", 4, "*.bvh"))
    extra_tags: tuple[tuple[str, str], ...] = ()
    fps: float = 30.0
    test_modulo: int = 4
    val_modulo: int = 5
    min_test_frames: int = 150
    min_val_frames: int = 150
    block_s: float = 4.0
    gap_s: float = 0.5
    train_passes: int = 2
    rare_passes: int = 6
    test_passes: int = 1
    val_passes: int = 1
    seed: int = 0
    train_azimuths: tuple[float, ...] = TRAIN_AZIMUTHS
    test_azimuths: tuple[float, ...] = TEST_AZIMUTHS
    val_azimuths: tuple[float, ...] = VAL_AZIMUTHS
    estimator: str = ""
    estimator_every: int = 2
    limb_gain: tuple[float, float] = (1.0, 1.0)
    limb_gain_every: int = 2
    estimator_fps: tuple[float, float] = (0.0, 0.0)
    estimator_fps_every: int = 2
    estimator_splits: tuple[str, ...] = ("train",)

    def azimuths(self, split: str) -> tuple[float, ...]:
        """The camera azimuths (degrees) of a split."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
        return {"train": self.train_azimuths, "val": self.val_azimuths, "test": self.test_azimuths}[split]

    def passes(self, split: str) -> int:
        """How many times each clip of a split is filmed (before mirroring)."""
        return {"train": self.train_passes, "val": self.val_passes, "test": self.test_passes}[split]

    def to_dict(self) -> dict:
        """The settings as JSON values (a cache key); the fields added after classifiers were
        cached (:data:`_LATER_FIELDS`) only when they differ from their defaults, so those
        classifiers keep their keys."""
        d = json.loads(json.dumps(asdict(self)))
        for k in _LATER_FIELDS:
            if getattr(self, k) == getattr(DataConfig, k):
                del d[k]
        return d


#: fields of :class:`DataConfig` that its dictionary leaves out at their defaults
_LATER_FIELDS = ("estimator_fps", "estimator_fps_every")


@dataclass
class Clip:
    """One clip (or a part of one) at the render rate."""

    name: str
    motion: Motion
    kp: np.ndarray
    facts: MotionFacts
    split: str
    folder: str = ""

    @property
    def num_frames(self) -> int:
        return self.kp.shape[0]

    def part(self, a: int, b: int, split: str, suffix: str) -> Clip:
        return Clip(self.name + suffix, self.motion[a:b], self.kp[a:b], self.facts[a:b], split, self.folder)


@dataclass
class RenderedClip:
    """A clip filmed by the virtual camera: the 2D stream (labels in ``stream.labels``)."""

    name: str
    split: str
    mirrored: bool
    stream: KeypointStream
    cuts: np.ndarray
    azimuth: np.ndarray
    norm: NormalizedPoses | None = field(default=None, repr=False)

    @property
    def labels(self) -> np.ndarray:
        return self.stream.labels

    def normalized(self) -> NormalizedPoses:
        if self.norm is None:
            self.norm = normalize_stream(self.stream)
        return self.norm


def family(label: str) -> str:
    return "stand" if label == "stand_still" else label.split("_")[0]


def _family_labels(facts: MotionFacts) -> np.ndarray:
    """Camera-free labels: every moving frame counted as moving toward the camera."""
    v = facts.velocity
    n = np.linalg.norm(v, axis=1, keepdims=True)
    fwd = np.where(n > 1e-9, -v / np.maximum(n, 1e-9), np.array([0.0, 0.0, -1.0]))
    right = np.cross(fwd, np.array([0.0, 1.0, 0.0]))
    lab = label_frames(facts, fwd, right)
    return np.array([family(x) if x else "" for x in lab])


def data_files(root: Path, config: DataConfig) -> list[tuple[str, Path]]:
    """``(folder, file)`` pairs the config selects, sorted."""
    out: list[tuple[str, Path]] = []
    seen: set[Path] = set()
    for sub, every, pattern in config.folders:
        folder = Path(root) / sub
        if not folder.is_dir():
            raise DatasetError(f"{folder}: not found; the pose data needs the motion capture under the data root "
                               "($MOTIONMATCH_DATA, default ../shared/data)")
        files = sorted(folder.rglob(pattern))
        for f in files[::max(1, every)]:
            if f not in seen:
                seen.add(f)
                out.append((sub, f))
    if not out:
        raise DatasetError(f"{root}: no BVH files in {[f for f, _ in config.folders]}")
    return out


def inputs_hash(root: Path, config: DataConfig) -> str:
    """A hash of the selected files (names and sizes), the config and the label rules' version."""
    h = hashlib.sha256()
    h.update(json.dumps(config.to_dict(), sort_keys=True).encode())
    from motionmatch import __version__

    h.update(__version__.encode())
    h.update(str(CACHE_VERSION).encode())
    for sub, f in data_files(root, config):
        h.update(f"{sub}/{f.name}:{f.stat().st_size}".encode())
    return h.hexdigest()[:16]


def load_clips(root: str | Path, config: DataConfig | None = None, progress: bool = False) -> list[Clip]:
    """Read, resample, key-point and split the clips of ``config`` (module docstring)."""
    from tqdm.auto import tqdm

    from motionmatch.anim import load_bvh
    from motionmatch.datasets import tags_from_name

    cfg = config or DataConfig()
    clips: list[Clip] = []
    for sub, f in tqdm(data_files(Path(root), cfg), desc="clips", unit="file", disable=not progress):
        m = load_bvh(f)
        tags = list(tags_from_name(f.stem))
        tags += [t for pat, t in cfg.extra_tags if fnmatch.fnmatchcase(f.stem, pat) and t not in tags]
        m.tags = tuple(tags)
        if abs(m.fps - cfg.fps) > 1e-6:
            m = resample(m, cfg.fps)
        if m.num_frames < 2 * WINDOW:
            continue
        kp = world_keypoints(m)
        split = clip_split(f.stem, cfg)
        clips.append(Clip(f.stem, m, kp, motion_facts(m, kp), split, sub))
    clips = _ensure_coverage(clips, cfg, "test", cfg.min_test_frames)
    return _ensure_coverage(clips, cfg, "val", cfg.min_val_frames)


def clip_split(name: str, config: DataConfig) -> str:
    """``"test"``, ``"val"`` or ``"train"``: the split of a clip by its name (module docstring)."""
    if zlib.crc32(name.encode()) % config.test_modulo == 0:
        return "test"
    if config.val_modulo > 0 and zlib.crc32(f"{name}:val".encode()) % config.val_modulo == 0:
        return "val"
    return "train"


def _ensure_coverage(clips: list[Clip], cfg: DataConfig, split: str, min_frames: int) -> list[Clip]:
    """Cut training clips into blocks until every kind of motion has ``min_frames`` frames
    in ``split`` (module docstring); whole clips are cut before blocks of cut ones."""
    fam = {c.name: _family_labels(c.facts) for c in clips}
    out = list(clips)
    for f in FAMILIES:
        n_have = sum(int((fam[c.name] == f).sum()) for c in out if c.split == split)
        if n_have >= min_frames:
            continue
        cands = [c for c in out if c.split == "train" and (fam.get(c.name, np.zeros(0)) == f).sum() > 0]
        if not cands:
            continue
        src = max(cands, key=lambda c: ("@" not in c.name, int((fam[c.name] == f).sum())))
        if "@" in src.name:  # a block of a clip cut before: every third of its training blocks
            base = src.name.split("@")[0] + "@"
            sibs = [c for c in out if c.split == "train" and c.name.startswith(base)]
            gap = round(cfg.gap_s * cfg.fps)
            for c in sibs[1::3]:
                if c.num_frames - 2 * gap < 2 * WINDOW:
                    continue
                held = Clip(c.name.replace("@", f"@{split[0]}", 1), c.motion[gap:c.num_frames - gap],
                            c.kp[gap:-gap], c.facts[gap:c.num_frames - gap], split, c.folder)
                out[out.index(c)] = held
                fam[held.name] = fam[c.name][gap:c.num_frames - gap]
            continue
        parts = _blocks(src, cfg, split)
        if len(parts) < 2:
            continue
        out.remove(src)
        out.extend(p for p, _ in parts)
        for p, (a, b) in parts:
            fam[p.name] = fam[src.name][a:b]
    return out


def _blocks(src: Clip, cfg: DataConfig, split: str = "test") -> list[tuple[Clip, tuple[int, int]]]:
    """``src`` cut into blocks of ``block_s`` seconds, every third one (the 2nd, 5th, ...)
    a ``split`` block; the ``gap_s`` before and after each such block is dropped."""
    n = round(cfg.block_s * cfg.fps)
    gap = round(cfg.gap_s * cfg.fps)
    F = src.num_frames
    out = []
    for k, a in enumerate(range(0, F, n)):
        b = min(F, a + n)
        held = k % 3 == 1
        if held:
            a, b = a + gap, b - gap
        elif k % 3 == 2:
            a = a + gap if a > 0 else a
        if b - a < 2 * WINDOW:
            continue
        out.append((src.part(a, b, split if held else "train", f"@{split[0]}{k}"), (a, b)))
    return out if any(p.split == split for p, _ in out) else []


def render_clip(clip: Clip, settings: RenderSettings, rng: np.random.Generator, mirrored: bool = False,
                azimuth: float | None = None) -> RenderedClip:
    kp = mirror_keypoints(clip.kp) if mirrored else clip.kp
    facts = clip.facts.mirrored() if mirrored else clip.facts
    stream, info = render_keypoints(kp, settings.fps, settings, rng, azimuth)
    stream.labels = label_frames(facts, info.cam_forward, info.cam_right)
    if settings.estimator:   # no body, no label
        stream.labels[~stream.present()[:, [KP["left_hip"], KP["right_hip"], KP["left_shoulder"],
                                            KP["right_shoulder"]]].all(axis=1)] = ""
    stream.meta.update({"clip": clip.name, "mirrored": mirrored})
    return RenderedClip(clip.name + ("~m" if mirrored else ""), clip.split, mirrored, stream, info.cuts, info.azimuth_deg)


def render_clips(clips: list[Clip], config: DataConfig | None = None, splits: tuple[str, ...] = SPLITS,
                 settings: RenderSettings | None = None) -> list[RenderedClip]:
    """Film every clip of ``splits`` and its mirror image (module docstring)."""
    cfg = config or DataConfig()
    base = settings or RenderSettings(fps=cfg.fps)
    out = []
    for split in splits:
        s = replace(base, fps=cfg.fps, azimuths_deg=cfg.azimuths(split))
        passes = cfg.passes(split)
        rng = np.random.default_rng([cfg.seed, {"train": 0, "test": 1, "val": 2}[split]])
        imitate = bool(cfg.estimator) and cfg.estimator_every > 0 and split in cfg.estimator_splits
        damp = split == "train" and tuple(cfg.limb_gain) != (1.0, 1.0) and cfg.limb_gain_every > 0
        thin = split == "train" and tuple(cfg.estimator_fps) != (0.0, 0.0) and cfg.estimator_fps_every > 0
        # the settings of a render: (damped, imitating the estimator, thinned) -> RenderSettings
        variant = {(dm, e, th): replace(s, limb_gain=tuple(cfg.limb_gain) if dm else s.limb_gain,
                                        estimator=cfg.estimator if e else s.estimator,
                                        estimator_fps=tuple(cfg.estimator_fps) if th else s.estimator_fps)
                   for dm in (False, True) for e in (False, True) for th in (False, True)}
        for ci, c in enumerate(clips):
            if c.split != split:
                continue
            n = passes
            if split == "train" and cfg.rare_passes > passes:
                fam = _family_labels(c.facts)
                if sum(int((fam == f).sum()) for f in RARE) >= c.facts.fps:
                    n = cfg.rare_passes
            for p in range(n):
                for mirrored in (False, True):
                    est = imitate and (ci + p + int(mirrored)) % cfg.estimator_every == 0
                    damped = damp and (ci + p + int(mirrored)) % cfg.limb_gain_every == 0
                    # (by another count than the damping's, so that every mix of the two occurs)
                    thinned = thin and ((ci + p) // 2 + int(mirrored)) % cfg.estimator_fps_every == 0
                    out.append(render_clip(c, variant[damped, est, thinned], rng, mirrored))
    return out


def scored_frames(r: RenderedClip, window: int = WINDOW) -> np.ndarray:
    """``[F]`` bool: labelled frames with a full window since the last camera cut."""
    norm = r.normalized()
    start = np.maximum.accumulate(np.where(norm.reset | r.cuts, np.arange(len(norm)), 0))
    full = np.arange(len(norm)) - start >= window - 1
    return full & (r.labels != "")


def training_set(renders: list[RenderedClip], features, stride: int = 2, max_per_class: int = 4000,
                 min_per_class: int = 0, seed: int = 0, sample_first: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)``: ``features(norm, indices)`` of every ``stride``-th scored frame of the
    training renders, at most ``max_per_class`` per command (chosen at random), commands
    with fewer than ``min_per_class`` repeated up to it. With ``sample_first`` the frames
    are chosen (the same frames: the choice reads only the labels) before the features are
    computed, only for them: the same set, a few times faster where most frames are dropped."""
    if sample_first:
        return _sampled_training_set(renders, features, stride, max_per_class, min_per_class, seed)
    Xs, ys = [], []
    for r in renders:
        ok = scored_frames(r)
        idx = np.flatnonzero(ok)[::stride]
        if idx.size == 0:
            continue
        Xs.append(features(r.normalized(), idx))
        ys.append(np.array([COMMAND_INDEX[x] for x in r.labels[idx]]))
    if not Xs:
        raise DatasetError("no labelled training frames")
    X, y = np.concatenate(Xs), np.concatenate(ys)
    rng = np.random.default_rng(seed)
    k = _balanced(y, max_per_class, min_per_class, rng)
    return X[k], y[k]


def _balanced(y: np.ndarray, max_per_class: int, min_per_class: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``y [N]`` (command indices) with each command's frames drawn down to
    ``max_per_class`` (without replacement) or up to ``min_per_class`` (repeating), each
    command's in ascending order, commands in order."""
    keep = []
    for c in range(len(COMMANDS)):
        i = np.flatnonzero(y == c)
        if i.size == 0:
            continue
        if i.size > max_per_class:
            i = rng.choice(i, max_per_class, replace=False)
        elif i.size < min_per_class:
            i = np.concatenate([i, rng.choice(i, min_per_class - i.size, replace=True)])
        keep.append(np.sort(i))
    return np.concatenate(keep)


def _sampled_training_set(renders, features, stride, max_per_class, min_per_class, seed):
    where = []                                   # (render, frame) of every candidate frame
    labels = []
    for k, r in enumerate(renders):
        idx = np.flatnonzero(scored_frames(r))[::stride]
        where.append(np.stack([np.full(idx.size, k), idx], axis=1))
        labels.append(np.array([COMMAND_INDEX[x] for x in r.labels[idx]], dtype=np.int64))
    if not where or not sum(len(w) for w in where):
        raise DatasetError("no labelled training frames")
    where_a, y = np.concatenate(where), np.concatenate(labels)
    rng = np.random.default_rng(seed)
    k = _balanced(y, max_per_class, min_per_class, rng)
    chosen = where_a[k]
    X = None
    for r in np.unique(chosen[:, 0]):
        rows = np.flatnonzero(chosen[:, 0] == r)
        frames, back = np.unique(chosen[rows, 1], return_inverse=True)
        f = features(renders[r].normalized(), frames)
        if X is None:
            X = np.empty((len(chosen), f.shape[1]), dtype=f.dtype)
        X[rows] = f[back]
    return X, y[k]


def class_counts(renders: list[RenderedClip], split: str | None = None) -> dict[str, int]:
    """Scored frames per command (labelled, full window) in the renders of ``split``."""
    c: Counter = Counter()
    for r in renders:
        if split is None or r.split == split:
            c.update(r.labels[scored_frames(r)].tolist())
    return {k: int(c.get(k, 0)) for k in COMMANDS}


# ----------------------------------------------------------------------------- composites
def _yaw_of(kp: np.ndarray) -> float:
    from motionmatch.control.pose.render import body_facing

    f = body_facing(kp).mean(axis=0)
    return float(np.arctan2(f[0], f[2]))


def _turn(kp: np.ndarray, yaw: float, pivot: np.ndarray) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    q = kp - pivot
    out = np.stack([c * q[..., 0] + s * q[..., 2], q[..., 1], -s * q[..., 0] + c * q[..., 2]], axis=-1)
    return out + pivot


def compose(segments: list[tuple[Clip, int, int]], blend: int = 4) -> tuple[np.ndarray, MotionFacts, np.ndarray]:
    """One performance from parts of clips, one after another.

    Each part is turned about the vertical to face where the previous part ended facing,
    moved to continue from where it ended, and its first ``blend`` frames are eased from
    the previous part's last pose. Returns world keypoints ``[F, K, 3]``, the parts'
    :class:`MotionFacts` (turned the same way) and the part index of every frame.
    """
    kps, facts, seg = [], [], []
    for i, (clip, a, b) in enumerate(segments):
        kp = clip.kp[a:b].copy()
        fa = clip.facts[a:b]
        if kps:
            prev = kps[-1]
            yaw = _yaw_of(prev[-3:]) - _yaw_of(kp[:3])
            hips0 = 0.5 * (kp[0, 7] + kp[0, 8])
            pivot = np.array([hips0[0], 0.0, hips0[2]])
            kp = _turn(kp, yaw, pivot)
            fa = fa.rotated(yaw)
            step = facts[-1].velocity[-1] / clip.facts.fps
            hp = 0.5 * (prev[-1, 7] + prev[-1, 8])
            hn = 0.5 * (kp[0, 7] + kp[0, 8])
            shift = np.array([hp[0] - hn[0], 0.0, hp[2] - hn[2]]) + step
            kp = kp + shift
            delta = prev[-1] + step - kp[0]
            n = min(blend, kp.shape[0])
            w = np.linspace(0.0, 1.0, n + 1)[:n]
            w = w * w * (3 - 2 * w)
            kp[:n] += delta[None] * (1.0 - w)[:, None, None]
        kps.append(kp)
        facts.append(fa)
        seg.append(np.full(kp.shape[0], i))
    return np.concatenate(kps), MotionFacts.concatenate(facts), np.concatenate(seg)


def steady_segments(clips: list[Clip], min_s: float = 1.5, split: str = "test") -> dict[str, list[tuple[Clip, int, int]]]:
    """Runs of at least ``min_s`` seconds where the camera-free kind of motion (creep,
    dance, jump, punch, run, stand, walk) stays the same, per kind, from ``split`` clips.
    Jumps are taken whole with 0.5 s of lead-in, whatever their length."""
    out: dict[str, list] = {f: [] for f in FAMILIES}
    for c in clips:
        if c.split != split:
            continue
        fam = _family_labels(c.facts)
        n_min = round(min_s * c.facts.fps)
        d = np.flatnonzero(np.r_[True, fam[1:] != fam[:-1], True])
        for a, b in itertools.pairwise(d):
            f = fam[a]
            if f == "jump":
                lead = int(0.5 * c.facts.fps)
                if a >= lead:
                    out[f].append((c, a - lead, b))
            elif f and b - a >= n_min:
                out[f].append((c, a, b))
    return out
