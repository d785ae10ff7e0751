"""Viewer parts without a server: the binary pose codec, message validation and rate
limits, the data-folder file catalogue, recording, the bundle builder's messages, the
default-dataset offline message, and the command's options."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import pytest

from motionmatch.viewer import messages as M
from motionmatch.viewer.protocol import (
    CHAR_HEADER,
    FRAME_HEADER,
    CharacterPose,
    char_block_size,
    decode_frame,
    encode_frame,
    pose_scale,
    with_history_flags,
)


# ----------------------------------------------------------------------------- binary poses
def test_pose_frames_round_trip_within_the_quantisation_step():
    rng = np.random.default_rng(0)
    chars = []
    for cid, J in ((1, 23), (7, 65), (300, 4)):
        root = rng.uniform(-50, 50, 3) * [1, 0, 1]
        pos = root + rng.uniform(-1.5, 1.5, (J, 3))
        pos[0] = root
        rot = rng.normal(size=(J, 4))
        rot /= np.linalg.norm(rot, axis=1, keepdims=True)
        rot[0] = [0.0, 0.0, 1.0, 0.0]  # half a turn about +Y: w = 0
        chars.append(CharacterPose(cid, pos, rot, 0.3, pose_scale(2.0), "locomotion", 5, 0b10))
    data = encode_frame(1234, 20.5, chars, flags=1, history=600, history_back=0)
    assert len(data) == FRAME_HEADER.size + sum(char_block_size(len(c.positions)) for c in chars)
    assert len(data) % 4 == 0
    f = decode_frame(data)
    assert (f.tick, f.flags, f.history) == (1234, 1, 600) and abs(f.time - 20.5) < 1e-5
    for c, d in zip(chars, f.characters):
        assert d.id == c.id and d.mode == "locomotion" and d.flags == 5 and d.contacts == 2
        assert np.abs(d.positions - c.positions).max() <= c.scale + 1e-5 * np.abs(c.positions).max()
        angle = 2 * np.arccos(np.clip(np.abs(np.sum(d.rotations * c.rotations, axis=1)), 0, 1))
        assert np.degrees(angle).max() < 0.01
    h = decode_frame(with_history_flags(data, paused=True, history=600, back=30))
    assert h.flags & 2 and h.flags & 1 and h.history_back == 30


def test_the_page_skins_the_body_as_the_mannequin_does(data_dir):
    """A body through the page's binary layout and a pose through the pose frame, skinned
    as three.js does (bone matrix x inverse bind), land where the mannequin's own skinning
    puts the vertices (within the frame's quantisation)."""
    from motionmatch.anim import load_bvh
    from motionmatch.anim.mannequin import mannequin_for
    from motionmatch.viewer.body import decode_body, encode_body
    from test_viewer_support import skin_as_the_page

    m = load_bvh(data_dir / "lafan1-60fps" / "walk1_subject1_walk2.bvh")
    body = mannequin_for(m)
    b = decode_body(encode_body(body))
    assert np.array_equal(b["triangles"], body.triangles) and np.array_equal(b["joints"], body.joints)
    k = m.num_frames // 2
    wp, wr = m.world_positions[k], m.world_rotations[k]
    sent = decode_frame(encode_frame(0, 0.0, [CharacterPose(1, wp, wr, 0.0, pose_scale(2.0))])).characters[0]
    page = skin_as_the_page(b, sent.positions, sent.rotations)
    assert np.abs(page - body.skin(wp, wr)).max() < 2e-3
    # the coarse copy (far characters, shadows): a seventh of the vertices, skinned on the
    # surface of the mannequin, stretched no more than the mannequin is
    from scipy.spatial import cKDTree

    c = b["coarse"]
    assert len(c["vertices"]) < len(body.vertices) / 5 and np.allclose(c["weights"].sum(axis=1), 1.0, atol=1e-5)
    low = skin_as_the_page({**c, "inverse_bind": b["inverse_bind"]}, sent.positions, sent.rotations)
    assert cKDTree(page).query(low)[0].max() < 0.03

    def longest_edge(tri, v):
        t = tri.astype(np.int64)
        return max(np.linalg.norm(v[t[:, i]] - v[t[:, (i + 1) % 3]], axis=1).max() for i in range(3))

    assert longest_edge(c["triangles"], low) < longest_edge(b["triangles"], page) + 0.05


def test_fifty_humans_at_60_hz_stay_under_one_megabyte_per_second():
    size = FRAME_HEADER.size + 50 * char_block_size(23)
    assert CHAR_HEADER.size == 32 and char_block_size(23) == 308  # positions and rotations
    assert size * 60 < 1_000_000, size * 60


def test_far_joints_are_clipped_not_wrapped():
    pos = np.zeros((2, 3))
    pos[1] = [10.0, 0, 0]  # beyond the range of the step
    rot = np.tile([1.0, 0.0, 0.0, 0.0], (2, 1))
    f = decode_frame(encode_frame(0, 0.0, [CharacterPose(1, pos, rot, 0.0, pose_scale(1.0))]))
    assert f.characters[0].positions[1, 0] > 1.4


# ----------------------------------------------------------------------------- validation
def test_valid_messages_are_cleaned():
    m = M.parse(json.dumps({"type": "path", "seq": 4, "points": [[0, 0, 0], [0.5, 1, 2]], "mode": "global"}))
    assert m["type"] == "path" and m["seq"] == 4 and m["scale"] == 1.0 and m["id"] is None
    assert m["points"] == [(0.0, 0.0, 0.0), (0.5, 1.0, 2.0)]
    m = M.validate({"type": "obstacle_add", "obstacle": {"shape": "box", "center": [1, 2], "size": [2, 1],
                                                         "height": [0, 1], "velocity": [0, 0]}})
    assert m["obstacle"] == {"shape": "box", "center": [1.0, 2.0], "size": [2.0, 1.0], "height": [0.0, 1.0]}
    assert M.validate({"type": "step"})["frames"] == 1
    assert M.validate({"type": "keys", "held": []})["held"] == []


@pytest.mark.parametrize("msg, code", [
    ({"type": "key", "key": "w"}, "invalid"),
    ({"type": "key", "key": "w", "down": 1}, "invalid"),
    ({"type": "key", "key": "w" * 100, "down": True}, "invalid"),
    ({"type": "camera", "yaw": "1"}, "invalid"),
    ({"type": "camera", "yaw": True}, "invalid"),
    ({"type": "step", "frames": 1.5}, "invalid"),
    ({"type": "step", "frames": 0}, "invalid"),
    ({"type": "select", "id": 70000}, "invalid"),
    ({"type": "keys", "held": ["w"] * 17}, "too_large"),
    ({"type": "path", "points": [[0, 0, 0]] * 5000}, "too_large"),
    ({"type": "path", "points": [[0, 0], [1, 1]]}, "invalid"),
    ({"type": "path", "points": [[0, 0, 0], [0, 1, 1]]}, "invalid"),
    ({"type": "path", "points": [[0, 0, 0], [1, 1, 1]], "mode": "sideways"}, "invalid"),
    ({"type": "genmm", "examples": []}, "invalid"),
    ({"type": "genmm", "examples": ["a:b.bvh"] * 9}, "too_large"),
    ({"type": "files", "kind": "exe"}, "invalid"),
    ({"type": "obstacle_add", "obstacle": {"shape": "disk", "center": [0, 0]}}, "invalid"),
    ({"type": "obstacle_add", "obstacle": {"shape": "disk", "center": [0, 0], "radius": 1, "colour": 3}}, "invalid"),
    ({"type": "scene_set", "scene": {"obstacles": [{"shape": "disk", "center": [0, 0], "radius": 1}] * 300}},
     "too_large"),
    ({"type": "nope"}, "unknown_type"),
    ({"seq": 1}, "unknown_type"),
    ({"type": "hello", "seq": -1}, "invalid"),
    ({"type": "hello", "seq": "1"}, "invalid"),
])
def test_invalid_messages_are_refused_with_a_code(msg, code):
    with pytest.raises(M.MessageError) as e:
        M.validate(msg)
    assert e.value.code == code, str(e.value)
    assert str(e.value)


def test_parse_refuses_binary_oversize_and_bad_json():
    for raw, code in ((b"\x01", "binary"), ("{", "bad_json"), ("[" * 100000 + "]" * 100000, "bad_json"),
                      ("x" * (M.Limits().max_bytes + 1), "too_large")):
        with pytest.raises(M.MessageError) as e:
            M.parse(raw)
        assert e.value.code == code
    with pytest.raises(M.MessageError) as e:
        M.parse(json.dumps({"type": "camera", "yaw": 1e300 * 10}))  # Infinity
    assert e.value.code in ("invalid", "bad_json")


def test_the_seq_of_a_refused_message_is_kept_for_the_reply():
    with pytest.raises(M.MessageError) as e:
        M.validate({"type": "key", "seq": 41})
    assert e.value.seq == 41


def test_rate_limiter_refills():
    t = [0.0]
    rl = M.RateLimiter(10, 5, clock=lambda: t[0])
    assert all(rl.allow() for _ in range(5)) and not rl.allow()
    t[0] += 0.5
    assert sum(rl.allow() for _ in range(10)) == 5
    assert rl.refused == 6


# ----------------------------------------------------------------------------- files
def test_file_ids_resolve_only_inside_their_folders(tmp_path):
    from motionmatch.viewer.data import DataError, FileCatalog

    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.bvh").write_text("x")
    (root / "s.json").write_text('{"obstacles": [], "agents": []}')
    (root / "k.json").write_text('{"format": "motionmatch-keypoints", "times": [], "keypoints": []}')
    (root / ".hidden.bvh").write_text("x")
    outside = tmp_path / "secret.bvh"
    outside.write_text("x")
    (root / "link.bvh").symlink_to(outside)
    (root / "dirlink").symlink_to(tmp_path)
    cat = FileCatalog({"data": root, "missing": tmp_path / "nope"})
    assert list(cat.roots) == ["data"]
    ids = [f["id"] for f in cat.list("bvh")]
    assert ids == ["data:sub/a.bvh"]
    assert [f["id"] for f in cat.list("scenario")] == ["data:s.json"]  # a scenario, not a recording
    assert [f["id"] for f in cat.list("keypoints")] == ["data:k.json"]
    assert cat.resolve("data:sub/a.bvh", "bvh") == (root / "sub" / "a.bvh").resolve()
    for bad in ("data:../secret.bvh", "data:/etc/passwd.bvh", "data:sub/../../secret.bvh", "data:link.bvh",
                "data:dirlink/secret.bvh", "data:sub/a.json", "other:sub/a.bvh", "sub/a.bvh", "data:",
                "data:sub\\a.bvh", "data:nope.bvh", str(outside)):
        with pytest.raises(DataError):
            cat.resolve(bad, "bvh")
    with pytest.raises(ValueError):
        FileCatalog({"bad name!": root})


def test_default_roots_name_the_data_folders(tmp_path, monkeypatch):
    from motionmatch.viewer.data import default_roots

    data = tmp_path / "data"
    (data / "lafan1").mkdir(parents=True)
    monkeypatch.setenv("MOTIONMATCH_DATA", str(data))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").mkdir()
    ds = tmp_path / "elsewhere"
    ds.mkdir()
    roots = default_roots(ds, extra=[tmp_path / "x"])
    assert roots["data"] == data and roots["dataset"] == ds and roots["scenarios"] == tmp_path / "scenarios"
    assert roots["extra0"] == tmp_path / "x"
    assert "dataset" not in default_roots(data / "lafan1")  # inside the data folder already


# ----------------------------------------------------------------------------- data
def test_offline_default_dataset_says_what_to_do(monkeypatch):
    import motionmatch.datasets as ds
    from motionmatch.errors import DatasetError
    from motionmatch.viewer import data

    def fail(*a, **k):
        raise DatasetError("cannot download lafan1.zip: https://example: Temporary failure in name resolution.")

    monkeypatch.setattr(ds, "resolve", fail)
    with pytest.raises(data.OfflineError) as e:
        data.open_database()
    text = str(e.value)
    for hint in ("motionmatch datasets fetch lafan1", "MOTIONMATCH_DATA", "--data DIR", "--db DB.npz", "archive"):
        assert hint in text


def test_missing_database_file_is_explained(tmp_path):
    from motionmatch.viewer.data import DataError, open_database

    with pytest.raises(DataError, match="motionmatch build"):
        open_database(db=tmp_path / "nope.npz")
    with pytest.raises(DataError, match="not a folder"):
        open_database(data=tmp_path / "nope")


# ----------------------------------------------------------------------------- recording
def test_recorder_keeps_the_last_frames_in_order():
    from motionmatch.anim.skeleton import Skeleton
    from motionmatch.viewer.characters import Recorder

    rec = Recorder(3, np.array([0]), max_frames=25, chunk=10)
    for i in range(57):
        r = np.tile([1.0, 0, 0, 0], (3, 1))
        t = np.zeros((3, 3))
        t[0, 0] = i
        rec.add(r, t)
    rots, tr = rec.arrays()
    assert len(rots) == 25 and tr[:, 0, 0].tolist() == list(range(32, 57))
    sk = Skeleton(("a", "b", "c"), np.array([-1, 0, 1]), np.array([[0, 0, 0], [0, 1, 0], [0, 1, 0.0]]))
    m = rec.motion(sk, 60.0, "x")
    assert m.num_frames == 25 and np.allclose(m.translations[:, 1], [0, 1, 0])


# ----------------------------------------------------------------------------- bundle
def test_missing_node_gets_a_clear_message(monkeypatch, tmp_path):
    from motionmatch.viewer import _bundle

    monkeypatch.setattr(_bundle.shutil, "which", lambda name: None)
    with pytest.raises(_bundle.BundleError) as e:
        _bundle.build_bundle(tmp_path, tmp_path / "out")
    text = str(e.value)
    assert "Node.js" in text and "npm ci" in text and "apt-get install nodejs" in text and "wheel" in text


def test_the_bundle_is_rebuilt_when_the_source_changes(tmp_path, monkeypatch):
    from motionmatch.viewer import _bundle

    web = tmp_path / "web"
    (web / "src").mkdir(parents=True)
    for f in ("package.json", "package-lock.json", "build.mjs", "index.html"):
        (web / f).write_text(f)
    (web / "src" / "main.js").write_text("1")
    d1 = _bundle.source_digest(web)
    (web / "src" / "main.js").write_text("2")
    assert _bundle.source_digest(web) != d1
    static = tmp_path / "static"
    static.mkdir()
    for f in _bundle.BUNDLE_FILES:
        (static / f).write_text("x")
    (static / "build-info.json").write_text(json.dumps({"source_sha256": _bundle.source_digest(web)}))
    assert _bundle.bundle_ready(static) and _bundle.bundle_digest(static) == _bundle.source_digest(web)


def test_web_source_and_lockfile_are_in_the_repository():
    from conftest import REPO

    web = REPO / "web"
    pkg = json.loads((web / "package.json").read_text())
    assert {"three", "esbuild"} <= set(pkg["devDependencies"]) and pkg["scripts"]["build"]
    lock = json.loads((web / "package-lock.json").read_text())
    assert lock["lockfileVersion"] >= 2 and "node_modules/three" in lock["packages"]
    assert (web / "src" / "main.js").is_file() and (web / "index.html").is_file()


# ----------------------------------------------------------------------------- command
def test_viewer_command_options():
    from motionmatch.cli import viewer_cmd

    p = argparse.ArgumentParser()
    viewer_cmd.register(p.add_subparsers())
    a = p.parse_args(["viewer"])
    assert a.host == "127.0.0.1" and a.port is None and a.db is None and a.data is None and not a.open
    a = p.parse_args(["viewer", "--db", "x.npz", "--port", "0", "--open", "--allow", "a", "--allow", "b"])
    assert a.db == "x.npz" and a.port == 0 and a.open and a.allow == ["a", "b"]
    with pytest.raises(SystemExit):
        p.parse_args(["viewer", "--db", "x.npz", "--data", "d"])
    a = p.parse_args(["viewer", "--host", "0.0.0.0", "--token", "short"])
    assert a.token == "short"


def test_a_bad_viewer_token_is_one_line(capsys):
    from motionmatch.cli import viewer_cmd

    p = argparse.ArgumentParser()
    viewer_cmd.register(p.add_subparsers())
    a = p.parse_args(["viewer", "--host", "0.0.0.0", "--token", "short"])
    assert a.func(a) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--token" in err and "8 to 256" in err


def test_host_names_the_viewer_answers_to():
    from motionmatch.viewer.server import host_allowed

    for ok in ("127.0.0.1:8765", "localhost", "LOCALHOST:1", "app.localhost:80", "[::1]:8765", "10.0.0.7",
               "192.168.1.20:8765"):
        assert host_allowed(ok, "127.0.0.1"), ok
    for bad in ("evil.example:8765", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example", "", None,
                "exa mple", "[::1"):
        assert not host_allowed(bad, "127.0.0.1"), bad
    assert host_allowed("studio.lan:8765", "0.0.0.0", ("studio.lan",))
    assert host_allowed("myhost:8765", "myhost")
    assert not host_allowed("studio.lan:8765", "0.0.0.0")


def test_loopback_detection_and_origin_check():
    from motionmatch.viewer.server import _origin_ok, is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4") and not is_loopback("")
    assert _origin_ok(None, "127.0.0.1:8765", ())
    assert _origin_ok("http://127.0.0.1:8765", "127.0.0.1:8765", ())
    assert not _origin_ok("http://evil.example", "127.0.0.1:8765", ())
    assert _origin_ok("http://evil.example", "127.0.0.1:8765", ("http://evil.example",))


def test_the_session_reports_every_capability():
    from motionmatch.viewer.session import CAPABILITIES

    assert set(CAPABILITIES) >= {"keyboard", "path", "genmm", "environment", "crowd", "pose", "scenario"}
    assert all(CAPABILITIES.values())


def test_environment_is_not_required_to_import_the_viewer():
    env = dict(os.environ)
    assert Path(__file__).name  # the import below must not pull starlette etc. at package import
    import motionmatch.viewer as v

    assert "Viewer" in v.__all__
    assert env == dict(os.environ)


# ------------------------------------------------------------------ plugins (no server)
def test_viewer_obstacles_move_from_where_they_were_placed():
    from motionmatch.viewer.environment import obstacle_from_viewer

    o = obstacle_from_viewer({"id": 3, "t0": 2.0, "shape": "disk", "center": [1.0, 2.0], "radius": 0.5,
                              "velocity": [0.5, -1.0]})
    assert np.allclose(o.position(2.0), [1.0, 2.0]) and np.allclose(o.position(4.0), [2.0, 0.0])
    w = obstacle_from_viewer({"id": 4, "t0": 1.0, "shape": "box", "center": [0, 0], "size": [1, 1],
                              "path": [[0.0, 0.0, 0.0], [2.0, 4.0, 0.0]]})
    assert np.allclose(w.position(2.0), [2.0, 0.0])  # path times count from when it was placed
    with pytest.raises(ValueError):
        obstacle_from_viewer({"id": 5, "shape": "disk", "center": [0, 0]})  # no radius




# ------------------------------------------------------------------ modes the database can play
def _lafan1_clip(name: str, frames: slice, tags: tuple[str, ...]):
    from conftest import data_root
    from motionmatch.anim import load_bvh

    path = data_root() / "lafan1" / f"{name}.bvh"
    if not path.is_file():
        pytest.skip(f"{path} not found; set MOTIONMATCH_DATA to the shared data folder")
    m = load_bvh(path)[frames]
    m.name, m.tags = f"{name}-{frames.start}", tags
    return m


def test_a_creep_clip_walked_upright_does_not_make_creep_playable():
    """The issue's case: clips tagged creep (LAFAN1's "ground" segments) in which the
    figure walks upright. C must be refused with a reason, not shown as creep."""
    from motionmatch.database import MotionDatabase
    from motionmatch.viewer.session import database_modes

    walk = _lafan1_clip("obstacles1_subject1", slice(0, 1200), ("walk", "creep"))  # walks, jogs, jumps
    modes = database_modes(MotionDatabase.build([walk]))
    assert set(modes) == {"idle", "locomotion", "jump", "dance", "creep", "punch"}
    assert modes["locomotion"]["available"] and modes["locomotion"]["reason"] is None
    assert not modes["creep"]["available"] and "no crawling clip" in modes["creep"]["reason"]
    assert "upright" in modes["creep"]["reason"] and modes["creep"]["seconds"] == 0.0
    assert not modes["dance"]["available"] and "dance" in modes["dance"]["reason"]
    assert modes["jump"]["available"] and modes["jump"]["seconds"] > 0  # its jumps' take-offs


def test_a_crawling_clip_makes_creep_playable():
    from motionmatch.database import MotionDatabase
    from motionmatch.viewer.session import database_modes

    walk = _lafan1_clip("obstacles1_subject1", slice(0, 1200), ("walk",))
    crawl = _lafan1_clip("ground1_subject4", slice(600, 1200), ("creep",))  # on hands and knees
    modes = database_modes(MotionDatabase.build([walk, crawl]))
    assert modes["creep"]["available"] and modes["creep"]["reason"] is None
    assert modes["creep"]["seconds"] > 5.0
    plain = database_modes(MotionDatabase.build([walk]))
    assert not plain["creep"]["available"] and "none is tagged creep" in plain["creep"]["reason"]
