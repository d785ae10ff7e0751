"""Performance of the viewer's server with many agents.

    python benchmarks/bench_viewer.py [--db DB.npz | --data DIR] [--agents 50] [--ticks 1200] [--seconds 5]
                                      [--no-websocket] [--full-rate] [--stagger] [--compare-reference] [--json]
    python benchmarks/bench_viewer.py --page [--counts 1,10,51] [--seconds 4] [--json]
    python benchmarks/bench_viewer.py --capacity [--db DB.npz] [--rig RIG] [--json]
    python benchmarks/bench_viewer.py --rig RIG [--agents 50] [--ticks 600] [--no-websocket] [--json]

Measures, on the database the viewer would open (``--db``/``--data``, default dataset):

1. one character, keyboard-driven (a scripted pattern of W, W+D, Shift, S ...): the cost of
   a tick (every character's controller update, forward kinematics, recording) and of
   encoding its pose frame, in ms (median, mean, p95, p99, max);
2. ``--agents`` characters in one session, half walking drawn straight paths (plain
   motion matching, as ``spawn_group`` does), half keyboard-driven with changing keys:
   the same numbers, the share of ticks that fit in 1/60 s, and the tick rate the
   session's real 60 Hz loop achieves over ``--seconds``;
3. the pose stream of those agents: bytes per frame and per second at 60 Hz, measured
   from the encoder and, end to end, on a websocket client of a real server.

Options for comparisons in one run: ``--full-rate`` updates every character every tick
(no level of detail: all agents at 60 Hz); ``--compare-reference`` repeats the agents
measurement with :class:`~oracles.controller.ReferenceController` (the tests' oracle: the same
controller with its per-frame stages in plain numpy, as before the compiled per-frame
path) as the baseline; ``--stagger`` spreads the agents' periodic searches over the
search interval (``Controller.since_search``) after they start, as a session can do.

``--page`` measures the page instead (issue 16): its frame rate in headless Chromium
(Debian's ``chromium``, driven by Playwright, software WebGL: SwiftShader) for 1, 10 and 51
characters drawn as skinned bodies and, as the baseline in the same run, as stick
figures (the debug toggle), with the simulation paused (what the page costs, not the
server) and again running. The frame rate is requestAnimationFrame's, uncapped
(``--disable-frame-rate-limit``), the median of three runs of ``--seconds`` each (bodies
and stick figures alternated), the camera placed to see every character; the ratio
body / stick is what matters (the issue asks at least 0.5).

``--capacity`` finds how many walking characters (drawn straight paths, as ``spawn_group``
makes them) one session steps at full rate, every character at 60 Hz with no level of
detail: the largest count whose mean tick (the step and the pose frame's encoding) fits in
1/60 s, found by doubling from 25 and then halving the interval to within 5%, each count
measured in a fresh session over 240 ticks after 60 warm-up ticks. Run it with
``PYTHONPATH`` pointing at another tree's ``src`` to compare two trees on one machine.

``--rig RIG`` (a ``.glb``/``.gltf`` or ``.bvh`` rig, as ``motionmatch viewer --rig`` takes)
measures what drawing the characters on the user's rig costs (issue 32: at most 10% more per
tick), in one run on the same ticks: the ``--agents`` session steps, and every tick its pose
frame is made both ways, on the database's skeleton (the characters' poses, encoded) and on
the rig (the same poses retargeted onto it, ``ViewerRig.play``: what ``Session.poses`` does
with a rig, then encoded), in alternating order; a tick without the rig is the step and the
first frame, with it the step and the second. Pairing the two on each tick keeps a loaded
machine's noise out of the ratio. As in a session, a character not updated this tick (the
level of detail's background characters) keeps its pose on the rig; ``--full-rate``
updates (and so retargets) every character every tick. With ``--capacity``, the capacity is found without and
with the rig.

Times depend on the machine; the ratios to the 16.7 ms budget are what matter.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from _common import TESTS, reference_controller
from motionmatch.viewer.protocol import encode_frame
from motionmatch.viewer.session import DT, TICK_HZ

PATTERN = [("w",), ("w", "d"), ("w", "shift"), ("a",), ("s",), ("w", "a"), (), ("d",)]


def _stats(ms: np.ndarray) -> dict:
    return {"median_ms": round(float(np.median(ms)), 3), "mean_ms": round(float(ms.mean()), 3),
            "p95_ms": round(float(np.percentile(ms, 95)), 3), "p99_ms": round(float(np.percentile(ms, 99)), 3),
            "max_ms": round(float(ms.max()), 3), "within_budget": round(float(np.mean(ms < 1000 * DT)), 4)}


class _Null:
    def __init__(self):
        self.bytes = 0
        self.frames = 0

    def __call__(self, item):
        if isinstance(item, (bytes, bytearray)):
            self.bytes += len(item)
            self.frames += 1


def _drive_keys(session, chars, i: int, rng) -> None:
    for k, ch in enumerate(chars):
        if ch.follower is None and (i + 7 * k) % 90 == 0:  # new keys every 1.5 s, staggered
            ch.set_keys(PATTERN[rng.integers(len(PATTERN))])


def measure_ticks(session, chars, ticks: int, seed: int = 0) -> tuple[dict, dict, int]:
    rng = np.random.default_rng(seed)
    step, enc, size, searches, tick = [], [], 0, [], []
    for i in range(ticks):
        _drive_keys(session, chars, i, rng)
        t0 = time.perf_counter()
        session.step()
        t1 = time.perf_counter()
        frame = encode_frame(session.tick, session.time, session.poses())
        t2 = time.perf_counter()
        step.append(t1 - t0)
        enc.append(t2 - t1)
        tick.append(t2 - t0)
        size = len(frame)
        searches.append(sum(1 for ch in chars if getattr(getattr(ch, "last", None), "searched", False)))
    st = _stats(np.asarray(step) * 1e3)
    n = np.asarray(searches)
    st["searches_per_tick"] = {"mean": round(float(n.mean()), 2), "p95": float(np.percentile(n, 95)),
                               "max": int(n.max())}
    st["tick"] = _stats(np.asarray(tick) * 1e3)  # the step and the pose frame (with a rig: its retargeting)
    return st, _stats(np.asarray(enc) * 1e3), size


def stagger_searches(session, interval_ticks: int) -> None:
    """Spread the characters' next periodic searches over ``interval_ticks`` ticks."""
    k = 0
    for ch in session.chars.values():
        if hasattr(ch, "ctrl"):
            ch.ctrl.since_search = -(k % interval_ticks) / TICK_HZ
            k += 1


def measure_agents(viewer, n: int, ticks: int, stagger: bool) -> dict:
    """Tick statistics of a session with ``n`` agents (after 60 warm-up ticks)."""
    from motionmatch.viewer.session import Session

    s = Session(viewer, _Null())
    spawn_agents(s, n)
    s.step()  # the agents' first intents (a crowd's first steering is a sharp change: all search now)
    if stagger:
        ch = next(iter(s.chars.values()))
        stagger_searches(s, max(1, round(ch.ctrl.s.search_interval * TICK_HZ)))
    for _ in range(59):
        s.step()
    step, enc, size = measure_ticks(s, list(s.chars.values()), ticks)
    return {"count": len(s.chars), "step": step, "encode": enc, "frame_bytes": size,
            "pose_bytes_per_s_at_60hz": size * TICK_HZ, "background_update_hz": TICK_HZ / s.divisor}


def measure_rig(viewer, rig, n: int, ticks: int, seed: int = 0) -> dict:
    """What drawing ``n`` agents on ``rig`` (a :class:`~motionmatch.viewer.rig.ViewerRig`)
    costs per tick: each tick's pose frame made both ways, alternately first (see the
    module doc). Mean milliseconds."""
    from motionmatch.viewer.characters import MMCharacter
    from motionmatch.viewer.session import Session

    s = Session(viewer, _Null())
    spawn_agents(s, n)
    for _ in range(60):
        s.step()
    chars = list(s.chars.values())
    rng = np.random.default_rng(seed)
    step, plain, on_rig, retarget = [], [], [], []
    sizes = (0, 0)
    cache: dict = {}  # as the session keeps it: characters not updated this tick keep their pose on the rig

    def frame_plain():
        return encode_frame(s.tick, s.time, s.poses())

    def frame_rig():
        poses = s.poses()
        t = time.perf_counter()
        played = rig.play(poses, [isinstance(c, MMCharacter) for c in s.chars.values()], cache)
        retarget.append(time.perf_counter() - t)
        return encode_frame(s.tick, s.time, played)

    for i in range(ticks):
        _drive_keys(s, chars, i, rng)
        t0 = time.perf_counter()
        s.step()
        step.append(time.perf_counter() - t0)
        for make, into in ((frame_plain, plain), (frame_rig, on_rig))[:: 1 if i % 2 else -1]:
            t = time.perf_counter()
            size = len(make())
            into.append(time.perf_counter() - t)
            sizes = (size, sizes[1]) if into is plain else (sizes[0], size)
    s.close()
    ms = {k: 1e3 * float(np.mean(v)) for k, v in (("step", step), ("plain", plain), ("rig", on_rig),
                                                 ("retarget", retarget))}
    without, with_rig = ms["step"] + ms["plain"], ms["step"] + ms["rig"]
    return {"file": rig.name, "joints": rig.joints, "characters": len(s.chars), "ticks": ticks,
            "step_ms": round(ms["step"], 3), "tick_ms": {"without": round(without, 3), "with": round(with_rig, 3)},
            "frame_ms": {"without": round(ms["plain"], 3), "with": round(ms["rig"], 3)},
            "retarget_ms": round(ms["retarget"], 3), "extra_per_tick": round(with_rig / without - 1.0, 4),
            "frame_bytes": {"without": sizes[0], "with": sizes[1]}}


class _ReferenceControllers:
    """Within this context the viewer's characters (the session world's agents) get the
    numpy reference controller."""

    def __enter__(self):
        from motionmatch.runtime import world

        self._mod, self._old = world, world.Controller
        world.Controller = reference_controller()
        return self

    def __exit__(self, *exc):
        self._mod.Controller = self._old


def walkers_fit(viewer, n: int, ticks: int = 240) -> tuple[bool, float]:
    """Whether ``n`` walking characters at full rate fit a tick (mean step + encode <= 1/60 s),
    and that mean (ms)."""
    from motionmatch.viewer.session import Session

    s = Session(viewer, _Null())
    left, k = n, 0
    while left > 0:  # walkers in groups, side by side, each walking its own straight path
        c = min(left, 50)
        s.handle({"type": "spawn_group", "seq": None, "count": c, "center": (12.0 * k, 0.0), "spacing": 1.5,
                  "target": (12.0 * k, 60.0), "speed": 1.3})
        left, k = left - c, k + 1
    for _ in range(60):
        s.step()
    t = []
    for _ in range(ticks):
        t0 = time.perf_counter()
        s.step()
        encode_frame(s.tick, s.time, s.poses())
        t.append(time.perf_counter() - t0)
    s.close()
    mean = 1e3 * float(np.mean(t))
    return mean <= 1e3 * DT, mean


def walking_capacity(viewer, log=print) -> dict:
    """The most walking characters one session steps at full rate (see the module doc)."""
    lo, hi, n = 0, None, 25
    seen = {}
    while hi is None:
        ok, seen[n] = walkers_fit(viewer, n)
        log(f"  {n} walkers: mean tick {seen[n]:.2f} ms")
        if ok:
            lo, n = n, 2 * n
        else:
            hi = n
    while hi - lo > max(1, 0.05 * lo):
        n = (lo + hi) // 2
        ok, seen[n] = walkers_fit(viewer, n)
        log(f"  {n} walkers: mean tick {seen[n]:.2f} ms")
        lo, hi = (n, hi) if ok else (lo, n)
    return {"walkers_at_full_rate": lo, "mean_tick_ms": {str(k): round(v, 3) for k, v in sorted(seen.items())}}


def spawn_agents(session, n: int) -> list:
    """``n`` characters: even ones walk straight drawn paths, odd ones take scripted keys."""
    half = (n + 1) // 2
    session.handle({"type": "spawn_group", "seq": None, "count": half, "center": (0.0, 0.0), "spacing": 1.5,
                    "target": (0.0, 30.0), "speed": 1.3})
    cols = int(np.ceil(np.sqrt(n - half))) or 1
    for i in range(n - half):
        r, c = divmod(i, cols)
        session.add_mm_character(f"kb {i}", (20.0 + 1.5 * c, 1.5 * r), (0.0, 1.0), announce=False)
    return [ch for ch in session.chars.values()][1:]


_CLIENT = r"""
import json, sys, time
from websockets.sync.client import connect
url, agents, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with connect(url, max_size=None, proxy=None, compression=None) as ws:
    ws.send(json.dumps({"type": "spawn_group", "count": agents, "center": [0, 0], "target": [0, 40],
                        "spacing": 1.5, "speed": 1.3}))
    t_end = time.monotonic() + 3.0
    while time.monotonic() < t_end:  # settle: the spawn and its path messages
        try:
            ws.recv(timeout=1)
        except TimeoutError:
            pass
    n_bin = n_txt = frames = 0
    hz = []
    t0 = time.monotonic()
    while (left := t0 + seconds - time.monotonic()) > 0:
        try:
            m = ws.recv(timeout=left)
        except TimeoutError:
            break
        if isinstance(m, bytes):
            n_bin += len(m)
            frames += 1
        else:
            n_txt += len(m)
            d = json.loads(m)
            if d.get("type") == "stats":
                hz.append(d["tick_hz"])
    el = time.monotonic() - t0
print(json.dumps({"pose_bytes_per_s": round(n_bin / el), "json_bytes_per_s": round(n_txt / el),
                  "frames_per_s": round(frames / el, 1), "server_tick_hz": hz}))
"""


def websocket_rate(viewer, agents: int, seconds: float) -> dict:
    """Bytes per second a client (another process) receives from a real server with
    ``agents`` walking."""
    import subprocess

    from motionmatch.viewer.server import ViewerServer

    srv = ViewerServer(viewer, "127.0.0.1", 0).start()
    try:
        url = srv.url.replace("http://", "ws://") + "ws"
        r = subprocess.run([sys.executable, "-c", _CLIENT, url, str(agents), str(seconds)], capture_output=True,
                           text=True, timeout=seconds + 60)
        if r.returncode != 0:
            return {"error": r.stderr[-2000:]}
        return json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        srv.stop()


_FPS_JS = """(ms) => new Promise((done) => {
  let n = 0, t0 = null;
  const tick = (now) => {
    if (t0 === null) t0 = now; else n++;
    if (now - t0 < ms) requestAnimationFrame(tick); else done(n * 1000 / (now - t0));
  };
  requestAnimationFrame(tick);
})"""


def _open_crowd(page, url: str, n: int) -> None:
    """Load the page at ``url`` with ``n`` characters (the selected one and a group) drawn as
    bodies, seen all at once by a fixed camera."""
    page.goto(url)
    page.wait_for_function("() => window.__mm && window.__mm.state.frame", timeout=60000)
    if n > 1:
        page.evaluate("(k) => window.__mm.conn.send('spawn_group', {count: k, center: [0, 5], spacing: 1.3,"
                      " target: [0, 6], speed: 1.2})", n - 1)
    page.wait_for_function("(k) => window.__mm.state.frame.characters.length === k", arg=n, timeout=60000)
    page.wait_for_function("(k) => window.__mm.bodiesDrawn() === k", arg=n, timeout=120000)
    page.evaluate("""() => { const v = window.__mm.view; v.follow = false;
        v.controls.target.set(0, 0.8, 5); v.camera.position.set(0, 11, -10); v.controls.update(); }""")


def page_frame_rate(viewer, counts: list[int], seconds: float, repeats: int = 3) -> dict:
    """The page's frame rate (frames/s) with bodies and with stick figures for each count
    of characters, paused and running (see the module doc): the median of ``repeats``
    measurements of ``seconds`` each, the two drawings alternated."""
    from playwright.sync_api import sync_playwright

    from motionmatch.viewer._bundle import ensure_bundle
    from motionmatch.viewer.server import ViewerServer

    sys.path.insert(0, str(TESTS))
    from test_viewer_e2e import CHROMIUM_ARGS, chromium_path

    exe = chromium_path()
    if exe is None:
        sys.exit("--page needs Debian's chromium (apt-get install chromium)")
    viewer.static_dir = ensure_bundle(log=lambda m: print(m, file=sys.stderr))
    viewer.prepare(background=False)
    srv = ViewerServer(viewer, "127.0.0.1", 0).start()
    out: dict = {"renderer": None, "viewport": [1280, 760], "seconds": seconds, "counts": {}}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, headless=True,
                                        args=[*CHROMIUM_ARGS, "--disable-frame-rate-limit", "--disable-gpu-vsync"])
            for n in counts:
                page = browser.new_page(viewport={"width": 1280, "height": 760})
                _open_crowd(page, srv.url + "?quality=full", n)  # both drawings at full quality (no drawing cheaper)
                time.sleep(1.0)
                row = {}
                for state in ("paused", "running"):
                    page.evaluate("(p) => window.__mm.conn.send('pause', {paused: p})", state == "paused")
                    time.sleep(0.5)
                    fps: dict[str, list[float]] = {"stick": [], "body": []}
                    for _ in range(repeats):  # alternated, so that a loaded machine's drift hits both alike
                        for mode in ("stick", "body"):
                            page.evaluate("(on) => window.__mm.setStick(on)", mode == "stick")
                            page.evaluate(_FPS_JS, 300)  # settle
                            fps[mode].append(page.evaluate(_FPS_JS, int(seconds * 1000)))
                    for mode, v in fps.items():
                        row[f"{state}_{mode}_fps"] = round(float(np.median(v)), 1)
                    row[f"{state}_ratio"] = round(row[f"{state}_body_fps"] / max(row[f"{state}_stick_fps"], 1e-9), 2)
                # what a user gets: the page drawing cheaper while its frames come slowly
                _open_crowd(page, srv.url, n)  # (a new page is a new session)
                page.evaluate("(p) => window.__mm.conn.send('pause', {paused: p})", False)
                time.sleep(8.0)
                row["adaptive_fps"] = round(float(np.median([page.evaluate(_FPS_JS, int(seconds * 1000))
                                                             for _ in range(repeats)])), 1)
                row["adaptive_quality"] = page.evaluate("() => window.__mm.view.quality") or "full"
                if out["renderer"] is None:
                    out["renderer"] = "software (SwiftShader)" if page.evaluate("() => window.__mm.view.software") \
                        else "hardware"
                out["counts"][str(n)] = row
                page.close()
            browser.close()
    finally:
        srv.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/bench_viewer.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--db")
    src.add_argument("--data")
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--ticks", type=int, default=1200, help="ticks per measurement (default 1200: 20 s)")
    ap.add_argument("--seconds", type=float, default=5.0, help="real-time loop and websocket measurement")
    ap.add_argument("--no-websocket", action="store_true")
    ap.add_argument("--full-rate", action="store_true",
                    help="update every character every tick (no level of detail for background agents)")
    ap.add_argument("--stagger", action="store_true", help="spread the agents' periodic searches over the interval")
    ap.add_argument("--compare-reference", action="store_true",
                    help="also measure the agents with the numpy reference controller (baseline, same run)")
    ap.add_argument("--page", action="store_true",
                    help="measure the page's frame rate in headless Chromium (bodies vs stick figures) instead")
    ap.add_argument("--counts", default="1,10,51", help="--page: numbers of characters (default 1,10,51)")
    ap.add_argument("--capacity", action="store_true",
                    help="find how many walking characters one session steps at full rate (60 Hz each)")
    ap.add_argument("--rig", metavar="RIG", help="also measure the characters drawn on this rig (.glb/.gltf/.bvh), "
                    "as `motionmatch viewer --rig` does: without, with and without it again, in one run")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    from motionmatch.viewer.data import open_database
    from motionmatch.viewer.server import Viewer
    from motionmatch.viewer.session import Session

    db, source = open_database(a.db, a.data, progress=False, log=lambda m: print(m, file=sys.stderr))
    if a.capacity:
        from dataclasses import replace

        from motionmatch.viewer.messages import Limits

        viewer = Viewer(db, source_description=source.description, adaptive_rate=False,
                        limits=replace(Limits(), characters=100_000))
        log = (lambda m: print(m, file=sys.stderr)) if a.json else print
        res = walking_capacity(viewer, log=log)
        if a.rig:
            viewer.rig = viewer.rigs.load(a.rig)
            log(f"on the rig {viewer.rig.name} ({viewer.rig.joints} joints):")
            res = {"without_rig": res, "rig": {"file": viewer.rig.name, "joints": viewer.rig.joints},
                   "with_rig": walking_capacity(viewer, log=log)}
        viewer.close()
        if a.json:
            print(json.dumps(res, indent=1))
        elif a.rig:
            print(f"walking characters stepped at full rate (60 Hz each) in one session: "
                  f"{res['without_rig']['walkers_at_full_rate']} on the database's skeleton, "
                  f"{res['with_rig']['walkers_at_full_rate']} drawn on {res['rig']['file']} ({res['rig']['joints']} joints)")
        else:
            print(f"walking characters stepped at full rate (60 Hz each) in one session: {res['walkers_at_full_rate']}")
        return 0
    viewer = Viewer(db, source_description=source.description, adaptive_rate=not a.full_rate)
    if a.page:
        res = page_frame_rate(viewer, [int(c) for c in a.counts.split(",")], a.seconds)
        viewer.close()
        if a.json:
            print(json.dumps(res, indent=1))
            return 0
        print(f"page frame rate, headless Chromium, {res['renderer']} WebGL, {res['viewport'][0]}x{res['viewport'][1]}:")
        for n, r in res["counts"].items():
            for state in ("paused", "running"):
                print(f"  {n:>3} characters, simulation {state:7}: bodies {r[f'{state}_body_fps']:6.1f} fps, "
                      f"stick figures {r[f'{state}_stick_fps']:6.1f} fps (baseline): {r[f'{state}_ratio']:.2f}x")
            print(f"  {n:>3} characters, as a user gets it (the page drawing cheaper while frames come slowly): "
                  f"{r['adaptive_fps']:.1f} fps, drawn with {r['adaptive_quality']}")
        return 0
    out: dict = {"database": repr(db), "tick_budget_ms": round(1000 * DT, 3)}

    # 1. one character
    s = Session(viewer, _Null())
    for _ in range(60):  # warm up (numba, searchers)
        s.step()
    step, enc, size = measure_ticks(s, list(s.chars.values()), a.ticks)
    out["one_character"] = {"step": step, "encode": enc, "frame_bytes": size}

    # 2. many agents
    out["agents"] = measure_agents(viewer, a.agents, a.ticks, a.stagger)
    if a.rig:  # the same ticks' frames on the user's rig
        out["rig"] = measure_rig(viewer, viewer.rigs.load(a.rig), a.agents, a.ticks)
    if a.compare_reference:
        with _ReferenceControllers():
            out["agents_reference_controller"] = measure_agents(viewer, a.agents, a.ticks, a.stagger)
    # the real loop, on its thread, for a few seconds
    sink = _Null()
    s2 = Session(viewer, sink)
    spawn_agents(s2, a.agents)
    s2.start()
    t0 = time.perf_counter()
    time.sleep(a.seconds)
    ticks0 = s2.tick
    time.sleep(a.seconds)
    el = time.perf_counter() - t0 - a.seconds
    s2.close()
    out["agents"]["loop_tick_hz"] = round((s2.tick - ticks0) / el, 2)
    out["agents"]["loop_late_ticks"] = s2.late_ticks
    out["agents"]["loop_dropped_ticks"] = s2.dropped_ticks
    if not a.no_websocket:
        out["websocket"] = websocket_rate(viewer, a.agents, a.seconds)
    viewer.close()
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        o, g = out["one_character"], out["agents"]
        print(f"database: {out['database']}")
        print(f"one character: tick {o['step']['median_ms']} ms median, {o['step']['mean_ms']} mean, "
              f"{o['step']['p99_ms']} p99, {o['step']['max_ms']} max; encode {o['encode']['median_ms']} ms; "
              f"{o['frame_bytes']} bytes/frame")
        print(f"{g['count']} characters: tick {g['step']['median_ms']} ms median, {g['step']['mean_ms']} mean, "
              f"{g['step']['p95_ms']} p95, {g['step']['max_ms']} max ({100 * g['step']['within_budget']:.1f}% within "
              f"{out['tick_budget_ms']} ms); encode {g['encode']['median_ms']} ms; real loop {g['loop_tick_hz']} Hz "
              f"({g['loop_late_ticks']} late, {g['loop_dropped_ticks']} dropped); background agents updated at "
              f"{g['background_update_hz']:g} Hz")
        print(f"  searches per tick: {g['step']['searches_per_tick']['mean']} mean, "
              f"{g['step']['searches_per_tick']['p95']:g} p95, {g['step']['searches_per_tick']['max']} max"
              f"{' (staggered)' if a.stagger else ''}")
        if "agents_reference_controller" in out:
            r = out["agents_reference_controller"]["step"]
            print(f"  baseline, numpy reference controller: tick {r['median_ms']} ms median, {r['mean_ms']} mean, "
                  f"{r['p95_ms']} p95 ({100 * r['within_budget']:.1f}% within budget): "
                  f"{r['median_ms'] / g['step']['median_ms']:.1f}x the median tick")
        print(f"pose stream: {g['frame_bytes']} bytes/frame, {g['pose_bytes_per_s_at_60hz'] / 1e6:.3f} MB/s at 60 Hz")
        if "rig" in out:
            r = out["rig"]
            print(f"{r['characters']} characters on the rig {r['file']} ({r['joints']} joints), the same {r['ticks']} "
                  f"ticks: mean tick {r['tick_ms']['without']} ms on the database's skeleton, {r['tick_ms']['with']} ms "
                  f"on the rig: {100 * r['extra_per_tick']:+.1f}% per tick (step {r['step_ms']} ms; pose frame "
                  f"{r['frame_ms']['without']} -> {r['frame_ms']['with']} ms, of which retargeting "
                  f"{r['retarget_ms']} ms; {r['frame_bytes']['without']} -> {r['frame_bytes']['with']} bytes)")
        if "websocket" in out:
            w = out["websocket"]
            print(f"websocket client: {w['pose_bytes_per_s'] / 1e6:.3f} MB/s of poses + {w['json_bytes_per_s']} B/s JSON, "
                  f"{w['frames_per_s']} frames/s; server ticks {w['server_tick_hz']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
