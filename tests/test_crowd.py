"""Crowds are Worlds of steering agents: the steering of many agents at once against the
per-agent rule (``tests/oracles/steering.py``), the grid it finds neighbours with, and the
World's batched stepping against stepping each agent's controller on its own."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.geometry.grid import box_grid, point_grid
from motionmatch.runtime.crowd import SteeringSettings, steer_all
from oracles.steering import steer


def _reference(pos, idx, aims, speeds, sides, s):
    return np.array([steer(pos[i], aims[k], speeds[k], np.delete(pos, i, axis=0), s, sides[k])
                     for k, i in enumerate(idx)]).reshape(-1, 2)


@pytest.mark.parametrize("n, spread, seed", [(30, 3.0, 0), (400, 25.0, 1), (300, 4.0, 2)])
def test_steering_of_many_agents_equals_the_per_agent_rule(n, spread, seed):
    """Sparse and dense crowds (most agents see several others), some arrived, agents on
    grid-cell borders and at equal distances from another."""
    rng = np.random.default_rng(seed)
    s = SteeringSettings()
    pos = rng.uniform(-spread, spread, (n, 2))
    pos[:10] = np.round(pos[:10] / s.view_distance) * s.view_distance  # on cell borders
    pos[10] = pos[11] + [1.0, 0.0]  # two agents equally far ahead of a third
    pos[12] = pos[11] + [-1.0, 0.0]
    idx = np.arange(0, n, 2) if n > 40 else np.arange(n)
    aims = pos[idx] + rng.uniform(-8, 8, (len(idx), 2))
    aims[3] = pos[idx[3]] + 0.1  # arrived
    speeds = rng.uniform(0.8, 2.0, len(idx))
    sides = np.where(idx % 4 == 0, 1.0, -1.0)
    v = steer_all(pos, idx, aims, speeds, sides, s)
    ref = _reference(pos, idx, aims, speeds, sides, s)
    np.testing.assert_allclose(v, ref, atol=1e-12)
    assert not v[3].any()
    to_aim = aims - pos[idx]
    cos = np.einsum("ij,ij->i", v, to_aim) / np.maximum(np.hypot(*to_aim.T) * np.hypot(*v.T), 1e-12)
    assert np.sum(cos < 1.0 - 1e-9) >= 3  # the lateral force bent some (the comparison covers it)


def test_grid_cells_hold_exactly_the_boxes_that_touch_them():
    rng = np.random.default_rng(4)
    lo = rng.uniform(-10, 10, (200, 2))
    hi = lo + rng.uniform(0, 3, (200, 2))
    cell = 1.5
    start, items, nx, nz, x0, z0 = box_grid(lo[:, 0], hi[:, 0], lo[:, 1], hi[:, 1], cell)
    for i in range(nx):
        for j in range(nz):
            got = items[start[i * nz + j]:start[i * nz + j + 1]]
            cx, cz = x0 + i * cell, z0 + j * cell
            want = np.flatnonzero((lo[:, 0] < cx + cell) & (hi[:, 0] >= cx) & (lo[:, 1] < cz + cell) & (hi[:, 1] >= cz))
            np.testing.assert_array_equal(got, want)  # ascending box order
    p = rng.uniform(-5, 5, (50, 2))
    start, items, nx, nz, x0, z0 = point_grid(p, 2.0)
    assert len(items) == 50 and sorted(items) == list(range(50))
    for m in range(50):
        c = int((p[m, 0] - x0) // 2.0) * nz + int((p[m, 1] - z0) // 2.0)
        assert m in items[start[c]:start[c + 1]]
