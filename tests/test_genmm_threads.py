"""GenMM's CPU path on several threads: the same numbers as the array-API code and as one
thread, bit for bit (issue 33, item 9)."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.genmm import GenMM, GenMMConfig, Keyframes, _core, _cpu
from motionmatch.genmm._backend import get_backend
from test_genmm import _brute_nn, dancer

SALSA = "Joe_Salsa-Dancing-6.bvh"


@pytest.fixture
def split_everything(monkeypatch):
    """Every step split among the threads, however small (the default keeps small steps on
    one thread, where waking another costs more than it gives)."""
    monkeypatch.setattr(_cpu, "MIN_PART_NS", 0)


def _bank(clips, p):
    mean = np.concatenate(clips).mean(axis=0)
    return _cpu.make_bank(_cpu.Workers(3), clips, [len(c) for c in clips], mean, p, np.float64)


# ------------------------------------------------------------------ the steps
@pytest.mark.parametrize("block_bytes", [1 << 30, 3000])  # distances kept / tiles computed twice
@pytest.mark.parametrize("threads", [1, 3])
def test_matcher_finds_the_brute_force_neighbours(split_everything, block_bytes, threads):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(40, 5)), rng.normal(size=(30, 5))
    X = rng.normal(size=(57, 5))
    p, alpha = 4, 0.05
    bank = _bank([a, b], p)
    ok = np.isfinite(bank.yy)
    assert ok.sum() == (40 - p + 1) + (30 - p + 1)  # no patch across the two clips
    m = _cpu.Matcher(_cpu.Workers(threads), bank, p, alpha, 57, False, None, 5, block_bytes)
    assert m.keep == (block_bytes > 3000)
    m.load(X)
    out = m.iterate(recenter=True)
    nn = _brute_nn(X, np.concatenate([a, b]), p, alpha, ok)
    expected = _core.vote(get_backend("cpu", "float64"), bank, nn, 57, p)
    np.testing.assert_array_equal(out, expected)
    # Centred on the way for the next iteration, as a fresh load would.
    fresh = _cpu.Matcher(_cpu.Workers(1), bank, p, alpha, 57, False, None, 5, block_bytes)
    fresh.load(out)
    np.testing.assert_array_equal(m.Xc, fresh.Xc)
    np.testing.assert_array_equal(m.frame_sq, fresh.frame_sq)


@pytest.mark.parametrize("threads", [1, 3, 11])  # 11: shares shorter than a patch
def test_iterations_in_one_pass_match_iterations_one_by_one(split_everything, threads):
    """Pass B carries the next iteration's pass A (each share votes and centres the next
    share's first frames itself): the same as loading each result and matching it."""
    rng = np.random.default_rng(5)
    Y = rng.normal(size=(45, 6))
    X = rng.normal(size=(40, 6))
    p, alpha = 5, 0.05
    bank = _bank([Y], p)
    fused = _cpu.Matcher(_cpu.Workers(threads), bank, p, alpha, 40, False, None, 6, 1 << 30)
    fused.load(X)
    step = _cpu.Matcher(_cpu.Workers(1), bank, p, alpha, 40, False, None, 6, 1 << 30)
    Z = X
    for it in range(4):
        a = fused.iterate(recenter=it < 3)
        step.load(Z)
        Z = step.iterate(recenter=False)
        np.testing.assert_array_equal(a, Z)
        assert fused.loaded == (it < 3)


@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("threads", [1, 4, 13])  # 13: shares shorter than a patch
def test_a_stage_started_in_one_pass_matches_resampling_then_loading(split_everything, threads, periodic):
    rng = np.random.default_rng(6)
    Y = rng.normal(size=(45, 6))
    prev = rng.normal(size=(31, 6))
    p, alpha, n = 5, 0.05, 42
    bank = _bank([Y], p)
    i0, i1, w = _core.resample_indices(31, n, periodic)
    one = _cpu.Matcher(_cpu.Workers(threads), bank, p, alpha, n, periodic, None, 6, 1 << 30)
    X = one.start(prev, i0, i1, w)
    ref = _cpu.resample(_cpu.Workers(1), prev, i0, i1, w)
    np.testing.assert_array_equal(X, ref)
    step = _cpu.Matcher(_cpu.Workers(1), bank, p, alpha, n, periodic, None, 6, 1 << 30)
    step.load(ref)
    np.testing.assert_array_equal(one.Xc, step.Xc)
    np.testing.assert_array_equal(one.frame_sq, step.frame_sq)
    np.testing.assert_array_equal(one.iterate(recenter=False), step.iterate(recenter=False))


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_a_loop_matches_the_wrapped_patches(split_everything, threads):
    rng = np.random.default_rng(2)
    Y = rng.normal(size=(35, 4))
    X = rng.normal(size=(23, 4))
    p, alpha = 5, 0.1
    bank = _bank([Y], p)
    m = _cpu.Matcher(_cpu.Workers(threads), bank, p, alpha, 23, True, None, 4, 1 << 30)
    m.load(X)
    out = m.iterate(recenter=True)
    Xw = np.concatenate([X, X[:p - 1]])  # a loop's patches wrap around
    nn = _brute_nn(Xw, Y, p, alpha, np.ones(35 - p + 1, bool))
    assert len(nn) == 23
    np.testing.assert_array_equal(out, _core.vote(get_backend("cpu", "float64"), bank, nn, 23, p, periodic=True))
    fresh = _cpu.Matcher(_cpu.Workers(1), bank, p, alpha, 23, True, None, 4, 1 << 30)
    fresh.load(out)
    np.testing.assert_array_equal(m.Xc, fresh.Xc)  # the p - 1 wrapped rows too


def test_bank_and_resampling_match_the_array_api_code(split_everything):
    rng = np.random.default_rng(3)
    clips = [rng.normal(size=(31, 6)), rng.normal(size=(17, 6))]
    be = get_backend("cpu", "float64")
    mean = np.concatenate(clips).mean(axis=0)
    lengths = [23, 13]
    ref = _core.make_bank(be, [_core.resample_np(c, n) for c, n in zip(clips, lengths)], mean, 4)
    ours = _cpu.make_bank(_cpu.Workers(4), clips, lengths, mean, 4, np.float64)
    np.testing.assert_array_equal(ours.Y64, ref.Y64)
    np.testing.assert_allclose(ours.Y, ref.Y, rtol=0, atol=1e-15)
    np.testing.assert_allclose(ours.yy, ref.yy, rtol=1e-12)
    assert np.array_equal(np.isinf(ours.yy), np.isinf(ref.yy)) and ours.starts == ref.starts
    for periodic in (False, True):
        i0, i1, w = _core.resample_indices(31, 50, periodic)
        np.testing.assert_array_equal(_cpu.resample(_cpu.Workers(3), clips[0], i0, i1, w),
                                      _core.resample(be, clips[0], 50, periodic=periodic))


def test_blas_products_do_not_depend_on_the_row_split():
    """What the thread-count guarantee rests on for the one step left to BLAS: the rows of
    a product are the same whether BLAS computes them in one call or in several."""
    rng = np.random.default_rng(4)
    with _cpu.one_blas_thread():
        for n, d, m in [(1306, 393, 658), (213, 171, 97), (57, 31, 40)]:
            X = rng.normal(size=(n, d)).astype(np.float32)
            Yt = rng.normal(size=(m, d)).astype(np.float32).T
            whole = X @ Yt
            for parts in (2, 3, 7):
                cuts = [n * k // parts for k in range(parts + 1)]
                split = np.concatenate([X[cuts[k]:cuts[k + 1]] @ Yt for k in range(parts)])
                np.testing.assert_array_equal(split, whole)


# -------------------------------------------------------------- whole syntheses
def _features(threads, examples, **sample):
    gen_kw = {k: sample.pop(k) for k in ("parts", "block_mb", "dtype") if k in sample}
    return GenMM(examples, fps=None, threads=threads, **gen_kw).sample(**sample).features


@pytest.mark.parametrize("case", [
    dict(frames=300, seed=1),
    dict(frames=300, seed=2, dtype="float64"),
    dict(frames=200, seed=3, loop=True),
    dict(frames=260, seed=4, parts="auto"),
    dict(frames=400, seed=5, block_mb=0.05),  # distances computed twice, in tiles
], ids=["whole", "float64", "loop", "parts", "tiles"])
def test_a_seed_gives_the_same_motion_on_any_thread_count(split_everything, case):
    m = dancer(200)
    one = _features(1, m, **dict(case))
    assert np.isfinite(one).all()
    for threads in (2, 3, 8):
        np.testing.assert_array_equal(_features(threads, m, **dict(case)), one)
    assert not np.array_equal(_features(2, m, **{**case, "seed": case["seed"] + 10}), one)


def test_keyframed_synthesis_is_the_same_on_any_thread_count(split_everything):
    m = dancer(200)
    keys = Keyframes.from_motion(m, [10, 150], frames=[40, 220])
    a = GenMM(m, fps=None, threads=1).sample(300, seed=6, keyframes=keys)
    b = GenMM(m, fps=None, threads=4).sample(300, seed=6, keyframes=keys)
    np.testing.assert_array_equal(a.features, b.features)
    np.testing.assert_array_equal(a.motion.rotations, b.motion.rotations)


@pytest.mark.data
def test_the_salsa_is_the_same_on_one_and_two_threads(data_dir):
    path = data_dir / "genmm-examples" / SALSA
    if not path.is_file():
        pytest.skip(f"{path} not found; set MOTIONMATCH_DATA to the shared data folder")
    gen1 = GenMM(path, threads=1)
    gen2 = GenMM(path, threads=2)
    assert gen2.engine.workers.parts(gen2.example_frames, 1e4) == 2  # the final stage's steps are split
    for seed in (0, 1):
        a, b = gen1.sample(seed=seed), gen2.sample(seed=seed)
        np.testing.assert_array_equal(a.features, b.features)
        np.testing.assert_array_equal(a.motion.rotations, b.motion.rotations)


def test_bad_thread_counts_are_refused():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="threads"):
            GenMMConfig(threads=bad)
    with pytest.raises(ValueError, match="threads"):
        _cpu.Workers(0)
    assert GenMMConfig(threads=2).engine_settings().threads == 2


@pytest.mark.parametrize("case", [dict(seed=1), dict(seed=2, loop=True), dict(seed=3, parts="auto")],
                         ids=["whole", "loop", "parts"])
def test_the_compiled_path_gives_the_array_api_codes_motion(case):
    """The numpy backend's compiled path against the array-API code it replaces, on numpy."""
    m = dancer(200)
    case = dict(case)
    parts = case.pop("parts", None)
    out = []
    for compiled in (True, False):
        gen = GenMM(m, fps=None, threads=2, parts=parts)
        gen.engine.compiled = compiled
        out.append(gen.sample(300, **case).features)
    np.testing.assert_allclose(out[0], out[1], rtol=0, atol=1e-12)


# ------------------------------------------------------------- weighted voting
def test_weighted_voting_weights_each_place_in_a_patch(split_everything):
    be = get_backend("cpu", "float64")
    Y = np.arange(12.0)[:, None]
    bank = _cpu.make_bank(_cpu.Workers(2), [Y], [12], np.zeros(1), 3, np.float64)
    nn = np.array([0, 5, 2])  # patches at frames 0-2, 5-7, 2-4 of Y
    w = _core.vote_weights(3, 1.0)
    assert w[1] == 1.0 and np.isclose(w[0], np.exp(-0.5)) and w[0] == w[2]
    out = _cpu.vote(_cpu.Workers(3), bank.Y64, nn, 5, 3, weights=w)
    # frame 2 is the last place of patch 0 (2), the middle of patch 1 (6), the first of patch 2 (2)
    expected2 = (2 * w[2] + 6 * w[1] + 2 * w[0]) / (w[2] + w[1] + w[0])
    np.testing.assert_allclose(out[:, 0], [0, (1 * w[1] + 5 * w[0]) / (w[1] + w[0]), expected2,
                                           (7 * w[2] + 3 * w[1]) / (w[2] + w[1]), 4])
    np.testing.assert_array_equal(out, _core.vote(be, bank, nn, 5, 3, weights=w))
    # All ones is average voting, to the bit.
    np.testing.assert_array_equal(_cpu.vote(_cpu.Workers(2), bank.Y64, nn, 5, 3, weights=np.ones(3)),
                                  _core.vote(be, bank, nn, 5, 3))
    circ = np.array([0, 5, 2, 9])
    np.testing.assert_allclose(_cpu.vote(_cpu.Workers(2), bank.Y64, circ, 4, 3, periodic=True, weights=w),
                               _core.vote(be, bank, circ, 4, 3, periodic=True, weights=w), rtol=1e-15)


def test_weighted_voting_is_a_setting_and_the_same_on_any_thread_count():
    m = dancer(200)
    a = GenMM(m, fps=None, threads=1, vote_sigma=2.0).sample(300, seed=3).features
    b = GenMM(m, fps=None, threads=3, vote_sigma=2.0).sample(300, seed=3).features
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, GenMM(m, fps=None, threads=1).sample(300, seed=3).features)
    gen = GenMM(m, fps=None, threads=2, vote_sigma=2.0)
    gen.engine.compiled = False  # the array-API code votes the same way
    np.testing.assert_allclose(gen.sample(300, seed=3).features, a, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="vote_sigma"):
        GenMM(m, fps=None, vote_sigma=0.0)


def test_syntheses_at_once_on_several_threads_give_their_own_motions(split_everything):
    """The viewer runs syntheses on worker threads, several at once: they share the pool
    and the BLAS limit, and each gives what it gives alone."""
    import threading

    m = dancer(200)
    alone = [GenMM(m, fps=None, threads=2).sample(260, seed=s).features for s in range(4)]
    got = [None] * 4
    errors = []

    def run(s):
        try:
            got[s] = GenMM(m, fps=None, threads=2).sample(260, seed=s).features
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    workers = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not errors and not any(w.is_alive() for w in workers)
    for a, b in zip(alone, got):
        np.testing.assert_array_equal(a, b)
    assert _cpu.syntheses_holding_blas() == 0  # the BLAS limit lifted after the last one


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_a_forked_process_synthesizes_on_its_own_threads():
    """A child forked after a synthesis (batch jobs) has the pool object but not its
    threads: it must make its own, not wait for threads that are not there."""
    import multiprocessing as mp

    m = dancer(200)
    expected = GenMM(m, fps=None, threads=2).sample(260, seed=2).features  # the parent's pool exists now
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_child_features, (2,)).get(timeout=120)
    np.testing.assert_array_equal(got, expected)


def _child_features(seed):
    return GenMM(dancer(200), fps=None, threads=2).sample(260, seed=seed).features
