"""Property tests for BVH reading and writing (hypothesis).

* random skeletons (random trees of 1-30 joints, random channel layouts with position
  channels on random joints, partial and full rotation sets in random orders, End Sites)
  and random motions survive write -> read;
* random text files are read as an independent reference (SciPy rotations) says;
* random corruptions of real files raise ``BVHError`` and nothing else, or load with
  the frame count their header declares.
"""

from __future__ import annotations

import os
import re
import string
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from motionmatch.anim import Motion, Skeleton
from motionmatch.anim.bvh import channels_to_local, format_bvh, load_bvh, parse_bvh, save_bvh
from motionmatch.errors import BVHError

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ["MOTIONMATCH_DATA"]) if os.environ.get("MOTIONMATCH_DATA") else REPO.parent / "shared" / "data"
_SKIP = f"motion data not found at {DATA}; set MOTIONMATCH_DATA to the shared data folder"

_SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}

# Names a BVH reader could confuse with keywords, mixed with ordinary ones.
_TRICKY_NAMES = ["End", "Site", "JOINT", "ROOT", "OFFSET", "CHANNELS", "MOTION", "HIERARCHY", "Frame",
                 "Time:", "Frames:", "Xrotation", "mixamorig:Hips", "joint_Root", "L.Hand-1", "0", "1e5"]
_NAME = st.one_of(st.from_regex(r"[A-Za-z_][A-Za-z0-9_:.\-]{0,10}", fullmatch=True), st.sampled_from(_TRICKY_NAMES))


@st.composite
def _layouts(draw, max_joints: int = 30):
    """A random tree (``parents[j] < j``, not necessarily depth-first), names and channels."""
    J = draw(st.integers(1, max_joints))
    parents = [-1] + [draw(st.integers(0, j - 1)) for j in range(1, J)]
    names = draw(st.lists(_NAME, min_size=J, max_size=J, unique=True))
    channels = []
    for _ in range(J):
        n_pos = draw(st.sampled_from([0, 0, 0, 1, 2, 3, 3]))
        n_rot = draw(st.sampled_from([0, 1, 2, 3, 3, 3, 3]))
        pos = [f"{a}position" for a in draw(st.permutations("XYZ"))[:n_pos]]
        rot = [f"{a}rotation" for a in draw(st.permutations("XYZ"))[:n_rot]]
        channels.append(tuple(draw(st.permutations(pos + rot))))  # rotations may come first
    children = [j for j in range(J) if j not in parents]
    n_sites = [draw(st.integers(0, 2)) if j in children else draw(st.sampled_from([0, 0, 0, 1])) for j in range(J)]
    site_parents = [j for j in range(J) for _ in range(n_sites[j])]
    return parents, names, tuple(channels), site_parents


_COORD = st.integers(-10_000, 10_000).map(lambda v: v / 100.0)   # file units, on a grid printed exactly
_ANGLE = st.integers(-18_000, 18_000).map(lambda v: v / 100.0)   # degrees


@st.composite
def _motions(draw):
    parents, names, channels, site_parents = draw(_layouts())
    J = len(parents)
    scale = draw(st.sampled_from([1.0, 0.01, 0.001, 0.0254]))
    F = draw(st.integers(1, 4))
    offsets = np.array(draw(st.lists(st.tuples(_COORD, _COORD, _COORD), min_size=J, max_size=J)))
    sites = np.array(draw(st.lists(st.tuples(_COORD, _COORD, _COORD), min_size=len(site_parents),
                                   max_size=len(site_parents)))).reshape(-1, 3)
    skel = Skeleton(names=tuple(names), parents=parents, offsets=offsets * scale, end_site_parents=site_parents,
                    end_site_offsets=sites * scale, channels=channels)
    values = np.array([[draw(_ANGLE if c.endswith("rotation") else _COORD) for js in channels for c in js]
                       for _ in range(F)]).reshape(F, -1)
    rot, trans = channels_to_local(skel, values, scale)
    fps = draw(st.sampled_from([24.0, 30.0, 60.0, 120.0, 1.0]))
    return Motion(skel, rot, trans, fps=fps, name="random", file_scale=scale)


def _assert_same_motion(m2: Motion, m: Motion) -> None:
    """``m2`` (read back) equals ``m`` up to joint numbering: world positions within 1e-6
    relative to the motion's size, rotations, End Sites, channels, rate, units."""
    idx = [m.skeleton.index(n) for n in m2.skeleton.names]
    assert sorted(idx) == list(range(m.num_joints))
    assert [m2.skeleton.names[p] for p in m2.skeleton.parents[1:]] == \
        [m.skeleton.names[m.skeleton.parents[i]] for i in idx[1:]]
    assert m2.skeleton.channels == tuple(m.skeleton.channels[i] for i in idx)
    assert m2.num_frames == m.num_frames and m2.fps == m.fps and m2.file_scale == m.file_scale
    wp, wp2 = m.world_positions[:, idx], m2.world_positions
    size = max(float(np.abs(wp).max()), float(np.abs(m.end_site_positions()).max(initial=0.0)), m.file_scale)
    np.testing.assert_allclose(wp2, wp, rtol=1e-6, atol=1e-6 * size)
    dots = np.abs(np.sum(m2.rotations * m.rotations[:, idx], axis=-1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-9)
    for j2, j in enumerate(idx):  # the End Sites of each joint, in order
        a = m.end_site_positions()[:, m.skeleton.end_site_parents == j]
        b = m2.end_site_positions()[:, m2.skeleton.end_site_parents == j2]
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6 * size)


@settings(max_examples=150, **_SETTINGS)
@given(_motions())
def test_random_skeletons_and_motions_survive_write_read(m: Motion) -> None:
    text = format_bvh(m)
    m2 = parse_bvh(text, units=m.file_scale)
    _assert_same_motion(m2, m)
    assert format_bvh(m2) == text or m2.skeleton.names != m.skeleton.names  # a fixed point once in file order


@settings(max_examples=10, **_SETTINGS)
@given(_motions())
def test_random_motions_survive_save_load(m: Motion) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = save_bvh(m, Path(tmp) / "random.bvh")
        m2 = load_bvh(path, units=m.file_scale)
        assert os.listdir(tmp) == ["random.bvh"]
    _assert_same_motion(m2, m)


# ------------------------------------------------- reading against a reference
def _reference_world(parents, offsets, channels, values, site_parents, sites):
    """World positions from channel values with SciPy rotations (independent of the package)."""
    F, J = values.shape[0], len(parents)
    R = [None] * J
    P = np.zeros((F, J, 3))
    col = 0
    for j in range(J):
        t = np.tile(offsets[j], (F, 1)).astype(float)
        axes, rot_cols = "", []
        for c in channels[j]:
            if c.endswith("position"):
                t[:, "XYZ".index(c[0])] = values[:, col]
            else:
                axes += c[0]
                rot_cols.append(col)
            col += 1
        local = Rotation.from_euler(axes, values[:, rot_cols], degrees=True) if axes else Rotation.identity(F)
        if parents[j] < 0:
            R[j], P[:, j] = local, t
        else:
            R[j] = R[parents[j]] * local
            P[:, j] = P[:, parents[j]] + R[parents[j]].apply(t)
    E = np.zeros((F, len(site_parents), 3))
    for e, p in enumerate(site_parents):
        E[:, e] = P[:, p] + R[p].apply(sites[e])
    return P, E


def _fmt_number(v: float, style: int) -> str:
    v = float(v)
    return [f"{v:.6f}", f"{v:.10e}", f"{v:g}", repr(v), f"{v:.4E}"][style]


@st.composite
def _files(draw):
    """A random BVH text in file order, its values as written, and what they mean."""
    parents, names, channels, site_parents = draw(_layouts(max_joints=12))
    J = len(parents)
    # Relabel depth first: a file lists joints in that order.
    children = [[c for c in range(J) if parents[c] == j] for j in range(J)]
    order, stack = [], [0]
    while stack:
        j = stack.pop()
        order.append(j)
        stack.extend(reversed(children[j]))
    new = {j: i for i, j in enumerate(order)}
    parents = [-1] + [new[parents[j]] for j in order[1:]]
    names = [names[j] for j in order]
    channels = tuple(channels[j] for j in order)
    site_parents = sorted(new[p] for p in site_parents)
    floats = st.floats(-500, 500, allow_nan=False, allow_infinity=False)
    offsets = np.array(draw(st.lists(st.tuples(floats, floats, floats), min_size=J, max_size=J)))
    sites = np.array(draw(st.lists(st.tuples(floats, floats, floats), min_size=len(site_parents),
                                   max_size=len(site_parents)))).reshape(-1, 3)
    F = draw(st.integers(1, 3))
    n_ch = sum(map(len, channels))
    raw_values = np.array(draw(st.lists(floats, min_size=F * n_ch, max_size=F * n_ch))).reshape(F, n_ch)
    style = draw(st.integers(0, 4))
    ws = draw(st.sampled_from([" ", "\t", "  ", " \t "]))
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    # What the file says is what the reference must use: parse back the printed numbers.
    text_values = [[_fmt_number(v, style) for v in row] for row in raw_values]
    values = np.array([[float(t) for t in row] for row in text_values]).reshape(F, n_ch)
    off_text = [[_fmt_number(v, style) for v in row] for row in offsets]
    offsets = np.array([[float(t) for t in row] for row in off_text]).reshape(J, 3)
    site_text = [[_fmt_number(v, style) for v in row] for row in sites]
    sites = np.array([[float(t) for t in row] for row in site_text]).reshape(-1, 3)
    lines = ["HIERARCHY"]
    depth = [0] * J
    open_: list[int] = []
    emitted: list[int] = []  # End Sites in file order (after their joint's children)

    def close(k: int) -> None:
        for e in [e for e, p in enumerate(site_parents) if p == k]:
            emitted.append(e)
            lines.extend([ws * (depth[k] + 1) + "End Site", ws * (depth[k] + 1) + "{",
                          ws * (depth[k] + 2) + "OFFSET " + ws.join(site_text[e]), ws * (depth[k] + 1) + "}"])
        lines.append(ws * depth[k] + "}")

    for j in range(J):
        if j:
            depth[j] = depth[parents[j]] + 1
        while open_ and open_[-1] != parents[j]:  # close finished subtrees
            close(open_.pop())
        ind = ws * depth[j]
        lines += [ind + ("ROOT " if j == 0 else "JOINT ") + names[j], ind + "{",
                  ind + ws + "OFFSET " + ws.join(off_text[j]),
                  ind + ws + f"CHANNELS {len(channels[j])}" + "".join(ws + c for c in channels[j])]
        open_.append(j)
    while open_:
        close(open_.pop())
    lines += ["MOTION", f"Frames: {F}", "Frame Time: 0.0333333"]
    lines += [ws.join(row) for row in text_values]
    text = nl.join(lines) + nl
    site_parents = [site_parents[e] for e in emitted]
    sites = sites[emitted].reshape(-1, 3)
    return text, parents, names, offsets, channels, values, site_parents, sites


@settings(max_examples=200, **_SETTINGS)
@given(_files())
def test_random_files_read_as_the_reference_says(case) -> None:
    text, parents, names, offsets, channels, values, site_parents, sites = case
    m = parse_bvh(text, units=1.0)
    assert m.skeleton.names == tuple(names) and m.skeleton.channels == channels
    np.testing.assert_array_equal(m.skeleton.parents, parents)
    np.testing.assert_array_equal(m.skeleton.offsets, offsets)
    P, E = _reference_world(parents, offsets, channels, values, site_parents, sites)
    size = max(1.0, float(np.abs(P).max()))
    np.testing.assert_allclose(m.world_positions, P, rtol=0, atol=1e-9 * size)
    np.testing.assert_allclose(m.end_site_positions(), E, rtol=0, atol=1e-9 * size)
    # Position channel values are parsed to within 2 ulp of the nearest double.
    col = 0
    for j, chs in enumerate(channels):
        for c in chs:
            if c.endswith("position"):
                _assert_within_ulps(m.translations[:, j, "XYZ".index(c[0])], values[:, col])
            col += 1


def _assert_within_ulps(got, expected, ulps: int = 2) -> None:
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    err = np.abs(got - expected)
    bound = ulps * np.spacing(np.maximum(np.abs(expected), np.finfo(float).tiny))  # subnormals: absolute
    assert np.all(err <= bound), (got, expected)


@settings(max_examples=300, **_SETTINGS)
@given(st.lists(st.sampled_from(["", "-", "+"]), min_size=1, max_size=1),
       st.from_regex(r"[0-9]{1,20}(\.[0-9]{0,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True))
def test_number_parser_matches_python_float(sign, token) -> None:
    token = sign[0] + token
    expected = float(token)
    text = f"HIERARCHY ROOT r {{ OFFSET 0 0 0 CHANNELS 1 Xposition }} MOTION Frames: 1 Frame Time: 1\n{token}\n"
    if not np.isfinite(expected):
        with pytest.raises(BVHError, match="non-finite"):
            parse_bvh(text, units=1.0)
        return
    got = parse_bvh(text, units=1.0).translations[0, 0, 0]
    _assert_within_ulps(got, expected)
    digits = re.sub(r"[eE].*|[^0-9]", "", token).lstrip("0").rstrip("0")
    power = int(re.search(r"[eE]([+-]?\d+)", token).group(1)) if re.search(r"[eE]", token) else 0
    fraction = len(token.split(".")[1].split("e")[0].split("E")[0]) if "." in token else 0
    if len(digits) <= 15 and abs(power - fraction) <= 22 and len(token.split(".")[0].lstrip("+-0")) <= 15:
        assert got == expected  # the exact fast path: one rounding


# ------------------------------------------------------ corruptions of real files
_SOURCES = ["lafan1-60fps/ground2_subject3_turn.bvh", "lafan1/walk1_subject1_stop.bvh",
            "bandai-namco/dataset-1/dataset-1_kick_normal_001.bvh",
            "genmm-examples/Joe_Baseball-Milling-Idle-edited-keyframes.bvh", "quadruped-dog/D1_047z_KAN01_004.bvh"]


def _small_real_files() -> list[bytes]:
    """Real files cut to their first 6 frames (header updated), so that corruptions hit
    the hierarchy about as often as the frames; CRLF files stay CRLF."""
    out = []
    for rel in _SOURCES:
        path = DATA / rel
        if not path.is_file():
            continue
        raw = path.read_bytes()
        head, _, body = raw.partition(b"Frame Time:")
        time_line, _, frames = body.partition(b"\n")
        keep = b"\n".join(frames.split(b"\n")[:6]) + b"\n"
        head = re.sub(rb"Frames:\s*\d+", b"Frames: 6", head)
        out.append(head + b"Frame Time:" + time_line + b"\n" + keep)
    return out


_SMALL = _small_real_files() if DATA.is_dir() else []


def _check_corrupted(raw: bytes) -> None:
    """Either a BVHError (nothing else), or a motion with the header's frame count."""
    try:
        m = parse_bvh(raw, "corrupted.bvh")
    except BVHError as e:
        assert str(e).startswith("corrupted.bvh")
        assert "expected" in str(e)
        return
    frames = re.search(rb"MOTION\s+Frames\s*:?\s*:?\s*\+?(\d+)", raw)
    assert frames is not None
    assert m.num_frames == int(frames.group(1))


@st.composite
def _corruptions(draw):
    raw = draw(st.sampled_from(_SMALL))
    kind = draw(st.sampled_from(["delete", "insert", "truncate", "duplicate", "nan", "bytes", "header"]))
    if kind == "header":  # a position in the hierarchy / MOTION header, where most damage is done
        pos = draw(st.integers(0, raw.index(b"Frame Time:") + 20))
        kind = draw(st.sampled_from(["delete", "insert", "truncate"]))
    else:
        pos = draw(st.integers(0, len(raw) - 1))
    if kind == "delete":
        return raw[:pos] + raw[pos + draw(st.integers(1, 3)):]
    if kind == "insert":
        return raw[:pos] + draw(st.text(string.ascii_letters, min_size=1, max_size=3)).encode() + raw[pos:]
    if kind == "bytes":
        return raw[:pos] + draw(st.binary(min_size=1, max_size=3)) + raw[pos:]
    if kind == "truncate":
        return raw[:pos]
    if kind == "duplicate":
        lines = raw.split(b"\n")
        i = draw(st.integers(0, len(lines) - 1))
        return b"\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1:])
    # swap one number (offset, count, frame time or frame value) for a non-finite word
    numbers = [mm.span() for mm in re.finditer(rb"(?<!\S)[-+]?[0-9.]+(?:e[-+]?\d+)?(?!\S)", raw)]
    a, b = numbers[draw(st.integers(0, len(numbers) - 1))]
    return raw[:a] + draw(st.sampled_from([b"nan", b"NaN", b"-nan", b"inf", b"-inf"])) + raw[b:]


@pytest.mark.data
@pytest.mark.skipif(not _SMALL, reason=_SKIP)
@settings(max_examples=1500, **_SETTINGS)
@given(_corruptions())
def test_random_corruptions_of_real_files_raise_bvh_error_or_load(raw: bytes) -> None:
    _check_corrupted(raw)


@pytest.mark.data
@pytest.mark.skipif(not _SMALL, reason=_SKIP)
def test_the_uncorrupted_small_files_load() -> None:
    for raw in _SMALL:
        assert parse_bvh(raw).num_frames == 6
