"""GenMM metrics: coverage, patch distances and set diversity against brute-force definitions."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.metrics.genmm import (
    coverage,
    covered_windows,
    evaluate,
    global_patch_distance,
    local_patch_distance,
    rotation_features,
    set_diversity,
)
from test_genmm import dancer


def _frame_dist(a, b):
    return np.sqrt(((a[:, None] - b[None]) ** 2).sum(-1))


def _best_window(q, r, w):
    C = _frame_dist(q, r)
    out = np.full(len(q) - w + 1, np.inf)
    for i in range(len(q) - w + 1):
        for k in range(len(r) - w + 1):
            out[i] = min(out[i], np.trace(C[i:i + w, k:k + w]) / w)
    return out


def _brute_global(out, ex, T):
    """GANimator's DP with segments of any length >= T."""
    N, L = len(out), len(ex)
    C = _frame_dist(out, ex)
    G = np.full(N + 1, np.inf)
    G[0] = 0
    for q in range(T, N + 1):
        for s in range(0, q - T + 1):
            ln = q - s
            if ln > L:
                continue
            best = min(np.trace(C[s:q, k:k + ln]) for k in range(L - ln + 1))
            G[q] = min(G[q], G[s] + best)
    return G[N] / N


def test_coverage_of_the_example_itself_is_one_and_of_noise_is_zero():
    m = dancer(120)
    assert coverage(m, m) == 1.0
    rng = np.random.default_rng(0)
    noise = rng.normal(size=(120, 6 * m.num_joints)) * 3
    assert coverage(m, noise) == 0.0
    half = m[:60]
    cov = covered_windows(m, half)[0]
    # Windows lying inside the first half are covered, the others not.
    assert cov[:31].all() and not cov[60:].any()
    assert coverage(m, half) == pytest.approx(cov.mean())


def test_window_costs_match_brute_force():
    rng = np.random.default_rng(3)
    ex = rng.normal(size=(40, 12))
    out = ex[rng.integers(0, 40, size=55)] + 0.1 * rng.normal(size=(55, 12))
    w = 7
    brute = _best_window(out, ex, w)
    assert local_patch_distance(ex, out, window=w) == pytest.approx(brute.mean())
    cov_brute = (_best_window(ex, out, w) < 2.0).mean()
    assert coverage(ex, out, window=w, threshold=2.0) == pytest.approx(cov_brute)


def test_global_patch_distance_dp_matches_unrestricted_brute_force():
    rng = np.random.default_rng(5)
    ex = rng.normal(size=(30, 6))
    parts = [ex[3:15], ex[10:22], ex[0:9] + 0.05, ex[18:30]]
    out = np.concatenate(parts) + 0.02 * rng.normal(size=(sum(len(p) for p in parts), 6))
    T = 5
    assert global_patch_distance(ex, out, min_segment=T) == pytest.approx(_brute_global(out, ex, T), rel=1e-9)
    assert global_patch_distance(ex, ex, min_segment=T) == pytest.approx(0.0, abs=1e-6)


def test_set_diversity():
    m = dancer(100)
    assert set_diversity(m, [m, m, m]) == pytest.approx(0.0, abs=1e-9)
    a, b = dancer(100, seed=1), dancer(100, seed=2)
    d = set_diversity(m, [a, b])
    assert d > 0.1
    with pytest.raises(ValueError):
        set_diversity(m, [a])


def test_evaluate_and_examples_at_another_rate():
    m = dancer(240, fps=60.0)
    m30 = dancer(240, fps=60.0)
    from motionmatch.anim.resample import resample

    out = resample(m30, 30.0)
    rep = evaluate(m, [out, out])
    assert rep["coverage"] == 1.0  # the 60 fps example is compared at the output's 30 fps
    assert rep["set_diversity"] == pytest.approx(0.0, abs=1e-9)
    assert set(rep) >= {"coverage", "global_patch_distance", "local_patch_distance", "set_diversity", "definitions"}
    assert rotation_features(out).shape == (out.num_frames, 6 * out.num_joints)
