"""Errors reading your data (issue 32, part 5): a rig with no humanoid, two roots in one
file, a file over the size limit, different skeletons in one folder: one line each,
naming the file and the fix, and nothing written."""

from __future__ import annotations

import os

import pytest

from motionmatch.cli.main import main
from rigs import lafan_clip, make_rig, write_rig


def _refused(argv, capsys, out):
    assert main(argv) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("motionmatch build: error: "), err
    assert not out.exists() and not list(out.parent.glob(f".{out.name}*"))  # nothing written, no temp file
    return lines[0]


def test_no_humanoid(data_dir, tmp_path, capsys):
    out = tmp_path / "crab.npz"
    line = _refused(["build", str(data_dir / "genmm-examples" / "Crabnew_Crab-dance-long.bvh"), "-o", str(out)],
                    capsys, out)
    assert "clip 'Crabnew_Crab-dance-long'" in line and "no humanoid found" in line and '"roles"' in line


def test_two_roots(data_dir, tmp_path, capsys):
    text = (data_dir / "lafan1" / "walk1_subject1_stop.bvh").read_text()
    head, motion = text.split("MOTION", 1)
    body = head.replace("HIERARCHY\n", "", 1)
    (tmp_path / "two.bvh").write_text("HIERARCHY\n" + body + body.replace("ROOT Hips", "ROOT Hips2") + "MOTION" + motion)
    out = tmp_path / "two.npz"
    line = _refused(["build", str(tmp_path / "two.bvh"), "-o", str(out)], capsys, out)
    assert "two.bvh, line" in line and "a second ROOT" in line and "one skeleton" in line


def test_file_over_the_size_limit(data_dir, tmp_path, capsys, monkeypatch):
    from motionmatch.anim import bvh

    big = tmp_path / "big.bvh"
    big.write_bytes((data_dir / "lafan1" / "walk1_subject1_stop.bvh").read_bytes())
    os.truncate(big, bvh.MAX_BVH_BYTES + 1)  # sparse: no disk used, never read
    out = tmp_path / "big.npz"
    line = _refused(["build", str(big), "-o", str(out)], capsys, out)
    assert f"big.bvh: {bvh.MAX_BVH_BYTES + 1:,} bytes, over the" in line and "split the take" in line


def test_different_skeletons_in_one_folder(data_dir, tmp_path, capsys):
    clip = lafan_clip(data_dir, 120)
    write_rig(make_rig(clip, "cc"), tmp_path / "takes", "a_walk")
    write_rig(make_rig(clip, "cc", extras=False), tmp_path / "takes", "b_walk")
    out = tmp_path / "db.npz"
    line = _refused(["build", str(tmp_path / "takes"), "-o", str(out)], capsys, out)
    assert "b_walk.bvh has a different skeleton from" in line and "joint 1 is 'CC_Base_L_Thigh'" in line
    assert "--per-skeleton" in line
    assert main(["build", str(tmp_path / "takes"), "-o", str(out), "--per-skeleton", "-q"]) == 0
    assert sorted(p.name for p in tmp_path.glob("db*.npz")) == ["db_1.npz", "db_2.npz"]


@pytest.mark.parametrize("bad", ["left_paw", "left_foot"])
def test_a_roles_map_that_does_not_fit(data_dir, tmp_path, capsys, bad):
    import json

    from motionmatch.database.schema import default_schema

    doc = json.loads(default_schema().to_json())
    doc["roles"] = {bad: "NoSuchJoint"}
    (tmp_path / "schema.json").write_text(json.dumps(doc))
    out = tmp_path / "db.npz"
    line = _refused(["build", str(data_dir / "lafan1" / "walk1_subject1_stop.bvh"), "-o", str(out),
                     "--schema", str(tmp_path / "schema.json")], capsys, out)
    assert ("unknown role 'left_paw'" in line) if bad == "left_paw" else ("unknown joint 'NoSuchJoint'" in line)
