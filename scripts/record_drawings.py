"""Record paths drawn as people draw them, in the real viewer page (issue 33, item 7).

    python scripts/record_drawings.py [--db DB.npz] [--out paths/drawn_by_hand] [--only NAME ...]

Starts the viewer's server on a free local port, opens its page in headless Chromium
(Playwright, Debian's ``/usr/bin/chromium`` or ``$MOTIONMATCH_CHROMIUM``; no browser
download), picks the path tool and drags the mouse over the ground as a hand does: the
pointer events go through Chromium's input pipeline (DevTools ``Input.dispatchMouseEvent``,
the same events a person's mouse makes) to the page's own path tool (``web/src/input.js``:
ground points from the camera's ray, points closer than 2 cm dropped, times from the
events' ``timeStamp``), which sends the ``path`` message. That message, exactly as the server
receives it (taken off the page's websocket), is saved as ``<name>.json``: ``"points": [[t,
x, z], ...]`` (drawing seconds, metres on the ground), ``"scale"`` (the page's "drawing time"
setting: world time is drawing time / scale), plus what made it (``"device"``, ``"hand"``: the
model's parameters, ``"seed"``). Each path is cancelled before the next is drawn.

Reproducible to about a pixel: each event carries the time the hand model gives it (the
DevTools ``timestamp``), so the page stamps it with that time however slowly a loaded
machine delivers it, and the positions come from a seeded model; but the route is laid
out on the screen from where the character and its following camera stand when the
drawing starts (they idle and drift between drawings), so a second recording moves by a
fraction of a pixel and the page's 2 cm filter may keep other events (re-recorded:
``pad_corner`` the same 160 events, its end within 5 mm; ``line`` 182 events against 168,
its end within 3 cm). The committed files are the record. They are our own synthetic
drawings, not motion data.

**The model of a hand** (every length in CSS pixels of a 1280 x 760 page, the default
camera; one drawing = a template route given in metres on the ground, projected to the
screen through the page's camera):

* *Route*: the template's polyline in pixels. At a corner sharper than 50 degrees the
  hand *overshoots* (probability ``overshoot_p``): it runs on past the corner by
  ``U(0.5, 1) x overshoot_px`` along the way it came, then cuts back to the outgoing leg
  a third of that beyond the corner (a hook, the correction).
* *Speed* along the route (px/s): the two-thirds power law of human drawing, ``v = fast x
  min(1, (R / 300 px)^(1/3))`` for the route's radius of curvature ``R`` (measured over
  +-12 px), at least ``0.12 x fast``: slow in corners, fast on straights; a bell-shaped
  start and end (0.25 s each); times ``exp(u)`` with ``u`` an Ornstein-Uhlenbeck process
  (sigma ``speed_noise``, 0.4 s correlation): uneven speed. A *pause* (``pause_s`` at
  arc fraction ``pause_at``): the hand rests, only its tremor moves.
* *Drift*: a slow sideways wander off the route, an Ornstein-Uhlenbeck process (sigma
  ``drift_px``, 0.7 s correlation), and *corrections*: ``corrections`` times the hand
  veers ``U(0.6, 1) x correction_px`` to a random side over 0.25 s and steers back over
  0.4 s.
* *Tremor*: a 8-12 Hz sway of ``tremor_px`` (0.2-0.6; phase wandering) plus white noise of 0.3 px.
* *Device*: a **mouse** reports every 8 ms (+-0.5 ms) at whole pixels; a **touchpad**
  every 12-16 ms, each report off by white noise of ``pad_jitter_px`` (small
  high-frequency steps of the finger's contact patch), at whole pixels.

The hand is integrated at 1 ms; a report samples it. Every parameter is drawn per
drawing from ``numpy.random.default_rng(seed)`` within the ranges above (``HANDS``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--mute-audio"]
VIEWPORT = {"width": 1280, "height": 760}


@dataclass(frozen=True)
class Hand:
    """One drawing's hand (see the module docstring); lengths in px, speeds in px/s."""

    device: str  # "mouse" or "touchpad"
    fast: float
    speed_noise: float
    overshoot_p: float
    overshoot_px: float
    drift_px: float
    corrections: int
    correction_px: float
    tremor_px: float
    tremor_hz: float
    pause_at: float | None
    pause_s: float
    pad_jitter_px: float


def _arc(line: np.ndarray) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(line, axis=0), axis=1))])


def _densify(line: np.ndarray, step: float = 1.0) -> np.ndarray:
    s = _arc(line)
    keep = np.concatenate([[True], np.diff(s) > 1e-9])
    line, s = line[keep], s[keep]
    u = np.linspace(0.0, s[-1], max(2, int(s[-1] / step) + 1))
    return np.stack([np.interp(u, s, line[:, 0]), np.interp(u, s, line[:, 1])], axis=1)


def _ou(rng: np.random.Generator, n: int, dt: float, sigma: float, tau: float) -> np.ndarray:
    """An Ornstein-Uhlenbeck process ``[n]`` (stationary sigma, correlation time tau s)."""
    a = math.exp(-dt / tau)
    b = sigma * math.sqrt(1.0 - a * a)
    out = np.empty(n)
    x = rng.normal(0.0, sigma)
    for i in range(n):
        x = a * x + b * rng.normal()
        out[i] = x
    return out


def _with_overshoots(route: np.ndarray, hand: Hand, rng: np.random.Generator) -> np.ndarray:
    """The route with a hook at each sharp corner the hand overshoots."""
    out = [route[0]]
    for i in range(1, len(route) - 1):
        a, b, c = route[i - 1], route[i], route[i + 1]
        u, w = b - a, c - b
        lu, lw = np.linalg.norm(u), np.linalg.norm(w)
        turn = math.degrees(math.acos(np.clip(np.dot(u, w) / max(lu * lw, 1e-9), -1, 1)))
        out.append(b)
        if turn > 50 and rng.random() < hand.overshoot_p:
            o = rng.uniform(0.5, 1.0) * hand.overshoot_px
            out[-1] = b + u / lu * o  # ran on past the corner
            out.append(b + w / lw * min(o / 3, lw / 3))  # cut back to the outgoing leg
    out.append(route[-1])
    return np.asarray(out)


def hand_motion(route_px: np.ndarray, hand: Hand, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Report times ``[E]`` (s from the press) and pointer positions ``[E, 2]`` (px) of a
    hand drawing ``route_px [W, 2]`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    line = _densify(_with_overshoots(np.asarray(route_px, float), hand, rng))
    s = _arc(line)
    # radius of curvature over +-12 px
    k = 12
    i = np.arange(len(line))
    a, b = line[np.clip(i - k, 0, len(line) - 1)], line[np.clip(i + k, 0, len(line) - 1)]
    u, w = line - a, b - line
    cross = np.abs(u[:, 0] * w[:, 1] - u[:, 1] * w[:, 0])
    ang = np.arctan2(cross, np.einsum("ij,ij->i", u, w))
    radius = (2 * k) / np.maximum(ang, 1e-6)
    v_shape = hand.fast * np.clip((radius / 300.0) ** (1 / 3), 0.12, 1.0)
    v_shape = np.convolve(np.pad(v_shape, 15, mode="edge"), np.ones(31) / 31, mode="valid")
    normal = np.stack([-(b - a)[:, 1], (b - a)[:, 0]], axis=1)
    normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-9)
    # integrate the hand at 1 ms
    dt = 1e-3
    total = s[-1]
    n_max = int(120 / dt)
    speed_mod = np.exp(_ou(rng, n_max // 10 + 2, dt * 10, hand.speed_noise, 0.4))
    drift = _ou(rng, n_max // 10 + 2, dt * 10, hand.drift_px, 0.7)
    corr_at = np.sort(rng.uniform(0.15, 0.85, hand.corrections)) * total
    corr_side = rng.choice([-1.0, 1.0], hand.corrections) * rng.uniform(0.6, 1.0, hand.corrections) * hand.correction_px
    corr_t0 = np.full(hand.corrections, np.nan)
    tremor_phase = rng.uniform(0, 2 * math.pi)
    ramp = 0.25
    pos, paused, pause_left = 0.0, False, hand.pause_s
    times, pts = [], []
    j = 0
    while pos < total and j < n_max:
        tm = j * dt
        idx = min(int(np.searchsorted(s, pos)), len(s) - 1)
        v = v_shape[idx] * speed_mod[j // 10]
        v *= min(1.0, 0.15 + 0.85 * math.sin(min(tm / ramp, 1.0) * math.pi / 2) ** 2)  # bell-shaped start
        left = total - pos
        v *= min(1.0, 0.15 + 0.85 * min(left / (hand.fast * ramp * 0.5), 1.0))  # and end
        if hand.pause_at is not None and pause_left > 0 and pos >= hand.pause_at * total:
            paused = True
        if paused:
            pause_left -= dt
            if pause_left <= 0:
                paused = False
            v = 0.0
        pos += v * dt
        # sideways: drift, corrections (out over 0.25 s, back over 0.4 s)
        off = drift[j // 10]
        for c in range(hand.corrections):
            if np.isnan(corr_t0[c]) and pos >= corr_at[c]:
                corr_t0[c] = tm
            if not np.isnan(corr_t0[c]):
                e = tm - corr_t0[c]
                if e < 0.25:
                    off += corr_side[c] * math.sin(e / 0.25 * math.pi / 2)
                elif e < 0.65:
                    off += corr_side[c] * math.cos((e - 0.25) / 0.4 * math.pi / 2)
        tremor_phase += 2 * math.pi * hand.tremor_hz * dt + rng.normal(0, 0.02)
        p = np.array([np.interp(pos, s, line[:, 0]), np.interp(pos, s, line[:, 1])]) + normal[idx] * off
        p += hand.tremor_px * np.array([math.cos(tremor_phase), math.sin(1.3 * tremor_phase)])
        times.append(tm)
        pts.append(p)
        j += 1
    times, pts = np.asarray(times), np.asarray(pts)
    # the device's reports
    if hand.device == "mouse":
        period, jit = 0.008, 0.0005
    else:
        period, jit = 1.0 / rng.uniform(62, 83), 0.001
    n = int(times[-1] / period)
    rt = np.arange(1, n + 1) * period + rng.uniform(-jit, jit, n)
    rt = np.concatenate([[0.0], rt[(rt > 0) & (rt < times[-1])], [times[-1]]])
    rp = np.stack([np.interp(rt, times, pts[:, 0]), np.interp(rt, times, pts[:, 1])], axis=1)
    rp += rng.normal(0.0, 0.3, rp.shape)
    if hand.device == "touchpad":
        rp += rng.normal(0.0, hand.pad_jitter_px, rp.shape)
    return rt, np.round(rp)


# ---------------------------------------------------------------------------- the drawings
def _circle(cx, cz, r, a0=0.0, turns=1.0, n=48, shrink=0.0):
    out = []
    for k in range(int(n * turns) + 1):
        a = a0 + 2 * math.pi * k / n
        rr = r * (1 - shrink * k / (n * turns))
        out.append((cx + rr * math.sin(a), cz - rr * math.cos(a)))
    return out


#: name: (device, template route in metres on the ground from the character (x left on
#: screen, z away from the camera), seed). Sizes fit the default camera's view. Drawn with
#: the page's "drawing time" setting at :data:`SCALE` (0.5: the character moves at half the
#: drawing speed, a walk or a jog for a hand's speeds on this camera), except those in
#: :data:`HURRIED` (1: at the drawing speed, faster than the data runs: the speed limit's case).
DRAWINGS = {
    "line": ("mouse", [(0, 0), (0.3, 2.0), (0.1, 4.5), (-0.4, 7.0)], 101),
    "corner": ("mouse", [(0, 0), (0, 3.5), (-3.5, 3.5)], 102),
    "u_turn": ("mouse", [(0, 0), (0, 4.0), (-1.5, 4.0), (-1.5, 0.5)], 103),
    "s_curve": ("mouse", [(0.0, 0.0), (1.4, 1.0), (1.5, 2.5), (0.0, 3.5), (-1.5, 4.5), (-1.4, 6.0), (0.0, 7.0)], 104),
    "zigzag": ("mouse", [(0, 0), (1.8, 1.8), (-1.8, 3.6), (1.8, 5.4), (-0.5, 7.2)], 105),
    "circle": ("mouse", _circle(0.0, 2.8, 2.8), 106),
    "figure_eight": ("mouse", [(0.0, 0.0)] + [(2.2 * math.sin(a), 2.6 + 1.6 * math.sin(2 * a))
                                              for a in (2 * math.pi * k / 48 for k in range(49))], 107),
    "square": ("mouse", [(0, 0), (0, 3.5), (-3.5, 3.5), (-3.5, 0), (0, 0)], 108),
    "spiral": ("mouse", _circle(0.0, 3.5, 3.5, turns=1.6, n=48, shrink=0.75), 109),
    "meander": ("mouse", [(0, 0), (0.8, 1.2), (0.2, 2.4), (1.5, 3.3), (2.8, 2.6), (3.2, 4.2), (2.0, 5.5),
                          (0.5, 5.2), (-0.8, 6.5), (-2.5, 6.0)], 110),
    "detour_pause": ("mouse", [(0, 0), (0.2, 2.5), (-1.5, 4.0), (-3.5, 4.2), (-4.0, 6.5)], 111),
    "lightning": ("mouse", [(0, 0), (2.5, 1.5), (0.5, 2.2), (3.0, 4.0), (0.0, 4.8), (1.5, 7.5)], 112),
    "pad_curve": ("touchpad", [(0, 0), (0.8, 1.5), (0.6, 3.2), (-0.6, 4.6), (-2.4, 5.2)], 201),
    "pad_corner": ("touchpad", [(0, 0), (0, 3.0), (3.0, 3.0), (3.0, 5.5)], 202),
    "pad_loop": ("touchpad", _circle(0.0, 2.2, 2.2, a0=0.0, turns=1.0, n=40) + [(1.5, 6.0)], 203),
}


SCALE = 0.5
HURRIED = {"line": 1.0, "lightning": 1.0}


def hand_for(name: str, device: str, seed: int) -> Hand:
    """The hand that draws ``name``: parameters drawn from ``seed`` within the docstring's ranges."""
    rng = np.random.default_rng(seed)
    pause = name == "detour_pause" or rng.random() < 0.25
    return Hand(device=device, fast=float(rng.uniform(150, 230)), speed_noise=float(rng.uniform(0.12, 0.25)),
                overshoot_p=float(rng.uniform(0.5, 0.9)), overshoot_px=float(rng.uniform(12, 30)),
                drift_px=float(rng.uniform(2.0, 6.0)), corrections=int(rng.integers(0, 3)),
                correction_px=float(rng.uniform(8, 20)), tremor_px=float(rng.uniform(0.2, 0.6)),
                tremor_hz=float(rng.uniform(8, 12)), pause_at=float(rng.uniform(0.35, 0.65)) if pause else None,
                pause_s=float(rng.uniform(0.5, 1.2)) if pause else 0.0,
                pad_jitter_px=float(rng.uniform(1.2, 2.2)) if device == "touchpad" else 0.0)


# ------------------------------------------------------------------------------ the page
def chromium() -> str:
    env = os.environ.get("MOTIONMATCH_CHROMIUM")
    exe = env or shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
    if not Path(exe).exists():
        sys.exit("Debian's chromium is not installed (apt-get install chromium), or set MOTIONMATCH_CHROMIUM")
    return exe


def record(db_file: Path, out: Path, names: list[str]) -> list[Path]:
    from playwright.sync_api import sync_playwright

    from motionmatch.database import MotionDatabase
    from motionmatch.viewer._bundle import ensure_bundle
    from motionmatch.viewer.data import FileCatalog
    from motionmatch.viewer.server import Viewer, ViewerServer

    db = MotionDatabase.load(db_file)
    viewer = Viewer(db, catalog=FileCatalog({}), source_description=str(db_file),
                    static_dir=ensure_bundle(log=lambda m: print(m, file=sys.stderr)))
    viewer.prepare(background=False)
    server = ViewerServer(viewer, "127.0.0.1", 0).start()
    written = []
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="mm-draw-"), executable_path=chromium(),
                                                       headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT)
            page = ctx.new_page()
            sent: list[dict] = []

            def on_ws(ws):
                ws.on("framesent", lambda f: sent.append(json.loads(f)) if isinstance(f, str) and f.startswith(
                    '{"type":"path"') else None)

            page.on("websocket", on_ws)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(server.url)
            page.wait_for_function("() => window.__mm && window.__mm.state.frame && window.__mm.state.welcome",
                                   timeout=120_000)
            cdp = ctx.new_cdp_session(page)
            origin, last_end = page.evaluate("() => performance.timeOrigin") / 1000.0, 0.0
            for name in names:
                device, template, seed = DRAWINGS[name]
                hand = hand_for(name, device, seed)
                page.evaluate("() => window.__mm.setTool('path')")
                page.locator("label:has-text('drawing time') input").fill(str(HURRIED.get(name, SCALE)))
                root = page.evaluate("() => window.__mm.character().root")
                world = [[root[0] + x, root[2] + z] for x, z in template]
                pix = page.evaluate("(pts) => pts.map(([x, z]) => window.__mm.toScreen(x, z))", world)
                route = np.array([[q["x"], q["y"]] for q in pix])
                times, pts = hand_motion(route, hand, seed)
                pts[:, 0] = np.clip(pts[:, 0], 1, VIEWPORT["width"] - 2)
                pts[:, 1] = np.clip(pts[:, 1], 1, VIEWPORT["height"] - 2)
                # stamped in the past (after the page's time origin and the last drawing), so
                # that Chromium takes the hand's times as they are
                base = max(time.time() - times[-1] - 1.0, origin + 1.0, last_end + 0.5)
                while base + times[-1] > time.time() - 0.5:
                    time.sleep(0.1)
                last_end = base + times[-1]
                n0 = len(sent)
                kinds = ["mousePressed"] + ["mouseMoved"] * (len(times) - 2) + ["mouseReleased"]
                for kind, t, (x, y) in zip(kinds, times, pts):
                    ev = {"type": kind, "x": float(x), "y": float(y), "button": "left",
                          "buttons": 0 if kind == "mouseReleased" else 1, "timestamp": float(base + t)}
                    if kind != "mouseMoved":
                        ev["clickCount"] = 1
                    cdp.send("Input.dispatchMouseEvent", ev)
                deadline = time.monotonic() + 30
                while len(sent) == n0 and time.monotonic() < deadline:
                    page.wait_for_timeout(100)
                if len(sent) == n0:
                    sys.exit(f"{name}: the page sent no path (see the page's toast); nothing written")
                msg = sent[-1]
                page.evaluate("() => window.__mm.conn.send('path_cancel', {})")
                page.wait_for_timeout(1500)  # the character settles before the next drawing
                doc = {"points": msg["points"], "scale": msg["scale"],
                       "recorded": {"by": "scripts/record_drawings.py", "page": "the viewer's path tool, mode "
                                    f"{msg['mode']}", "device": device, "seed": seed, "template_m": template,
                                    "reports": len(times), "hand": asdict(hand)}}
                f = out / f"{name}.json"
                write_path(f, doc)
                written.append(f)
                pts_m = np.asarray(msg["points"])
                length = float(np.linalg.norm(np.diff(pts_m[:, 1:], axis=0), axis=1).sum())
                print(f"wrote {f.relative_to(REPO) if f.is_relative_to(REPO) else f}: {len(pts_m)} points, "
                      f"{length:.1f} m in {pts_m[-1, 0]:.1f} s ({device}, {len(times)} reports)", flush=True)
            ctx.close()
            if errors:
                sys.exit(f"page errors: {errors}")
    finally:
        server.stop()
    return written


def write_path(file: Path, doc: dict) -> None:
    """JSON with one point per line (small, readable diffs); written whole or not at all."""
    head = {k: v for k, v in doc.items() if k != "points"}
    body = ",\n".join("  " + json.dumps(p) for p in doc["points"])
    text = "{\n" + "".join(f'"{k}": {json.dumps(v)},\n' for k, v in head.items()) + f'"points": [\n{body}\n]\n}}\n'
    tmp = file.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(file)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default=os.environ.get("MOTIONMATCH_DB", "/work/cache/lafan.npz"),
                    help="a database for the viewer (any: the drawings do not depend on it)")
    ap.add_argument("--out", default=str(REPO / "paths" / "drawn_by_hand"))
    ap.add_argument("--only", nargs="+", choices=sorted(DRAWINGS), help="record only these drawings")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not Path(args.db).exists():
        sys.exit(f"--db {args.db}: not found; build one with 'motionmatch build'")
    record(Path(args.db), out, args.only or list(DRAWINGS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
