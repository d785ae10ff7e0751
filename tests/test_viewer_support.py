"""Shared helpers of the viewer tests (no tests here): a small database, a server on a free
port, a websocket client that speaks the viewer's protocol, and skinning as the page does."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from conftest import data_root

# A handful of LAFAN1 clips (60 fps copies): standing, walking, jogging, running.
CLIPS = ("obstacles4_subject3_standing", "walk1_subject1_walk2", "walk3_subject1_walk",
         "multipleActions1_subject1_jog", "run2_subject4_run2")


def viewer_deps_or_skip() -> None:
    for mod in ("starlette", "uvicorn", "websockets"):
        pytest.importorskip(mod, reason=f"the viewer needs {mod}: pip install 'motionmatch[viewer]'")


def small_database(cache_dir: Path):
    """A small mirrored database from a few LAFAN1 clips, cached under ``cache_dir``."""
    from motionmatch.anim import load_bvh
    from motionmatch.database import MotionDatabase
    from motionmatch.datasets import tags_from_name

    folder = data_root() / "lafan1-60fps"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found; set MOTIONMATCH_DATA to the shared data folder")
    clips = []
    for name in CLIPS:
        m = load_bvh(folder / f"{name}.bvh")
        m.tags = tags_from_name(name)
        clips.append(m)
    return MotionDatabase.cached(cache_dir / "viewer-test-db.npz", clips, mirror_copies=True)


def start_server(db, roots: dict, static_dir=None, **kw):
    from motionmatch.viewer.data import FileCatalog
    from motionmatch.viewer.server import Viewer, ViewerServer

    viewer = Viewer(db, catalog=FileCatalog(roots), source_description="test database", static_dir=static_dir, **kw)
    viewer.prepare(background=False)  # as `motionmatch viewer` does, all before serving
    return ViewerServer(viewer, "127.0.0.1", 0).start()


def health(server) -> dict:
    with urllib.request.urlopen(server.url + "api/health", timeout=5) as r:
        return json.loads(r.read())


class Client:
    """A websocket client of one session: JSON commands, JSON replies, decoded pose frames."""

    def __init__(self, server, origin: str | None = None, headers: dict | None = None, query: str = "", **connect):
        from websockets.sync.client import connect as ws_connect

        url = server.url.replace("http://", "ws://") + "ws" + query
        self._cm = ws_connect(url, origin=origin, max_size=16 * 1024 * 1024, open_timeout=10, proxy=None,
                              additional_headers=headers, **connect)
        self.ws = self._cm.__enter__() if hasattr(self._cm, "__enter__") else self._cm
        self.seq = 0
        self.mark = 0
        self.messages: list[dict] = []
        self.frames = []
        self.frame = None
        self.welcome = self.wait_type("welcome")

    def close(self) -> None:
        self.ws.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, kind: str, /, **fields) -> int:
        self.mark = len(self.messages)
        self.seq += 1
        self.ws.send(json.dumps({"type": kind, "seq": self.seq, **fields}))
        return self.seq

    def send_raw(self, data) -> None:
        self.ws.send(data)

    def _recv(self, timeout: float):
        from motionmatch.viewer.protocol import decode_frame

        try:
            data = self.ws.recv(timeout=max(timeout, 0.0))
        except TimeoutError:
            return None
        if isinstance(data, bytes):
            self.frame = decode_frame(data)
            self.frames.append(self.frame)
            if len(self.frames) > 2000:
                del self.frames[:1000]
            return self.frame
        msg = json.loads(data)
        self.messages.append(msg)
        return msg

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self._recv(left)

    def pump_world(self, seconds: float, timeout: float = 30.0) -> None:
        """Read until the World has stepped ``seconds`` of simulated time from the next frame on
        (a loaded machine steps fewer frames per wall-clock second)."""
        start = self.next_frame().time
        self.wait(lambda m: not isinstance(m, dict) and m.time >= start + seconds, timeout)

    def wait(self, pred, timeout: float = 10.0):
        """The first incoming message or frame (from now on) for which ``pred`` is true."""
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            m = self._recv(left)
            if m is not None and pred(m):
                return m
        raise AssertionError(f"timed out after {timeout} s; last messages: {self.messages[-5:]}")

    def wait_type(self, kind: str, /, timeout: float = 10.0, **match) -> dict:
        """The first message of ``kind`` since the last command was sent (or from now on)."""

        def pred(m):
            return isinstance(m, dict) and m.get("type") == kind and all(m.get(k) == v for k, v in match.items())

        for i in range(self.mark, len(self.messages)):
            if pred(self.messages[i]):
                self.mark = i + 1
                return self.messages[i]
        m = self.wait(pred, timeout)
        self.mark = len(self.messages)
        return m

    def reply(self, seq: int, timeout: float = 10.0) -> dict:
        """The ack or error answering message ``seq``."""
        for m in self.messages:
            if m.get("seq") == seq and m.get("type") in ("ack", "error"):
                return m
        return self.wait(lambda m: isinstance(m, dict) and m.get("seq") == seq and m.get("type") in ("ack", "error"),
                         timeout)

    def request(self, kind: str, /, timeout: float = 10.0, **fields) -> dict:
        return self.reply(self.send(kind, **fields), timeout)

    def next_frame(self, timeout: float = 5.0):
        return self.wait(lambda m: not isinstance(m, dict), timeout)

    def root(self, cid: int | None = None):
        f = self.frame if self.frame is not None else self.next_frame()
        cid = self.welcome["selected"] if cid is None else cid
        return f.by_id(cid).root.copy()


def walk_run_keypoint_file(path: Path, cache_dir: Path):
    """A walk -> run performance (3 s each) from held-out clips, filmed by the pose
    package's virtual camera from a held-out angle and saved at ``path``. Returns ``(path,
    seconds of walking, classifier)``: the quick default classifier, trained once and
    cached in ``cache_dir``."""
    import numpy as np

    from motionmatch.control.pose import default as d
    from motionmatch.control.pose.dataset import compose, load_clips, steady_segments
    from motionmatch.control.pose.keypoints import save_keypoints
    from motionmatch.control.pose.render import RenderSettings, render_keypoints

    root = data_root()
    _, imp = d.default_classifiers(root, d.QUICK, cache_dir=cache_dir)
    clips = load_clips(root, d.QUICK.data)
    parts = []
    for kind in ("walk", "run"):
        segs = steady_segments(clips, min_s=3.0, split="test")[kind] or \
            steady_segments(clips, min_s=3.0, split="train")[kind]
        cl, a, b = max(segs, key=lambda s: ("subject" in s[0].name, s[2] - s[1]))  # LAFAN1 first
        parts.append((cl, a, min(b, a + int(3.0 * cl.facts.fps))))
    kp, _, part = compose(parts)
    stream, _ = render_keypoints(kp, 30.0, RenderSettings(azimuths_deg=(12.0,), distance=(5.0, 6.5)), 3)
    out = save_keypoints(stream, path)
    return out, float(np.mean(part == 0)) * stream.duration, imp


def skin_as_the_page(body: dict, positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
    """Vertices ``[V, 3]`` skinned as three.js does: bone matrix = T(position) R(rotation)
    times the joint's inverse bind matrix, blended by the weights."""
    from motionmatch.anim import quat

    J = len(positions)
    world = np.tile(np.eye(4), (J, 1, 1))
    world[:, :3, :3] = quat.to_matrix(rotations)
    world[:, :3, 3] = positions
    mats = world @ body["inverse_bind"].astype(np.float64)
    v = np.concatenate([body["vertices"], np.ones((len(body["vertices"]), 1))], axis=1)
    out = np.zeros((len(v), 3))
    for k in range(4):
        out += body["weights"][:, k:k + 1] * np.einsum("vab,vb->va", mats[body["joints"][:, k]], v)[:, :3]
    return out
