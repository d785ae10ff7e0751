"""Every command refuses bad input with one line on stderr: the file or option and what to
give instead, exit code 1 (2 for a usage error), no traceback and no file left behind.

The commands run through the real entry point (``motionmatch.cli.main.main``) on small
files made here; none of them gets far enough to run a simulation or load real data.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from motionmatch.anim import save_bvh
from motionmatch.cli.main import main
from motionmatch.control.pose.keypoints import KeypointStream, save_keypoints
from motionmatch.database import MotionDatabase
from synthetic import walker
from test_pose_common import standing_pose

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """A folder of good and bad inputs: ``walk.bvh``, ``slow.bvh`` (one frame a second),
    ``db.npz`` (a tiny database),
    ``path.json``, ``scene.json``, ``script.json``, ``kp.json`` and files of the wrong kind."""
    d = tmp_path_factory.mktemp("inputs")
    save_bvh(walker(n=120), d / "walk.bvh")
    save_bvh(walker(n=300, fps=1.0), d / "slow.bvh")  # Frame Time 1 s: 8,971 frames at 30 fps
    MotionDatabase.build([walker(n=240), walker(n=240, speed=0.0, name="idle")], mirror_copies=False).save(d / "db.npz")
    shutil.copy(REPO / "paths" / "square.json", d / "path.json")
    shutil.copy(REPO / "scenarios" / "doors.json", d / "scene.json")
    (d / "script.json").write_text(json.dumps({"duration": 1.0, "events": [{"t": 0.0, "keys": ["w"]}]}))
    save_keypoints(KeypointStream(np.arange(10) / 30, np.tile(standing_pose(), (10, 1, 1))), d / "kp.json")
    (d / "slow_spec.json").write_text(json.dumps({"sources": [{"examples": ["slow.bvh"], "joints": ["Hips*"]}]}))
    (d / "other.json").write_text('{"foo": 1}')
    (d / "list.json").write_text("[1, 2, 3]")
    (d / "bad.json").write_text("not json {")
    (d / "empty.json").write_text("")
    (d / "empty.npz").write_bytes(b"")
    (d / "bin.dat").write_bytes(bytes(range(256)) * 8)
    (d / "afile").write_text("a file, not a folder")
    (d / "adir").mkdir()
    return d


# (exit code, arguments); {d} is the folder of inputs, {o} an empty output folder
CASES = [
    # inspect / convert
    (2, "inspect {d}/walk.bvh --units furlongs"),
    (2, "inspect {d}/walk.bvh --units 0"),
    (2, "inspect {d}/walk.bvh --units nan"),
    (2, "inspect {d}/walk.bvh --up x"),
    (1, "inspect {d}/missing.bvh"),
    (1, "inspect {d}/adir"),
    (1, "inspect {d}/bin.dat"),
    (1, "inspect {d}/db.npz"),
    (2, "convert {d}/walk.bvh {o}/o.bvh --fps 0"),
    (2, "convert {d}/walk.bvh {o}/o.bvh --fps -30"),
    (2, "convert {d}/walk.bvh {o}/o.bvh --fps nan"),
    (2, "convert {d}/walk.bvh {o}/o.bvh --fps inf"),
    (2, "convert {d}/walk.bvh {o}/o.bvh --fps 1e300"),
    (2, "convert {d}/walk.bvh {o}/o.bvh --fps abc"),
    (2, "convert {d}/walk.bvh {o}/o.bvh --out-units -2"),
    (1, "convert {d}/walk.bvh {o}/o.bvh --range 5"),
    (1, "convert {d}/walk.bvh {o}/o.bvh --range infs:5s"),
    (1, "convert {d}/missing.bvh {o}/o.bvh"),
    (1, "convert {d}/empty.json {o}/o.bvh"),
    (1, "convert {d}/walk.bvh {o}/o.txt"),
    (1, "convert {d}/walk.bvh {d}/adir"),
    (1, "convert {d}/walk.bvh {d}/afile/o.bvh"),
    # datasets
    (2, "datasets"),
    (1, "datasets fetch no-such-dataset"),
    (2, "datasets fetch lafan1 --cache-dir {d}/afile"),
    # build / run
    (2, "build {d}/walk.bvh -o {o}/db.npz --fps 0"),
    (2, "build {d}/walk.bvh -o {o}/db.npz --fps 1e9"),
    (2, "build {d}/walk.bvh -o {o}/db.npz --units furlongs"),
    (1, "build {d}/walk.bvh -o {o}/db.bvh"),
    (1, "build {d}/walk.bvh -o {o}/db.npz --schema nosuch"),
    (1, "build {d}/walk.bvh -o {o}/db.npz --schema {d}/other.json"),
    (1, "build {d}/missing.bvh -o {o}/db.npz"),
    (1, "build {d}/bin.dat -o {o}/db.npz"),
    (1, "run --db {d}/walk.bvh --input {d}/script.json -o {o}/o.bvh"),
    (1, "run --db {d}/adir --input {d}/script.json -o {o}/o.bvh"),
    (1, "run --db {d}/empty.npz --input {d}/script.json -o {o}/o.bvh"),
    (1, "run --db {d}/missing.npz --input {d}/script.json -o {o}/o.bvh"),
    (1, "run --db {d}/db.npz --input {d}/walk.bvh -o {o}/o.bvh"),
    (1, "run --db {d}/db.npz --input {d}/other.json -o {o}/o.bvh"),
    (1, "run --db {d}/db.npz --input {d}/bin.dat -o {o}/o.bvh"),
    (2, "run --db {d}/db.npz --input {d}/script.json -o {o}/o.bvh --fps 0"),
    (2, "run --db {d}/db.npz --input {d}/script.json -o {o}/o.bvh --search-interval 0"),
    (2, "run --db {d}/db.npz --input {d}/script.json -o {o}/o.bvh --search-interval nan"),
    (1, "run --db {d}/db.npz --input {d}/script.json -o {o}/o.bvh --report {d}/adir"),
    (1, "run --db {d}/db.npz --input {d}/script.json -o {o}/o.bvh --report {d}/afile/r.json"),
    (1, "run --db {d}/db.npz --input {d}/script.json -o {o}/o.bvh --preview {o}/p.avi"),
    # follow / train-direction-net
    (1, "follow --db {d}/walk.bvh --path {d}/path.json -o {o}/o.bvh"),
    (1, "follow --db {d}/db.npz --path {d}/walk.bvh -o {o}/o.bvh"),
    (1, "follow --db {d}/db.npz --path {d}/other.json -o {o}/o.bvh"),
    (1, "follow --db {d}/db.npz --path {d}/bin.dat -o {o}/o.bvh"),
    (1, "follow --db {d}/db.npz --path {d}/adir -o {o}/o.bvh"),
    (2, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --k 0"),
    (2, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --levels -1"),
    (2, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --interval 0"),
    (2, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --fps 0"),
    (2, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --rate nan"),
    (2, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --scale 0"),
    (2, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --corner-deg nan"),
    (2, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --corner-advance -1"),
    (2, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --joystick-deg nan"),
    (2, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --start nan,0"),
    (1, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --tags (("),
    (1, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --facing net --net {d}/walk.bvh"),
    (1, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --facing net --net {d}/missing.npz"),
    (1, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --scene {d}/path.json"),
    (1, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --report {d}/adir"),
    (1, "follow --db {d}/db.npz --path {d}/path.json -o {o}/o.bvh --plot {d}/afile/p.png"),
    (1, "train-direction-net --db {d}/walk.bvh -o {o}/n.npz"),
    (2, "train-direction-net --db {d}/db.npz -o {o}/n.npz --epochs 0"),
    (2, "train-direction-net --db {d}/db.npz -o {o}/n.npz --hidden -1"),
    # genmm
    (2, "genmm {d}/walk.bvh -o {o}/o.bvh --frames 0"),
    (1, "genmm {d}/walk.bvh -o {o}/o.bvh --frames 3"),
    (1, "genmm {d}/walk.bvh -o {o}/o.bvh --frames 20 --patch-size 5"),
    (2, "genmm {d}/walk.bvh -o {o}/o.bvh --duration nan"),
    (2, "genmm {d}/walk.bvh -o {o}/o.bvh --samples 0"),
    (2, "genmm {d}/walk.bvh -o {o}/o.bvh --seed -1"),
    (2, "genmm {d}/walk.bvh -o {o}/o.bvh --fps 0"),
    (2, "genmm {d}/walk.bvh -o {o}/o.bvh --pyramid-factor 1.5"),
    (2, "genmm {d}/walk.bvh -o {o}/o.bvh --noise nan"),
    (2, "genmm {d}/walk.bvh -o {o}/o.bvh --root-weight nan"),
    (2, "genmm {d}/walk.bvh -o {o}/o.bvh --keyframes {d}/walk.bvh --keyframe-spacing 0"),
    (2, "genmm {d}/walk.bvh -o {o}/o.bvh --keyframes {d}/walk.bvh --keyframe-times a,b"),
    (1, "genmm {d}/walk.bvh -o {o}/o.bvh --device nosuch"),
    (1, "genmm {d}/walk.bvh -o {o}/o.bvh --parts {d}/other.json"),
    (1, "genmm {d}/walk.bvh -o {o}/o.bvh --parts {d}/walk.bvh"),
    (1, "genmm {d}/walk.bvh -o {o}/o.bvh --complete {d}/walk.bvh --given Nope"),
    (1, "genmm --reassemble {d}/list.json -o {o}/o.bvh"),
    (1, "genmm --reassemble {d}/other.json -o {o}/o.bvh"),
    (1, "genmm --reassemble {d}/walk.bvh -o {o}/o.bvh"),
    (1, "genmm {d}/db.npz -o {o}/o.bvh"),
    (1, "genmm {d}/walk.bvh -o {o}/o.txt"),
    (1, "genmm {d}/walk.bvh -o {o}/o.bvh --report {d}/adir"),
    (1, "genmm {d}/walk.bvh -o {d}/afile/o.bvh"),
    (1, "genmm {d}/slow.bvh -o {o}/o.bvh --report {o}/r.json"),
    (1, "genmm --reassemble {d}/slow_spec.json -o {o}/o.bvh"),
    # pose
    (2, "pose"),
    (1, "pose eval --data {d}/adir"),
    (1, "pose eval --quick --json --data {d}/adir"),
    (1, "pose train {d}/kp.json -o {o}/m.npz --label walk_forward --data {d}/adir"),
    (1, "pose run --db {d}/db.npz --keypoints {d}/kp.json -o {o}/o.bvh --data {d}/adir"),
    (1, "pose run --db {d}/db.npz --keypoints {d}/walk.bvh -o {o}/o.bvh"),
    (1, "pose run --db {d}/db.npz --keypoints {d}/other.json -o {o}/o.bvh"),
    (1, "pose run --db {d}/db.npz --keypoints {d}/bin.dat -o {o}/o.bvh"),
    (1, "pose run --db {d}/walk.bvh --keypoints {d}/kp.json -o {o}/o.bvh"),
    (2, "pose run --db {d}/db.npz --keypoints {d}/kp.json -o {o}/o.bvh --fps 0"),
    (1, "pose run --db {d}/db.npz --keypoints {d}/kp.json -o {o}/o.bvh --classifier {d}/walk.bvh"),
    (1, "pose run --db {d}/db.npz --keypoints {d}/kp.json -o {o}/o.bvh --report {d}/adir"),
    (1, "pose run --db {d}/db.npz --keypoints {d}/empty.npz -o {o}/o.bvh"),
    (1, "pose run --db {d}/db.npz --keypoints {d}/kp.json -o {o}/o.bvh --classifier {d}/missing.npz"),
    (2, "pose run --db {d}/db.npz --keypoints {d}/kp.json -o {o}/o.bvh --data {d}/missing"),
    (1, "pose live --db {d}/db.npz --classifier {d}/walk.bvh"),
    (2, "pose record --label nosuch"),
    (2, "pose record --label jump --seconds 0"),
    (2, "pose record --label jump --model huge"),
    (2, "pose record --video {d}/missing.mp4 -o {o}/k.json"),
    (1, "pose train {d}/walk.bvh -o {o}/m.npz --only-recordings"),
    (2, "pose train {d}/kp.json -o {o}/m.npz --only-recordings --label nosuch"),
    (2, "pose train {d}/kp.json -o {o}/m.npz --members 0"),
    (1, "pose render {d}/db.npz -o {o}/k.json"),
    (1, "pose render {d}/walk.bvh -o {o}/k.txt"),
    (2, "pose render {d}/walk.bvh -o {o}/k.json --azimuth nan"),
    (2, "pose eval --out {d}/afile"),
    (2, "pose eval --seed -1"),
    (2, "pose eval --data {d}/afile"),
    # scenario / viewer
    (1, "scenario {d}/walk.bvh --db {d}/db.npz -o {o}/o.npz"),
    (1, "scenario {d}/path.json --db {d}/db.npz -o {o}/o.npz"),
    (1, "scenario {d}/missing.json --db {d}/db.npz -o {o}/o.npz"),
    (1, "scenario {d}/scene.json --db {d}/walk.bvh -o {o}/o.npz"),
    (2, "scenario {d}/scene.json --db {d}/db.npz -o {o}/o.npz --duration 0"),
    (2, "scenario {d}/scene.json --db {d}/db.npz -o {o}/o.npz --duration inf"),
    (1, "scenario {d}/scene.json --db {d}/db.npz -o {o}/o.bvh"),
    (2, "scenario {d}/scene.json --db {d}/db.npz -o {o}/o.npz --method nosuch"),
    (2, "viewer --port 99999"),
    (2, "viewer --record-seconds 0"),
    (2, "viewer --max-sessions 0"),
]


@pytest.mark.parametrize("code, command", CASES, ids=[c for _, c in CASES])
def test_a_bad_input_is_one_line_and_leaves_no_file(files, tmp_path, capsys, code, command):
    out = tmp_path / "out"
    out.mkdir()
    before = sorted(p.name for p in files.rglob("*"))
    try:
        rc = main(shlex.split(command.format(d=files, o=out)))
    except SystemExit as e:  # argparse's usage errors
        rc = e.code
    err = capsys.readouterr().err
    assert rc == code, err
    assert len(err.splitlines()) == 1 and err.endswith("\n"), err
    assert "Traceback" not in err and err.startswith("motionmatch "), err
    assert not list(out.iterdir()), "an output was left behind"
    assert sorted(p.name for p in files.rglob("*")) == before, "a file appeared among the inputs"


def test_the_message_says_what_to_do(files, tmp_path, capsys):
    """The cases of the issue: a BVH given as the database says how to build one; a bad
    unit names the option and the units; a temporary file's name never shows."""
    assert main(["follow", "--db", str(files / "walk.bvh"), "--path", str(files / "path.json"),
                 "-o", str(tmp_path / "o.bvh")]) == 1
    err = capsys.readouterr().err
    assert "walk.bvh: a BVH file, not a motionmatch database (.npz)" in err and "motionmatch build" in err
    assert "pickle" not in err and "delete" not in err
    with pytest.raises(SystemExit):
        main(["inspect", str(files / "walk.bvh"), "--units", "furlongs"])
    err = capsys.readouterr().err
    assert "--units" in err and "furlongs" in err and "cm" in err
    assert main(["convert", str(files / "walk.bvh"), str(files / "adir")]) == 1
    assert main(["convert", str(files / "walk.bvh"), "/proc/o.bvh"]) == 1
    err = capsys.readouterr().err
    assert ".tmp" not in err and "/proc/o.bvh" in err and f"{files / 'adir'}: is a folder" in err


def test_missing_pose_data_is_one_line_before_any_progress(files, tmp_path, capsys, monkeypatch):
    """No --data and no data where $MOTIONMATCH_DATA points: the one line says where it looked."""
    monkeypatch.setenv("MOTIONMATCH_DATA", str(files / "adir"))
    for argv in (["pose", "eval", "--quick", "--out", str(tmp_path / "ev")],
                 ["pose", "train", str(files / "kp.json"), "-o", str(tmp_path / "m.npz"), "--label", "jump"]):
        assert main(argv) == 1
        cap = capsys.readouterr()
        assert cap.out == "" and cap.err.count("\n") == 1, cap.err
        assert f"error: {files / 'adir'}/" in cap.err and ": not found" in cap.err and "MOTIONMATCH_DATA" in cap.err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("suffix, module, package", [(".mp4", "imageio_ffmpeg", "imageio-ffmpeg"),
                                                     (".gif", "PIL", "Pillow"),
                                                     (".mp4", "matplotlib", "matplotlib")])
def test_a_preview_without_its_package_is_refused_before_the_run(files, tmp_path, capsys, monkeypatch,
                                                                  suffix, module, package):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    assert main(["run", "--db", str(files / "db.npz"), "--input", str(files / "script.json"),
                 "-o", str(tmp_path / "o.bvh"), "--preview", str(tmp_path / f"p{suffix}")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"needs the '{package}' package" in err and "motionmatch[viz]" in err, err
    assert not list(tmp_path.iterdir()), "the run went ahead"


def test_a_group_command_without_its_command_lists_them(capsys):
    assert main(["datasets"]) == 2
    assert capsys.readouterr().err == ("motionmatch datasets: error: give a command: list, fetch "
                                       "(see 'motionmatch datasets --help')\n")
    assert main(["pose"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("motionmatch pose: error: give a command: eval, run, record, train, render, live")


def test_training_the_facing_net_without_torch_is_one_line(files, tmp_path, capsys, monkeypatch):
    """(PyTorch hidden whether or not it is installed.) The tiny
    database walks straight: its turn and brake limits fall back to the defaults' own."""
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    assert main(["follow", "--db", str(files / "db.npz"), "--path", str(files / "path.json"),
                 "-o", str(tmp_path / "o.bvh"), "--facing", "net", "--train-net"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install torch" in err and not list(tmp_path.iterdir())


def test_the_installed_command_prints_one_line():
    """Through a real process: stderr is the one line (no traceback, no warnings)."""
    r = subprocess.run([sys.executable, "-m", "motionmatch.cli.main", "inspect", "x.bvh", "--units", "furlongs"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--units" in r.stderr, r.stderr
