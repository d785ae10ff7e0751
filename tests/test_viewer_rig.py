"""The viewer's "Use my character" and ``motionmatch viewer --rig`` (issue 32 part 3), over the
real protocol and in the page (headless Chromium): a skinned ``.glb`` rig (LAFAN1 renamed to the Unreal scheme with twist bones,
a pelvis joint and a prop, made at test time, never committed) is uploaded to a session
(``POST /api/rig/{session}``); the pose frames then carry the rig's joints, their world
positions are :meth:`RigFile.retarget` of the same pose, the page's body of the rig is its
own skinned mesh, an export is on the rig; "Use the mannequin" goes back. Bad rigs (no humanoid, two roots, over the
size limit, a file that is no rig, another tab's key) are refused in one line and leave the
session as it was. The page test picks the rig in "Use my character", walks, and checks the
page draws the rig's skinned mesh (its bone count, its head's screen region); a screenshot is
saved in ``out/viewer-e2e/rig_character.png``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import quote

import numpy as np
import pygltflib
import pytest

from rigs import lafan_clip, make_rig
from test_viewer_support import Client, small_database, start_server, viewer_deps_or_skip

viewer_deps_or_skip()
pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def rig_glb(data_dir, tmp_path_factory):
    """A skinned Unreal-scheme rig (31 joints) as a user exports it."""
    from motionmatch.io.gltf import write_glb

    unreal = make_rig(lafan_clip(data_dir, 30), "unreal")
    first = unreal[0:1]
    first.name = "unreal"
    return write_glb(tmp_path_factory.mktemp("rig") / "hero.glb", first)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from motionmatch.viewer._bundle import BundleError, ensure_bundle

    try:
        static = ensure_bundle(log=lambda m: None)
    except BundleError:  # the protocol tests run without the page; the page test skips
        static = None
    folder = tmp_path_factory.mktemp("db")
    db = small_database(folder)
    srv = start_server(db, {}, static_dir=static)
    srv.static = static
    srv.db_path = folder / "viewer-test-db.npz"
    yield srv
    srv.stop()


def upload(server, client: Client, data: bytes, name: str, key: str | None = None) -> tuple[int, dict]:
    """POST a rig file for ``client``'s session as the page does: (HTTP status, JSON answer)."""
    rig = client.welcome["rig"]
    req = urllib.request.Request(server.url.rstrip("/") + rig["upload"], data=data, method="POST", headers={
        "Content-Type": "application/octet-stream", "X-Rig-Name": quote(name), "X-Rig-Key": key or rig["key"]})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_rig_uploaded_plays_every_character_and_matches_rigfile_retarget(server, rig_glb):
    from motionmatch.anim import Motion
    from motionmatch.anim.retarget import RetargetSettings
    from motionmatch.io.rig_file import read_rig
    from motionmatch.viewer.body import decode_body

    rig = read_rig(rig_glb)
    J = rig.rig.skeleton.num_joints
    with Client(server) as c:
        assert c.welcome["rig"]["active"] is False
        db_joints = len(c.next_frame().characters[0].positions)
        status, answer = upload(server, c, rig_glb.read_bytes(), "hero.glb")
        assert status == 200 and answer["ok"] and answer["joints"] == J == 31 and answer["skinned"], answer
        state = c.wait_type("rig", timeout=30)
        assert state["active"] and state["name"] == "hero.glb" and state["skinned"]
        chars = c.wait_type("characters")
        sid = str(state["skeleton"])
        assert all(ch["skeleton"] == state["skeleton"] for ch in chars["characters"])
        sk = chars["skeletons"][sid]
        assert sk["names"] == list(rig.rig.skeleton.names) and len(sk["feet"]) == 2
        # a second character added now is on the rig too
        second = c.request("add_character", position=[2.0, 0.0])["id"]
        c.send("key", key="w", down=True)
        c.pump_world(1.0)
        c.request("pause", paused=True)
        # the paused frame (sent once; it may come before the pause's reply)
        frame = c.frame if c.frame is not None and c.frame.flags & 1 else \
            c.wait(lambda m: not isinstance(m, dict) and m.flags & 1)
        assert {len(ch.positions) for ch in frame.characters} == {J} and db_joints == 23
        # the frame's world positions are RigFile.retarget of the character's pose (foot IK off),
        # but for the legs: the viewer's per-pose foot IK keeps the feet on the ground
        session = server.viewer.sessions[c.welcome["session"]]
        viewer_source = server.viewer.rigs.source
        skel, roles = rig.rig.skeleton, rig.rig.roles
        legs = [j for j in range(J) if any(skel.descends_from(j, roles[f"{s}_upper_leg"]) for s in ("left", "right"))]
        body = [j for j in range(J) if j not in legs]
        for cid in (c.welcome["selected"], second):
            last = session.chars[cid].last
            pose = Motion(session.db.skeleton, last.rotations[None].astype(float), last.translations[None].astype(float),
                          60.0)
            want = rig.retarget(pose, RetargetSettings(foot_ik=False), source=viewer_source).world_positions[0]
            got = frame.by_id(cid).positions
            assert np.abs(got[body] - want[body]).max() < 3e-3, np.abs(got[body] - want[body]).max()
            assert np.abs(got[legs] - want[legs]).max() < 0.04, np.abs(got[legs] - want[legs]).max()
        assert frame.by_id(second).positions[:, 1].min() > -0.05  # standing on the ground, not under it
        # the page's body of the rig: the file's own skinned mesh, on the rig's joints
        with urllib.request.urlopen(server.url.rstrip("/") + sk["body"], timeout=60) as r:
            body = decode_body(r.read())
        assert len(body["inverse_bind"]) == J and len(body["vertices"]) > 1000
        # an export of the character is on the rig, with its mesh
        assert c.request("export", id=second, format="glb")["type"] == "ack"
        dl = c.wait_type("download", timeout=120)
        with urllib.request.urlopen(server.url.rstrip("/") + dl["url"], timeout=60) as r:
            doc = pygltflib.GLTF2.load_from_bytes(r.read())
        assert [doc.nodes[j].name for j in doc.skins[0].joints] == list(rig.rig.skeleton.names)
        # "Use the mannequin": the database's skeleton again
        assert c.request("rig_clear")["type"] == "ack"
        assert c.wait_type("rig")["active"] is False
        assert c.request("step", frames=1)["type"] == "ack"
        frame = c.frame  # (the stepped frame comes before the step's reply)
        assert {len(ch.positions) for ch in frame.characters} == {db_joints}


def test_bad_rigs_are_refused_in_one_line_and_the_session_is_unchanged(server, rig_glb, data_dir, tmp_path,
                                                                        monkeypatch):
    from motionmatch import _limits

    doc = pygltflib.GLTF2().load_binary(str(rig_glb))  # two roots: a node of its own beside the skeleton
    doc.nodes.append(pygltflib.Node(name="prop_root", translation=[0.5, 0.0, 0.0]))
    doc.scenes[0].nodes.append(len(doc.nodes) - 1)
    doc.skins[0].joints = [*doc.skins[0].joints, len(doc.nodes) - 1]
    two = tmp_path / "two_roots.glb"
    doc.save_binary(str(two))
    crab = data_dir / "genmm-examples" / "Crabnew_Crab-dance-long.bvh"
    with Client(server) as c:
        J = len(c.next_frame().characters[0].positions)
        cases = [
            (crab.read_bytes(), "crab.bvh", 400, ("crab.bvh", "no humanoid found",
                                                  "motionmatch viewer --rig crab.bvh --rig-roles MAP.json")),
            (two.read_bytes(), "two_roots.glb", 400, ("two_roots.glb", "2 roots", "parent them under one joint")),
            (b"glTF\x02\x00\x00\x00garbage", "broken.glb", 400, ("broken.glb",)),
            (b"hello", "notes.txt", 400, ("notes.txt", ".glb")),
            (b"Kaydara FBX Binary  \x00", "hero.fbx", 400, ("hero.fbx", "export the rig as glTF 2.0 (.glb)")),
            (b"", "empty.glb", 400, ("empty.glb", "empty")),
        ]
        for data, name, code, words in cases:
            status, answer = upload(server, c, data, name)
            assert status == code and not answer["ok"], (name, status, answer)
            line = answer["error"]
            assert "\n" not in line and all(w in line for w in words), (name, line)
            assert "mm-rig-" not in line and "/tmp" not in line  # never the server's temporary folder
        status, answer = upload(server, c, rig_glb.read_bytes(), "hero.glb", key="not-the-key")
        assert status == 403 and "key" in answer["error"]
        monkeypatch.setattr(_limits, "MAX_RIG_UPLOAD_BYTES", 1000)
        status, answer = upload(server, c, rig_glb.read_bytes(), "hero.glb")
        assert status == 413 and "hero.glb" in answer["error"] and "over the 1,000 bytes" in answer["error"]
        c.pump(0.3)
        assert not any(m.get("type") == "rig" for m in c.messages)  # nothing changed
        assert {len(ch.positions) for ch in c.next_frame().characters} == {J}
        session = server.viewer.sessions[c.welcome["session"]]
        assert session.rig is None and set(session.skeletons) == {0}


def test_the_page_uses_my_character_and_the_mannequin_again(server, rig_glb, tmp_path):
    pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    import tempfile
    import time

    from playwright.sync_api import sync_playwright

    from test_viewer_e2e import CHROMIUM_ARGS, SHOTS, chromium_path, walk_then_pause
    from test_viewer_rigs_e2e import character_pixels_in

    exe = chromium_path()
    if exe is None or server.static is None:
        pytest.skip("Debian's chromium is not installed, or the page's bundle cannot be built")
    SHOTS.mkdir(parents=True, exist_ok=True)
    doc = pygltflib.GLTF2().load_binary(str(rig_glb))  # a bad rig: two roots
    doc.nodes.append(pygltflib.Node(name="prop_root", translation=[0.5, 0.0, 0.0]))
    doc.scenes[0].nodes.append(len(doc.nodes) - 1)
    doc.skins[0].joints = [*doc.skins[0].joints, len(doc.nodes) - 1]
    two = tmp_path / "two_roots.glb"
    doc.save_binary(str(two))
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="mm-chromium-"), executable_path=exe,
                                                   headless=True, args=CHROMIUM_ARGS,
                                                   viewport={"width": 1280, "height": 760})
        try:
            page = ctx.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(server.url)
            page.wait_for_function("() => window.__mm && window.__mm.state.frame && window.__mm.state.welcome",
                                   timeout=60000)
            page.wait_for_function("() => window.__mm.bodiesDrawn() === 1", timeout=60000)
            cid = page.evaluate("() => window.__mm.state.selected")
            bones = "(id) => { const e = window.__mm.view.bodies.chars.get(id); return e ? e.bones.length : 0; }"
            assert page.evaluate(bones, cid) == 23  # the database's skeleton, its mannequin
            # a bad rig first: one line on the page, the characters as they were
            page.set_input_files("#rig-file", str(two))
            page.wait_for_function("() => window.__mm.rig.lastAnswer", timeout=60000)
            answer = page.evaluate("() => window.__mm.rig.lastAnswer")
            assert not answer["ok"] and "two_roots.glb" in answer["error"] and "2 roots" in answer["error"]
            assert "2 roots" in page.inner_text("#toast")
            assert page.evaluate("() => window.__mm.rig.state.active") is False
            # "Use my character": the skinned rig
            page.set_input_files("#rig-file", str(rig_glb))
            page.wait_for_function("() => window.__mm.rig.state && window.__mm.rig.state.active", timeout=120000)
            page.wait_for_function(f"() => ({bones})({cid}) === 31", timeout=60000)
            assert "hero.glb (31 joints, its own skinned mesh)" in page.inner_text("#rig-note")
            walk_then_pause(page, 2.0)
            c = page.evaluate("() => window.__mm.character()")
            assert c["joints"] == 31
            names = page.evaluate("() => window.__mm.view.skeletons[String(window.__mm.rig.state.skeleton)].names")
            P = np.asarray(c["positions"], dtype=float).reshape(-1, 3)
            head, pelvis = P[names.index("head")], P[names.index("pelvis")]
            assert head[1] > pelvis[1] + 0.45 and 0.75 < pelvis[1] < 1.1  # upright, on its feet
            page.evaluate("() => { const v = window.__mm.view; const c = window.__mm.character(); "
                          "v.controls.target.set(c.root[0], 0.9, c.root[2]); "
                          "v.camera.position.set(c.root[0] + 2.6 * Math.cos(c.yaw), 1.3, "
                          "c.root[2] - 2.6 * Math.sin(c.yaw)); }")
            time.sleep(0.8)
            shot = SHOTS / "rig_character.png"
            page.screenshot(path=str(shot))
            color = page.evaluate("(id) => window.__mm.characterColor(id)", cid)
            top = page.evaluate("([x, y, z]) => window.__mm.view.toScreen(x, y, z)", [head[0], head[1] + 0.08, head[2]])
            from PIL import Image

            region = SHOTS / "rig_character_head.png"
            Image.open(shot).crop((int(top["x"]) - 8, int(top["y"]) - 8, int(top["x"]) + 8,
                                   int(top["y"]) + 8)).save(region)
            assert character_pixels_in(region, color) > 100  # the head's screen region is drawn
            assert character_pixels_in(shot, color) > 4000
            # "Use the mannequin"
            page.click("#rig-clear")
            page.wait_for_function("() => !window.__mm.rig.state.active", timeout=30000)
            page.evaluate("() => window.__mm.conn.send('step', {frames: 1})")
            page.wait_for_function(f"() => ({bones})({cid}) === 23", timeout=60000)
            assert not errors, errors
        finally:
            ctx.close()


def test_a_character_not_updated_keeps_its_pose_on_the_rig(server, rig_glb):
    """``ViewerRig.play`` with a session's cache: the same pose arrays again (a background
    character the level of detail did not update, a paused session) are not retargeted
    again; new ones are, exactly as without the cache."""
    from motionmatch.viewer.session import Session

    rig = server.viewer.rigs.load(rig_glb)
    s = Session(server.viewer, lambda m: None, holds=False)
    try:
        s.add_mm_character("second", (2.0, 0.0), announce=False)
        for _ in range(5):
            s.step()
        cache: dict = {}
        mm = [True] * len(s.chars)
        first = rig.play(s.poses(), mm, cache)  # (no rig in this session: the database's poses, fresh each call)
        again = rig.play(s.poses(), mm, cache)
        assert all(a.positions is b.positions for a, b in zip(first, again))
        s.step()
        moved = rig.play(s.poses(), mm, cache)
        fresh = rig.play(s.poses(), mm)
        assert all(a.positions is not b.positions for a, b in zip(first, moved))
        assert all(np.array_equal(a.positions, b.positions) and np.array_equal(a.rotations, b.rotations)
                   for a, b in zip(moved, fresh))
        assert len(first[0].positions) == rig.joints == 31
    finally:
        s.close()


def test_viewer_rig_on_the_command_line_is_checked_before_serving(server, rig_glb, tmp_path, capsys):
    """``motionmatch viewer --rig``: a rig that cannot be used (two roots), or given with
    ``--body``, is one line and the viewer does not start."""
    from motionmatch.cli.main import main

    doc = pygltflib.GLTF2().load_binary(str(rig_glb))
    doc.nodes.append(pygltflib.Node(name="prop_root", translation=[0.5, 0.0, 0.0]))
    doc.scenes[0].nodes.append(len(doc.nodes) - 1)
    doc.skins[0].joints = [*doc.skins[0].joints, len(doc.nodes) - 1]
    two = tmp_path / "two_roots.glb"
    doc.save_binary(str(two))
    assert server.db_path.is_file()
    assert main(["viewer", "--db", str(server.db_path), "--rig", str(two), "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("motionmatch viewer: ") and "two_roots.glb" in err[-1] and "2 roots" in err[-1], err
    assert main(["viewer", "--db", str(server.db_path), "--rig", str(rig_glb), "--body", str(rig_glb)]) == 2
    assert "give one" in capsys.readouterr().err


def test_every_session_starts_on_the_viewers_rig(server, rig_glb):
    """``motionmatch viewer --rig`` sets the viewer's rig: a new session (a new tab) starts
    with its characters on it, says so in its welcome, and can still go back."""
    from motionmatch.viewer.session import Session

    server.viewer.rig = server.viewer.rigs.load(rig_glb)
    sent: list = []
    try:
        s = Session(server.viewer, sent.append, holds=False)
        w = s.welcome()
        sid = w["rig"]["skeleton"]
        assert w["rig"]["active"] and w["rig"]["name"] == "hero.glb" and w["rig"]["joints"] == 31
        assert [c["skeleton"] for c in w["characters"]] == [sid] and w["skeletons"][str(sid)]["body"]
        s.step()
        assert len(s.poses()[0].positions) == 31
        s.handle({"type": "rig_clear", "seq": 1})
        assert len(s.poses()[0].positions) == 23 and s.describe_characters()[0]["skeleton"] == 0
        assert any(m.get("type") == "ack" and m.get("seq") == 1 for m in sent if isinstance(m, dict))
        s.close()
    finally:
        server.viewer.rig = None


def test_feet_on_the_ground_on_a_rig_with_longer_legs(server, data_dir, tmp_path):
    """Issue 32: the viewer's characters on a rig whose legs are longer (LAFAN1 with thighs
    1.25 and shins 1.15 times as long, shorter feet; a BVH made here) walk with their feet at
    their contacts (the controller's contact flags) on the ground as the database's
    character's are: the lowest point of each foot within 2 cm (90 % of the contacts; 1 cm
    the median) of the database character's foot's, never under the ground; retargeted
    without the foot IK the same poses miss it."""
    from motionmatch.anim import quat
    from motionmatch.anim.retarget import Retargeter, RetargetSettings, foot_points
    from motionmatch.viewer.messages import validate
    from motionmatch.viewer.session import Session
    from rigs import write_rig
    from test_pose_feet import long_legged

    path = write_rig(long_legged(lafan_clip(data_dir, 2)), tmp_path, "long_legs")
    rig = server.viewer.rigs.load(path)
    source = server.viewer.rigs.source
    plain = Retargeter(source, rig.file.rig, RetargetSettings(foot_ik=False))
    db = server.viewer.db
    side_of = [0 if db.skeleton.descends_from(int(f), source.roles["left_upper_leg"]) else 1 for f in db.foot_joints]

    def lowest(skel, roles, wp, wr):
        out = []
        for side in ("left", "right"):
            joints, ends = foot_points(skel, roles[f"{side}_ankle"])
            par = skel.end_site_parents[ends]
            out.append(min(wp[joints, 1].min(), (wp[par] + quat.rotate(wr[par], skel.end_site_offsets[ends]))[:, 1].min()))
        return np.array(out)

    s = Session(server.viewer, lambda m: None, holds=False)
    try:
        s.handle(validate({"type": "keys", "held": ["w"]}))
        src_h, on, off = [], [], []
        for tick in range(150):
            s.step()
            poses = s.poses()
            src = [(p.positions.copy(), p.rotations.copy()) for p in poses]
            played = rig.play(poses, [True] * len(poses))
            if tick < 30:
                continue
            for p, (sp, sr) in zip(played, src):
                wp0, wr0 = plain.world_poses(sr[None], sp[None], floor=0.0, centres=sp[None, 0],
                                             root_positions=sp[None, 0])
                hs = lowest(db.skeleton, source.roles, sp, sr)
                h = lowest(rig.file.rig.skeleton, rig.file.rig.roles, p.positions, p.rotations)
                h0 = lowest(rig.file.rig.skeleton, rig.file.rig.roles, wp0[0], wr0[0])
                for i in range(2):
                    if any(p.contacts >> k & 1 and side_of[k] == i for k in range(len(side_of))):
                        src_h.append(hs[i])
                        on.append(h[i])
                        off.append(h0[i])
        src_h, on, off = np.array(src_h), np.array(on), np.array(off)
        assert len(on) > 100 and np.ptp(src_h) > 0.01  # walking: its feet planted, lifted, planted again
        miss = np.abs(on - src_h)
        assert np.percentile(miss, 90) < 0.02 and np.median(miss) < 0.01, (np.median(miss), np.percentile(miss, 90))
        assert on.min() > -0.005
        assert np.percentile(np.abs(off - src_h), 90) > 0.02, np.percentile(np.abs(off - src_h), 90)
    finally:
        s.close()
