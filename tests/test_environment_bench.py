"""The environment benchmark's helpers (``benchmarks/bench_environment.py`` and
``benchmarks/environment_diversity.py``): the diversity study's path variants and
transition count (known answers), and the "One Obstacle" ablation, which must reach every
search of a world's step (real data)."""

from __future__ import annotations

import contextlib
import importlib
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from motionmatch.environment import load_scenario

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> SimpleNamespace:
    """``bench_environment`` and ``environment_diversity``, imported from ``benchmarks/``."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return SimpleNamespace(env=importlib.import_module("bench_environment"),
                               diversity=importlib.import_module("environment_diversity"))
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def test_jumps_count_frames_that_do_not_follow_the_previous_one(bench):
    assert bench.diversity.jumps(np.array([4, 5, 6, 20, 21, 3, 3, 4])) == 3  # 6->20, 21->3, 3->3
    assert bench.diversity.jumps(np.arange(10)) == 0
    assert bench.diversity.jumps(np.array([7])) == 0


def test_path_variants_start_a_quarter_along_the_closed_path_facing_along_it(bench):
    sc = load_scenario(REPO / "scenarios" / "dense-obstacles.json")
    path = np.asarray(sc.agents[0].path)
    assert np.allclose(path[0], path[-1])  # a closed loop
    ring = path[:-1]
    for k, reverse in ((0, False), (1, False), (3, True)):
        v = bench.diversity.path_variant(sc, k, 4, reverse)
        a = v.agents[0]
        p = np.asarray(a.path)
        order = ring[::-1] if reverse else ring
        first = order[round(k * len(ring) / 4)]
        np.testing.assert_allclose(p[0], first)
        np.testing.assert_allclose(p[-1], first)  # still closed
        assert len(p) == len(path)
        assert a.start == pytest.approx(tuple(first))
        d = (p[1] - p[0]) / np.linalg.norm(p[1] - p[0])
        assert a.facing == pytest.approx(tuple(d))
    assert sc.agents[0].path is not None and np.allclose(sc.agents[0].path, path)  # the scenario is not changed


def test_one_obstacle_ablation_cuts_every_search_to_one_obstacle(bench, data_dir):
    """"One Obstacle" penalises only the first pre-selected obstacle of the first ellipse
    in every search, also those whose obstacles a world's step gathers in one batch (it
    once cut only the chooser's own gathering, and the row equalled the linear search)."""
    from motionmatch.database import MotionDatabase
    from motionmatch.database.schema import environment_schema
    from motionmatch.datasets import load_folder
    from motionmatch.runtime.environment_matching import EnvironmentMatcher
    from motionmatch.runtime.scenarios import run_scenario

    clips = load_folder(data_dir / "lafan1-60fps")[:12]
    db = MotionDatabase.build(clips, mirror_copies=True, schema=environment_schema())
    matcher = EnvironmentMatcher(db)
    sc = load_scenario(bench.env.SCENE)
    sc = replace(sc, duration=8.0)
    cfg = dict(bench.env.ABLATIONS)
    counts = {}
    for name in ("Linear Search", "One Obstacle"):
        st = bench.env.settings_for(sc, cfg[name])
        with bench.env.first_obstacle_only() if cfg[name].get("one_obstacle") else contextlib.nullcontext():
            _world, rec = run_scenario(db, sc, settings=st, matcher=matcher)
        counts[name] = np.array([n for lg in rec.logs if lg is not None for n in lg.obstacles])
    assert counts["Linear Search"].max() > 1  # the scene has several obstacles near at once
    assert counts["One Obstacle"].size == counts["Linear Search"].size
    assert counts["One Obstacle"].max() == 1

