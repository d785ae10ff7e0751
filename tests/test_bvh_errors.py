"""Malformed BVH files: one exception type (``BVHError``) whose message names the file,
the line and what was expected, for every family of failure."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from motionmatch.anim.bvh import load_bvh, parse_bvh
from motionmatch.errors import BVHError, MotionMatchError

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ["MOTIONMATCH_DATA"]) if os.environ.get("MOTIONMATCH_DATA") else REPO.parent / "shared" / "data"
_SKIP = f"motion data not found at {DATA}; set MOTIONMATCH_DATA to the shared data folder"

# Line numbers of the base file, for the assertions below.
GOOD = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
  JOINT Spine
  {
    OFFSET 0 10 0
    CHANNELS 3 Zrotation Yrotation Xrotation
    End Site
    {
      OFFSET 0 10 0
    }
  }
}
MOTION
Frames: 3
Frame Time: 0.0333333
0 90 0 0 0 0 0 0 0
1 90 0 0 0 0 0 0 0
2 90 0 0 0 0 0 0 0
"""
LINE = {text: i + 1 for i, text in enumerate(GOOD.splitlines())}
FIRST_FRAME = LINE["0 90 0 0 0 0 0 0 0"]  # 19


def _error(tmp_path: Path, text: str | bytes, name: str = "bad.bvh") -> BVHError:
    """Load ``text`` from a file and return the BVHError, checking its message names the
    file, the line (when there is one) and what was expected."""
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(BVHError) as info:
        load_bvh(path)
    e = info.value
    msg = str(e)
    assert msg.startswith(str(path)), msg
    assert e.path == str(path)
    assert e.line is not None and msg.startswith(f"{path}, line {e.line}: "), msg
    assert "expected" in msg, msg
    return e


def test_good_base_file_loads() -> None:
    m = parse_bvh(GOOD)
    assert m.num_frames == 3 and m.skeleton.names == ("Hips", "Spine")


def test_bvh_error_is_one_type_in_the_package_hierarchy() -> None:
    assert issubclass(BVHError, MotionMatchError) and issubclass(BVHError, ValueError)
    with pytest.raises(BVHError) as info:
        parse_bvh("nonsense")
    assert str(info.value).startswith("<string>, line 1: ")


# ---------------------------------------------------------------- header
def test_missing_hierarchy(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("HIERARCHY\n", ""))
    assert e.line == 1 and "expected 'HIERARCHY'" in str(e) and "'ROOT'" in str(e)


def test_missing_motion(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("MOTION\n", ""))
    assert e.line == LINE["MOTION"]  # where 'Frames:' now is
    assert "expected 'MOTION'" in str(e) and "'Frames:'" in str(e)


def test_missing_motion_block_entirely(tmp_path: Path) -> None:
    text = GOOD.split("MOTION")[0]
    e = _error(tmp_path, text)
    assert "expected 'MOTION'" in str(e) and "truncated" in str(e)
    assert e.line == LINE["}"]  # the last line of the hierarchy


@pytest.mark.parametrize("frames, line_of", [("Frames: 0", "Frames: 3"), ("Frames: -4", "Frames: 3")])
def test_zero_or_negative_frames(tmp_path: Path, frames: str, line_of: str) -> None:
    text = GOOD.replace("Frames: 3", frames)
    e = _error(tmp_path, text.split("0 90")[0])  # also without any frame lines
    assert e.line == LINE[line_of] and "expected at least one frame" in str(e)


@pytest.mark.parametrize("count", ["three", "3.5", "", "1e3", "1_0", "0x3"])
def test_bad_frame_count(tmp_path: Path, count: str) -> None:
    e = _error(tmp_path, GOOD.replace("Frames: 3", f"Frames: {count}"))
    assert e.line in (LINE["Frames: 3"], LINE["Frame Time: 0.0333333"])
    assert "frame count" in str(e) or "Frames" in str(e)


@pytest.mark.parametrize("value", ["0", "-0.03", "nan", "inf", "abc", "1e-400", "3_3", "1e-320"])
def test_bad_frame_time(tmp_path: Path, value: str) -> None:
    e = _error(tmp_path, GOOD.replace("0.0333333", value))
    assert e.line == LINE["Frame Time: 0.0333333"] and "frame time" in str(e)


def test_missing_frame_time_line(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("Frame Time: 0.0333333\n", ""))
    assert e.line == FIRST_FRAME - 1 and "expected 'Frame Time: <seconds>'" in str(e)


def test_junk_after_frame_time(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("0.0333333", "0.0333333 oops"))
    assert e.line == LINE["Frame Time: 0.0333333"] and "'oops'" in str(e)


# --------------------------------------------------------------- hierarchy
@pytest.mark.parametrize("name", ["Wrotation", "Xrot", "Rotation", "JOINTS"])
def test_unknown_channel_name(tmp_path: Path, name: str) -> None:
    e = _error(tmp_path, GOOD.replace("CHANNELS 3 Zrotation", f"CHANNELS 3 {name}"))
    assert e.line == LINE["    CHANNELS 3 Zrotation Yrotation Xrotation"]
    assert f"unknown channel name '{name}'" in str(e) and "Xposition" in str(e)


def test_channel_names_are_case_insensitive() -> None:
    m = parse_bvh(GOOD.replace("Zrotation Yrotation Xrotation\n    End", "ZROTATION yrotation xRotation\n    End"))
    assert m.skeleton.channels[1] == ("Zrotation", "Yrotation", "Xrotation")


def test_channel_listed_twice(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("CHANNELS 3 Zrotation Yrotation Xrotation", "CHANNELS 3 Zrotation Yrotation Zrotation"))
    assert e.line == LINE["    CHANNELS 3 Zrotation Yrotation Xrotation"] and "listed twice" in str(e)


def test_duplicate_joint_names(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("JOINT Spine", "JOINT Hips"))
    assert e.line == LINE["  JOINT Spine"] and "duplicate joint name 'Hips'" in str(e)
    assert f"line {LINE['ROOT Hips']}" in e.reason  # where the first one is


@pytest.mark.parametrize("count", ["7", "-1", "three", "6.0", "0_3"])
def test_bad_channel_count(tmp_path: Path, count: str) -> None:
    e = _error(tmp_path, GOOD.replace("CHANNELS 3", f"CHANNELS {count}"))
    assert e.line == LINE["    CHANNELS 3 Zrotation Yrotation Xrotation"]
    assert "channel" in str(e)


def test_channel_count_larger_than_the_list(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("CHANNELS 3 Zrotation", "CHANNELS 4 Zrotation"))
    assert e.line == LINE["    End Site"] and "lists only 3 channel names before 'End'" in str(e)


def test_channel_count_smaller_than_the_list(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("CHANNELS 3 Zrotation", "CHANNELS 2 Zrotation"))
    assert e.line == LINE["    CHANNELS 3 Zrotation Yrotation Xrotation"]
    assert "'Xrotation' after the CHANNELS list" in str(e) and "count is 2" in str(e)


def test_channels_given_twice(tmp_path: Path) -> None:
    text = GOOD.replace("    CHANNELS 3 Zrotation Yrotation Xrotation\n",
                        "    CHANNELS 3 Zrotation Yrotation Xrotation\n    CHANNELS 1 Zrotation\n")
    e = _error(tmp_path, text)
    assert e.line == LINE["    CHANNELS 3 Zrotation Yrotation Xrotation"] + 1 and "second CHANNELS" in str(e)


def test_channel_count_mismatch_with_frame_width(tmp_path: Path) -> None:
    # The CHANNELS counts sum to 8 but the frames hold 9 values.
    e = _error(tmp_path, GOOD.replace("CHANNELS 3 Zrotation Yrotation Xrotation", "CHANNELS 2 Zrotation Yrotation"))
    assert e.line == FIRST_FRAME and "9 found, 8 expected" in str(e)


def test_missing_opening_brace(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("  JOINT Spine\n  {\n", "  JOINT Spine\n"))
    assert e.line == LINE["  JOINT Spine"] + 1 and "expected '{' after JOINT Spine" in str(e)


def test_missing_closing_brace(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("    }\n  }\n}\n", "    }\n  }\n"))
    assert e.line == LINE["MOTION"] - 1  # one line fewer above MOTION
    assert "expected '}' to close joint 'Hips' (opened on line 3)" in str(e)


def test_extra_closing_brace(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("}\nMOTION", "}\n}\nMOTION"))
    assert e.line == LINE["MOTION"] and "expected 'MOTION'" in str(e) and "'}'" in str(e)


def test_missing_joint_name(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("JOINT Spine", "JOINT"))
    assert e.line == LINE["  JOINT Spine"] + 1 and "expected a joint name after JOINT" in str(e)


def test_end_site_misuse(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("End Site", "End Sight"))
    assert e.line == LINE["    End Site"] and "expected 'End Site'" in str(e)
    e = _error(tmp_path, GOOD.replace("      OFFSET 0 10 0\n    }", "      OFFSET 0 10 0\n      CHANNELS 1 Xrotation\n    }"))
    assert e.line == LINE["      OFFSET 0 10 0"] + 1 and "End Site cannot have CHANNELS" in str(e)
    e = _error(tmp_path, GOOD.replace("      OFFSET 0 10 0\n    }", "      OFFSET 0 10 0\n      JOINT X\n    }"))
    assert e.line == LINE["      OFFSET 0 10 0"] + 1 and "End Site cannot have child joints" in str(e)


def test_second_root(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("JOINT Spine", "ROOT Spine"))
    assert e.line == LINE["  JOINT Spine"] and "second ROOT" in str(e)


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "1e999", "ten", "1.2.3", "1_0", "infinity"])
def test_bad_offset(tmp_path: Path, bad: str) -> None:
    e = _error(tmp_path, GOOD.replace("OFFSET 0 10 0\n    CHANNELS", f"OFFSET 0 {bad} 0\n    CHANNELS"))
    assert e.line == LINE["    OFFSET 0 10 0"] and "OFFSET" in str(e)


def test_short_offset(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("OFFSET 0 10 0\n    CHANNELS", "OFFSET 0 10\n    CHANNELS"))
    assert e.line == LINE["    CHANNELS 3 Zrotation Yrotation Xrotation"]
    assert "expected a number for OFFSET, found 'CHANNELS'" in str(e)


def test_unexpected_keyword(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("    OFFSET 0 10 0\n    CHANNELS", "    OFSET 0 10 0\n    CHANNELS"))
    assert e.line == LINE["    OFFSET 0 10 0"] and "unexpected 'OFSET'" in str(e)


# ------------------------------------------------------------------ frames
def test_frame_with_too_few_values(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("1 90 0 0 0 0 0 0 0", "1 90 0 0 0 0 0 0"))
    assert e.line == FIRST_FRAME + 1 and "frame 2 has too few values: 8 found, 9 expected" in str(e)


def test_frame_with_too_many_values(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("2 90 0 0 0 0 0 0 0", "2 90 0 0 0 0 0 0 0 0"))
    assert e.line == FIRST_FRAME + 2 and "frame 3 has too many values: 10 found, 9 expected" in str(e)


@pytest.mark.parametrize("token", ["abc", "1.2.3", "--1", "1e", "0x10", "1,5", "#", "+", ".", "e5", "\xe9"])
def test_non_numeric_value(tmp_path: Path, token: str) -> None:
    e = _error(tmp_path, GOOD.replace("1 90 0 0 0 0", f"1 90 0 {token} 0 0"))
    assert e.line == FIRST_FRAME + 1 and "expected a number" in str(e)
    assert repr(token) in str(e)


@pytest.mark.parametrize("token", ["nan", "NaN", "-nan", "inf", "-inf", "+Infinity", "1e400", "-2E+999"])
def test_non_finite_value(tmp_path: Path, token: str) -> None:
    e = _error(tmp_path, GOOD.replace("2 90 0 0 0 0 0 0 0", f"2 90 0 0 0 {token} 0 0 0"))
    assert e.line == FIRST_FRAME + 2 and "non-finite" in str(e) and repr(token) in str(e)


def test_more_frame_lines_than_declared(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD + "3 90 0 0 0 0 0 0 0\n")
    assert e.line == FIRST_FRAME + 3 and "Frames: 3" in str(e)


def test_fewer_frame_lines_than_declared(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("Frames: 3", "Frames: 5"))
    assert e.line == FIRST_FRAME + 3 and "declares 5 frames but only 3" in str(e)


def test_huge_frame_count_does_not_allocate(tmp_path: Path) -> None:
    e = _error(tmp_path, GOOD.replace("Frames: 3", "Frames: 900000000000000000"))
    assert "joint-frames" in str(e) and "split the file" in str(e)
    e = _error(tmp_path, GOOD.replace("Frames: 3", "Frames: 200"))  # within the limits: the lines are counted
    assert "only 3 were found" in str(e)
    e = _error(tmp_path, GOOD.replace("Frames: 3", "Frames: " + "9" * 5000))  # no int() of 5,000 digits
    assert "joint-frames" in str(e)


def test_a_deep_or_wide_skeleton_is_refused_before_it_allocates(tmp_path: Path) -> None:
    from motionmatch.anim.bvh import MAX_BVH_JOINTS

    deep = "".join(f"JOINT j{i}\n{{\nOFFSET 0 1 0\nCHANNELS 0\n" for i in range(MAX_BVH_JOINTS))
    e = _error(tmp_path, "HIERARCHY\nROOT r\n{\nOFFSET 0 0 0\nCHANNELS 1 Yrotation\n" + deep)
    assert f"more than {MAX_BVH_JOINTS} joints" in str(e)
    e = _error(tmp_path, GOOD.replace("CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation",
                                      "CHANNELS 0").replace("CHANNELS 3 Zrotation Yrotation Xrotation", "CHANNELS 0")
               .replace("Frames: 3", "Frames: 100000"))
    assert "a frame takes at least its line" in str(e)


def test_no_channels_but_values(tmp_path: Path) -> None:
    text = GOOD.replace("CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation", "CHANNELS 0")
    text = text.replace("CHANNELS 3 Zrotation Yrotation Xrotation", "CHANNELS 0")
    e = _error(tmp_path, text)
    assert e.line == FIRST_FRAME and "no channels" in str(e)
    m = parse_bvh(text.split("0 90")[0], units="m")  # no values at all: fine
    assert m.num_frames == 3 and np.allclose(m.world_positions[:, 1], [0, 10, 0])


# --------------------------------------------------------------- truncation
def _last_content_line(text: bytes) -> int:
    return text.rstrip().count(b"\n") + 1


def test_truncated_at_every_byte_of_the_hierarchy(tmp_path: Path) -> None:
    raw = GOOD.encode()
    end = raw.index(b"0 90")  # the whole header, up to the first frame
    for cut in range(end):
        e = _error(tmp_path, raw[:cut])
        # The error is at the end: the line where the text stops.
        assert e.line == _last_content_line(raw[:cut]) or (
            # a complete header without frames: the first frame is missing
            e.line == raw[:cut].count(b"\n") + 1 and "only 0 were found" in str(e)
        ), (cut, str(e))


def test_truncated_at_every_byte_of_the_motion_block(tmp_path: Path) -> None:
    raw = GOOD.encode()
    start = raw.index(b"0 90")
    last_line_start = raw.rindex(b"\n", 0, len(raw) - 1) + 1
    for cut in range(start, last_line_start + len("2 90 0 0 0 0 0 0")):  # the last frame always short
        e = _error(tmp_path, raw[:cut])
        ends = raw[:cut].count(b"\n") + 1
        assert e.line in (ends, ends + 1), (cut, str(e))
        assert "too few values" in str(e) or "were found" in str(e)


def _real_files() -> list[Path]:
    picks = ["lafan1-60fps/ground2_subject3_turn.bvh", "bandai-namco/dataset-1/dataset-1_kick_normal_001.bvh",
             "genmm-examples/Joe_Baseball-Milling-Idle-edited-keyframes.bvh", "lafan1/walk1_subject1_stop.bvh"]
    return [DATA / p for p in picks if (DATA / p).is_file()]


@pytest.mark.data
def test_real_files_truncated_at_random_positions(tmp_path: Path) -> None:
    files = _real_files()
    if not files:
        pytest.skip(_SKIP)
    rng = np.random.default_rng(20240611)
    for f in files:
        raw = f.read_bytes()
        header_end = raw.index(b"MOTION")
        last_line_start = raw.rstrip().rindex(b"\n") + 1
        cuts = list(rng.integers(0, header_end, 25)) + list(rng.integers(header_end, last_line_start, 25))
        for cut in map(int, cuts):
            e = _error(tmp_path, raw[:cut], name=f.name)
            ends = raw[:cut].count(b"\n") + 1
            if cut < header_end:
                assert e.line == _last_content_line(raw[:cut]), (f.name, cut, str(e))
            else:
                assert e.line in (_last_content_line(raw[:cut]), ends, ends + 1), (f.name, cut, str(e))
            assert re.search(r"truncated|too few|ends here|unknown channel|expected", str(e)), str(e)


# --------------------------------------------------------------- odd bytes
def test_binary_garbage_and_empty_files(tmp_path: Path) -> None:
    e = _error(tmp_path, b"")
    assert e.line == 1 and "expected 'HIERARCHY'" in str(e)
    e = _error(tmp_path, bytes(range(256)) * 4)
    assert e.line == 1
    e = _error(tmp_path, b"\xef\xbb\xbf")  # a BOM and nothing else
    assert e.line == 1


def test_non_utf8_joint_name_is_read_and_error_messages_still_decode(tmp_path: Path) -> None:
    m = parse_bvh(GOOD.encode().replace(b"Spine", b"Sp\xffine"))
    assert m.skeleton.names[1] == "Sp\ufffdine"
    e = _error(tmp_path, GOOD.encode().replace(b"Zrotation Yrotation Xrotation\n    End", b"Zrotation \xff Xrotation\n    End"))
    assert "unknown channel name" in str(e)
