"""Batch jobs on the embedded Ray (one Ray for the module): each job's outputs equal a
single-process run's, reruns skip finished cells, failed cells are reported, bad sweep
files get one-line errors. The cluster (--address) is in test_batch_cluster.py."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from _batch_common import BUILD_CLIPS, FRAMES, GENMM_EXAMPLE, REPO, same_npz, write_short_example, write_sweep

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'motionmatch[ray]'")

from motionmatch import batch  # noqa: E402
from motionmatch.batch.sweep_spec import parse_sweep  # noqa: E402
from motionmatch.cli.main import main  # noqa: E402

pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def embedded_ray():
    """One Ray inside this process for every job of the module (2 workers); the jobs use it as it is."""
    with batch.ray_session(workers=2):
        yield


@pytest.fixture(scope="module")
def built(tmp_path_factory, data_dir, embedded_ray):
    """``motionmatch build`` and ``batch.build`` of the same clips (mirrored)."""
    tmp = tmp_path_factory.mktemp("batch_build")
    files = [str(data_dir / "lafan1-60fps" / f) for f in BUILD_CLIPS]
    assert main(["build", *files, "--mirror", "-q", "-o", str(tmp / "ref.npz")]) == 0
    result = batch.build(files, tmp / "db.npz", mirror_copies=True)
    return tmp, files, result


def test_build_equals_motionmatch_build_and_reruns_only_what_is_missing(built):
    tmp, files, result = built
    assert len(result.done) == 3 and not result.failed
    assert same_npz(tmp / "db.npz", tmp / "ref.npz")  # every array and the metadata (input hash included)
    manifest = json.loads((tmp / "db.manifest.json").read_text())
    assert set(manifest["inputs"]) == set(files) and "db.npz" in manifest["outputs"]
    assert manifest["versions"]["ray"] == ray.__version__
    again = batch.build(files, tmp / "db.npz", mirror_copies=True)
    assert len(again.skipped) == 3 and not again.done
    cells = json.loads((tmp / "db.manifest.json").read_text())["cells"]
    (tmp / next(iter(cells[files[1]]["outputs"]))).unlink()  # one clip's finished part is lost
    third = batch.build(files, tmp / "db.npz", mirror_copies=True)
    assert [c.key for c in third.done] == [files[1]] and len(third.skipped) == 2
    assert same_npz(tmp / "db.npz", tmp / "ref.npz")


def test_genmm_equals_motionmatch_genmm_and_reports_failed_cells(tmp_path, data_dir, embedded_ray):
    example = data_dir / GENMM_EXAMPLE
    short = write_short_example(example, tmp_path / "short.bvh")
    out = tmp_path / "out"
    result = batch.genmm([example, short], out, seeds=[0, 3], frames=FRAMES)
    assert [c.key for c in result.done] == ["Xia_normal/Xia_normal_seed0", "Xia_normal/Xia_normal_seed3"]
    assert len(result.failed) == 2 and all("fewer than the patch size" in c.error for c in result.failed)
    for seed in (0, 3):
        ref = tmp_path / f"ref{seed}.bvh"
        assert main(["genmm", str(example), "-o", str(ref), "--seed", str(seed), "--frames", str(FRAMES),
                     "--quiet", "--no-metrics"]) == 0
        assert (out / "Xia_normal" / f"Xia_normal_seed{seed}.bvh").read_bytes() == ref.read_bytes()
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert [r["seed"] for r in rows] == ["0", "3"] and all(0 < float(r["coverage"]) <= 1 for r in rows)
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["failed"]) == {"short/short_seed0", "short/short_seed3"}
    again = batch.genmm([example, short], out, seeds=[0, 3], frames=FRAMES)
    assert len(again.skipped) == 2 and len(again.failed) == 2 and not again.done


def test_sweep_equals_single_process_runs(built, tmp_path):
    from motionmatch.batch.sweep import run_path_cell
    from motionmatch.database import MotionDatabase

    db_path = built[0] / "ref.npz"
    spec = write_sweep(tmp_path, db_path)
    out = tmp_path / "out"
    result = batch.sweep(spec, out)
    assert not result.failed, result.failed
    cell = json.loads((out / "cells" / "scenario-zigzag-cones-exact-seed0.json").read_text())
    ref = tmp_path / "ref.json"
    assert main(["scenario", str(REPO / "scenarios" / "zigzag-cones.json"), "--db", str(db_path), "-o",
                 str(tmp_path / "ref.npz"), "--report", str(ref), "--duration", "1", "--method", "linear",
                 "--no-poses", "-q"]) == 0
    ref = json.loads(ref.read_text())
    for k in ("collision_fraction", "collision_time_s", "diversity", "searches"):
        assert cell[k] == ref[k], k
    path_cell = json.loads((out / "cells" / "path-square-exact-seed0.json").read_text())
    own = run_path_cell(MotionDatabase.load(db_path), str(REPO / "paths" / "square.json"),
                        {"k": 1, "levels": 1}, 0, 1.0, 0.0)["report"]
    for k in ("mean_distance_m", "max_distance_m", "completed"):
        assert path_cell[k] == own[k], k
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [(r["kind"], r["file"], r["setting"], r["seeds_done"]) for r in rows] == [
        ("scenario", "zigzag-cones", "exact", "1"), ("path", "square", "exact", "1")]
    assert float(rows[1]["mean_distance_m"]) == pytest.approx(path_cell["mean_distance_m"], abs=1e-6)
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"cells.csv", "summary.csv"} <= set(manifest["outputs"]) and str(db_path) in manifest["inputs"]


@pytest.mark.parametrize("change, field", [
    ({"database": "missing.npz"}, "database"),
    ({"scenarios": "zigzag.json"}, "scenarios"),
    ({"settings": {"fast": {"k": 0}}}, "settings.fast.k"),
    ({"settings": {"fast": {"method": "quick"}}}, "settings.fast.method"),
    ({"settings": {"fast": {"speed": 2}}}, "settings.fast.speed"),
    ({"seeds": [1, -1]}, "seeds[1]"),
    ({"duration": "long"}, "duration"),
    ({"colour": 1}, "colour"),
])
def test_sweep_file_errors_name_the_field(tmp_path, change, field):
    db = tmp_path / "db.npz"
    db.write_bytes(b"")
    good = json.loads(write_sweep(tmp_path, db).read_text())
    assert parse_sweep(good, tmp_path / "sweep.json").seeds == (0,)
    with pytest.raises(batch.BatchError) as e:
        parse_sweep({**good, **change}, tmp_path / "sweep.json")
    msg = str(e.value)
    assert "\n" not in msg and f"{field}:" in msg and msg.startswith(str(tmp_path / "sweep.json"))


def test_without_ray_the_error_names_the_extra(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(batch.BatchError, match=r"pip install 'motionmatch\[ray\]'"):
        batch.import_ray()
    assert main(["batch", "genmm", str(tmp_path / "x.bvh"), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'motionmatch[ray]'" in err


def test_cells_run_in_groups_fail_alone_and_keep_their_digests(tmp_path, embedded_ray):
    from motionmatch.batch.jobs import Cell, _groups, run_cells, sha256_file

    def square(x):  # a local function: Ray pickles it by value
        if x == 4:
            raise ValueError("four is refused")
        return x * x

    def save(cell, value):
        (tmp_path / cell.outputs[0]).write_text(str(value))  # no digest returned: the files are hashed

    cells = [Cell(key=f"c{i}", input_hash=str(i), outputs=(f"c{i}.txt",), args=(i,), cost=i) for i in range(7)]
    assert [[c.key for c in g] for g in _groups(cells, 3)] == [["c6", "c5", "c4"], ["c3", "c2", "c1"], ["c0"]]
    result = run_cells("squares", tmp_path, tmp_path / "m.json", cells, square, save, cells_per_task=3)
    assert [c.status for c in result.cells] == ["done"] * 4 + ["failed"] + ["done"] * 2
    assert result.cells[4].error == "ValueError: four is refused"  # its group's other cells are done
    assert [(tmp_path / f"c{i}.txt").read_text() for i in (3, 5, 6)] == ["9", "25", "36"]
    assert all(c.outputs == {f"{c.key}.txt": sha256_file(tmp_path / f"{c.key}.txt")} for c in result.done)
    again = run_cells("squares", tmp_path, tmp_path / "m.json", cells, square, save, cells_per_task=None)
    assert len(again.skipped) == 6 and [c.key for c in again.failed] == ["c4"]


def test_manifest_text_is_the_document_one_entry_a_line():
    from motionmatch.batch.jobs import _json_text

    doc = {"job": "build", "cells": {"a/\u00e9.bvh": {"status": "done", "outputs": {"x": "00"}}, "b": {}},
           "empty": {}, "inputs": {"p": "h"}, "n": [1, 2.5, None], "timings": {"job_s": 1.0}}
    text = _json_text(doc)
    assert json.loads(text) == doc
    assert '    "a/\\u00e9.bvh": {"status": "done", "outputs": {"x": "00"}},' in text.splitlines()


def test_a_clips_parts_file_round_trips_with_its_digest(tmp_path, data_dir):
    import numpy as np

    from motionmatch.batch.build import build_clip, load_parts, save_parts
    from motionmatch.batch.jobs import sha256_file
    from motionmatch.database.schema import schema_by_name

    value = build_clip(schema_by_name("classic").to_json(), str(data_dir / "lafan1-60fps" / BUILD_CLIPS[0]),
                       "auto", 30.0, True)
    digest = save_parts(tmp_path / "clip.part", value)
    assert digest == sha256_file(tmp_path / "clip.part")
    back = load_parts(tmp_path / "clip.part")
    assert back[:2] == value[:2] and len(back[2]) == len(value[2]) == 2  # the clip and its mirrored copy
    for a, b in zip(value[2], back[2]):
        assert (a.name, a.tags, a.foot_joints, a.skeleton.names) == (b.name, b.tags, b.foot_joints, b.skeleton.names)
        for k in ("raw_features", "valid", "rotations", "translations", "contacts"):
            x, y = getattr(a, k), getattr(b, k)
            assert x.dtype == y.dtype and np.array_equal(x, y), k
    (tmp_path / "bad.part").write_bytes(b"PK\x03\x04 an npz")
    with pytest.raises(batch.BatchError, match="not a parts file"):
        load_parts(tmp_path / "bad.part")


def test_build_gives_takes_of_one_rig_one_root_as_motionmatch_build_does(tmp_path, data_dir, embedded_ray):
    """Bandai-Namco's dataset-1: a run whose root bone is found to carry the character keeps
    it (22 joints), a walk backwards gets a new root above it (23); ``motionmatch build``
    then gives both a new root (one skeleton), and so does ``batch build`` (it failed: "23
    vs 22 joints"), also from the parts it kept."""
    from motionmatch.database import MotionDatabase

    folder = data_dir / "bandai-namco" / "dataset-1"
    files = [str(folder / f"dataset-1_{n}.bvh") for n in ("run_normal_001", "walk-back_angry_001")]
    if not all(Path(f).is_file() for f in files):
        pytest.skip("Bandai-Namco dataset-1 not in the data folder")
    assert main(["build", *files, "--fps", "30", "-q", "-o", str(tmp_path / "ref.npz")]) == 0
    result = batch.build(files, tmp_path / "db.npz", fps=30.0)
    assert len(result.done) == 2 and not result.failed, result.failed
    assert same_npz(tmp_path / "db.npz", tmp_path / "ref.npz")
    assert MotionDatabase.load(tmp_path / "db.npz").skeleton.num_joints == 23
    again = batch.build(files, tmp_path / "db.npz", fps=30.0)  # from the kept parts: the same
    assert len(again.skipped) == 2 and same_npz(tmp_path / "db.npz", tmp_path / "ref.npz")
