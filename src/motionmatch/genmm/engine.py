"""The multi-stage generative matching loop on feature arrays (no skeletons here).

The engine knows *parts*: each part owns some columns of the synthesis feature vector
and has its own example clips for those columns. The whole body is one part; the
skeleton-aware setting splits it into several overlapping parts; reassembled creatures
take each part's examples from a different skeleton. Per stage and iteration every part
is matched and blended on its own, and columns shared by several parts (overlapping
joints) are averaged.

Stages: with ``p`` the patch size and ``L`` the longest example, the coarsest example is
``coarse_ratio * p`` frames long, i.e. every sequence is scaled by
``r_0 = min(1, coarse_ratio * p / L)``, and each further stage by ``1 / pyramid_factor``
more, up to 1 (the full length). Example ``e`` has ``round(L_e r_k)`` frames at stage
``k`` and the synthesis ``round(N r_k)`` (never fewer than ``p``); both are linearly
resampled from full resolution (examples) or from the previous stage (synthesis).

Stage 0 starts from noise: the coarse examples, end to end, stretched to the synthesis
length, plus Gaussian noise of standard deviation ``noise_sigma`` (feature units), wrapped
into (-1, 1) (``fmod``, as the authors' code); the default 10 leaves pure noise, 0 gives
back the examples. Each of the ``iterations`` per stage (1) takes every patch of
every part (implicitly, see :mod:`~motionmatch.genmm._core`), (2) matches each synthesis
patch to the example patch of least completeness-normalised distance, (3) blends the
matched patches by average voting, then averages the parts on shared columns. Pinned
values (keyframes, a completion's given joints) are written again after every upsampling
and every iteration. A loop is a circle: patches, voting and resampling wrap around.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from motionmatch.genmm import _core, _cpu
from motionmatch.genmm._backend import Backend


@dataclass
class PartData:
    """One skeletal part: the synthesis columns it owns and its example clips.

    Attributes:
        name: a label (for messages).
        columns: ``[c]`` int, columns of the synthesis feature vector.
        clips: example clips ``[L_e, c]`` (float64, full resolution), each at least one
            patch long.
    """

    name: str
    columns: np.ndarray
    clips: list[np.ndarray]


@dataclass
class FrameConstraint:
    """Values pinned at one output frame (a keyframe): ``values [c]`` in ``columns``.

    At every stage and iteration the frame is set to the values exactly, and the frames
    around it (``blend`` patch lengths either side) are moved by the same correction
    fading out smoothly, so the synthesis around a key leads into it without a jump.
    """

    frame: int
    columns: np.ndarray
    values: np.ndarray
    blend: float = 1.0


@dataclass
class ColumnConstraint:
    """Columns pinned over the whole output (motion completion): ``values [N, c]``."""

    columns: np.ndarray
    values: np.ndarray


@dataclass
class RunInfo:
    """What a run did: stage lengths and seconds spent."""

    synthesis_lengths: list[int]
    example_lengths: list[list[int]]
    seconds: float
    stage_seconds: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class SynthesisProgress:
    """How far a synthesis is, reported after every match-and-blend iteration.

    Attributes:
        stage: the pyramid stage just worked on, 1 (coarsest) to ``stages`` (full length).
        stages: stages of this synthesis.
        iteration: the iteration of the stage just finished, 1 to ``iterations``.
        iterations: iterations per stage.
        frames: synthesis frames at this stage.
        fraction: estimated share of the work done, 0-1 (the patch-distance work: synthesis
            frames times example frames times feature columns plus patch size, per part).
        elapsed_s: seconds since the synthesis started.
        eta_s: estimated seconds left, ``elapsed_s * (1 - fraction) / fraction``. Too
            high in the first, coarse stages, whose fixed costs are large next to their
            patch work; it settles once the long stages begin. Measured on a 12 s synthesis
            of 4,000 frames: 10 min after the first iteration, 29 s (12 s true) after
            0.25 s, within 15% from 0.5 s on.
    """

    stage: int
    stages: int
    iteration: int
    iterations: int
    frames: int
    fraction: float
    elapsed_s: float
    eta_s: float


ProgressCallback = Callable[[SynthesisProgress], None]
"""What :meth:`Engine.run` (and :meth:`~motionmatch.genmm.GenMM.sample`) call with a
:class:`SynthesisProgress` after every iteration."""


@dataclass(frozen=True)
class EngineSettings:
    patch_size: int = 11
    alpha: float | None = 0.01
    iterations: int = 3
    pyramid_factor: float = 0.75
    coarse_ratio: float = 5.0
    block_bytes: int = 64 << 20
    threads: int | None = None
    vote_sigma: float | None = None


def _progress(k: int, stages: int, it: int, iterations: int, frames: int, fraction: float,
              elapsed_s: float) -> SynthesisProgress:
    """The report after iteration ``it`` of stage ``k`` (both counted from 0 here)."""
    fraction = min(max(float(fraction), 0.0), 1.0)
    eta = elapsed_s * (1.0 - fraction) / fraction if fraction > 0 else float("inf")
    return SynthesisProgress(k + 1, stages, it + 1, iterations, int(frames), fraction, float(elapsed_s), float(eta))


class Engine:
    """Runs GenMM on feature arrays. Build once per example set; :meth:`run` per sample."""

    def __init__(self, parts: Sequence[PartData], num_columns: int, settings: EngineSettings, backend: Backend):
        p = int(settings.patch_size)
        if p < 1:
            raise ValueError(f"patch_size must be at least 1, got {p}")
        if not 0 < settings.pyramid_factor < 1:
            raise ValueError(f"pyramid_factor must be between 0 and 1, got {settings.pyramid_factor}")
        if settings.coarse_ratio <= 0:
            raise ValueError(f"coarse_ratio must be positive, got {settings.coarse_ratio}")
        if settings.iterations < 1:
            raise ValueError(f"iterations must be at least 1, got {settings.iterations}")
        if settings.alpha is not None and not settings.alpha > 0:
            raise ValueError(f"alpha must be positive (or None to disable completeness), got {settings.alpha}")
        if not parts:
            raise ValueError("no skeletal parts to synthesize")
        if settings.threads is not None and settings.threads < 1:
            raise ValueError(f"threads must be at least 1 (or None for every core), got {settings.threads}")
        self.settings = settings
        self.workers = _cpu.Workers(settings.threads)
        if settings.vote_sigma is not None and not settings.vote_sigma > 0:
            raise ValueError(f"vote_sigma must be positive (or None for average voting), got {settings.vote_sigma}")
        self.vote_weights = _core.vote_weights(p, settings.vote_sigma)
        #: On the numpy backend, run the compiled CPU path (:mod:`~motionmatch.genmm._cpu`,
        #: on ``settings.threads`` threads); ``False``: the array-API code, on numpy and
        #: BLAS's threads (the reference the compiled path is measured and tested against).
        self.compiled = backend.name == "numpy"
        self.be = backend
        self.D = int(num_columns)
        self.parts = list(parts)
        covered = np.zeros(self.D, dtype=bool)
        for part in self.parts:
            part.columns = np.asarray(part.columns, dtype=np.int64)
            if not part.clips:
                raise ValueError(f"part {part.name!r} has no example clips")
            for c in part.clips:
                if c.ndim != 2 or c.shape[1] != len(part.columns):
                    raise ValueError(f"part {part.name!r}: clips must be [frames, {len(part.columns)}]")
                if c.shape[0] < p:
                    raise ValueError(
                        f"an example clip of part {part.name!r} has {c.shape[0]} frames, fewer than the patch size {p}; "
                        "use a longer example or a smaller patch_size"
                    )
            covered[part.columns] = True
        if not covered.all():
            raise ValueError(f"{int((~covered).sum())} feature columns belong to no part")
        L = max(c.shape[0] for part in self.parts for c in part.clips)
        ratio = min(1.0, settings.coarse_ratio * p / L)
        scales = [ratio]
        while scales[-1] < 1.0:
            scales.append(min(1.0, scales[-1] / settings.pyramid_factor))
        self.scales = scales
        self._banks: dict[tuple[int, int], _core.Bank] = {}
        self.means = [np.concatenate(part.clips, axis=0).mean(axis=0) for part in self.parts]
        self.whole = len(self.parts) == 1 and np.array_equal(self.parts[0].columns, np.arange(self.D))

    # ------------------------------------------------------------------ pyramid
    def example_lengths(self, k: int) -> list[list[int]]:
        p = self.settings.patch_size
        return [[max(min(p, c.shape[0]), round(c.shape[0] * self.scales[k])) for c in part.clips] for part in self.parts]

    def synthesis_lengths(self, n: int) -> list[int]:
        p = self.settings.patch_size
        return [max(p, round(n * s)) for s in self.scales[:-1]] + [n]

    def bank(self, part_index: int, k: int, workers: _cpu.Workers | None = None) -> _core.Bank:
        """The examples of part ``part_index`` at stage ``k`` (made once; on the compiled
        path on ``workers``, default the engine's)."""
        key = (part_index, k)
        if key not in self._banks:
            part = self.parts[part_index]
            lengths = self.example_lengths(k)[part_index]
            p = self.settings.patch_size
            if self.compiled:
                self._banks[key] = _cpu.make_bank(workers or self.workers, part.clips, lengths, self.means[part_index],
                                                  p, self.be.float_dtype)
            else:
                clips = [_core.resample_np(c, n) for c, n in zip(part.clips, lengths)]
                self._banks[key] = _core.make_bank(self.be, clips, self.means[part_index], p)
        return self._banks[key]

    def _prepare(self, n0: int, rng: np.random.Generator, noise_sigma: float,
                 periodic: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Compiled path: every stage's examples not made yet, the coarsest examples
        stretched to ``n0`` frames and the first noise (``[n0, D]`` each; no noise: ``None``),
        at once on the engine's threads (each on one)."""
        one = _cpu.Workers(1)
        fns, ns = [], []
        for k in range(len(self.scales)):
            for i, part in enumerate(self.parts):
                if (i, k) not in self._banks:
                    fns.append(lambda i=i, k=k: self.bank(i, k, one))
                    ns.append(sum(self.example_lengths(k)[i]) * len(part.columns) * (_cpu.NS_RESAMPLE + _cpu.NS_CENTER))
        fns.append(lambda: self._stretched_examples(n0, periodic))
        ns.append((n0 + sum(self.example_lengths(0)[0])) * self.D * 3 * _cpu.NS_RESAMPLE)
        if noise_sigma > 0:
            fns.append(lambda: rng.standard_normal((n0, self.D)))
            ns.append(n0 * self.D * _cpu.NS_NORMAL)
        out = self.workers.jobs(fns, ns)
        return (out[-2], out[-1]) if noise_sigma > 0 else (out[-1], None)

    def stage_work(self, lengths: Sequence[int]) -> np.ndarray:
        """``[stages]`` relative cost of one iteration at each stage for synthesis
        ``lengths``: per part, synthesis frames times example frames times (columns + patch
        size), the multiply-adds of its patch distances (see :mod:`~motionmatch.genmm._core`)."""
        p = self.settings.patch_size
        work = np.zeros(len(lengths))
        for k, nk in enumerate(lengths):
            for part, ls in zip(self.parts, self.example_lengths(k)):
                work[k] += float(nk) * float(sum(ls)) * (len(part.columns) + p)
        return work

    # ---------------------------------------------------------------------- run
    def _stretched_examples(self, n0: int, periodic: bool) -> np.ndarray:
        """``[n0, D]``: the coarsest examples, end to end, stretched to ``n0`` frames."""
        base = np.zeros((n0, self.D))
        cnt = np.zeros(self.D)
        for part, ls in zip(self.parts, self.example_lengths(0)):
            coarse = np.concatenate([_core.resample_np(c, n) for c, n in zip(part.clips, ls)], axis=0)
            base[:, part.columns] += _core.resample_np(coarse, n0, periodic=periodic)
            cnt[part.columns] += 1
        base /= np.maximum(cnt, 1)
        return base

    def initial_guess(self, n0: int, rng: np.random.Generator, noise_sigma: float, periodic: bool,
                      noise: np.ndarray | None = None, base: np.ndarray | None = None) -> np.ndarray:
        """Stage-0 start ``[n0, D]``: the coarsest examples (end to end) stretched to ``n0``
        frames, plus Gaussian noise of standard deviation ``noise_sigma`` (feature units: 6D
        rotation components lie in [-1, 1]), wrapped into (-1, 1) by ``fmod``; 0: no noise.
        ``noise``: the standard normal draw ``[n0, D]`` from ``rng``, ``base`` the stretched
        examples, when made already."""
        base = self._stretched_examples(n0, periodic) if base is None else base
        if noise_sigma > 0:
            # As the authors' code: Gaussian noise in feature units, wrapped into (-1, 1).
            # At the default sigma (10) this leaves nothing of the stretched examples: the
            # start is pure noise (the paper's "merely a noise"), so no seed can give back
            # the examples. Noise scaled to each feature's spread (what this was before) is
            # 25-60 times weaker and averages out over a patch: when the output was as long
            # as the examples, every seed matched the examples themselves and gave the same
            # motion, keyframes or not.
            noise = rng.standard_normal((n0, self.D)) if noise is None else noise
            base += noise * noise_sigma
            # fmod(x, 1) exactly (x - trunc(x) is exact for finite x), 6x faster than libm's
            # fmod; only a result of zero may differ, in its sign.
            base -= np.trunc(base)
        return base

    def run(
        self,
        n: int,
        rng: np.random.Generator,
        *,
        noise_sigma: float = 10.0,
        periodic: bool = False,
        frames: Sequence[FrameConstraint] = (),
        columns: Sequence[ColumnConstraint] = (),
        progress: ProgressCallback | None = None,
    ) -> tuple[np.ndarray, RunInfo]:
        """Synthesize ``n`` frames of features ``[n, D]`` (float64 numpy).

        Args:
            n: output frames. With ``periodic`` the sequence is a loop of ``n`` distinct
                frames (frame ``n`` would be frame 0 again).
            rng: the only source of randomness (the initial noise).
            noise_sigma: noise at the coarsest stage (see :meth:`initial_guess`).
            frames: keyframes pinned at output frames (mapped to the nearest frame of every stage).
            columns: columns pinned over the whole output (resampled to every stage).
            progress: called with a :class:`SynthesisProgress` after every iteration
                (``None``: nothing is reported).
        """
        if self.compiled:
            with _cpu.one_blas_thread():
                return self._run(n, rng, noise_sigma, periodic, frames, columns, progress)
        return self._run(n, rng, noise_sigma, periodic, frames, columns, progress)

    def _run(self, n, rng, noise_sigma, periodic, frames, columns, progress) -> tuple[np.ndarray, RunInfo]:
        t0 = time.perf_counter()
        be = self.be
        st = self.settings
        p = st.patch_size
        lengths = self.synthesis_lengths(n)
        if n < p:
            raise ValueError(f"cannot synthesize {n} frames with patches of {p} frames; ask for at least {p}")
        for c in columns:
            if c.values.shape != (n, len(c.columns)):
                raise ValueError(f"a column constraint must have values [{n}, {len(c.columns)}], got {list(c.values.shape)}")
        base, noise = self._prepare(lengths[0], rng, noise_sigma, periodic) if self.compiled else (None, None)
        X = be.asarray(self.initial_guess(lengths[0], rng, noise_sigma, periodic, noise, base), dtype=be.float64)
        stage_s = []
        work = self.stage_work(lengths)
        bounds = np.concatenate([[0.0], np.cumsum(work)]) / work.sum()  # share of the work before each stage
        for k, nk in enumerate(lengths):
            ts = time.perf_counter()
            pins = self._stage_pins(n, nk, periodic, frames, columns)
            matchers = self._matchers(k, nk, periodic) if self.compiled else None
            if k > 0 and matchers is not None and self.whole and not pins:
                # Resampled, loaded and matched in one pass (nothing changes it in between).
                i0, i1, w = _core.resample_indices(int(X.shape[0]), nk, periodic)
                X = matchers[0].start(X, i0, i1, w)
            elif k > 0:
                X = self._resample(X, nk, periodic)
            X = self._apply(X, pins)
            for it in range(st.iterations):
                if matchers is None:
                    X = self._iterate(X, k, periodic)
                else:
                    X = self._iterate_cpu(X, matchers, recenter=not pins and it + 1 < st.iterations)
                X = self._apply(X, pins)
                if progress is not None:
                    be.synchronize()
                    fraction = bounds[k] + (bounds[k + 1] - bounds[k]) * (it + 1) / st.iterations
                    progress(_progress(k, len(lengths), it, st.iterations, nk, fraction, time.perf_counter() - t0))
            be.synchronize()
            stage_s.append(time.perf_counter() - ts)
        out = np.asarray(be.to_numpy(X), dtype=np.float64)
        info = RunInfo(lengths, [[ls[0] for ls in self.example_lengths(k)] for k in range(len(lengths))],
                       time.perf_counter() - t0, stage_s)
        return out, info

    def _iterate(self, X: Any, k: int, periodic: bool) -> Any:
        be, xp = self.be, self.be.xp
        if self.whole:
            return self._match_and_blend(X, self.bank(0, k), None, periodic)
        acc = xp.zeros_like(X)
        cnt = np.zeros(self.D)
        for i, part in enumerate(self.parts):
            cols = be.asarray(part.columns, dtype=be.index_dtype)
            acc[:, cols] += self._match_and_blend(X, self.bank(i, k), cols, periodic)
            cnt[part.columns] += 1
        return acc / be.asarray(cnt[None, :], dtype=acc.dtype)

    def _match_and_blend(self, X: Any, bank: _core.Bank, cols: Any | None, periodic: bool) -> Any:
        """One part's iteration (array-API path): its columns ``cols`` of ``X [n, D]``
        (``None``: all) matched patch by patch to ``bank`` and blended: ``[n, len(cols)]``
        float64."""
        be = self.be
        st = self.settings
        p = st.patch_size
        n = int(X.shape[0])
        Xc = _core.centered(be, X, bank.mean, cols)
        nn = _core.nearest_patches(be, Xc, bank, p, st.alpha, periodic=periodic, block_bytes=st.block_bytes)
        return _core.vote(be, bank, nn, n, p, periodic=periodic,
                          weights=None if st.vote_sigma is None else self.vote_weights)

    def _matchers(self, k: int, n: int, periodic: bool) -> list[_cpu.Matcher]:
        """The CPU path's :class:`~motionmatch.genmm._cpu.Matcher` of each part at stage ``k``."""
        st = self.settings
        return [_cpu.Matcher(self.workers, self.bank(i, k), st.patch_size, st.alpha, n, periodic,
                             None if self.whole else part.columns, self.D, st.block_bytes, self.vote_weights)
                for i, part in enumerate(self.parts)]

    def _iterate_cpu(self, X: np.ndarray, matchers: list[_cpu.Matcher], recenter: bool) -> np.ndarray:
        """One iteration on the CPU path. ``recenter``: nothing will change ``X`` before the
        next iteration (no pins), so a whole-body matcher centres it on the way."""
        if self.whole:
            m = matchers[0]
            if not m.loaded:
                m.load(X)
            return m.iterate(recenter)
        acc = np.zeros_like(X)
        cnt = np.zeros(self.D)
        for m, part in zip(matchers, self.parts):
            m.load(X)
            acc[:, part.columns] += m.iterate(False)
            cnt[part.columns] += 1
        return acc / cnt[None, :]

    def _resample(self, X: Any, n: int, periodic: bool) -> Any:
        """``X`` linearly resampled to ``n`` frames (see :func:`_core.resample_indices`)."""
        if not self.compiled:
            return _core.resample(self.be, X, n, periodic=periodic)
        if X.shape[0] == n:
            return X
        i0, i1, w = _core.resample_indices(int(X.shape[0]), n, periodic)
        return _cpu.resample(self.workers, X, i0, i1, w)

    def _stage_pins(self, n, nk, periodic, frames, columns) -> list[tuple]:
        """``(row or None, columns, values, fade rows, fade weights)`` to write at this stage."""
        be = self.be
        p = self.settings.patch_size
        pins = []
        for c in columns:
            vals = _core.resample_np(c.values, nk, periodic=periodic)
            pins.append((None, be.asarray(c.columns, dtype=be.index_dtype), be.asarray(vals, dtype=be.float64),
                         None, None))
        for fc in frames:
            if periodic:
                r = round(fc.frame * nk / n) % nk
            else:
                r = round(fc.frame * (nk - 1) / max(n - 1, 1))
            R = max(0, round(fc.blend * p))
            t = np.arange(r - R, r + R + 1)
            w = 1.0 - np.abs(t - r) / (R + 1)
            w = w * w * (3.0 - 2.0 * w)
            if periodic:
                t %= nk
                t, first = np.unique(t, return_index=True)
                w = w[first]
            else:
                keep = (t >= 0) & (t < nk)
                t, w = t[keep], w[keep]
            pins.append((r, be.asarray(fc.columns, dtype=be.index_dtype),
                         be.asarray(np.asarray(fc.values, dtype=np.float64)[None, :], dtype=be.float64),
                         be.asarray(t[:, None], dtype=be.index_dtype), be.asarray(w[:, None], dtype=be.float64)))
        return pins

    @staticmethod
    def _apply(X: Any, pins) -> Any:
        # Fades first (each from the unpinned synthesis), then the exact values.
        fades = [(cols, vals - X[r:r + 1, cols], rows, w) for r, cols, vals, rows, w in pins if r is not None]
        for cols, delta, rows, w in fades:
            X[rows, cols[None, :]] += w * delta
        for r, cols, vals, _, _ in pins:
            if r is None:
                X[:, cols] = vals
            else:
                X[r:r + 1, cols] = vals
        return X
