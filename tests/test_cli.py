"""The command line: inspect and convert, end to end on real files."""

from __future__ import annotations

import io
import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.anim.mirror import mirror
from motionmatch.cli.main import main


def test_help_explains_itself(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for word in ("inspect", "convert", "datasets", "Y is up", "examples"):
        assert word in out


def test_console_script_runs():
    r = subprocess.run([sys.executable, "-m", "motionmatch.cli.main", "inspect", "--help"],
                       capture_output=True, text=True, check=True)
    assert "--json" in r.stdout


def test_inspect_json_lafan(data_dir, capsys):
    folder = data_dir / "lafan1-60fps"
    assert main(["inspect", str(folder), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 45
    for r in rows:
        for key in ("path", "frames", "fps", "joints", "duration_s", "height_m", "mean_speed_mps"):
            assert key in r
        assert r["fps"] == 60 and r["joints"] == 23
        assert 1.4 < r["height_m"] < 1.8
        assert 0.0 <= r["mean_speed_mps"] < 3.0
        assert r["feet"] == ["LeftToe", "RightToe"]
    speeds = {r["name"]: r["mean_speed_mps"] for r in rows}
    # runs are faster than walks, on average
    assert speeds["run2_subject4_run2"] > 2 * speeds["walk3_subject1_walk"]


def test_inspect_table_and_bad_file(data_dir, tmp_path, capsys):
    bad = tmp_path / "bad.bvh"
    bad.write_text("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 3 Zrotation Yrotation Wrotation\n}\n")
    good = data_dir / "lafan1" / "walk1_subject1_stop.bvh"
    assert main(["inspect", str(good), str(bad)]) == 1
    cap = capsys.readouterr()
    assert "walk1_subject1_stop.bvh" in cap.out and "LeftToe, RightToe" in cap.out
    assert "bad.bvh, line 5" in cap.err and "Wrotation" in cap.err
    assert main(["inspect", str(tmp_path / "missing.bvh")]) == 1


def test_convert_range_mirror_fps(data_dir, tmp_path, capsys):
    src = data_dir / "lafan1-60fps" / "walk1_subject1_walk2.bvh"
    out = tmp_path / "out.bvh"
    assert main(["convert", str(src), str(out), "--range", "60:360", "--mirror", "--fps", "30"]) == 0
    assert "150 frames at 30 fps" in capsys.readouterr().out
    m = load_bvh(out)
    ref = mirror(load_bvh(src)[60:360])
    assert m.fps == 30 and m.num_frames == 150
    np.testing.assert_allclose(m.world_positions, ref.world_positions[::2], atol=1e-4)
    # seconds work too, and bad ranges are refused without writing anything
    assert main(["convert", str(src), str(tmp_path / "s.bvh"), "--range", "1s:2s"]) == 0
    assert load_bvh(tmp_path / "s.bvh").num_frames == 60
    assert main(["convert", str(src), str(tmp_path / "x.bvh"), "--range", "500:100"]) == 1
    assert not (tmp_path / "x.bvh").exists()
    assert "selects no frames" in capsys.readouterr().err


@pytest.mark.parametrize("agent, says", [
    ({"start": [1e308, 0]}, "agents[0].start[0] must be between -1000 and 1000, got 1e+308"),
    ({"start": [0, 0], "controls": {"responsiveness": 1e9}}, "agents[0].controls.responsiveness must be between 0 and 4"),
    ({"start": [0, 0], "speed": "fast"}, "agents[0].speed must be a number, got str"),
])
def test_scenario_out_of_bounds_is_one_line_and_exit_1(tmp_path, capsys, agent, says):
    """The scenario file is checked before the database is read: one line naming the file
    and the field, exit status 1."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"duration": 5, "agents": [agent]}))
    assert main(["scenario", str(bad), "--db", str(tmp_path / "none.npz"), "-o", str(tmp_path / "o.npz")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}: {says}" in err, err


class _Clock:
    """A settable clock (seconds)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_waits_then_estimates_the_time_left():
    from motionmatch.cli._common import PROGRESS_DELAY_S, PROGRESS_INTERVAL_S, Progress

    clock, log = _Clock(), io.StringIO()
    bar = Progress("motionmatch x", stream=log, clock=clock)
    clock.t = PROGRESS_DELAY_S - 0.5
    bar.update("stage 1/4", done=0.1)
    assert log.getvalue() == ""  # quick steps print nothing
    clock.t = 20.0
    bar.update("stage 2/4", done=0.25)
    assert log.getvalue() == "motionmatch x: stage 2/4: 25% done, 20 s elapsed, about 1 min 00 s left\n"
    clock.t += PROGRESS_INTERVAL_S / 2
    bar.update("stage 3/4", done=0.5)  # a log gets a line at most every PROGRESS_INTERVAL_S
    clock.t += PROGRESS_INTERVAL_S / 2
    bar.update("stage 3/4", done=0.6, eta_s=4000)
    bar.update("scoring", phase=True)  # a new phase shows at once
    bar.close()
    assert log.getvalue().splitlines()[1:] == [
        "motionmatch x: stage 3/4: 60% done, 30 s elapsed, about 1 h 06 min left",
        "motionmatch x: scoring: 30 s elapsed",
        "motionmatch x: scoring: done in 30 s",
    ]


def test_progress_on_a_terminal_rewrites_one_line_and_stays_silent_when_disabled():
    from motionmatch.cli._common import Progress

    clock, tty = _Clock(), _Terminal()
    clock.t = 100.0
    with Progress("mm", stream=tty, clock=clock) as bar:
        clock.t = 110.0
        bar.update("a long stage name", done=0.5)
        clock.t = 111.0
        bar.update("short", done=0.9)
    out = tty.getvalue()
    assert out.startswith("\r") and out.endswith("\n") and out.count("\n") == 1
    lines = out[1:-1].split("\r")
    assert [x.rstrip() for x in lines] == ["mm: a long stage name: 50% done, 10 s elapsed, about 10 s left",
                                           "mm: short: 90% done, 11 s elapsed, about 1 s left",
                                           "mm: short: done in 11 s"]
    assert all(len(b) >= len(a.rstrip()) for a, b in itertools.pairwise(lines))  # each covers the one before
    quiet = _Terminal()
    with Progress("mm", stream=quiet, clock=clock, enabled=False) as bar:
        clock.t = 500.0
        bar.update("x", done=0.5)
    assert quiet.getvalue() == ""
