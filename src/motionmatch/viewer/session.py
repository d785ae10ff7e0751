"""One browser tab's simulation: a fixed 60 Hz loop on its own thread.

A :class:`Session` owns its characters, obstacles and clock. The server hands it the
page's validated messages (:meth:`Session.submit`); the loop applies them at the start
of a tick, in order, then advances every character by exactly 1/60 s (unless paused),
encodes one binary pose frame and sends it, with JSON replies and events, through the
``send`` callback (thread-safe; the server coalesces pose frames a slow page cannot
take). Heavy work (GenMM synthesis, BVH export) runs on the viewer's worker pool and
comes back through the inbox, so the loop never stalls on it.

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
import queue
import secrets
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from motionmatch.control.keyboard import KEYS
from motionmatch.errors import MotionMatchError
from motionmatch.viewer.characters import ClipCharacter, MMCharacter, recorded_motion, skeleton_info
from motionmatch.viewer.crowd import ViewerCrowd
from motionmatch.viewer.data import DataError
from motionmatch.viewer.environment import ViewerEnvironment
from motionmatch.viewer.messages import Limits, MessageError, validate_obstacle
from motionmatch.viewer.pose import ViewerPoseSource
from motionmatch.viewer.protocol import FLAG_PAUSED, PROTOCOL_VERSION, encode_frame, with_history_flags

__all__ = ["DT", "TICK_HZ", "Session"]

TICK_HZ = 60
DT = 1.0 / TICK_HZ


#: Which panels of the page work (every capability ships with the viewer).
CAPABILITIES = {"keyboard": True, "path": True, "genmm": True, "obstacles_edit": True, "environment": True,
                "crowd": True, "pose": True, "scenario": True}


def _scenario_dict(path) -> dict:
    """A scenario file as a plain dict with groups expanded into agents and every agent's
    absent keys at the format's defaults (read and checked by
    :func:`motionmatch.environment.scenario.load_scenario`)."""
    from motionmatch.environment.scenario import load_scenario

    sc = load_scenario(path)
    d = sc.to_dict()
    d["name"] = sc.name
    d["agents"] = [{"path": None, "goal": None, "via": None, "script": None, "loop": False, "environment": True,
                    "start_time": 0.0, "tags": None, "gait": "walk", "speed": 1.3, "controls": {}, **a}
                   for a in d["agents"]]
    return d


class Rejected(MotionMatchError):
    """A valid message that cannot be carried out now (unknown id, nothing recorded...)."""


class _ScriptSource:
    """Intents from a timeline script (scenario agents with a ``script``), replayed by the
    seconds of the updates (the character may be updated less often than every tick).
    ``gaits``: the keyboard's gait speeds (as ``motionmatch scenario``: the database's)."""

    def __init__(self, script, gaits=None):
        self.script = script
        self.kb = script.keyboard(gaits=gaits) if gaits is not None else script.keyboard()
        self.t = 0.0
        self.idx = -1

    def intent(self, character, dt):
        self.t += dt
        ev = self.script.events
        while self.idx + 1 < len(ev) and ev[self.idx + 1].t <= self.t + 1e-9:
            self.idx += 1
        e = ev[self.idx] if self.idx >= 0 else None
        if e is not None and e.intent is not None:
            self.kb.update((), dt)
            return e.intent
        return self.kb.update(e.keys if e is not None and e.keys is not None else (), dt)


def _looping_path_input(path: np.ndarray, speed: float, offsets, loop: bool):
    """The runtime's :class:`~motionmatch.runtime.inputs.PolylineInput` for a scenario path
    (with ``loop`` it goes round and round, as on the command line)."""
    from motionmatch.runtime.inputs import PolylineInput

    return PolylineInput(path, speed, offsets, loop=loop)


class _ScenarioInput:
    """A scenario agent's input as ``motionmatch scenario`` gives it: standing (idle)
    until the agent's ``start_time`` (scenario seconds), then ``inner``: an intent source
    (``intent(character, dt)``: scripts, crowd steering) or a runtime input
    (``inner.intent(agent, t, dt) -> Want``: :class:`~motionmatch.runtime.inputs.PolylineInput`),
    whose desired trajectory is exposed as :attr:`desired_trajectory` for the character to match."""

    def __init__(self, session, inner, start_time: float = 0.0):
        self.session = session
        self.inner = inner
        self.start_time = float(start_time)
        self.desired_trajectory = None

    @property
    def started(self) -> bool:
        return self.session.scenario_time + 1e-9 >= self.start_time

    def intent(self, character, dt):
        from motionmatch.control.intent import Intent

        self.desired_trajectory = None
        if not self.started:
            return Intent.idle()
        from motionmatch.runtime.inputs import PolylineInput

        inner = self.inner
        if not isinstance(inner, PolylineInput):
            out = inner.intent(character, dt)
            return out if out is not None else Intent.idle()
        want = inner.intent(character, self.session.scenario_time - self.start_time, dt)
        self.desired_trajectory = want.desired
        return want.intent


class Session:
    """The simulation of one page (see the module doc).

    Args:
        viewer: the shared :class:`~motionmatch.viewer.server.Viewer` (database, data
            folders, limits, worker pool, downloads).
        send: called from the loop's thread with a ``dict`` (JSON) or ``bytes`` (pose frame).
    """

    def __init__(self, viewer, send: Callable[[Any], None]):
        self.viewer = viewer
        self.id = secrets.token_hex(6)
        self.send = send
        self.db = viewer.db
        self.limits: Limits = viewer.limits
        db = self.db
        from motionmatch.anim import quat

        self._db_root_yaw = quat.yaw_angle(db.rotations[:, 0].astype(np.float64))
        from motionmatch.viewer.characters import _db_extent

        self.skeletons: dict[int, dict] = {0: skeleton_info(db.skeleton, tuple(db.foot_joints), ground_root=True,
                                                            height=viewer.db_extent or _db_extent(db))}
        self._next_skeleton = 1
        self.chars: dict[int, MMCharacter | ClipCharacter] = {}
        self._next_id = 1
        self.selected: int | None = None
        self.obstacles: dict[int, dict] = {}
        self._next_obstacle = 1
        self.paused = False
        self.tick = 0
        self.time = 0.0
        self.history: deque[bytes] = deque(maxlen=max(int(viewer.history_seconds * TICK_HZ), 1))
        self.scrub_back = 0
        self.debug_enabled = False
        self.debug_k = 5
        self._debug_cache: tuple[int, int, list] | None = None
        self.camera_yaw = 0.0
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"viewer-session-{self.id}", daemon=True)
        self.jobs = 0
        #: obstacles and other agents for the motion-matching characters (penalised search)
        self.env = ViewerEnvironment(db)
        self.pose_source = None
        self._pose_status_at = 0
        self.crowd: ViewerCrowd | None = None  # this session's crowd steering (made on first use)
        #: the loaded scenario: name, t0 (session time at its start), duration (s), ended
        self.scenario: dict | None = None
        # stats
        self.bytes_sent = 0
        self.frames_sent = 0
        self._step_times: list[float] = []
        self._tick_stamps: deque[float] = deque(maxlen=TICK_HZ + 1)
        self._stagger_ids: list[int] = []  # spawned together: spread their periodic searches
        self.late_ticks = 0
        self.dropped_ticks = 0
        self.divisor = 1  # background characters are updated every divisor-th tick (see step)
        self._cost_ema: float | None = None
        self._adapt_after = 0
        self._last_stats = (time.perf_counter(), 0)
        self.add_mm_character("hero", (0.0, 0.0), (0.0, 1.0), select=True, announce=False)

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        self.thread.start()

    def submit(self, msg: dict) -> None:
        """Queue a validated message for the next tick."""
        self.inbox.put(msg)

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
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
        chars = list(self.chars.values())
        if self.crowd is not None:
            self.crowd.before_step(chars, self.time, dt)
        self.env.before_step(chars, self.time, dt)
        div = self.divisor
        k = 0
        for cid, ch in self.chars.items():
            if isinstance(ch, MMCharacter):
                if div > 1 and cid != self.selected:
                    k += 1
                    ch.pending += dt
                    if (self.tick + k) % div == 0:
                        ch.step(ch.pending)
                        ch.pending = 0.0
                else:
                    ch.step(ch.pending + dt)
                    ch.pending = 0.0
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
        while True:
            try:
                msg = self.inbox.get_nowait()
            except queue.Empty:
                return
            self.handle(msg)

    def handle(self, msg: dict) -> None:
        """Carry out one message; a refusal is answered with an error, never raised."""
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
        return [ch.pose(cid == self.selected) for cid, ch in self.chars.items()]

    def _emit_pose(self, stepped: bool) -> None:
        frame = encode_frame(self.tick, self.time, self.poses(), flags=FLAG_PAUSED if self.paused else 0,
                             history=len(self.history) + (1 if stepped else 0), history_back=0)
        if stepped:
            self.history.append(frame)
        self.send(frame)
        self.frames_sent += 1

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
        stamps = self._tick_stamps
        hz = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 2 and stamps[-1] > stamps[0] else 0.0
        t0, b0 = self._last_stats
        bps = (self.bytes_sent - b0) / max(now - t0, 1e-6)
        self._last_stats = (now, self.bytes_sent)
        self.send({"type": "stats", "tick_hz": round(hz, 1), "step_ms_mean": round(float(st.mean()), 3),
                   "step_ms_max": round(float(st.max()), 3), "characters": len(self.chars),
                   "bytes_per_s": round(bps), "late_ticks": self.late_ticks, "dropped_ticks": self.dropped_ticks,
                   "tick": self.tick, "agent_hz": round(TICK_HZ / self.divisor, 1)})

    def _emit_pose_status(self) -> None:
        """The pose source's ``status()`` for the page (about 5 times a second)."""
        self._pose_status_at = self.tick + 12
        src = self.pose_source
        st = {}
        if src is not None:
            st = dict(src.status())
        driven = [c.id for c in self.chars.values() if getattr(c, "_pose_driven", False)]
        self.send({"type": "pose_status", "active": src is not None, "ids": driven, **st})

    def _crowd(self) -> ViewerCrowd:
        """This session's crowd steering (made on first use)."""
        if self.crowd is None:
            self.crowd = ViewerCrowd(self.db)
        return self.crowd

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
        key = (ch.id, ch.tap.count, self.debug_k)
        if self._debug_cache is None or self._debug_cache[:3] != key:
            self._debug_cache = (*key, ch.candidates(self.debug_k))
        out["candidates"] = self._debug_cache[3]
        out["environment"] = self.env.debug(ch)
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
            "obstacles": self.obstacle_list(), "capabilities": dict(CAPABILITIES),
            "history_frames": self.history.maxlen, "keys": list(KEYS),
            "limits": {"path_points": self.limits.path_points, "obstacles": self.limits.obstacles,
                       "characters": self.limits.characters, "max_bytes": self.limits.max_bytes,
                       "rate": self.limits.rate},
            "time": self.time_state(),
        }

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
        if self.env is not None:
            self.env.set_obstacles(lst, self.time)
        self.send({"type": "obstacles", "obstacles": lst, "time": round(self.time, 4)})

    # ------------------------------------------------------------------ characters
    def add_mm_character(self, name: str | None, position, facing=(0.0, 1.0), *, select: bool = False,
                         announce: bool = True, settings=None, environment: bool = True,
                         assist: bool = True) -> MMCharacter:
        """A new motion-matching character at ``position`` ``[x, z]`` (m) facing ``facing``.

        ``settings``: its :class:`~motionmatch.runtime.controller.ControllerSettings`
        (default: the controller's); ``environment=False``: a plain motion-matching
        character for the environment adapter; ``assist=False``: no viewer-only aids (see
        :class:`~motionmatch.viewer.characters.MMCharacter`)."""
        if len(self.chars) >= self.limits.characters:
            raise Rejected(f"at most {self.limits.characters} characters per session")
        cid = self._next_id
        self._next_id += 1
        ch = MMCharacter(cid, name or f"character {cid}", self.db, position=position, facing=facing,
                         record_frames=int(self.viewer.record_seconds * TICK_HZ), db_root_yaw=self._db_root_yaw,
                         extent=self.viewer.db_extent, settings=settings)
        ch.environment = bool(environment)
        ch.assist = bool(assist)
        ch.kb.camera_yaw = self.camera_yaw
        self.chars[cid] = ch
        if self.env is not None:
            self.env.attach(ch)
        ch.step(0.0)
        if select or self.selected is None:
            self.selected = cid
        if announce:
            self._send_characters()
        return ch

    def remove_character(self, cid: int) -> None:
        ch = self.chars.pop(cid)
        if self.crowd is not None and isinstance(ch, MMCharacter):
            self.crowd.release(ch)
        if self.env is not None and isinstance(ch, MMCharacter):
            self.env.detach(ch)
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

    def _set_yaw(self, yaw) -> None:
        if yaw is not None:
            self.camera_yaw = float(yaw)
            for ch in self.chars.values():
                if isinstance(ch, MMCharacter):
                    ch.kb.camera_yaw = self.camera_yaw

    def _on_key(self, m):
        self._set_yaw(m["yaw"])
        ch = self.chars.get(self.selected) if self.selected is not None else None
        if isinstance(ch, MMCharacter):
            ch.set_key(m["key"], m["down"])

    def _on_keys(self, m):
        self._set_yaw(m["yaw"])
        ch = self.chars.get(self.selected) if self.selected is not None else None
        if isinstance(ch, MMCharacter):
            ch.set_keys(m["held"])

    def _on_camera(self, m):
        self._set_yaw(m["yaw"])

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
        info = ch.start_path(pts[:, 0], pts[:, 1:], mode=m["mode"], scale=m["scale"])
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
        crowd = self._crowd()
        ids = []
        for i in range(n):
            r, c = divmod(i, cols)
            x = cx + (c - (cols - 1) / 2) * sp
            z = cz + (r - (math.ceil(n / cols) - 1) / 2) * sp
            ch = self.add_mm_character(f"agent {self._next_id}", (x, z), facing, announce=False)
            ids.append(ch.id)
            if crowd is not None:
                # every member walks the group's offsets from its own place: waypoints, then the goal
                crowd.assign(ch, goal=(x + tx, z + tz), via=[(x + a, z + b) for a, b in via],
                             speed=float(m["speed"]))
            elif dist > 0.1:
                T = dist / float(m["speed"])
                ch.start_path(np.array([0.0, T]), np.array([[x, z], [x + tx, z + tz]]), mode="local", levels=1, k=1)
                self.send({"type": "path_info", **ch.follow_info})
        self._stagger_ids.extend(ids)
        self._send_characters()
        return {"ids": ids}

    def _on_controls(self, m):
        ch = self._char(m["id"])
        old = ch.ctrl
        ch.set_controls(**{k: m[k] for k in ("responsiveness", "continuity", "evasion", "anticipation")})
        if self.env is not None:
            if ch.ctrl is not old:
                self.env.attach(ch)
            self.env.controls_changed(ch)
        self._send_characters()
        return {"id": ch.id, "controls": ch.controls}

    def _on_obstacle_add(self, m):
        if len(self.obstacles) >= self.limits.obstacles:
            raise Rejected(f"at most {self.limits.obstacles} obstacles")
        oid = self._next_obstacle
        self._next_obstacle += 1
        self.obstacles[oid] = {**m["obstacle"], "t0": round(self.time, 4)}
        self._obstacles_changed()
        return {"id": oid}

    def _on_obstacle_update(self, m):
        oid = int(m["id"])
        if oid not in self.obstacles:
            raise Rejected(f"no obstacle {oid}")
        self.obstacles[oid] = {**m["obstacle"], "t0": round(self.time, 4)}
        self._obstacles_changed()
        return {"id": oid}

    def _on_obstacle_remove(self, m):
        oid = int(m["id"])
        if self.obstacles.pop(oid, None) is None:
            raise Rejected(f"no obstacle {oid}")
        self._obstacles_changed()

    def _on_scene_clear(self, m):
        self.obstacles.clear()
        self._obstacles_changed()

    def _set_scene_obstacles(self, obstacles: list[dict]) -> None:
        if len(obstacles) > self.limits.obstacles:
            raise Rejected(f"at most {self.limits.obstacles} obstacles")
        self.obstacles.clear()
        for o in obstacles:
            self.obstacles[self._next_obstacle] = {**o, "t0": round(self.time, 4)}
            self._next_obstacle += 1
        self._obstacles_changed()

    def _on_scene_set(self, m):
        self._set_scene_obstacles(m["scene"]["obstacles"])
        return {"obstacles": len(self.obstacles)}

    def _on_scene_save(self, m):
        obs = [{k: v for k, v in o.items() if k != "t0"} for o in self.obstacles.values()]
        agents = []
        for ch in self.chars.values():
            if isinstance(ch, MMCharacter):
                x, z = ch.root_xz
                y = ch.ctrl.root_yaw
                agents.append({"name": ch.name, "start": [round(x, 3), round(z, 3)],
                               "facing": [round(math.sin(y), 4), round(math.cos(y), 4)]})
        scene = {"name": "viewer scene", "duration": 30.0, "obstacles": obs, "agents": agents}
        self.send({"type": "scene", "scene": scene})

    def _on_scenario_load(self, m):
        """Load a scenario file and set it up as ``motionmatch scenario`` does
        (:func:`motionmatch.runtime.world.world_from_scenario`), paused at its start: the
        scene's penalty / search / default controls (``controller.controls``), the
        controller settings (environment-aware defaults, ``database.locomotion_tags``), the
        crowd's ``steering``; per agent its input (script, path followed as the runtime's
        :class:`~motionmatch.runtime.inputs.PolylineInput` with ``loop``, goal through ``via``),
        ``controls``, ``environment``, ``start_time`` and ``tags``. Play stops (pauses) when
        the scenario's ``duration`` is over. Fields that cannot apply here are named in the
        reply's ``notes`` and a ``warning`` message."""
        path = self.viewer.catalog.resolve(m["file"], "scenario")
        try:
            sc = _scenario_dict(path)
        except Exception as e:
            raise Rejected(f"{m['file']}: {e}") from None
        obstacles = [validate_obstacle(o, f"obstacle {i}") for i, o in enumerate(sc.get("obstacles", []))]
        agents = sc.get("agents", [])
        if len(agents) > self.limits.characters:
            raise Rejected(f"the scenario has {len(agents)} agents; the limit is {self.limits.characters}")
        plan = self._scenario_plan(sc, m["file"])  # every check before the session changes
        for cid in list(self.chars):
            self.remove_character(cid)
        self.paused = True
        self.env.configure(plan["environment"])
        crowd = self._crowd()
        if crowd is not None and plan["steering"] is not None:
            crowd.settings = plan["steering"]
        self._set_scene_obstacles(obstacles)
        duration = float(sc.get("duration") or 0.0)
        self.scenario = {"name": str(sc.get("name", "")), "t0": self.time, "duration": duration, "ended": False}
        ids = []
        for i, a in enumerate(agents):
            ch = self._scenario_agent(i, a, sc, plan, crowd)
            ids.append(ch.id)
        self._stagger_ids.extend(ids)  # spread their periodic searches, as the world staggers its agents
        notes = plan["notes"]
        if notes:
            self._warn(f"scenario {self.scenario['name'] or m['file']}: " + "; ".join(notes))
        self._send_characters()
        self.send(self.time_state())
        self._emit_pose(stepped=False)
        return {"name": self.scenario["name"], "agents": len(agents), "obstacles": len(obstacles),
                "duration": duration, "description": str(sc.get("description") or ""),
                "expect": str(sc.get("expect") or ""), "notes": notes}

    def _scenario_plan(self, sc: dict, file: str) -> dict:
        """The session-wide settings of a scenario (``environment``: EnvironmentSettings,
        ``controller``: ControllerSettings, ``steering``) and the ``notes`` on the fields
        that cannot apply in the viewer; a bad field is a :class:`Rejected`."""
        from dataclasses import fields as dc_fields

        from motionmatch.runtime.controller import ControllerSettings
        from motionmatch.runtime.world import EnvironmentSettings, environment_controller_settings

        notes: list[str] = []
        controller = dict(sc.get("controller") or {})
        database = dict(sc.get("database") or {})
        try:
            env = EnvironmentSettings.from_dicts(sc.get("penalty"), sc.get("search"), controller.get("controls"))
        except (TypeError, ValueError) as e:
            raise Rejected(f"{file}: penalty / search / controller.controls: {e}") from None
        cdict = {k: v for k, v in controller.items() if k != "controls"}
        if "locomotion_tags" in database:
            cdict["locomotion_tags"] = database["locomotion_tags"]
        known = {f.name: f for f in dc_fields(ControllerSettings)}
        bad = sorted(set(cdict) - set(known))
        if bad:
            raise Rejected(f"{file}: controller: unknown field(s) {bad}; known: {sorted(known)}")
        for k, v in cdict.items():  # the types of the defaults (numbers, flags, words)
            ref = getattr(ControllerSettings(), k)
            ok = (isinstance(v, bool) if isinstance(ref, bool) else isinstance(v, str) if isinstance(ref, str)
                  else isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
            if not ok:
                raise Rejected(f"{file}: controller.{k}: expected a value like {ref!r}, got {v!r}")
        csettings = environment_controller_settings(**cdict)
        from motionmatch.runtime.crowd import SteeringSettings

        try:  # the scenario's crowd steering (defaults without one: none left from a previous scenario)
            steering = SteeringSettings.from_dict(dict(sc.get("steering") or {}))
        except (TypeError, ValueError) as e:
            raise Rejected(f"{file}: steering: {e}") from None
        agents = sc.get("agents", [])
        for i, a in enumerate(agents):
            tags = a.get("tags")
            if tags:
                try:
                    ok = bool(self.db.mask(str(tags)).any())
                except Exception:
                    ok = False
                if not ok:
                    notes.append(f"agents[{i}].tags {tags!r} selects no frame of this database: "
                                 "its searches use every frame")
        fps = float(sc.get("fps") or TICK_HZ)
        if abs(fps - TICK_HZ) > 1e-6:
            notes.append(f"fps {fps:g}: the viewer steps at {TICK_HZ} Hz (times in seconds are kept)")
        req = database.get("requires") or []
        missing = [r for r in req if not self._database_has(str(r))]
        if missing:
            notes.append(f"database.requires {missing}: this database lacks them, so the expected outcome "
                         "may not be reached (build one with them: see scenarios/README.md)")
        gaits = sorted({str(a.get("gait")) for a in agents if a.get("gait") not in (None, "walk")})
        if gaits:
            notes.append(f"agents' gait {gaits} is not used (motionmatch scenario does not use it either)")
        if sc.get("regions"):
            notes.append(f"regions {sorted(sc['regions'])} are for tests and reports; the viewer does not use them")
        return {"environment": env, "controller": csettings, "steering": steering, "notes": notes}

    def _database_has(self, what: str) -> bool:
        """Whether the session's database has ``what`` (a tag, or ``heights``: height features)."""
        if what == "heights":
            m = getattr(self.env, "matcher", None)
            return m is not None and m.ellipses.shape[-1] >= 7
        db = self.db
        if what in db.tags:
            return True
        try:
            return bool(db.mask(what).any())
        except Exception:
            return False

    def _scenario_agent(self, i: int, a: dict, sc: dict, plan: dict, crowd) -> MMCharacter:
        """One scenario agent as a character (see :meth:`_on_scenario_load`)."""
        from dataclasses import replace

        tags = a.get("tags")
        cs = replace(plan["controller"], locomotion_tags=str(tags)) if tags else plan["controller"]
        ch = self.add_mm_character(a.get("name") or f"agent {i + 1}", tuple(a.get("start", (0, 0)))[:2],
                                   tuple(a.get("facing") or (0.0, 1.0))[:2], announce=False, select=i == 0,
                                   settings=cs, environment=a.get("environment") is not False, assist=False)
        if a.get("controls"):
            ch.set_controls(**{k: v for k, v in a["controls"].items() if k in ch.controls})
            if self.env is not None:
                self.env.controls_changed(ch)
        speed = float(a.get("speed") or 1.3)
        inner = None
        if a.get("script") is not None:
            from motionmatch.control.script import parse_script

            script = dict(a["script"])
            script.setdefault("duration", float(sc.get("duration") or 60.0))  # the scenario's length
            # as the runtime's ScriptInput: intent events keep the script's own gait speeds,
            # the keys walk and run at the database's
            inner = _ScriptSource(parse_script(script), gaits=ch.ctrl.gaits)
        elif a.get("path") is not None:
            pts = np.asarray(a["path"], dtype=np.float64).reshape(-1, 2)
            inner = _looping_path_input(pts, speed, self.db.schema.trajectory_offsets, bool(a.get("loop")))
        elif a.get("goal") is not None:
            if crowd is not None:
                crowd.assign(ch, goal=tuple(a["goal"])[:2], via=a.get("via"), speed=speed)
                inner = crowd
            else:  # no crowd steering here: walk the waypoints and the goal as a drawn path
                pts = np.asarray([ch.root_xz, *(a.get("via") or ()), tuple(a["goal"])[:2]], dtype=np.float64)
                pts = pts[np.concatenate([[True], np.linalg.norm(np.diff(pts, axis=0), axis=1) > 1e-6])]
                if len(pts) >= 2:
                    t = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1)) / speed])
                    ch.start_path(t, pts, mode="global", levels=1, k=1)
                    self.send({"type": "path_info", **ch.follow_info})
        if inner is not None:
            ch.intent_source = _ScenarioInput(self, inner, float(a.get("start_time") or 0.0))
        return ch

    @property
    def scenario_time(self) -> float:
        """Seconds since the loaded scenario started (0 without one)."""
        return self.time - self.scenario["t0"] if self.scenario is not None else 0.0

    def _check_scenario_end(self) -> None:
        """Pause once when the scenario's ``duration`` is over (as ``motionmatch scenario``
        stops there); Play goes on, loading the file again starts it over."""
        sc = self.scenario
        if sc is None or sc["ended"] or sc["duration"] <= 0 or self.scenario_time < sc["duration"] - 1e-9:
            return
        sc["ended"] = True
        self.paused = True
        self.send({"type": "scenario_end", "name": sc["name"], "duration": sc["duration"],
                   "time": round(self.time, 4)})
        self._warn(f"scenario {sc['name']}: its {sc['duration']:g} s are over, paused "
                   "(Play goes on past the end; Load starts it again)")
        self.send(self.time_state())

    def _on_files(self, m):
        files = self.viewer.catalog.list(m["kind"])
        self.send({"type": "files", "kind": m["kind"], "files": files})
        return {"count": len(files)}

    def _on_genmm(self, m):
        if self.jobs >= 1:
            raise Rejected("a synthesis is already running for this page")
        cat = self.viewer.catalog
        paths = [cat.resolve(f, "bvh") for f in m["examples"]]
        keys = cat.resolve(m["keyframes"], "bvh") if m["keyframes"] else None
        self.jobs += 1
        self.send({"type": "genmm_status", "state": "running", "variants": m["variants"]})
        args = (paths, keys, float(m["seconds"]), int(m["seed"]), bool(m["loop"]), int(m["variants"]))

        def done(fut):
            try:
                res = fut.result()
                self.submit({"type": "_genmm_done", "seq": None, "result": res, "request": m})
            except Exception as e:
                self.submit({"type": "_genmm_done", "seq": None, "error": f"{type(e).__name__}: {e}", "request": m})

        self.viewer.pool.submit(_genmm_job, *args).add_done_callback(done)
        return {"state": "running"}

    def _on_genmm_done(self, m):
        self.jobs = max(self.jobs - 1, 0)
        if "error" in m:
            self.send({"type": "genmm_status", "state": "failed", "message": m["error"]})
            return
        fps, results, seconds_taken = m["result"]
        req = m["request"]
        for cid in [c for c, ch in self.chars.items() if isinstance(ch, ClipCharacter)]:
            self.remove_character(cid)
        skel = results[0].motion.skeleton
        feet = tuple(results[0].feet) if results[0].contacts is not None else ()
        sid = self._next_skeleton
        self._next_skeleton += 1
        wp = results[0].motion.world_positions
        info = skeleton_info(skel, feet, ground_root=False, height=float(np.ptp(wp[0, :, 1])) or None)
        self.skeletons[sid] = info
        spacing = max(1.5, 1.4 * info["height"])
        base_x = max((abs(ch.root_xz[0]) for ch in self.chars.values()), default=0.0) + 2.5
        ids = []
        for i, r in enumerate(results):
            cid = self._next_id
            self._next_id += 1
            loop_frames = r.motion.num_frames - 1 if req["loop"] else None
            ch = ClipCharacter(cid, f"variant {i + 1} (seed {req['seed'] + i})", r.motion, skeleton_id=sid,
                               place=(base_x + i * spacing, 0.0), contacts=r.contacts, loop_frames=loop_frames,
                               meta={"seed": req["seed"] + i, "synthesis_s": round(float(r.synthesis_s), 3)})
            self.chars[cid] = ch
            ch.step(0.0)
            ids.append(cid)
        self.selected = ids[0]
        self._send_characters()
        self.send({"type": "genmm_status", "state": "done", "ids": ids, "fps": fps,
                   "seconds": round(seconds_taken, 3), "frames": int(results[0].motion.num_frames)})
        if self.paused:
            self._emit_pose(stepped=False)

    def _on_genmm_clear(self, m):
        for cid in [c for c, ch in self.chars.items() if isinstance(ch, ClipCharacter)]:
            self.remove_character(cid)
        self._send_characters()

    def _on_export_bvh(self, m):
        cid = int(m["id"])
        ch = self.chars.get(cid)
        if ch is None:
            raise Rejected(f"no character {cid}")
        if isinstance(ch, MMCharacter):
            if ch.recorder.frames == 0:
                raise Rejected("nothing recorded yet")
            r, t = ch.recorder.arrays()  # a snapshot taken now; the worker formats it
            moving, skel, scale, name = ch.recorder.moving, ch.db.skeleton, ch.db.file_scale, ch.name

            def make():
                return recorded_motion(skel, moving, r, t, TICK_HZ, name, scale)
        else:
            motion = ch.motion_for_export()

            def make():
                return motion

        filename = "".join(c if c.isalnum() or c in "-_" else "_" for c in ch.name) + ".bvh"
        sid = self.id

        def job():
            import tempfile
            from pathlib import Path

            from motionmatch.anim import save_bvh

            mo = make()
            with tempfile.TemporaryDirectory() as d:
                p = save_bvh(mo, Path(d) / "export.bvh")
                data = p.read_bytes()
            token = self.viewer.downloads.add(sid, filename, data, "application/octet-stream")
            return token, mo.num_frames, mo.fps

        def done(fut):
            try:
                token, frames, fps = fut.result()
                self.send({"type": "download", "url": f"/api/download/{token}", "filename": filename, "id": cid,
                           "frames": frames, "seconds": round(frames / fps, 2)})
            except Exception as e:
                self.send({"type": "error", "code": "rejected", "for": "export_bvh", "message": str(e)})

        self.viewer.pool.submit(job).add_done_callback(done)
        return {"state": "running"}

    def _on_debug(self, m):
        self.debug_enabled = bool(m["enabled"])
        self.debug_k = int(m["candidates"])
        self._debug_cache = None
        if self.debug_enabled:
            self._emit_debug()

    def _release_pose(self) -> None:
        for ch in self.chars.values():
            if isinstance(ch, MMCharacter) and getattr(ch, "_pose_driven", False):
                if ch.intent_source is self.pose_source:
                    ch.intent_source = None
                ch._pose_driven = False
        self.pose_source = None

    def _on_pose_source(self, m):
        if m["kind"] == "off":
            self._release_pose()
            self.send({"type": "pose_status", "active": False, "ids": [], "state": "off"})
            return {"state": "off"}
        if m["kind"] == "file" and not m["file"]:
            raise Rejected("choose a keypoint file from the data folders first")
        path = self.viewer.catalog.resolve(m["file"], "keypoints") if m["kind"] == "file" else None
        ch = self._selected_mm()
        source = ViewerPoseSource(m["kind"], path)
        self._release_pose()
        self.pose_source = source
        ch.intent_source = source
        ch._pose_driven = True
        self._emit_pose_status()
        return {"state": "on", "id": ch.id}

    def _on_pose_keypoints(self, m):
        if self.pose_source is None or not hasattr(self.pose_source, "push"):
            raise Rejected("no webcam pose source is active (send pose_source first)")
        self.pose_source.push(np.asarray(m["keypoints"], dtype=np.float64), m["t"])


def _genmm_job(paths, keyframes, seconds: float, seed: int, loop: bool, variants: int):
    """Synthesize ``variants`` motions (worker thread)."""
    from motionmatch.genmm import GenMM, Keyframes

    t0 = time.perf_counter()
    gen = GenMM([str(p) for p in paths])
    frames = max(round(seconds * gen.fps), 16)
    keys = Keyframes.from_bvh(keyframes) if keyframes is not None else None
    results = [gen.sample(frames, seed=seed + i, loop=loop, keyframes=keys) for i in range(variants)]
    return gen.fps, results, time.perf_counter() - t0
