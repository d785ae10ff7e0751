"""The session's side of strafing and drawn-trajectory control (issue 33 items 1 and 2),
over the websocket as the page speaks it: a ``path`` in ``drawn`` mode walks the
character to the drawing's nearest point and is cancelled by a movement key; ``stick``
messages move it; bad values are refused with one error each and the session goes on."""

from __future__ import annotations

import json
import math

import pytest

from test_viewer_support import Client, small_database, start_server, viewer_deps_or_skip

viewer_deps_or_skip()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from conftest import data_root

    db = small_database(tmp_path_factory.getbasetemp())
    srv = start_server(db, {"data": data_root()})
    yield srv
    srv.stop()


def now(c: Client):
    """The selected character's root in the newest frame."""
    return c.next_frame().by_id(c.welcome["selected"]).root.copy()


def test_a_drawn_path_goes_to_the_nearest_point_and_a_key_takes_over(server):
    with Client(server) as c:
        x0, _, z0 = now(c)
        pts = [[0.1 * i, x0 + 4.0 - 0.4 * i, z0 + 2.0] for i in range(21)]  # from x0 + 4 to x0 - 4, 2 m ahead
        r = c.request("path", points=pts, mode="drawn")
        assert r["type"] == "ack"
        info = c.wait_type("path_info")
        assert info["mode"] == "drawn" and abs(info["length"] - 8.0) < 0.1 and not info["loops"]
        sel = c.welcome["selected"]
        f = c.wait(lambda m: not isinstance(m, dict) and abs(m.by_id(sel).root[2] - (z0 + 2.0)) < 0.35, timeout=15)
        x, _, z = f.by_id(sel).root
        assert abs(x - x0) < 1.0, (x, z, x0, z0)  # at the nearest point (the drawing began 4 m aside)
        c.send("key", key="KeyW", down=True)
        done = c.wait_type("path_done")
        assert done["reason"] == "keyboard"
        c.send("key", key="KeyW", down=False)


def test_the_sticks_move_the_character_and_bad_values_are_refused(server):
    with Client(server) as c:
        x0, _, z0 = now(c)
        c.send("stick", left=[0.0, 1.0], right=[0.0, 0.0], yaw=0.0)  # forward: +z at camera yaw 0
        c.pump_world(2.0)
        c.send("stick", left=[0.0, 0.0], right=[0.0, 0.0], yaw=0.0)
        x1, _, z1 = c.frame.by_id(c.welcome["selected"]).root
        assert z1 - z0 > 0.6 and abs(x1 - x0) < 0.5 * (z1 - z0), (x0, z0, x1, z1)
        for raw in ({"type": "stick", "left": [2, 0]}, {"type": "stick", "left": [0, float("nan")]},
                    {"type": "stick"}, {"type": "path", "points": [[0, 0, 0], [1, 1, 1]], "mode": "steer"},
                    {"type": "path", "points": [[0, 0, 0], [1, 1, 1]], "mode": "drawn", "loop": "yes"}):
            c.send_raw(json.dumps(raw).replace("NaN", "NaN"))
            assert c.wait_type("error")["code"] == "invalid", raw
        r = c.request("path", points=[[0, 0, 0], [0.1, 0.05, 0.0]], mode="drawn")
        assert r["type"] == "error" and "draw at least 0.3 m" in r["message"] and "\n" not in r["message"]
        assert c.request("hello")["type"] == "ack"
        assert not math.isnan(now(c)[0])
