"""How well a synthesized motion reproduces its examples: GenMM's and GANimator's numbers.

Every measure compares *frames* by their joint rotations only: a frame is the vector of
all joints' local rotations in the 6D form (:func:`rotation_features`, ``6 J`` numbers;
the root's rotation is its world rotation; root positions are not included), and the
*frame distance* between two frames is the Euclidean norm of the difference of their
vectors (not squared). Windows are runs of consecutive frames; a window of one motion is
*aligned* with a window of another of the same length frame by frame, and the *window
cost* is the mean frame distance over the window. Example windows never straddle two
example clips.

==========================  ==================================================================
:func:`coverage`            share (0-1) of the examples' windows of ``window = 30`` frames
                            (every start, ``L - 30 + 1`` per clip of ``L`` frames) whose
                            cheapest aligned window anywhere in the output costs less than
                            the clip's *threshold*: ``threshold_scale = 2`` times the clip's
                            median frame-to-frame distance (:func:`coverage_thresholds`),
                            i.e. the output reproduces the window to within about two
                            frames of the example's own typical motion. 1.0 means every
                            part of every example appears in the output; the first half of
                            an example scores about 0.5. (GANimator's code skips each
                            clip's last window; here every window counts.)
:func:`local_patch_distance`  mean, over every output window of ``window = 15`` frames, of
                            its cheapest aligned window cost in the examples (GANimator's
                            "local diversity"; lower is closer to the examples).
:func:`global_patch_distance`  the output split into consecutive segments of at least
                            ``min_segment = 30`` frames, each aligned with an example window
                            of its length, the split and the alignments chosen (dynamic
                            programming) to minimise the total frame distance; the minimum
                            divided by the number of output frames (GANimator's "global
                            diversity"). Segments of ``2 * min_segment`` frames or more never
                            need to be considered (cutting one in two keeps its cost), so the
                            program is exact in ``O(N L min_segment)``.
:func:`set_diversity`       across ``S`` outputs of equal length: for every frame and joint,
                            the standard deviation over the outputs of that joint's 6D
                            rotation (square root of the summed per-component variances),
                            averaged over frames and joints; divided by the same spread of
                            the examples taken over their frames (per joint, averaged over
                            joints). 0 means identical outputs; the paper reports about 0.25
                            for 200 outputs.
==========================  ==================================================================

Where the papers leave a choice (GenMM, Li et al. 2023, Sec. 4.1, defers to GANimator,
Li et al. 2022, for coverage and the two patch distances, and to SinGAN, Shaham et al.
2019, for set diversity):

* **Coverage threshold.** GANimator's threshold is an absolute 2.0 on its own features;
  on ours (6D rotations of 23-67 joints, Euclidean) a threshold that large lets a tenth of
  the salsa example, given as the output, cover 71% of it, and every synthesis scores
  100%: the measure cannot fail. The threshold here is relative to each example clip:
  ``2 x`` its median distance between consecutive frames, at the rate of evaluation. A
  window shifted by ``s`` frames costs about ``s`` such steps, so "covered" means "found
  to within about two frames of misalignment". Verified on the six clips of
  ``genmm-examples`` with motion (30 fps): truncated copies of 10% / 50% / 100% score 0.00-0.06 /
  0.41-0.54 / 1.00 (with a scale of 1: 0.00-0.06 / 0.26-0.48 / 1.00; with 3: up to 0.20 /
  0.77 on the periodic salsa and walks). Periodic examples score a little above their
  share, because their first half already contains the later cycles: that is coverage
  working, not a flaw. The scale is the same for every example (no per-file tuning). A
  clip that does not move (median step 0) gets the floor :data:`MIN_THRESHOLD`. Pass
  ``threshold=`` to use an absolute threshold instead (``2.0`` reproduces the old numbers).
* **Frame distance.** Euclidean, not squared, over all joints' 6D local rotations (the
  root's world rotation), no root position: GANimator compares rotations; GenMM's
  synthesis also matches root velocities, which these measures leave out.
* **Window counting.** The share is of windows, not of frames, as in GANimator; for
  short clips this puts a truncated copy somewhat below its share of frames (the first
  half of a 201-frame clip holds 71 of its 172 windows: 0.41).
* **Set diversity's normaliser.** The paper divides by "the standard deviation of all
  joint rotations of the input example"; here, per joint, the spread of its 6D rotation
  over the example frames, averaged over joints (pooling all joints together would add
  the differences between joints' rest rotations, which are not motion).
* **Rate.** Windows count frames; the paper's data is 30 fps, and ``motionmatch
  genmm-eval`` evaluates at 30 fps by default so that numbers are comparable across
  files and tools.

Inputs are :class:`~motionmatch.anim.Motion` objects (of one skeleton) or frame arrays
``[F, 6 J]`` from :func:`rotation_features`. Examples at another frame rate than the
output are resampled to the output's rate first. Work is done in blocks, so long outputs
need bounded memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from motionmatch.anim import quat
from motionmatch.anim.motion import Motion
from motionmatch.anim.resample import resample

__all__ = [
    "coverage",
    "coverage_thresholds",
    "covered_windows",
    "evaluate",
    "global_patch_distance",
    "local_patch_distance",
    "rotation_features",
    "set_diversity",
]

_BLOCK = 1 << 22  # frame distances held at once (32 MB of float64)

THRESHOLD_SCALE = 2.0
"""Coverage threshold, in units of the example clip's median frame-to-frame distance."""

MIN_THRESHOLD = 1e-3
"""Floor of a relative coverage threshold (a clip that does not move), in 6D rotation units."""


def rotation_features(motion: Motion | np.ndarray) -> np.ndarray:
    """``[F, 6 J]`` float64: every joint's local rotation in the 6D form, frame by frame."""
    if isinstance(motion, Motion):
        return quat.to_6d(motion.rotations).reshape(motion.num_frames, -1)
    a = np.asarray(motion, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"expected a Motion or a [frames, 6 * joints] array, got shape {list(a.shape)}")
    return a


def _clips(examples, fps: float | None) -> list[np.ndarray]:
    if isinstance(examples, (Motion, np.ndarray)):
        examples = [examples]
    out = []
    for e in examples:
        if isinstance(e, Motion) and fps is not None and abs(e.fps - fps) > 1e-6:
            e = resample(e, fps)
        out.append(rotation_features(e))
    return out


def _output(output) -> tuple[np.ndarray, float | None]:
    if isinstance(output, Motion):
        return rotation_features(output), output.fps
    return rotation_features(output), None


def _check(clips: list[np.ndarray], out: np.ndarray) -> None:
    for c in clips:
        if c.shape[1] != out.shape[1]:
            raise ValueError(
                f"examples and output differ in joints: {c.shape[1] // 6} vs {out.shape[1] // 6}; "
                "the metrics compare motions of one skeleton"
            )


def _frame_distances(a: np.ndarray, b: np.ndarray, bb: np.ndarray | None = None) -> np.ndarray:
    """``[len(a), len(b)]`` Euclidean distances between the rows of ``a`` and ``b``."""
    aa = np.einsum("ij,ij->i", a, a)
    bb = np.einsum("ij,ij->i", b, b) if bb is None else bb
    d2 = aa[:, None] + bb[None, :] - 2.0 * (a @ b.T)
    np.maximum(d2, 0.0, out=d2)
    return np.sqrt(d2, out=d2)


def _window_sums(C: np.ndarray, w: int) -> np.ndarray:
    """``S[i, k] = sum_t C[i + t, k + t]`` for ``t < w``: ``[R - w + 1, K - w + 1]``."""
    R, K = C.shape
    n, m = R - w + 1, K - w + 1
    S = C[0:n, 0:m].copy()
    for t in range(1, w):
        S += C[t:t + n, t:t + m]
    return S


def _best_window_costs(queries: np.ndarray, refs: list[np.ndarray], w: int) -> np.ndarray:
    """For every window of ``w`` frames of ``queries``, the cheapest aligned window cost
    (mean frame distance) over the windows of the reference clips. ``[len(queries) - w + 1]``."""
    nq = queries.shape[0] - w + 1
    best = np.full(max(nq, 0), np.inf)
    if nq <= 0:
        return best
    for ref in refs:
        if ref.shape[0] < w:
            continue
        bb = np.einsum("ij,ij->i", ref, ref)
        rows = max(1, _BLOCK // ref.shape[0] - w)
        for i0 in range(0, nq, rows):
            i1 = min(i0 + rows, nq)
            C = _frame_distances(queries[i0:i1 + w - 1], ref, bb)
            best[i0:i1] = np.minimum(best[i0:i1], _window_sums(C, w).min(axis=1))
    return best / w


def coverage_thresholds(examples, fps: float | None = None, *, threshold_scale: float = THRESHOLD_SCALE) -> list[float]:
    """Per example clip, its coverage threshold: ``threshold_scale`` times the median
    Euclidean distance between its consecutive frames' rotation features (at ``fps``, the
    rate of evaluation: clips at another rate are resampled first), at least
    :data:`MIN_THRESHOLD`. Same unit as a window cost (6D rotation units per frame)."""
    if not threshold_scale > 0:
        raise ValueError(f"threshold_scale must be positive, got {threshold_scale}")
    out = []
    for c in _clips(examples, fps):
        step = float(np.median(np.linalg.norm(np.diff(c, axis=0), axis=1))) if c.shape[0] > 1 else 0.0
        out.append(max(threshold_scale * step, MIN_THRESHOLD))
    return out


def covered_windows(examples, output, *, window: int = 30, threshold: float | None = None,
                    threshold_scale: float = THRESHOLD_SCALE) -> list[np.ndarray]:
    """Per example clip, ``[L - window + 1]`` bool: which windows the output covers
    (see :func:`coverage`)."""
    out, fps = _output(output)
    clips = _clips(examples, fps)
    _check(clips, out)
    if threshold is None:
        limits = coverage_thresholds(clips, threshold_scale=threshold_scale)
    else:
        if not threshold > 0:
            raise ValueError(f"threshold must be positive, got {threshold}")
        limits = [float(threshold)] * len(clips)
    if out.shape[0] < window:
        return [np.zeros(max(c.shape[0] - window + 1, 0), dtype=bool) for c in clips]
    return [_best_window_costs(c, [out], window) < lim for c, lim in zip(clips, limits)]


def coverage(examples, output, *, window: int = 30, threshold: float | None = None,
             threshold_scale: float = THRESHOLD_SCALE) -> float:
    """Share (0-1) of the examples' ``window``-frame windows that the output covers: some
    aligned output window is within a mean frame distance of the clip's threshold.

    Args:
        examples: a Motion, array, or a list of them (all their windows count).
        output: the synthesized Motion (or array).
        threshold: an absolute threshold for every clip; ``None`` (default): each clip's
            own, ``threshold_scale`` times its median frame-to-frame distance
            (:func:`coverage_thresholds`).
    """
    cov = covered_windows(examples, output, window=window, threshold=threshold, threshold_scale=threshold_scale)
    total = sum(len(c) for c in cov)
    if total == 0:
        raise ValueError(f"no example is at least {window} frames long")
    return float(sum(int(c.sum()) for c in cov) / total)


def local_patch_distance(examples, output, *, window: int = 15) -> float:
    """Mean over the output's ``window``-frame windows of their cheapest aligned window cost
    in the examples."""
    out, fps = _output(output)
    clips = _clips(examples, fps)
    _check(clips, out)
    if out.shape[0] < window:
        raise ValueError(f"the output has {out.shape[0]} frames, fewer than the window ({window})")
    return float(_best_window_costs(out, clips, window).mean())


def global_patch_distance(examples, output, *, min_segment: int = 30) -> float:
    """Mean frame distance of the output to the examples when it is cut into segments of at
    least ``min_segment`` frames, each matched to its best aligned example window, the cut
    chosen to minimise the total (see the module docstring)."""
    out, fps = _output(output)
    clips = _clips(examples, fps)
    _check(clips, out)
    N, T = out.shape[0], int(min_segment)
    if T < 1:
        raise ValueError(f"min_segment must be at least 1, got {min_segment}")
    if N < T:
        raise ValueError(f"the output has {N} frames, fewer than min_segment ({T})")
    longest = 2 * T - 1
    # cost[s, l - T]: cheapest cost of the output segment [s, s + l) for l in [T, 2T - 1].
    cost = np.full((N, longest - T + 1), np.inf)
    for ref in clips:
        if ref.shape[0] < T:
            continue
        bb = np.einsum("ij,ij->i", ref, ref)
        L = ref.shape[0]
        rows = max(1, _BLOCK // L - longest)
        for s0 in range(0, N - T + 1, rows):
            s1 = min(s0 + rows, N - T + 1)
            hi = min(s1 + longest - 1, N)
            C = _frame_distances(out[s0:hi], ref, bb)
            R = C.shape[0]
            # Running window sums, growing the window one frame at a time.
            n, m = s1 - s0, L - T + 1
            S = np.zeros((n, m))
            for t in range(T):
                rr = min(n, R - t)
                S[:rr] += C[t:t + rr, t:t + m]
                S[rr:] = np.inf
            for ln in range(T, longest + 1):
                if ln > T:
                    t = ln - 1
                    m2 = L - ln + 1
                    if m2 <= 0:
                        break
                    rr = max(0, min(n, R - t))
                    S = S[:, :m2]
                    S[:rr] += C[t:t + rr, t:t + m2]
                    S[rr:] = np.inf
                cost[s0:s1, ln - T] = np.minimum(cost[s0:s1, ln - T], S.min(axis=1))
    G = np.full(N + 1, np.inf)
    G[0] = 0.0
    for q in range(T, N + 1):
        ls = np.arange(T, min(longest, q) + 1)
        s = q - ls
        cand = G[s] + cost[s, ls - T]
        G[q] = cand.min()
    if not np.isfinite(G[N]):
        raise ValueError("no valid segmentation: the examples are shorter than min_segment")
    return float(G[N] / N)


def set_diversity(examples, outputs: Sequence, *, per_frame: bool = False) -> float | np.ndarray:
    """Spread of several outputs around each other, relative to the examples' own spread
    (see the module docstring). ``outputs``: two or more Motions (or arrays) of equal length.

    With ``per_frame`` the ``[F]`` per-frame values (before averaging over frames) are returned.
    """
    if len(outputs) < 2:
        raise ValueError("set diversity needs at least two outputs")
    fps = outputs[0].fps if isinstance(outputs[0], Motion) else None
    outs = [rotation_features(o) for o in outputs]
    F = outs[0].shape[0]
    if any(o.shape != outs[0].shape for o in outs):
        raise ValueError("set diversity needs outputs of one length and skeleton")
    clips = _clips(examples, fps)
    _check(clips, outs[0])
    J = outs[0].shape[1] // 6
    R = np.stack(outs).reshape(len(outs), F, J, 6)
    spread = np.sqrt(R.var(axis=0).sum(axis=-1))  # [F, J]
    E = np.concatenate(clips).reshape(-1, J, 6)
    ref = float(np.sqrt(E.var(axis=0).sum(axis=-1)).mean())
    if ref <= 0:
        raise ValueError("the examples do not move: set diversity is undefined")
    per = spread.mean(axis=1) / ref
    return per if per_frame else float(per.mean())


def evaluate(examples, outputs: Sequence, *, window: int = 30, threshold: float | None = None,
             threshold_scale: float = THRESHOLD_SCALE, local_window: int = 15, min_segment: int = 30) -> dict:
    """All GenMM numbers for one or more outputs, as a JSON-ready dict: ``coverage``,
    ``global_patch_distance``, ``local_patch_distance`` (means over the outputs),
    ``per_output`` lists of the three, ``set_diversity`` (two or more outputs, else
    ``None``; outputs of different lengths are compared over the shortest one's frames,
    ``set_diversity_frames``), ``coverage_thresholds`` (per example clip) and
    ``definitions`` (the windows and threshold used). The outputs must share a frame rate
    (examples are resampled to it)."""
    if isinstance(outputs, (Motion, np.ndarray)):
        outputs = [outputs]
    outputs = list(outputs)
    if not outputs:
        raise ValueError("evaluate needs at least one output")
    fps = outputs[0].fps if isinstance(outputs[0], Motion) else None
    rates = {round(o.fps, 6) for o in outputs if isinstance(o, Motion)}
    if len(rates) > 1:
        raise ValueError(f"the outputs have different frame rates ({', '.join(f'{r:g}' for r in sorted(rates))}); "
                         "resample them to one first")
    clips = _clips(examples, fps)  # resampled once, at the outputs' rate
    feats = [rotation_features(o) for o in outputs]
    limits = None if threshold is not None else coverage_thresholds(clips, threshold_scale=threshold_scale)
    cov = [coverage(clips, f, window=window, threshold=threshold, threshold_scale=threshold_scale) for f in feats]
    glob = [global_patch_distance(clips, f, min_segment=min_segment) for f in feats]
    loc = [local_patch_distance(clips, f, window=local_window) for f in feats]
    div, div_frames = None, None
    if len(feats) > 1:
        div_frames = min(f.shape[0] for f in feats)
        div = set_diversity(clips, [f[:div_frames] for f in feats])
    rule = (f"< {threshold} (absolute)" if threshold is not None
            else f"< {threshold_scale:g} x the clip's median frame-to-frame distance")
    return {
        "coverage": float(np.mean(cov)),
        "global_patch_distance": float(np.mean(glob)),
        "local_patch_distance": float(np.mean(loc)),
        "set_diversity": div,
        "set_diversity_frames": div_frames,
        "coverage_thresholds": limits if limits is not None else [float(threshold)] * len(clips),
        "per_output": {"coverage": cov, "global_patch_distance": glob, "local_patch_distance": loc},
        "definitions": {
            "frame_features": "local joint rotations, 6D (first two matrix columns), all joints",
            "frame_distance": "Euclidean norm of the difference",
            "coverage": f"share of example windows of {window} frames with an aligned output window of mean "
                        f"frame distance {rule}",
            "global_patch_distance": f"DP over output segments of >= {min_segment} frames, mean frame distance",
            "local_patch_distance": f"mean over output windows of {local_window} frames of the nearest aligned "
                                    "example window's mean frame distance",
            "set_diversity": "mean over frames and joints of the across-output std of 6D rotations, divided by "
                             "the examples' per-joint std over frames (mean over joints)",
        },
    }
