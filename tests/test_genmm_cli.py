"""``motionmatch genmm`` end to end: files, report keys, applications, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from motionmatch.anim import Motion, Skeleton, load_bvh, save_bvh
from motionmatch.cli import _common as arg
from motionmatch.cli.main import main
from test_genmm import dancer


def run(*argv: str) -> int:
    return main(["genmm", *map(str, argv)])


@pytest.fixture
def example(tmp_path):
    return save_bvh(dancer(240, fps=60.0), tmp_path / "dancer.bvh")


def test_samples_report_and_files(tmp_path, example):
    out = tmp_path / "out.bvh"
    rep = tmp_path / "report.json"
    assert run(example, "-o", out, "--samples", "3", "--seed", "7", "--frames", "150", "--report", rep, "--quiet") == 0
    files = [tmp_path / f"out_{i}.bvh" for i in range(3)]
    assert all(f.is_file() for f in files)
    m = load_bvh(files[0])
    assert m.num_frames == 150 and m.fps == 30.0
    assert m.skeleton.names == load_bvh(example).skeleton.names
    r = json.loads(rep.read_text())
    for key in ("coverage", "global_patch_distance", "local_patch_distance", "set_diversity", "synthesis_s"):
        assert isinstance(r[key], float), key
    assert 0.0 <= r["coverage"] <= 1.0 and r["set_diversity"] > 0
    assert r["seeds"] == [7, 8, 9] and len(r["synthesis_s_per_sample"]) == 3


def test_single_sample_report_has_no_set_diversity(tmp_path, example):
    rep = tmp_path / "r.json"
    assert run(example, "-o", tmp_path / "o.bvh", "--report", rep, "--quiet", "--fps", "native") == 0
    r = json.loads(rep.read_text())
    assert "set_diversity" not in r and r["fps"] == 60.0 and r["frames"] == 480


def test_loop_keyframes_parts_completion(tmp_path, example, capsys):
    assert run(example, "-o", tmp_path / "loop.bvh", "--loop", "--frames", "120", "--quiet") == 0
    m = load_bvh(tmp_path / "loop.bvh")
    np.testing.assert_allclose(m.world_positions[0], m.world_positions[-1], atol=1e-5)

    src = dancer(240, fps=60.0)
    keys = Motion(src.skeleton, src.rotations[[10, 100]], src.translations[[10, 100]], fps=1.0)
    kpath = save_bvh(keys, tmp_path / "keys.bvh")
    assert run(example, "-o", tmp_path / "kf.bvh", "--keyframes", kpath, "--keyframe-times", "1,3", "--quiet") == 0
    assert load_bvh(tmp_path / "kf.bvh").num_frames == 240
    assert "warning" not in capsys.readouterr().err  # keys one second apart are not a frame rate

    assert run(example, "-o", tmp_path / "parts.bvh", "--parts", "Hips,LeftUpLeg*,RightUpLeg*;Hips,Spine*",
               "--frames", "100", "--quiet") == 0
    assert run(example, "-o", tmp_path / "auto.bvh", "--parts", "auto", "--contacts", "--fix-feet",
               "--frames", "100", "--quiet") == 0

    partial = save_bvh(dancer(200, seed=5, fps=30.0), tmp_path / "partial.bvh")
    assert run(example, "-o", tmp_path / "done.bvh", "--complete", partial, "--given", "Hips,LeftUpLeg*,RightUpLeg*",
               "--quiet") == 0
    done, given = load_bvh(tmp_path / "done.bvh"), load_bvh(partial)
    np.testing.assert_allclose(done.world_positions[:, :9], given.world_positions[:, :9], atol=1e-5)


def test_reassemble_spec(tmp_path):
    a = save_bvh(dancer(150, seed=1), tmp_path / "a.bvh")
    d = dancer(150, seed=2)
    sk = Skeleton(tuple("b_" + n for n in d.skeleton.names), d.skeleton.parents, d.skeleton.offsets)
    b = save_bvh(Motion(sk, d.rotations, d.translations, d.fps), tmp_path / "b.bvh")
    spec = {"sources": [{"examples": [a.name], "joints": ["Hips", "LeftUpLeg*", "RightUpLeg*"]},
                        {"examples": [b.name], "joints": ["b_Hips", "b_Spine*"], "rename": {"b_Hips": "Hips"}}]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    rep = tmp_path / "r.json"
    assert run("--reassemble", tmp_path / "spec.json", "-o", tmp_path / "x.bvh", "--frames", "90",
               "--report", rep, "--quiet") == 0
    assert load_bvh(tmp_path / "x.bvh").skeleton.num_joints == 19
    assert json.loads(rep.read_text())["coverage"] is None


def test_errors_are_reported_not_raised(tmp_path, example, capsys):
    assert run(tmp_path / "missing.bvh", "-o", tmp_path / "o.bvh") == 1
    assert "missing.bvh" in capsys.readouterr().err
    assert run(example, "-o", tmp_path / "o.bvh", "--frames", "3") == 1
    assert run(example, "-o", tmp_path / "o.bvh", "--parts", "Hips,Nope*") == 1
    assert run(example, "-o", tmp_path / "o.bvh", "--device", "cuda:7") == 1
    assert run(example, "-o", tmp_path / "o.bvh", "--complete", example) == 1
    assert not (tmp_path / "o.bvh").exists()


def test_an_implausible_frame_rate_is_one_warning_line_naming_the_fix(tmp_path, capsys):
    keys = save_bvh(dancer(21, fps=1.0), tmp_path / "keys.bvh")  # Frame Time 1.0, as a keyframe file
    assert run(keys, "-o", tmp_path / "o.bvh", "--no-metrics", "--quiet") == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"motionmatch genmm: warning: {keys}: example at 1 fps"), err
    assert "--fps native" in err and load_bvh(tmp_path / "o.bvh").num_frames == 1202
    assert run(keys, "-o", tmp_path / "n.bvh", "--no-metrics", "--quiet", "--fps", "native") == 0
    assert capsys.readouterr().err == ""
    assert load_bvh(tmp_path / "n.bvh").fps == 1.0


def test_a_frame_count_blow_up_is_refused_in_one_line(tmp_path, capsys):
    slow = save_bvh(dancer(300, fps=1.0), tmp_path / "slow.bvh")
    assert run(slow, "-o", tmp_path / "o.bvh", "--report", tmp_path / "r.json") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"motionmatch genmm: error: {slow}: example at 1 fps"), err
    assert "8,971" in err and "--fps native" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slow.bvh"]


def test_long_syntheses_show_progress(tmp_path, example, capsys, monkeypatch):
    assert run(example, "-o", tmp_path / "quick.bvh", "--samples", "2") == 0
    assert "% done" not in capsys.readouterr().err  # quicker than the delay: no progress lines
    monkeypatch.setattr(arg, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(arg, "PROGRESS_INTERVAL_S", 0.0)
    assert run(example, "-o", tmp_path / "slow.bvh", "--samples", "2") == 0
    lines = capsys.readouterr().err.splitlines()
    steps = [x for x in lines if "% done" in x]
    assert steps[0].startswith("motionmatch genmm: sample 1/2, stage 1/") and "iteration 1/3" in steps[0]
    assert steps[-1].startswith("motionmatch genmm: sample 2/2, stage ") and ": 100% done" in steps[-1]
    assert all(" elapsed, about " in x and x.endswith(" left") for x in steps)
    assert any(x.startswith("motionmatch genmm: scoring the output") for x in lines)
    assert lines.index(steps[-1]) < next(i for i, x in enumerate(lines) if x.startswith("wrote "))
    assert run(example, "-o", tmp_path / "q.bvh", "--quiet") == 0
    assert capsys.readouterr().err == ""


def test_threads_and_weighted_voting_on_the_command_line(tmp_path, example, capsys):
    rep = tmp_path / "r.json"
    a, b = tmp_path / "a.bvh", tmp_path / "b.bvh"
    assert run(example, "-o", a, "--frames", "150", "--threads", "2", "--vote-sigma", "2.5", "--report", rep,
               "--quiet", "--no-metrics") == 0
    settings = json.loads(rep.read_text())["settings"]
    assert settings["threads"] == 2 and settings["vote_sigma"] == 2.5
    assert run(example, "-o", b, "--frames", "150", "--threads", "1", "--vote-sigma", "2.5", "--quiet", "--no-metrics") == 0
    assert a.read_bytes() == b.read_bytes()  # the same file on one thread and on two
    capsys.readouterr()
    for bad in (("--threads", "0"), ("--vote-sigma", "-1")):
        with pytest.raises(SystemExit) as e:
            run(example, "-o", tmp_path / "c.bvh", *bad)
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and bad[0] in err[0]
    assert not (tmp_path / "c.bvh").exists()
