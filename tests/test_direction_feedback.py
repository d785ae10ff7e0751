"""DirectionNet as the paper has it: the previous facings fed back (issue 33, item 8).

Over the window's past half the network reads the facings the character had (the
follower's :class:`FacingLog`), beyond the centre its own predictions; the compiled
inference must be PyTorch's autoregressive forward, and a network trained on real clips
must use the facing it is fed."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from motionmatch.control.direction_net import (
    FORMATS,
    DirectionNet,
    DirectionNetConfig,
    FacingLog,
    direction_windows,
    previous_facings,
    torch_rollout,
    train_direction_net,
)
from motionmatch.errors import MotionMatchError
from synthetic import random_direction_net

#: two LAFAN1 takes with forward walking and side steps
CLIPS = ("walk1_subject1_walk2.bvh", "fightAndSports1_subject1_sidesteps.bvh")
TINY = DirectionNetConfig(hidden=12)


@pytest.fixture(scope="module")
def real_tracks(data_dir):
    from motionmatch.anim import load_bvh, quat

    out = []
    for name in CLIPS:
        f = data_dir / "lafan1-60fps" / name
        if not f.is_file():
            pytest.skip(f"{f} not found; set MOTIONMATCH_DATA to the shared data folder (with lafan1-60fps)")
        m = load_bvh(f)
        out.append((m.translations[:, 0][:, [0, 2]], np.unwrap(quat.yaw_angle(m.rotations[:, 0])), float(m.fps)))
    return out


def _torch_twin(torch, net: DirectionNet):
    """PyTorch's GRU and linear layer (float64) holding ``net``'s weights."""
    cfg = net.config
    gru = torch.nn.GRU(cfg.inputs, cfg.hidden, batch_first=True).double()
    lin = torch.nn.Linear(cfg.hidden, 2).double()
    with torch.no_grad():
        for name, key in (("weight_ih_l0", "w_ih"), ("weight_hh_l0", "w_hh"), ("bias_ih_l0", "b_ih"),
                          ("bias_hh_l0", "b_hh")):
            getattr(gru, name).copy_(torch.from_numpy(net.w[key]))
        lin.weight.copy_(torch.from_numpy(net.w["w_out"]))
        lin.bias.copy_(torch.from_numpy(net.w["b_out"]))
    return gru, lin


def _torch_forward(torch, net, x, facings, known):
    gru, lin = _torch_twin(torch, net)
    m, s = net.w["in_mean"], net.w["in_std"]
    xn = torch.from_numpy((x - m[:6]) / s[:6])
    with torch.no_grad():
        out = torch_rollout(gru, lin, xn, torch.from_numpy(np.asarray(facings, dtype=np.float64)), known,
                            torch.from_numpy(m[6:]), torch.from_numpy(s[6:]))
    return out.numpy()


def test_a_tiny_net_trained_on_real_clips_reads_the_fed_back_facing_and_runs_as_torch_does(real_tracks):
    torch = pytest.importorskip("torch")
    import time

    t0 = time.perf_counter()
    net = train_direction_net(real_tracks, config=TINY, epochs=4, stride=20, seed=0)
    assert time.perf_counter() - t0 < 30
    assert net.config.feedback and net.w["w_ih"].shape == (36, 8)
    assert net.history[-1] < net.history[0]
    x, y = direction_windows(real_tracks, TINY, stride=97)
    x, y = x[:6], y[:6]
    k = TINY.known
    # the compiled autoregressive inference is PyTorch's, within 1e-5
    got = net.forward(x, y)
    np.testing.assert_allclose(got, _torch_forward(torch, net, x, y, k), atol=1e-5)
    # and so with every facing given (teacher forcing), and with only the first
    np.testing.assert_allclose(net.forward(x, y, known=TINY.steps),
                               _torch_forward(torch, net, x, y, TINY.steps), atol=1e-5)
    np.testing.assert_allclose(net.forward(x, y, known=1), _torch_forward(torch, net, x, y, 1), atol=1e-5)
    # the fed-back facing is read: the past facings turned 60 degrees left change the
    # future it predicts, and toward that side
    a = math.radians(60)
    turned = np.stack([math.cos(a) * y[..., 0] + math.sin(a) * y[..., 1],
                       -math.sin(a) * y[..., 0] + math.cos(a) * y[..., 1]], axis=-1)
    other = net.forward(x, turned)
    ahead = np.arange(k, k + 10)
    ang = lambda o: np.arctan2(o[:, ahead, 0], o[:, ahead, 1])  # noqa: E731
    shift = (ang(other) - ang(got) + np.pi) % (2 * np.pi) - np.pi
    assert np.abs(shift).mean() > math.radians(5), np.degrees(shift).mean()
    # its own predictions are what is fed back after the centre: a facing given there instead changes the rest
    f2 = y.copy()
    f2[:, k:] = turned[:, k:]
    assert np.abs(net.forward(x, f2, known=TINY.steps)[:, k + 1 :] - got[:, k + 1 :]).max() > 1e-3


def test_the_first_format_still_loads_and_feeds_nothing_back(tmp_path):
    old = random_direction_net(DirectionNetConfig(feedback=False), seed=2)
    p = old.save(tmp_path / "new.npz")
    z = dict(np.load(p))
    meta = json.loads(str(z["meta"]))
    cfg = {k: v for k, v in meta["config"].items() if k in ("hidden", "step_fps", "past_s", "future_s",
                                                             "lookahead_s")}
    z["meta"] = np.array(json.dumps({"format": FORMATS[0], "config": cfg, "history": []}))
    np.savez(tmp_path / "old.npz", **z)
    got = DirectionNet.load(tmp_path / "old.npz")
    assert not got.config.feedback and got.config.inputs == 6
    x = np.random.default_rng(0).normal(size=(2, 120, 6))
    f = np.random.default_rng(1).normal(size=(2, 120, 2))
    np.testing.assert_array_equal(got.forward(x), old.forward(x))
    np.testing.assert_array_equal(got.forward(x, f), old.forward(x))  # facings ignored


def test_a_net_file_with_unreadable_settings_is_one_clear_error(tmp_path):
    p = random_direction_net(seed=2).save(tmp_path / "net.npz")
    z = dict(np.load(p))
    z["meta"] = np.array(json.dumps({"format": FORMATS[1], "config": {"hidden": 30, "units": 3}}))
    np.savez(tmp_path / "bad.npz", **z)
    with pytest.raises(MotionMatchError, match=r"bad\.npz: the DirectionNet's settings.*train-direction-net"):
        DirectionNet.load(tmp_path / "bad.npz")
    z["meta"] = np.array(json.dumps({"format": FORMATS[1], "config": {"hidden": 7}}))  # weights of 30 units
    np.savez(tmp_path / "bad2.npz", **z)
    with pytest.raises(MotionMatchError, match=r"bad2\.npz: cannot read the DirectionNet.*7 hidden units"):
        DirectionNet.load(tmp_path / "bad2.npz")


def test_facing_log_interpolates_unwrapped_and_pads_with_the_first():
    log = FacingLog(keep=100)
    assert np.all(log.at(np.array([0.0, 5.0]), 0.3) == 0.3)  # nothing logged: the given yaw
    log.record(10, 3.0)
    log.record(12, -3.0)  # just past +pi: unwrapped to 2*pi - 3
    log.record(12, -3.1)  # the same index again: the latest facing
    np.testing.assert_allclose(log.at(np.array([0.0, 10.0, 11.0, 12.0, 20.0]), 0.0),
                               [3.0, 3.0, (3.0 + 2 * np.pi - 3.1) / 2, 2 * np.pi - 3.1, 2 * np.pi - 3.1])
    for i in range(13, 400):
        log.record(i, 0.0)
    assert len(log) <= 102  # entries older than `keep` samples dropped


def test_training_noise_drifts_only_the_fed_back_steps():
    torch = pytest.importorskip("torch")
    cfg = DirectionNetConfig()
    ang = torch.rand(64, cfg.steps, dtype=torch.float64) * 0.2
    y = torch.stack([torch.sin(ang), torch.cos(ang)], dim=-1)
    clean = previous_facings(y, cfg, False)
    torch.testing.assert_close(clean[:, 1:], y[:, :-1])
    torch.testing.assert_close(clean[:, 0], y[:, 0])
    noisy = previous_facings(y, cfg, True, torch.Generator().manual_seed(0))
    d = torch.rad2deg(torch.atan2(noisy[..., 0], noisy[..., 1]) - torch.atan2(clean[..., 0], clean[..., 1])).abs()
    k = cfg.known
    assert float(d[:, : k + 1].mean()) < 2.0  # a jitter over the logged past
    assert float(d[:, k + 1 :].mean()) > 5.0  # a drift where the network's own facings are fed back
    torch.testing.assert_close(torch.linalg.vector_norm(noisy, dim=-1), torch.ones(64, cfg.steps,
                                                                                   dtype=torch.float64))


def test_network_facings_are_steered_as_the_tangent_is():
    """A network whose facings are the path's tangents, with steering on, asks for exactly
    the steered tangent facings: turned toward the path for a character beside it."""
    from motionmatch.control.path import TimedPath
    from motionmatch.control.revision import QueryReviser, RevisionSettings, RevisionState

    t = np.linspace(0, 6, 300)
    path = TimedPath.from_samples(t, np.stack([np.zeros_like(t), 1.2 * t], axis=1))
    offsets = (1 / 3, 2 / 3, 1.0)
    pos = np.array([[0.8, 0.0, 2.0]])  # 0.8 m beside the path
    tangent = QueryReviser(path, offsets, RevisionSettings(v_max=3.0)).revise(pos, RevisionState.start(1))
    along = lambda i: path.tangent(i)  # noqa: E731
    net = QueryReviser(path, offsets, RevisionSettings(v_max=3.0, facing="net"), facing_track=along)
    got = net.revise(pos, RevisionState.start(1))
    np.testing.assert_allclose(got.directions, tangent.directions, atol=1e-9)
    assert got.directions[0, 0, 0] < -0.3  # toward the path (x = 0)
    unsteered = QueryReviser(path, offsets, RevisionSettings(v_max=3.0, facing="net", steer=False),
                             facing_track=along).revise(pos, RevisionState.start(1))
    np.testing.assert_allclose(unsteered.directions, np.tile([0.0, 0.0, 1.0], (1, 3, 1)), atol=1e-9)


def test_follow_settings_reject_an_unknown_feedback():
    from motionmatch.runtime.follow import FollowSettings

    with pytest.raises(ValueError, match=r"net_feedback must be one of \('character', 'plan'\)"):
        FollowSettings(net_feedback="past")
