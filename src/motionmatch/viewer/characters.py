"""Characters of a viewer session: motion-matching characters and clip players.

:class:`MMCharacter` is an agent of the session's :class:`~motionmatch.runtime.world.World`
with what the page needs: the keys held (fed with real key down/up events), a drawn path
(:class:`~motionmatch.runtime.follow.PathFollower` on the agent's own controller, so the
switch is seamless), or another input (crowd steering, pose commands, a scenario's) drives
it; the debug panel reads the controller's last query for the next-best candidates.

:class:`ClipCharacter` plays a fixed motion in a loop (GenMM variants).

Both record what they show for BVH export (:class:`Recorder`).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from motionmatch.anim import Motion, quat
from motionmatch.anim.humanoid import carrier_joints
from motionmatch.anim.skeleton import Skeleton
from motionmatch.control.keyboard import KeyboardController, normalize_key
from motionmatch.control.path import TimedPath
from motionmatch.database import MotionDatabase
from motionmatch.runtime.controller import Controller, ControllerSettings, FrameResult
from motionmatch.runtime.inputs import IdleInput, KeyboardInput
from motionmatch.viewer.protocol import CF_CLIP, CF_FOLLOWING, CF_SEARCHED, CF_TRANSITIONED, CharacterPose, pose_scale

__all__ = ["ClipCharacter", "MMCharacter", "Recorder", "recorded_motion", "skeleton_info"]


def skeleton_info(skel: Skeleton, feet: tuple[int, ...], *, ground_root: bool, height: float | None = None,
                  body: str | None = None) -> dict:
    """What the page needs to draw a skeleton: names, parents, feet, bone radius, the
    bones not to draw (those from the joints that only carry the character over the ground,
    :func:`~motionmatch.anim.humanoid.carrier_joints`, to the hips), and the URL
    of its body (skinned mesh, :mod:`motionmatch.viewer.body`; ``None``: stick figure)."""
    off = np.asarray(skel.offsets, dtype=np.float64)
    carriers = set(carrier_joints(skel)) | ({0} if ground_root else set())
    hidden = [j for j in range(1, skel.num_joints) if int(skel.parents[j]) in carriers]
    if height is None:
        # longest chain of the body's bones, a fair proxy of the character's size (not the
        # offsets from the joints that only carry it: a file's hips offset may be where the
        # take starts, metres away)
        depth = np.zeros(skel.num_joints)
        for j in range(1, skel.num_joints):
            carried = int(skel.parents[j]) in carriers
            depth[j] = depth[skel.parents[j]] + (0.0 if carried else float(np.linalg.norm(off[j])))
        height = float(depth.max()) or 1.0
    return {
        "names": list(skel.names),
        "parents": [int(p) for p in skel.parents],
        "feet": [int(f) for f in feet],
        "hidden": hidden,
        "ground_root": bool(ground_root),
        "radius": round(max(0.012, 0.028 * height / 1.7), 4),
        "height": round(float(height), 3),
        "body": body,
    }


# ----------------------------------------------------------------------------- recording
class Recorder:
    """The last ``max_frames`` frames of a character's local pose, in chunks.

    Keeps rotations ``[J, 4]`` (float32) and the translations of the joints in
    ``moving`` (the root and joints with position channels) so that a long session costs
    about 400 bytes per frame for a 23-joint character.
    """

    def __init__(self, joints: int, moving: np.ndarray, max_frames: int, chunk: int = 600):
        self.J = int(joints)
        self.moving = np.asarray(moving, dtype=np.int64)
        self.max_frames = max(int(max_frames), 1)
        self.chunk = int(chunk)
        self._chunks: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self._fill = self.chunk  # the last chunk is full: the next add opens one
        self.dropped = 0

    def add(self, rotations: np.ndarray, translations: np.ndarray) -> None:
        if self._fill == self.chunk:
            self._chunks.append((np.empty((self.chunk, self.J, 4), np.float32),
                                 np.empty((self.chunk, len(self.moving), 3), np.float32)))
            self._fill = 0
            while len(self._chunks) > 1 and (len(self._chunks) - 1) * self.chunk >= self.max_frames + self.chunk:
                self._chunks.popleft()
                self.dropped += self.chunk
        r, t = self._chunks[-1]
        r[self._fill] = rotations
        t[self._fill] = translations[self.moving]
        self._fill += 1

    @property
    def frames(self) -> int:
        return 0 if not self._chunks else (len(self._chunks) - 1) * self.chunk + self._fill

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(rotations [F, J, 4], moving translations [F, M, 3])`` (float64), oldest first,
        at most ``max_frames``."""
        if not self._chunks:
            return np.zeros((0, self.J, 4)), np.zeros((0, len(self.moving), 3))
        rs = [c[0] for c in self._chunks]
        ts = [c[1] for c in self._chunks]
        rs[-1], ts[-1] = rs[-1][: self._fill], ts[-1][: self._fill]
        r = np.concatenate(rs).astype(np.float64)[-self.max_frames:]
        t = np.concatenate(ts).astype(np.float64)[-self.max_frames:]
        return r, t

    def motion(self, skeleton: Skeleton, fps: float, name: str, file_scale: float = 1.0) -> Motion:
        r, tm = self.arrays()
        return recorded_motion(skeleton, self.moving, r, tm, fps, name, file_scale)


def recorded_motion(skeleton: Skeleton, moving: np.ndarray, rotations: np.ndarray, moving_translations: np.ndarray,
                    fps: float, name: str, file_scale: float = 1.0) -> Motion:
    """A :class:`Motion` from recorded rotations ``[F, J, 4]`` and the translations of the
    ``moving`` joints ``[F, M, 3]`` (the other joints keep the skeleton's offsets)."""
    F = len(rotations)
    if F == 0:
        raise ValueError("nothing recorded yet")
    trs = np.broadcast_to(skeleton.offsets, (F, skeleton.num_joints, 3)).copy()
    trs[:, moving] = moving_translations
    rots = quat.unroll(quat.normalize(rotations), axis=0)
    return Motion(skeleton, rots, trs, fps, name=name, file_scale=file_scale)


class MMCharacter:
    """A motion-matching character of a viewer session: an agent of the session's
    :class:`~motionmatch.runtime.world.World`, with what the page needs around it.

    Its input (:attr:`agent` ``.source``) is its default one (the keys held, :attr:`keys`,
    a :class:`~motionmatch.runtime.inputs.KeyboardInput`, bent around obstacles; a
    scenario agent's own input) unless something else drives it:
    a drawn path (:meth:`start_path`: the runtime's
    :class:`~motionmatch.runtime.follow.PathFollower`, on this agent's own controller),
    crowd steering, pose commands or a scenario's input (:meth:`drive`).

    Args:
        cid, name: the page's id and name.
        agent: its agent in the session's world.
        record_frames: frames kept for export.
        db_root_yaw: ``[N]`` the database's root headings (shared by the session).
        extent: the characters' size (m) for the page.
    """

    kind = "mm"

    def __init__(self, cid: int, name: str, agent, *, skeleton_id: int = 0, record_frames: int = 7200,
                 db_root_yaw: np.ndarray | None = None, extent: float | None = None, camera_yaw: float = 0.0,
                 keys: KeyboardInput | None = None):
        self.id = int(cid)
        self.name = name
        self.agent = agent
        self.ctrl: Controller = agent.ctrl
        self.db: MotionDatabase = agent.ctrl.db
        db = self.db
        self.skeleton_id = skeleton_id
        self.settings: ControllerSettings = agent.ctrl.s
        self.keys = keys or KeyboardInput(self.ctrl.gaits, camera_yaw)
        if isinstance(agent.source, IdleInput):
            agent.source = self.keys
        #: the input it returns to when a path ends or another input lets go
        self.default_input = agent.source
        self.follower = None
        self.follow_info: dict | None = None
        self._before_path = None  # the input a drawn path took over from
        #: ``False``: a plain motion-matching character (it ignores obstacles but is still
        #: one for the others; scenario ``environment: false``)
        self.environment = agent.chooser is None or agent.chooser.settings.enabled
        self.controls = {"responsiveness": 1.0, "continuity": 1.0, "evasion": 1.0, "anticipation": 1.0}
        if agent.chooser is not None:
            c = agent.chooser.controls
            self.controls = {k: float(getattr(c, k)) for k in self.controls}
        skel = db.skeleton
        self.parents = np.asarray(skel.parents, dtype=np.int64)
        moving = np.flatnonzero(np.asarray(skel.has_position_channels)).tolist()
        if 0 not in moving:
            moving = [0, *moving]
        self.recorder = Recorder(skel.num_joints, np.asarray(sorted(moving)), record_frames)
        self.positions = np.zeros((skel.num_joints, 3))
        self.rotations = np.zeros((skel.num_joints, 4))
        self.rotations[:, 0] = 1.0
        self.last: FrameResult | None = None
        self.scale = pose_scale(extent if extent is not None else _db_extent(db))
        self._db_root_yaw = db_root_yaw if db_root_yaw is not None else quat.yaw_angle(
            db.rotations[:, 0].astype(np.float64))
        self.events: list[dict] = []  # for the session: e.g. path finished
        self.announced_arrival = None  # the steering whose arrival the page was told of

    # ------------------------------------------------------------------ input
    @property
    def kb(self) -> KeyboardController:
        return self.keys.keyboard

    @property
    def held(self) -> set[str]:
        return self.keys.held

    def drive(self, source) -> None:
        """Let ``source`` (an :class:`~motionmatch.runtime.inputs.InputSource`) drive this
        character (``None``: the keys again); a drawn path being followed is cancelled."""
        self.cancel_path("input changed")
        self.agent.source = source if source is not None else self.default_input

    def set_key(self, key: str, down: bool) -> None:
        if down and self.follower is not None and normalize_key(key) in ("w", "a", "s", "d"):
            self.cancel_path("keyboard")
        self.keys.set_key(key, down)

    def set_keys(self, keys) -> None:
        ks = {normalize_key(k) for k in keys}
        if self.follower is not None and ks & {"w", "a", "s", "d"}:
            self.cancel_path("keyboard")
        self.keys.set_keys(ks)

    def set_sticks(self, left, right=(0.0, 0.0), sprint: bool = False) -> None:
        """The gamepad's sticks (:meth:`KeyboardInput.set_sticks`); the left one off its
        rest takes over from a path, as a movement key does."""
        if self.follower is not None and math.hypot(*left) > 0.15:
            self.cancel_path("keyboard")
        self.keys.set_sticks(left, right, sprint)

    def start_drawn(self, xz: np.ndarray, *, loop: bool | None = None) -> dict:
        """Follow a drawing as the ETH paper does (:class:`~motionmatch.runtime.drawn.
        DrawnPathInput`): straight to its nearest point, along it at the walking speed
        (Shift held: running), round again when it is closed (or ``loop``); a movement key
        takes over. ``xz [P, 2]`` metres; the drawing's timing is not used."""
        from motionmatch.control.path_steering import SteerSettings
        from motionmatch.runtime.drawn import DrawnPathInput

        before = self.agent.source if self.follower is None else self._before_path
        src = DrawnPathInput(np.asarray(xz, dtype=np.float64), SteerSettings(loop=loop), gaits=self.ctrl.gaits,
                             keys=self.keys)
        self.keys.held.clear()
        self._before_path = before
        self.follower = src
        self.agent.source = src
        d = src.drawing
        n = len(d.points)
        pts = d.points[np.unique(np.append(np.arange(0, n, max(1, n // 400)), n - 1))]
        speed = src.speed(self.ctrl.gaits)
        self.follow_info = {
            "id": self.id, "mode": "drawn", "points": np.round(pts, 3).tolist(),
            "speeds": [round(speed, 2)] * len(pts), "v_max": round(speed, 2),
            "duration": round(d.length / speed, 2), "length": round(d.length, 2),
            "closed": d.closed, "loops": d.loops,
        }
        return self.follow_info

    def start_path(self, times: np.ndarray, xz: np.ndarray, *, mode: str = "local", scale: float = 1.0,
                   levels: int = 3, k: int = 3, world=None, facing: str = "tangent", joystick_deg: float = 0.0,
                   facing_net=None) -> dict:
        """Follow a drawn path (times in drawing seconds, ``xz [R, 2]`` metres) with the
        runtime's path follower (LHMM(k, levels) and revised queries; among obstacles every
        node with their penalties), from where the character stands, facing as ``facing``
        says (``"tangent"``, ``"joystick"``: the tangent turned ``joystick_deg`` degrees
        right, or ``"net"``: DirectionNet ``facing_net``)."""
        from motionmatch.control.revision import RevisionSettings
        from motionmatch.runtime.follow import FollowSettings, PathFollower

        path = TimedPath.from_samples(times, np.asarray(xz, dtype=np.float64), rate=150.0, scale=scale)
        rev = RevisionSettings(facing=facing, joystick_deg=float(joystick_deg) if facing == "joystick" else 0.0)
        fs = FollowSettings(mode=mode, k=k, levels=levels, time_limit=None,  # revised once per match, as the CLI
                            revision=rev)
        ctrl = self.ctrl
        before = self.agent.source if self.follower is None else self._before_path
        scene = world.scene if world is not None and self.environment else None
        follower = PathFollower(self.db, path, fs, position=ctrl.root_pos.copy(),
                                facing=np.array([math.sin(ctrl.root_yaw), 0.0, math.cos(ctrl.root_yaw)]),
                                scene=scene, environment=world.matcher if scene is not None else None,
                                environment_settings=world.settings if world is not None else None,
                                world=world, agent=self.agent, facing_net=facing_net,
                                controls=self.agent.chooser.controls if self.agent.chooser is not None else None)
        self._before_path = before
        self.follower = follower
        self.keys.held.clear()
        p = follower.path
        step = max(1, round(p.fps / 20))
        idx = np.unique(np.append(np.arange(0, p.num_samples, step), p.last))
        sp = np.minimum(p.speeds[idx], follower.v_max)
        sp[-1] = sp[-2] if len(sp) > 1 else sp[-1]
        self.follow_info = {
            "id": self.id, "mode": mode, "facing": facing,
            "points": np.round(p.points[idx][:, [0, 2]], 3).tolist(),
            "speeds": np.round(sp, 2).tolist(),
            "v_max": round(float(follower.v_max), 2),
            "duration": round(float(p.duration), 2), "length": round(float(p.length), 2),
        }
        return self.follow_info

    def cancel_path(self, reason: str = "cancelled") -> None:
        if self.follower is None:
            return
        self.follower = None
        self.follow_info = None
        self.agent.source = self._before_path if self._before_path is not None else self.default_input
        self._before_path = None
        # the simulated root restarts from the character, so the keyboard takes over smoothly
        self.ctrl.predictor.reset(self.ctrl.root_pos, facing=np.array(
            [math.sin(self.ctrl.root_yaw), 0.0, math.cos(self.ctrl.root_yaw)]))
        self.events.append({"type": "path_done", "id": self.id, "reason": reason})

    def set_controls(self, **values) -> None:
        """High-level controls (Responsiveness, Continuity, Evasion, Anticipation): the
        weights of this character's searches from its next search on (no database copy)."""
        from motionmatch.runtime.environment_matching import Controls

        for k, v in values.items():
            if v is not None:
                self.controls[k] = float(v)
        self.agent.set_controls(Controls(**self.controls))

    # ------------------------------------------------------------------ stepping
    @property
    def root_xz(self) -> tuple[float, float]:
        return float(self.ctrl.root_pos[0]), float(self.ctrl.root_pos[2])

    def after_step(self) -> None:
        """Take the world step's frame (positions for the page; a finished path ends)."""
        r = self.agent.result
        if r is None:
            return
        self.last = r
        self.positions, self.rotations = self.agent.world_pose()  # (views of the step's, read-only)
        f = self.follower
        if f is not None and f.done:
            self.cancel_path("completed" if getattr(f, "completion_time", 0.0) is not None else "time limit")

    def record(self) -> None:
        """Keep this tick's pose for BVH export (every tick, also when not updated)."""
        if self.last is not None:
            self.recorder.add(self.last.rotations, self.last.translations)

    def pose(self, selected: bool) -> CharacterPose:
        r = self.last
        flags = 0
        mode = "idle"
        contacts = 0
        if r is not None:
            flags |= CF_SEARCHED if r.searched else 0
            flags |= CF_TRANSITIONED if r.transitioned else 0
            mode = r.mode
            for i, c in enumerate(r.contacts[:8]):
                if c:
                    contacts |= 1 << i
        if self.follower is not None:
            flags |= CF_FOLLOWING
        if selected:
            flags |= 4
        return CharacterPose(self.id, self.positions, self.rotations, float(self.ctrl.root_yaw), self.scale, mode,
                             flags, contacts)

    def describe(self) -> dict:
        return {"id": self.id, "name": self.name, "kind": self.kind, "skeleton": self.skeleton_id,
                "controls": dict(self.controls), "following": self.follower is not None,
                "speed": round(float(self.kb.target_speed), 2)}

    def motion(self, fps: float) -> Motion:
        return self.recorder.motion(self.db.skeleton, fps, self.name, self.db.file_scale)

    # ------------------------------------------------------------------ debug
    def matched_future(self) -> tuple[np.ndarray, np.ndarray]:
        """World positions ``[K, 3]`` and facings ``[K, 3]`` the playing clip will reach at
        the schema's trajectory offsets (the matched future, as the character will walk it)."""
        db, ctrl = self.db, self.ctrl
        f = int(ctrl.frame)
        last = int(db.clip_stops[db.frame_clip[f]] - 1)
        offs = np.asarray(db.schema.trajectory_offsets, dtype=np.float64)
        fut = np.minimum(f + np.round(offs * db.fps).astype(np.int64), last)
        p0 = db.translations[f, 0].astype(np.float64)
        y0 = float(self._db_root_yaw[f])
        d = db.translations[fut, 0].astype(np.float64) - p0
        turn = ctrl.root_yaw - y0
        c, s = math.cos(turn), math.sin(turn)
        pos = np.stack([ctrl.root_pos[0] + c * d[:, 0] + s * d[:, 2], np.zeros(len(fut)),
                        ctrl.root_pos[2] - s * d[:, 0] + c * d[:, 2]], axis=1)
        yaw = self._db_root_yaw[fut] + turn
        dirs = np.stack([np.sin(yaw), np.zeros(len(fut)), np.cos(yaw)], axis=1)
        return pos, dirs

    def candidates(self, k: int) -> list[dict]:
        """The ``k`` nearest frames to the last search's query, with their group costs."""
        if self.ctrl.last_query is None or k <= 0:
            return []
        q, mask, view = self.ctrl.last_query
        idx, cost = self.ctrl.searcher().nearest(q, mask=mask, k=k, weights=self.ctrl.view_weights(view))
        db = self.db
        out = []
        for i, c in zip(np.asarray(idx).reshape(-1), np.asarray(cost).reshape(-1)):
            i = int(i)
            if i < 0:
                continue
            clip = int(db.frame_clip[i])
            out.append({"frame": i, "clip": db.clip_names[clip], "clip_frame": i - int(db.clip_starts[clip]),
                        "cost": round(float(c), 4),
                        "groups": {g: round(v, 4) for g, v in db.group_costs(q, i).items()}})
        return out


def _db_extent(db: MotionDatabase) -> float:
    """Largest distance of a body joint from the root over a sample of database frames
    (joints that only carry the character, :func:`~motionmatch.anim.humanoid.carrier_joints`,
    left out: a file's ground root may stay where the take began, metres away)."""
    from motionmatch.anim.kinematics import forward_kinematics

    n = db.num_frames
    idx = np.linspace(0, n - 1, min(n, 200)).astype(np.int64)
    wp, _ = forward_kinematics(db.skeleton.parents, db.rotations[idx].astype(np.float64),
                               db.translations[idx].astype(np.float64))
    body = np.ones(db.skeleton.num_joints, dtype=bool)
    body[list(carrier_joints(db.skeleton))] = False
    return float(np.max(np.linalg.norm(wp[:, body] - wp[:, :1], axis=-1)))


class ClipCharacter:
    """Plays a motion in a loop at a place on the ground (GenMM variants side by side)."""

    kind = "clip"

    def __init__(self, cid: int, name: str, motion: Motion, *, skeleton_id: int, place=(0.0, 0.0),
                 contacts: np.ndarray | None = None, loop_frames: int | None = None, meta: dict | None = None):
        self.id = int(cid)
        self.name = name
        self.motion = motion
        self.skeleton_id = skeleton_id
        wp = motion.world_positions.astype(np.float64)
        shift = np.array([place[0] - wp[0, 0, 0], 0.0, place[1] - wp[0, 0, 2]])
        self.track = wp + shift
        wr = motion.world_rotations
        self.track_rotations = wr.astype(np.float32)
        self.yaws = quat.yaw_angle(wr[:, 0])
        self.contacts = contacts
        self.fps = motion.fps
        self.F = motion.num_frames if loop_frames is None else int(loop_frames)
        self.t = 0.0
        self.frame = 0
        self.scale = pose_scale(float(np.max(np.linalg.norm(wp - wp[:, :1], axis=-1))))
        self.meta = meta or {}
        self.controls: dict = {}
        self.events: list[dict] = []

    @property
    def root_xz(self) -> tuple[float, float]:
        p = self.track[self.frame, 0]
        return float(p[0]), float(p[2])

    def step(self, dt: float) -> None:
        self.t += dt
        self.frame = int(self.t * self.fps) % max(self.F, 1)

    def record(self) -> None:
        pass

    def pose(self, selected: bool) -> CharacterPose:
        bits = 0
        if self.contacts is not None and len(self.contacts):
            for i, c in enumerate(self.contacts[min(self.frame, len(self.contacts) - 1)][:8]):
                if c:
                    bits |= 1 << i
        return CharacterPose(self.id, self.track[self.frame], self.track_rotations[self.frame],
                             float(self.yaws[self.frame]), self.scale, "clip",
                             CF_CLIP | (4 if selected else 0), bits)

    def describe(self) -> dict:
        return {"id": self.id, "name": self.name, "kind": self.kind, "skeleton": self.skeleton_id,
                "frames": int(self.F), "fps": float(self.fps), **self.meta}

    def motion_for_export(self) -> Motion:
        return self.motion
