"""Hostile input costs little (issue 34): real websocket clients against a real server.

A tab that floods expensive messages leaves the others their frames and acks; a closed
tab's work stops within a second; exports and a page that does not read keep memory
bounded; downloads carry any Unicode name; hostile keypoint files get typed errors; a
server beyond loopback needs its token. Precise numbers: ``benchmarks/bench_viewer_hostile.py``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request
import zipfile
from urllib.parse import unquote

import numpy as np
import pytest

from test_viewer_support import Client, health, small_database, start_server, viewer_deps_or_skip

viewer_deps_or_skip()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = small_database(tmp_path_factory.getbasetemp())
    poses = tmp_path_factory.mktemp("hostile-poses")
    srv = start_server(db, {"poses": poses})
    srv.poses = poses
    yield srv
    srv.stop()


def big_scene(n: int = 256, waypoints: int = 40) -> dict:
    """A valid scene of ``n`` moving obstacles, about 250 KB of JSON (the most a message holds)."""
    return {"obstacles": [{"shape": "disk", "center": [float(i % 16), float(i // 16)], "radius": 0.3,
                           "path": [[float(t), float(i % 16) + 0.01 * t, float(i // 16)] for t in range(waypoints)]}
                          for i in range(n)]}


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmRSS")


def flood(server, text: str, stop: threading.Event, rate: float = 120.0) -> dict:
    """Send ``text`` at ``rate`` per second from another tab until ``stop``; counts of the replies."""
    out = {"sent": 0}

    def run():
        from websockets.sync.client import connect

        with connect(server.url.replace("http://", "ws://") + "ws", max_size=None, proxy=None) as ws:
            t = time.monotonic()
            while not stop.is_set():
                ws.send(text)
                out["sent"] += 1
                with_timeout = t + 1.0 / rate - time.monotonic()
                t += 1.0 / rate
                try:
                    while True:
                        m = ws.recv(timeout=max(with_timeout, 0.0))
                        if isinstance(m, str):
                            code = json.loads(m).get("code") or json.loads(m)["type"]
                            out[code] = out.get(code, 0) + 1
                        with_timeout = t - time.monotonic()
                        if with_timeout <= 0:
                            break
                except TimeoutError:
                    pass

    th = threading.Thread(target=run, daemon=True)
    th.start()
    out["thread"] = th
    return out


def test_a_tab_flooding_expensive_messages_leaves_another_its_frames_and_acks(server):
    scene = json.dumps({"type": "scene_set", "scene": big_scene()})
    assert 200_000 < len(scene) < 256 * 1024
    with Client(server) as b:
        b.pump(0.5)
        stop = threading.Event()
        counts = flood(server, scene, stop)
        try:
            time.sleep(1.0)  # the flood's burst is spent
            frames0, t0 = len(b.frames), time.monotonic()
            acks = []
            while time.monotonic() - t0 < 4.0:
                s = time.monotonic()
                assert b.request("hello", timeout=10)["type"] == "ack"
                acks.append(time.monotonic() - s)
                b.pump(0.1)
            fps = (len(b.frames) - frames0) / (time.monotonic() - t0)
        finally:
            stop.set()
            counts["thread"].join(10)
    # the flooder was refused or kept waiting (its share of server time), never served at will
    assert counts.get("busy", 0) + counts.get("rate_limited", 0) > 0, counts
    assert counts.get("ack", 0) < counts["sent"] / 2, counts
    # a loaded 2-core machine with the clients in this process: generous bounds (the benchmark
    # measures >= 50 frames/s and acks under 100 ms with the server in its own process)
    assert fps >= 25, (fps, counts)
    assert float(np.median(acks)) < 0.1 and float(np.percentile(acks, 90)) < 0.5, (np.round(acks, 3), counts)


def test_a_closed_tab_stops_its_work_within_a_second(server):
    before = set(server.viewer.sessions)
    tab = SilentTab(server.port)  # a tab that is closed, not one that says goodbye
    assert wait_for(lambda: len(set(server.viewer.sessions) - before) == 1, 5.0)
    (sid,) = set(server.viewer.sessions) - before
    session = server.viewer.sessions[sid]
    # expensive work queued: long paths, many of them (an hour of drawing: 1-2 s each, were it
    # followed; two minutes: about 0.1 s each)
    for seconds in (3000.0, 119.0):
        pts = [[i * seconds / 4096, 5 * np.sin(i / 50), i * 0.01] for i in range(4096)]
        text = json.dumps({"type": "path", "points": pts, "scale": 0.05})
        for _ in range(30):
            tab.send(text)
    time.sleep(0.3)
    assert session.alive
    t0 = time.monotonic()
    tab.close()
    session.thread.join(10.0)
    # within 1 s (benchmarks/bench_viewer_hostile.py: 0.03-0.06 s); generous here, for a loaded machine
    assert not session.alive and time.monotonic() - t0 < 3.0, time.monotonic() - t0
    assert len(session.inbox) == 0
    assert wait_for(lambda: health(server)["closing"] == 0 and sid not in server.viewer.sessions, 2.0)


def test_a_closed_tabs_synthesis_stops_and_a_new_tab_is_the_same_client(server):
    from conftest import data_root
    from test_viewer_support import CLIPS

    example = data_root() / "lafan1-60fps" / f"{CLIPS[1]}.bvh"
    (server.poses / "example.bvh").write_bytes(example.read_bytes())
    c = Client(server)
    r = c.request("genmm", examples=["poses:example.bvh"], seconds=120, variants=8, seed=1)
    assert r["type"] == "ack", r
    assert wait_for(lambda: server.viewer.client_jobs.running("genmm") == 1, 5.0)
    # the same client, another tab: one synthesis at a time
    with Client(server) as d:
        r2 = d.request("genmm", examples=["poses:example.bvh"], seconds=2)
        assert r2["type"] == "error" and "already running" in r2["message"], r2
    t0 = time.monotonic()
    c.close()
    assert wait_for(lambda: server.viewer.client_jobs.running("genmm") == 0, 5.0)
    assert time.monotonic() - t0 < 3.0, time.monotonic() - t0  # benchmark: 0.002 s after the close


def wait_for(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def test_export_floods_keep_one_export_at_a_time_and_memory_bounded(server):
    with Client(server) as c:
        c.send("key", key="KeyW", down=True, yaw=0.0)
        c.request("pause", paused=True)
        for _ in range(6):  # a longer recording: 60 s
            assert c.request("step", frames=600, timeout=60)["type"] == "ack"
        before = rss_mb()
        cid = c.welcome["selected"]
        text = json.dumps({"type": "export", "id": cid})
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.0:
            c.send_raw(text)
            c.pump(1 / 110)
        c.pump(2.0)
        grown = rss_mb() - before
        refused = [m for m in c.messages if m.get("type") == "error" and "already running" in m.get("message", "")]
        downloads = [m for m in c.messages if m.get("type") == "download"]
        assert refused and downloads
        assert server.viewer.client_jobs.running("export") <= 1
        assert server.viewer.downloads.bytes <= server.viewer.downloads.per_session
        assert grown < 200, grown


class SilentTab:
    """A websocket client that sends and never reads (a raw socket with a small buffer)."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                           ).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert b" 101 " in head.split(b"\r\n", 1)[0], head

    def send(self, text: str) -> None:
        data, mask = text.encode(), os.urandom(4)
        n = len(data)
        size = bytes([0x80 | n]) if n < 126 else (bytes([0x80 | 126]) + n.to_bytes(2, "big") if n < 65536
                                                 else bytes([0x80 | 127]) + n.to_bytes(8, "big"))
        masked = (np.frombuffer(data, np.uint8) ^ np.resize(np.frombuffer(mask, np.uint8), n)).tobytes()
        self.sock.sendall(b"\x81" + size + mask + masked)

    def close(self) -> None:
        self.sock.close()


def test_a_page_that_does_not_read_does_not_grow_the_server(tmp_path_factory):
    """Each obstacle change is answered with the whole list (250 KB for 256 moving obstacles): a page
    that sends changes and reads nothing would grow the server by megabytes a second."""
    from motionmatch.viewer.messages import Limits

    cap = 2**20
    srv = start_server(small_database(tmp_path_factory.getbasetemp()), {}, limits=Limits(outbox_bytes=cap))
    tab = SilentTab(srv.port)
    try:
        tab.send(json.dumps({"type": "scene_set", "scene": big_scene()}))
        before = rss_mb()
        update = json.dumps({"type": "obstacle_update", "id": 1,
                             "obstacle": {"shape": "disk", "center": [5.0, 0.0], "radius": 0.2}})
        peak, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < 10.0 and peak < cap * 3 // 4:  # the socket's buffers fill, then the outbox
            for _ in range(10):
                tab.send(update)
            time.sleep(0.1)
            peak = max(peak, health(srv)["waiting_bytes"])
        for _ in range(20):  # and it stays bounded
            tab.send(update)
            time.sleep(0.05)
            peak = max(peak, health(srv)["waiting_bytes"])
        grown = rss_mb() - before
        assert cap // 2 < peak <= cap + 2**20, peak  # it filled, and no further
        assert grown < 200, grown
        (outbox,) = srv.viewer.outboxes.values()
        assert outbox.dropped > 0
    finally:
        tab.close()
        srv.stop()


@pytest.mark.parametrize("name", ["名前", "Ωmega", "plain"])
def test_downloads_carry_any_unicode_name(server, name):
    with Client(server) as c:
        r = c.request("add_character", name=name, position=[2.0, 0.0])
        assert r["type"] == "ack"
        c.pump(0.3)
        dl = c.request("export", id=r["id"]) and c.wait_type("download", timeout=60)
        with urllib.request.urlopen(server.url.rstrip("/") + dl["url"], timeout=10) as resp:
            assert resp.status == 200 and resp.read()
            header = resp.headers["Content-Disposition"]
    assert header.isascii()
    star = re.search(r"filename\*=UTF-8''([^;\s]+)", header)
    plain = re.search(r'filename="([^"]*)"', header)
    assert star and unquote(star.group(1), errors="strict") == f"{name}.bvh", header
    assert plain and plain.group(1).endswith(".bvh"), header


def test_hostile_keypoint_files_get_typed_errors_that_name_the_file(server):
    d = server.poses
    (d / "deep.json").write_text('{"keypoints": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (d / "types.json").write_text(json.dumps({"keypoints": "abc", "times": {"a": 1}, "names": 5}))
    hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000, 13, 3), }"
    hdr += " " * (63 - (len(hdr) + 10) % 64) + "\n"
    npy = b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode() + b"\x00" * 64
    with zipfile.ZipFile(d / "huge.npz", "w") as z:
        for k in ("keypoints.npy", "times.npy", "names.npy"):
            z.writestr(k, npy)
    with Client(server) as c:
        for f in ("deep.json", "types.json", "huge.npz"):
            r = c.request("pose_source", kind="file", file=f"poses:{f}", timeout=30)
            assert r["type"] == "error" and r["code"] == "rejected", (f, r)
            assert f"poses:{f}" in r["message"] and str(d) not in r["message"], r
        assert c.request("hello")["type"] == "ack"


def test_a_server_beyond_loopback_needs_its_token(tmp_path_factory):
    from websockets.exceptions import InvalidHandshake

    from motionmatch.viewer.access import cookie_name
    from motionmatch.viewer.data import FileCatalog
    from motionmatch.viewer.server import Viewer, ViewerServer

    db = small_database(tmp_path_factory.getbasetemp())
    srv = ViewerServer(Viewer(db, catalog=FileCatalog({})), "0.0.0.0", 0).start()
    try:
        assert srv.token and f"?token={srv.token}" in srv.page_url
        base = srv.url
        for path in ("", "api/health", "api/download/x", "static/app.js"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + path, timeout=10)
            assert e.value.code == 401
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(base + "api/health?token=wrong" + srv.token[5:], timeout=10)
        with pytest.raises(InvalidHandshake):
            Client(srv)
        with pytest.raises(InvalidHandshake):
            Client(srv, headers={"Cookie": f"{cookie_name(srv.port)}=nope"})
        # the printed URL: the page, and a cookie its own requests and websocket carry
        with urllib.request.urlopen(base + "api/health?token=" + srv.token, timeout=10) as r:
            assert json.loads(r.read())["ok"]
            cookie = r.headers["Set-Cookie"].split(";", 1)[0]
        assert "HttpOnly" in r.headers["Set-Cookie"]
        req = urllib.request.Request(base + "api/health", headers={"Cookie": cookie})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert json.loads(r.read())["sessions"] == 0
        with Client(srv, headers={"Cookie": cookie}) as c:
            assert c.request("hello")["type"] == "ack"
        with Client(srv, query=f"?token={srv.token}") as c:
            assert c.welcome["type"] == "welcome"
        req = urllib.request.Request(base + "api/health", headers={"Authorization": f"token {srv.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200
    finally:
        srv.stop()
    # loopback: no token needed, unless one is given
    lo = ViewerServer(Viewer(db, catalog=FileCatalog({})), "127.0.0.1", 0)
    assert lo.token is None and lo.page_url == lo.url
    lo.sock.close()
    given = ViewerServer(Viewer(db, catalog=FileCatalog({})), "127.0.0.1", 0, token="a-token-of-mine").start()
    try:
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(given.url + "api/health", timeout=10)
        with urllib.request.urlopen(given.url + "api/health?token=a-token-of-mine", timeout=10) as r:
            assert r.status == 200
    finally:
        given.stop()
    with pytest.raises(ValueError, match="8 to 256"):
        ViewerServer(Viewer(db, catalog=FileCatalog({})), "127.0.0.1", 0, token="short")


def test_the_command_beyond_loopback_prints_a_url_with_its_token_and_the_page_works_through_it(tmp_path_factory):
    """``motionmatch viewer --host 0.0.0.0`` prints a URL with a token; opened as a browser
    does (the page, then its script and websocket with the cookie the page's answer set),
    everything works; without the token nothing does."""
    import subprocess
    import sys

    from motionmatch.viewer._bundle import BundleError, ensure_bundle

    try:
        ensure_bundle(log=lambda m: None)
    except BundleError as e:
        pytest.skip(f"the page cannot be built here: {e}")
    small_database(tmp_path_factory.getbasetemp())
    db = tmp_path_factory.getbasetemp() / "viewer-test-db.npz"
    code = ("import sys, argparse; from motionmatch.cli import viewer_cmd; p = argparse.ArgumentParser(); "
            "viewer_cmd.register(p.add_subparsers()); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))")
    proc = subprocess.Popen([sys.executable, "-c", code, "viewer", "--db", str(db), "--host", "0.0.0.0", "--port", "0",
                             "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines: list[str] = []
        t0 = time.monotonic()
        while not any(line.startswith("motionmatch viewer: http") for line in lines) and time.monotonic() - t0 < 90:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise AssertionError(proc.stderr.read())
            lines.append(line)
        url = next(line for line in lines if line.startswith("motionmatch viewer: http")).split()[2]
        assert "?token=" in url and any("token" in line and "listening on 0.0.0.0" in line for line in lines), lines
        base = url.split("?", 1)[0]
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base, timeout=10)
        assert e.value.code == 401
        with urllib.request.urlopen(url, timeout=10) as r:  # the printed URL: the page and a cookie
            assert "/static/app.js" in r.read().decode()
            cookie = r.headers["Set-Cookie"].split(";", 1)[0]
        req = urllib.request.Request(base + "static/app.js", headers={"Cookie": cookie})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert "/ws" in r.read().decode()  # the page's websocket: the same host, so the cookie goes with it

        class At:
            pass

        at = At()
        at.url = base
        with Client(at, headers={"Cookie": cookie}) as c:
            assert c.request("hello")["type"] == "ack" and c.next_frame().tick >= 0
    finally:
        proc.terminate()
        proc.wait(10)
