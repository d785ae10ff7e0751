"""Choosing the improved classifier's thresholds and smoother on validation data (never
on the test data).

:func:`choose_smoother` classifies the validation renders and the validation two-part
performances once, chooses per-class decision offsets (log-probability biases, so a
class the network over-predicts on new material needs more evidence) by coordinate
ascent on the validation per-frame macro-F1 (:func:`choose_bias`), then runs the
hidden-Markov filter (:class:`~.classify.HMMFilter`) with every setting of a grid at
once (:func:`~.classify.hmm_filter_grid`), and keeps the setting with the highest
validation macro-F1 among those whose validation latency (median, stream time) is at
most ``max_latency_s`` (if none is, among the fastest); ties go to the lower flicker.
The validation clips and camera azimuths are disjoint from the test ones
(:mod:`.dataset`), so the test split is scored once, at the end, with settings it had
no say in.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from motionmatch.control.pose.classify import ClassifierError, MLPPoseClassifier, hmm_filter_grid
from motionmatch.control.pose.dataset import RenderedClip, scored_frames
from motionmatch.control.pose.evaluate import Transition, class_metrics, confusion_matrix, flicker_rate
from motionmatch.control.pose.labels import COMMAND_INDEX, COMMANDS

#: The settings tried: ``stay`` (probability the command stays from frame to frame),
#: ``power`` (tempering of the observation likelihoods), ``margin`` (hysteresis).
SMOOTHER_GRID: dict[str, tuple[float, ...]] = {
    "stay": (0.3, 0.5, 0.7, 0.8, 0.9, 0.95),
    "power": (0.75, 1.0, 1.5, 2.0, 3.0),
    "margin": (1.0, 1.5, 2.5),
}
#: Validation latency allowed (s): 20 ms under the acceptance bar of 200 ms.
MAX_LATENCY_S = 0.18
#: Per-class offset steps (log probability), the least macro-F1 gain worth a change, the
#: largest offset.
BIAS_STEPS = (-1.0, -0.5, 0.5, 1.0)
BIAS_MIN_GAIN = 0.002
BIAS_LIMIT = 2.0


@dataclass
class SmootherChoice:
    """The chosen setting and what every setting scored on validation.

    Attributes:
        stay, power, margin: the chosen setting.
        bias: ``[C]`` the chosen per-class log-offsets (zeros when not tuned).
        table: one dict per setting: its parameters, ``macro_f1``, ``flicker_per_s`` and
            ``latency_median_s`` (validation).
    """

    stay: float
    power: float
    margin: float
    table: list[dict]
    bias: np.ndarray

    @property
    def best(self) -> dict:
        return next(r for r in self.table if (r["stay"], r["power"], r["margin"]) == (self.stay, self.power, self.margin))


def choose_bias(proba: np.ndarray, y: np.ndarray, steps: tuple[float, ...] = BIAS_STEPS, rounds: int = 2,
                min_gain: float = BIAS_MIN_GAIN, limit: float = BIAS_LIMIT) -> np.ndarray:
    """``[C]`` log-offsets of the class probabilities that raise the macro-F1 of the
    per-frame argmax on ``proba [N, C]`` (true labels ``y [N]``): coordinate ascent,
    ``rounds`` passes over the classes, each trying the ``steps``; a change is kept only
    if it gains at least ``min_gain``; offsets stay within ``±limit``."""
    C = proba.shape[1]
    logp = np.log(np.maximum(proba, 1e-9))
    b = np.zeros(C)

    def score(bias: np.ndarray) -> float:
        return class_metrics(confusion_matrix(y, np.argmax(logp + bias, axis=1), C))["macro_f1"]

    best = score(b)
    for _ in range(rounds):
        changed = False
        for c in range(C):
            for st in steps:
                cand = b.copy()
                cand[c] = np.clip(cand[c] + st, -limit, limit)
                f = score(cand)
                if f >= best + min_gain:
                    best, b, changed = f, cand, True
        if not changed:
            break
    return b


def choose_smoother(clf: MLPPoseClassifier, renders: list[RenderedClip], transitions: list[Transition],
                    grid: dict[str, tuple[float, ...]] | None = None, max_latency_s: float = MAX_LATENCY_S,
                    apply: bool = True, tune_bias: bool = True) -> SmootherChoice:
    """Pick the per-class offsets (:func:`choose_bias`, with ``tune_bias``) and then the
    HMM filter's ``stay``/``power``/``margin`` on validation ``renders`` (scored frames:
    macro-F1, flicker) and ``transitions`` (latency) as the module docstring says; with
    ``apply`` the classifier takes them and records them in ``meta``."""
    if not renders:
        raise ClassifierError("choosing the smoother needs validation renders")
    g = grid or SMOOTHER_GRID
    settings = np.array(list(itertools.product(g["stay"], g["power"], g["margin"])), dtype=np.float64)
    G = settings.shape[0]
    C = len(COMMANDS)
    old_bias = clf.bias
    clf.bias = None
    probs = [clf.predict_proba(clf.features(r.normalized())) for r in renders]
    tprobs = [clf.predict_proba(clf.features(tr.render.normalized())) for tr in transitions]
    clf.bias = old_bias
    oks = [scored_frames(r, clf.window) for r in renders]
    ys = [np.array([COMMAND_INDEX[x] for x in r.labels[ok]], dtype=np.int64) for r, ok in zip(renders, oks)]
    bias = np.zeros(C)
    if tune_bias:
        bias = choose_bias(np.concatenate([P[ok] for P, ok in zip(probs, oks)]), np.concatenate(ys))
    w = np.exp(bias)[None, :]
    probs = [P * w / (P * w).sum(axis=1, keepdims=True) for P in probs]
    tprobs = [P * w / (P * w).sum(axis=1, keepdims=True) for P in tprobs]

    def emitted(P: np.ndarray, r: RenderedClip) -> np.ndarray:
        return hmm_filter_grid(P, r.normalized().reset, clf.priors, clf.natural, settings[:, 0], settings[:, 1],
                               settings[:, 2])

    cms = np.zeros((G, C, C), dtype=np.int64)
    flick = np.zeros((G, 2))
    for r, P, ok, yt in zip(renders, probs, oks, ys):
        em = emitted(P, r)
        for k in range(G):
            cms[k] += confusion_matrix(yt, em[k, ok], C)
            c, s = flicker_rate(r.labels, em[k], clf.rate, ok)
            flick[k] += (c, s)
    lat: list[list[float]] = [[] for _ in range(G)]
    for tr, P in zip(transitions, tprobs):
        em = emitted(P, tr.render)
        target = COMMAND_INDEX[tr.target]
        sw = min(tr.switch, em.shape[1] - 1)
        for k in range(G):
            if em[k, sw - 1] == target:
                continue
            hit = np.flatnonzero(em[k, sw:] == target)
            if hit.size:   # misses are left out, as in :func:`~.evaluate.latencies`
                lat[k].append(hit[0] / clf.rate)
    table = []
    for k in range(G):
        m = class_metrics(cms[k])
        med = float(np.median(lat[k])) if lat[k] else None
        table.append({"stay": float(settings[k, 0]), "power": float(settings[k, 1]), "margin": float(settings[k, 2]),
                      "macro_f1": m["macro_f1"], "accuracy": m["accuracy"],
                      "flicker_per_s": round(float(flick[k, 0] / max(flick[k, 1], 1e-9)), 4),
                      "latency_median_s": None if med is None else round(med, 4)})
    timed = [r for r in table if r["latency_median_s"] is not None]
    pool = [r for r in timed if r["latency_median_s"] <= max_latency_s]
    if not pool:  # none fast enough: the fastest ones
        quickest = min((r["latency_median_s"] for r in timed), default=None)
        pool = [r for r in timed if r["latency_median_s"] == quickest] or table
    best = max(pool, key=lambda r: (r["macro_f1"], -r["flicker_per_s"]))
    choice = SmootherChoice(best["stay"], best["power"], best["margin"], table, bias)
    if apply:
        clf.stay, clf.power, clf.margin = choice.stay, choice.power, choice.margin
        clf.bias = bias if tune_bias else clf.bias
        clf.meta = {**clf.meta, "smoother_validation": {**best, "bias": [round(float(v), 3) for v in bias]}}
    return choice
