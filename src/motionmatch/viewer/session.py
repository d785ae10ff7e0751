"""One browser tab's simulation: a fixed 60 Hz loop on its own thread.

A :class:`Session` is a :class:`~motionmatch.runtime.world.World` plus the message layer:
its motion-matching characters are the world's agents (keys, drawn paths, crowd steering,
pose commands and scenario inputs are their inputs), the page's obstacles the world's
scene; a loaded scenario file becomes the session's world exactly as ``motionmatch
scenario`` builds it. Clip players (GenMM variants) sit beside the world.

The server hands it the page's raw messages (:meth:`Session.receive`, into a bounded
:class:`~motionmatch.viewer.inbox.Inbox` that charges the tab for their cost); the loop
parses, validates and applies them at the start of a tick, in order (up to half a tick
of them), then advances every character by exactly 1/60 s (unless paused),
encodes one binary pose frame and sends it, with JSON replies and events, through the
``send`` callback (thread-safe; the server coalesces pose frames a slow page cannot
take). Heavy work (GenMM synthesis, BVH and glTF export) runs on the viewer's worker pool
(:mod:`motionmatch.viewer.jobs`: one of each kind per client, stopped when the tab closes)
and comes back through the inbox, so the loop never stalls on it.

Timing: the loop sleeps until the next tick's deadline; when a tick runs late the next
ones follow without sleeping until it has caught up (the simulated time stays locked to
the wall clock), and a backlog beyond 0.25 s is dropped and counted. ``stats`` messages
report the achieved tick rate and the step cost once a second.

Scrubbing: the last ``history_frames`` encoded frames are kept; while paused the page can
look back through them (``scrub``). It is a view of the past; the simulation goes on from
the present when resumed.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from motionmatch.control.intent import Intent
from motionmatch.control.keyboard import KEYS
from motionmatch.errors import MotionMatchError
from motionmatch.runtime.controller import ControllerSettings
from motionmatch.runtime.crowd import SteeringInput, SteeringSettings
from motionmatch.runtime.inputs import AroundObstacles, KeyboardInput
from motionmatch.runtime.world import World
from motionmatch.viewer.body import database_sample
from motionmatch.viewer.characters import ClipCharacter, MMCharacter, skeleton_info
from motionmatch.viewer.data import DataError
from motionmatch.viewer.database_modes import MODE_KEYS, database_modes
from motionmatch.viewer.environment import environment_debug, scene_from_viewer, shared_matcher
from motionmatch.viewer.inbox import Inbox
from motionmatch.viewer.jobs import TabJobs
from motionmatch.viewer.messages import Limits, MessageError
from motionmatch.viewer.pose import ViewerPoseSource
from motionmatch.viewer.protocol import FLAG_PARTIAL, FLAG_PAUSED, PROTOCOL_VERSION, encode_frame, with_history_flags
from motionmatch.viewer.session_common import DT, TICK_HZ, Rejected
from motionmatch.viewer.session_files import FileMessages
from motionmatch.viewer.session_input import InputMessages
from motionmatch.viewer.session_rig import RigMessages
from motionmatch.viewer.session_scene import SceneMessages
from motionmatch.viewer.terrain import terrain_drawing

__all__ = ["DT", "TICK_HZ", "Rejected", "Session", "database_modes"]

#: requests that use the kernels of the warm-up's ``environment`` stage (paths, obstacles,
#: other characters, crowds, scenarios)
NEEDS_ENVIRONMENT = frozenset({"path", "obstacle_add", "obstacle_update", "scene_set", "scenario_load", "spawn_group",
                               "add_character", "terrain_set"})
#: the page's view (see Session._in_view): characters farther than this (m) outside the
#: ground the camera sees are sent every OFF_VIEW_EVERY-th tick (10 Hz) instead of every tick
VIEW_MARGIN = 2.0
OFF_VIEW_EVERY = 6


def ground_distance(polygon: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``[N]`` how far (m) each ground point ``points [N, 2]`` lies outside the convex
    ``polygon [P, 2]`` (vertices in order, either turn): the largest of its signed
    distances to the edges' lines (``<= 0`` inside; a bound of the true distance near a
    vertex). A degenerate polygon (no area) is everything: ``-inf``."""
    p = np.asarray(polygon, dtype=np.float64)
    a, b = p, np.roll(p, -1, axis=0)
    area2 = float(np.sum(a[:, 0] * b[:, 1] - b[:, 0] * a[:, 1]))
    if abs(area2) < 1e-9:
        return np.full(len(points), -np.inf)
    e = b - a
    length = np.hypot(e[:, 0], e[:, 1])
    ok = length > 1e-9
    a, e, length = a[ok], e[ok], length[ok]
    d = points[:, None, :] - a[None]
    # cross(e, d) > 0: left of the edge; inside a counter-clockwise polygon is left of every edge
    cross = e[None, :, 0] * d[..., 1] - e[None, :, 1] * d[..., 0]
    outside = -np.sign(area2) * cross / length[None]
    return outside.max(axis=1)


#: requests carried out at once even while others are held
NEVER_HELD = frozenset({"hello", "key", "keys", "camera", "view", "files", "pose_keypoints", "debug", "_warmup_ready",
                        "_genmm_done"})


#: Which panels of the page work (every capability ships with the viewer).
CAPABILITIES = {"keyboard": True, "path": True, "genmm": True, "obstacles_edit": True, "environment": True,
                "crowd": True, "pose": True, "scenario": True}


def _direction_net():
    """The default DirectionNet if this machine has trained it (a path's ``"net"`` facing);
    the viewer does not train it (minutes): :class:`Rejected` says how to."""
    from motionmatch.control.direction_cache import cached_direction_net
    from motionmatch.errors import MotionMatchError

    try:
        net = cached_direction_net()
    except MotionMatchError as e:
        raise Rejected(f"network facing: {e}") from None
    if net is None:
        raise Rejected("network facing: DirectionNet is not trained on this machine yet; run "
                       "'motionmatch follow --facing net ...' once (it trains and caches it, a few minutes; needs "
                       "PyTorch), or choose tangent or joystick facing")
    return net

class Session(SceneMessages, FileMessages, RigMessages, InputMessages):
    """The simulation of one page (see the module doc).

    Args:
        viewer: the shared :class:`~motionmatch.viewer.server.Viewer` (database, data
            folders, limits, worker pool, downloads).
        send: called from the loop's thread with a ``dict`` (JSON) or ``bytes`` (pose frame).
        holds: hold requests while the viewer's warm-up prepares their kernels (see
            :meth:`handle`); the warm-up's own scripted sessions do not.
        client: who the page is (its address): its jobs count with its other tabs'.
    """

    def __init__(self, viewer, send: Callable[[Any], None], *, holds: bool = True, client: str = "local"):
        self.viewer = viewer
        self.holds = holds
        self.id = secrets.token_hex(6)
        self.send = send
        self.db = viewer.db
        self.limits: Limits = viewer.limits
        #: which modes the database can play (see :func:`database_modes`)
        self.modes = database_modes(viewer.db)
        db = self.db
        from motionmatch.anim import quat

        self._db_root_yaw = quat.yaw_angle(db.rotations[:, 0].astype(np.float64))
        from motionmatch.viewer.characters import _db_extent

        self.skeletons: dict[int, dict] = {0: skeleton_info(db.skeleton, tuple(db.foot_joints), ground_root=True,
                                                            height=viewer.db_extent or _db_extent(db),
                                                            body=viewer.bodies.register(database_sample(db)))}
        self._next_skeleton = 1
        self.chars: dict[int, MMCharacter | ClipCharacter] = {}
        self._next_id = 1
        self.selected: int | None = None
        self.obstacles: dict[int, dict] = {}
        self._next_obstacle = 1
        #: the ground (None: the flat floor), kept on the world's scene and drawn by the page
        self.terrain = None
        self.paused = False
        self.tick = 0
        self.time = 0.0
        self.history: deque[bytes] = deque(maxlen=max(int(viewer.history_seconds * TICK_HZ), 1))
        self.scrub_back = 0
        self.debug_enabled = False
        self.debug_k = 5
        self._debug_cache: tuple[int, int, list] | None = None
        self.camera_yaw = 0.0
        self.inbox = Inbox(viewer.limits)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"viewer-session-{self.id}", daemon=True)
        self.jobs = TabJobs(viewer.pool, viewer.client_jobs, client)
        viewer.downloads.open_session(self.id)
        #: the simulation: every motion-matching character is an agent of this world, which
        #: owns the obstacles and the environment-aware searches (replaced by a scenario's)
        self.world = self._free_world()
        self.scene_ids: list[int] = []  # the page id of each obstacle of the world's scene
        self.steering = SteeringSettings()  # spawned groups' crowd steering
        self.pose_source = None
        self._pose_status_at = 0
        self._tick_max = 0.0  # the longest whole tick (messages, step, sending) since the last stats
        #: requests held while the viewer's warm-up prepares the kernels they need
        self._held: deque[dict] = deque()
        self._released = 0
        #: the loaded scenario: name, t0 (session time at its start), duration (s), ended
        self.scenario: dict | None = None
        # stats
        self.bytes_sent = 0
        self.frames_sent = 0
        self._step_times: list[float] = []
        self._tick_stamps: deque[float] = deque(maxlen=TICK_HZ + 1)
        self._stagger_ids: list[int] = []  # spawned together: spread their periodic searches
        #: the ground the page's camera sees, a convex polygon ``[P, 2]`` (m; None: all of it): see _in_view
        self.view: np.ndarray | None = None
        self.poses_sent = 0  # character blocks sent in pose frames
        self.late_ticks = 0
        self.dropped_ticks = 0
        self.divisor = 1  # background characters are updated every divisor-th tick (see step)
        self._cost_ema: float | None = None
        self._adapt_after = 0
        self._last_stats = (time.perf_counter(), 0)
        self.upload_key = secrets.token_urlsafe(18)  # what a rig upload for this tab carries (session_rig)
        if viewer.rig is not None:  # `motionmatch viewer --rig RIG`
            self.use_rig(viewer.rig, announce=False)
        self.add_mm_character("hero", (0.0, 0.0), (0.0, 1.0), select=True, announce=False)

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        self.thread.start()

    def submit(self, msg: dict) -> None:
        """Queue a validated message (the server's own) for the next tick."""
        self.inbox.put(msg)

    def receive(self, raw: str | bytes) -> None:
        """Queue a raw message from the page (see :meth:`Inbox.offer`: raises ``MessageError``)."""
        self.inbox.offer(raw)

    def close(self, timeout: float = 2.0) -> None:
        """The tab closed: stop the loop (between two messages), cancel the jobs, drop the downloads."""
        self._stop.set()
        self.inbox.close()
        self.jobs.cancel()
        self.viewer.downloads.close_session(self.id)
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def _warn(self, text: str) -> None:
        self.send({"type": "warning", "message": text})

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        self.send(self.welcome())
        self._emit_pose(stepped=False)
        next_t = time.perf_counter()
        self._next_stats = next_t + 1.0
        while not self._stop.is_set():
            now = time.perf_counter()
            if next_t > now and self._stop.wait(next_t - now):
                break
            t_tick = time.perf_counter()
            self._drain_inbox()
            stepped = False
            if not self.paused:
                t0 = time.perf_counter()
                try:
                    self.step()
                    stepped = True
                except Exception as e:  # a bug must not kill the tab's session: pause and say why
                    self.paused = True
                    traceback.print_exc()
                    self.send({"type": "error", "code": "internal", "message": f"simulation error: {e!r}; paused"})
                    self.send(self.time_state())
                self._step_times.append(time.perf_counter() - t0)
            self._tick_stamps.append(time.perf_counter())
            if stepped:
                self._emit_pose(stepped=True)
                self._emit_events()
                if self.debug_enabled and self.tick % 6 == 0:
                    self._emit_debug()
                if self.pose_source is not None and self.tick >= self._pose_status_at:
                    self._emit_pose_status()
            self._tick_max = max(self._tick_max, time.perf_counter() - t_tick)
            if time.perf_counter() >= self._next_stats:
                self._next_stats = max(self._next_stats + 1.0, time.perf_counter() + 0.5)
                self._emit_stats()
            next_t += DT
            behind = time.perf_counter() - next_t
            if behind > DT:
                self.late_ticks += 1
            if behind > 0.25:
                self.dropped_ticks += int(behind / DT)
                next_t = time.perf_counter()

    def step(self, dt: float = DT) -> None:
        """Advance every character by ``dt`` (the loop's tick; ``step`` messages too).

        Level of detail: when the tick's cost nears its budget (many agents), the
        motion-matching characters other than the selected one are updated every
        ``self.divisor``-th tick, staggered, each with the time it is owed, so the session
        keeps 60 ticks per second and the selected character its 60 updates; every
        character's pose is still sent (and recorded) every tick."""
        t0 = time.perf_counter()
        div = self.divisor
        skip = set()
        if div > 1:
            k = 0
            for cid, ch in self.chars.items():
                if isinstance(ch, MMCharacter) and cid != self.selected:
                    k += 1
                    if (self.tick + k) % div != 0:
                        skip.add(ch.agent.uid)
        self.world.step(dt, frozenset(skip))
        for ch in self.chars.values():
            if isinstance(ch, MMCharacter):
                if ch.agent.uid not in skip:
                    ch.after_step()
                    self._arrivals(ch)
                ch.record()
            else:
                ch.step(dt)
        if self._stagger_ids:
            self._stagger_searches()
        self.tick += 1
        self.time += dt
        self.scrub_back = 0
        self._adapt(time.perf_counter() - t0)
        if self.scenario is not None:
            self._check_scenario_end()

    def _arrivals(self, ch: MMCharacter) -> None:
        """An ``arrived`` event, once, when a steered character reaches its goal."""
        src = ch.agent.source
        if isinstance(src, SteeringInput) and src.arrived and ch.announced_arrival is not src:
            ch.announced_arrival = src
            ch.events.append({"type": "arrived", "id": ch.id, "goal": [round(float(x), 3) for x in src.targets[-1]]})

    def _stagger_searches(self) -> None:
        """Spread the periodic searches of characters spawned together over the search
        interval. Their first intents are sharp changes, so they all search on the same
        tick (a burst of up to 50 searches); afterwards member ``k`` waits ``k mod n``
        extra ticks once, ``n`` being the interval in ticks."""
        for k, cid in enumerate(self._stagger_ids):
            ch = self.chars.get(cid)
            if isinstance(ch, MMCharacter):
                n = max(1, round(ch.ctrl.s.search_interval * TICK_HZ))
                ch.ctrl.since_search = min(ch.ctrl.since_search, 0.0) - (k % n) / TICK_HZ
        self._stagger_ids.clear()

    def _adapt(self, seconds: float) -> None:
        """Choose how often background characters are updated from the recent tick cost."""
        a = 0.1
        self._cost_ema = seconds if self._cost_ema is None else (1 - a) * self._cost_ema + a * seconds
        if not self.viewer.adaptive_rate or self.tick < self._adapt_after:
            return
        budget = DT
        if self._cost_ema > 0.6 * budget and self.divisor < self.viewer.max_divisor:
            self.divisor += 1
            self._adapt_after = self.tick + 30
        elif self.divisor > 1 and self._cost_ema * self.divisor / (self.divisor - 1) < 0.4 * budget:
            self.divisor -= 1
            self._adapt_after = self.tick + 60

    def _drain_inbox(self) -> None:
        if self._held and not self.viewer.waiting_for("environment"):
            self._release_one()
        self.inbox.drain(self.handle, self._refuse, self.limits.tick_share * DT)

    def _refuse(self, e: MessageError) -> None:
        self.send({"type": "error", "code": e.code, "message": str(e), "seq": e.seq})

    def handle(self, msg: dict) -> None:
        """Carry out one message; a refusal is answered with an error, never raised.

        While the viewer's warm-up still prepares the kernels of paths, obstacles and
        crowds, a request that needs them is held (with every later request but keys and
        the camera, to keep their order) and carried out when they are ready; the page is
        told with a ``warmup`` message."""
        kind = msg["type"]
        if (self._held and kind not in NEVER_HELD) or (self.holds and kind in NEEDS_ENVIRONMENT
                                                         and self.viewer.waiting_for("environment")):
            self._held.append(msg)
            self.send({"type": "warmup", **self._warmup_status()})
            return
        self._dispatch(msg)

    def _release_one(self) -> None:
        """Carry out the oldest held request (one a tick: a burst of them, a scenario and a
        crowd say, would make one long tick)."""
        self._dispatch(self._held.popleft())
        self._released += 1
        if not self._held:
            self.send({"type": "warmup", **self._warmup_status(), "released": self._released})
            self._released = 0

    def _dispatch(self, msg: dict) -> None:
        kind = msg["type"]
        seq = msg.get("seq")
        try:
            handler = getattr(self, "_on_" + kind.lstrip("_"))
            reply = handler(msg)
            if seq is not None:
                self.send({"type": "ack", "seq": seq, "for": kind, **(reply or {})})
        except (Rejected, DataError, MessageError, ValueError, KeyError, MotionMatchError) as e:
            text = str(e) if not isinstance(e, KeyError) else f"unknown {e.args[0]}"
            self.send({"type": "error", "code": "rejected", "for": kind, "message": text, "seq": seq})
        except Exception as e:  # pragma: no cover - a bug in a handler
            traceback.print_exc()
            self.send({"type": "error", "code": "internal", "for": kind, "message": repr(e), "seq": seq})

    # ------------------------------------------------------------------ output
    def poses(self):
        return self._rig_poses([ch.pose(cid == self.selected) for cid, ch in self.chars.items()])

    def _in_view(self) -> list[bool] | None:
        """Per character (in ``self.chars`` order): whether this tick's frame carries it. With
        a view from the page (running, not paused): the selected character and those within
        ``VIEW_MARGIN`` of the ground the camera sees, every tick; the others every
        ``OFF_VIEW_EVERY``-th tick, staggered by id. ``None``: every character."""
        if self.view is None or self.paused:
            return None
        ids = np.fromiter(self.chars, dtype=np.int64, count=len(self.chars))
        roots = np.array([ch.root_xz for ch in self.chars.values()], dtype=np.float64).reshape(-1, 2)
        keep = ground_distance(self.view, roots) <= VIEW_MARGIN
        keep |= (ids == self.selected) | ((self.tick + ids) % OFF_VIEW_EVERY == 0)
        return keep.tolist()

    def _emit_pose(self, stepped: bool) -> None:
        poses = self.poses()
        flags = FLAG_PAUSED if self.paused else 0
        history = len(self.history) + (1 if stepped else 0)
        frame = encode_frame(self.tick, self.time, poses, flags=flags, history=history, history_back=0)
        if stepped:
            self.history.append(frame)  # the scrub history keeps every character
        keep = self._in_view()
        if keep is not None and not all(keep):
            poses = [p for p, k in zip(poses, keep) if k]
            frame = encode_frame(self.tick, self.time, poses, flags=flags | FLAG_PARTIAL, history=history,
                                 history_back=0)
        self.send(frame)
        self.frames_sent += 1
        self.poses_sent += len(poses)

    def _emit_events(self) -> None:
        for ch in self.chars.values():
            if ch.events:
                for e in ch.events:
                    self.send(e)
                ch.events.clear()

    def _emit_stats(self) -> None:
        now = time.perf_counter()
        st = np.asarray(self._step_times) * 1e3 if self._step_times else np.zeros(1)
        self._step_times = []
        tick_max, self._tick_max = self._tick_max, 0.0
        stamps = self._tick_stamps
        hz = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 2 and stamps[-1] > stamps[0] else 0.0
        t0, b0 = self._last_stats
        bps = (self.bytes_sent - b0) / max(now - t0, 1e-6)
        self._last_stats = (now, self.bytes_sent)
        self.send({"type": "stats", "tick_hz": round(hz, 1), "step_ms_mean": round(float(st.mean()), 3),
                   "step_ms_max": round(float(st.max()), 3), "tick_ms_max": round(tick_max * 1e3, 3),
                   "characters": len(self.chars),
                   "bytes_per_s": round(bps), "late_ticks": self.late_ticks, "dropped_ticks": self.dropped_ticks,
                   "tick": self.tick, "agent_hz": round(TICK_HZ / self.divisor, 1), "poses_sent": self.poses_sent})

    def _emit_pose_status(self) -> None:
        """The pose source's ``status()`` for the page (about 5 times a second)."""
        self._pose_status_at = self.tick + 12
        src = self.pose_source
        st = {}
        if src is not None:
            st = dict(src.status())
        driven = [c.id for c in self.chars.values() if isinstance(c, MMCharacter) and c.agent.source is src]
        self.send({"type": "pose_status", "active": src is not None, "ids": driven, **st})

    def _free_world(self) -> World:
        """A world for free play: the viewer's controller defaults, the paper's penalties,
        characters avoiding each other."""
        return World(self.db, matcher=shared_matcher(self.db), controller=ControllerSettings(), stagger=False,
                     record_poses=False, fps=TICK_HZ)

    def _selected_mm(self) -> MMCharacter:
        ch = self.chars.get(self.selected) if self.selected is not None else None
        if not isinstance(ch, MMCharacter):
            raise Rejected("select a motion-matching character first")
        return ch

    def _emit_debug(self) -> None:
        ch = self.chars.get(self.selected) if self.selected is not None else None
        if not isinstance(ch, MMCharacter) or ch.last is None:
            return
        self.send(self.debug_info(ch))

    def debug_info(self, ch: MMCharacter) -> dict:
        """The debug panel's data for one character (see the protocol in the README)."""
        r = ch.last
        db = ch.db
        f = int(ch.ctrl.frame)
        clip = int(db.frame_clip[f])
        out: dict = {
            "type": "debug", "id": ch.id, "tick": self.tick, "mode": r.mode if r else "idle",
            "frame": {"index": f, "clip": db.clip_names[clip], "clip_frame": f - int(db.clip_starts[clip]),
                      "tags": list(db.clip_tags[clip])},
            "searches": int(ch.ctrl.searches), "transitions": int(ch.ctrl.transitions),
            "target_speed": round(float(ch.kb.target_speed), 2), "following": ch.follower is not None,
            "offsets": [float(o) for o in db.schema.trajectory_offsets],
        }
        des = r.desired if r is not None else None
        if des is not None:
            out["desired"] = {"positions": np.round(des.positions, 3).tolist(),
                              "directions": np.round(des.directions[:, [0, 2]], 3).tolist()}
        mp, md = ch.matched_future()
        out["matched"] = {"positions": np.round(mp, 3).tolist(), "directions": np.round(md[:, [0, 2]], 3).tolist()}
        costs = dict(ch.ctrl.last_costs)
        out["costs"] = {k: round(v, 4) for k, v in costs.items()}
        out["total"] = round(float(sum(costs.values())), 4)
        key = (ch.id, ch.ctrl.searches, self.debug_k)
        if self._debug_cache is None or self._debug_cache[:3] != key:
            self._debug_cache = (*key, ch.candidates(self.debug_k))
        out["candidates"] = self._debug_cache[3]
        page_ids = {c.agent.uid: c.id for c in self.chars.values() if isinstance(c, MMCharacter)}
        out["environment"] = environment_debug(self.world, ch.agent, self.scene_ids, page_ids)
        return out

    def welcome(self) -> dict:
        db = self.db
        return {
            "type": "welcome", "session": self.id, "protocol": PROTOCOL_VERSION, "tick_hz": TICK_HZ,
            "db": {"description": self.viewer.source_description, "fps": db.fps, "frames": db.num_frames,
                   "clips": len(db.clip_names), "tags": db.tags, "schema": db.schema.name,
                   "groups": [t.name for t in db.schema.terms],
                   "trajectory_offsets": [float(o) for o in db.schema.trajectory_offsets]},
            "skeletons": {str(k): v for k, v in self.skeletons.items()},
            "characters": self.describe_characters(), "selected": self.selected,
            "obstacles": self.obstacle_list(), "terrain": terrain_drawing(self.terrain),
            "capabilities": dict(CAPABILITIES),
            "history_frames": self.history.maxlen, "keys": list(KEYS),
            "modes": self.modes, "mode_keys": dict(MODE_KEYS),
            "limits": {"path_points": self.limits.path_points, "obstacles": self.limits.obstacles,
                       "characters": self.limits.characters, "max_bytes": self.limits.max_bytes,
                       "rate": self.limits.rate},
            "time": self.time_state(),
            "warmup": self._warmup_status(), "rig": self.rig_state(),
        }

    def _warmup_status(self) -> dict:
        w = self.viewer.warmup
        st = w.status() if w is not None else {"ready": True}
        return {**st, "held": len(self._held)}

    def time_state(self) -> dict:
        return {"type": "time", "paused": self.paused, "tick": self.tick, "time": round(self.time, 4),
                "history": len(self.history), "back": self.scrub_back}

    def describe_characters(self) -> list[dict]:
        return [ch.describe() for ch in self.chars.values()]

    def _send_characters(self) -> None:
        self.send({"type": "characters", "characters": self.describe_characters(), "selected": self.selected,
                   "skeletons": {str(k): v for k, v in self.skeletons.items()}})
        if self.paused:
            self._emit_pose(stepped=False)

    def obstacle_list(self) -> list[dict]:
        return [{"id": i, **o} for i, o in self.obstacles.items()]

    def _obstacles_changed(self) -> None:
        lst = self.obstacle_list()
        self.world.set_scene(scene_from_viewer(lst, self.terrain))
        self.scene_ids = [int(o["id"]) for o in lst]
        self.send({"type": "obstacles", "obstacles": lst, "time": round(self.time, 4)})

    # ------------------------------------------------------------------ characters
    def add_mm_character(self, name: str | None, position, facing=(0.0, 1.0), *, select: bool = False,
                         announce: bool = True) -> MMCharacter:
        """A new motion-matching character at ``position`` ``[x, z]`` (m) facing ``facing``
        (an agent of the session's world, driven by the keys until something else drives it)."""
        if len(self.chars) >= self.limits.characters:
            raise Rejected(f"at most {self.limits.characters} characters per session")
        agent = self.world.add_agent(name or f"character {self._next_id}", position, facing)
        keys = KeyboardInput(agent.ctrl.gaits, self.camera_yaw)
        agent.source = AroundObstacles(keys, self.world)
        agent.result = agent.ctrl.update(0.0, Intent.idle())  # its first pose, where it stands
        return self._adopt(agent, select=select, announce=announce, keys=keys)

    def _adopt(self, agent, *, select: bool = False, announce: bool = True,
               keys: KeyboardInput | None = None) -> MMCharacter:
        """The page's character of a world agent."""
        cid = self._next_id
        self._next_id += 1
        ch = MMCharacter(cid, agent.name or f"character {cid}", agent, skeleton_id=self.character_skeleton(),
                         record_frames=int(self.viewer.record_seconds * TICK_HZ), db_root_yaw=self._db_root_yaw,
                         extent=self.viewer.db_extent, camera_yaw=self.camera_yaw, keys=keys)
        self.chars[cid] = ch
        ch.after_step()
        if select or self.selected is None:
            self.selected = cid
        if announce:
            self._send_characters()
        return ch

    def remove_character(self, cid: int) -> None:
        ch = self.chars.pop(cid)
        if isinstance(ch, MMCharacter):
            self.world.remove_agent(ch.agent)
        if self.selected == cid:
            self.selected = next(iter(self.chars), None)

    # ------------------------------------------------------------------ handlers
    def _on_hello(self, m):
        return {"session": self.id}

    def _char(self, cid: int | None) -> MMCharacter:
        if cid is None:
            return self._selected_mm()
        ch = self.chars.get(int(cid))
        if ch is None:
            raise Rejected(f"no character {cid}")
        if not isinstance(ch, MMCharacter):
            raise Rejected(f"character {cid} is a clip player; only motion-matching characters take input")
        return ch

    def _on_warmup_ready(self, m):
        """The viewer's warm-up is over: held requests are carried out, one a tick."""
        self.send({"type": "warmup", **self._warmup_status()})

    def _on_select(self, m):
        cid = int(m["id"])
        if cid not in self.chars:
            raise Rejected(f"no character {cid}")
        old = self.chars.get(self.selected) if self.selected is not None else None
        if isinstance(old, MMCharacter):
            old.held.clear()
        self.selected = cid
        self._debug_cache = None
        self.send({"type": "selected", "id": cid})
        if self.paused:
            self._emit_pose(stepped=False)

    def _on_path(self, m):
        ch = self._char(m["id"])
        pts = np.asarray(m["points"], dtype=np.float64)
        if (drawn := float(pts[-1, 0] - pts[0, 0])) > self.limits.path_seconds:
            raise Rejected(f"a path of {drawn:.0f} s of drawing is longer than the viewer follows "
                           f"({self.limits.path_seconds:g} s; its cost grows with its seconds): draw a shorter one")
        if m["mode"] == "drawn":  # the ETH paper's drawn-trajectory control: the drawing's timing unread
            info = ch.start_drawn(pts[:, 1:], loop=m["loop"])
        else:
            net = _direction_net() if m["facing"] == "net" else None
            info = ch.start_path(pts[:, 0], pts[:, 1:], mode=m["mode"], scale=m["scale"], world=self.world,
                                 facing=m["facing"], joystick_deg=m["joystick_deg"], facing_net=net)
        self.send({"type": "path_info", **info})
        return {"id": ch.id}

    def _on_path_cancel(self, m):
        self._char(m["id"]).cancel_path("cancelled")

    def _on_pause(self, m):
        self.paused = bool(m["paused"])
        self.scrub_back = 0
        self.send(self.time_state())
        self._emit_pose(stepped=False)

    def _on_step(self, m):
        if not self.paused:
            raise Rejected("pause first: 'step' advances a paused simulation frame by frame")
        for _ in range(int(m["frames"])):
            self.step()
            self._emit_pose(stepped=True)
        self._emit_events()
        if self.pose_source is not None:
            self._emit_pose_status()
        if self.debug_enabled:
            self._emit_debug()
        self.send(self.time_state())
        return {"tick": self.tick}

    def _on_scrub(self, m):
        if not self.paused:
            raise Rejected("pause first: scrubbing looks back through the last seconds of a paused session")
        if not self.history:
            raise Rejected("nothing to scrub through yet")
        back = min(int(m["back"]), len(self.history) - 1)
        self.scrub_back = back
        frame = self.history[len(self.history) - 1 - back]
        self.send(with_history_flags(frame, paused=True, history=len(self.history), back=back))
        self.send(self.time_state())
        return {"back": back}

    def _on_add_character(self, m):
        f = m["facing"] or (0.0, 1.0)
        ch = self.add_mm_character(m["name"], m["position"], f, select=True)
        self.send({"type": "selected", "id": ch.id})
        return {"id": ch.id}

    def _on_remove_character(self, m):
        cid = int(m["id"])
        if cid not in self.chars:
            raise Rejected(f"no character {cid}")
        self.remove_character(cid)
        self._send_characters()

    def _on_spawn_group(self, m):
        n = int(m["count"])
        if len(self.chars) + n > self.limits.characters:
            raise Rejected(f"at most {self.limits.characters} characters per session ({len(self.chars)} now)")
        cols = math.ceil(math.sqrt(n))
        sp = float(m["spacing"])
        cx, cz = m["center"]
        tx, tz = m["target"]
        via = [tuple(v) for v in (m.get("via") or ())]
        first = via[0] if via else (tx, tz)
        dist = math.hypot(tx, tz)
        fd = math.hypot(*first)
        facing = (first[0] / fd, first[1] / fd) if fd > 1e-6 else (0.0, 1.0)
        ids = []
        for i in range(n):
            r, c = divmod(i, cols)
            x = cx + (c - (cols - 1) / 2) * sp
            z = cz + (r - (math.ceil(n / cols) - 1) / 2) * sp
            ch = self.add_mm_character(f"agent {self._next_id}", (x, z), facing, announce=False)
            ids.append(ch.id)
            if dist > 0.1 or via:
                # every member walks the group's offsets from its own place: waypoints, then the goal
                ch.drive(SteeringInput(self.world, (x + tx, z + tz), float(m["speed"]), self.steering,
                                       waypoints=[(x + a, z + b) for a, b in via],
                                       side=1.0 if ch.id % 2 == 0 else -1.0))
        self._stagger_ids.extend(ids)
        self._send_characters()
        return {"ids": ids}

    def _on_controls(self, m):
        ch = self._char(m["id"])
        ch.set_controls(**{k: m[k] for k in ("responsiveness", "continuity", "evasion", "anticipation")})
        self._send_characters()
        return {"id": ch.id, "controls": ch.controls}

    def _on_debug(self, m):
        self.debug_enabled = bool(m["enabled"])
        self.debug_k = int(m["candidates"])
        self._debug_cache = None
        if self.debug_enabled:
            self._emit_debug()

    def _release_pose(self) -> None:
        for ch in self.chars.values():
            if isinstance(ch, MMCharacter) and self.pose_source is not None and ch.agent.source is self.pose_source:
                ch.drive(None)
        self.pose_source = None

    def _on_pose_source(self, m):
        if m["kind"] == "off":
            self._release_pose()
            self.send({"type": "pose_status", "active": False, "ids": [], "state": "off"})
            return {"state": "off"}
        if m["kind"] == "file" and not m["file"]:
            raise Rejected("choose a keypoint file from the data folders first")
        ch = self._selected_mm()
        if m["kind"] == "file":
            source = self.viewer.catalog.read(m["file"], "keypoints",
                                              lambda p: ViewerPoseSource("file", p, fallback=ch.keys))
        else:
            source = ViewerPoseSource(m["kind"], None, fallback=ch.keys)
        self._release_pose()
        self.pose_source = source
        ch.drive(source)
        self._emit_pose_status()
        return {"state": "on", "id": ch.id}

    def _on_pose_keypoints(self, m):
        if self.pose_source is None or not hasattr(self.pose_source, "push"):
            raise Rejected("no webcam pose source is active (send pose_source first)")
        self.pose_source.push(np.asarray(m["keypoints"], dtype=np.float64), m["t"])
