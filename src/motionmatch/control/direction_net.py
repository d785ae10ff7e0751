"""DirectionNet: the facing direction a character would have along a drawn path (paper Sec. VI-D).

A one-layer GRU (30 hidden units) followed by a linear layer reads a 4-second window of
path points around the desired position (2 s before, 2 s after, 30 steps a second;
missing points at the path's ends are the end points repeated) and gives the facing at
every step. It is trained on the database's own root trajectories (each clip sliced
into 4-second windows), so it learns how the people in the data faced while moving
along such paths: mostly forward, but side steps and back steps where the data has them.

Inputs and outputs are expressed in the frame of the character's facing at the window's
centre (origin: the path point there): per step, the point's position, its velocity
(m/s) and its displacement 1/3 s ahead (6 numbers, normalised with the training set's
mean and spread); output: the facing (x, z) in that frame, normalised at use. Our
reading of the paper's "previous facing direction" input is this frame: the facing now
enters once, as the frame, and no prediction is fed back, so errors do not accumulate
along the window.

Training (:func:`train_direction_net`) needs PyTorch (an optional extra: ``pip install
torch``); L1 loss, Adam. Inference (:class:`DirectionNet`) is plain numpy/numba, and a
trained network is saved as ``.npz`` (no pickle). No trained network ships in the package
(LAFAN1's licence forbids it): :mod:`~motionmatch.control.direction_cache` trains the
default one on first use and caches it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numba
import numpy as np

from motionmatch._files import not_npz
from motionmatch._limits import loads_json, read_npz
from motionmatch.errors import MotionMatchError

__all__ = [
    "DirectionNet",
    "DirectionNetConfig",
    "MissingTorchError",
    "direction_windows",
    "facing_errors",
    "tracks_from_database",
    "train_direction_net",
]

FORMAT = "motionmatch-direction-net-1"


class MissingTorchError(MotionMatchError, ImportError):
    """PyTorch is needed (to train DirectionNet) but is not installed."""


def require_torch():
    try:
        import torch
    except ImportError:
        raise MissingTorchError(
            "training DirectionNet needs PyTorch (the 'net' extra), which is not installed: pip install torch "
            "(CPU is enough; DirectionNet is trained on this machine on first use, as LAFAN1's licence forbids "
            "shipping a trained one), or pass --net NET.npz (a network trained elsewhere)"
        ) from None
    return torch


@dataclass(frozen=True)
class DirectionNetConfig:
    """Shape of the network and its windows.

    Attributes:
        hidden: GRU units (the paper: 30).
        step_fps: window steps per second (the paper: 30).
        past_s, future_s: seconds of path before and after the centre (the paper: 2 + 2).
        lookahead_s: seconds ahead of the displacement input.
    """

    hidden: int = 30
    step_fps: float = 30.0
    past_s: float = 2.0
    future_s: float = 2.0
    lookahead_s: float = 1 / 3

    @property
    def past(self) -> int:
        return round(self.past_s * self.step_fps)

    @property
    def steps(self) -> int:
        return self.past + round(self.future_s * self.step_fps)

    @property
    def lookahead(self) -> int:
        return max(1, round(self.lookahead_s * self.step_fps))


N_IN = 6


def _to_frame(v: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Ground-plane vectors ``[..., T, 2]`` (x, z) into frames facing ``yaw [...]`` (+Z forward)."""
    c = np.cos(yaw)[..., None]
    s = np.sin(yaw)[..., None]
    return np.stack([c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]], axis=-1)


def _from_frame(v: np.ndarray, yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.stack([c * v[..., 0] + s * v[..., 1], -s * v[..., 0] + c * v[..., 1]], axis=-1)


def _inputs(points: np.ndarray, ahead: np.ndarray, centre: np.ndarray, yaw: np.ndarray, fps: float) -> np.ndarray:
    """Network inputs ``[..., T, 6]`` from window points ``[..., T, 2]`` (x, z), the points
    ``lookahead`` steps later, the window's centre ``[..., 2]`` and the frame's facing ``yaw [...]``."""
    rel = points - centre[..., None, :]
    vel = np.empty_like(points)
    vel[..., 1:-1, :] = (points[..., 2:, :] - points[..., :-2, :]) * (fps / 2)
    vel[..., 0, :] = (points[..., 1, :] - points[..., 0, :]) * fps
    vel[..., -1, :] = (points[..., -1, :] - points[..., -2, :]) * fps
    disp = ahead - points
    return np.concatenate([_to_frame(rel, yaw), _to_frame(vel, yaw), _to_frame(disp, yaw)], axis=-1)


# ------------------------------------------------------------------------ training data
def tracks_from_database(db, tags: str | None = "!dance & !creep & !jump", *, holdout: str | None = None,
                         heldout: bool = False) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """Root trajectories of a database's clips: ``(positions [F, 2] (x, z), yaws [F], fps)``
    per clip that ``tags`` admits (any frame of it; all clips if ``tags`` is None).
    ``holdout`` (e.g. ``"subject4"``): leave out the clips whose name contains it, or, with
    ``heldout=True``, take only those (to test on people the network never saw)."""
    from motionmatch.anim import quat

    pos = db.translations[:, 0].astype(np.float64)
    yaw = quat.yaw_angle(db.rotations[:, 0].astype(np.float64))
    allowed = None
    if tags:
        try:
            m = db.mask(tags, strict=False)  # (a tag the data lacks: no clip has it)
            allowed = np.bincount(db.frame_clip[m], minlength=len(db.clip_names)) > 0
        except Exception:
            allowed = None
    out = []
    for c, (a, b) in enumerate(zip(db.clip_starts, db.clip_stops)):
        if allowed is not None and not allowed[c]:
            continue
        if holdout and (holdout in db.clip_names[c]) != heldout:
            continue
        if b - a >= 2:
            out.append((pos[a:b][:, [0, 2]], np.unwrap(yaw[a:b]), float(db.fps)))
    return out


def direction_windows(tracks: Sequence[tuple[np.ndarray, np.ndarray, float]], config: DirectionNetConfig | None = None,
                      stride: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Training windows from root trajectories: inputs ``[B, T, 6]`` and target facings
    ``[B, T, 2]`` (in each window's frame), centred every ``stride`` steps."""
    cfg = config or DirectionNetConfig()
    xs, ys = [], []
    T, P, L = cfg.steps, cfg.past, cfg.lookahead
    for pos, yaw, fps in tracks:
        n = math.floor((len(pos) - 1) / fps * cfg.step_fps) + 1
        if n < 2:
            continue
        ts = np.arange(n) / cfg.step_fps * fps  # fractional source frames
        fr = np.arange(len(pos))
        p = np.stack([np.interp(ts, fr, pos[:, 0]), np.interp(ts, fr, pos[:, 1])], axis=1)
        y = np.interp(ts, fr, yaw)
        centres = np.arange(0, n, stride)
        idx = np.clip(centres[:, None] + np.arange(T)[None, :] - P, 0, n - 1)
        ahead = np.clip(idx + L, 0, n - 1)
        yc = y[centres]
        xs.append(_inputs(p[idx], p[ahead], p[centres], yc, cfg.step_fps))
        face = np.stack([np.sin(y[idx]), np.cos(y[idx])], axis=-1)
        ys.append(_to_frame(face, yc))
    if not xs:
        raise ValueError("no trajectories long enough to make DirectionNet training windows")
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.float32)


def facing_errors(net: DirectionNet | None, tracks: Sequence[tuple[np.ndarray, np.ndarray, float]],
                  ahead_s: Sequence[float] = (1 / 3, 2 / 3, 1.0), min_speed: float = 0.3,
                  stride: int = 15) -> dict[str, float]:
    """How well a facing model predicts how the people of ``tracks`` faced along their own
    root paths, at the query's future times ``ahead_s`` after each window's centre (where
    the path moves at ``min_speed`` m/s or more): mean absolute angle (degrees) between
    the true facing and DirectionNet's (``net``; skipped if None), the path tangent's
    (the direction of travel) and the facing kept from the centre (a joystick held still
    relative to the body). Returns ``{"net_deg", "tangent_deg", "held_deg", "samples"}``."""
    cfg = net.config if net is not None else DirectionNetConfig()
    x, y = direction_windows(tracks, cfg, stride=stride)
    steps = [cfg.past + round(a * cfg.step_fps) for a in ahead_s]
    vel = x[:, steps, 2:4].astype(np.float64)  # velocity in the centre's frame
    moving = np.hypot(vel[..., 0], vel[..., 1]) >= min_speed
    true = np.arctan2(y[:, steps, 0], y[:, steps, 1])

    def err(pred):
        d = np.abs((pred - true + np.pi) % (2 * np.pi) - np.pi)
        return float(np.degrees(d[moving].mean())) if moving.any() else float("nan")

    out = {"tangent_deg": err(np.arctan2(vel[..., 0], vel[..., 1])), "held_deg": err(np.zeros_like(true)),
           "samples": int(moving.sum())}
    if net is not None:
        o = net.forward(x)[:, steps]
        out["net_deg"] = err(np.arctan2(o[..., 0], o[..., 1]))
    return out


# ------------------------------------------------------------------------- inference
@numba.njit(cache=True)
def _gru_forward(x, w_ih, w_hh, b_ih, b_hh, w_out, b_out, out):  # pragma: no cover - compiled
    T = x.shape[0]
    H = w_hh.shape[1]
    h = np.zeros(H)
    gi = np.empty(3 * H)
    gh = np.empty(3 * H)
    for t in range(T):
        for j in range(3 * H):
            a = b_ih[j]
            for i in range(x.shape[1]):
                a += w_ih[j, i] * x[t, i]
            gi[j] = a
            b = b_hh[j]
            for i in range(H):
                b += w_hh[j, i] * h[i]
            gh[j] = b
        for j in range(H):
            r = 1.0 / (1.0 + math.exp(-(gi[j] + gh[j])))
            z = 1.0 / (1.0 + math.exp(-(gi[H + j] + gh[H + j])))
            nn = math.tanh(gi[2 * H + j] + r * gh[2 * H + j])
            h[j] = (1.0 - z) * nn + z * h[j]
        for k in range(out.shape[1]):
            a = b_out[k]
            for i in range(H):
                a += w_out[k, i] * h[i]
            out[t, k] = a


class DirectionNet:
    """A trained DirectionNet (numpy weights in PyTorch's GRU layout: gates r, z, n).

    Attributes:
        config: :class:`DirectionNetConfig`.
        weights: ``w_ih [3H, 6]``, ``w_hh [3H, H]``, ``b_ih [3H]``, ``b_hh [3H]``,
            ``w_out [2, H]``, ``b_out [2]``, ``in_mean [6]``, ``in_std [6]``.
        history: training loss per epoch (if trained here).
    """

    KEYS = ("w_ih", "w_hh", "b_ih", "b_hh", "w_out", "b_out", "in_mean", "in_std")

    def __init__(self, weights: dict[str, np.ndarray], config: DirectionNetConfig | None = None,
                 history: Sequence[float] = ()):
        self.config = config or DirectionNetConfig()
        missing = [k for k in self.KEYS if k not in weights]
        if missing:
            raise ValueError(f"DirectionNet weights lack {missing}")
        self.w = {k: np.ascontiguousarray(weights[k], dtype=np.float64) for k in self.KEYS}
        H = self.config.hidden
        if self.w["w_hh"].shape != (3 * H, H) or self.w["w_ih"].shape != (3 * H, N_IN):
            raise ValueError(f"DirectionNet weights do not fit {H} hidden units and {N_IN} inputs")
        self.history = list(history)

    # --------------------------------------------------------------- running
    def forward(self, inputs: np.ndarray) -> np.ndarray:
        """Raw outputs ``[..., T, 2]`` for inputs ``[..., T, 6]`` (un-normalised inputs)."""
        x = np.asarray(inputs, dtype=np.float64)
        lead = x.shape[:-2]
        xs = ((x - self.w["in_mean"]) / self.w["in_std"]).reshape(-1, x.shape[-2], N_IN)
        out = np.empty((xs.shape[0], x.shape[-2], 2))
        w = self.w
        for b in range(xs.shape[0]):
            _gru_forward(np.ascontiguousarray(xs[b]), w["w_ih"], w["w_hh"], w["b_ih"], w["b_hh"], w["w_out"],
                         w["b_out"], out[b])
        return out.reshape(*lead, x.shape[-2], 2)

    def facing_track(self, path, i_d: int, yaw: float) -> Callable[[np.ndarray], np.ndarray]:
        """Facings along ``path`` (a :class:`~motionmatch.control.path.TimedPath`) for a
        character facing ``yaw`` (rad) at the desired position ``p(i_d)``: a function of
        fractional path indices ``[...]`` -> world facings ``[..., 3]`` (valid for the window,
        2 s either side of ``i_d``; beyond, the window's end values)."""
        cfg = self.config
        step = path.fps / cfg.step_fps
        rel = np.arange(cfg.steps) - cfg.past
        idx = i_d + rel * step
        pts = path.point(idx)[:, [0, 2]]
        ahead = path.point(idx + cfg.lookahead * step)[:, [0, 2]]
        centre = path.point(float(i_d))[[0, 2]]
        x = _inputs(pts, ahead, centre, np.float64(yaw), cfg.step_fps)
        y = self.forward(x)
        n = np.linalg.norm(y, axis=-1, keepdims=True)
        y = np.where(n > 1e-9, y / np.maximum(n, 1e-9), np.array([0.0, 1.0]))
        world = _from_frame(y, yaw)
        steps = np.arange(cfg.steps, dtype=np.float64)
        wx, wz = world[:, 0], world[:, 1]
        past = cfg.past

        def track(indices: np.ndarray) -> np.ndarray:
            u = (np.asarray(indices, dtype=np.float64) - i_d) / step + past
            dx = np.interp(u, steps, wx)
            dz = np.interp(u, steps, wz)
            return np.stack([dx, np.zeros_like(dx), dz], axis=-1)

        return track

    # --------------------------------------------------------------- files
    def save(self, path: str | Path) -> Path:
        from motionmatch._files import atomic_write

        path = Path(path)
        meta = json.dumps({"format": FORMAT, "config": asdict(self.config), "history": self.history})
        with atomic_write(path, "wb") as f:
            np.savez(f, meta=np.array(meta), **{k: v for k, v in self.w.items()})
        return path

    @classmethod
    def load(cls, path: str | Path) -> DirectionNet:
        kind = not_npz(Path(path))
        if kind:
            raise MotionMatchError(f"{path}: {kind}; a DirectionNet is an .npz file from "
                                   "'motionmatch train-direction-net'")
        fix = "train one with 'motionmatch train-direction-net'"
        z = read_npz(path, "DirectionNet", fix, error=MotionMatchError)
        meta = loads_json(str(z.get("meta", "")), f"{path}: meta", error=MotionMatchError)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise MotionMatchError(f"{path}: not a DirectionNet file; {fix}")
        missing = [k for k in cls.KEYS if k not in z]
        if missing:
            raise MotionMatchError(f"{path}: cannot read the DirectionNet: arrays {missing} are missing; {fix}")
        w = {k: z[k] for k in cls.KEYS}
        return cls(w, DirectionNetConfig(**meta["config"]), meta.get("history", ()))


# ---------------------------------------------------------------------------- training
def train_direction_net(tracks: Sequence[tuple[np.ndarray, np.ndarray, float]] | object, *,
                        config: DirectionNetConfig | None = None, epochs: int = 30, batch_size: int = 256,
                        lr: float = 3e-3, stride: int = 5, seed: int = 0, progress: bool = False,
                        tags: str | None = "!dance & !creep & !jump", holdout: str | None = None) -> DirectionNet:
    """Train a DirectionNet (needs PyTorch) on root trajectories (or a database, whose
    clips' root tracks :func:`tracks_from_database` takes): 4-second windows, L1 loss on the
    facings of every step, Adam with a cosine learning-rate decay. Deterministic for a seed:
    one CPU thread, seeded initialisation and batch order (about 15 s an epoch on LAFAN1's
    locomotion, ~8k windows)."""
    torch = require_torch()
    cfg = config or DirectionNetConfig()
    if not isinstance(tracks, (list, tuple)):
        tracks = tracks_from_database(tracks, tags, holdout=holdout)
    x, y = direction_windows(tracks, cfg, stride=stride)
    mean = x.reshape(-1, N_IN).mean(axis=0)
    std = x.reshape(-1, N_IN).std(axis=0) + 1e-6
    xn = (x - mean) / std
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # deterministic, and on a shared CPU much faster than contending threads
    try:
        return _train(torch, cfg, xn, y, mean, std, epochs, batch_size, lr, seed, progress)
    finally:
        torch.set_num_threads(threads)


def _train(torch, cfg, xn, y, mean, std, epochs, batch_size, lr, seed, progress) -> DirectionNet:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    gru = torch.nn.GRU(N_IN, cfg.hidden, num_layers=1, batch_first=True)
    lin = torch.nn.Linear(cfg.hidden, 2)
    params = list(gru.parameters()) + list(lin.parameters())
    opt = torch.optim.Adam(params, lr=lr)
    steps_per_epoch = max(1, math.ceil(len(xn) / batch_size))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, epochs * steps_per_epoch))
    loss_fn = torch.nn.L1Loss()
    X = torch.from_numpy(np.ascontiguousarray(xn, dtype=np.float32))
    Y = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32))
    history = []
    from tqdm.auto import tqdm

    for _ in tqdm(range(epochs), desc="training DirectionNet", unit="epoch", disable=not progress):
        perm = torch.randperm(len(X), generator=gen)
        total = 0.0
        for s in range(0, len(X), batch_size):
            b = perm[s : s + batch_size]
            out, _ = gru(X[b])
            loss = loss_fn(lin(out), Y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(b)
        history.append(total / len(X))
    w = {
        "w_ih": gru.weight_ih_l0.detach().numpy().astype(np.float64),
        "w_hh": gru.weight_hh_l0.detach().numpy().astype(np.float64),
        "b_ih": gru.bias_ih_l0.detach().numpy().astype(np.float64),
        "b_hh": gru.bias_hh_l0.detach().numpy().astype(np.float64),
        "w_out": lin.weight.detach().numpy().astype(np.float64),
        "b_out": lin.bias.detach().numpy().astype(np.float64),
        "in_mean": mean.astype(np.float64),
        "in_std": std.astype(np.float64),
    }
    return DirectionNet(w, cfg, history)
