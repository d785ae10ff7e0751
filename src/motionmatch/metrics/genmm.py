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
                            ``threshold = 2.0``. 1.0 means every part of every example
                            appears in the output. (GANimator's code skips each clip's last
                            window; here every window counts.)
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
    "covered_windows",
    "evaluate",
    "global_patch_distance",
    "local_patch_distance",
    "rotation_features",
    "set_diversity",
]

_BLOCK = 1 << 22  # frame distances held at once (32 MB of float64)


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


def covered_windows(examples, output, *, window: int = 30, threshold: float = 2.0) -> list[np.ndarray]:
    """Per example clip, ``[L - window + 1]`` bool: which windows the output covers
    (see :func:`coverage`)."""
    out, fps = _output(output)
    clips = _clips(examples, fps)
    _check(clips, out)
    if out.shape[0] < window:
        return [np.zeros(max(c.shape[0] - window + 1, 0), dtype=bool) for c in clips]
    return [_best_window_costs(c, [out], window) < threshold for c in clips]


def coverage(examples, output, *, window: int = 30, threshold: float = 2.0) -> float:
    """Share (0-1) of the examples' ``window``-frame windows that the output covers: some
    aligned output window is within a mean frame distance of ``threshold``.

    Args:
        examples: a Motion, array, or a list of them (all their windows count).
        output: the synthesized Motion (or array).
    """
    cov = covered_windows(examples, output, window=window, threshold=threshold)
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


def evaluate(examples, outputs: Sequence, *, window: int = 30, threshold: float = 2.0, local_window: int = 15,
             min_segment: int = 30) -> dict:
    """All GenMM numbers for one or more outputs of one length, as a JSON-ready dict:
    ``coverage``, ``global_patch_distance``, ``local_patch_distance`` (means over the
    outputs), ``per_output`` lists of the three, ``set_diversity`` (two or more outputs,
    else ``None``) and ``definitions`` (the windows and threshold used)."""
    if isinstance(outputs, (Motion, np.ndarray)):
        outputs = [outputs]
    cov = [coverage(examples, o, window=window, threshold=threshold) for o in outputs]
    glob = [global_patch_distance(examples, o, min_segment=min_segment) for o in outputs]
    loc = [local_patch_distance(examples, o, window=local_window) for o in outputs]
    same_len = len({rotation_features(o).shape for o in outputs}) == 1
    div = set_diversity(examples, outputs) if len(outputs) > 1 and same_len else None
    return {
        "coverage": float(np.mean(cov)),
        "global_patch_distance": float(np.mean(glob)),
        "local_patch_distance": float(np.mean(loc)),
        "set_diversity": div,
        "per_output": {"coverage": cov, "global_patch_distance": glob, "local_patch_distance": loc},
        "definitions": {
            "frame_features": "local joint rotations, 6D (first two matrix columns), all joints",
            "frame_distance": "Euclidean norm of the difference",
            "coverage": f"share of example windows of {window} frames with an aligned output window of mean "
                        f"frame distance < {threshold}",
            "global_patch_distance": f"DP over output segments of >= {min_segment} frames, mean frame distance",
            "local_patch_distance": f"mean over output windows of {local_window} frames of the nearest aligned "
                                    "example window's mean frame distance",
            "set_diversity": "mean over frames and joints of the across-output std of 6D rotations, divided by "
                             "the examples' per-joint std over frames (mean over joints)",
        },
    }
