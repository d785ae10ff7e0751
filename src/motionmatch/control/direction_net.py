"""DirectionNet: the facing direction a character would have along a drawn path (paper Sec. VI-D).

A one-layer GRU (30 hidden units) followed by a linear layer reads a 4-second window of
path points around the desired position (2 s before, 2 s after, 30 steps a second;
missing points at the path's ends are the end points repeated) and gives the facing at
every step. It is trained on the database's own root trajectories (each clip sliced
into 4-second windows), so it learns how the people in the data faced while moving
along such paths: mostly forward, but side steps and back steps where the data has them.

Inputs and outputs are expressed in the frame of the character's facing at the window's
centre (origin: the path point there): per step, the point's position, its velocity
(m/s), its displacement 1/3 s ahead and, as the paper has it, the *previous* step's
facing (8 numbers, normalised with the training set's mean and spread); output: the
facing (x, z) in that frame, normalised at use.

The previous facings (``DirectionNetConfig.feedback``, the paper's formulation): over the
window's past half and its centre they are known (the follower's log, :class:`FacingLog`:
the facings the character had there, or those DirectionNet planned itself,
``FollowSettings.net_feedback``; the first one repeated before the log starts, as the
paper pads the past with the start); beyond the centre each step is fed the unit vector
of its own prediction for the step before (autoregressive at run time).

Training is robust to that feedback by running it (``DirectionNetConfig.rollout``): each
batch is given the person's facings up to a random step between the first and the
centre (jittered by a small random angle), and from there on the network is fed its own
predictions, as at run time, with the L1 loss on those fed-back steps; the gradient flows
through the loop (clipped). Starting the loop anywhere from the first step teaches it to
run long on its own facings, as a plan fed back along a whole path does. (Teacher forcing
with the person's facings turned by a random drift, ``rollout=False``, made a network that
kept whatever facing it was fed: measured in ``benchmarks/README.md``, "DirectionNet with
its past facings".)

Networks of the first format (``feedback=False``, ``motionmatch-direction-net-1``: the
facing entered only as the frame, no facing input) still load and run.

Training (:func:`train_direction_net`) needs PyTorch (an optional extra: ``pip install
torch``); L1 loss, Adam. Inference (:class:`DirectionNet`) is plain numpy/numba (the
feedback loop included), and a trained network is saved as ``.npz`` (no pickle). No
trained network ships in the package (LAFAN1's licence forbids it):
:mod:`~motionmatch.control.direction_cache` trains the default one on first use and
caches it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numba
import numpy as np

from motionmatch._files import not_npz
from motionmatch._limits import loads_json, read_npz
from motionmatch.errors import MotionMatchError

__all__ = [
    "DirectionNet",
    "DirectionNetConfig",
    "FacingLog",
    "MissingTorchError",
    "direction_windows",
    "facing_errors",
    "tracks_from_database",
    "train_direction_net",
]

FORMAT = "motionmatch-direction-net-2"
#: files of the first format (no facing fed back) still load
FORMATS = ("motionmatch-direction-net-1", FORMAT)


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
        feedback: the previous step's facing is an input (the paper's formulation; module
            doc); ``False``: the first format, whose facing entered only as the frame.
        rollout: train by running the feedback loop (module doc); ``False``: teacher forcing
            with the drift below.
        drift_deg, walk_deg, jitter_deg: training noise on the fed-back facings: without
            ``rollout``, the drift's offset and its random walk's step (degrees per step,
            standard deviations at full scale) past the centre; the jitter (both) before it.
    """

    hidden: int = 30
    step_fps: float = 30.0
    past_s: float = 2.0
    future_s: float = 2.0
    lookahead_s: float = 1 / 3
    feedback: bool = True
    rollout: bool = True
    drift_deg: float = 20.0
    walk_deg: float = 3.0
    jitter_deg: float = 2.0

    @property
    def past(self) -> int:
        return round(self.past_s * self.step_fps)

    @property
    def steps(self) -> int:
        return self.past + round(self.future_s * self.step_fps)

    @property
    def lookahead(self) -> int:
        return max(1, round(self.lookahead_s * self.step_fps))

    @property
    def known(self) -> int:
        """Steps whose facing is known at run time (the past half and the centre)."""
        return self.past + 1

    @property
    def inputs(self) -> int:
        """Inputs per step: the path's ``N_IN`` and, with feedback, the previous facing."""
        return N_IN + (N_FACING if self.feedback else 0)


#: path inputs per step (position, velocity, displacement ahead: x, z each)
N_IN = 6
#: the fed-back facing (x, z)
N_FACING = 2


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
    the true facing and DirectionNet's (``net``; skipped if None; with feedback, fed the
    person's facings up to the centre and its own after), the path tangent's
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
        o = net.forward(x, y)[:, steps]  # (with feedback: the person's past facings, then its own)
        out["net_deg"] = err(np.arctan2(o[..., 0], o[..., 1]))
    return out


# ------------------------------------------------------------------------- inference
@numba.njit(cache=True)
def _gru_forward(x, facings, n_known, w_ih, w_hh, b_ih, b_hh, w_out, b_out, f_mean, f_std,
                 out):  # pragma: no cover - compiled
    """One window: normalised path inputs ``x [T, 6]``; with feedback (``w_ih`` has more
    columns than ``x``), step ``t`` also reads the facing of step ``t - 1`` (step 0: of
    step 0): ``facings [t - 1]`` while ``t - 1 < n_known``, else the unit vector of its own
    output ``out [t - 1]``; fed-back facings are normalised by ``f_mean``, ``f_std [2]``.
    Writes ``out [T, 2]`` (raw outputs)."""
    T = x.shape[0]
    H = w_hh.shape[1]
    n_path = x.shape[1]
    n_in = w_ih.shape[1]
    u = np.empty(n_in)
    h = np.zeros(H)
    gi = np.empty(3 * H)
    gh = np.empty(3 * H)
    for t in range(T):
        for i in range(n_path):
            u[i] = x[t, i]
        if n_in > n_path:
            s = t - 1 if t > 0 else 0
            if s < n_known:
                p0 = facings[s, 0]
                p1 = facings[s, 1]
            else:
                p0 = out[s, 0]
                p1 = out[s, 1]
                n = math.sqrt(p0 * p0 + p1 * p1)
                if n > 1e-9:
                    p0 /= n
                    p1 /= n
                else:
                    p0 = 0.0
                    p1 = 1.0
            u[n_path] = (p0 - f_mean[0]) / f_std[0]
            u[n_path + 1] = (p1 - f_mean[1]) / f_std[1]
        for j in range(3 * H):
            a = b_ih[j]
            for i in range(n_in):
                a += w_ih[j, i] * u[i]
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


class FacingLog:
    """The facings a path follower had at the desired positions it passed: what
    DirectionNet reads as the previous facings over its window's past half.

    :meth:`record` each time the desired position ``i_d`` (a path index, never moving
    back) is revised, with the character's yaw then; :meth:`at` gives the yaws at any path
    indices (interpolated, unwrapped; before the log starts: its first yaw, as the paper
    pads the past with the start). Entries older than ``keep`` path samples behind the
    newest are dropped.
    """

    def __init__(self, keep: float):
        self.keep = float(keep)
        self._i: list[float] = []
        self._yaw: list[float] = []

    def record(self, index: float, yaw: float) -> None:
        index, yaw = float(index), float(yaw)
        if self._yaw:  # unwrapped: the nearest turn of the angle to the last one
            last = self._yaw[-1]
            yaw = last + (yaw - last + math.pi) % (2 * math.pi) - math.pi
        if self._i and index <= self._i[-1]:
            self._yaw[-1] = yaw  # the same (or an earlier) index: the latest facing there
            return
        self._i.append(index)
        self._yaw.append(yaw)
        while len(self._i) > 2 and self._i[1] < index - self.keep:
            del self._i[0], self._yaw[0]

    def at(self, indices: np.ndarray, default: float) -> np.ndarray:
        """Yaws (rad) ``[N]`` at path ``indices [N]`` (``default`` when nothing is logged)."""
        if not self._i:
            return np.full(len(indices), float(default))
        return np.interp(np.asarray(indices, dtype=np.float64), self._i, self._yaw)

    def __len__(self) -> int:
        return len(self._i)


class DirectionNet:
    """A trained DirectionNet (numpy weights in PyTorch's GRU layout: gates r, z, n).

    Attributes:
        config: :class:`DirectionNetConfig`.
        weights: ``w_ih [3H, I]`` (``I = config.inputs``: 8 with feedback, else 6),
            ``w_hh [3H, H]``, ``b_ih [3H]``, ``b_hh [3H]``, ``w_out [2, H]``, ``b_out [2]``,
            ``in_mean [I]``, ``in_std [I]``.
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
        H, n_in = self.config.hidden, self.config.inputs
        if (self.w["w_hh"].shape != (3 * H, H) or self.w["w_ih"].shape != (3 * H, n_in)
                or self.w["in_mean"].shape != (n_in,) or self.w["in_std"].shape != (n_in,)):
            raise ValueError(f"DirectionNet weights do not fit {H} hidden units and {n_in} inputs")
        self.history = list(history)

    # --------------------------------------------------------------- running
    def forward(self, inputs: np.ndarray, facings: np.ndarray | None = None, known: int | None = None) -> np.ndarray:
        """Raw outputs ``[..., T, 2]`` for path inputs ``[..., T, 6]`` (un-normalised).

        With feedback, ``facings [..., T', 2]`` (unit, in the window's frame) are the
        facings of the first ``known`` steps (default ``config.known``, at most ``T'``;
        ``None``: facing forward, ``(0, 1)``, throughout); each later step is fed the
        network's own prediction of the step before. Without feedback both are ignored.
        """
        x = np.asarray(inputs, dtype=np.float64)
        lead, T = x.shape[:-2], x.shape[-2]
        m, sd = self.w["in_mean"], self.w["in_std"]
        xs = ((x - m[:N_IN]) / sd[:N_IN]).reshape(-1, T, N_IN)
        B = xs.shape[0]
        if self.config.feedback:
            k = self.config.known if known is None else int(known)
            if facings is None:
                f = np.broadcast_to(np.array([0.0, 1.0]), (B, max(k, 1), 2))
            else:
                f = np.asarray(facings, dtype=np.float64).reshape(B, -1, 2)
                k = min(k, f.shape[1])
            fm, fs = m[N_IN:], sd[N_IN:]
        else:
            k, f = 0, np.zeros((B, 1, 2))
            fm, fs = np.zeros(2), np.ones(2)
        out = np.empty((B, T, 2))
        w = self.w
        for b in range(B):
            _gru_forward(np.ascontiguousarray(xs[b]), np.ascontiguousarray(f[b]), k, w["w_ih"], w["w_hh"],
                         w["b_ih"], w["b_hh"], w["w_out"], w["b_out"], fm, fs, out[b])
        return out.reshape(*lead, T, 2)

    def facing_track(self, path, i_d: int, yaw: float, log: FacingLog | None = None) -> Callable[[np.ndarray], np.ndarray]:
        """Facings along ``path`` (a :class:`~motionmatch.control.path.TimedPath`) for a
        character facing ``yaw`` (rad) at the desired position ``p(i_d)``: a function of
        fractional path indices ``[...]`` -> world facings ``[..., 3]`` (valid for the window,
        2 s either side of ``i_d``; beyond, the window's end values). With feedback, the
        past half's facings are ``log``'s (``None``: ``yaw`` throughout) and the future
        half's the network's, each fed back to the next step."""
        cfg = self.config
        step = path.fps / cfg.step_fps
        rel = np.arange(cfg.steps) - cfg.past
        idx = i_d + rel * step
        pts = path.point(idx)[:, [0, 2]]
        ahead = path.point(idx + cfg.lookahead * step)[:, [0, 2]]
        centre = path.point(float(i_d))[[0, 2]]
        x = _inputs(pts, ahead, centre, np.float64(yaw), cfg.step_fps)
        known = None
        if cfg.feedback:
            k = cfg.known
            yaws = np.full(k, float(yaw)) if log is None else log.at(idx[:k], yaw)
            yaws[-1] = yaw
            known = _to_frame(np.stack([np.sin(yaws), np.cos(yaws)], axis=-1), np.float64(yaw))
        y = self.forward(x, known)
        n = np.linalg.norm(y, axis=-1, keepdims=True)
        y = np.where(n > 1e-9, y / np.maximum(n, 1e-9), np.array([0.0, 1.0]))
        if known is not None:
            y[: len(known)] = known  # the past is what the character did
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
        if not isinstance(meta, dict) or meta.get("format") not in FORMATS:
            raise MotionMatchError(f"{path}: not a DirectionNet file; {fix}")
        missing = [k for k in cls.KEYS if k not in z]
        if missing:
            raise MotionMatchError(f"{path}: cannot read the DirectionNet: arrays {missing} are missing; {fix}")
        w = {k: z[k] for k in cls.KEYS}
        conf = meta.get("config")
        known = {f.name for f in fields(DirectionNetConfig)}
        if not isinstance(conf, dict) or not set(conf) <= known:
            raise MotionMatchError(f"{path}: the DirectionNet's settings are not readable; {fix}")
        if meta["format"] == FORMATS[0]:
            conf = {**conf, "feedback": False}  # the first format fed no facing back
        try:
            return cls(w, DirectionNetConfig(**conf), meta.get("history", ()))
        except (TypeError, ValueError) as e:
            raise MotionMatchError(f"{path}: cannot read the DirectionNet: {e}; {fix}") from None


# ---------------------------------------------------------------------------- training
def train_direction_net(tracks: Sequence[tuple[np.ndarray, np.ndarray, float]] | object, *,
                        config: DirectionNetConfig | None = None, epochs: int = 30, batch_size: int = 256,
                        lr: float = 3e-3, stride: int = 5, seed: int = 0, progress: bool = False,
                        tags: str | None = "!dance & !creep & !jump", holdout: str | None = None) -> DirectionNet:
    """Train a DirectionNet (needs PyTorch) on root trajectories (or a database, whose
    clips' root tracks :func:`tracks_from_database` takes): 4-second windows, L1 loss on the
    facings (with feedback: of the steps fed back, run as the module doc says), Adam with
    a cosine learning-rate decay (through the loop: gradients clipped to norm 1; the first
    format trains as it always did). Deterministic for a seed:
    one CPU thread, seeded initialisation, batch order and noise (about 5 s an epoch on
    LAFAN1's locomotion, ~8k windows, on a loaded 2-core machine)."""
    torch = require_torch()
    cfg = config or DirectionNetConfig()
    if not isinstance(tracks, (list, tuple)):
        tracks = tracks_from_database(tracks, tags, holdout=holdout)
    x, y = direction_windows(tracks, cfg, stride=stride)
    mean = x.reshape(-1, N_IN).mean(axis=0)
    std = x.reshape(-1, N_IN).std(axis=0) + 1e-6
    if cfg.feedback:
        mean = np.concatenate([mean, y.reshape(-1, N_FACING).mean(axis=0)])
        std = np.concatenate([std, y.reshape(-1, N_FACING).std(axis=0) + 1e-6])
    xn = (x - mean[:N_IN]) / std[:N_IN]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # deterministic, and on a shared CPU much faster than contending threads
    try:
        return _train(torch, cfg, xn, y, mean, std, epochs, batch_size, lr, seed, progress)
    finally:
        torch.set_num_threads(threads)


def previous_facings(y, cfg: DirectionNetConfig, noise: bool, gen=None, drift: bool = True):
    """The fed-back inputs of training (torch tensors): the facing of each step's previous
    step (step 0: its own), ``[B, T, 2]`` from target facings ``y [B, T, 2]``; with
    ``noise``, turned by a random jitter (``config.jitter_deg``) and, with ``drift``, past
    the centre (the steps fed back at run time) by a random drift instead
    (``drift_deg``, ``walk_deg``), each window's angles scaled by a random factor in
    [0, 1); drawn with the torch generator ``gen``."""
    import torch

    prev = torch.cat([y[:, :1], y[:, :-1]], dim=1)
    if not noise:
        return prev
    B, T = y.shape[0], y.shape[1]
    k = cfg.known
    scale = torch.rand(B, 1, generator=gen, dtype=y.dtype)
    rad = math.pi / 180
    ang = torch.randn(B, T, generator=gen, dtype=y.dtype) * (cfg.jitter_deg * rad)
    fed = T - (k + 1)  # steps t > k read out[t - 1], t - 1 >= k: predictions at run time
    if fed > 0 and drift:
        walk = torch.cumsum(torch.randn(B, fed, generator=gen, dtype=y.dtype) * (cfg.walk_deg * rad), dim=1)
        offset = torch.randn(B, 1, generator=gen, dtype=y.dtype) * (cfg.drift_deg * rad)
        ang = torch.cat([ang[:, : k + 1], offset + walk], dim=1)
    ang = ang * scale
    c, s = torch.cos(ang), torch.sin(ang)
    return torch.stack([c * prev[..., 0] - s * prev[..., 1], s * prev[..., 0] + c * prev[..., 1]], dim=-1)


def torch_rollout(gru, lin, xn, facings, known: int, f_mean, f_std):
    """PyTorch's forward of a feedback DirectionNet at run time (the reference of the
    compiled :meth:`DirectionNet.forward`): normalised path inputs ``xn [B, T, 6]``, the
    first ``known`` of ``facings [B, T', 2]`` given, each later step fed the unit vector of
    the output before; returns raw outputs ``[B, T, 2]``."""
    import torch

    T = xn.shape[1]
    n = min(known + 1, T)  # steps 0..known read given facings
    f = facings[:, :known]
    prev = torch.cat([f[:, :1], f], dim=1)[:, :n]
    h_all, h = gru(torch.cat([xn[:, :n], (prev - f_mean) / f_std], dim=-1))
    outs = [lin(h_all)]
    last = outs[0][:, -1]
    for t in range(n, T):
        u = last / torch.clamp(torch.linalg.vector_norm(last, dim=-1, keepdim=True), min=1e-9)
        step, h = gru(torch.cat([xn[:, t : t + 1], ((u - f_mean) / f_std)[:, None]], dim=-1), h)
        last = lin(step[:, 0])
        outs.append(last[:, None])
    return torch.cat(outs, dim=1)


def _train(torch, cfg, xn, y, mean, std, epochs, batch_size, lr, seed, progress) -> DirectionNet:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    gru = torch.nn.GRU(cfg.inputs, cfg.hidden, num_layers=1, batch_first=True)
    lin = torch.nn.Linear(cfg.hidden, 2)
    params = list(gru.parameters()) + list(lin.parameters())
    opt = torch.optim.Adam(params, lr=lr)
    steps_per_epoch = max(1, math.ceil(len(xn) / batch_size))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, epochs * steps_per_epoch))
    loss_fn = torch.nn.L1Loss()
    X = torch.from_numpy(np.ascontiguousarray(xn, dtype=np.float32))
    Y = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32))
    f_mean = torch.from_numpy(mean[N_IN:].astype(np.float32))
    f_std = torch.from_numpy(std[N_IN:].astype(np.float32))
    history = []
    from tqdm.auto import tqdm

    for _ in tqdm(range(epochs), desc="training DirectionNet", unit="epoch", disable=not progress):
        perm = torch.randperm(len(X), generator=gen)
        total = 0.0
        for s in range(0, len(X), batch_size):
            b = perm[s : s + batch_size]
            inp = X[b]
            if cfg.feedback and cfg.rollout:
                # as at run time: the past given (jittered), each later step fed its own prediction
                jit = previous_facings(Y[b], cfg, True, gen, drift=False)
                given = torch.cat([jit[:, 1:], Y[b][:, -1:]], dim=1)  # facing t (jittered), not t - 1
                # from a random step (up to the centre): long runs of its own facings, as a
                # plan fed back along a whole path has
                k = int(torch.randint(1, cfg.known + 1, (1,), generator=gen))
                out = torch_rollout(gru, lin, inp, given, k, f_mean, f_std)
                loss = loss_fn(out[:, k:], Y[b][:, k:])
            else:
                if cfg.feedback:
                    prev = previous_facings(Y[b], cfg, True, gen)
                    inp = torch.cat([inp, (prev - f_mean) / f_std], dim=-1)
                out, _ = gru(inp)
                loss = loss_fn(lin(out), Y[b])
            opt.zero_grad()
            loss.backward()
            if cfg.feedback and cfg.rollout:
                torch.nn.utils.clip_grad_norm_(params, 1.0)  # the fed-back loop can blow gradients up
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
