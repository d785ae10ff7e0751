"""Video of motion capture on the skinned body, filmed by the virtual camera.

The domain check (does the classifier, trained on keypoints rendered from joints, work
on what a real pose estimator sees?) needs images: :func:`render_body_video` skins the
mannequin of :func:`~motionmatch.anim.mannequin.mannequin_for` with a clip and rasterises
it (a z-buffered triangle rasteriser with Lambert shading, compiled with Numba) through
the same cameras that :func:`~.render.render_keypoints` places, so the frames, the
rendered keypoints and the labelling rules' commands line up frame by frame.

The mannequin's own head is a stub on the neck, so a head is added (:func:`_head`): an
ellipsoid the size of a human head over the head joint, a face (skin, eyes and a mouth)
on the side the nose keypoint is on, and dark hair over the back and the top.
MediaPipe's person detector keys on faces, and its landmark model tells a front view from
a back view by the face: on the stub alone it found bodies side on far less often and took
the performer's left for their right in about half of the frames filmed from the front.

:func:`write_y4m` writes frames as an uncompressed YUV4MPEG2 video (what Chromium's fake
camera reads, and OpenCV too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from motionmatch._files import atomic_write
from motionmatch.anim.motion import Motion
from motionmatch.anim.resample import resample
from motionmatch.control.pose.keypoints import KP, KeypointStream
from motionmatch.control.pose.render import Camera, RenderSettings, joint_map, render_keypoints, world_keypoints

__all__ = ["BodyVideo", "render_body_video", "write_y4m"]

BACKGROUND_TOP = np.array([196.0, 200.0, 206.0])
BACKGROUND_FLOOR = np.array([120.0, 112.0, 100.0])
BODY = np.array([214.0, 170.0, 140.0])
SHIRT = np.array([60.0, 90.0, 150.0])
TROUSERS = np.array([50.0, 50.0, 60.0])
FACE_DARK = np.array([40.0, 30.0, 30.0])
HAIR = np.array([55.0, 40.0, 30.0])
#: The added head: half-axes (m: across, up, forward) and centre (m up and forward of the
#: head joint, in the head's frame), rings and segments of its mesh.
HEAD_RADII = np.array([0.075, 0.105, 0.095])
HEAD_CENTRE = (0.07, 0.015)
HEAD_MESH = (16, 24)


def _head_mesh() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(unit points [V, 3] as (across, up, forward), triangles [T, 3], colour [T, 3])`` of the
    added head: a UV sphere painted with a face on +forward and hair over the back and top."""
    rings, segs = HEAD_MESH
    th = np.linspace(0.0, np.pi, rings + 1)                  # from the top
    ph = np.linspace(0.0, 2 * np.pi, segs, endpoint=False)   # 0: forward
    T, P = np.meshgrid(th, ph, indexing="ij")
    pts = np.stack([np.sin(T) * np.sin(P), np.cos(T), np.sin(T) * np.cos(P)], axis=-1).reshape(-1, 3)
    tri = []
    for r in range(rings):
        for k in range(segs):
            a, b = r * segs + k, r * segs + (k + 1) % segs
            c, d = a + segs, b + segs
            tri += [(a, c, b), (b, c, d)]
    tri = np.asarray(tri, dtype=np.int64)
    m = pts[tri].mean(axis=1)
    m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)
    x, y, z = m[:, 0], m[:, 1], m[:, 2]
    col = np.where(((z < 0.25) | (y > 0.55))[:, None], HAIR, BODY)
    eyes = (z > 0.6) & (np.abs(y - 0.12) < 0.11) & (np.abs(np.abs(x) - 0.38) < 0.14)
    mouth = (z > 0.6) & (np.abs(y + 0.42) < 0.08) & (np.abs(x) < 0.25)
    col[eyes | mouth] = FACE_DARK
    return pts, tri, col


def _head(head: np.ndarray, nose: np.ndarray) -> np.ndarray:
    """``[V, 3]`` world points of the added head mesh for one frame (head joint, nose keypoint)."""
    from motionmatch.control.pose.render import NOSE_UP

    pts, _, _ = _HEAD
    d = nose - head
    up = np.array([0.0, 1.0, 0.0])
    # the nose is NOSE_FORWARD ahead and NOSE_UP above the head joint: recover the head's axes
    fwd = d - NOSE_UP * up
    fwd = fwd / max(np.linalg.norm(fwd), 1e-9)
    up = up - fwd * (up @ fwd)
    up = up / max(np.linalg.norm(up), 1e-9)
    across = np.cross(up, fwd)
    centre = head + HEAD_CENTRE[0] * up + HEAD_CENTRE[1] * fwd
    R = np.stack([across, up, fwd], axis=1)                 # columns: the head's axes in the world
    return centre + (pts * HEAD_RADII) @ R.T


_HEAD = _head_mesh()


@dataclass
class BodyVideo:
    """Frames and what they show.

    Attributes:
        frames: ``[F, H, W, 3]`` uint8 RGB.
        keypoints: the rendered keypoints of the same frames (with the render's noise),
            labelled by the labelling rules when labels were asked for.
        fps: frames per second.
    """

    frames: np.ndarray
    keypoints: KeypointStream
    fps: float


@njit(cache=True)
def _raster(uv, z, tri, colour, img, zbuf):  # pragma: no cover - compiled
    H, W = zbuf.shape
    for t in range(tri.shape[0]):
        a, b, c = tri[t, 0], tri[t, 1], tri[t, 2]
        if z[a] <= 0.05 or z[b] <= 0.05 or z[c] <= 0.05:
            continue
        ax, ay, bx, by, cx, cy = uv[a, 0], uv[a, 1], uv[b, 0], uv[b, 1], uv[c, 0], uv[c, 1]
        area = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
        if abs(area) < 1e-9:
            continue
        x0 = max(int(np.floor(min(ax, bx, cx))), 0)
        x1 = min(int(np.ceil(max(ax, bx, cx))), W - 1)
        y0 = max(int(np.floor(min(ay, by, cy))), 0)
        y1 = min(int(np.ceil(max(ay, by, cy))), H - 1)
        for y in range(y0, y1 + 1):
            py = y + 0.5
            for x in range(x0, x1 + 1):
                px = x + 0.5
                w0 = ((bx - px) * (cy - py) - (by - py) * (cx - px)) / area
                w1 = ((cx - px) * (ay - py) - (cy - py) * (ax - px)) / area
                w2 = 1.0 - w0 - w1
                if w0 < 0 or w1 < 0 or w2 < 0:
                    continue
                d = w0 * z[a] + w1 * z[b] + w2 * z[c]
                if d < zbuf[y, x]:
                    zbuf[y, x] = d
                    img[y, x, 0] = colour[t, 0]
                    img[y, x, 1] = colour[t, 1]
                    img[y, x, 2] = colour[t, 2]


def _background(cam: Camera) -> np.ndarray:
    """``[H, W, 3]`` float: a wall above the horizon, a floor below it."""
    H, W = cam.height, cam.width
    ys = (np.arange(H) + 0.5 - 0.5 * H) / cam.focal                 # ray direction's y (down) per row
    rays = cam.rotation[2][None, :] + ys[:, None] * cam.rotation[1][None, :]
    floor = (rays[:, 1] < 0)[:, None, None]
    shade = np.clip(1.0 - 0.3 * np.abs(ys), 0.6, 1.0)[:, None, None]
    img = np.where(floor, BACKGROUND_FLOOR, BACKGROUND_TOP) * shade
    return np.broadcast_to(img, (H, W, 3)).copy()


def _vertex_colours(body, motion: Motion) -> np.ndarray:
    """``[V, 3]`` base colour per vertex: skin on head, hands and forearms; a shirt on the
    torso and upper arms; trousers on the legs (by each vertex's heaviest joint)."""
    jm = joint_map(motion.skeleton)
    skel = motion.skeleton
    owner = body.joints[np.arange(len(body.joints)), np.argmax(body.weights, axis=1)].astype(int)
    leg = np.zeros(skel.num_joints, dtype=bool)
    for side in ("left", "right"):
        hip = jm[f"{side}_hip"]
        for j in range(skel.num_joints):
            k = j
            while k >= 0:
                if k == hip:
                    leg[j] = True
                    break
                k = skel.parents[k]
    skin = np.zeros(skel.num_joints, dtype=bool)
    for j in range(skel.num_joints):  # the head and everything below the elbows
        k = j
        while k >= 0:
            if k in (skel.parents[jm["nose"]], jm["left_elbow"], jm["right_elbow"]):
                skin[j] = True
                break
            k = skel.parents[k]
    col = np.where(leg[owner][:, None], TROUSERS, SHIRT)
    col = np.where(skin[owner][:, None], BODY, col)
    return col


def _face(verts: np.ndarray, kp: np.ndarray, head: np.ndarray) -> np.ndarray:
    """``[V]`` bool: head vertices painted dark as eyes and mouth, on the face's side."""
    fwd = kp[KP["nose"]] - head
    fwd = fwd / max(np.linalg.norm(fwd), 1e-9)
    up = np.array([0.0, 1.0, 0.0])
    up = up - fwd * (up @ fwd)
    up = up / max(np.linalg.norm(up), 1e-9)
    side = np.cross(up, fwd)
    d = verts - head
    f, u, s = d @ fwd, d @ up, d @ side
    front = f > 0.6 * np.linalg.norm(d, axis=1)
    eyes = front & (np.abs(u - 0.03) < 0.018) & (np.abs(np.abs(s) - 0.035) < 0.014)
    mouth = front & (np.abs(u + 0.045) < 0.01) & (np.abs(s) < 0.03)
    return eyes | mouth


def render_body_video(motion: Motion, settings: RenderSettings | None = None, seed: int = 0,
                      azimuth: float | None = None, labels: bool = True, scale: float = 1.0) -> BodyVideo:
    """Film ``motion`` on its mannequin with the virtual camera (see the module docstring).

    Args:
        motion: the clip (resampled to ``settings.fps``).
        settings: the camera (and the rendered keypoints' noise).
        seed: camera placement (the same as :func:`~.render.render_keypoints` with it).
        azimuth: the camera's azimuth for every anchor (``None``: drawn from the settings).
        labels: attach the labelling rules' commands to the keypoints.
        scale: image size factor (0.5: a 320 x 240 image from the default 640 x 480).
    """
    from motionmatch.anim.mannequin import mannequin_for
    from motionmatch.control.pose.labels import label_frames, motion_facts

    s = settings or RenderSettings()
    if scale != 1.0:
        from dataclasses import replace

        s = replace(s, focal=s.focal * scale, width=round(s.width * scale), height_px=round(s.height_px * scale))
    m = motion if abs(motion.fps - s.fps) < 1e-6 else resample(motion, s.fps)
    kp = world_keypoints(m)
    stream, info = render_keypoints(kp, s.fps, s, seed, azimuth)
    if labels:
        stream.labels = label_frames(motion_facts(m, kp), info.cam_forward, info.cam_right)
    body = mannequin_for(m)
    base = _vertex_colours(body, m)
    body_tri = body.triangles.astype(np.int64)
    tri = np.concatenate([body_tri, _HEAD[1] + len(body.vertices)])
    head = joint_map(m.skeleton)["nose"]
    wp, wr = m.world_positions, m.world_rotations
    F = m.num_frames
    frames = np.empty((F, s.height_px, s.width, 3), dtype=np.uint8)
    seg = np.searchsorted(np.asarray(info.anchors), np.arange(F), side="right") - 1
    bg_cache: dict[int, np.ndarray] = {}
    for i in range(F):
        cam = info.cameras[seg[i]]
        if seg[i] not in bg_cache:
            bg_cache = {seg[i]: _background(cam).astype(np.uint8)}
        v = body.skin(wp[i], wr[i])
        col = base.copy()
        col[_face(v, kp[i], wp[i, head])] = FACE_DARK
        v = np.concatenate([v, _head(wp[i, head], kp[i, KP["nose"]])])
        e1 = v[tri[:, 1]] - v[tri[:, 0]]
        e2 = v[tri[:, 2]] - v[tri[:, 0]]
        n = np.cross(e1, e2)
        n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
        light = -cam.forward + np.array([0.3, 0.8, 0.0])
        light /= np.linalg.norm(light)
        lam = 0.35 + 0.65 * np.clip(n @ light, 0.0, 1.0)
        tcol = (np.concatenate([col[body_tri].mean(axis=1), _HEAD[2]]) * lam[:, None]).clip(0, 255).astype(np.uint8)
        img = bg_cache[seg[i]].copy()
        zbuf = np.full((s.height_px, s.width), np.inf)
        _raster(cam.project(v), cam.to_camera(v)[:, 2], tri, tcol, img, zbuf)
        frames[i] = img
    stream.meta.update({"source": "body-video", "clip": m.name})
    return BodyVideo(frames, stream, s.fps)


def write_y4m(path: str | Path, frames: np.ndarray, fps: float) -> Path:
    """Write ``[F, H, W, 3]`` uint8 RGB frames as a YUV4MPEG2 (4:2:0, BT.601) file, atomically."""
    F, H, W, _ = frames.shape
    if H % 2 or W % 2:
        raise ValueError(f"y4m 4:2:0 needs an even width and height, got {W} x {H}")
    rgb = frames.astype(np.float32)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    y = 16 + 0.257 * r + 0.504 * g + 0.098 * b
    u = 128 - 0.148 * r - 0.291 * g + 0.439 * b
    v = 128 + 0.439 * r - 0.368 * g - 0.071 * b
    u = u.reshape(F, H // 2, 2, W // 2, 2).mean(axis=(2, 4))
    v = v.reshape(F, H // 2, 2, W // 2, 2).mean(axis=(2, 4))
    num = round(fps * 1000)
    with atomic_write(Path(path), "wb") as f:
        f.write(f"YUV4MPEG2 W{W} H{H} F{num}:1000 Ip A1:1 C420jpeg\n".encode())
        for i in range(F):
            f.write(b"FRAME\n")
            for plane in (y[i], u[i], v[i]):
                f.write(np.clip(np.round(plane), 0, 255).astype(np.uint8).tobytes())
    return Path(path)
