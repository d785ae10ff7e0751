"""The viewer's scene and body in a real headless browser (issue 32, part 4): the
character's head is drawn where its head joint is (a head sized from the body, not a
neck-wide peg), and the scene has a sky over a ground with metre lines.

Runs as the other browser tests do (``test_viewer_e2e``: Debian's chromium driven by
Playwright, software WebGL); screenshots land in ``out/viewer-e2e/``. Skipped, with the
reason, when chromium, Playwright or the page's bundle is missing.
"""

from __future__ import annotations

import colorsys
import time

import numpy as np
import pytest

from test_viewer_e2e import (  # noqa: F401  (fixtures)
    browser_context,
    bundle,
    page,
    server,
    shot,
)

pytestmark = pytest.mark.slow


def _rgb(path):
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB"), dtype=np.float64) / 255


def _character_hue(rgb: np.ndarray, color: int) -> np.ndarray:
    """``(H, W)`` bool: pixels in the character's hue (saturated, lit or in shade)."""
    hsv = np.asarray([colorsys.rgb_to_hsv(*p) for p in rgb.reshape(-1, 3)]).reshape(rgb.shape)
    hue = colorsys.rgb_to_hsv(*(((color >> k) & 255) / 255 for k in (16, 8, 0)))[0]
    d = np.abs(hsv[..., 0] - hue)
    d = np.minimum(d, 1 - d)
    return (d < 0.07) & (hsv[..., 1] > 0.18) & (hsv[..., 2] > 0.12)


def _head_on_screen(pg) -> dict:
    """The selected character's head joint and the point a head's height above it, in CSS
    pixels, and the character's colour."""
    return pg.evaluate("""() => {
      const mm = window.__mm, c = mm.character(), v = mm.view;
      const meta = v.meta.get(c.id), sk = v.skeletons[String(meta ? meta.skeleton : 0)];
      const head = sk.names.findIndex((n) => /head/i.test(n) && !/end|top/i.test(n));
      const neck = sk.parents[head];
      const P = c.positions, at = (j) => [P[3 * j], P[3 * j + 1], P[3 * j + 2]];
      const h = at(head), n = at(neck);
      const up = [h[0] - n[0], h[1] - n[1], h[2] - n[2]];
      const len = Math.hypot(...up);
      const mid = h.map((x, k) => x + 0.11 * up[k] / len);   // the skull's middle, 11 cm up the neck's line
      const over = h.map((x, k) => x + 0.6 * up[k] / len);   // well above the head: the sky
      const s = (p) => mm.toScreen(p[0], p[2], p[1]);
      return {head: s(h), mid: s(mid), over: s(over), color: mm.characterColor(c.id), name: sk.names[head]};
    }""")


def _full_quality(pg, server) -> None:  # noqa: F811
    """The page again at full quality (the sky and shadows kept: no drawing cheaper)."""
    pg.goto(server.url + "?quality=full")
    pg.wait_for_function("() => window.__mm && window.__mm.state.frame && window.__mm.state.welcome", timeout=30000)


def test_the_head_is_drawn_where_the_head_joint_is(page, server):  # noqa: F811
    """Camera 2.5 m in front of the character standing idle, at head height: the pixels around the
    middle of the skull (11 cm up from the head joint, where LAFAN1's head was a neck-wide peg
    ending at the joint before issue 32) are the character's colour; 60 cm above the head is
    the sky, not the character."""
    _full_quality(page, server)
    page.wait_for_function("() => window.__mm.bodiesDrawn() === 1", timeout=60000)
    page.evaluate("() => window.__mm.conn.send('pause', {paused: true})")
    page.wait_for_function("() => window.__mm.state.paused", timeout=5000)
    page.uncheck("input[type=checkbox] >> nth=0")  # stop following
    page.evaluate("""() => { const v = window.__mm.view, c = window.__mm.character();
      v.controls.target.set(c.root[0], 1.45, c.root[2]);
      v.camera.position.set(c.root[0] + 2.5 * Math.sin(c.yaw), 1.6, c.root[2] + 2.5 * Math.cos(c.yaw)); }""")
    time.sleep(1.0)
    where = _head_on_screen(page)
    rgb = _rgb(shot(page, "head_front"))
    mine = _character_hue(rgb, where["color"])
    dpr = rgb.shape[1] / page.viewport_size["width"]

    def share(p, r):
        x, y = round(p["x"] * dpr), round(p["y"] * dpr)
        return float(mine[y - r:y + r + 1, x - r:x + r + 1].mean())

    # the head is about 0.17 m wide: at 2.5 m, with a 50 degree field of view over 760 px, about 55 px
    px_per_m = 760 / (2 * 2.5 * np.tan(np.radians(25)))
    r = max(2, int(0.035 * px_per_m * dpr))  # a square of 7 cm: inside the head (a peg 4-5 cm wide: half of it)
    assert share(where["mid"], r) > 0.75, (where, share(where["mid"], r))
    assert share(where["over"], r) < 0.05, "the sky above the head is drawn in the character's colour"
    # and the sky above is lighter and bluer than the ground below the feet
    top = rgb[int(0.1 * rgb.shape[0]), : int(0.5 * rgb.shape[1])].mean(axis=0)
    assert top[2] > top[0] + 0.05, f"no sky: {top}"


def test_a_sky_over_a_ground_with_metre_lines(page, server):  # noqa: F811
    """Looking down at the ground from 3 m: the ground is lit and uniform but for lines a
    metre apart (a row of pixels crosses dark lines about every metre); looking at the
    horizon: the sky is bluest at the top and pales toward the horizon (a software
    rasteriser's page, drawing cheaper, shows the horizon's colour: flat)."""
    _full_quality(page, server)
    page.evaluate("() => window.__mm.conn.send('pause', {paused: true})")
    page.uncheck("input[type=checkbox] >> nth=0")  # stop following
    page.evaluate("""() => { const v = window.__mm.view;
      v.controls.target.set(20.3, 0, 20.3); v.camera.position.set(20.3, 3.0, 17.3); }""")
    time.sleep(1.0)
    rgb = _rgb(shot(page, "ground_lines"))
    # pixels of a horizontal row at the view's middle, the 3D view's part (the panel is on the right)
    a = page.evaluate("() => window.__mm.toScreen(18.0, 20.3)")
    b = page.evaluate("() => window.__mm.toScreen(22.0, 20.3)")
    dpr = rgb.shape[1] / page.viewport_size["width"]
    y = round(a["y"] * dpr)
    x0, x1 = sorted((int(a["x"] * dpr), int(b["x"] * dpr)))  # (+x is to the left, looking along +z)
    ground = np.median(rgb[y, x0:x1].mean(axis=1))
    assert 0.35 < ground < 0.8, f"the ground's brightness {ground:.2f}: not a lit ground"

    def crossings(r: int) -> int:
        dark = rgb[r, x0:x1].mean(axis=1) < ground - 0.02
        return int(np.count_nonzero(np.diff(dark.astype(int)) == 1))

    # rows a little above and below (a row that grazes a line running across the view, the
    # metre line of z = 20 or 21, is dark along much of its length and counts its noise)
    step = max(1, round(6 * dpr))
    runs = int(np.median([crossings(r) for r in range(y - 4 * step, y + 4 * step + 1, step)]))
    assert 3 <= runs <= 5, f"{runs} lines crossed over 4 m (1 m apart: 4)"
    # the horizon
    page.evaluate("""() => { const v = window.__mm.view;
      v.controls.target.set(0, 1.6, 30); v.camera.position.set(0, 1.6, 0); }""")
    time.sleep(1.0)
    rgb = _rgb(shot(page, "sky"))
    view = rgb[:, : int(0.7 * rgb.shape[1])]
    hz = page.evaluate("() => window.__mm.toScreen(0, 500, 1.6)")["y"] * dpr  # the horizon's row
    zenith = view[int(0.12 * rgb.shape[0])].mean(axis=0)
    near_horizon = view[int(hz) - 12].mean(axis=0)
    assert zenith[2] - zenith[0] > near_horizon[2] - near_horizon[0] + 0.03, (zenith, near_horizon)
    below = view[int(hz) + 40].mean(axis=0)
    assert abs(below[1] - below[2]) < 0.15 and below.mean() < near_horizon.mean(), (below, near_horizon)
