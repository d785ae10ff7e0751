"""Cold start: from ``motionmatch viewer`` to a moving character, and the first of everything.

    python benchmarks/bench_coldstart.py [--data DIR] [--warm] [--json] [--no-run]

Starts ``motionmatch viewer --data DIR/lafan1-60fps`` as a user's first run does: Numba's
disk cache and motionmatch's cache (the built database) in empty temporary folders (with
``--warm``: filled by a first start, then measured on the second). Then, as a page would,
over the websocket: holds W until the character has moved 0.25 m (**time to a moving
character**, from the command's start), then at once draws a path, places an obstacle on
it, spawns a group, loads a scenario and asks for a GenMM synthesis. The session's
``stats`` messages give the longest tick (messages, step and sending) of every second:
the bar is no tick over 100 ms. Then ``motionmatch build`` and ``motionmatch run`` on
empty caches (**first run**), unless ``--no-run``.

Prints the server's log lines with their times, the figures, and the bars met or not.
The machine's cores and load are printed too: these are wall-clock times.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import REPO, data_root

MOVING_M = 0.25
TICK_BAR_MS = 100.0
START_BAR_S = 60.0


class Server:
    """``motionmatch viewer`` in a subprocess, its output lines timed from its start."""

    def __init__(self, folder: Path, env: dict, log) -> None:
        self.t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "motionmatch", "viewer", "--data", str(folder), "--port", "0",
               "--scenarios", str(REPO / "scenarios")]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     cwd=REPO)
        self.lines: queue.Queue = queue.Queue()
        self.log = log
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            t = time.perf_counter() - self.t0
            self.log(f"  [{t:6.1f} s] {line.rstrip()}")
            self.lines.put((t, line))

    def wait_url(self, timeout: float) -> tuple[float, str]:
        end = time.perf_counter() + timeout
        while time.perf_counter() < end:
            try:
                t, line = self.lines.get(timeout=1.0)
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise SystemExit(f"the viewer exited with code {self.proc.returncode}") from None
                continue
            m = re.search(r"(http://\S+/)", line)
            if m:
                return t, m.group(1)
        raise SystemExit(f"no URL within {timeout:.0f} s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Page:
    """A websocket client: commands with replies, the latest pose frame, stats and warm-up messages."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        self.ws = connect(url.replace("http://", "ws://") + "ws", max_size=1 << 24, open_timeout=30, proxy=None)
        self.seq = 0
        self.frame = None
        self.stats: list[tuple[float, dict]] = []
        self.events: list[tuple[float, dict]] = []
        self.replies: dict[int, dict] = {}
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        from motionmatch.viewer.protocol import decode_frame

        try:
            for msg in self.ws:
                now = time.perf_counter()
                if isinstance(msg, bytes):
                    self.frame = decode_frame(msg)
                    continue
                m = json.loads(msg)
                with self.lock:
                    if m.get("type") == "stats":
                        self.stats.append((now, m))
                    elif m.get("seq") is not None and m.get("type") in ("ack", "error"):
                        self.replies[m["seq"]] = m
                    self.events.append((now, m))
        except Exception:
            self.closed = True

    def send(self, type_: str, **fields) -> int:
        self.seq += 1
        self.ws.send(json.dumps({"type": type_, "seq": self.seq, **fields}))
        return self.seq

    def post(self, type_: str, **fields) -> None:
        self.ws.send(json.dumps({"type": type_, **fields}))

    def wait(self, pred, timeout: float) -> bool:
        end = time.perf_counter() + timeout
        while time.perf_counter() < end:
            if pred():
                return True
            time.sleep(0.01)
        return False

    def event(self, kind: str):
        with self.lock:
            return next((m for _, m in reversed(self.events) if m.get("type") == kind), None)


def viewer_cold_start(folder: Path, env: dict, log) -> dict:
    srv = Server(folder, env, log)
    try:
        t_url, url = srv.wait_url(600)
        page = Page(url)
        page.wait(lambda: page.frame is not None, 30)
        page.post("keys", held=["w"], yaw=0.0)
        start = page.frame.characters[0].root.copy()
        moved = page.wait(lambda: float(((page.frame.characters[0].root - start)[[0, 2]] ** 2).sum()) ** 0.5
                          > MOVING_M, 60)
        t_moving = time.perf_counter() - srv.t0
        page.post("keys", held=[], yaw=0.0)
        firsts = {}
        cid = page.frame.characters[0].id
        t_first = time.perf_counter()
        requests = [("path", dict(id=cid, points=[[0, 0, 0], [2, 1, 3], [4, 0, 6]], mode="local")),
                    ("obstacle_add", dict(obstacle={"shape": "disk", "center": [0.5, 2.0], "radius": 0.4})),
                    ("spawn_group", dict(count=20, center=[6, 6], target=[0, 8], spacing=1.0, speed=1.3)),
                    ("scenario_load", dict(file="scenarios:doors-small.json")),
                    ("pause", dict(paused=False))]
        bvh = sorted((folder).glob("*.bvh"))[0]
        root_name = "data"
        seqs = {kind: page.send(kind, **fields) for kind, fields in requests}
        page.wait(lambda: all(s in page.replies for s in seqs.values()), 120)
        for kind, s in seqs.items():
            r = page.replies.get(s)
            firsts[kind] = {"reply": None if r is None else r["type"],
                            "message": None if r is None or r["type"] != "error" else r.get("message")}
        t_all = time.perf_counter() - t_first
        files = page.send("files", kind="bvh")
        page.wait(lambda: files in page.replies, 30)
        listing = page.event("files")
        ids = [f["id"] for f in (listing or {}).get("files", []) if f["id"].endswith(bvh.name)]
        if ids:
            root_name = ids[0]
            g = page.send("genmm", examples=[root_name], seconds=4, seed=0, loop=False, variants=1)
            page.wait(lambda: (page.event("genmm_status") or {}).get("state") in ("done", "failed"), 180)
            firsts["genmm"] = {"reply": (page.replies.get(g) or {}).get("type"),
                               "state": (page.event("genmm_status") or {}).get("state")}
        time.sleep(3.0)  # a few more stats messages
        with page.lock:
            stats = [(t - srv.t0, m) for t, m in page.stats]
            warm_msgs = [(t - srv.t0, m) for t, m in page.events if m.get("type") == "warmup"]
        ready_at = next((t for t, m in warm_msgs if m.get("ready")), None)
        worst = max(stats, key=lambda tm: tm[1].get("tick_ms_max", 0.0)) if stats else (None, {})
        return {
            "url_s": round(t_url, 1), "moving_character_s": round(t_moving, 1), "moved": moved,
            "environment_ready_s": None if ready_at is None else round(ready_at, 1),
            "first_requests_answered_s": round(t_all, 1), "first_requests": firsts,
            "max_tick_ms": worst[1].get("tick_ms_max"), "max_tick_at_s": None if worst[0] is None else round(worst[0], 1),
            "late_ticks": stats[-1][1].get("late_ticks") if stats else None,
            "dropped_ticks": stats[-1][1].get("dropped_ticks") if stats else None,
            "tick_ms_max_per_second": [round(m.get("tick_ms_max", 0.0), 1) for _, m in stats],
        }
    finally:
        srv.stop()


def first_run(folder: Path, env: dict, work: Path, log) -> dict:
    """``motionmatch build`` then ``motionmatch run`` (a 10 s keyboard script), timed."""
    db = work / "db.npz"
    script = work / "script.json"
    script.write_text(json.dumps({"duration": 10.0, "events": [{"t": 0.0, "keys": ["w"]}, {"t": 4.0, "keys": ["d"]},
                                                                 {"t": 7.0, "keys": ["w", "shift"]}]}))
    out = {}
    for name, cmd in (("build", ["build", str(folder), "-o", str(db)]),
                      ("run", ["run", "--db", str(db), "--input", str(script), "-o", str(work / "out.bvh"),
                               "--report", str(work / "report.json")])):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "motionmatch", *cmd], env=env, capture_output=True, text=True)
        out[f"{name}_s"] = round(time.perf_counter() - t0, 1)
        if p.returncode != 0:
            out[f"{name}_error"] = (p.stderr or p.stdout).strip().splitlines()[-1:]
            break
        log(f"  motionmatch {name}: {out[f'{name}_s']} s")
    rep = work / "report.json"
    if rep.exists():
        r = json.loads(rep.read_text())
        out["report_timing"] = {k: v for k, v in r.items() if "ms" in k or "warm" in k}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--data", help="the shared data folder (default $MOTIONMATCH_DATA)")
    ap.add_argument("--warm", action="store_true", help="measure a second start (caches filled by a first)")
    ap.add_argument("--no-run", action="store_true", help="skip motionmatch build/run")
    ap.add_argument("--json", action="store_true", help="print the results as JSON at the end")
    args = ap.parse_args(argv)
    folder = data_root(args.data) / "lafan1-60fps"
    quiet = args.json

    def log(m: str) -> None:
        print(m, file=sys.stderr if quiet else sys.stdout, flush=True)

    work = Path(tempfile.mkdtemp(prefix="mm-coldstart-"))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(work / "numba"), "MOTIONMATCH_CACHE": str(work / "cache"),
           "PYTHONUNBUFFERED": "1"}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    res: dict = {"cores": os.cpu_count(), "load_before": load, "warm": args.warm}
    try:
        if args.warm:
            log("first start (filling the caches) ...")
            viewer_cold_start(folder, env, lambda m: None)
        log(f"viewer start ({'warm' if args.warm else 'empty'} caches) ...")
        res["viewer"] = viewer_cold_start(folder, env, log)
        if not args.no_run:
            run_env = env if args.warm else {**env, "NUMBA_CACHE_DIR": str(work / "numba-run")}
            log(f"build and run ({'warm' if args.warm else 'empty'} Numba cache) ...")
            res["first_run"] = first_run(folder, run_env, work, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    v = res["viewer"]
    ok_start = v["moved"] and v["moving_character_s"] <= START_BAR_S
    ok_tick = v["max_tick_ms"] is not None and v["max_tick_ms"] <= TICK_BAR_MS
    log(f"\nmoving character after {v['moving_character_s']} s (URL at {v['url_s']} s; bar {START_BAR_S:.0f} s): "
        f"{'met' if ok_start else 'NOT met'}")
    log(f"paths, obstacles and crowds ready at {v['environment_ready_s']} s; the first path, obstacle, crowd and "
        f"scenario answered within {v['first_requests_answered_s']} s of being sent")
    log(f"longest tick {v['max_tick_ms']} ms (at {v['max_tick_at_s']} s; bar {TICK_BAR_MS:.0f} ms): "
        f"{'met' if ok_tick else 'NOT met'}; late ticks {v['late_ticks']}, dropped {v['dropped_ticks']}")
    if "first_run" in res:
        log(f"first motionmatch build {res['first_run'].get('build_s')} s, run {res['first_run'].get('run_s')} s")
    res["bars_met"] = bool(ok_start and ok_tick)
    if args.json:
        print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
