"""Acceptance of issue 32 (parts 1 and 2) on rigs made from the shared LAFAN1 files at
test time: renamed to the Unreal, Mixamo and Character Creator schemes, several toes per
foot, Z up, centimetres, rooted at the hips with the feet under the floor, with and
without a ground root, all in one folder. They build (one database per skeleton), run and
go through GenMM with the feet on the ground and the figure upright, as the original does;
the implausible-take warnings fire on the broken copies and not on the original."""

from __future__ import annotations

import json

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.anim.contacts import foot_contacts
from motionmatch.anim.humanoid import find_humanoid
from motionmatch.cli.main import main
from motionmatch.database import MotionDatabase
from motionmatch.metrics.sanity import upright_fraction
from rigs import lafan_clip, make_rig, write_rig

#: file stem -> (scheme, make_rig settings); the first is the original LAFAN1 rig
TAKES = {
    "walk_lafan": ("lafan", {}),
    "walk_unreal_zup_root": ("unreal", {"z_up": True, "ground_root": True}),
    "walk_mixamo_below_floor": ("mixamo", {"feet_below_floor": True}),
    "walk_cc_zup_root": ("cc", {"z_up": True, "ground_root": True}),
    "walk_cc_zup_below_floor": ("cc", {"z_up": True, "feet_below_floor": True}),
}
BROKEN = ("walk_mixamo_below_floor", "walk_cc_zup_below_floor")


@pytest.fixture(scope="module")
def folder(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("rigs")
    clip = lafan_clip(data_dir, 400)
    for stem, (scheme, kw) in TAKES.items():
        write_rig(make_rig(clip, scheme, extras=scheme != "lafan", **kw), out / "takes", stem)
    script = out / "walk.json"
    script.write_text(json.dumps({"duration": 4.0, "events": [{"t": 0.0, "keys": ["w"]}]}))
    return out


@pytest.fixture(scope="module")
def built(folder):
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["build", str(folder / "takes"), "-o", str(folder / "db.npz"), "--per-skeleton", "-q"])
    assert code == 0, err.getvalue()
    return err.getvalue()


def _feet_and_upright(motion, db_feet=None):
    """Median height (m) of the contact joints where they are planted, and the upright share."""
    roles = find_humanoid(motion.skeleton)
    feet = list(roles.contact_joints) if db_feet is None else list(db_feet)
    con = foot_contacts(motion, feet=feet, ground_height=0.0).contacts
    h = motion.world_positions[:, feet, 1]
    head, hips = roles["head"], roles.hips
    return float(np.median(h[con])), float(con.mean()), upright_fraction(motion, head=head, hips=hips)


def test_warnings_fire_on_the_broken_copies_only(built):
    lines = built.splitlines()
    assert all(line.startswith("motionmatch build: warning: ") for line in lines), built
    grounded = [line for line in lines if "put on the ground: moved up" in line]
    assert sorted(line.split("/")[-1].split(".bvh")[0] for line in grounded) == sorted(BROKEN)
    for line in grounded:
        assert 0.85 <= float(line.split("moved up ")[1].split(" m")[0]) <= 1.0
    assert not any("walk_lafan" in line for line in lines)
    assert not any("implausib" in line for line in lines)  # the up axis and unit were found


def test_one_database_per_skeleton_with_the_original_features(folder, built):
    dbs = sorted(folder.glob("db_*.npz"))
    assert len(dbs) == 4  # LAFAN1, Unreal, Mixamo, Character Creator (with and without root: one)
    loaded = [MotionDatabase.load(p) for p in dbs]
    base = next(db for db in loaded if "Hips" in db.skeleton.names)
    for db in loaded:
        assert db.raw_features.shape[1] == base.raw_features.shape[1]
        for c in range(len(db.clip_names)):  # every clip's features are the original's, to 2 cm
            a, b = db.clip_starts[c], db.clip_stops[c]
            np.testing.assert_allclose(db.raw_features[a:b], base.raw_features[:b - a], atol=0.03)
            assert np.mean(db.contacts[a:b] == base.contacts[:b - a]) > 0.97


def test_run_keeps_feet_on_the_ground_and_the_figure_upright(folder, built, capsys):
    results = {}
    for db in sorted(folder.glob("db_*.npz")):
        out = folder / f"{db.stem}_run.bvh"
        assert main(["run", "--db", str(db), "--input", str(folder / "walk.json"), "-o", str(out)]) == 0
        results[db.stem] = _feet_and_upright(load_bvh(out), MotionDatabase.load(db).foot_joints)
    base = next(v for k, v in results.items() if "Hips" in MotionDatabase.load(folder / f"{k}.npz").skeleton.names)
    for name, (height, contact, upright) in results.items():
        assert abs(height - base[0]) < 0.02 and abs(height) < 0.05, (name, results)
        assert contact > 0.5 and upright == 1.0, (name, results)


def test_genmm_on_a_broken_copy_is_on_the_ground(folder, capsys):
    """GenMM on the hips-rooted Z-up Character Creator copy gives what it gives on the original."""
    out = {}
    for stem in ("walk_lafan", "walk_cc_zup_below_floor"):
        path = folder / f"{stem}_genmm.bvh"
        assert main(["genmm", str(folder / "takes" / f"{stem}.bvh"), "-o", str(path), "--frames", "120",
                     "--no-metrics", "--quiet"]) == 0
        out[stem] = _feet_and_upright(load_bvh(path))
    err = capsys.readouterr().err
    assert "walk_cc_zup_below_floor.bvh: put on the ground: moved up" in err and "walk_lafan" not in err
    (h0, _, up0), (h1, _, up1) = out["walk_lafan"], out["walk_cc_zup_below_floor"]
    assert abs(h1 - h0) < 0.02 and abs(h1) < 0.05 and up1 == up0 == 1.0, out


def test_viewer_data_reads_one_rig_with_and_without_its_ground_root(folder, tmp_path):
    """``viewer --data`` on the Character Creator takes (Z up, one with a ground root, one
    rooted at the hips under the floor): one database, its feet on the ground."""
    import shutil
    import warnings

    from motionmatch.viewer.data import open_database

    takes = tmp_path / "cc"
    takes.mkdir()
    for stem in ("walk_cc_zup_root", "walk_cc_zup_below_floor"):
        shutil.copy(folder / "takes" / f"{stem}.bvh", takes)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        db, _source = open_database(data=takes, cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    said = [str(w.message) for w in got]
    assert any("walk_cc_zup_below_floor.bvh: put on the ground" in s for s in said)
    assert any("walk_cc_zup_root.bvh: dropped the joints above the hips (CC_Base_BoneRoot)" in s for s in said)
    assert len(db.clip_names) == 4  # both takes and their mirrors
    feet = db.foot_joints
    for c in range(len(db.clip_names)):
        h, contact, upright = _feet_and_upright(db.clip_motion(c), feet)
        assert abs(h) < 0.05 and contact > 0.5 and upright == 1.0


def test_genmm_takes_one_rig_with_and_without_its_ground_root(folder, capsys):
    path = folder / "cc_two_genmm.bvh"
    assert main(["genmm", str(folder / "takes" / "walk_cc_zup_root.bvh"),
                 str(folder / "takes" / "walk_cc_zup_below_floor.bvh"), "-o", str(path), "--frames", "60",
                 "--no-metrics", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "dropped the joints above the hips (CC_Base_BoneRoot)" in err
    h, _, upright = _feet_and_upright(load_bvh(path))
    assert abs(h) < 0.05 and upright == 1.0
    assert main(["genmm", str(folder / "takes" / "walk_lafan.bvh"), str(folder / "takes" / "walk_cc_zup_root.bvh"),
                 "-o", str(folder / "mixed.bvh"), "--no-metrics", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "has a different skeleton from" in err and "give examples of one skeleton" in err
    assert not (folder / "mixed.bvh").exists()
