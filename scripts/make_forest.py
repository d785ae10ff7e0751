"""Generate ``scenarios/forest.json``: rolling hills, trees, fallen logs and a slope up to a ledge.

    python scripts/make_forest.py            # rewrites scenarios/forest.json (deterministic)

The ground is a height field (``"terrain": {"height_field": ...}``, 0.5 m cells over
48 x 52 m): gentle hills (two long sine waves, scaled so that no slope but the ledge's
passes :data:`MAX_SLOPE_DEG`) and, in the east, a ramp at :data:`RAMP_SLOPE_DEG`
up to a plateau 2 m high that ends in a 0.6 m ledge (a drop within one cell), then a
gentle slope back down. Trees are disks (unbounded in height above the ground), placed
at least 2.5 m apart, kept off the routes; fallen logs are low boxes across the hero's
route (their height range starts at the ground under them). The file is data: this
script only writes the geometry down as code once (as ``scenarios/make_scenarios.py``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "scenarios" / "forest.json"
#: the grid: origin, cell (m), columns along x, rows along z
X0, Z0, CELL, COLS, ROWS = -20.0, -20.0, 0.5, 97, 105
MAX_SLOPE_DEG = 15.0
RAMP_SLOPE_DEG = 11.0
PLATEAU = 2.0     # m above the hills' mean
LEDGE = 0.6       # m: the drop at the plateau's north edge
RAMP_X = (8.0, 16.0)      # the ramp's flat top across x
SHOULDER = 14.0           # m: the ramp's sides, each way
RAMP_Z0 = 2.0             # where the ramp starts up
LEDGE_Z = 16.0            # the plateau's north edge
SEED = 31


def _grid() -> tuple[np.ndarray, np.ndarray]:
    x = X0 + CELL * np.arange(COLS)
    z = Z0 + CELL * np.arange(ROWS)
    return np.meshgrid(x, z)


def _max_slope_deg(h: np.ndarray, skip_ledge: bool = False) -> float:
    """The steepest slope (degrees) of the bilinear field: the largest gradient at any
    cell corner (x and z differences of the cell's edges); ``skip_ledge``: leave out the
    row of cells with the ledge."""
    dx = np.diff(h, axis=1) / CELL  # [R, C-1]
    dz = np.diff(h, axis=0) / CELL  # [R-1, C]
    s = np.degrees(np.arctan(np.hypot(np.maximum(np.abs(dx[:-1]), np.abs(dx[1:]))[:, :],
                                      np.maximum(np.abs(dz[:, :-1]), np.abs(dz[:, 1:])))))
    if skip_ledge:
        row = round((LEDGE_Z - Z0) / CELL) - 1
        s = np.delete(s, row, axis=0)
    return float(s.max())


def _smoothstep(t: np.ndarray) -> np.ndarray:
    t = np.clip(t, 0.0, 1.0)
    return t * t * (3 - 2 * t)


def _blend(hills: np.ndarray, gx: np.ndarray, gz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The hills blended into the ramp: ``(heights, ramp weight)``."""
    rise = math.tan(math.radians(RAMP_SLOPE_DEG))
    profile = np.where(gz < RAMP_Z0, 0.0, np.minimum((gz - RAMP_Z0) * rise, PLATEAU))
    down = PLATEAU - LEDGE - (gz - LEDGE_Z) * 0.12  # 7 degrees down past the ledge
    profile = np.where(gz >= LEDGE_Z, np.maximum(down, 0.0), profile)
    across = _smoothstep((gx - (RAMP_X[0] - SHOULDER)) / SHOULDER) * _smoothstep(((RAMP_X[1] + SHOULDER) - gx)
                                                                                  / SHOULDER)
    weight = _smoothstep(3.0 * across) * _smoothstep((gz - (RAMP_Z0 - 8.0)) / 8.0)  # no hills near the ramp
    return hills * (1.0 - weight) + profile * across, weight


def heights() -> tuple[np.ndarray, np.ndarray]:
    """``(heights [ROWS, COLS], ramp weight [ROWS, COLS])``: the hills, scaled so that no
    slope but the ledge passes :data:`MAX_SLOPE_DEG`, blended into the ramp."""
    gx, gz = _grid()
    hills = (np.sin(2 * np.pi * gx / 17.0 + 0.4) * np.cos(2 * np.pi * gz / 23.0 + 1.1)
             + 0.6 * np.sin(2 * np.pi * (gx + 0.6 * gz) / 13.0 + 2.0))
    hills -= hills.mean()
    lo, hi = 0.0, 5.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        steep = _max_slope_deg(_blend(mid * hills, gx, gz)[0], skip_ledge=True)
        lo, hi = (mid, hi) if steep < MAX_SLOPE_DEG else (lo, mid)
    assert RAMP_Z0 + PLATEAU / math.tan(math.radians(RAMP_SLOPE_DEG)) < LEDGE_Z
    h, weight = _blend(lo * hills, gx, gz)
    return np.round(h, 3), weight


def _ground(h: np.ndarray, x: float, z: float) -> float:
    """Bilinear height of the grid at (x, z) (the model's own rule, clamped)."""
    u = min(max((x - X0) / CELL, 0.0), COLS - 1.0)
    v = min(max((z - Z0) / CELL, 0.0), ROWS - 1.0)
    j, i = min(int(u), COLS - 2), min(int(v), ROWS - 2)
    fu, fv = u - j, v - i
    a = h[i, j] + (h[i, j + 1] - h[i, j]) * fu
    b = h[i + 1, j] + (h[i + 1, j + 1] - h[i + 1, j]) * fu
    return float(a + (b - a) * fv)


def _clear_of_routes(x: float, z: float) -> bool:
    """Routes kept free of trees: the hero's lane (x -6..-1), the ramp's top (x 5..17), the
    group's start and the hiker's start."""
    if -6.5 < x < -0.5:
        return False
    if RAMP_X[0] - 1.0 < x < RAMP_X[1] + 1.0 and z > RAMP_Z0 - 3.0:
        return False
    if z < -13.0 and -16.0 < x < -6.0:
        return False
    return True


def trees(h: np.ndarray) -> list[dict]:
    rng = np.random.default_rng(SEED)
    placed: list[tuple[float, float]] = []
    out = []
    for _ in range(4000):
        x, z = rng.uniform(X0 + 1.0, X0 + CELL * (COLS - 1) - 1.0), rng.uniform(Z0 + 1.0, Z0 + CELL * (ROWS - 1) - 1.0)
        if not _clear_of_routes(x, z) or any((x - a) ** 2 + (z - b) ** 2 < 2.5 ** 2 for a, b in placed):
            continue
        placed.append((x, z))
        g = _ground(h, x, z)
        out.append({"shape": "disk", "center": [round(x, 3), round(z, 3)], "radius": round(float(rng.uniform(0.2, 0.4)), 3),
                    "height": [round(g - 0.5, 3), round(g + 5.0, 3)], "name": f"tree-{len(out)}"})
        if len(out) == 60:
            break
    return out


def logs(h: np.ndarray) -> list[dict]:
    """Fallen logs across the hero's lane (0.35 m high), at a slant, resting on the ground."""
    out = []
    for k, (x, z, yaw) in enumerate([(-3.5, -8.0, 80.0), (-3.2, 1.0, 100.0), (-3.8, 9.5, 75.0)]):
        g = _ground(h, x, z)
        out.append({"shape": "box", "center": [x, z], "size": [3.2, 0.4], "yaw_deg": yaw,
                    "height": [round(g - 0.1, 3), round(g + 0.35, 3)], "name": f"log-{k}"})
    return out


def forest() -> dict:
    h, _ = heights()
    slope = _max_slope_deg(h, skip_ledge=True)
    return {
        "name": "forest",
        "description": "Forest terrain (issue 31): rolling hills (slopes up to about "
                       f"{slope:.0f} degrees) on a 0.5 m height field over 48 x 52 m, 60 trees, three fallen "
                       f"logs 0.35 m high across the hero's lane, and in the east a {RAMP_SLOPE_DEG:g}-degree "
                       f"ramp up to a plateau {PLATEAU:g} m high that ends in a {LEDGE:g} m ledge at z = "
                       f"{LEDGE_Z:g}. The hero walks and runs north along its lane (keyboard script, jump "
                       "key at the logs), a hiker walks up the ramp to the ledge, a group of 8 crosses the "
                       "forest with crowd steering. Generated by scripts/make_forest.py.",
        "expect": "Every character crosses without walking into the trees. On the terrain (issue 31's "
                  "runtime part) the feet stay on the ground, the hero steps or jumps over the logs and the "
                  "hiker stops at the ledge or jumps down it; today the characters walk on y = 0 and the "
                  "terrain is drawn and exported.",
        "duration": 24.0,
        "obstacles": trees(h) + logs(h),
        "agents": [
            {"name": "hero", "start": [-3.5, -16.0], "facing": [0.0, 1.0],
             "script": {"events": [{"t": 0.0, "keys": ["w"]}, {"t": 5.0, "keys": ["w", "shift"]},
                                   {"t": 9.0, "keys": ["w"]}, {"t": 14.0, "keys": ["w", "j"]},
                                   {"t": 14.6, "keys": ["w"]}]}},
            {"name": "hiker", "start": [11.0, -6.0], "facing": [0.0, 1.0],
             "path": [[11.0, -6.0], [11.0, 8.0], [11.0, 15.0]], "speed": 1.2},
        ],
        "groups": [{"name": "walkers", "count": 8, "area": [[-15.0, -18.0], [-9.0, -15.0]], "facing": [0.0, 1.0],
                    "goal_offset": [2.0, 40.0], "speed": 1.3, "spacing": 1.2, "seed": 3}],
        "database": {"locomotion_tags": "!dance"},
        "regions": {"ramp": {"x": list(RAMP_X), "z": [RAMP_Z0, LEDGE_Z]},
                    "ledge": {"x": list(RAMP_X), "z": [LEDGE_Z - 0.5, LEDGE_Z + 0.5]},
                    "lane": {"x": [-6.0, -1.0], "z": [-20.0, 32.0]}},
        # last: the viewer lists a .json as a scenario when its first 64 KiB name its obstacles or agents
        "terrain": {"height_field": {"origin": [X0, Z0], "cell": CELL, "heights": h.tolist()}},
    }


def main() -> None:
    d = forest()
    rows = d["terrain"]["height_field"].pop("heights")
    text = json.dumps(d, indent=1)
    # one row of heights a line (the rest as make_scenarios.py writes it)
    heights_text = "[\n    " + ",\n    ".join(json.dumps(r) for r in rows) + "\n   ]"
    text = text.replace('"cell": 0.5\n  }', f'"cell": 0.5,\n   "heights": {heights_text}\n  }}', 1)
    json.loads(text)
    OUT.write_text(text + "\n")
    h = np.array(rows)
    print(f"wrote {OUT} ({len(d['obstacles'])} obstacles, {len(d['agents'])} agents + a group of "
          f"{d['groups'][0]['count']}; heights {h.min():.2f}..{h.max():.2f} m, steepest hill "
          f"{_max_slope_deg(h, skip_ledge=True):.1f} degrees but the ledge)")


if __name__ == "__main__":
    main()
