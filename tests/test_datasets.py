"""Dataset catalogue, tags from file names, folder loading, local copies and the ``datasets`` CLI."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path

import pytest

from motionmatch.cli import datasets_cmd
from motionmatch.datasets import (
    TAG_VOCABULARY,
    Dataset,
    canonical_tag,
    data_root,
    find_local,
    get_dataset,
    list_datasets,
    load_folder,
    resolve,
    split_name,
    tags_from_name,
)
from motionmatch.errors import DatasetError

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data() -> Path:
    """``$MOTIONMATCH_DATA``, default ``../shared/data`` relative to the repository root."""
    env = os.environ.get("MOTIONMATCH_DATA")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


def make_bvh(num_frames: int = 3, fps: float = 30.0) -> str:
    """A tiny valid BVH: a root with position channels and one child joint, centimetres."""
    rows = "\n".join(f"{f:.1f} 90.0 {2.0 * f:.1f} 0.0 {3.0 * f:.1f} 0.0 0.0 0.0 {f:.1f}" for f in range(num_frames))
    return (
        "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n"
        "  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation\n"
        "  JOINT Spine\n  {\n    OFFSET 0 10 0\n    CHANNELS 3 Zrotation Yrotation Xrotation\n"
        "    End Site\n    {\n      OFFSET 0 10 0\n    }\n  }\n}\n"
        f"MOTION\nFrames: {num_frames}\nFrame Time: {1.0 / fps:.6f}\n{rows}\n"
    )


# --------------------------------------------------------------------------- tags
@pytest.mark.parametrize(
    ("stem", "expected"),
    [
        # LAFAN1 (segments as in lafan1-60fps, and original takes)
        ("ground1_subject4_backward", ("creep", "backward")),
        ("ground2_subject2_walk", ("creep", "walk")),
        ("dance2_subject5_bobbing", ("dance",)),
        ("dance2_subject2_trotting", ("dance",)),
        ("fallAndGetUp1_subject1_sprint2", ("fall", "getup", "sprint", "run")),
        ("fallAndGetUp3_subject1_standNwalk", ("fall", "getup", "idle", "walk")),
        ("jumps1_subject1_walkNturn", ("jump", "walk", "turn")),
        ("jumps1_subject2_scissor", ("jump",)),
        ("multipleActions1_subject4_slowWalk", ("slow", "walk")),
        ("multipleActions1_subject1_jog3", ("jog",)),
        ("obstacles3_subject3_sideways", ("obstacle", "sidestep")),
        ("obstacles6_subject1_sidesteps", ("obstacle", "sidestep")),
        ("obstacles3_subject4_slalom", ("obstacle", "turn")),
        ("obstacles4_subject3_standing", ("obstacle", "idle")),
        ("pushAndFall1_subject4_stand", ("push", "fall", "idle")),
        ("pushAndStumble1_subject3_backward", ("push", "stumble", "backward")),
        ("fightAndSports1_subject1_sidesteps", ("fight", "sport", "sidestep")),
        ("aiming2_subject3_turn", ("aim", "turn")),
        ("walk2_subject1_proud", ("walk", "proud")),
        ("run2_subject4_run2", ("run",)),
        ("walk1_subject1_stop", ("walk", "stop")),
        ("obstacles1_subject1", ("obstacle",)),
        ("ground1_subject4", ("creep",)),
        # Bandai-Namco
        ("dataset-1_walk-back_happy_001", ("walk", "backward", "happy")),
        ("dataset-1_dash_chimpira_001", ("dash", "run", "chimpira")),
        ("dataset-1_walk_not-confident_002", ("walk", "not-confident")),
        ("dataset-1_walk-left_masculinity_001", ("walk", "left", "masculinity")),
        ("dataset-1_dance-short_normal_001", ("dance", "normal")),
        ("dataset-1_kick_normal_001", ("kick", "normal")),
        ("dataset-1_punch_normal_002", ("punch", "normal")),
        ("dataset-1_byebye_old_001", ("wave", "old")),
        ("dataset-2_walk-turn-right_active_017", ("walk", "turn", "right", "active")),
        ("dataset-2_run_normal_001.bvh", ("run", "normal")),
        # nothing known
        ("take_0001", ()),
    ],
)
def test_tags_from_name(stem: str, expected: tuple[str, ...]) -> None:
    assert tags_from_name(stem) == expected


def test_tags_are_in_vocabulary_and_helpers() -> None:
    assert split_name("fallAndGetUp1_subject1_standNwalk") == [
        "fall", "and", "get", "up", "1", "subject", "1", "stand", "and", "walk",
    ]  # fmt: skip
    assert split_name("dataset-1 walk-back") == ["dataset", "1", "walk", "back"]
    assert canonical_tag("Crawling") == "creep"
    assert canonical_tag("not-confident") == "not-confident"
    assert canonical_tag("stand") == "idle"
    assert canonical_tag("xyzzy") is None
    for stem in ("dataset-1_walk-back_happy_001", "ground1_subject4_backward", "fallAndGetUp1_subject1_sprint"):
        assert set(tags_from_name(stem)) <= set(TAG_VOCABULARY)


# --------------------------------------------------------------------------- load_folder
@pytest.fixture
def bvh_folder(tmp_path: Path) -> Path:
    root = tmp_path / "motions"
    (root / "sub").mkdir(parents=True)
    (root / "walk1_subject1_walk.bvh").write_text(make_bvh(4))
    (root / "dataset-1_dash_happy_001.bvh").write_text(make_bvh(5))
    (root / "sub" / "jumps1_subject2_scissor.bvh").write_text(make_bvh(6))
    (root / "notes.txt").write_text("not motion data")
    return root


def test_load_folder_recursive_sorted_tagged(bvh_folder: Path) -> None:
    motions = load_folder(bvh_folder, units="cm")
    assert [m.name for m in motions] == ["dataset-1_dash_happy_001", "jumps1_subject2_scissor", "walk1_subject1_walk"]
    assert [m.num_frames for m in motions] == [5, 6, 4]
    assert [m.tags for m in motions] == [("dash", "run", "happy"), ("jump",), ("walk",)]
    assert all(m.fps == pytest.approx(30.0) for m in motions)
    # 10 cm bone -> 0.1 m
    assert motions[0].skeleton.offsets[1][1] == pytest.approx(0.1)
    # deterministic
    assert [m.name for m in load_folder(bvh_folder, units="cm")] == [m.name for m in motions]


def test_load_folder_options(bvh_folder: Path) -> None:
    flat = load_folder(bvh_folder, recursive=False, units="cm")
    assert [m.name for m in flat] == ["dataset-1_dash_happy_001", "walk1_subject1_walk"]

    only_walk = load_folder(bvh_folder, pattern="walk*.bvh", units="cm")
    assert [m.name for m in only_walk] == ["walk1_subject1_walk"]

    extended = load_folder(
        bvh_folder,
        units="cm",
        tags={"walk1_subject1_walk": ["treadmill", "walk"], "dataset-1_*": "stylised", "sub/*": ("outdoor",)},
    )
    assert {m.name: m.tags for m in extended} == {
        "dataset-1_dash_happy_001": ("dash", "run", "happy", "stylised"),
        "jumps1_subject2_scissor": ("jump", "outdoor"),
        "walk1_subject1_walk": ("walk", "treadmill"),
    }

    replaced = load_folder(bvh_folder, units="cm", tags={"*": "mocap"}, auto_tags=False)
    assert {m.tags for m in replaced} == {("mocap",)}

    by_function = load_folder(bvh_folder, units="cm", tags=lambda p: [p.parent.name])
    assert by_function[1].tags == ("jump", "sub")


def test_load_folder_errors(tmp_path: Path, bvh_folder: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError, match=r"empty: no files matching '\*\.bvh'"):
        load_folder(empty)
    with pytest.raises(DatasetError, match=r"no files matching '\*\.fbx'") as info:
        load_folder(bvh_folder, pattern="*.fbx")
    assert str(bvh_folder) in str(info.value)
    with pytest.raises(DatasetError, match="not a folder"):
        load_folder(tmp_path / "missing")


@pytest.mark.data
def test_load_folder_lafan1_60fps() -> None:
    folder = shared_data() / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"motion data not found: {folder} (set MOTIONMATCH_DATA to the shared data folder)")
    motions = load_folder(folder)
    assert len(motions) == 45
    assert [m.name for m in motions] == sorted(p.stem for p in folder.glob("*.bvh"))
    for m in motions:
        assert m.tags, f"{m.name} has no tags"
        assert m.num_frames > 0 and m.fps == pytest.approx(60.0)
        low = m.name.lower()
        for word, tag in (
            ("walk", "walk"),
            ("run", "run"),
            ("jog", "jog"),
            ("sprint", "sprint"),
            ("dance", "dance"),
            ("jump", "jump"),
            ("sidestep", "sidestep"),
            ("backward", "backward"),
            ("ground", "creep"),
        ):
            if word in low:
                assert tag in m.tags, f"{m.name}: {m.tags} lacks {tag!r}"
    walks = [m for m in motions if "walk" in m.tags]
    assert len(walks) >= 15


@pytest.mark.data
def test_bandai_names_tag_content_and_style() -> None:
    folder = shared_data() / "bandai-namco" / "dataset-1"
    if not folder.is_dir():
        pytest.skip(f"motion data not found: {folder} (set MOTIONMATCH_DATA to the shared data folder)")
    stems = sorted(p.stem for p in folder.glob("*.bvh"))
    assert stems
    for stem in stems:
        _, content, style, _ = stem.split("_")
        tags = tags_from_name(stem)
        assert content.split("-")[0] in tags or (content == "dash" and "run" in tags), stem
        assert style in tags, stem


# --------------------------------------------------------------------------- catalogue
def test_catalogue_entries() -> None:
    names = [d.name for d in list_datasets()]
    assert names[:3] == ["lafan1", "bandai-namco-1", "bandai-namco-2"]
    lafan = get_dataset("LAFAN1")
    assert lafan.licence == "CC BY-NC-ND 4.0"
    assert lafan.fps == 30 and lafan.units == "cm" and lafan.euler_order == "ZYX"
    assert lafan.archive_format == "zip" and lafan.urls[0].endswith("lafan1/lafan1.zip")
    assert "ubisoft/ubisoft-laforge-animation-dataset" in lafan.urls[0]
    for name in ("bandai-namco-1", "bandai_namco_2"):
        ds = get_dataset(name)
        assert ds.licence == "CC BY-NC 4.0"
        assert all("BandaiNamcoResearchInc/Bandai-Namco-Research-Motiondataset" in u for u in ds.urls)
        assert ds.urls[0].endswith("/data.zip") and ds.euler_order == "ZXY"
    for ds in list_datasets():
        assert ds.sha256 is None or len(ds.sha256) == 64
        assert ds.attribution and ds.title
        json.dumps(ds.to_dict())
    with pytest.raises(dataclasses.FrozenInstanceError):
        lafan.name = "other"  # type: ignore[misc]


def test_unknown_dataset_lists_known_names() -> None:
    with pytest.raises(
        DatasetError, match=r"unknown dataset 'cmu'; known datasets: lafan1, bandai-namco-1, bandai-namco-2"
    ):
        get_dataset("cmu")


def test_dataset_validation() -> None:
    ds = Dataset(name="x", title="X", urls="https://example.org/files/x.tar.gz?raw=1")
    assert ds.urls == ("https://example.org/files/x.tar.gz?raw=1",)
    assert ds.filename == "x.tar.gz" and ds.archive_format == "tar.gz"
    with pytest.raises(DatasetError, match="sha256"):
        Dataset(name="x", title="X", urls=("https://example.org/x.zip",), sha256="abc")
    with pytest.raises(DatasetError, match="archive format"):
        Dataset(name="x", title="X", urls=("https://example.org/x.rar",))
    with pytest.raises(DatasetError, match="at least one URL"):
        Dataset(name="x", title="X", urls=())


# --------------------------------------------------------------------------- local copies
def test_find_local_and_resolve_prefer_local_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    (data / "lafan1-60fps").mkdir(parents=True)
    (data / "lafan1-60fps" / "walk1_subject1_walk.bvh").write_text(make_bvh())
    (data / "bandai-namco" / "dataset-1").mkdir(parents=True)  # no BVH: not a copy
    monkeypatch.setenv("MOTIONMATCH_DATA", str(data))
    monkeypatch.setenv("MOTIONMATCH_CACHE", str(tmp_path / "cache"))
    assert data_root() == data
    assert find_local("lafan1") == data / "lafan1-60fps"
    (data / "lafan1").mkdir()
    (data / "lafan1" / "obstacles1_subject1.bvh").write_text(make_bvh())
    assert find_local("lafan1") == data / "lafan1"  # the original takes come first
    assert find_local("bandai-namco-1") is None
    assert resolve("lafan1") == data / "lafan1"
    with pytest.raises(DatasetError, match="neither in MOTIONMATCH_DATA"):
        resolve("bandai-namco-2", download=False)


def test_data_root_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOTIONMATCH_DATA", raising=False)
    work = tmp_path / "main"
    work.mkdir()
    monkeypatch.chdir(work)
    assert data_root() is None
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert data_root() == tmp_path / "shared" / "data"


# --------------------------------------------------------------------------- CLI
@pytest.fixture
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="motionmatch")
    datasets_cmd.register(p.add_subparsers(dest="command"))
    return p


def test_cli_list_table_and_json(
    parser: argparse.ArgumentParser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    data = tmp_path / "data"
    (data / "lafan1").mkdir(parents=True)
    (data / "lafan1" / "x.bvh").write_text(make_bvh())
    monkeypatch.setenv("MOTIONMATCH_DATA", str(data))
    monkeypatch.setenv("MOTIONMATCH_CACHE", str(tmp_path / "cache"))

    args = parser.parse_args(["datasets", "list"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["NAME", "TITLE", "SIZE"] and "LICENCE" in header and "CACHED" in header
    lafan_row = next(r for r in rows if r.startswith("lafan1 "))
    assert "137.4 MiB" in lafan_row and "CC BY-NC-ND 4.0" in lafan_row
    assert lafan_row.split()[-2:] == ["yes", "no"]
    assert any(r.startswith("bandai-namco-2 ") and r.split()[-2:] == ["no", "no"] for r in rows)

    args = parser.parse_args(["datasets", "list", "--json"])
    assert args.func(args) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert listed["lafan1"]["local"] == str(data / "lafan1")
    assert listed["lafan1"]["cached"] is None
    assert listed["bandai-namco-1"]["licence"] == "CC BY-NC 4.0"
    assert listed["bandai-namco-1"]["sha256"] and listed["bandai-namco-1"]["urls"]


def test_cli_fetch_unknown_name_fails_cleanly(parser: argparse.ArgumentParser, tmp_path: Path, capsys) -> None:
    args = parser.parse_args(["datasets", "fetch", "nope", "--cache-dir", str(tmp_path), "--no-progress"])
    assert (args.cache_dir, args.force, args.no_progress) == (str(tmp_path), False, True)
    assert args.func(args) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "unknown dataset 'nope'" in err and "lafan1" in err


def test_cli_datasets_without_subcommand_names_the_subcommands_in_one_line(parser: argparse.ArgumentParser,
                                                                         capsys) -> None:
    args = parser.parse_args(["datasets"])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fetch" in err and "list" in err
