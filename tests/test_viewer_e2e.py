"""The viewer end to end in a real headless browser: Debian's chromium driven by Playwright
(``executable_path``; no browser download). The page loads and draws, holding W walks the
character, dragging on the ground draws a path the character follows, obstacles are placed,
dragged and deleted, an obstacle on the path is walked around (environment plugin), the
debug panel, pause/step/scrub, BVH, glTF and video export work, the characters are skinned bodies (and stick figures on the debug toggle), a scenario file from the
repository's ``scenarios/`` is loaded and played, the pose panel plays a recorded
keypoint file and shows the pose status, and the forest's terrain (or a terrain file the
user loads) is drawn where the model puts the ground.

Each test saves a screenshot in ``out/viewer-e2e/`` (or ``$MOTIONMATCH_SCREENSHOTS``).
Skipped, with the reason, when chromium, Playwright or the page's bundle (Node.js) is missing.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO, data_root
from test_viewer_support import small_database, start_server, viewer_deps_or_skip

pytestmark = pytest.mark.slow  # about 60 s with a software-rendered WebGL; CI runs them

viewer_deps_or_skip()
pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: pip install playwright "
                    "(no browser download needed: the tests use Debian's chromium)")

SHOTS = Path(os.environ.get("MOTIONMATCH_SCREENSHOTS", REPO / "out" / "viewer-e2e"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--mute-audio"]


def chromium_path() -> str | None:
    env = os.environ.get("MOTIONMATCH_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


@pytest.fixture(scope="module")
def bundle():
    from motionmatch.viewer._bundle import BundleError, ensure_bundle

    try:
        return ensure_bundle(log=lambda m: None)
    except BundleError as e:
        pytest.skip(f"the page's bundle cannot be built: {e}")


@pytest.fixture(scope="module")
def server(tmp_path_factory, bundle):
    db = small_database(tmp_path_factory.getbasetemp())
    poses = tmp_path_factory.mktemp("poses")
    srv = start_server(db, {"data": data_root(), "scenarios": REPO / "scenarios", "poses": poses}, static_dir=bundle)
    srv.poses = poses
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def browser_context():
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium); the tests never download one")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="mm-chromium-"), executable_path=exe, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 760}, bypass_csp=True, accept_downloads=True)
        yield ctx
        ctx.close()


@pytest.fixture
def page(browser_context, server):
    pg = browser_context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(server.url)
    pg.wait_for_function("() => window.__mm && window.__mm.state.frame && window.__mm.state.welcome", timeout=30000)
    pg.errors = errors
    yield pg
    pg.close()
    assert not errors, f"page errors: {errors}"


def shot(page, name: str) -> Path:
    p = SHOTS / f"{name}.png"
    page.screenshot(path=str(p))
    return p


def root(page, cid=None):
    return page.evaluate("(id) => { const c = window.__mm.character(id); return c ? c.root : null; }", cid)


def screen(page, x: float, z: float):
    s = page.evaluate("([x, z]) => window.__mm.toScreen(x, z)", [x, z])
    return s["x"], s["y"]


def wait_until(fn, timeout=15.0, step=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return fn()


def draw(page, points, seconds: float) -> float:
    """Drag the mouse along world ground points, taking about ``seconds``; returns the
    seconds it took (the drawing time the path is stamped with)."""
    page.click("button[data-tool=path]")
    n = 60
    seg = [math.dist(a, b) for a, b in itertools.pairwise(points)]
    total = sum(seg)
    world = []
    for i in range(n + 1):
        s = total * i / n
        k = 0
        while k < len(seg) - 1 and s > seg[k]:
            s -= seg[k]
            k += 1
        a, b = points[k], points[k + 1]
        t = min(s / seg[k], 1.0)
        world.append([a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t])
    # all screen positions at once: the camera stands still while the character waits
    pix = page.evaluate("(pts) => pts.map(([x, z]) => window.__mm.toScreen(x, z))", world)
    page.mouse.move(pix[0]["x"], pix[0]["y"])
    page.mouse.down()
    t0 = time.monotonic()
    for i, p in enumerate(pix[1:], 1):
        page.mouse.move(p["x"], p["y"])
        wait = t0 + seconds * i / n - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    page.mouse.up()
    return time.monotonic() - t0


def test_the_page_loads_and_draws(page):
    st = page.evaluate("() => ({status: document.querySelector('#status').textContent, "
                       "chars: window.__mm.state.frame.characters.length, joints: window.__mm.state.frame.characters[0].joints})")
    assert st["status"].startswith("connected") and st["chars"] == 1 and st["joints"] == 23
    p = shot(page, "page_loads")
    from PIL import Image

    im = Image.open(p).convert("L").crop((300, 150, 900, 650))
    assert max(im.getextrema()) - min(im.getextrema()) > 60  # a character on the ground, not a blank canvas
    page.wait_for_function("() => window.__mm.state.stats", timeout=5000)
    # (under load the far characters' update rate drops: "... 1 char. (others at 30 Hz)")
    assert " 1 char." in page.evaluate("() => document.querySelector('#stats').textContent")
    # SwiftShader draws the full-quality view at some 7 frames a second: the page draws
    # cheaper (no shadows, then fewer pixels) and says so on its stats line
    page.wait_for_function("() => window.__mm.view.quality !== null", timeout=20000)
    page.wait_for_function("() => document.querySelector('#stats').textContent.includes('drawn with no shadows')",
                           timeout=5000)


def test_holding_w_walks_the_character(page):
    page.click("#view")
    p0 = root(page)
    yaw = page.evaluate("() => window.__mm.view.cameraYaw()")
    page.keyboard.down("w")
    time.sleep(2.0)
    shot(page, "hold_w")
    page.keyboard.up("w")
    p1 = root(page)
    fwd = (math.sin(yaw), math.cos(yaw))
    d = (p1[0] - p0[0], p1[2] - p0[2])
    along = d[0] * fwd[0] + d[1] * fwd[1]
    across = abs(d[0] * fwd[1] - d[1] * fwd[0])
    assert along > 0.6 and across < 0.5 * along, (p0, p1, yaw)


def test_a_path_dragged_on_the_ground_is_followed(page):
    start = root(page)
    pts = [(start[0], start[2] + 0.3), (start[0], start[2] + 3.0), (start[0] - 2.0, start[2] + 4.5)]
    took = draw(page, pts, seconds=3.0)
    info = page.wait_for_function("() => Object.values(window.__mm.state.pathInfo)[0]", timeout=10000).json_value()
    assert info["length"] > 3.0 and len(info["speeds"]) == len(info["points"])
    # drawing speed is walking speed: the path lasts as long as the drawing did
    assert abs(info["duration"] - took) < 0.25 * took + 0.3, (info["duration"], took)
    time.sleep(1.5)
    shot(page, "path_following")
    end = info["points"][-1]

    track = []

    def near_end():
        p = root(page)
        track.append((round(time.monotonic(), 1), round(p[0], 2), round(p[2], 2)))
        return math.hypot(p[0] - end[0], p[2] - end[1]) < 0.8

    ok = wait_until(near_end, timeout=15 + info["duration"])
    assert ok, (root(page), end, took, page.evaluate("() => window.__mm.state.lastError"), track[::10])
    shot(page, "path_done")


def test_obstacles_are_placed_dragged_and_deleted(page):
    page.click("button[data-tool=obstacle]")
    page.mouse.click(*screen(page, 1.5, 2.0))
    page.wait_for_function("() => window.__mm.state.obstacles.length === 1", timeout=5000)
    o = page.evaluate("() => window.__mm.state.obstacles[0]")
    assert o["shape"] == "disk" and abs(o["center"][0] - 1.5) < 0.2 and abs(o["center"][1] - 2.0) < 0.2
    page.fill("#ob-radius", "0.8")
    page.mouse.move(*screen(page, 1.5, 2.0))
    page.mouse.down()
    for i in range(1, 11):
        page.mouse.move(*screen(page, 1.5 - 0.25 * i, 2.0 + 0.1 * i))
        time.sleep(0.02)
    page.mouse.up()
    page.wait_for_function("() => Math.abs(window.__mm.state.obstacles[0].center[0] + 1.0) < 0.3", timeout=5000)
    shot(page, "obstacle_dragged")
    page.focus("#view")  # Delete in a text field edits the field; on the view it removes the obstacle
    page.keyboard.press("Delete")
    page.wait_for_function("() => window.__mm.state.obstacles.length === 0", timeout=5000)


def test_an_obstacle_on_the_path_is_walked_around(page):
    caps = page.evaluate("() => window.__mm.state.capabilities")
    assert caps.get("environment")
    start = root(page)
    centre = (start[0], start[2] + 3.0)
    page.click("button[data-tool=obstacle]")
    page.mouse.click(*screen(page, *centre))
    page.wait_for_function("() => window.__mm.state.obstacles.length === 1", timeout=5000)
    o = page.evaluate("() => window.__mm.state.obstacles[0]")
    draw(page, [(start[0], start[2] + 0.3), (start[0], start[2] + 6.0)], seconds=3.0)
    # (after the drawing: with the debug overlays a loaded machine's software GL drew the
    # page so slowly that each mouse move waited, and 3 s of drawing took 27)
    page.check("#debug-toggle")  # the screenshot shows the future body ellipses and the penalised obstacle
    closest = 1e9
    t0 = time.monotonic()
    passing = False
    while time.monotonic() - t0 < 12:
        p = root(page)
        d = math.hypot(p[0] - o["center"][0], p[2] - o["center"][1])
        closest = min(closest, d)
        if not passing and d < o["radius"] + 0.9 and abs(p[2] - o["center"][1]) < 0.6:
            passing = True  # beside it: the debug panel shows its penalty and the clearance
            page.evaluate("() => document.querySelector('#env-summary')?.scrollIntoView({block: 'start'})")
            shot(page, "obstacle_passing")
        time.sleep(0.05)
    page.wait_for_selector("#env-summary", timeout=5000)
    page.evaluate("() => document.querySelector('#env-summary').scrollIntoView({block: 'start'})")
    shot(page, "obstacle_avoided")
    assert closest > o["radius"] + 0.1, closest
    env = page.evaluate("() => window.__mm.state.debug && window.__mm.state.debug.environment")
    assert env and len(env["ellipses"]) == 3 and "clearance" in env


def test_debug_panel_pause_step_and_scrub(page):
    page.click("#view")
    page.keyboard.down("w")
    page.check("#debug-toggle")
    # the panel is rebuilt from each debug message (10 a second): count rows in the DOM, polled on a
    # timer rather than on animation frames, which a loaded machine's software GL may starve
    page.wait_for_function("() => document.querySelectorAll('#cost-table tr').length > 0 "
                           "&& document.querySelectorAll('#cand-table tr').length > 1", polling=100, timeout=15000)
    assert page.locator("#cost-table").is_visible()
    groups = page.evaluate("() => window.__mm.state.welcome.db.groups")
    assert page.locator("#cost-table tr").count() == len(groups)
    time.sleep(1.0)
    page.keyboard.up("w")
    page.click("#play")  # pause
    page.wait_for_function("() => window.__mm.state.paused", timeout=5000)
    tick = page.evaluate("() => window.__mm.state.frame.tick")
    page.click("#step")
    page.wait_for_function(f"() => window.__mm.state.frame.tick === {tick + 1}", timeout=5000)
    page.locator("#scrub").fill("0")  # the oldest frame kept
    page.wait_for_function("() => window.__mm.state.frame.back > 0", timeout=5000)
    shot(page, "debug_scrub")
    page.click("#play")
    page.wait_for_function("() => !window.__mm.state.paused", timeout=5000)


def character_pixels(path: Path, color: int) -> int:
    """Pixels of a screenshot in a character's colour (its hue, saturated, whatever the light)."""
    import colorsys

    import numpy as np
    from PIL import Image

    hsv = np.asarray(Image.open(path).convert("RGB").crop((0, 40, 940, 710)).convert("HSV"), dtype=np.float64) / 255
    hue = colorsys.rgb_to_hsv(*(((color >> k) & 255) / 255 for k in (16, 8, 0)))[0]
    d = np.abs(hsv[..., 0] - hue)
    d = np.minimum(d, 1 - d)
    return int(np.sum((d < 0.07) & (hsv[..., 1] > 0.18) & (hsv[..., 2] > 0.12)))


def walk_then_pause(page, seconds: float) -> None:
    """Hold W for ``seconds`` (until the character's body is drawn), pause, and stop the
    camera following it."""
    page.click("#view")
    page.keyboard.down("w")
    time.sleep(seconds)
    page.wait_for_function("() => window.__mm.bodiesDrawn() === 1", timeout=60000)
    page.evaluate("() => window.__mm.conn.send('pause', {paused: true})")
    page.keyboard.up("w")
    page.wait_for_function("() => window.__mm.state.paused", timeout=5000)
    page.uncheck("input[type=checkbox] >> nth=0")  # stop following


def test_characters_are_skinned_bodies_and_the_stick_figure_a_toggle(page):
    """One character walking and a 10-agent crowd, as bodies; the canvas shows far more of
    the character's colour with the body than with the stick figure in the same pose."""
    walk_then_pause(page, 1.5)  # then a camera 4 m behind the character
    page.evaluate("() => { const v = window.__mm.view; const c = window.__mm.character(); "
                  "v.controls.target.set(c.root[0], 0.9, c.root[2]); "
                  "v.camera.position.set(c.root[0] - 4 * Math.sin(c.yaw), 2.2, c.root[2] - 4 * Math.cos(c.yaw)); }")
    time.sleep(0.5)
    cid = page.evaluate("() => window.__mm.state.selected")
    color = page.evaluate("(id) => window.__mm.characterColor(id)", cid)
    body = character_pixels(shot(page, "body_walking"), color)
    page.check("#stick-toggle")
    page.wait_for_function("() => window.__mm.bodiesDrawn() === 0", timeout=5000)
    time.sleep(0.3)
    stick = character_pixels(shot(page, "stick_walking"), color)
    assert body > 4000 and body > 1.5 * stick, (body, stick)
    page.uncheck("#stick-toggle")
    # a crowd of ten, all bodies, each its own colour
    page.evaluate("() => window.__mm.conn.send('spawn_group', {count: 9, center: [0, 3], spacing: 1.3, "
                  "target: [0, 6], speed: 1.2})")
    page.evaluate("() => window.__mm.conn.send('pause', {paused: false})")
    page.wait_for_function("() => window.__mm.state.frame.characters.length === 10 "
                           "&& window.__mm.bodiesDrawn() === 10", timeout=30000)
    page.evaluate("() => { const v = window.__mm.view; v.controls.target.set(0, 0.8, 4.5); "
                  "v.camera.position.set(0, 7, -6); }")
    time.sleep(1.5)
    p = shot(page, "crowd_10_bodies")
    ids = page.evaluate("() => window.__mm.state.frame.characters.map(c => c.id)")
    colors = page.evaluate(f"() => {ids}.map(id => window.__mm.characterColor(id))")
    assert len(set(colors)) == 10
    assert sum(character_pixels(p, c) > 200 for c in colors) >= 8  # (colours a hue apart may overlap)


def test_characters_outside_the_view_are_streamed_less_and_still_drawn(page):
    """A group far outside the camera's view: the page tells the server what it sees, the
    frames then come partial (the far members a sixth of the ticks) and the page still
    holds and draws every character; zoomed out over both, the frames are whole again."""
    page.evaluate("() => window.__mm.conn.send('spawn_group', {count: 4, center: [70, 0], spacing: 1.5, "
                  "target: [0, 3], speed: 1.2})")
    page.uncheck("input[type=checkbox] >> nth=0")  # the camera stays where it is put, not on the character
    page.evaluate("() => { const v = window.__mm.view; v.controls.target.set(0, 0.9, 0); "
                  "v.camera.position.set(0, 2.5, -5); }")
    state = "() => [window.__mm.state.frame.flags, window.__mm.state.frame.characters.map(c => c.id)]"
    try:
        page.wait_for_function("() => (window.__mm.state.frame.flags & 4) !== 0 "
                               "&& window.__mm.state.frame.characters.length === 5", timeout=60000)
    except Exception as e:
        raise AssertionError(f"no partial frame with all five: {page.evaluate(state)}") from e
    for _ in range(5):  # every frame the page holds has all five
        time.sleep(0.1)
        assert len(page.evaluate(state)[1]) == 5, page.evaluate(state)
    page.evaluate("() => { const v = window.__mm.view; v.controls.target.set(35, 0, 0); "
                  "v.camera.position.set(35, 60, -40); }")
    try:
        page.wait_for_function("() => (window.__mm.state.frame.flags & 4) === 0 "
                               "&& window.__mm.state.frame.characters.length === 5", timeout=60000)
    except Exception as e:
        raise AssertionError(f"zoomed out, the frames stay partial: {page.evaluate(state)}, "
                             f"view {page.evaluate('() => window.__mm.view.groundView()')}") from e


def test_bvh_glb_and_video_export(page, tmp_path):
    page.click("#view")
    page.keyboard.down("w")
    time.sleep(1.0)
    page.keyboard.up("w")
    with page.expect_download(timeout=20000) as dl:
        page.click("#export")  # BVH by default
    p = tmp_path / dl.value.suggested_filename
    dl.value.save_as(p)
    assert p.read_text().startswith("HIERARCHY")
    page.select_option("#export-format", "glb")
    with page.expect_download(timeout=60000) as dl:
        page.click("#export")
    g = tmp_path / dl.value.suggested_filename
    dl.value.save_as(g)
    assert g.suffix == ".glb" and g.read_bytes()[:4] == b"glTF"
    page.click("summary:has-text('Record')")
    page.click("#video-btn")
    time.sleep(1.0)
    with page.expect_download(timeout=20000) as dl:
        page.click("#video-btn")
    v = tmp_path / dl.value.suggested_filename
    dl.value.save_as(v)
    assert v.suffix == ".webm" and v.stat().st_size > 1000
    shot(page, "export")


def test_genmm_panel_synthesizes_variants_side_by_side(page):
    page.click("summary:has-text('GenMM')")
    page.wait_for_function("() => document.querySelectorAll('#genmm-examples option').length > 0", timeout=10000)
    page.fill("#genmm-filter", "Walk-In-Circle")
    page.select_option("#genmm-examples", index=0)
    page.fill("#panel details[data-section=genmm] input[type=number] >> nth=0", "3")  # seconds
    page.click("#genmm-run")
    page.wait_for_function("() => window.__mm.state.genmm && window.__mm.state.genmm.state === 'done'", timeout=60000)
    ids = page.evaluate("() => window.__mm.state.genmm.ids")
    assert len(ids) == 3
    page.wait_for_function(f"() => window.__mm.state.frame.characters.some(c => c.id === {ids[-1]})", timeout=5000)
    # side by side (placed in a row along x; walking their circles they may since have
    # passed each other, the more so on a loaded machine where the check comes later)
    xs = page.evaluate(f"() => {ids}.map(id => window.__mm.character(id).root[0])")
    assert max(xs) - min(xs) > 2.0, xs
    page.uncheck("input[type=checkbox] >> nth=0")  # stop following so all variants stay in view
    page.evaluate("() => { const v = window.__mm.view; const c = window.__mm.character(); "
                  "v.controls.target.set(c.root[0] + 1.5, 0.9, c.root[2]); v.camera.position.set(c.root[0] + 1.5, 3.5, c.root[2] - 8); }")
    # the variants are skinned bodies too (their skeleton's body fetched from the server)
    page.wait_for_function("() => window.__mm.bodiesDrawn() === window.__mm.state.frame.characters.length",
                           timeout=60000)
    time.sleep(0.5)
    shot(page, "genmm_variants")


def test_two_tabs_are_independent_and_closing_one_frees_it(browser_context, server):
    from test_viewer_support import health

    for p in browser_context.pages:  # no other tab of this browser is open now
        p.close()
    wait_until(lambda: health(server)["sessions"] == 0, timeout=5)
    before = health(server)["sessions"]
    tabs = []
    for _ in range(2):
        pg = browser_context.new_page()
        pg.goto(server.url)
        pg.wait_for_function("() => window.__mm && window.__mm.state.frame", timeout=30000)
        tabs.append(pg)
    a, b = tabs
    assert wait_until(lambda: health(server)["sessions"] == before + 2, timeout=5)
    assert a.evaluate("() => window.__mm.state.welcome.session") != b.evaluate("() => window.__mm.state.welcome.session")
    pb = root(b)
    a.click("#view")
    a.keyboard.down("w")
    time.sleep(1.5)
    a.keyboard.up("w")
    # b's character did not walk with a's key (1.5 s of W: about 1.3 m); it stands, its idle
    # clip swaying its root up to 12 cm in 1.5 s (measured offline on this database)
    assert math.dist(root(b), pb) < 0.3
    shot(a, "tab_a")
    a.close()
    assert wait_until(lambda: health(server)["sessions"] == before + 1, timeout=5)
    b.close()
    assert wait_until(lambda: health(server)["sessions"] == before, timeout=5)


def test_beyond_loopback_the_page_works_through_its_printed_url_only(browser_context, bundle, tmp_path_factory):
    """A viewer on 0.0.0.0: the page opened without the token gets 401; through the printed
    URL (``?token=``) it loads, connects its websocket (the cookie) and walks."""
    from motionmatch.viewer.data import FileCatalog
    from motionmatch.viewer.server import Viewer, ViewerServer

    viewer = Viewer(small_database(tmp_path_factory.getbasetemp()), catalog=FileCatalog({}), static_dir=bundle)
    srv = ViewerServer(viewer, "0.0.0.0", 0).start()
    pg = browser_context.new_page()
    try:
        assert pg.goto(srv.url).status == 401
        assert "?token=" in srv.page_url and pg.goto(srv.page_url).status == 200
        pg.wait_for_function("() => window.__mm && window.__mm.state.frame && window.__mm.state.welcome",
                             timeout=30000)
        p0 = root(pg)
        pg.click("#view")
        pg.keyboard.down("w")
        time.sleep(1.5)
        pg.keyboard.up("w")
        assert math.dist(root(pg), p0) > 0.3
    finally:
        pg.close()
        srv.stop()


def load_scenario_file(page, file_id: str) -> None:
    """Open the scenes panel, pick ``file_id`` from the scenario files and load it."""
    page.click("summary:has-text('Obstacles & scenes')")
    page.wait_for_function("() => [...document.querySelectorAll('#scenario-select option')]"
                           f".some(o => o.value === '{file_id}')", timeout=10000)
    page.select_option("#scenario-select", file_id)
    page.click("#scenario-load")


def test_a_scenario_file_is_loaded_and_played(page):
    load_scenario_file(page, "scenarios:corridors-pass.json")
    page.wait_for_function("() => window.__mm.state.characters.length === 6 && window.__mm.state.paused "
                           "&& window.__mm.state.obstacles.length === 6", timeout=20000)
    ids = page.evaluate("() => window.__mm.state.characters.map(c => c.id)")
    page.wait_for_function(f"() => {ids}.every(id => window.__mm.character(id))", timeout=5000)
    before = page.evaluate(f"() => {ids}.map(id => window.__mm.character(id).root)")
    assert "6 agents" in page.locator("#scenario-note").text_content()
    page.click("#scenario-play")
    page.wait_for_function("() => !window.__mm.state.paused", timeout=5000)
    page.uncheck("input[type=checkbox] >> nth=0")  # stop following: see the corridors from above
    page.evaluate("() => { const v = window.__mm.view; v.controls.target.set(0, 0, 0); "
                  "v.camera.position.set(0.01, 16, -9); }")
    # every agent walks its path (in the narrow corridors one of a pair may wait for the
    # other to pass first, so each gets up to 12 s to get 1 m from its start)
    moved = [0.0] * len(ids)
    t0 = time.monotonic()
    time.sleep(4.0)
    assert page.evaluate("() => window.__mm.bodiesDrawn()") == len(ids)  # scenario agents: skinned bodies
    shot(page, "scenario_playing")
    while True:
        now = page.evaluate(f"() => {ids}.map(id => window.__mm.character(id).root)")
        moved = [max(m, math.dist(a, b)) for m, a, b in zip(moved, before, now)]
        if min(moved) > 1.0 or time.monotonic() - t0 > 12.0:
            break
        time.sleep(0.25)
    assert min(moved) > 1.0, moved


def test_the_pose_panel_drives_the_character_with_a_recorded_file(page, server, request):
    pytest.importorskip("sklearn")
    from motionmatch.viewer import pose as plugin
    from test_viewer_support import walk_run_keypoint_file

    _, _, clf = walk_run_keypoint_file(server.poses / "walk_run.npz",
                                       request.config.cache.mkdir("motionmatch-pose-quick"))
    plugin.set_classifier(clf, "quick default classifier (test)")
    try:
        page.click("summary:has-text('Pose control')")
        page.wait_for_function("() => [...document.querySelectorAll('#pose-file option')]"
                               ".some(o => o.value === 'poses:walk_run.npz')", timeout=10000)
        page.select_option("#pose-kind", "file")
        page.select_option("#pose-file", "poses:walk_run.npz")
        p0 = root(page)
        page.click("#pose-use")
        page.wait_for_function("() => window.__mm.state.pose && window.__mm.state.pose.state === 'running' "
                               "&& window.__mm.state.pose.command", timeout=15000)
        time.sleep(2.5)
        page.evaluate("() => document.querySelector('#pose-status').scrollIntoView({block: 'end'})")
        shot(page, "pose_status")
        st, shown = page.evaluate("() => [window.__mm.state.pose, document.querySelector('#pose-command').textContent]")
        assert st["kind"] == "file" and st["frames"] > 30 and st["command"], st
        assert shown == st["command"]  # the panel shows the current command
        assert math.dist(p0, root(page)) > 1.0  # the pose commands walk the character
        page.select_option("#pose-kind", "webcam")
        assert "Use camera" in page.locator("#panel").text_content()  # points to the camera
    finally:
        plugin.set_classifier(None)


def test_an_obstacle_gets_a_velocity_and_a_group_walks_to_its_goals(page):
    page.click("button[data-tool=obstacle]")
    page.mouse.click(*screen(page, 2.5, 4.0))
    page.wait_for_function("() => window.__mm.state.obstacles.length === 1", timeout=5000)
    page.mouse.click(*screen(page, 2.5, 4.0))  # select it
    page.wait_for_function("() => window.__mm.view.obstacleSel != null", timeout=5000)
    page.fill("#panel details[data-section='obstacles & scenes'] input[type=number] >> nth=5", "0")   # vel x
    page.fill("#panel details[data-section='obstacles & scenes'] input[type=number] >> nth=6", "-0.4")  # vel z
    page.click("text=Apply to selected")
    page.wait_for_function("() => { const o = window.__mm.state.obstacles[0]; "
                           "return o.velocity && Math.abs(o.velocity[1] + 0.4) < 1e-9; }", timeout=5000)
    z0, tick0 = page.evaluate("() => [[...window.__mm.view.obstacles.values()][0].position.z, "
                              "window.__mm.state.frame.tick]")
    page.click("button[data-tool=orbit]")
    page.fill("#panel details[data-section=characters] input[type=number] >> nth=0", "6")     # count
    page.fill("#group-via", "2 3")
    page.evaluate("() => { const v = window.__mm.view; v.controls.target.set(0, 0, 0); }")
    page.click("#spawn-group")
    page.wait_for_function("() => window.__mm.state.characters.length === 7", timeout=10000)
    page.uncheck("input[type=checkbox] >> nth=0")
    page.evaluate("() => { const v = window.__mm.view; v.controls.target.set(1, 0, 5); "
                  "v.camera.position.set(1.01, 13, -5); }")
    # three simulated seconds (a loaded machine steps fewer ticks per wall-clock second)
    page.wait_for_function(f"() => window.__mm.state.frame.tick >= {tick0 + 180}", timeout=30000)
    shot(page, "moving_obstacle_and_group")
    z1 = page.evaluate("() => [...window.__mm.view.obstacles.values()][0].position.z")
    assert z1 < z0 - 0.8, (z0, z1)  # it moves at its velocity (0.4 m/s: 1.2 m in 3 s)
    page.wait_for_function("() => window.__mm.state.arrived.length >= 6", timeout=40000)


PANEL_TABLES_CLIPPED = """() => {
  // every cell of every table in the side panel lies inside the panel's visible width, the
  // panel does not scroll sideways, and no number or header is cut
  const panel = document.querySelector('#panel');
  const box = panel.getBoundingClientRect();
  const left = box.left + panel.clientLeft, right = left + panel.clientWidth;
  const bad = [];
  for (const table of panel.querySelectorAll('table')) {
    for (const cell of table.querySelectorAll('td, th')) {
      const r = cell.getBoundingClientRect();
      const what = `${table.id || table.className} col ${cell.cellIndex} "${cell.textContent}"`;
      if (r.left < left - 0.5 || r.right > right + 0.5) bad.push(`${what}: ${r.left.toFixed(0)}..${r.right.toFixed(0)} `
        + `outside ${left.toFixed(0)}..${right.toFixed(0)}`);
      const whole = cell.tagName === 'TH' || cell.classList.contains('num');
      if (whole && cell.scrollWidth > cell.clientWidth + 0.5) bad.push(`${what}: cut (${cell.scrollWidth} > ${cell.clientWidth})`);
      if (!whole && cell.scrollWidth > cell.clientWidth + 0.5 && !cell.title) bad.push(`${what}: cut without a title`);
    }
  }
  if (panel.scrollWidth > panel.clientWidth + 0.5) bad.push(`panel scrolls sideways (${panel.scrollWidth} > ${panel.clientWidth})`);
  return { bad, tables: panel.querySelectorAll('table').length };
}"""


LONG_CLIP = "pushAndStumble1_subject2_sidesteps_mirrored"


def test_the_panel_tables_show_every_column(page):
    """The candidates' table (clip names are long) and the cost table fit the panel: the
    cost column is not cut off; a long clip name is shortened with its full name as a title."""
    page.click("#view")
    page.keyboard.down("w")
    page.check("#debug-toggle")
    page.wait_for_selector("#cand-table tr:nth-child(2)", timeout=20000)
    time.sleep(1.0)
    page.keyboard.up("w")
    page.click("#play")  # pause: the debug data stays as shown
    page.wait_for_function("() => window.__mm.state.paused", timeout=5000)
    # the candidates as a full LAFAN1 database names them (its longest clip name; this
    # test's database has shorter ones), shown by the page's own debug handler
    page.evaluate("""(name) => {
      const d = structuredClone(window.__mm.state.debug);
      d.frame.clip = name;
      for (const c of d.candidates) c.clip = name;
      for (const h of window.__mm.conn.handlers.get('debug')) h(d);
    }""", LONG_CLIP)
    page.evaluate("() => document.querySelector('#cand-table').scrollIntoView({block: 'start'})")
    shot(page, "panel_tables")
    res = page.evaluate(PANEL_TABLES_CLIPPED)
    assert res["tables"] >= 2 and not res["bad"], res
    heads = page.evaluate("() => [...document.querySelectorAll('#cand-table th')].map(th => th.textContent)")
    assert heads[-1] == "cost"
    names = page.evaluate("() => [...document.querySelectorAll('#cand-table td.clip')].map(td => [td.textContent, td.title])")
    assert names and all(t == LONG_CLIP for _, t in names), names  # the full clip name is the cell's title
    page.click("#play")


KEY_SPY = """() => {
  // record the key messages the page sends from now on
  const c = window.__mm.conn;
  window.__keys = [];
  if (!c.__spied) {
    const post = c.post.bind(c);
    c.post = (type, fields) => { if (type === 'key' && window.__keys) window.__keys.push([fields.key, fields.down]); return post(type, fields); };
    c.__spied = true;
  }
}"""


def sent_keys(page):
    return page.evaluate("() => window.__keys.slice()")


def test_keys_act_after_a_slider_a_checkbox_or_a_button(page):
    """W/A/S/D (and the other keys) act whenever the focus is not in a text field: after a
    click on a checkbox the character walks without clicking the 3D view; on a slider
    reached with Tab the arrows keep moving the slider (and W still walks); in a text field
    or a select the keys type."""
    # a checkbox used with the mouse: W walks at once
    page.click("input[type=checkbox] >> nth=0")  # follow off
    page.click("input[type=checkbox] >> nth=0")  # follow on
    p0 = root(page)
    page.keyboard.down("w")
    # (1.5 s on a quiet machine; the simulation falls behind real time on a loaded one)
    walked = wait_until(lambda: math.dist(p0, root(page)) > 0.5, timeout=8.0)
    page.keyboard.up("w")
    assert walked, (p0, root(page))
    page.evaluate(KEY_SPY)
    # a slider used with the mouse gives the keyboard back to the view
    slider = page.locator("input[data-control=continuity]")
    slider.click()
    page.keyboard.press("d")
    page.keyboard.press("ArrowUp")
    assert sent_keys(page) == [["KeyD", True], ["KeyD", False], ["ArrowUp", True], ["ArrowUp", False]], sent_keys(page)
    # a slider reached with the keyboard: its arrows move it, the letters drive
    page.evaluate(KEY_SPY)
    slider.focus()
    before = float(slider.input_value())
    page.keyboard.press("ArrowUp")
    assert float(slider.input_value()) > before
    for key in ("w", "a", "s", "d", "Shift", "j", "p"):
        page.keyboard.press(key)
    page.keyboard.press("ArrowLeft")
    assert [k for k, down in sent_keys(page) if down] == ["KeyW", "KeyA", "KeyS", "KeyD", "ShiftLeft", "KeyJ", "KeyP"]
    # a checkbox and a button reached with the keyboard: the letters drive
    for sel in ("#debug-toggle", "button[data-tool=orbit]"):
        page.evaluate(KEY_SPY)
        page.focus(sel)
        page.keyboard.press("w")
        assert sent_keys(page) == [["KeyW", True], ["KeyW", False]], (sel, sent_keys(page))
    # text fields and selects keep their keys
    page.evaluate(KEY_SPY)
    page.fill("#group-via", "")
    page.focus("#group-via")
    page.keyboard.type("wasd")
    page.focus("#path-mode")
    page.keyboard.press("s")
    page.click("summary:has-text('GenMM')")
    page.focus("#genmm-filter")
    page.keyboard.type("walk")
    assert sent_keys(page) == [] and page.input_value("#group-via") == "wasd"
    assert page.input_value("#genmm-filter") == "walk"


def test_the_genmm_example_picker_is_grouped_and_filtered(page):
    """The examples are grouped by folder with full names as titles; typing in the
    filter narrows the list; one is picked with the keyboard and shown with its full
    name; a chosen example stays chosen when the filter changes."""
    page.click("summary:has-text('GenMM')")
    page.wait_for_function("() => document.querySelectorAll('#genmm-examples option').length > 0", timeout=10000)
    info = page.evaluate("""() => {
      const sel = document.querySelector('#genmm-examples');
      return { n: sel.options.length, groups: [...sel.querySelectorAll('optgroup')].map(g => g.label),
               titled: [...sel.options].every(o => o.title && o.title.endsWith(o.textContent + '.bvh')),
               files: window.__mm.state.files.bvh.length };
    }""")
    assert info["n"] == info["files"] and info["titled"], info
    assert any("genmm-examples" in g for g in info["groups"]) and len(info["groups"]) >= 2, info["groups"]
    page.fill("#genmm-filter", "walk in circle")  # words in any order, any case
    left = page.evaluate("() => [...document.querySelector('#genmm-examples').options].map(o => o.value)")
    assert left == ["data:genmm-examples/Joe_Walk-In-Circle.bvh"], left
    assert "1 of" in page.locator("#genmm-count").text_content()
    page.focus("#genmm-filter")
    page.keyboard.press("ArrowDown")  # to the list, the first match picked
    page.keyboard.press("Enter")
    chosen = page.evaluate("() => [...document.querySelectorAll('#genmm-chosen [data-id]')].map(e => [e.dataset.id, e.textContent])")
    assert [c[0] for c in chosen] == ["data:genmm-examples/Joe_Walk-In-Circle.bvh"], chosen
    assert "genmm-examples/Joe_Walk-In-Circle.bvh" in chosen[0][1]  # the full name, not cut
    page.fill("#genmm-filter", "xia")
    page.keyboard.press("Enter")  # Enter in the filter picks the only match
    page.fill("#genmm-filter", "")
    picked = page.evaluate("() => [...document.querySelector('#genmm-examples').selectedOptions].map(o => o.value)")
    assert sorted(picked) == ["data:genmm-examples/Joe_Walk-In-Circle.bvh", "data:genmm-examples/Xia_normal.bvh"], picked
    shot(page, "genmm_picker")
    page.click("#genmm-chosen [data-id='data:genmm-examples/Xia_normal.bvh'] button")  # remove one
    picked = page.evaluate("() => [...document.querySelector('#genmm-examples').selectedOptions].map(o => o.value)")
    assert picked == ["data:genmm-examples/Joe_Walk-In-Circle.bvh"], picked


def test_a_mode_the_database_cannot_play_says_so(page):
    """The test database has no crawling clip: C shows a one-line reason and the page
    never shows the character in the creep mode; the Keys panel marks it unavailable."""
    page.click("#view")
    page.keyboard.down("w")
    page.keyboard.down("c")
    page.wait_for_function("() => document.querySelector('#toast').classList.contains('show')", timeout=5000)
    toast = page.locator("#toast").text_content()
    assert toast.startswith("creep: this database has no crawling clip"), toast
    modes = set()
    for _ in range(10):
        modes.add(page.evaluate("() => window.__mm.character().mode"))
        time.sleep(0.1)
    status = page.locator("#mode").text_content()
    shot(page, "mode_unavailable")
    page.keyboard.up("c")
    page.keyboard.up("w")
    assert "creep" not in modes, modes
    assert "creep" in status and "unavailable" in status, status
    assert not status.startswith("creep"), status  # the mode shown is the one played
    page.click("summary:has-text('Keys')")
    row = page.locator(".keys [data-mode=creep]")
    assert "unavailable" in row.get_attribute("class") and "crawling" in row.text_content()


# ------------------------------------------------------------------ terrain (issue 31)
def _pick_forest(page):
    """Pick the forest from the scenario files and load it."""
    load_scenario_file(page, "scenarios:forest.json")
    page.wait_for_function("() => window.__mm.state.terrain && window.__mm.state.terrain.rows === 105 "
                           "&& window.__mm.view.terrain && window.__mm.state.characters.length === 10", timeout=30000)


def test_the_forest_is_drawn_where_the_model_puts_the_ground(page):
    """The forest picked from the scenario files is drawn where the model puts the ground
    (read back from the page's scene), in place of the flat floor."""
    import numpy as np

    from motionmatch.environment import load_scenario

    _pick_forest(page)
    forest = load_scenario(REPO / "scenarios" / "forest.json").terrain
    rng = np.random.default_rng(0)
    lo, hi = forest.bounds()
    grid_pts = np.stack([rng.integers(0, 97, 40) * 0.5 + lo[0], rng.integers(0, 105, 40) * 0.5 + lo[1]], 1)
    any_pts = rng.uniform(lo - 5.0, hi + 5.0, (60, 2))  # inside, between grid points, and outside (flat)
    drawn = np.array(page.evaluate("(pts) => pts.map(([x, z]) => window.__mm.terrainHeight(x, z))",
                                   np.concatenate([grid_pts, any_pts]).tolist()))
    np.testing.assert_allclose(drawn[:40], forest.heights(grid_pts), atol=2e-3)  # the grid's own heights
    # between them the drawn triangles stay within a few centimetres of the bilinear surface
    # (the ledge's cells excepted: a 0.6 m drop across one cell)
    led = (any_pts[:, 1] > 15.4) & (any_pts[:, 1] < 16.1)
    err = np.abs(drawn[40:] - forest.heights(any_pts))[~led]
    assert err.max() < 0.05, err.max()
    assert "height field, 105 x 97" in page.locator("#terrain-note").text_content()
    assert page.evaluate("() => window.__mm.view.ground.visible") is False  # the terrain replaces the floor
    page.uncheck("input[type=checkbox] >> nth=0")  # stop following: the ramp and its ledge from the north-east
    page.evaluate("() => { const v = window.__mm.view; v.follow = false; v.controls.target.set(12, 1, 9); "
                  "v.camera.position.set(12.5, 7, 31); v.controls.update(); }")
    page.wait_for_timeout(1500)
    shot(page, "terrain_forest")


def test_in_the_forest_the_characters_feet_stay_on_the_drawn_surface(page):
    """The forest played in the page: its characters walk on the hills; every foot the
    page draws is on the drawn surface (read back from the page's scene), planted feet
    within a few centimetres of it (as on the flat floor), none more than 3 cm below it
    (issue 31)."""
    import numpy as np

    _pick_forest(page)
    page.click("#scenario-play")
    page.wait_for_function("() => !window.__mm.state.paused", timeout=5000)
    page.uncheck("input[type=checkbox] >> nth=0")  # stop following: the walkers on the western hills
    page.evaluate("() => { const v = window.__mm.view; v.follow = false; v.controls.target.set(-11, 0.5, -13); "
                  "v.camera.position.set(-4.5, 2.6, -8.5); v.controls.update(); }")
    above, planted = [], []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 6.0:
        feet = page.evaluate("""() => window.__mm.state.frame.characters.flatMap(c => {
            const sk = window.__mm.state.skeletons[0]; return sk.feet.map((j, k) => {
              const p = c.positions; const x = p[3 * j], y = p[3 * j + 1], z = p[3 * j + 2];
              return [y - window.__mm.terrainHeight(x, z), (c.contacts >> k) & 1, window.__mm.terrainHeight(x, z)]; }); })""")
        for h, c, g in feet:
            above.append((h, g))
            if c:
                planted.append(h)
        time.sleep(0.2)
    shot(page, "terrain_forest_walking")
    above = np.array(above)
    assert len(planted) > 20 and above[:, 1].max() > 0.1  # planted feet seen, up on the hills
    assert above[:, 0].min() > -0.03, above[:, 0].min()  # no foot in the ground
    # the toe joint a few cm above it: a planted toe is labelled up to 6 cm above its rest height
    # (anim/contacts.py), so the labels' tail reaches 9 cm on the flat floor as on the hills
    # (offline, this database: median 2.5 cm, 90% under 5.5 cm on both); a surface drawn 5 cm
    # off, or feet drawn on the floor, moves the median out of this
    assert np.median(planted) < 0.045, np.median(planted)
    assert np.percentile(planted, 90) < 0.08, np.percentile(planted, 90)


def test_a_terrain_file_replaces_the_ground_and_flat_brings_the_floor_back(page, tmp_path):
    """A terrain file the user loads replaces the ground; a bad one is refused in one line
    and changes nothing; "Flat ground" brings the floor back."""
    import json

    import numpy as np

    f = tmp_path / "bumps.json"
    heights = (0.3 * np.sin(np.arange(21)[:, None] * 0.6) * np.cos(np.arange(21)[None] * 0.5)).round(3)
    f.write_text(json.dumps({"terrain": {"height_field": {"origin": [-5, -5], "cell": 0.5,
                                                          "heights": heights.tolist()}}}))
    page.click("summary:has-text('Obstacles & scenes')")
    page.set_input_files("#terrain-file", str(f))
    page.wait_for_function("() => window.__mm.state.terrain && window.__mm.state.terrain.rows === 21", timeout=10000)
    assert page.evaluate("() => window.__mm.terrainHeight(-5 + 0.5 * 3, -5 + 0.5 * 2)") == pytest.approx(
        heights[2, 3], abs=1e-3)
    shot(page, "terrain_file")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"height_field": {"origin": [0, 0], "cell": 0, "heights": [[0, 1], [1, 0]]}}))
    page.set_input_files("#terrain-file", str(bad))
    page.wait_for_function("() => document.querySelector('#toast').textContent.includes('cell must be')",
                           timeout=10000)
    assert page.evaluate("() => window.__mm.state.terrain.rows") == 21  # the refused file changed nothing
    page.click("#terrain-flat")
    page.wait_for_function("() => window.__mm.state.terrain === null && !window.__mm.view.terrain", timeout=10000)
    assert page.evaluate("() => window.__mm.view.ground.visible") is True
    assert page.evaluate("() => window.__mm.terrainHeight(1, 1)") == pytest.approx(0.0, abs=1e-9)
