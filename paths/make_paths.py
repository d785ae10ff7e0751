"""Generate the test paths shipped in this folder (deterministic: run it to rebuild them).

    python paths/make_paths.py            # writes paths/*.json and paths/tight/*.json

Each path is what a drawing would record: ``{"points": [[t, x, z], ...]}`` in seconds and
metres on the ground (Y up), at irregular event times (8 to 30 ms apart, as mouse
events arrive) with a few millimetres of jitter, in world seconds (drawing-speed factor
1.0). Extra keys (``name``, ``description``) are ignored by the loader.

* ``s_curve``: a double bend at walking speed (1.3 m/s), 13 m.
* ``square``: a 5 m square with 90-degree corners at jogging speed (2.5 m/s); the speed
  stays constant through the corners, as a hand-drawn path does (abrupt).
* ``zigzag``: five 4 m legs with 120-degree turns between them, walking (1.3 m/s).
* ``circle``: the paper's circle (radius 4 m), speed rising linearly from 0 to 9 m/s
  over one and a half laps: far faster than a person can run at the end.
* ``figure_eight``: a figure-eight that crosses itself, walking (1.4 m/s).

The tight set (``paths/tight/``, :func:`make_tight`, its own random seed): turns of
radius 0.3 to 0.5 m drawn at 3 to 4.5 m/s along the curve, far sharper than anyone runs
them (4 m/s on a 0.4 m radius is 40 m/s^2 sideways; sprinters turn at about 10). A
person would cut inside such turns and slow down for them; the follower should too, and
still complete every path.

* ``slalom``: seven alternating 120-degree arcs of radius 0.4 m joined by 1 m straights, 4 m/s.
* ``hairpins``: 4 m straights joined by 180-degree turns of radius 0.4 and 0.5 m, 3.5 m/s.
* ``loops``: two small full loops (radius 0.5 m, then 0.4 m the other way) on a straight line, 3 m/s.
* ``chicane``: right-angle bends of radius 0.3 m alternating left and right, 1.2 m apart, 4.5 m/s.
* ``switchbacks``: 150-degree turns of radius 0.35 m on 2.5 m legs, 3 m/s.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _curve_from_polyline(poly: np.ndarray, n: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """Dense points along a polyline ``[V, 2]`` and their cumulative length."""
    seg = np.linalg.norm(np.diff(poly, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    ss = np.linspace(0.0, s[-1], n)
    return np.stack([np.interp(ss, s, poly[:, 0]), np.interp(ss, s, poly[:, 1])], axis=1), ss


def _curve_from_function(f, a: float, b: float, n: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    u = np.linspace(a, b, n)
    p = np.stack(f(u), axis=1)
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))])
    return p, s


def _speed_profile(v: float, ramp: float):
    """Speed at time t: ease in over ``ramp`` s to ``v`` (cosine), constant; ease out near the end."""
    def speed(t: np.ndarray, remaining: np.ndarray) -> np.ndarray:
        up = np.where(t < ramp, 0.5 - 0.5 * np.cos(np.pi * np.clip(t / ramp, 0, 1)), 1.0)
        # slow down over the last v * ramp / 2 metres
        stop = np.clip(remaining / max(v * ramp / 2, 1e-6), 0.0, 1.0)
        return v * np.maximum(up, 0.05) * np.sqrt(stop)
    return speed


def _timed(points: np.ndarray, s: np.ndarray, speed, rng: np.random.Generator, jitter: float = 0.003,
           dt_range: tuple[float, float] = (0.008, 0.030)) -> np.ndarray:
    """Walk along the curve with ``speed(t, remaining_length)``, sampling at irregular event times."""
    L = s[-1]
    # integrate the travelled length finely, then read positions at event times
    h = 1e-3
    t, d, ts, ds = 0.0, 0.0, [0.0], [0.0]
    while d < L - 1e-6 and t < 600:
        v = float(speed(np.array(t), np.array(L - d)))
        d = min(L, d + max(v, 1e-3) * h)
        t += h
        ts.append(t)
        ds.append(d)
    ts, ds = np.array(ts), np.array(ds)
    ev = [0.0]
    while ev[-1] < ts[-1]:
        ev.append(ev[-1] + rng.uniform(*dt_range))
    ev = np.array(ev[:-1] + [ts[-1]])
    dist = np.interp(ev, ts, ds)
    x = np.interp(dist, s, points[:, 0]) + rng.normal(0, jitter, len(ev))
    z = np.interp(dist, s, points[:, 1]) + rng.normal(0, jitter, len(ev))
    x[0], z[0] = points[0]
    return np.stack([ev, x, z], axis=1)


def _circle_rising(rng: np.random.Generator, radius: float = 4.0, laps: float = 1.5, v_end: float = 9.0) -> np.ndarray:
    """Speed rising linearly in time from 0 to ``v_end`` over ``laps`` laps."""
    L = 2 * np.pi * radius * laps
    T = 2 * L / v_end  # s = v_end t^2 / (2 T) reaches L at T
    ev = [0.0]
    while ev[-1] < T:
        ev.append(ev[-1] + rng.uniform(0.008, 0.030))
    ev = np.array(ev[:-1] + [T])
    s = v_end * ev**2 / (2 * T)
    ang = s / radius
    # start at the origin heading +Z, turning left (toward +X)
    x = radius - radius * np.cos(ang) + rng.normal(0, 0.003, len(ev))
    z = radius * np.sin(ang) + rng.normal(0, 0.003, len(ev))
    x[0], z[0] = 0.0, 0.0
    return np.stack([ev, x, z], axis=1)


def make_all() -> dict[str, dict]:
    rng = np.random.default_rng(20240611)
    out = {}
    # S-curve: x = 1.5 sin(2 pi z / 12) for z in [0, 12]
    pts, s = _curve_from_function(lambda u: (1.5 * np.sin(2 * np.pi * u / 12.0), u), 0.0, 12.0)
    out["s_curve"] = ("S-curve (double bend) at walking speed, 1.3 m/s", _timed(pts, s, _speed_profile(1.3, 1.2), rng))
    # square, 5 m sides, counter-clockwise seen from above
    sq = np.array([[0, 0], [0, 5], [-5, 5], [-5, 0], [0, 0]], dtype=float)
    pts, s = _curve_from_polyline(sq)
    out["square"] = ("5 m square with 90-degree corners at jogging speed, 2.5 m/s",
                     _timed(pts, s, _speed_profile(2.5, 1.0), rng))
    # zigzag: legs at +-60 degrees from +Z: 120-degree turns
    a = np.radians(60.0)
    legs = [np.array([np.sin(a), np.cos(a)]) if i % 2 == 0 else np.array([-np.sin(a), np.cos(a)]) for i in range(5)]
    zz = np.cumsum(np.concatenate([[[0.0, 0.0]], 4.0 * np.array(legs)]), axis=0)
    pts, s = _curve_from_polyline(zz)
    out["zigzag"] = ("zigzag: five 4 m legs with 120-degree turns, walking 1.3 m/s",
                     _timed(pts, s, _speed_profile(1.3, 1.0), rng))
    out["circle"] = ("circle of radius 4 m, speed rising linearly from 0 to 9 m/s over 1.5 laps (the paper's)",
                     _circle_rising(rng))
    # figure-eight crossing itself at the origin: x = 3 sin u, z = 1.5 sin 2u
    pts, s = _curve_from_function(lambda u: (3.0 * np.sin(u), 1.5 * np.sin(2 * u)), 0.0, 2 * np.pi)
    out["figure_eight"] = ("figure-eight (crosses itself), walking 1.4 m/s", _timed(pts, s, _speed_profile(1.4, 1.0), rng))
    return {k: {"name": k, "description": d, "points": np.round(p, 4).tolist()} for k, (d, p) in out.items()}


def _curve_from_moves(moves: list[tuple[float, float]], step: float = 0.002) -> tuple[np.ndarray, np.ndarray]:
    """Dense points of a curve made of straights and circular arcs, starting at the origin
    heading +Z: ``moves`` are ``(length m, 0)`` for a straight and ``(radius m, degrees)``
    for an arc (positive degrees turn left, toward +X, the character's left)."""
    pts = [np.zeros(2)]
    heading = 0.0  # radians from +Z toward +X
    for a, deg in moves:
        if deg == 0:
            n = max(2, int(np.ceil(a / step)))
            d = np.array([np.sin(heading), np.cos(heading)])
            pts.extend(pts[-1] + d * a * (np.arange(1, n + 1) / n)[:, None])
        else:
            r, turn = a, np.radians(deg)
            n = max(2, int(np.ceil(abs(turn) * r / step)))
            h = heading + turn * np.arange(1, n + 1) / n
            # integrate the arc exactly: centre to the side of the turn
            sgn = np.sign(turn)
            c = pts[-1] + sgn * r * np.array([np.cos(heading), -np.sin(heading)])
            pts.extend(c - sgn * r * np.stack([np.cos(h), -np.sin(h)], axis=1))
            heading += turn
    p = np.asarray(pts)
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))])
    return p, s


def make_tight() -> dict[str, dict]:
    """The tight, fast set (``paths/tight/``): see the module docstring."""
    rng = np.random.default_rng(20261126)
    out = {}
    slalom = [(1.5, 0), (0.4, 60)]
    for i in range(6):
        slalom += [(1.0, 0), (0.4, -120 if i % 2 == 0 else 120)]
    slalom += [(1.0, 0), (0.4, 60), (1.5, 0)]
    out["slalom"] = ("slalom: alternating 120-degree arcs of radius 0.4 m, 1 m apart, at 4 m/s",
                     _timed(*_curve_from_moves(slalom), _speed_profile(4.0, 0.8), rng))
    hair = [(4.0, 0), (0.4, 180), (4.0, 0), (0.5, -180), (4.0, 0), (0.4, 180), (3.0, 0)]
    out["hairpins"] = ("hairpins: 4 m straights joined by 180-degree turns of radius 0.4 and 0.5 m, at 3.5 m/s",
                       _timed(*_curve_from_moves(hair), _speed_profile(3.5, 0.8), rng))
    loops = [(3.0, 0), (0.5, 360), (2.5, 0), (0.4, -360), (3.0, 0)]
    out["loops"] = ("loops: a full loop of radius 0.5 m, then one of 0.4 m the other way, at 3 m/s",
                    _timed(*_curve_from_moves(loops), _speed_profile(3.0, 0.8), rng))
    chic = [(2.0, 0)]
    for i in range(6):
        chic += [(0.3, 90 if i % 2 == 0 else -90), (1.2, 0)]
    chic += [(1.0, 0)]
    out["chicane"] = ("chicane: right-angle bends of radius 0.3 m alternating left and right, 1.2 m apart, at 4.5 m/s",
                      _timed(*_curve_from_moves(chic), _speed_profile(4.5, 0.8), rng))
    sw = [(2.5, 0)]
    for i in range(4):
        sw += [(0.35, 150 if i % 2 == 0 else -150), (2.5, 0)]
    out["switchbacks"] = ("switchbacks: 150-degree turns of radius 0.35 m on 2.5 m legs, at 3 m/s",
                          _timed(*_curve_from_moves(sw), _speed_profile(3.0, 0.8), rng))
    return {k: {"name": k, "description": d, "points": np.round(p, 4).tolist()} for k, (d, p) in out.items()}


def _write(folder: Path, paths: dict[str, dict]) -> None:
    folder.mkdir(exist_ok=True)
    for name, obj in paths.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps(obj, separators=(",", ":")) + "\n")
        pts = np.asarray(obj["points"])
        length = np.linalg.norm(np.diff(pts[:, 1:], axis=0), axis=1).sum()
        print(f"wrote {path.relative_to(HERE)}: {len(pts)} events, {pts[-1, 0]:.1f} s, {length:.1f} m")


def main() -> None:
    _write(HERE, make_all())
    _write(HERE / "tight", make_tight())


if __name__ == "__main__":
    main()
