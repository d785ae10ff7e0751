"""BVH reader and writer: acceptance on the real data, hand-checked kinematics, format corners.

The real files are read from ``$MOTIONMATCH_DATA`` (default ``../shared/data`` beside the
repository); the tests that need them skip with a message when the folder is absent.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import motionmatch.anim.bvh as bvh_mod
from motionmatch.anim import Motion, Skeleton
from motionmatch.anim.bvh import format_bvh, load_bvh, parse_bvh, save_bvh
from motionmatch.errors import BVHError, SkeletonError

REPO = Path(__file__).resolve().parents[1]


def _data_root() -> Path:
    env = os.environ.get("MOTIONMATCH_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


DATA = _data_root()
ALL_FILES = sorted(DATA.rglob("*.bvh")) if DATA.is_dir() else []
_SKIP = f"motion data not found at {DATA}; set MOTIONMATCH_DATA to the shared data folder"
needs_data = pytest.mark.skipif(not ALL_FILES, reason=_SKIP)


def _file_params(files: list[Path]) -> list:
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=_SKIP), id="no-data")]
    return [pytest.param(f, id=str(f.relative_to(DATA))) for f in files]


def _header_frames(raw: bytes) -> int:
    return int(re.search(rb"Frames\s*:\s*(\d+)", raw).group(1))


def _header_frame_time(raw: bytes) -> float:
    return float(re.search(rb"Frame\s+Time\s*:\s*(\S+)", raw).group(1))


def _offset_numbers(text: bytes) -> np.ndarray:
    """Every OFFSET triple of a BVH text, in file order (file units)."""
    return np.array([[float(v) for v in m.groups()]
                     for m in re.finditer(rb"OFFSET\s+(\S+)\s+(\S+)\s+(\S+)", text)])


def _by_source(n: int) -> list[Path]:
    """The first ``n`` files of each source folder (a quick cross-section)."""
    out: list[Path] = []
    for sub in ("lafan1-60fps", "lafan1", "bandai-namco/dataset-1", "bandai-namco/dataset-2",
                "genmm-examples", "quadruped-dog"):
        out += sorted((DATA / sub).glob("*.bvh"))[:n]
    return out


# ----------------------------------------------------------------- real data
@pytest.mark.data
@pytest.mark.parametrize("path", _file_params(ALL_FILES))
def test_every_file_loads_with_the_header_frame_count(path: Path) -> None:
    raw = path.read_bytes()
    m = load_bvh(path)
    assert m.num_frames == _header_frames(raw)
    assert m.name == path.stem and m.source == path
    assert np.all(np.isfinite(m.world_positions))


# Expected frame rates: per folder, and per file for the mixed GANimator examples.
_FPS = {"lafan1-60fps": 60, "lafan1": 30, "bandai-namco": 30, "quadruped-dog": 60}
_GENMM_FPS = {"Joe_Salsa-Dancing-6": 60, "Joe_Walk-In-Circle": 60, "Malcolm_Gangnam-Style": 60,
              "Xia_normal": 120, "Joe_Baseball-Milling-Idle-edited-keyframes": 1}


@pytest.mark.data
@pytest.mark.parametrize("path", _file_params(ALL_FILES))
def test_frame_rate_is_snapped_to_the_whole_rate(path: Path) -> None:
    m = load_bvh(path)
    top = path.relative_to(DATA).parts[0]
    expected = _GENMM_FPS.get(path.stem, 30) if top == "genmm-examples" else _FPS[top]
    assert m.fps == expected  # exactly: 0.0333333 -> 30, 0.016667 -> 60, 0.008333 -> 120
    assert abs(1.0 / m.fps - _header_frame_time(path.read_bytes())) < 1e-5


def _bone_lengths(m: Motion, joints: list[int]) -> np.ndarray:
    """``[F, len(joints)]`` world distance between each joint and its parent."""
    wp = m.world_positions
    return np.linalg.norm(wp[:, joints] - wp[:, m.skeleton.parents[joints]], axis=-1)


@pytest.mark.data
@pytest.mark.parametrize("path", _file_params([f for f in ALL_FILES if "bandai-namco" not in f.parts]))
def test_bone_lengths_are_constant_for_joints_without_position_channels(path: Path) -> None:
    m = load_bvh(path)
    s = m.skeleton
    rigid = [j for j in range(1, s.num_joints) if not s.has_position_channels[j]]
    length = _bone_lengths(m, rigid)  # [F, Jr]
    expected = np.linalg.norm(s.offsets[rigid], axis=-1)
    np.testing.assert_allclose(length, np.broadcast_to(expected, length.shape), atol=1e-4, rtol=0)


@pytest.mark.data
@pytest.mark.parametrize("path", _file_params([f for f in ALL_FILES if "bandai-namco" in f.parts]))
def test_bandai_namco_bones_below_the_hips_are_rigid(path: Path) -> None:
    """Bandai-Namco has position channels on every joint; below the hips they hold the
    bone still (a check that they are read as translations, in the right columns)."""
    m = load_bvh(path)
    assert m.skeleton.has_position_channels.all() and m.skeleton.names[1] == "Hips"
    length = _bone_lengths(m, list(range(2, m.num_joints)))
    np.testing.assert_allclose(length, np.broadcast_to(length[0], length.shape), atol=1e-4, rtol=0)


@pytest.mark.data
@pytest.mark.parametrize("path", _file_params(ALL_FILES))
def test_roundtrip_every_file(path: Path, tmp_path: Path) -> None:
    """read -> save_bvh -> read reproduces world positions (and end sites) within 0.1 mm,
    names, channel orders, frame rate and the file's own units.

    All 488 files take about 7 s together, so this is not marked slow."""
    raw = path.read_bytes()
    m = load_bvh(path)
    out = save_bvh(m, tmp_path / path.name)
    m2 = load_bvh(out)
    assert m2.skeleton.names == m.skeleton.names
    np.testing.assert_array_equal(m2.skeleton.parents, m.skeleton.parents)
    assert m2.skeleton.channels == m.skeleton.channels
    assert m2.num_frames == m.num_frames
    assert m2.fps == m.fps
    assert m2.file_scale == m.file_scale
    np.testing.assert_allclose(m2.world_positions, m.world_positions, atol=1e-4, rtol=0)
    np.testing.assert_allclose(m2.end_site_positions(), m.end_site_positions(), atol=1e-4, rtol=0)
    # Written back in the original units: the OFFSET numbers are the file's own.
    np.testing.assert_allclose(_offset_numbers(out.read_bytes()), _offset_numbers(raw), atol=2e-6)
    assert not [p for p in tmp_path.iterdir() if p.name != path.name]  # no temporary file left


@pytest.mark.data
@pytest.mark.parametrize("path", _file_params(_by_source(2) if ALL_FILES else []))
def test_roundtrip_text_is_stable(path: Path) -> None:
    """Writing what was read and reading it again gives the same text (a fixed point)."""
    once = format_bvh(load_bvh(path))
    assert format_bvh(parse_bvh(once)) == once


@pytest.mark.data
def test_sources_have_their_documented_layout() -> None:
    if not ALL_FILES:
        pytest.skip(_SKIP)
    laf = load_bvh(DATA / "lafan1-60fps" / "walk3_subject1_walk.bvh")
    assert laf.num_frames == 3813 and laf.file_scale == 0.01 and laf.num_joints == 23
    assert laf.skeleton.names[:2] == ("SimulationBone", "Hips")
    assert {laf.skeleton.rotation_order(j) for j in range(laf.num_joints)} == {"zyx"}
    bn = load_bvh(sorted((DATA / "bandai-namco" / "dataset-1").glob("*.bvh"))[0])
    assert bn.file_scale == 0.01 and bn.num_joints == 22
    assert all(c == ("Xposition", "Yposition", "Zposition", "Zrotation", "Xrotation", "Yrotation")
               for c in bn.skeleton.channels)
    # A person is 1.2-2 m tall in metres (centimetres detected and converted).
    for m in (laf, bn):
        head = m.skeleton.find("head")[0]
        foot = m.skeleton.find("foot", "ankle")[0]
        height = np.median(m.world_positions[:, head, 1] - m.world_positions[:, foot, 1])
        assert 1.0 < height < 2.0


# ------------------------------------------------------- hand-checked kinematics
_CHAIN = """HIERARCHY
ROOT Root
{
\tOFFSET 5 5 5
\tCHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
\tJOINT A
\t{
\t\tOFFSET 0 1 0
\t\tCHANNELS 3 Zrotation Yrotation Xrotation
\t\tJOINT B
\t\t{
\t\t\tOFFSET 0 1 0
\t\t\tCHANNELS 3 Zrotation Yrotation Xrotation
\t\t\tEnd Site
\t\t\t{
\t\t\t\tOFFSET 0 0 1
\t\t\t}
\t\t}
\t}
}
MOTION
Frames: 2
Frame Time: 0.5
1 2 3 90 0 0 0 0 90 0 90 0
1 2 3 0 0 0 0 0 0 0 0 0
"""


def test_fk_of_a_hand_written_chain_with_90_degree_rotations() -> None:
    m = parse_bvh(_CHAIN, units="m")
    assert m.fps == 2.0
    # Frame 0: root at (1,2,3) (position channels replace OFFSET 5 5 5) turned 90 degrees
    # about Z: A's offset +Y becomes -X. A turns 90 about X: B's +Y becomes +Z. B turns
    # 90 about Y: the end site's +Z becomes +X in A's frame, +Y in the world.
    np.testing.assert_allclose(m.world_positions[0], [[1, 2, 3], [0, 2, 3], [0, 2, 4]], atol=1e-12)
    np.testing.assert_allclose(m.end_site_positions()[0], [[0, 3, 4]], atol=1e-12)
    # Frame 1: rest pose along +Y.
    np.testing.assert_allclose(m.world_positions[1], [[1, 2, 3], [1, 3, 3], [1, 4, 3]], atol=1e-12)
    np.testing.assert_allclose(m.end_site_positions()[1], [[1, 4, 4]], atol=1e-12)
    # World rotation of B in frame 0 is Rz(90) Rx(90) Ry(90).
    r = Rotation.from_quat(m.world_rotations[0, 2][[1, 2, 3, 0]]).as_matrix()
    expected = Rotation.from_euler("ZXY", [90, 90, 90], degrees=True).as_matrix()
    np.testing.assert_allclose(r, expected, atol=1e-12)


def _one_joint(channels: str, values: str, offset: str = "0 0 0", child: str = "0 1 0") -> Motion:
    n = len(channels.split())
    return parse_bvh(f"""HIERARCHY
ROOT R
{{
  OFFSET {offset}
  CHANNELS {n} {channels}
  End Site
  {{
    OFFSET {child}
  }}
}}
MOTION
Frames: 1
Frame Time: 0.0333333
{values}
""", units="m")


@pytest.mark.parametrize("order", ["ZYX", "ZXY", "XYZ", "YZX", "YXZ", "XZY"])
def test_rotation_channels_apply_in_listed_order(order: str) -> None:
    """``A B C`` rotation channels mean R = R_A * R_B * R_C (intrinsic), for every order."""
    rng = np.random.default_rng(abs(hash(order)) % 2**32)
    angles = rng.uniform(-180, 180, 3)
    m = _one_joint(" ".join(f"{a}rotation" for a in order), " ".join(f"{a:.6f}" for a in angles),
                   child="0.3 0.5 -0.7")
    expected = Rotation.from_euler(order, np.round(angles, 6), degrees=True).apply([0.3, 0.5, -0.7])
    np.testing.assert_allclose(m.end_site_positions()[0, 0], expected, atol=1e-12)


def test_ninety_degrees_about_each_axis() -> None:
    assert np.allclose(_one_joint("Zrotation", "90").end_site_positions()[0, 0], [-1, 0, 0])
    assert np.allclose(_one_joint("Xrotation", "90").end_site_positions()[0, 0], [0, 0, 1])
    assert np.allclose(_one_joint("Yrotation", "90", child="0 0 1").end_site_positions()[0, 0], [1, 0, 0])
    # Order matters: Rx(90) Ry(90) vs Ry(90) Rx(90) applied to +Z.
    xy = _one_joint("Xrotation Yrotation", "90 90", child="0 0 1").end_site_positions()[0, 0]
    yx = _one_joint("Yrotation Xrotation", "90 90", child="0 0 1").end_site_positions()[0, 0]
    np.testing.assert_allclose(xy, [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(yx, [0, -1, 0], atol=1e-12)


def test_position_channels_replace_the_offset_on_any_joint_and_partially() -> None:
    text = """HIERARCHY
ROOT R
{
  OFFSET 100 100 100
  CHANNELS 3 Zrotation Xposition Yrotation
  JOINT C
  {
    OFFSET 1 2 3
    CHANNELS 4 Yposition Xrotation Yrotation Zrotation
  }
}
MOTION
Frames: 1
Frame Time: 0.0333333
0 7 0 9 0 0 0
"""
    m = parse_bvh(text, units="m")
    # Root: X from the channel, Y and Z from OFFSET. C: Y from the channel.
    np.testing.assert_allclose(m.world_positions[0], [[7, 100, 100], [8, 109, 103]])
    assert m.skeleton.channels[0] == ("Zrotation", "Xposition", "Yrotation")


# ------------------------------------------------------------- format corners
def _chain_variant(text: str) -> Motion:
    return parse_bvh(text, units="m")


def test_tabs_crlf_scientific_notation_and_bom_parse_alike() -> None:
    ref = parse_bvh(_CHAIN, units="m")
    crlf = _CHAIN.replace("\n", "\r\n")
    spaces = _CHAIN.replace("\t", "    ")
    sci = _CHAIN.replace("1 2 3 90 0 0 0 0 90 0 90 0", "1e0 2.0E+00 30e-1 9.0e1 0 0 0 0 .9e2 0 90. -0e-5")
    bom = b"\xef\xbb\xbf" + _CHAIN.encode()
    mixed = _CHAIN.replace("Frames: 2", "Frames:\t2").replace("0 0 90 0 90 0", "0 0\t90  0 \t90 0  ")
    blank_lines = _CHAIN.replace("0.5\n", "0.5\n\n  \n") + "\n\n"
    cr_only = _CHAIN.replace("\n", "\r")
    for variant in (crlf, spaces, sci, bom, mixed, blank_lines, crlf.encode(), cr_only):
        m = _chain_variant(variant)
        np.testing.assert_allclose(m.world_positions, ref.world_positions, atol=1e-12)
        assert m.skeleton.names == ref.skeleton.names and m.fps == ref.fps


def test_scientific_notation_values_are_exact() -> None:
    m = _one_joint("Xposition Yposition Zposition", "1.5e-3 -2.25E+2 7e0")
    np.testing.assert_array_equal(m.translations[0, 0], [1.5e-3, -2.25e2, 7.0])


def test_six_channels_on_every_joint_and_mixed_orders() -> None:
    text = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Spine
  {
    OFFSET 0 10 0
    CHANNELS 6 Xposition Yposition Zposition Xrotation Yrotation Zrotation
    JOINT Head
    {
      OFFSET 0 10 0
      CHANNELS 6 Zrotation Yrotation Xrotation Xposition Yposition Zposition
      End Site
      {
        OFFSET 0 5 0
      }
    }
  }
}
MOTION
Frames: 1
Frame Time: 0.0333333
1 2 3 0 0 0 0 4 0 0 0 0 90 0 0 0 6 0
"""
    m = parse_bvh(text, units="m")
    # Spine at root + (0,4,0); Head at Spine + (0,6,0); Head turned 90 about Z: tip +Y -> -X.
    np.testing.assert_allclose(m.world_positions[0], [[1, 2, 3], [1, 6, 3], [1, 12, 3]], atol=1e-12)
    np.testing.assert_allclose(m.end_site_positions()[0], [[-4, 12, 3]], atol=1e-12)
    assert [m.skeleton.rotation_order(j) for j in range(3)] == ["zxy", "xyz", "zyx"]
    assert m.skeleton.has_position_channels.all()


def test_joint_with_zero_channels_and_rotation_only_joints() -> None:
    text = """HIERARCHY
ROOT Root
{
  OFFSET 0 0 0
  CHANNELS 3 Xposition Yposition Zposition
  JOINT Fixed
  {
    OFFSET 0 1 0
    CHANNELS 0
    JOINT Tip
    {
      OFFSET 1 0 0
      CHANNELS 1 Yrotation
      End Site
      {
        OFFSET 1 0 0
      }
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.0166667
0 0 0 0
0 0 0 90
"""
    m = parse_bvh(text, units="m")
    assert m.fps == 60.0
    assert m.skeleton.channels == (("Xposition", "Yposition", "Zposition"), (), ("Yrotation",))
    np.testing.assert_allclose(m.rotations[:, :2], np.broadcast_to([1.0, 0, 0, 0], (2, 2, 4)))
    np.testing.assert_allclose(m.end_site_positions()[:, 0], [[2, 1, 0], [1, 1, -1]], atol=1e-12)
    # Written back with the same layouts (one Y rotation, no channels), same positions.
    m2 = parse_bvh(format_bvh(m), units="m")
    assert m2.skeleton.channels == m.skeleton.channels
    np.testing.assert_allclose(m2.world_positions, m.world_positions, atol=1e-9)


def test_end_sites_several_and_on_inner_joints() -> None:
    text = """HIERARCHY
ROOT R
{
  OFFSET 0 0 0
  CHANNELS 3 Zrotation Yrotation Xrotation
  End Site
  {
    OFFSET 0 0 2
  }
  JOINT A
  {
    OFFSET 1 0 0
    CHANNELS 3 Zrotation Yrotation Xrotation
    End Site
    {
      OFFSET 1 0 0
    }
    End Site
    {
      OFFSET 0 1 0
    }
  }
}
MOTION
Frames: 1
Frame Time: 0.0333333
90 0 0 0 0 0
"""
    m = parse_bvh(text, units="m")
    np.testing.assert_array_equal(m.skeleton.end_site_parents, [0, 1, 1])
    np.testing.assert_allclose(m.end_site_positions()[0], [[0, 0, 2], [0, 2, 0], [-1, 1, 0]], atol=1e-12)
    m2 = parse_bvh(format_bvh(m), units="m")
    # The writer puts End Sites after a joint's children: same sites per joint, same order.
    for j in range(m.num_joints):
        a = m.end_site_positions()[:, m.skeleton.end_site_parents == j]
        b = m2.end_site_positions()[:, m2.skeleton.end_site_parents == j]
        np.testing.assert_allclose(b, a, atol=1e-9)


def test_units_auto_explicit_and_written_back() -> None:
    cm = _CHAIN.replace("OFFSET 0 1 0", "OFFSET 0 40 0").replace("1 2 3 90", "100 200 300 90")
    auto = parse_bvh(cm)
    assert auto.file_scale == 0.01
    np.testing.assert_allclose(auto.world_positions[0, 0], [1, 2, 3])
    np.testing.assert_allclose(auto.skeleton.offsets[1], [0, 0.4, 0])
    assert "OFFSET 0.000000 40.000000 0.000000" in format_bvh(auto)
    assert "OFFSET 0.000000 0.400000 0.000000" in format_bvh(auto, units="m")
    metres = parse_bvh(cm, units="m")
    assert metres.file_scale == 1.0
    np.testing.assert_allclose(metres.world_positions, auto.world_positions * 100, atol=1e-9)
    assert parse_bvh(cm, units=0.5).file_scale == 0.5
    with pytest.raises(ValueError, match="units"):
        parse_bvh(cm, units="furlong")
    with pytest.raises(ValueError, match="units"):
        parse_bvh(cm, units=-1.0)


def test_single_joint_units_ignore_rotation_angles() -> None:
    # Regression: with no bones to measure, the unit guess used every channel value,
    # so rotation angles of more than 15 degrees made a metre file "centimetres".
    m = _one_joint("Xposition Yposition Zposition Zrotation Yrotation Xrotation", "0.5 1 0.2 170 -120 90")
    assert m.file_scale == 1.0
    m = parse_bvh("HIERARCHY ROOT R { OFFSET 0 0 0 CHANNELS 4 Xposition Yposition Zposition Yrotation } "
                  "MOTION Frames: 1 Frame Time: 0.1\n150 90 20 170\n")
    assert m.file_scale == 0.01


def test_parse_accepts_str_bytes_and_bytearray() -> None:
    a = parse_bvh(_CHAIN, units="m")
    b = parse_bvh(bytearray(_CHAIN.encode()), units="m")
    np.testing.assert_array_equal(a.world_positions, b.world_positions)


def test_frame_time_rates_are_snapped() -> None:
    for text, fps in (("0.0333333", 30.0), ("0.033333", 30.0), ("0.0166667", 60.0), ("0.016667", 60.0),
                      ("0.008333", 120.0), ("0.00833333", 120.0), ("1", 1.0), ("0.04", 25.0), ("0.0123", 1 / 0.0123)):
        m = parse_bvh(_CHAIN.replace("Frame Time: 0.5", f"Frame Time: {text}"), units="m")
        assert m.fps == pytest.approx(fps, rel=1e-12), text
        if fps == round(fps):
            assert m.fps == fps
        m2 = parse_bvh(format_bvh(m), units="m")
        assert m2.fps == m.fps


# ------------------------------------------------------------------ writing
def _skeleton_out_of_file_order() -> Motion:
    # Joints numbered 0, 1, 2, 3 with 3 a child of 1: a file lists them 0, 1, 3, 2.
    skel = Skeleton(names=("r", "a", "b", "c"), parents=[-1, 0, 0, 1],
                    offsets=[[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]],
                    end_site_parents=[2, 3], end_site_offsets=[[0, 0.5, 0], [0, 0, 0.5]],
                    channels=(("Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation"),
                              ("Xrotation", "Yrotation", "Zrotation"), ("Yrotation", "Xrotation", "Zrotation"),
                              ("Zrotation", "Xrotation", "Yrotation")))
    rng = np.random.default_rng(0)
    rot = Rotation.random(3 * 4, random_state=1).as_quat()[:, [3, 0, 1, 2]].reshape(3, 4, 4)
    trans = np.broadcast_to(skel.offsets, (3, 4, 3)).copy()
    trans[:, 0] = rng.normal(size=(3, 3))
    return Motion(skel, rot, trans, fps=30.0, name="reordered")


def test_writer_lists_joints_depth_first_and_columns_follow() -> None:
    # Regression: the hierarchy was written depth first but the MOTION columns in joint
    # index order, so a skeleton not numbered depth first came back scrambled.
    m = _skeleton_out_of_file_order()
    m2 = parse_bvh(format_bvh(m), units="m")
    assert m2.skeleton.names == ("r", "a", "c", "b")
    idx = [m.skeleton.index(n) for n in m2.skeleton.names]
    assert m2.skeleton.channels == tuple(m.skeleton.channels[i] for i in idx)
    # Metres written with 6 decimals: within a micrometre.
    np.testing.assert_allclose(m2.world_positions, m.world_positions[:, idx], atol=2e-6)
    es1 = {m.skeleton.names[p]: m.end_site_positions()[:, e] for e, p in enumerate(m.skeleton.end_site_parents)}
    es2 = {m2.skeleton.names[p]: m2.end_site_positions()[:, e] for e, p in enumerate(m2.skeleton.end_site_parents)}
    assert es1.keys() == es2.keys()
    for k in es1:
        np.testing.assert_allclose(es2[k], es1[k], atol=2e-6)


def test_writer_refuses_motion_it_cannot_represent(tmp_path: Path) -> None:
    m = _skeleton_out_of_file_order()
    moved = m.translations.copy()
    moved[:, 2, 1] += 0.3  # joint 'b' translated but has no position channels
    with pytest.raises(BVHError, match=r"'b'.*Yposition"):
        save_bvh(m.with_data(m.rotations, moved), tmp_path / "x.bvh")
    assert list(tmp_path.iterdir()) == []
    skel = Skeleton(names=("r", "a"), parents=[-1, 0], offsets=[[0, 0, 0], [1, 0, 0]],
                    channels=(("Xposition", "Yposition", "Zposition"), ()))
    rot = np.zeros((1, 2, 4))
    rot[..., 0] = 1
    rot[0, 1] = [np.cos(0.5), np.sin(0.5), 0, 0]
    with pytest.raises(BVHError, match=r"'a' is rotated but has no rotation channels"):
        format_bvh(Motion(skel, rot, np.zeros((1, 2, 3)) + [[0, 0, 0], [1, 0, 0]], fps=30))
    bad = Skeleton(names=("my root", "a"), parents=[-1, 0], offsets=np.zeros((2, 3)))
    with pytest.raises(SkeletonError, match="whitespace"):
        format_bvh(Motion(bad, np.tile([1.0, 0, 0, 0], (1, 2, 1)), np.zeros((1, 2, 3)), fps=30))


def test_two_axis_joint_keeps_its_layout_beyond_90_degrees() -> None:
    # Rz(a) Ry(b) with |b| > 90: SciPy's ZYX decomposition returns (a+180, 180-b, 180);
    # the writer picks the equivalent solution with a zero third angle.
    m = _one_joint("Zrotation Yrotation", "30 150", child="0.2 0.3 0.4")
    text = format_bvh(m)
    assert "CHANNELS 2 Zrotation Yrotation" in text
    m2 = parse_bvh(text, units="m")
    np.testing.assert_allclose(m2.end_site_positions(), m.end_site_positions(), atol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(m2.rotations * m.rotations, axis=-1)), 1.0, atol=1e-12)


def test_deep_chain_writes_without_recursion() -> None:
    J = 3000
    skel = Skeleton(names=tuple(f"j{i}" for i in range(J)), parents=np.arange(-1, J - 1),
                    offsets=np.tile([0.0, 0.001, 0.0], (J, 1)))
    m = Motion(skel, np.tile([1.0, 0, 0, 0], (1, J, 1)), np.broadcast_to(skel.offsets, (1, J, 3)).copy(), fps=30)
    m2 = parse_bvh(format_bvh(m), units="m")
    assert m2.num_joints == J
    np.testing.assert_allclose(m2.world_positions[0, -1], [0, 0.001 * J, 0], atol=1e-9)


def test_save_bvh_is_atomic_when_writing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = parse_bvh(_CHAIN, units="m")
    target = tmp_path / "out.bvh"
    real_atomic_write = bvh_mod.atomic_write

    class FailingFile:
        """Passes writes to the real temporary file, then fails: after writing ``fraction``
        of the text (a full disk), or after all of it (an I/O error before the rename)."""

        def __init__(self, f, fraction: float):
            self.f, self.fraction = f, fraction

        def write(self, text):
            self.f.write(text[: int(len(text) * self.fraction)])
            self.f.flush()
            raise OSError(28 if self.fraction < 1 else 5, "No space left on device" if self.fraction < 1
                          else "Input/output error")

    def failing(fraction: float):
        @contextmanager
        def atomic_write(path, *args, **kwargs):
            with real_atomic_write(path, *args, **kwargs) as f:
                yield FailingFile(f, fraction)
        return atomic_write

    monkeypatch.setattr(bvh_mod, "atomic_write", failing(0.5))
    with pytest.raises(OSError, match="No space"):
        save_bvh(m, target)
    assert list(tmp_path.iterdir()) == []  # neither a partial file nor the temporary file

    # An existing file is left untouched when the write fails, late or early.
    monkeypatch.undo()
    save_bvh(m, target)
    before = target.read_bytes()
    m_other = m.with_data(m.rotations, m.translations + [[1.0, 0, 0], [0, 0, 0], [0, 0, 0]])
    for fraction, message in ((1.0, "Input/output"), (0.3, "No space")):
        monkeypatch.setattr(bvh_mod, "atomic_write", failing(fraction))
        with pytest.raises(OSError, match=message):
            save_bvh(m_other, target)
        monkeypatch.undo()
        assert target.read_bytes() == before
        assert [p.name for p in tmp_path.iterdir()] == ["out.bvh"]
    # A motion that cannot be written fails before any file is created.
    with pytest.raises(BVHError):
        save_bvh(m.with_data(m.rotations, m.translations + [[0, 0, 0], [0, 0, 0], [0, 0.5, 0]]), tmp_path / "y.bvh")
    assert [p.name for p in tmp_path.iterdir()] == ["out.bvh"]
    # And a successful save replaces the file.
    save_bvh(m_other, target)
    np.testing.assert_allclose(load_bvh(target, units="m").world_positions, m_other.world_positions, atol=1e-9)


def test_load_bvh_path_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_bvh(tmp_path / "missing.bvh")
    with pytest.raises(IsADirectoryError):
        load_bvh(tmp_path)


# ------------------------------------------------- comparison with upc-pymotion
# upc-pymotion 0.3.4 (`pymotion.io.bvh.BVH`) as a reference reader. What it does:
# * it keeps position channels only on joints with exactly 6 channels and assumes they
#   come first (``CHANNELS 6 Xposition Yposition Zposition <3 rotations>``); any other
#   count raises "Unknown number of channels" (so a joint with 0, 1, 2, 4 or 5 channels,
#   or rotations listed before positions, cannot be read);
# * ``get_data()`` returns ``pos [F, J, 3]``: the OFFSETs, overwritten by the position
#   channels where a joint has them, and ``parents`` with ``parents[0] = 0`` (the root
#   is its own parent; ``fk`` skips joint 0, so this is harmless there);
# * the documented call ``fk(rots, pos[:, 0], offsets, parents)`` uses the static OFFSETs
#   for every joint but the root, i.e. it drops the animated translation of non-root
#   joints: Hips under LAFAN1-60fps' SimulationBone (~1 m off), every joint of
#   Bandai-Namco (up to ~11 m off) and GANimator's Elephant (~3 cm off). Passing ``pos``
#   as the offsets (as below) honours them.
# With that call, pymotion reads every file of the data folder the same as we do (checked
# over all 488 files when this test was written: at most 7e-8 m apart), so no file is
# skipped here; its limits only show on hand-made layouts like the ones above (0-channel
# or rotation-first joints), which are not part of this comparison.
_PYMOTION_FILES = [
    "lafan1-60fps/walk3_subject1_walk2.bvh",
    "lafan1-60fps/ground2_subject3_turn.bvh",
    "lafan1/dance2_subject1_crop.bvh",
    "bandai-namco/dataset-1/dataset-1_walk_normal_001.bvh",
    "bandai-namco/dataset-1/dataset-1_kick_normal_001.bvh",
    "bandai-namco/dataset-2/dataset-2_run_active_001.bvh",
    "genmm-examples/Elephant_idle1.bvh",
    "quadruped-dog/D1_047z_KAN01_004.bvh",
]


@pytest.mark.data
@pytest.mark.parametrize("rel", _PYMOTION_FILES)
def test_world_positions_match_upc_pymotion(rel: str) -> None:
    pymotion_bvh = pytest.importorskip("pymotion.io.bvh")
    pymotion_skeleton = pytest.importorskip("pymotion.ops.skeleton")
    path = DATA / rel
    if not path.is_file():
        pytest.skip(f"{rel} not found under {DATA}; set MOTIONMATCH_DATA to the shared data folder")
    m = load_bvh(path)
    ref = pymotion_bvh.BVH()
    ref.load(str(path))
    rots, pos, parents, offsets, end_sites, end_site_parents = ref.get_data()
    assert parents[0] == 0  # pymotion's root convention
    world, _ = pymotion_skeleton.fk(rots, pos[:, 0], pos, parents)
    assert tuple(ref.data["names"]) == m.skeleton.names
    np.testing.assert_array_equal(parents[1:], m.skeleton.parents[1:])
    np.testing.assert_allclose(m.world_positions, world * m.file_scale, atol=1e-6, rtol=0)
    np.testing.assert_allclose(m.skeleton.offsets, offsets * m.file_scale, atol=1e-12)
    np.testing.assert_array_equal(m.skeleton.end_site_parents, end_site_parents)
    np.testing.assert_allclose(m.skeleton.end_site_offsets, end_sites * m.file_scale, atol=1e-12)
    np.testing.assert_allclose(1.0 / m.fps, ref.data["frame_time"], rtol=1e-4)
