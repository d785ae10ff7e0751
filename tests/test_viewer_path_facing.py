"""The facing of a drawn path in the viewer (issue 33, item 8): tangent, joystick or
DirectionNet, over the websocket as the page speaks it; the network only when this
machine has trained it (the viewer does not train it), else one error saying how."""

from __future__ import annotations

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


def _path(c: Client):
    x0, _, z0 = c.next_frame().by_id(c.welcome["selected"]).root
    return [[0.1 * i, float(x0), float(z0 + 0.12 * i)] for i in range(31)]


def test_joystick_and_network_facing_of_a_path(server, tmp_path, monkeypatch):
    from conftest import data_root
    from motionmatch.control import direction_cache as dc
    from synthetic import random_direction_net

    monkeypatch.setenv("MOTIONMATCH_CACHE", str(tmp_path / "cache"))
    with Client(server) as c:
        r = c.request("path", points=_path(c), mode="local", facing="joystick", joystick_deg=45.0)
        assert r["type"] == "ack", r
        assert c.wait_type("path_info")["facing"] == "joystick"
        r = c.request("path", points=_path(c), mode="local", facing="net")  # nothing cached
        assert r["type"] == "error" and "not trained on this machine" in r["message"], r
        if not (data_root() / "lafan1-60fps").is_dir():
            pytest.skip("no lafan1-60fps to key DirectionNet's cache by; set MOTIONMATCH_DATA")
        random_direction_net(seed=4).save(dc.cache_path(data_root()))
        r = c.request("path", points=_path(c), mode="global", facing="net")
        assert r["type"] == "ack", r
        assert c.wait_type("path_info")["facing"] == "net"
        for bad in ({"facing": "camera"}, {"facing": "joystick", "joystick_deg": 270}):
            r = c.request("path", points=_path(c), mode="local", **bad)
            assert r["type"] == "error", (bad, r)
