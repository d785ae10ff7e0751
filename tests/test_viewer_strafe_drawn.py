"""Strafing and drawn-trajectory control in the real page (issue 33 items 1 and 2), headless
Chromium driven by Playwright as in ``test_viewer_e2e.py``: holding Q with D keeps the
character facing where the camera looks while it sidesteps (read back from the page's
frames), the gamepad's right stick does the same, and the path tool's "drawn" mode walks
the character to the drawing's nearest point and along it, until a movement key takes
over. Screenshots in ``out/viewer-e2e/`` (``$MOTIONMATCH_SCREENSHOTS``)."""

from __future__ import annotations

import math
import time

import pytest

from conftest import REPO, data_root
from test_viewer_support import CLIPS, start_server, viewer_deps_or_skip

pytestmark = pytest.mark.slow

viewer_deps_or_skip()
pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: pip install playwright")

from test_viewer_e2e import browser_context, bundle, draw, root, shot, wait_until  # noqa: E402, F401

#: the viewer tests' clips and LAFAN1's sidestep and backward takes (strafing needs them)
STRAFE_CLIPS = (*CLIPS, "fightAndSports1_subject1_sidesteps", "obstacles3_subject3_sideways",
                "pushAndStumble1_subject3_backward")


@pytest.fixture(scope="module")
def server(tmp_path_factory, bundle):  # noqa: F811
    from motionmatch.anim import load_bvh
    from motionmatch.database import MotionDatabase
    from motionmatch.datasets import tags_from_name

    folder = data_root() / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found; set MOTIONMATCH_DATA to the shared data folder")
    clips = []
    for name in STRAFE_CLIPS:
        m = load_bvh(folder / f"{name}.bvh")
        m.tags = tags_from_name(name)
        clips.append(m)
    db = MotionDatabase.cached(tmp_path_factory.getbasetemp() / "viewer-strafe-db.npz", clips, mirror_copies=True)
    srv = start_server(db, {"data": data_root(), "scenarios": REPO / "scenarios"}, static_dir=bundle)
    yield srv
    srv.stop()


@pytest.fixture
def page(browser_context, server):  # noqa: F811
    pg = browser_context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(server.url)
    pg.wait_for_function("() => window.__mm && window.__mm.state.frame && window.__mm.state.welcome", timeout=30000)
    yield pg
    pg.close()
    assert not errors, f"page errors: {errors}"


def facing_off_camera(page) -> float:
    """Degrees between the selected character's facing (read from the page's frame) and
    the camera's forward direction."""
    yaw, cam = page.evaluate("() => [window.__mm.character().yaw, window.__mm.view.cameraYaw()]")
    d = (yaw - cam + math.pi) % (2 * math.pi) - math.pi
    return abs(math.degrees(d))


def hold(page, keys, seconds):
    for k in keys:
        page.keyboard.down(k)
    time.sleep(seconds)
    for k in reversed(keys):
        page.keyboard.up(k)


def test_holding_q_keeps_the_facing_while_the_character_sidesteps(page):
    page.click("#view")
    cam = page.evaluate("() => window.__mm.view.cameraYaw()")
    right = (-math.cos(cam), math.sin(cam))  # the camera's right on the ground
    p0 = root(page)
    page.keyboard.down("q")
    page.keyboard.down("d")
    time.sleep(3.0)
    strafing = facing_off_camera(page)
    shot(page, "strafe_q_d")
    p1 = root(page)
    page.keyboard.up("d")
    page.keyboard.up("q")
    side = (p1[0] - p0[0]) * right[0] + (p1[2] - p0[2]) * right[1]
    assert side > 0.8, (p0, p1, cam)  # it moved to the camera's right ...
    assert strafing < 30.0, strafing  # ... still facing where the camera looks
    hold(page, ["d"], 3.0)  # without Q it turns to face its way (about 90 degrees off)
    assert facing_off_camera(page) > 60.0


def test_the_gamepads_right_stick_sets_the_facing(page):
    page.click("#view")
    # (no gamepad in a headless browser: the page's poller is fed the sticks it would read)
    page.evaluate("() => window.__mm.gamepad.send([-1, 0], [0, 1])")  # move left, face forward
    time.sleep(3.0)
    strafing = facing_off_camera(page)
    page.evaluate("() => window.__mm.gamepad.send([0, 0], [0, 0])")
    assert strafing < 30.0, strafing


def test_the_drawn_mode_walks_to_the_nearest_point_and_along_the_drawing(page):
    start = root(page)
    sx, sz = start[0], start[2]
    # a line 2.5 m ahead, drawn from 4 m to the left to 4 m to the right: nearest point straight ahead
    a, b = (sx + 4.0, sz + 2.5), (sx - 4.0, sz + 2.5)
    page.select_option("#path-mode", "drawn")
    draw(page, [a, b], seconds=1.5)
    info = page.wait_for_function("() => Object.values(window.__mm.state.pathInfo)[0]", timeout=10000).json_value()
    assert info["mode"] == "drawn" and abs(info["length"] - 8.0) < 0.5 and not info["loops"]
    track = []

    def on_line():
        p = root(page)
        track.append((p[0], p[2]))
        return abs(p[2] - (sz + 2.5)) < 0.35

    assert wait_until(on_line, timeout=10.0)
    reached = track[-1]
    assert abs(reached[0] - sx) < 1.0, (reached, start)  # where the line is nearest, not at its start (4 m off)
    time.sleep(2.0)
    shot(page, "drawn_path_following")
    p = root(page)
    assert p[0] < reached[0] - 0.8  # along the line, the way it was drawn (toward -x)
    page.keyboard.down("s")  # the keyboard takes over
    page.wait_for_function("() => !Object.keys(window.__mm.state.pathInfo).length", timeout=5000)
    time.sleep(1.0)
    page.keyboard.up("s")


def test_a_closed_drawing_is_gone_round_again(page):
    start = root(page)
    sx, sz = start[0], start[2]
    cx, cz, r = sx, sz + 2.4, 1.3  # a ring ahead, begun on its far side; its nearest point (sx, sz + 1.1)
    ring = [(cx + r * math.sin(a), cz + r * math.cos(a)) for a in (2 * math.pi * k / 24 for k in range(25))]
    page.select_option("#path-mode", "drawn")
    draw(page, ring, seconds=2.0)
    info = page.wait_for_function("() => Object.values(window.__mm.state.pathInfo)[0]", timeout=10000).json_value()
    assert info["mode"] == "drawn" and info["closed"] and info["loops"]
    time.sleep(5.0)
    shot(page, "drawn_ring_following")
    seen = {"far": False}

    def round_again():
        p = root(page)
        seen["far"] |= p[2] > cz + 0.8  # the far side ...
        return seen["far"] and math.hypot(p[0] - sx, p[2] - (sz + 1.1)) < 0.6  # ... and back where it joined

    assert wait_until(round_again, timeout=40.0), root(page)
    assert page.evaluate("() => Object.keys(window.__mm.state.pathInfo).length") == 1  # still going round
