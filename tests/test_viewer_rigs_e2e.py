"""The viewer on a rig from another tool (issue 32): Character Creator takes made from
LAFAN1 at test time (Z up, one with a ground root, one rooted at the hips under the floor)
read as ``viewer --data`` reads them, played in headless Chromium: the character walks
upright with its feet on the ground, its body has a head (the head's screen region is
drawn) and no pedestal stick. A screenshot is saved in ``out/viewer-e2e/``."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rigs import lafan_clip, make_rig, write_rig
from test_viewer_e2e import SHOTS, bundle, character_pixels, chromium_path, walk_then_pause  # noqa: F401
from test_viewer_support import start_server, viewer_deps_or_skip

viewer_deps_or_skip()
pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")


@pytest.fixture(scope="module")
def cc_server(data_dir, tmp_path_factory, bundle):  # noqa: F811
    import warnings

    from motionmatch.viewer.data import open_database

    folder = tmp_path_factory.mktemp("cc")
    clip = lafan_clip(data_dir, 600)
    write_rig(make_rig(clip, "cc", ground_root=True, z_up=True), folder / "takes", "walk_cc_zup_root")
    write_rig(make_rig(clip, "cc", ground_root=True, z_up=True, feet_below_floor=True), folder / "takes",
              "walk_cc_zup_below")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        db, _ = open_database(data=folder / "takes", cache_dir=folder / "cache", progress=False, log=lambda m: None)
    srv = start_server(db, {}, static_dir=bundle)
    yield srv
    srv.stop()


def test_a_character_creator_rig_walks_upright_on_the_ground_with_a_head(cc_server):
    from playwright.sync_api import sync_playwright

    from test_viewer_e2e import CHROMIUM_ARGS

    exe = chromium_path()
    if exe is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    SHOTS.mkdir(parents=True, exist_ok=True)
    import tempfile

    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="mm-chromium-"), executable_path=exe,
                                                   headless=True, args=CHROMIUM_ARGS,
                                                   viewport={"width": 1280, "height": 760})
        try:
            page = ctx.new_page()
            page.goto(cc_server.url)
            page.wait_for_function("() => window.__mm && window.__mm.state.frame && window.__mm.state.welcome",
                                   timeout=60000)
            walk_then_pause(page, 2.0)
            sk = page.evaluate("() => window.__mm.view.skeletons['0']")
            names = sk["names"]
            # no stick from the ground root to the pelvis: the bones into BoneRoot and Hip are hidden
            assert {names[j] for j in sk["hidden"]} == {"CC_Base_BoneRoot", "CC_Base_Hip"}
            lowest = []  # the lower foot's height over 20 frames stepped one by one (a transition may dip a toe)
            for _ in range(20):
                tick = page.evaluate("() => window.__mm.state.frame.tick")
                page.evaluate("() => window.__mm.conn.send('step', {frames: 1})")
                page.wait_for_function(f"() => window.__mm.state.frame.tick !== {tick}", timeout=5000)
                q = np.asarray(page.evaluate("() => window.__mm.character().positions"), dtype=float).reshape(-1, 3)
                lowest.append(q[sk["feet"], 1].min())
            assert -0.03 < np.median(lowest) < 0.08, lowest  # a foot on the ground
            page.evaluate("() => { const v = window.__mm.view; const c = window.__mm.character(); "
                          "v.controls.target.set(c.root[0], 0.9, c.root[2]); "
                          "v.camera.position.set(c.root[0] + 2.6 * Math.cos(c.yaw), 1.3, "
                          "c.root[2] - 2.6 * Math.sin(c.yaw)); }")
            time.sleep(0.8)
            c = page.evaluate("() => window.__mm.character()")
            P = np.asarray(c["positions"], dtype=float).reshape(-1, 3)
            head, hips = P[names.index("CC_Base_Head")], P[names.index("CC_Base_Hip")]
            assert head[1] > hips[1] + 0.45 and 0.75 < hips[1] < 1.1  # upright, hips at a person's height
            shot = SHOTS / "cc_rig_body.png"
            page.screenshot(path=str(shot))
            color = page.evaluate("(id) => window.__mm.characterColor(id)", c["id"])
            top = page.evaluate("([x, y, z]) => window.__mm.view.toScreen(x, y, z)", [head[0], head[1] + 0.1, head[2]])
            from PIL import Image

            img = Image.open(shot)
            box = (int(top["x"]) - 8, int(top["y"]) - 8, int(top["x"]) + 8, int(top["y"]) + 8)
            region = SHOTS / "cc_rig_head.png"
            img.crop(box).save(region)
            assert character_pixels_in(region, color) > 100  # the head's screen region is drawn
            assert character_pixels(shot, color) > 4000
        finally:
            ctx.close()


def character_pixels_in(path, color: int) -> int:
    """:func:`test_viewer_e2e.character_pixels` of a whole (small) image."""
    import colorsys

    from PIL import Image

    hsv = np.asarray(Image.open(path).convert("RGB").convert("HSV"), dtype=np.float64) / 255
    hue = colorsys.rgb_to_hsv(*(((color >> k) & 255) / 255 for k in (16, 8, 0)))[0]
    d = np.abs(hsv[..., 0] - hue)
    d = np.minimum(d, 1 - d)
    return int(np.sum((d < 0.07) & (hsv[..., 1] > 0.18) & (hsv[..., 2] > 0.12)))
