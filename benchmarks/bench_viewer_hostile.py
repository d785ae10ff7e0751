"""Hostile input costs little (issue 34): what one tab's abuse costs the others.

    python benchmarks/bench_viewer_hostile.py [--db DB.npz] [--seconds 5] [--json]

The server runs in its own process (as ``motionmatch viewer`` does), the clients here.
Without ``--db``, the tests' small database (a few LAFAN1 clips) is built and cached.
Measures:

1. ``baseline``: a tab alone: its pose frames per second and its acks (``hello``: median,
   p95, max, ms);
2. ``scene_flood``: the same while another tab sends a valid 250 KB ``scene_set`` (256
   moving obstacles) at the message rate limit (120/s): the flooder's replies by kind;
3. ``path_flood``: the same with 4096-point paths (120 s of drawing, scale 0.05);
4. ``closed_tab``: a tab queues 30 such paths and closes: the server's CPU seconds in the
   second after the close and in the next, and when ``/api/health`` says its work ended;
   ``closed_genmm``: the same for a tab that started a long GenMM synthesis (120 s, 8
   variants);
5. ``export_flood``: a tab with a 60 s recording sends ``export`` at 110/s for
   ``--seconds``: the server's RSS before, at its peak and after (MB);
6. ``slow_reader``: a tab that never reads sends obstacle changes for ``4 x --seconds``
   (each answered with the list of its 256 moving obstacles, 250 KB): the server's RSS and
   its waiting replies (``/api/health``).

The issue asks: the other tab keeps >= 50 frames/s and acks under 100 ms; a closed tab's
CPU use ends within 1 s; the floods keep the RSS within +200 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import TESTS, data_root

_SERVER = r"""
import sys
from motionmatch.database import MotionDatabase
from motionmatch.viewer.server import Viewer, ViewerServer
from motionmatch.viewer.data import FileCatalog
viewer = Viewer(MotionDatabase.load(sys.argv[1]), catalog=FileCatalog({"data": sys.argv[2]}))
viewer.prepare(background=False)
srv = ViewerServer(viewer, "127.0.0.1", 0).start()
print(srv.url, flush=True)
sys.stdin.read()
srv.stop()
"""


def _proc_stat(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS MB) of process ``pid``."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    cpu = (int(parts[11]) + int(parts[12])) / tck
    rss = int(parts[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return cpu, rss


def _health(url: str) -> dict:
    with urllib.request.urlopen(url + "api/health", timeout=10) as r:
        return json.loads(r.read())


def _client(url: str):
    sys.path.insert(0, str(TESTS))
    from test_viewer_support import Client

    class _Srv:
        pass

    s = _Srv()
    s.url = url
    return Client(s)


_FLOODER = r"""
import json, sys, time
from websockets.sync.client import connect
url, rate = sys.argv[1], float(sys.argv[2])
text = sys.stdin.readline().rstrip("\n")
counts = {"sent": 0}
with connect(url.replace("http://", "ws://") + "ws", max_size=None, proxy=None) as ws:
    print("ready", flush=True)
    t = time.monotonic()
    while True:
        try:
            ws.send(text)
        except Exception:
            break
        counts["sent"] += 1
        t += 1.0 / rate
        while (left := t - time.monotonic()) > 0:
            try:
                m = ws.recv(timeout=left)
            except TimeoutError:
                break
            if isinstance(m, str):
                d = json.loads(m)
                k = d.get("code") or d["type"]
                counts[k] = counts.get(k, 0) + 1
        if time.monotonic() > float(sys.argv[3]):
            break
print(json.dumps(counts), flush=True)
"""


def _flood(url: str, text: str, seconds: float, rate: float) -> subprocess.Popen:
    """A flooding tab in its own process (its sending does not slow this one's reading)."""
    p = subprocess.Popen([sys.executable, "-c", _FLOODER, url, str(rate), str(time.monotonic() + seconds)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.stdin.write(text + "\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "ready"
    return p


def measure_tab(url: str, seconds: float) -> dict:
    """A tab's frames per second and ack latency over ``seconds``."""
    with _client(url) as b:
        b.pump(0.5)
        n0, t0 = len(b.frames), time.monotonic()
        acks = []
        while time.monotonic() - t0 < seconds:
            s = time.monotonic()
            b.request("hello", timeout=30)
            acks.append(time.monotonic() - s)
            b.pump(0.1)
        fps = (len(b.frames) - n0) / (time.monotonic() - t0)
    a = np.array(acks) * 1e3
    return {"frames_per_s": round(fps, 1), "ack_ms_median": round(float(np.median(a)), 1),
            "ack_ms_p95": round(float(np.percentile(a, 95)), 1), "ack_ms_max": round(float(a.max()), 1)}


def under_flood(url: str, text: str, seconds: float, rate: float = 120.0) -> dict:
    """:func:`measure_tab` while another tab (another process) sends ``text`` at ``rate`` per second."""
    p = _flood(url, text, seconds + 1.5, rate)
    try:
        time.sleep(1.0)  # its burst is spent
        out = measure_tab(url, seconds)
    finally:
        counts = json.loads(p.stdout.readline() or "{}")
        p.wait(30)
    return {**out, "flooder": counts}


def _path_text() -> str:
    pts = [[round(i * 0.029, 4), round(5 * np.sin(i / 50), 3), round(i * 0.01, 3)] for i in range(4096)]
    return json.dumps({"type": "path", "points": pts, "scale": 0.05})


def closed_tab(url: str, pid: int) -> dict:
    text = _path_text()
    c = _client(url)
    for _ in range(30):
        c.send_raw(text)
    c.pump(0.3)
    cpu0, _ = _proc_stat(pid)
    t0 = time.monotonic()
    c.close()
    ended = None
    while time.monotonic() - t0 < 1.0:
        h = _health(url)
        if ended is None and h.get("closing", 0) == 0 and h["sessions"] == 0:
            ended = time.monotonic() - t0
        time.sleep(0.02)
    cpu1, _ = _proc_stat(pid)
    time.sleep(1.0)
    cpu2, _ = _proc_stat(pid)
    return {"cpu_s_first_second": round(cpu1 - cpu0, 3), "cpu_s_next_second": round(cpu2 - cpu1, 3),
            "work_ended_after_s": None if ended is None else round(ended, 3)}


def closed_synthesis(url: str, pid: int) -> dict:
    """A tab starts GenMM (120 s, 8 variants) and closes: when its job ends."""
    sys.path.insert(0, str(TESTS))
    from test_viewer_support import CLIPS

    with _client(url) as c:
        c.send("files", kind="bvh")
        files = [f["id"] for f in c.wait_type("files", kind="bvh")["files"]]
        ex = next((f for f in files if CLIPS[1] in f), None)
        if ex is None:
            return {"skipped": "no example clip in the data folders"}
        r = c.request("genmm", examples=[ex], seconds=120, variants=8, seed=1)
        if r["type"] != "ack":
            return {"error": r}
        time.sleep(1.0)
        running = _health(url).get("jobs")
        cpu0, _ = _proc_stat(pid)
    t0 = time.monotonic()
    ended = None
    while time.monotonic() - t0 < 5.0 and ended is None:
        if _health(url).get("jobs", 1) == 0:
            ended = time.monotonic() - t0
        time.sleep(0.01)
    time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    cpu1, _ = _proc_stat(pid)
    time.sleep(1.0)
    cpu2, _ = _proc_stat(pid)
    return {"jobs_running_before": running, "job_ended_after_s": None if ended is None else round(ended, 3),
            "cpu_s_first_second": round(cpu1 - cpu0, 3), "cpu_s_next_second": round(cpu2 - cpu1, 3)}


def export_flood(url: str, pid: int, seconds: float) -> dict:
    with _client(url) as c:
        c.send("key", key="KeyW", down=True, yaw=0.0)
        c.request("pause", paused=True)
        for _ in range(6):
            c.request("step", frames=600, timeout=120)
        _, before = _proc_stat(pid)
        peak = before
        text = json.dumps({"type": "export", "id": c.welcome["selected"]})
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            c.send_raw(text)
            c.pump(1 / 110)
            peak = max(peak, _proc_stat(pid)[1])
        c.pump(2.0)
        kinds: dict = {}
        for m in c.messages:
            k = m.get("type") if m.get("type") != "error" else "error: " + m["message"][:40]
            kinds[k] = kinds.get(k, 0) + 1
    _, after = _proc_stat(pid)
    return {"rss_mb_before": round(before), "rss_mb_peak": round(peak), "rss_mb_after_close": round(after),
            "replies": {k: v for k, v in kinds.items() if k in ("download", "ack") or k.startswith("error")}}


def slow_reader(url: str, pid: int, seconds: float) -> dict:
    """A tab that sends obstacle changes (each answered with the whole list of 256 moving
    obstacles, 250 KB) and never reads."""
    sys.path.insert(0, str(TESTS))
    from test_viewer_hostile import SilentTab, big_scene

    tab = SilentTab(int(url.rstrip("/").rsplit(":", 1)[1]))
    try:
        tab.send(json.dumps({"type": "scene_set", "scene": big_scene()}))
        update = json.dumps({"type": "obstacle_update", "id": 1,
                             "obstacle": {"shape": "disk", "center": [5.0, 0.0], "radius": 0.2}})
        _, before = _proc_stat(pid)
        peak, waiting = before, 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            for _ in range(10):
                tab.send(update)
            time.sleep(0.1)
            peak = max(peak, _proc_stat(pid)[1])
            waiting = max(waiting, _health(url).get("waiting_bytes", 0))
    finally:
        tab.close()
    return {"rss_mb_before": round(before), "rss_mb_peak": round(peak), "waiting_mb_peak": round(waiting / 2**20, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="database (default: the tests' small one, built and cached)")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    db = a.db
    if db is None:
        sys.path.insert(0, str(TESTS))
        from test_viewer_support import small_database

        cache = Path(tempfile.gettempdir()) / "motionmatch-bench-hostile"
        cache.mkdir(exist_ok=True)
        small_database(cache)
        db = str(cache / "viewer-test-db.npz")
    proc = subprocess.Popen([sys.executable, "-c", _SERVER, db, str(data_root() / "lafan1-60fps")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        url = proc.stdout.readline().strip()
        out = {"baseline": measure_tab(url, a.seconds)}
        sys.path.insert(0, str(TESTS))
        from test_viewer_hostile import big_scene

        out["scene_flood"] = under_flood(url, json.dumps({"type": "scene_set", "scene": big_scene()}), a.seconds)
        time.sleep(1.0)
        out["path_flood"] = under_flood(url, _path_text(), a.seconds)
        time.sleep(1.0)
        out["closed_tab"] = closed_tab(url, proc.pid)
        out["closed_genmm"] = closed_synthesis(url, proc.pid)
        out["export_flood"] = export_flood(url, proc.pid, a.seconds)
        out["slow_reader"] = slow_reader(url, proc.pid, 4 * a.seconds)
    finally:
        proc.stdin.close()
        proc.wait(30)
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:13s} {json.dumps(v)}")


if __name__ == "__main__":
    main()
