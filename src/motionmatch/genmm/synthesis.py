"""GenMM on motions: examples in, new motions out (settings, keyframes, completion, loops)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from motionmatch.anim.bvh import load_bvh
from motionmatch.anim.motion import Motion
from motionmatch.anim.resample import resample
from motionmatch.errors import MotionError, SkeletonError
from motionmatch.genmm._backend import get_backend
from motionmatch.genmm.engine import (
    ColumnConstraint,
    Engine,
    EngineSettings,
    FrameConstraint,
    PartData,
    ProgressCallback,
    RunInfo,
)
from motionmatch.genmm.parts import PartsSpec, find_joint, resolve_joints, resolve_parts
from motionmatch.genmm.rates import check_rate
from motionmatch.genmm.representation import (
    FeatureLayout,
    contact_labels,
    decode,
    detect_feet,
    encode,
    rotation_6d,
)

__all__ = ["Completion", "GenMM", "GenMMConfig", "GenMMResult", "Keyframes", "load_examples", "synthesize"]


@dataclass(frozen=True)
class GenMMConfig:
    """Settings of a GenMM synthesis (defaults: the paper's).

    Attributes:
        patch_size: frames per patch (11).
        alpha: completeness knob (0.01): patch distances (mean squared difference per
            value) are divided by ``alpha + `` the example patch's smallest distance to the
            current synthesis; smaller values push every example patch into the output.
            ``None`` disables the normalisation (plain nearest neighbours).
        iterations: match-and-blend iterations per stage (3).
        pyramid_factor: length ratio between consecutive stages (0.75).
        coarse_ratio: the coarsest stage's longest example is ``coarse_ratio * patch_size``
            frames (5, i.e. 55 frames).
        noise_sigma: the coarsest stage starts from the coarse examples plus Gaussian noise
            of standard deviation ``noise_sigma`` in feature units (6D rotation components
            lie in [-1, 1]), wrapped into (-1, 1), as the authors' code (10: pure noise,
            nothing of the examples left, the paper's start). 0 starts from the examples
            themselves.
        fps: frame rate of synthesis and output (30, the rate the defaults were tuned for;
            examples at other rates are resampled by slerp; one at an implausible rate,
            outside :data:`~motionmatch.genmm.rates.PLAUSIBLE_FPS`, is warned about, or
            refused when resampling would blow up its frame count: see
            :mod:`~motionmatch.genmm.rates`). ``None``: the examples' own rate (they must
            agree), no resampling.
        root_weight: weight of the root's velocity and height features (see
            :mod:`motionmatch.genmm.representation`).
        contacts: add foot-contact labels to the features (feet found by
            :func:`~motionmatch.genmm.representation.detect_feet` or given in ``feet``).
        contact_weight: weight of the contact labels.
        feet: foot joints (names or indices) for the contact labels; ``None`` detects them.
        device: ``"cpu"`` (numpy), ``"torch"`` (PyTorch on the CPU) or ``"cuda"``/``"cuda:N"``.
        dtype: working precision of the distance computations, ``"float32"`` or ``"float64"``
            (blending is always float64).
        block_mb: memory for patch distances, in MiB (256). Distances are computed in
            cache-sized tiles; when all of a stage's distances fit in ``block_mb`` they are
            kept for the second step of the matching, otherwise recomputed (slower, but the
            memory stays bounded however long the output).
        threads: CPU threads of a synthesis on ``device="cpu"`` (``None``: one per core
            this process may use). A seed gives the same output on any number (see
            :mod:`motionmatch.genmm._cpu`). While it runs, numpy's BLAS is held to one
            thread per call where ``threadpoolctl`` is installed (the synthesis calls it
            from its own threads).
        vote_sigma: ``None`` (default): average voting, the paper's (a frame is the mean of
            the example frames the patches covering it put there). A number: those frames
            weighted by a Gaussian of ``vote_sigma`` frames around each patch's centre, so
            a frame takes most from the patches centred near it (less blur). Measured on
            the genmm examples (benchmarks/README.md, "GenMM set diversity"): more diverse
            on the elephant, less coverage on the styled walk; not the default.
    """

    patch_size: int = 11
    alpha: float | None = 0.01
    iterations: int = 3
    pyramid_factor: float = 0.75
    coarse_ratio: float = 5.0
    noise_sigma: float = 10.0
    fps: float | None = 30.0
    root_weight: float = 1.0
    contacts: bool = False
    contact_weight: float = 1.0
    feet: tuple[str | int, ...] | None = None
    device: str = "cpu"
    dtype: str = "float32"
    block_mb: float = 256.0
    threads: int | None = None
    vote_sigma: float | None = None

    def __post_init__(self) -> None:
        if self.root_weight <= 0:
            raise ValueError(f"root_weight must be positive, got {self.root_weight}")
        if self.contact_weight <= 0:
            raise ValueError(f"contact_weight must be positive, got {self.contact_weight}")
        if self.noise_sigma < 0:
            raise ValueError(f"noise_sigma must be >= 0, got {self.noise_sigma}")
        if self.fps is not None and not self.fps > 0:
            raise ValueError(f"fps must be positive (or None for the examples' rate), got {self.fps}")
        if self.block_mb <= 0:
            raise ValueError(f"block_mb must be positive, got {self.block_mb}")
        if self.vote_sigma is not None and not self.vote_sigma > 0:
            raise ValueError(f"vote_sigma must be positive (or None for average voting), got {self.vote_sigma}")
        if self.threads is not None and (isinstance(self.threads, bool) or int(self.threads) != self.threads
                                         or self.threads < 1):
            raise ValueError(f"threads must be a whole number >= 1 (or None for every core), got {self.threads}")

    def engine_settings(self) -> EngineSettings:
        return EngineSettings(self.patch_size, self.alpha, self.iterations, self.pyramid_factor, self.coarse_ratio,
                              int(self.block_mb * (1 << 20)), None if self.threads is None else int(self.threads),
                              None if self.vote_sigma is None else float(self.vote_sigma))


def _config(config: GenMMConfig | None, overrides: dict) -> GenMMConfig:
    cfg = config or GenMMConfig()
    names = {f.name for f in fields(GenMMConfig)}
    bad = sorted(set(overrides) - names)
    if bad:
        raise TypeError(f"unknown GenMM settings {bad}; known: {sorted(names)}")
    if "feet" in overrides and overrides["feet"] is not None:
        overrides["feet"] = tuple(overrides["feet"])
    return replace(cfg, **overrides) if overrides else cfg


def load_examples(examples: Motion | str | Path | Sequence[Motion | str | Path]) -> list[Motion]:
    """Motions from Motions and/or BVH paths."""
    if isinstance(examples, (Motion, str, Path)):
        examples = [examples]
    out = []
    for e in examples:
        out.append(e if isinstance(e, Motion) else load_bvh(e))
    if not out:
        raise MotionError("GenMM needs at least one example clip")
    return out


def _at_fps(motions: list[Motion], fps: float | None) -> tuple[list[Motion], float]:
    """The clips at ``fps`` frames per second (resampled; a clip at an implausible rate is
    warned about or refused first, see :mod:`.rates`) and that rate; ``None``: the clips'
    own rate, which must be the same for all."""
    if fps is None:
        rates = sorted({m.fps for m in motions})
        if max(rates) - min(rates) > 1e-6:
            raise MotionError(f"the examples have different frame rates ({', '.join(f'{r:g}' for r in rates)}); "
                              "pass fps=... to resample them to one")
        return motions, motions[0].fps
    for m in motions:
        check_rate(m, fps)
    return [m if abs(m.fps - fps) < 1e-9 else resample(m, fps) for m in motions], float(fps)


@dataclass
class Keyframes:
    """Poses pinned at given times of the output (keyframe-guided generation).

    Attributes:
        motion: the key poses, one per frame. Its skeleton may be a reduced one: its joints
            are matched to the examples' by name (namespace prefixes and case ignored), and
            only those joints are pinned; the others are synthesized freely.
        times: ``[K]`` when each key is, in **seconds** from the output's first frame
            (frame ``round(t * fps)``). Give either ``times`` or ``frames``.
        frames: ``[K]`` output frame indices of the keys instead.
        joints: the key joints to pin (names in ``motion``'s skeleton; ``"Name*"`` for a
            subtree); default every joint that exists in the examples' skeleton.
        pin_root_height: also pin the root's height (its ground position follows from the
            synthesized velocities and is not pinned).

    A BVH file of key poses (:meth:`from_bvh`) puts key ``i`` at ``i * Frame Time`` seconds
    unless told otherwise: its frame time is read as the spacing of the keys. The sparse
    keyframe file of the examples says ``Frame Time: 1.0``, i.e. one key per second.
    """

    motion: Motion
    times: np.ndarray | None = None
    frames: np.ndarray | None = None
    joints: Sequence[str | int] | None = None
    pin_root_height: bool = True

    def __post_init__(self) -> None:
        K = self.motion.num_frames
        if (self.times is None) == (self.frames is None):
            raise ValueError("Keyframes need exactly one of times (seconds) or frames (output frame indices)")
        arr = np.asarray(self.times if self.times is not None else self.frames, dtype=np.float64).reshape(-1)
        if arr.shape[0] != K:
            raise ValueError(f"{K} key poses but {arr.shape[0]} key times/frames")
        if np.any(arr < 0) or not np.all(np.isfinite(arr)):
            raise ValueError("key times/frames must be finite and >= 0")
        if self.times is not None:
            self.times = arr
        else:
            self.frames = np.round(arr).astype(np.int64)

    @classmethod
    def from_bvh(cls, path: str | Path, *, times: Sequence[float] | None = None, frames: Sequence[int] | None = None,
                 spacing: float | None = None, **kw) -> Keyframes:
        """Keys from a BVH file of poses: at ``times`` (s), ``frames``, every ``spacing``
        seconds, or (default) every ``Frame Time`` of the file."""
        m = load_bvh(path)
        if times is None and frames is None:
            step = float(spacing) if spacing is not None else 1.0 / m.fps
            times = np.arange(m.num_frames) * step
        return cls(m, times=None if times is None else np.asarray(times, float),
                   frames=None if frames is None else np.asarray(frames), **kw)

    @classmethod
    def from_motion(cls, motion: Motion, at_frames: Sequence[int], *, times: Sequence[float] | None = None,
                    frames: Sequence[int] | None = None, **kw) -> Keyframes:
        """Keys taken from frames ``at_frames`` of ``motion`` (e.g. example poses)."""
        sub = motion[list(at_frames)]
        return cls(sub, times=None if times is None else np.asarray(times, float),
                   frames=None if frames is None else np.asarray(frames), **kw)

    def output_frames(self, fps: float) -> np.ndarray:
        """``[K]`` output frame indices of the keys at ``fps``."""
        if self.frames is not None:
            return np.asarray(self.frames, dtype=np.int64)
        return np.round(self.times * fps).astype(np.int64)


@dataclass
class Completion:
    """A partial-body motion to complete (motion completion).

    Attributes:
        motion: a clip of the examples' skeleton (joints matched by name) holding the given
            body part's motion; its length (at the synthesis rate) is the output's length.
        joints: the given joints (names or indices; ``"Name*"`` for a subtree). Their
            rotations (and, for the root, its translation) are kept exactly; the rest of
            the body is synthesized around them.
    """

    motion: Motion
    joints: Sequence[str | int]


@dataclass
class GenMMResult:
    """One synthesized motion.

    Attributes:
        motion: the motion, on the examples' skeleton, at the synthesis frame rate.
        contacts: ``[F, K]`` bool foot contacts of ``feet`` (when contacts are on), else ``None``.
        feet: the foot joints of the contact columns.
        features: ``[F, D]`` the synthesized features.
        info: stage lengths and timing of the synthesis.
        seed: the seed used (``None`` when a Generator was passed).
    """

    motion: Motion
    contacts: np.ndarray | None
    feet: tuple[int, ...]
    features: np.ndarray
    info: RunInfo
    seed: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def synthesis_s(self) -> float:
        """Seconds spent synthesizing (features in, features out; no file I/O)."""
        return self.info.seconds


class GenMM:
    """Generative motion matching from a few examples.

    Build once for a set of examples, then call :meth:`sample` for as many outputs as
    wanted (the example pyramid is prepared once). ::

        gen = GenMM(["salsa.bvh"])
        out = gen.sample(seed=1).motion           # twice the example's length, 30 fps
        save_bvh(out, "salsa_new.bvh")

    Args:
        examples: Motions or BVH paths of one skeleton (several clips: patches come from
            all of them, and completeness covers all of them).
        config: a :class:`GenMMConfig`; keyword arguments override its fields.
        parts: skeleton-aware patches: ``None`` (whole body, the default), ``"auto"``
            (trunk and limbs, :func:`~motionmatch.genmm.parts.auto_parts`), or joint lists
            (:func:`~motionmatch.genmm.parts.resolve_parts`).
    """

    def __init__(self, examples, config: GenMMConfig | None = None, *, parts: PartsSpec = None, **overrides):
        cfg = _config(config, overrides)
        motions, fps = _at_fps(load_examples(examples), cfg.fps)
        skel = motions[0].skeleton
        feet: tuple[int, ...] = ()
        feet_for_parts: list[int] = []
        if cfg.contacts or parts == "auto":
            feet_for_parts = (resolve_joints(skel, cfg.feet) if cfg.feet is not None else detect_feet(motions[0]))
        if cfg.contacts:
            if not feet_for_parts:
                raise SkeletonError(f"{motions[0].name}: no foot joints found for contact labels; pass feet=[...]")
            feet = tuple(feet_for_parts)
        layout = FeatureLayout.build(motions, root_weight=cfg.root_weight, contact_weight=cfg.contact_weight,
                                     feet=feet if cfg.contacts else None)
        features = [encode(m, layout, contact_labels(m, feet) if feet else None) for m in motions]
        named = resolve_parts(skel, parts, positions=motions[0].world_positions.mean(axis=0), feet=feet_for_parts)
        part_data = []
        for name, joints in named.items():
            cols = layout.joint_columns(joints)
            part_data.append(PartData(name, cols, [X[:, cols] for X in features]))
        self._setup(cfg, fps, motions, layout, part_data, named, feet)

    @classmethod
    def _from_prepared(cls, *, config: GenMMConfig, fps: float, examples: list[Motion], layout: FeatureLayout,
                       parts: list[PartData], part_joints: dict[str, list[int]]) -> GenMM:
        """A GenMM over parts prepared elsewhere (e.g. by :func:`~motionmatch.genmm.reassemble`)."""
        self = cls.__new__(cls)
        self._setup(config, fps, examples, layout, parts, part_joints, ())
        return self

    def _setup(self, cfg, fps, examples, layout, part_data, part_joints, feet) -> None:
        self.config = cfg
        self.fps = float(fps)
        self.examples = examples
        self.layout = layout
        self.parts = part_joints
        self.feet = tuple(feet)
        self.backend = get_backend(cfg.device, cfg.dtype)
        self.engine = Engine(part_data, layout.num_columns, cfg.engine_settings(), self.backend)

    # ------------------------------------------------------------------ facts
    @property
    def skeleton(self):
        return self.layout.skeleton

    @property
    def example_frames(self) -> int:
        """Frames of all examples together, at the synthesis rate."""
        return sum(m.num_frames for m in self.examples)

    def part_names(self) -> dict[str, list[str]]:
        """The parts as joint names."""
        return {k: [self.skeleton.names[j] for j in v] for k, v in self.parts.items()}

    # ---------------------------------------------------------------- sampling
    def sample(
        self,
        frames: int | None = None,
        *,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        loop: bool = False,
        loop_root: str = "closed",
        keyframes: Keyframes | None = None,
        completion: Completion | None = None,
        noise_sigma: float | None = None,
        start: Sequence[float] | None = None,
        progress: ProgressCallback | None = None,
    ) -> GenMMResult:
        """Synthesize one motion.

        Args:
            frames: output frames at :attr:`fps` (default: twice the examples' frames; with
                keyframes at least up to the last key; with completion the partial motion's).
            seed, rng: randomness (a seed, or a ``numpy.random.Generator``; neither: seed 0).
            loop: an endless loop: the synthesis is circular (patches wrap around) and the
                last frame is the first frame again, so the clip plays seamlessly over and
                over (show frames ``0 .. F-2`` in a cycle).
            loop_root: ``"closed"`` (default): the root's ground path is closed too (last
                root position = first; the cycle's drift is spread evenly over the loop), so
                first and last frames are identical; ``"travel"``: the root keeps the drift
                of one cycle (a walking loop that moves on; rotations and height still match).
            keyframes: poses pinned at given times (:class:`Keyframes`).
            completion: a partial-body motion kept exactly while the rest is synthesized
                (:class:`Completion`).
            noise_sigma: overrides the config's initial noise (0: start from the examples).
            start: root ground position ``[x, z]`` of the first frame (default the first
                example's).
            progress: called after every match-and-blend iteration with a
                :class:`~motionmatch.genmm.engine.SynthesisProgress` (stage, fraction done,
                seconds elapsed and estimated left); ``None`` (default): silent.
        """
        if rng is None:
            seed = 0 if seed is None else int(seed)
            rng = np.random.default_rng(seed)
        elif seed is not None:
            raise ValueError("pass seed or rng, not both")
        if loop_root not in ("closed", "travel"):
            raise ValueError(f"loop_root must be 'closed' or 'travel', got {loop_root!r}")
        if loop and completion is not None:
            raise ValueError("a completion follows the given motion, which fixes its ends; it cannot also be a loop")
        fps = self.fps
        n = frames
        cons_cols: list[ColumnConstraint] = []
        cons_frames: list[FrameConstraint] = []
        exact_rot: list[tuple[slice | np.ndarray, list[int], np.ndarray]] = []
        exact_root = None
        partial = None
        if completion is not None:
            check_rate(completion.motion, fps, "completion clip")
            partial = completion.motion if abs(completion.motion.fps - fps) < 1e-9 else resample(completion.motion, fps)
            if n is not None and n != partial.num_frames:
                raise ValueError(f"frames={n} but the completion motion has {partial.num_frames} frames at {fps:g} fps")
            n = partial.num_frames
        key_frames = None
        if keyframes is not None:
            key_frames = keyframes.output_frames(fps)
        if n is None:
            n = 2 * self.example_frames
            if key_frames is not None and len(key_frames):
                n = max(n, int(key_frames.max()) + 1)
        n = int(n)
        p = self.config.patch_size
        if n < p + (1 if loop else 0):
            raise ValueError(f"frames={n} is too short: at least {p + (1 if loop else 0)} are needed with patch size {p}")
        if partial is not None:
            cc, rows, joints, root_tr = self._completion_columns(partial, completion.joints)
            cons_cols.append(ColumnConstraint(cc, rows))
            exact_rot.append((slice(None), joints, partial.rotations[:, [self._map(partial, j) for j in joints]]))
            if root_tr is not None:
                exact_root = root_tr
        if keyframes is not None:
            for fc, rows, joints, rots in self._key_constraints(keyframes, key_frames, n, loop):
                cons_frames.append(fc)
                exact_rot.append((rows, joints, np.broadcast_to(rots, (len(rows),) + rots.shape)))
        sigma = self.config.noise_sigma if noise_sigma is None else float(noise_sigma)
        n_run = n - 1 if loop else n
        X, info = self.engine.run(n_run, rng, noise_sigma=sigma, periodic=loop, frames=cons_frames, columns=cons_cols,
                                  progress=progress)
        if loop:
            X = np.concatenate([X, X[:1]], axis=0)
        if start is None:
            start = self.examples[0].translations[0, 0, [0, 2]]
        rot, tr, contacts = decode(X, self.layout, fps, start=start)
        if loop:
            drift = tr[-1, 0, [0, 2]] - tr[0, 0, [0, 2]]
            if loop_root == "closed":
                ramp = np.arange(n) / (n - 1)
                tr[:, 0, 0] -= ramp * drift[0]
                tr[:, 0, 2] -= ramp * drift[1]
            rot[-1] = rot[0]
            last_root = tr[0, 0].copy()
            if loop_root == "travel":
                last_root[[0, 2]] += drift
            tr[-1] = tr[0]
            tr[-1, 0] = last_root
            if contacts is not None:
                contacts[-1] = contacts[0]
        for rows, joints, vals in exact_rot:
            if isinstance(rows, slice):
                rot[:, joints] = vals
            else:
                rot[np.ix_(rows, joints)] = vals
        if exact_root is not None:
            tr[:, 0] = exact_root
        ex = self.examples[0]
        motion = Motion(self.skeleton, rot, tr, fps=fps, name=f"{ex.name}_genmm", file_scale=ex.file_scale)
        return GenMMResult(motion, contacts, self.feet, X, info, seed)

    def samples(self, count: int, frames: int | None = None, *, seed: int = 0, **kw) -> list[GenMMResult]:
        """``count`` motions with seeds ``seed, seed + 1, ...``."""
        return [self.sample(frames, seed=seed + i, **kw) for i in range(count)]

    # ------------------------------------------------------------- constraints
    def _map(self, other: Motion, j: int) -> int:
        """Index in ``other``'s skeleton of our joint ``j`` (by name)."""
        return find_joint(other.skeleton, self.skeleton.names[j])

    def _completion_columns(self, partial: Motion, spec):
        lay = self.layout
        joints = resolve_joints(self.skeleton, spec)
        if not joints:
            raise ValueError("a completion needs at least one given joint")
        idx = [self._map(partial, j) for j in joints]
        # Features of the partial motion, in our layout, for the given joints only.
        F = partial.num_frames
        full_rot = np.tile(self.examples[0].rotations[:1], (F, 1, 1))
        full_tr = np.tile(self.examples[0].translations[:1], (F, 1, 1))
        full_rot[:, joints] = partial.rotations[:, idx]
        full_tr[:, joints] = partial.translations[:, idx]
        m = Motion(self.skeleton, full_rot, full_tr, fps=partial.fps, name=partial.name)
        labels = contact_labels(m, self.feet) if self.feet else None
        Xp = encode(m, lay, labels)
        cols = lay.joint_columns(joints)
        root_tr = full_tr[:, 0].copy() if 0 in joints else None
        return cols, Xp[:, cols], joints, root_tr

    def _key_constraints(self, keys: Keyframes, frames: np.ndarray, n: int, loop: bool):
        lay = self.layout
        km = keys.motion
        names = keys.joints
        if names is None:
            pairs = []
            for kj, nm in enumerate(km.skeleton.names):
                try:
                    pairs.append((kj, find_joint(self.skeleton, nm)))
                except SkeletonError:
                    continue
            if not pairs:
                raise SkeletonError(
                    f"none of the keyframe joints ({', '.join(km.skeleton.names[:5])}, ...) exists in the examples' skeleton"
                )
        else:
            kjs = resolve_joints(km.skeleton, names)
            pairs = [(kj, find_joint(self.skeleton, km.skeleton.names[kj])) for kj in kjs]
        kidx = [a for a, _ in pairs]
        ours = [b for _, b in pairs]
        rot6 = rotation_6d(km.rotations[:, kidx])  # [K, Jk, 6]
        cols = lay.rot_cols[ours].reshape(-1)
        root_pin = keys.pin_root_height and 0 in ours and kidx[ours.index(0)] == 0
        out = []
        for k, f in enumerate(frames):
            f = int(f)
            if f >= n:
                raise ValueError(f"keyframe {k} is at output frame {f}, past the last frame ({n - 1}); ask for more frames")
            fr = 0 if loop and f == n - 1 else f
            vals = rot6[k].reshape(-1)
            c = cols
            if root_pin:
                c = np.concatenate([cols, [lay.root_cols[2]]])
                vals = np.concatenate([vals, [km.translations[k, 0, 1] * lay.root_weight / lay.scale]])
            rows = np.array([0, n - 1] if loop and fr == 0 else [f])
            out.append((FrameConstraint(fr, c, vals), rows, ours, km.rotations[k, kidx]))
        return out


def synthesize(examples, frames: int | None = None, *, seed: int | None = None, parts: PartsSpec = None,
               config: GenMMConfig | None = None, **kw) -> GenMMResult:
    """One-call GenMM: ``GenMM(examples, config, parts=parts, **settings).sample(frames, seed=seed, ...)``.

    Keyword arguments are split between :class:`GenMMConfig` fields and :meth:`GenMM.sample`.
    """
    names = {f.name for f in fields(GenMMConfig)}
    cfg_kw = {k: v for k, v in kw.items() if k in names}
    sample_kw = {k: v for k, v in kw.items() if k not in names}
    t0 = time.perf_counter()
    gen = GenMM(examples, config, parts=parts, **cfg_kw)
    res = gen.sample(frames, seed=seed, **sample_kw)
    res.extra["setup_s"] = time.perf_counter() - t0 - res.synthesis_s
    return res
