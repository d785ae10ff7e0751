"""The viewer's warm-up (:mod:`motionmatch.viewer.warmup`): after it, a session's first walk,
path, obstacle, second character, crowd and scenario compile nothing (no Numba compile or
cache load in the 60 Hz loop); while it runs, requests that need it are held, in order, and
carried out one a tick when it is ready; the worker process runs a stage on its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO, data_root, long_step
from motionmatch._jit import compile_intervals
from motionmatch.viewer.warmup import _ticks
from test_viewer_support import small_database

pytest.importorskip("starlette", reason="the viewer's packages are not installed: pip install 'motionmatch[viewer]'")


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    small_database(tmp_path_factory.getbasetemp())
    return tmp_path_factory.getbasetemp() / "viewer-test-db.npz"


@pytest.fixture(scope="module")
def prepared(db_path):
    from motionmatch.database import MotionDatabase
    from motionmatch.viewer.data import FileCatalog
    from motionmatch.viewer.server import Viewer

    viewer = Viewer(MotionDatabase.load(db_path),
                    catalog=FileCatalog({"data": data_root(), "scenarios": REPO / "scenarios"}))
    with long_step("viewer warm-up: compiling every session kernel (first test run only)", 45):
        viewer.prepare(background=False)
    yield viewer
    viewer.close()


def _session(viewer):
    from motionmatch.viewer.session import Session

    out: list = []
    return Session(viewer, out.append), out


def _send(s, kind, **fields):
    from motionmatch.viewer.messages import parse

    s.handle(parse(json.dumps({"type": kind, "seq": 1, **fields})))


def test_after_the_warm_up_a_session_compiles_nothing(prepared):
    assert [r.stage for r in prepared.warmup.reports] == ["character", "environment"]
    s, out = _session(prepared)
    with compile_intervals() as c:
        _send(s, "keys", held=["w", "shift"], yaw=0.3)
        _ticks(s, 40)
        _send(s, "keys", held=["j"], yaw=0.3)
        _ticks(s, 30)
        _send(s, "path", id=s.selected, points=[[0, 0, 0], [2, 1, 3], [4, 0, 6]], mode="local")
        _ticks(s, 40)
        _send(s, "path", id=s.selected, points=[[0, 0, 0], [2, 1, 3], [4, 0, 6]], mode="drawn")
        _ticks(s, 30)
        _send(s, "keys", held=["q", "a"], yaw=0.3)  # strafing
        _ticks(s, 20)
        _send(s, "obstacle_add", obstacle={"shape": "disk", "center": [0.5, 2.0], "radius": 0.4})
        _send(s, "obstacle_add", obstacle={"shape": "ellipse", "center": [2.0, 3.0], "axes": [0.5, 0.3],
                                           "velocity": [0.0, -0.5]})
        _ticks(s, 40)
        _send(s, "add_character", name="b", position=[1.0, 1.0])
        _send(s, "spawn_group", count=10, center=[6, 6], target=[0, 8], spacing=1.0, speed=1.3)
        _ticks(s, 40)
        _send(s, "scenario_load", file="scenarios:doors-small.json")
        _send(s, "pause", paused=False)
        _ticks(s, 60)
    errors = [m for m in out if isinstance(m, dict) and m.get("type") == "error"]
    assert not errors, errors
    assert c.names == [], f"compiled in the session after the warm-up: {c.names}"


def test_requests_wait_for_the_warm_up_in_order_and_run_one_a_tick(db_path):
    from motionmatch.database import MotionDatabase
    from motionmatch.viewer.server import Viewer
    from motionmatch.viewer.warmup import Warmup

    viewer = Viewer(MotionDatabase.load(db_path))
    viewer.warmup = Warmup(viewer)  # started, not finished: nothing is ready
    viewer.warmup.on_ready(viewer._warmup_done)
    s, out = _session(viewer)
    viewer.sessions[s.id] = s
    welcome = s.welcome()
    assert welcome["warmup"]["ready"] is False and welcome["warmup"]["stage"] == "character"
    viewer.warmup._ready["character"].set()
    _send(s, "path", id=s.selected, points=[[0, 0, 0], [2, 1, 3]], mode="local")
    _send(s, "keys", held=["w"], yaw=0.0)   # keys are never held
    _send(s, "pause", paused=True)          # held behind the path, to keep the order
    _send(s, "obstacle_add", obstacle={"shape": "disk", "center": [0.5, 2.0], "radius": 0.4})
    assert [m["type"] for m in s._held] == ["path", "pause", "obstacle_add"]
    notes = [m for m in out if isinstance(m, dict) and m.get("type") == "warmup"]
    assert notes[-1]["held"] == 3 and notes[-1]["what"] == "paths, obstacles and crowds"
    assert "w" in s.chars[s.selected].held
    acks = lambda: [m["for"] for m in out if isinstance(m, dict) and m.get("type") == "ack"  # noqa: E731
                    and m["for"] != "keys"]
    assert acks() == []
    _ticks(s, 3)
    assert len(s._held) == 3  # still waiting
    viewer.warmup._ready["environment"].set()
    viewer._warmup_done()
    _ticks(s, 1)
    assert acks() == ["path"]
    _ticks(s, 1)
    assert acks() == ["path", "pause"] and s.paused
    s._drain_inbox()
    assert acks() == ["path", "pause", "obstacle_add"] and not s._held
    last = [m for m in out if isinstance(m, dict) and m.get("type") == "warmup"][-1]
    assert last["ready"] is True and last["released"] == 3
    viewer.close()


def test_the_worker_runs_a_stage_and_a_bad_file_is_one_line(db_path, tmp_path):
    p = subprocess.run([sys.executable, "-m", "motionmatch.viewer.warmup", str(db_path), "--stage", "character"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("character: ")
    bad = tmp_path / "not-a-db.npz"
    bad.write_bytes(b"nope")
    p = subprocess.run([sys.executable, "-m", "motionmatch.viewer.warmup", str(bad)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "not-a-db.npz" in p.stderr
