"""The viewer's session protocol, driven by a websocket client (no browser): key-down W moves
the character forward, a drawn path is followed, malformed messages get error replies and
the session goes on, tabs are independent and closing one frees it, the page reads files
only from the data folders, pause/step/scrub, debug data, BVH and glTF export, the characters' bodies, obstacles, GenMM; and
with the plugins: a character walks around a disk in front of it and around an obstacle on
its drawn path, two agents walking at each other pass, a spawned group reaches its goals,
a recorded keypoint file makes the character walk then run."""

from __future__ import annotations

import collections
import itertools
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, data_root
from test_viewer_support import (
    Client,
    health,
    skin_as_the_page,
    small_database,
    start_server,
    viewer_deps_or_skip,
    walk_run_keypoint_file,
)

viewer_deps_or_skip()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = small_database(tmp_path_factory.getbasetemp())
    scen = tmp_path_factory.mktemp("scenarios")
    (scen / "two_agents.json").write_text(json.dumps({
        "name": "two", "duration": 5,
        "obstacles": [{"shape": "disk", "center": [0, 3], "radius": 0.4}],
        "agents": [{"name": "a", "start": [0, 0], "facing": [0, 1], "path": [[0, 0], [0, 4]], "speed": 1.2},
                   {"name": "b", "start": [2, 0]}]}))
    (scen / "pass_each_other.json").write_text(json.dumps({
        "name": "pass", "duration": 14,
        "agents": [{"name": "north", "start": [0, 0], "facing": [0, 1], "goal": [0, 8], "speed": 1.3},
                   {"name": "south", "start": [0.15, 8], "facing": [0, -1], "goal": [0.15, 0], "speed": 1.3}]}))
    poses = tmp_path_factory.mktemp("poses")
    roots = {"data": data_root(), "scenarios": scen, "poses": poses, "repo": REPO / "scenarios"}
    srv = start_server(db, roots)
    srv.poses = poses
    srv.scenarios = scen
    yield srv
    srv.stop()


def test_welcome_and_a_60hz_binary_pose_stream(server):
    with Client(server) as c:
        w = c.welcome
        assert w["tick_hz"] == 60 and w["protocol"] == 3
        sk = w["skeletons"]["0"]
        assert len(sk["names"]) == len(sk["parents"]) == 23 and len(sk["feet"]) == 2
        c.next_frame()
        n0 = len(c.frames)
        t0 = time.monotonic()
        c.pump(1.0)
        rate = (len(c.frames) - n0) / (time.monotonic() - t0)
        assert rate > 40, f"only {rate:.1f} pose frames per second"
        f = c.frame
        assert [ch.id for ch in f.characters] == [w["selected"]]
        ch = f.characters[0]
        assert ch.positions.shape == (23, 3) and ch.rotations.shape == (23, 4)
        head = ch.positions[sk["names"].index("Head")]
        assert 1.3 < head[1] < 2.0  # a standing human, metres, Y up
        # the world rotations agree with the positions: a joint's offset, rotated by its
        # parent's world rotation, leads from the parent to the joint (joints without
        # position channels)
        from motionmatch.anim import quat

        skel = server.viewer.db.skeleton
        kids = [j for j in range(1, 23) if not skel.has_position_channels[j]]
        par = skel.parents[kids]
        step = quat.rotate(ch.rotations[par], skel.offsets[kids])
        assert np.abs(ch.positions[par] + step - ch.positions[kids]).max() < 2e-3
        assert f.tick > 30


def test_holding_w_for_two_seconds_walks_forward(server):
    with Client(server) as c:
        c.pump(0.3)
        p0 = c.root()
        c.send("key", key="KeyW", down=True, yaw=0.0)  # camera looking along +Z: W = +Z
        c.pump_world(2.0)
        c.send("key", key="KeyW", down=False, yaw=0.0)
        p1 = c.root()
        d = p1 - p0
        assert 0.6 < d[2] < 5.0, f"moved {d} in 2 s"
        assert abs(d[0]) < 0.4 * d[2]
        # released: it slows down and stops
        c.pump_world(1.5)
        p2 = c.root()
        c.pump_world(0.5)
        assert np.linalg.norm(c.root() - p2) < 0.3


def test_camera_relative_keys(server):
    with Client(server) as c:
        c.pump(0.2)
        p0 = c.root()
        yaw = np.pi / 2  # camera looking along +X: W walks toward +X
        c.send("key", key="w", down=True, yaw=yaw)
        c.pump_world(2.0)
        c.send("key", key="w", down=False, yaw=yaw)
        d = c.root() - p0
        assert d[0] > 0.5 and abs(d[2]) < 0.5 * d[0], d


def test_a_drawn_path_is_followed(server):
    with Client(server) as c:
        c.pump(0.2)
        assert c.request("pause", paused=True)["type"] == "ack"
        start = c.root()
        # an L: 3 m along +Z, then 2 m toward +X, drawn at 1.2 m/s (local mode: it starts at the character)
        corners = np.array([[0.0, 0.0], [0.0, 3.0], [2.0, 3.0]])
        pts, t = [], 0.0
        for a, b in itertools.pairwise(corners):
            n = 30
            for i in range(n):
                p = a + (b - a) * i / n
                pts.append([round(t, 4), float(p[0]), float(p[1])])
                t += np.linalg.norm(b - a) / n / 1.2
        pts.append([round(t, 4), 2.0, 3.0])
        r = c.request("path", points=pts, mode="local")
        assert r["type"] == "ack", r
        info = c.wait_type("path_info")
        assert info["mode"] == "local" and abs(info["length"] - 5.0) < 0.5
        assert len(info["speeds"]) == len(info["points"]) and max(info["speeds"]) < 2.5
        assert c.request("step", frames=600, timeout=60)["type"] == "ack"
        done = c.wait_type("path_done", timeout=20)
        assert done["reason"] == "completed"
        end = c.root()
        goal = start + np.array([2.0, 0.0, 3.0])
        assert np.hypot(*(end - goal)[[0, 2]]) < 0.8, (start, end)
        # it went through the corner, not straight across
        track = np.array([f.by_id(c.welcome["selected"]).root for f in c.frames[-600:]])
        corner = start + np.array([0.0, 0.0, 3.0])
        assert np.min(np.hypot(*(track - corner)[:, [0, 2]].T)) < 0.6


def test_malformed_messages_get_errors_and_the_session_goes_on(server):
    with Client(server) as c:
        bad = [
            ("not json", "bad_json"),
            (json.dumps([1, 2]), "invalid"),
            (json.dumps({"type": "launch_missiles"}), "unknown_type"),
            (json.dumps({"type": "key", "down": True}), "invalid"),                  # missing key
            (json.dumps({"type": "key", "key": "w", "down": "yes"}), "invalid"),     # wrong type
            (json.dumps({"type": "key", "key": "w", "down": True, "x": 1}), "invalid"),  # unknown field
            (json.dumps({"type": "step", "frames": 10**9}), "invalid"),              # out of range
            (json.dumps({"type": "camera", "yaw": float("nan")}).replace("NaN", "NaN"), "invalid"),
            (json.dumps({"type": "path", "points": [[0, 0, 0]]}), "invalid"),        # too few points
            (json.dumps({"type": "path", "points": [[1, 0, 0], [0, 1, 1]]}), "invalid"),  # time goes back
            (json.dumps({"type": "select", "id": -3}), "invalid"),
            ("x" * 300_000, "too_large"),
            (b"\x00\x01binary", "binary"),
        ]
        for raw, code in bad:
            c.send_raw(raw)
            err = c.wait_type("error")
            assert err["code"] == code, (raw[:60], err)
        # refused by the session, not the schema: answered with the request's seq
        r = c.request("select", id=999)
        assert r["type"] == "error" and r["code"] == "rejected" and "999" in r["message"]
        r = c.request("key", key="F13", down=True)
        assert r["type"] == "error" and "unknown key" in r["message"]
        r = c.request("step", frames=1)
        assert r["type"] == "error" and "pause" in r["message"]
        # still alive and answering
        assert c.request("hello", client="test")["type"] == "ack"
        t = c.next_frame().tick
        assert c.next_frame().tick > t


def test_message_rate_is_limited_without_ending_the_session(server):
    with Client(server) as c:
        for _ in range(600):
            c.send_raw(json.dumps({"type": "camera", "yaw": 0.1}))
        limited = c.wait(lambda m: isinstance(m, dict) and m.get("code") == "rate_limited", timeout=10)
        assert "per second" in limited["message"]
        time.sleep(1.5)
        assert c.request("hello")["type"] == "ack"


def test_tabs_are_independent_and_closing_one_frees_its_session(server):
    before = health(server)["sessions"]
    a, b = Client(server), Client(server)
    try:
        assert a.welcome["session"] != b.welcome["session"]
        assert health(server)["sessions"] == before + 2
        a.pump(0.2)
        b.pump(0.2)
        pa, pb = a.root(), b.root()
        a.send("key", key="KeyW", down=True, yaw=0.0)
        a.pump(1.5)
        b.pump(0.1)
        assert np.linalg.norm(a.root() - pa) > 0.3
        assert np.linalg.norm(b.root() - pb) < 0.1
    finally:
        a.close()
    t0 = time.monotonic()
    while health(server)["sessions"] != before + 1 and time.monotonic() - t0 < 5:
        time.sleep(0.05)
    assert health(server)["sessions"] == before + 1
    b.close()
    t0 = time.monotonic()
    while health(server)["sessions"] != before and time.monotonic() - t0 < 5:
        time.sleep(0.05)
    assert health(server)["sessions"] == before


def test_another_sites_page_cannot_connect(server):
    from websockets.exceptions import InvalidHandshake

    with pytest.raises(InvalidHandshake):
        Client(server, origin="http://evil.example")
    ok = Client(server, origin=server.url.rstrip("/"))
    ok.close()


def _raw_http(server, request: bytes) -> bytes:
    """Send ``request`` to the server as raw bytes; the whole reply's first 4 kB."""
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(request)
        out = b""
        while len(out) < 4096:
            chunk = s.recv(4096)
            if not chunk:
                break
            out += chunk
            if b"\r\n\r\n" in out and (b"421" in out.split(b"\r\n")[0] or b"101" in out.split(b"\r\n")[0]):
                break
        return out


def test_a_dns_rebinding_page_gets_nothing(server):
    """A page at evil.example whose name now points at 127.0.0.1 sends Host and Origin
    ``evil.example:PORT``: the API, the page and the websocket handshake are refused
    (421); the real names and IP addresses still work."""
    evil = f"evil.example:{server.port}".encode()
    r = _raw_http(server, b"GET /api/health HTTP/1.1\r\nHost: " + evil + b"\r\nConnection: close\r\n\r\n")
    assert r.split(b"\r\n")[0].endswith(b"421 Misdirected Request"), r[:200]
    assert b'"sessions"' not in r
    before = health(server)["sessions"]
    handshake = (b"GET /ws HTTP/1.1\r\nHost: " + evil + b"\r\nOrigin: http://" + evil + b"\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 b"Sec-WebSocket-Version: 13\r\n\r\n")
    r = _raw_http(server, handshake)
    status = r.split(b"\r\n")[0]
    assert b" 421 " in status or b" 403 " in status, status
    assert health(server)["sessions"] == before
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}", f"[::1]:{server.port}"):
        r = _raw_http(server, f"GET /api/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        assert r.split(b"\r\n")[0].endswith(b"200 OK"), (host, r[:200])


def test_files_come_only_from_the_data_folders(server):
    with Client(server) as c:
        c.send("files", kind="bvh")
        files = c.wait_type("files", kind="bvh")["files"]
        assert files and all(f["id"].split(":", 1)[0] in ("data", "scenarios") for f in files)
        assert any(f["id"].endswith("Joe_Walk-In-Circle.bvh") for f in files)
        for fid in ("data:../../etc/passwd.bvh", "/etc/passwd", "data:/etc/hosts.bvh", "nope:a.bvh",
                    "data:genmm-examples/../../../x.bvh", "data:README.md"):
            r = c.request("genmm", examples=[fid])
            assert r["type"] == "error" and r["code"] == "rejected", (fid, r)
        r = c.request("scenario_load", file="scenarios:../../secret.json")
        assert r["type"] == "error"


def test_pause_step_and_scrub_back(server):
    with Client(server) as c:
        c.pump(0.5)
        assert c.request("pause", paused=True)["type"] == "ack"
        tick = c.wait_type("time")["tick"]
        c.pump(0.3)
        assert c.frame.tick == tick  # paused: the clock stands
        r = c.request("step", frames=10)
        assert r["type"] == "ack" and r["tick"] == tick + 10
        r = c.request("scrub", back=20)
        assert r["type"] == "ack" and r["back"] == 20
        f = next((f for f in reversed(c.frames) if f.history_back == 20), None) or c.wait(
            lambda m: not isinstance(m, dict) and m.history_back == 20)
        assert f.tick == tick + 10 - 20 and f.flags & 2
        assert c.request("pause", paused=False)["type"] == "ack"
        c.wait(lambda m: not isinstance(m, dict) and m.tick > tick + 10 and not m.flags & 1, timeout=5)


def test_debug_data_of_the_current_match(server):
    with Client(server) as c:
        c.send("key", key="KeyW", down=True, yaw=0.0)
        assert c.request("debug", enabled=True, candidates=4)["type"] == "ack"
        d = c.wait(lambda m: isinstance(m, dict) and m.get("type") == "debug" and m.get("candidates"), timeout=5)
        groups = set(c.welcome["db"]["groups"])
        assert set(d["costs"]) == groups
        assert abs(d["total"] - sum(d["costs"].values())) < 1e-2
        K = len(c.welcome["db"]["trajectory_offsets"])
        assert len(d["desired"]["positions"]) == K == len(d["matched"]["positions"])
        cands = d["candidates"]
        assert 1 <= len(cands) <= 4 and all(set(x["groups"]) == groups for x in cands)
        costs = [x["cost"] for x in cands]
        assert costs == sorted(costs)
        assert d["frame"]["clip"] in {x["clip"] for x in cands} or cands[0]["cost"] <= d["total"] + 1e-3


def test_bvh_and_glb_export_of_the_session(server, tmp_path):
    """The export writes the recorded motion as BVH or as binary glTF (valid, with the body
    and the same joint positions, within 1 mm)."""
    import pygltflib

    from motionmatch.anim import load_bvh
    from test_gltf import glb_joint_positions, validate

    def download(c, **fields) -> tuple[dict, Path]:
        r = c.request("export", id=c.welcome["selected"], **fields)
        assert r["type"] == "ack"
        dl = c.wait_type("download", timeout=60)
        with urllib.request.urlopen(server.url.rstrip("/") + dl["url"], timeout=10) as resp:
            data = resp.read()
            assert "attachment" in resp.headers["Content-Disposition"]
        p = tmp_path / dl["filename"]
        p.write_bytes(data)
        return dl, p

    with Client(server) as c:
        c.send("key", key="KeyW", down=True, yaw=0.0)
        c.pump_world(1.0)
        c.request("pause", paused=True)  # both files hold the same frames
        dl, p = download(c)  # the default format: BVH
        m = load_bvh(p)
        assert p.suffix == ".bvh" and m.num_frames == dl["frames"] >= 50 and m.fps == 60
        assert m.skeleton.num_joints == 23
        assert np.ptp(m.world_positions[:, 0, 2]) > 0.2  # it walked
        gl, g = download(c, format="glb")
        assert g.suffix == ".glb" and gl["format"] == "glb" and gl["frames"] == dl["frames"]
        doc = pygltflib.GLTF2().load_binary(str(g))
        assert len(doc.skins) == 1 and len(doc.meshes) >= 1 and len(doc.animations) == 1
        frames = [0, m.num_frames // 2, m.num_frames - 1]
        names, pos = glb_joint_positions(g, 0, frames)
        assert names == list(m.skeleton.names)
        assert np.abs(pos - m.world_positions[frames]).max() < 1e-3
    # the download belonged to the closed tab's session
    time.sleep(0.3)
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(server.url.rstrip("/") + dl["url"], timeout=10)
    validate(g)  # the Khronos validator (skips when it is not installed)


def test_each_skeleton_body_is_served_once_for_the_page(server):
    from motionmatch.viewer.body import decode_body

    with Client(server) as c:
        sk = c.welcome["skeletons"]["0"]
        assert sk["body"].startswith("/api/body/")
        with urllib.request.urlopen(server.url.rstrip("/") + sk["body"], timeout=60) as resp:
            assert resp.headers["Content-Type"] == "application/octet-stream"
            b = decode_body(resp.read())
        J = len(sk["names"])
        assert b["inverse_bind"].shape == (J, 4, 4) and len(b["vertices"]) > 1000
        assert np.allclose(b["weights"].sum(axis=1), 1.0, atol=1e-5) and b["joints"].max() < J
        # the body posed by a pose frame (as the page skins it) stands where the character stands
        f = c.next_frame()
        ch = f.by_id(c.welcome["selected"])
        v = skin_as_the_page(b, ch.positions, ch.rotations)
        assert abs(v[:, 1].min()) < 0.1 and 1.3 < np.ptp(v[:, 1]) < 2.1  # on the ground, a human's height
        assert np.linalg.norm(v[:, [0, 2]].mean(axis=0) - ch.root[[0, 2]]) < 0.3
    for bad in ("/api/body/0123456789abcdef0123", "/api/body/..%2Fserver.py"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(server.url.rstrip("/") + bad, timeout=10)
        assert e.value.code == 404


def test_obstacles_and_scenes(server):
    with Client(server) as c:
        r = c.request("obstacle_add", obstacle={"shape": "disk", "center": [1, 2], "radius": 0.5, "height": [0, 1]})
        assert r["type"] == "ack"
        oid = r["id"]
        obs = c.wait_type("obstacles")["obstacles"]
        assert obs[0]["id"] == oid and obs[0]["radius"] == 0.5
        r = c.request("obstacle_update", id=oid, obstacle={"shape": "box", "center": [1, 2], "size": [2, 0.5],
                                                          "height": [0, 1.5], "velocity": [0.5, 0]})
        assert r["type"] == "ack"
        obs = c.wait_type("obstacles")["obstacles"]
        assert obs[0]["shape"] == "box" and obs[0]["velocity"] == [0.5, 0.0]
        for bad in ({"shape": "disk", "center": [0, 0]},  # no radius
                    {"shape": "triangle", "center": [0, 0], "radius": 1},
                    {"shape": "box", "center": [0, 0], "size": [1, 1], "height": [2, 1]},
                    {"shape": "disk", "center": [0, 0], "radius": 1e9}):
            assert c.request("obstacle_add", obstacle=bad)["type"] == "error"
        c.send("scene_save")
        scene = c.wait_type("scene")["scene"]
        assert len(scene["obstacles"]) == 1 and scene["agents"]
        assert c.request("scene_clear")["type"] == "ack"
        assert c.wait_type("obstacles")["obstacles"] == []
        assert c.request("scene_set", scene={"obstacles": scene["obstacles"]})["type"] == "ack"
        assert len(c.wait_type("obstacles")["obstacles"]) == 1
        assert c.request("obstacle_remove", id=12345)["type"] == "error"


def test_scenario_agents_and_groups(server):
    with Client(server) as c:
        caps = c.welcome["capabilities"]
        r = c.request("scenario_load", file="scenarios:two_agents.json", timeout=20)
        if not caps["scenario"]:
            assert r["type"] == "error" and "environment" in r["message"]
        else:
            assert r["type"] == "ack" and r["agents"] == 2, r
            chars = c.wait_type("characters")["characters"]
            assert [x["name"] for x in chars] == ["a", "b"]
        r = c.request("spawn_group", count=4, center=[5, 0], target=[0, 3], spacing=1.5, speed=1.2, timeout=20)
        assert r["type"] == "ack" and len(r["ids"]) == 4
        assert c.request("pause", paused=False)["type"] == "ack"
        c.next_frame()
        starts = {i: c.frame.by_id(i).root for i in r["ids"]}
        c.pump_world(2.0)
        assert len(c.frame.characters) >= 5
        moved = [c.frame.by_id(i).root[2] - starts[i][2] for i in r["ids"]]
        assert min(moved) > 0.5, moved  # every member walks toward its target (+Z)
        r = c.request("controls", id=r["ids"][0], responsiveness=0.8, continuity=0.2)
        assert r["type"] == "ack" and r["controls"]["responsiveness"] == 0.8


def test_genmm_variants_play_side_by_side(server):
    with Client(server) as c:
        ex = "data:genmm-examples/Joe_Walk-In-Circle.bvh"
        r = c.request("genmm", examples=[ex], seconds=2, seed=3, variants=2, loop=True)
        assert r["type"] == "ack", r
        st = c.wait(lambda m: isinstance(m, dict) and m.get("type") == "genmm_status" and m["state"] != "running",
                    timeout=60)
        assert st["state"] == "done", st
        ids = st["ids"]
        assert len(ids) == 2
        f = c.next_frame()
        roots = [f.by_id(i).root for i in ids]
        assert abs(roots[0][0] - roots[1][0]) > 1.0  # side by side
        assert f.by_id(ids[0]).positions.shape[0] == 65
        chars = {x["id"]: x for x in c.messages[-10:] if x.get("type") == "characters" for x in x["characters"]}
        assert chars[ids[0]]["kind"] == "clip"
        # keys do not drive a clip player; the hero is still there
        assert c.request("select", id=c.welcome["selected"])["type"] == "ack"


def test_the_command_prints_its_url_and_serves(tmp_path_factory):
    """``motionmatch viewer --db DB --port 0`` (called through its module: the main CLI
    registers it separately) prints the URL it serves on, 127.0.0.1 by default."""
    import subprocess
    import sys

    from motionmatch.viewer._bundle import BundleError, ensure_bundle

    try:
        ensure_bundle(log=lambda m: None)
    except BundleError as e:
        pytest.skip(f"the page cannot be built here: {e}")
    db = tmp_path_factory.getbasetemp() / "viewer-test-db.npz"
    small_database(tmp_path_factory.getbasetemp())
    code = ("import sys, argparse; from motionmatch.cli import viewer_cmd; p = argparse.ArgumentParser(); "
            "viewer_cmd.register(p.add_subparsers()); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))")
    proc = subprocess.Popen([sys.executable, "-c", code, "viewer", "--db", str(db), "--port", "0", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        t0 = time.monotonic()
        while "http://" not in line and time.monotonic() - t0 < 60:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise AssertionError(proc.stderr.read())
        url = line.split("motionmatch viewer: ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "api/health", timeout=10) as r:
            assert json.loads(r.read())["ok"]
        with urllib.request.urlopen(url, timeout=10) as r:
            page = r.read().decode()
            assert "/static/app.js" in page and "Content-Security-Policy" in r.headers
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_session_steps_one_world_with_the_page_s_obstacles_and_controls(server):
    """The page's obstacles become the session world's scene, its characters the world's
    agents searching with the penalties, and the controls sliders their search weights;
    the debug panel shows the penalised obstacle."""
    with Client(server) as c:
        assert c.welcome["capabilities"]["environment"]
        c.request("obstacle_add", obstacle={"shape": "disk", "center": [0, 1.5], "radius": 0.3})
        c.send("key", key="w", down=True, yaw=0.0)
        c.request("debug", enabled=True)
        d = c.wait(lambda m: isinstance(m, dict) and m.get("type") == "debug"
                   and m.get("environment", {}).get("penalties", {}).get("obstacles"))
        assert len(d["environment"]["ellipses"]) == 3
        assert d["environment"]["penalties"]["obstacles"][0][0] == 1  # the obstacle's page id
        c.request("controls", evasion=0.3, responsiveness=1.5)
        c.pump(0.3)
        s = next(iter(server.viewer.sessions.values()))
        hero = s.chars[s.selected]
        assert len(s.world.scene) == 1 and s.world.agents == [hero.agent]
        assert hero.agent.chooser.controls.evasion == 0.3 and hero.agent.chooser.controls.responsiveness == 1.5
        assert hero.agent.chooser.log.times  # it searched with the penalties


# ------------------------------------------------------------------ plugins: environment, crowd, pose
def stepped_track(c, frames: int, ids, chunk: int = 5):
    """Step a paused session ``frames`` frames, ``chunk`` at a time; ``[T, A, J, 3]`` world
    joint positions of the characters ``ids`` after each chunk (every pose frame is not
    guaranteed to reach the client: the server coalesces what a slow reader cannot take)."""
    out = []
    for _ in range(frames // chunk):
        r = c.request("step", frames=chunk, timeout=30)
        assert r["type"] == "ack", r
        tick = r["tick"]
        if c.frame is None or c.frame.tick < tick:  # frames and replies travel separately
            c.wait(lambda m, tick=tick: not isinstance(m, dict) and m.tick >= tick)
        out.append(np.stack([c.frame.by_id(i).positions for i in ids]))
    return np.array(out)


def current_frame(c):
    """The pose frame after every reply received so far (paused session)."""
    r = c.request("step", frames=1)
    assert r["type"] == "ack", r
    if c.frame is None or c.frame.tick < r["tick"]:
        c.wait(lambda m: not isinstance(m, dict) and m.tick >= r["tick"])
    return c.frame


def _plugins_or_skip(c, *names):
    caps = c.welcome["capabilities"]
    missing = [n for n in names if not caps.get(n)]
    if missing:
        pytest.skip(f"viewer plugin(s) not installed: {missing}")


def _paused_with_a_disk_ahead(c):
    """Pause the session and put a 0.5 m disk 3 m ahead of the selected character:
    ``(character id, its root, disk centre (x, z), radius)``."""
    _plugins_or_skip(c, "environment")
    assert c.request("pause", paused=True)["type"] == "ack"
    start = c.root()
    centre, radius = (start[0], start[2] + 3.0), 0.5
    assert c.request("obstacle_add", obstacle={"shape": "disk", "center": list(centre), "radius": radius})["type"] == "ack"
    return c.welcome["selected"], start, centre, radius


def test_walking_at_a_disk_goes_around_it_without_touching_it(server):
    with Client(server) as c:
        cid, _start, centre, radius = _paused_with_a_disk_ahead(c)
        c.send("key", key="w", down=True, yaw=0.0)  # straight at it
        tr = stepped_track(c, 480, [cid])[:, 0]
        d = np.hypot(tr[..., 0] - centre[0], tr[..., 2] - centre[1])  # [T, J]
        assert d.min() > radius, f"a joint came {d.min():.2f} m from the centre of a {radius} m disk"
        assert tr[-1, 0, 2] > centre[1] + 1.0, tr[-1, 0]  # and it got past it
        c.request("debug", enabled=True)
        env = c.wait_type("debug")["environment"]
        assert len(env["ellipses"]) == 3 and "penalties" in env and "clearance" in env
        # the sliders reach the penalised search: the controls it uses are the character's
        r = c.request("controls", responsiveness=1.5, continuity=0.8, evasion=0.2, anticipation=1.2)
        assert r["type"] == "ack", r
        c.request("step", frames=12)
        env = c.wait_type("debug")["environment"]
        assert env["controls"] == {"responsiveness": 1.5, "continuity": 0.8, "evasion": 0.2, "anticipation": 1.2}


def test_a_path_drawn_through_an_obstacle_is_walked_around(server):
    with Client(server) as c:
        cid, start, centre, radius = _paused_with_a_disk_ahead(c)
        pts = [[i * 3.0 / 60, start[0], start[2] + 0.3 + 5.7 * i / 60] for i in range(61)]
        assert c.request("path", points=pts, mode="local")["type"] == "ack"
        tr = stepped_track(c, 600, [cid])[:, 0]
        d = np.hypot(tr[..., 0] - centre[0], tr[..., 2] - centre[1])
        # the root keeps clear, and so do the legs. The arms are not bounded: the body
        # ellipses that the penalties score lie at the trajectory's future samples (the
        # paper's), so the poses played between a search and the first sample go unchecked;
        # a jog clip of the test data starts with a wide arm swing that reaches 0.3 m over
        # a disk the root clears by 0.38 m (ten variants measured, either revision mode)
        legs = [j for j, n in enumerate(c.welcome["skeletons"]["0"]["names"]) if any(k in n for k in ("Leg", "Foot", "Toe"))]
        assert legs and d[:, 0].min() > radius + 0.1 and d[:, legs].min() > radius - 0.05, \
            (d[:, 0].min(), d[:, legs].min())
        # and it reached the end: the path follower says so (within its end radius, then settled)
        assert any(m.get("type") == "path_done" and m["reason"] == "completed" for m in c.messages), \
            [m for m in c.messages if m.get("type") == "path_done"]
        assert tr[-1, 0, 2] > start[2] + 5.0, tr[-1, 0]


def test_two_agents_walking_at_each_other_pass(server):
    with Client(server) as c:
        _plugins_or_skip(c, "environment", "crowd", "scenario")
        r = c.request("scenario_load", file="scenarios:pass_each_other.json", timeout=20)
        assert r["type"] == "ack" and r["agents"] == 2, r
        chars = c.wait_type("characters")["characters"]
        ids = [x["id"] for x in chars]
        tr = stepped_track(c, 720, ids)  # 12 s
        roots = tr[:, :, 0]
        gap = np.hypot(roots[:, 0, 0] - roots[:, 1, 0], roots[:, 0, 2] - roots[:, 1, 2])
        assert gap.min() > 0.45, f"the two came within {gap.min():.2f} m of each other"
        assert np.hypot(roots[-1, 0, 0], roots[-1, 0, 2] - 8) < 0.8, roots[-1, 0]
        assert np.hypot(roots[-1, 1, 0] - 0.15, roots[-1, 1, 2]) < 0.8, roots[-1, 1]


def test_a_spawned_group_reaches_its_goals(server):
    with Client(server) as c:
        _plugins_or_skip(c, "crowd")
        assert c.request("pause", paused=True)["type"] == "ack"
        r = c.request("spawn_group", count=4, center=[6, 0], target=[0, 5], spacing=1.2, speed=1.3,
                      via=[[1.5, 2.5]], timeout=20)
        assert r["type"] == "ack" and len(r["ids"]) == 4, r
        ids = r["ids"]
        f = current_frame(c)
        starts = {i: f.by_id(i).root.copy() for i in ids}
        tr = stepped_track(c, 720, ids)
        arrived = {m["id"] for m in c.messages if m.get("type") == "arrived"}
        assert arrived >= set(ids), (arrived, ids)
        for k, i in enumerate(ids):
            goal = starts[i][[0, 2]] + np.array([0.0, 5.0])
            assert np.hypot(*(tr[-1, k, 0, [0, 2]] - goal)) < 0.6, (i, tr[-1, k, 0], goal)
            # through the waypoint (1.5, 2.5) from its own place, not straight to the goal
            way = starts[i][[0, 2]] + np.array([1.5, 2.5])
            assert np.min(np.hypot(*(tr[:, k, 0][:, [0, 2]] - way).T)) < 1.2
        gaps = [np.hypot(*(tr[:, a, 0, [0, 2]] - tr[:, b, 0, [0, 2]]).T).min()
                for a, b in itertools.combinations(range(4), 2)]
        assert min(gaps) > 0.35, gaps


@pytest.fixture(scope="module")
def walk_run_keypoints(server, request):
    """A walk -> run performance from held-out clips, filmed by the pose package's virtual
    camera from a held-out angle, saved as a keypoint file in the server's ``poses`` folder;
    the viewer's pose source uses the quick default classifier (trained on the first run, then cached)."""
    pytest.importorskip("sklearn")
    from motionmatch.viewer import pose as plugin
    path, walk_s, imp = walk_run_keypoint_file(server.poses / "walk_run.npz",
                                               request.config.cache.mkdir("motionmatch-pose-quick"))
    plugin.set_classifier(imp, "quick default classifier (test)")
    yield path, walk_s
    plugin.set_classifier(None)


def test_a_recorded_keypoint_file_makes_the_character_walk_then_run(server, walk_run_keypoints):
    _, walk_s = walk_run_keypoints
    with Client(server) as c:
        _plugins_or_skip(c, "pose")
        c.send("files", kind="keypoints")
        files = [f["id"] for f in c.wait_type("files", kind="keypoints")["files"]]
        assert "poses:walk_run.npz" in files, files
        assert c.request("pause", paused=True)["type"] == "ack"
        cid = c.welcome["selected"]
        r = c.request("pose_source", kind="file", file="poses:walk_run.npz")
        assert r["type"] == "ack" and r["state"] == "on", r
        tr = stepped_track(c, 390, [cid], chunk=6)[:, 0, 0]  # 6.5 s, a root sample every 0.1 s
        status = [m for m in c.messages if m.get("type") == "pose_status"]
        assert status and status[-1]["classifier"].startswith("quick")
        assert any(m["state"] == "running" for m in status) and status[-1]["state"] in ("running", "finished")
        # the command most often reported in each half of the performance
        half = [collections.Counter(m["command"].split("_")[0] for m in status if lo <= m["t"] < hi).most_common(1)
                for lo, hi in ((0.5, walk_s), (walk_s + 0.5, 2 * walk_s))]
        assert half[0][0][0] == "walk" and half[1][0][0] == "run", half
        speed = np.hypot(*np.diff(tr[:, [0, 2]], axis=0).T) / 0.1
        t = np.arange(1, len(tr)) * 0.1
        walking = np.median(speed[(t > 1.0) & (t < walk_s)])
        running = np.median(speed[(t > walk_s + 1.0) & (t < walk_s + 3.0)])
        assert 0.5 < walking < 2.2 and running > walking + 0.5, (walking, running)
        assert c.request("pose_source", kind="off")["type"] == "ack"
        # a webcam source without keypoints waits and says why
        assert c.request("pose_source", kind="webcam")["type"] == "ack"
        st = c.wait_type("pose_status")
        assert st["state"] in ("waiting", "running") and "pose_keypoints" in st.get("message", "")
        assert c.request("pose_keypoints", keypoints=[[0, 0, 1]] * 5)["type"] == "error"  # 13 keypoints needed


def test_every_scenario_of_the_repository_loads_and_plays(server):
    with Client(server) as c:
        _plugins_or_skip(c, "scenario")
        c.send("files", kind="scenario")
        files = [f["id"] for f in c.wait_type("files", kind="scenario")["files"] if f["id"].startswith("repo:")]
        assert "repo:dense-obstacles.json" in files and len(files) >= 8, files
        for f in files:
            r = c.request("scenario_load", file=f, timeout=60)
            assert r["type"] == "ack" and r["agents"] >= 1, (f, r)
            chars = c.wait_type("characters")["characters"]
            ids = [x["id"] for x in chars[:4]]
            f0 = current_frame(c)
            start = np.array([f0.by_id(i).root for i in ids])
            assert c.request("step", frames=120, timeout=120)["type"] == "ack"
            f1 = current_frame(c)
            moved = np.hypot(*(np.array([f1.by_id(i).root for i in ids]) - start)[:, [0, 2]].T)
            errors = [m for m in c.messages if m.get("type") == "error" and (m.get("seq") or 0) >= r["seq"]]
            assert not errors, (f, errors)
            if "cubes" not in f:  # the standing character of cubes-approach waits for the cubes
                assert moved.max() > 0.3, (f, moved)  # its agents act: scripts, paths, goals


def test_a_spawned_group_spreads_its_searches_over_ticks(tmp_path_factory):
    """Members of a group spawned together all search on their first tick (their first
    intents are sharp changes); afterwards their periodic searches are spread over the
    search interval instead of bursting on the same tick."""
    from motionmatch.viewer.server import Viewer
    from motionmatch.viewer.session import Session

    db = small_database(tmp_path_factory.getbasetemp())
    s = Session(Viewer(db, adaptive_rate=False), lambda item: None)
    n = 12
    s.handle({"type": "spawn_group", "seq": None, "count": n, "center": (0.0, 0.0), "spacing": 1.5,
              "target": (0.0, 40.0), "speed": 1.3})
    group = [ch for ch in s.chars.values() if ch.id != s.selected]
    assert len(group) == n
    per_tick = []
    for _ in range(120):
        s.step()
        per_tick.append(sum(1 for ch in group if ch.last is not None and ch.last.searched))
    assert per_tick[0] == n  # everybody's first search
    interval_ticks = round(group[0].ctrl.s.search_interval * 60)
    # spread: about n / interval_ticks periodic searches per tick, plus the odd forced one
    assert max(per_tick[2:]) <= -(-n // interval_ticks) + 2, per_tick


# ------------------------------------------------------------------ scenario fields as on the command line
def scenario_session(server, name: str, scenario: dict, *, need_env: bool = True):
    """A session (driven directly, stepped here) with ``scenario`` written to the server's
    scenarios folder and loaded: ``(session, {agent name: character}, reply, messages)``."""
    from motionmatch.viewer.server import Viewer
    from motionmatch.viewer.session import Session

    (server.scenarios / name).write_text(json.dumps(scenario))
    out: list = []
    s = Session(Viewer(server.viewer.db, catalog=server.viewer.catalog, adaptive_rate=False), out.append)
    s.handle({"type": "scenario_load", "file": f"scenarios:{name}", "seq": 1})
    reply = [m for m in out if isinstance(m, dict) and m.get("seq") == 1][-1]
    assert reply["type"] == "ack", reply
    assert s.paused  # loaded paused, at its start
    return s, {ch.name: ch for ch in s.chars.values()}, reply, out


def step_roots(s, ticks: int, chars) -> np.ndarray:
    """Step the session ``ticks`` ticks: ``[T, A, 2]`` root ground positions after each."""
    out = []
    for _ in range(ticks):
        s.step()
        out.append([ch.root_xz for ch in chars])
    return np.array(out)


def test_scenario_start_time_delays_the_agent(server):
    s, ch, _, _ = scenario_session(server, "start_time.json", {
        "name": "start-time", "duration": 8,
        "agents": [{"name": "early", "start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]}},
                   {"name": "late", "start": [3, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]},
                    "start_time": 1.5}]})
    a, b = ch["early"], ch["late"]
    tr = step_roots(s, 84, [a, b])  # 1.4 s
    forward = tr[:, :, 1] - tr[0, :, 1]  # along +Z (W)
    assert forward[-1, 0] > 0.5, forward[-1]  # the other one walks from the start
    assert np.abs(forward[:, 1]).max() < 0.1, forward[-1]  # it stands (idle) until its start_time
    tr2 = step_roots(s, 120, [a, b])  # to 3.4 s
    assert tr2[-1, 1, 1] - tr[-1, 1, 1] > 0.8, (tr[-1, 1], tr2[-1, 1])  # then walks its script (W: +Z)
    assert b.agent.start_time == 1.5 and a.agent.start_time == 0.0


def test_scenario_environment_false_walks_through_what_the_others_avoid(server):
    s, ch, _, _ = scenario_session(server, "environment_false.json", {
        "name": "plain-and-aware", "duration": 10,
        "obstacles": [{"shape": "disk", "center": [0, 3], "radius": 0.5},
                      {"shape": "disk", "center": [5, 3], "radius": 0.5}],
        "agents": [{"name": "aware", "start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]}},
                   {"name": "plain", "start": [5, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]},
                    "environment": False}]})
    a, p = ch["aware"], ch["plain"]
    tr = step_roots(s, 360, [a, p])  # 6 s
    d_aware = np.hypot(tr[:, 0, 0] - 0.0, tr[:, 0, 1] - 3.0)
    d_plain = np.hypot(tr[:, 1, 0] - 5.0, tr[:, 1, 1] - 3.0)
    assert d_plain.min() < 0.3, d_plain.min()  # straight through the disk
    assert d_aware.min() > 0.5, d_aware.min()  # never inside it
    assert p.agent.chooser.settings.enabled is False
    assert a.agent.chooser.settings.enabled is True


def test_scenario_penalty_and_controls_reach_the_chooser(server):
    from motionmatch.runtime.chooser import EnvironmentChooser

    s, ch, _, _ = scenario_session(server, "settings.json", {
        "name": "settings", "duration": 10,
        "obstacles": [{"shape": "disk", "center": [0, 2.5], "radius": 0.4}],
        "penalty": {"use_heights": False},
        "search": {"method": "linear"},
        "controller": {"search_interval": 0.25, "controls": {"evasion": 0.3, "anticipation": 0.9}},
        "database": {"locomotion_tags": "!dance"}, "steering": {"view_distance": 2.5},
        "agents": [{"name": "a", "start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]},
                    "controls": {"responsiveness": 3}},
                   {"name": "b", "start": [3, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]}}]})
    a, b = ch["a"], ch["b"]
    used = []
    EnvironmentChooser.record = lambda q, obs, cnt, kw, res: used.append((kw["penalty"], kw["options"].method))
    try:
        step_roots(s, 90, [a, b])
    finally:
        EnvironmentChooser.record = None
    for c in (a, b):
        chooser = c.agent.chooser
        assert chooser.settings.penalty.use_heights is False
        assert chooser.settings.search.method == "linear"
        assert chooser.controls.evasion == 0.3 and chooser.controls.anticipation == 0.9  # the scenario's defaults
        assert c.ctrl.s.search_interval == 0.25 and c.ctrl.s.locomotion_tags == "!dance"
    assert a.agent.chooser.controls.responsiveness == 3.0  # the agent's own
    assert b.agent.chooser.controls.responsiveness == 2.0  # the default Controls'
    assert used and all(p.use_heights is False and m == "linear" for p, m in used)
    # a search every 0.25 s (15 ticks), not the viewer's 0.1 s: about 6 in 1.5 s, a few forced ones aside
    assert len(b.agent.chooser.log.times) <= 10, len(b.agent.chooser.log.times)


def test_scenario_path_loop_goes_round(server):
    square = [[0, 0], [0, 2.5], [2.5, 2.5], [2.5, 0], [0, 0]]  # 10 m, closed
    s, ch, _, _ = scenario_session(server, "loop.json", {
        "name": "loop", "duration": 30,
        "agents": [{"name": "looping", "start": [0, 0], "path": square, "speed": 1.3, "loop": True},
                   {"name": "once", "start": [6, 0], "path": [[x + 6, z] for x, z in square], "speed": 1.3}]})
    a, b = ch["looping"], ch["once"]
    tr = step_roots(s, 900, [a, b])  # 15 s: once round takes about 13 s (the walk clips of this database)
    walked = np.hypot(*np.diff(tr, axis=0).T).sum(axis=1)  # [A] metres
    last = np.hypot(*(tr[-1] - tr[-121]).T) / 2.0  # mean speed over the last 2 s (m/s)
    assert last[0] > 0.4 and last[1] < 0.25, (walked, last)  # one goes on round, the other stopped at its end
    assert walked[0] > walked[1] + 1.0, walked
    assert np.hypot(*(tr[-1, 1] - [6.0, 0.0])) < 0.8, tr[-1, 1]
    assert b.agent.source.arrived and not a.agent.source.arrived  # the loop has no end to reach


def test_scenario_tags_restrict_the_agent_clips(server):
    s, ch, _, _ = scenario_session(server, "tags.json", {
        "name": "tags", "duration": 10,
        "agents": [{"name": "runner", "start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]},
                    "tags": "run"},
                   {"name": "walker", "start": [3, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]}}]})
    r, w = ch["runner"], ch["walker"]
    db = s.db
    run = db.mask("run")
    frames = []
    for _ in range(180):
        s.step()
        frames.append((int(r.ctrl.frame), int(w.ctrl.frame)))
    f = np.array(frames)
    assert run[f[:, 0]].all(), [db.clip_names[db.frame_clip[i]] for i in f[~run[f[:, 0]], 0][:5]]
    assert run[f[:, 1]].mean() < 0.5  # without tags the walk key plays walking clips


def test_scenario_duration_pauses_and_fields_that_cannot_apply_are_named(server):
    s, _, reply, out = scenario_session(server, "short.json", {
        "name": "short", "duration": 1.0, "fps": 30, "description": "d", "expect": "e",
        "regions": {"start": {"z": [0, 1]}}, "database": {"requires": ["crawl"]},
        "agents": [{"name": "a", "start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]}}]})
    assert reply["duration"] == 1.0 and reply["description"] == "d" and reply["expect"] == "e"
    notes = " ".join(reply["notes"])
    assert "fps 30" in notes and "regions" in notes and "database.requires ['crawl']" in notes, notes
    warn = [m for m in out if isinstance(m, dict) and m.get("type") == "warning"]
    assert warn and "fps" in warn[-1]["message"] and "regions" in warn[-1]["message"]
    s.paused = False
    for _ in range(59):
        s.step()
        assert not s.paused
    s.step()  # 1.0 s: the scenario is over
    assert s.paused
    ends = [m for m in out if isinstance(m, dict) and m.get("type") == "scenario_end"]
    assert len(ends) == 1 and ends[0]["duration"] == 1.0
    s.paused = False  # Play goes on past the end, without pausing again
    for _ in range(30):
        s.step()
    assert not s.paused and len([m for m in out if isinstance(m, dict) and m.get("type") == "scenario_end"]) == 1
    # a bad field is refused before the session changes
    (server.scenarios / "bad_controller.json").write_text(json.dumps({
        "name": "bad", "duration": 2, "controller": {"search_interval": "often"},
        "agents": [{"name": "x", "start": [0, 0]}]}))
    before = set(s.chars)
    s.handle({"type": "scenario_load", "file": "scenarios:bad_controller.json", "seq": 2})
    err = [m for m in out if isinstance(m, dict) and m.get("seq") == 2][-1]
    assert err["type"] == "error" and "search_interval" in err["message"], err
    assert set(s.chars) == before


def test_a_scenario_out_of_bounds_is_an_error_reply_and_the_session_lives(server):
    """A start at 1e308 (which would break the pose stream), controls of 1e9, a 400-digit
    number, NaN, a string for a number: each file is refused in one line that names the
    file id and the field (not the server's folders), the session unchanged; a good
    scenario then loads and steps."""
    from motionmatch.viewer.server import Viewer
    from motionmatch.viewer.session import Session

    def agent(**kw):
        return {"duration": 5, "agents": [{"name": "x", "start": [0, 0], **kw}]}

    bad = {"far.json": (json.dumps(agent(start=[1e308, 0])), "agents[0].start[0] must be between -1000 and 1000"),
           "fast.json": (json.dumps(agent(controls={"responsiveness": 1e9})),
                         "agents[0].controls.responsiveness must be between 0 and 4"),
           "digits.json": (json.dumps(agent(goal=[10**400, 0])), "line 1: the number 1000"),  # JSON's own limit
           "nan.json": ('{"duration": NaN, "agents": [{"start": [0, 0]}]}', "duration must be finite"),
           "word.json": (json.dumps(agent(speed="fast")), "agents[0].speed must be a number, got str")}
    out: list = []
    s = Session(Viewer(server.viewer.db, catalog=server.viewer.catalog, adaptive_rate=False), out.append)
    before = set(s.chars)
    for seq, (name, (text, says)) in enumerate(bad.items(), 1):
        (server.scenarios / name).write_text(text)
        s.handle({"type": "scenario_load", "file": f"scenarios:{name}", "seq": seq})
        err = [m for m in out if isinstance(m, dict) and m.get("seq") == seq][-1]
        assert err["type"] == "error" and err["message"].startswith(f"scenarios:{name}: "), err
        assert says in err["message"] and "\n" not in err["message"], err
        assert str(server.scenarios) not in err["message"], err
        assert set(s.chars) == before and s.scenario is None
    s.handle({"type": "scenario_load", "file": "scenarios:two_agents.json", "seq": 99})
    ack = [m for m in out if isinstance(m, dict) and m.get("seq") == 99][-1]
    assert ack["type"] == "ack" and ack["agents"] == 2, ack
    t = s.world.time
    s.step()
    assert s.world.time > t and len(s.chars) == 2


def test_a_scenario_plays_the_same_in_the_viewer_as_on_the_command_line(server):
    """One engine: the same scenario file, stepped by a viewer session and by
    ``motionmatch scenario``'s :func:`~motionmatch.runtime.scenarios.run_scenario` for 20 s,
    gives the same root trajectories (1e-6 m): scripts, a looping path, crowd steering to
    goals through waypoints, a late start, a plain agent, static and moving obstacles."""
    from motionmatch.environment.scenario import parse_scenario
    from motionmatch.runtime.scenarios import run_scenario

    scenario = {
        "name": "parity", "duration": 20,
        "obstacles": [{"shape": "disk", "center": [0.3, 3.0], "radius": 0.4},
                      {"shape": "box", "center": [4.0, 6.0], "size": [1.0, 0.6], "yaw_deg": 30},
                      {"shape": "disk", "center": [-3.0, 4.0], "radius": 0.3, "velocity": [0.2, 0.0]}],
        "agents": [
            {"name": "scripted", "start": [0, 0], "script": {"events": [{"t": 0, "keys": ["w"]},
                                                                        {"t": 6, "keys": ["w", "d"]},
                                                                        {"t": 12, "keys": []}]}},
            {"name": "looping", "start": [4, 0], "path": [[4, 0], [4, 4], [7, 4], [7, 0], [4, 0]], "speed": 1.2,
             "loop": True},
            {"name": "goal", "start": [-3, 0], "goal": [-3, 9], "via": [[-2, 4]], "speed": 1.3},
            {"name": "late", "start": [2, -3], "goal": [2, 8], "start_time": 2.5},
            {"name": "plain", "start": [-6, 0], "script": {"events": [{"t": 0, "keys": ["w"]}]},
             "environment": False}]}
    s, ch, _, _ = scenario_session(server, "parity.json", scenario)
    names = [a["name"] for a in scenario["agents"]]
    chars = [ch[n] for n in names]
    viewer_roots = step_roots(s, 1199, chars)  # [T, A, 2] after each tick

    _world, rec = run_scenario(server.viewer.db, parse_scenario(scenario), record_poses=False)
    cli_roots = rec.root_positions[:, 1:][..., [0, 2]].transpose(1, 0, 2)  # frame 0: the start (1200 frames)
    assert rec.names == names
    err = np.abs(viewer_roots - cli_roots).max()
    assert err <= 1e-6, err
    walked = np.hypot(*np.diff(cli_roots, axis=0).T).sum(axis=1)  # [A] metres (a loop may end where it began)
    assert (walked > 3.0).all(), walked  # everybody went somewhere


def test_a_mode_the_database_cannot_play_is_refused_with_a_reason(server):
    """The test database has no crawling (nor dance) clip: C is answered with
    ``mode_unavailable`` and a one-line reason, and the character walks on without ever
    claiming the creep mode; the welcome names every mode with its availability."""
    with Client(server) as c:
        modes = c.welcome["modes"]
        assert modes["locomotion"]["available"] and modes["idle"]["available"]
        assert not modes["creep"]["available"] and "crawling" in modes["creep"]["reason"]
        assert not modes["dance"]["available"]
        assert c.welcome["mode_keys"] == {"j": "jump", "p": "dance", "c": "creep", "f": "punch"}
        c.pump(0.3)
        p0 = c.root()
        c.send("key", key="KeyW", down=True, yaw=0.0)
        c.send("key", key="KeyC", down=True, yaw=0.0)
        m = c.wait_type("mode_unavailable")
        assert m["mode"] == "creep" and m["key"] == "c" and m["message"] == f"creep: {m['reason']}"
        assert "\n" not in m["message"]
        start = len(c.frames)
        c.pump_world(1.5)
        shown = {f.by_id(c.welcome["selected"]).mode for f in c.frames[start:]}
        assert "creep" not in shown and "locomotion" in shown, shown
        assert c.root()[2] - p0[2] > 0.5  # it walks (at the walking speed, not the creep speed)
        c.send("keys", held=["w", "p"], yaw=0.0)
        assert c.wait_type("mode_unavailable")["mode"] == "dance"
        c.send("key", key="KeyC", down=False, yaw=0.0)
        c.send("key", key="KeyW", down=False, yaw=0.0)
        r = c.request("hello")
        assert r["type"] == "ack"  # the session lives


def test_characters_outside_the_pages_view_are_sent_at_a_sixth_of_the_rate(tmp_path_factory):
    """With a view from the page, the frames carry the selected character and those the
    camera sees every tick, the others every sixth tick (staggered), flagged partial; the
    scrub history keeps every character; while paused, or with the view cleared, every
    frame carries everyone."""
    from motionmatch.viewer.protocol import FLAG_PARTIAL, decode_frame
    from motionmatch.viewer.server import Viewer
    from motionmatch.viewer.session import OFF_VIEW_EVERY, Session

    db = small_database(tmp_path_factory.getbasetemp())
    out: list = []
    s = Session(Viewer(db, adaptive_rate=False), out.append)
    hero = s.selected
    s.handle({"type": "spawn_group", "seq": None, "count": 4, "center": (0.0, 3.0), "spacing": 1.5,
              "target": (0.0, 0.0), "speed": 1.3})
    s.handle({"type": "spawn_group", "seq": None, "count": 4, "center": (60.0, 0.0), "spacing": 1.5,
              "target": (0.0, 0.0), "speed": 1.3})
    near = [c for c in s.chars if c != hero and s.chars[c].root_xz[0] < 10]
    far = [c for c in s.chars if s.chars[c].root_xz[0] > 50]
    assert len(near) == len(far) == 4
    s.handle({"type": "view", "seq": 1, "polygon": [(-8.0, -8.0), (8.0, -8.0), (8.0, 8.0), (-8.0, 8.0)]})
    s.paused = False

    def run(ticks):
        del out[:]
        for _ in range(ticks):
            s.step()
            s._emit_pose(stepped=True)
        return [decode_frame(m) for m in out if isinstance(m, (bytes, bytearray))]

    frames = run(60)
    seen = {c: sum(any(x.id == c for x in f.characters) for f in frames) for c in s.chars}
    assert seen[hero] == 60 and all(seen[c] == 60 for c in near), seen
    assert all(seen[c] == 60 // OFF_VIEW_EVERY for c in far), seen
    assert all(f.flags & FLAG_PARTIAL for f in frames if len(f.characters) < len(s.chars))
    assert len(decode_frame(s.history[-1]).characters) == len(s.chars)
    # the view cleared (the page's polygon null): everyone, every frame
    s.handle({"type": "view", "seq": 2, "polygon": None})
    assert all(len(f.characters) == len(s.chars) and not f.flags & FLAG_PARTIAL for f in run(12))


def test_ground_distance_to_the_view_polygon_has_known_answers():
    from motionmatch.viewer.session import ground_distance

    square = np.array([(0.0, 0.0), (4.0, 0.0), (4.0, 4.0), (0.0, 4.0)])
    pts = np.array([(2.0, 2.0), (1.0, 3.5), (6.0, 2.0), (2.0, -3.0), (7.0, 8.0)])
    want = [-2.0, -0.5, 2.0, 3.0, 4.0]  # (a corner: the larger of its two edge distances)
    np.testing.assert_allclose(ground_distance(square, pts), want)
    np.testing.assert_allclose(ground_distance(square[::-1], pts), want)  # either turn
    assert np.all(ground_distance(np.zeros((3, 2)), pts) == -np.inf)  # no area: everything
