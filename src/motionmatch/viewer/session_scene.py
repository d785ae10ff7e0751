"""The scene messages of a :class:`~motionmatch.viewer.session.Session`: obstacles
added, moved and removed, the page's scene set, saved and cleared, a terrain set, and a
scenario file loaded as the session's world (with its end). :class:`SceneMessages` is a
part of the session (its base class), kept in a file of its own: it reads and writes the
session's own state."""

from __future__ import annotations

import math

from motionmatch.viewer.characters import MMCharacter
from motionmatch.viewer.environment import shared_matcher
from motionmatch.viewer.messages import validate_obstacle
from motionmatch.viewer.session_common import TICK_HZ, Rejected
from motionmatch.viewer.terrain import terrain_drawing

__all__ = ["SceneMessages"]


class SceneMessages:
    """The scene part of :class:`~motionmatch.viewer.session.Session`."""

    def _on_obstacle_add(self, m):
        if len(self.obstacles) >= self.limits.obstacles:
            raise Rejected(f"at most {self.limits.obstacles} obstacles")
        oid = self._next_obstacle
        self._next_obstacle += 1
        self.obstacles[oid] = {**m["obstacle"], "t0": round(self.world.time, 4)}
        self._obstacles_changed()
        return {"id": oid}

    def _on_obstacle_update(self, m):
        oid = int(m["id"])
        if oid not in self.obstacles:
            raise Rejected(f"no obstacle {oid}")
        self.obstacles[oid] = {**m["obstacle"], "t0": round(self.world.time, 4)}
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
            self.obstacles[self._next_obstacle] = {**o, "t0": round(self.world.time, 4)}
            self._next_obstacle += 1
        self._obstacles_changed()

    def _on_scene_set(self, m):
        self._set_scene_obstacles(m["scene"]["obstacles"])
        return {"obstacles": len(self.obstacles)}

    def _set_terrain(self, terrain) -> dict | None:
        """Make ``terrain`` (None: the flat floor) the session's ground and send the page its
        drawing (a ValueError, before anything changes, for one the page cannot draw)."""
        drawing = terrain_drawing(terrain)
        self.terrain = terrain
        self.send({"type": "terrain", "terrain": drawing})
        return drawing

    def _on_terrain_set(self, m):
        """The page's terrain (a file the user picked; null: the flat floor) as the ground of
        the world's scene: the characters walk on it (:mod:`motionmatch.runtime.ground`)."""
        try:
            drawing = self._set_terrain(m["terrain"])
        except ValueError as e:
            raise Rejected(str(e)) from None
        self._obstacles_changed()
        kind = "flat" if drawing is None else drawing["kind"]
        return {"terrain": kind, **({"rows": drawing["rows"], "cols": drawing["cols"]}
                                    if kind == "height_field" else {})}

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
        if self.terrain is not None and self.terrain.kind != "mesh":  # a mesh's file stays where it is
            scene["terrain"] = self.terrain.to_dict()
        self.send({"type": "scene", "scene": scene})

    def _on_scenario_load(self, m):
        """Load a scenario file and set it up exactly as ``motionmatch scenario`` does: the
        session's world becomes :func:`motionmatch.runtime.scenarios.world_from_scenario`'s (its
        obstacles, penalty, search, controls, controller settings, steering and agents with
        their inputs), paused at its start (stepped once, as a run's first frame). Play
        stops (pauses) when the scenario's ``duration`` is over. Fields that cannot apply
        here are named in the reply's ``notes`` and a ``warning`` message."""
        from motionmatch.environment.scenario import load_scenario
        from motionmatch.runtime.scenarios import world_from_scenario

        # a ScenarioError (one line, the file id) is the reply; so is any failure of the reader
        sc = self.viewer.catalog.read(m["file"], "scenario", lambda p: load_scenario(p, label=m["file"]))
        obstacles = [validate_obstacle(o.to_dict(), f"obstacle {i}")
                     for i, o in enumerate(sc.obstacles)]
        if len(sc.agents) > self.limits.characters:
            raise Rejected(f"the scenario has {len(sc.agents)} agents; the limit is {self.limits.characters}")
        if len(obstacles) > self.limits.obstacles:
            raise Rejected(f"at most {self.limits.obstacles} obstacles")
        try:  # every check before the session changes
            world = world_from_scenario(self.db, sc, matcher=shared_matcher(self.db), record_poses=False)
            terrain_drawing(sc.terrain)
        except (TypeError, ValueError) as e:
            raise Rejected(f"{m['file']}: {e}") from None
        notes = self._scenario_notes(sc)
        for cid in list(self.chars):
            self.remove_character(cid)
        self.paused = True
        self.world = world
        self.obstacles.clear()
        for o in obstacles:
            self.obstacles[self._next_obstacle] = {**o, "t0": 0.0}
            self._next_obstacle += 1
        self.scene_ids = list(self.obstacles)
        self._set_terrain(sc.terrain)
        self.send({"type": "obstacles", "obstacles": self.obstacle_list(), "time": 0.0})
        self.scenario = {"name": sc.name, "duration": float(sc.duration), "ended": False}
        world.step(0.0)  # a run's first frame: every agent where it starts
        for i, agent in enumerate(world.agents):
            self._adopt(agent, select=i == 0, announce=False)
        if notes:
            self._warn(f"scenario {sc.name or m['file']}: " + "; ".join(notes))
        self._send_characters()
        self.send(self.time_state())
        self._emit_pose(stepped=False)
        return {"name": sc.name, "agents": len(sc.agents), "obstacles": len(obstacles),
                "duration": float(sc.duration), "description": sc.description, "expect": sc.expect, "notes": notes}

    def _scenario_notes(self, sc) -> list[str]:
        """What of scenario ``sc`` the viewer plays differently from ``motionmatch scenario``
        or what the database lacks for it."""
        notes: list[str] = []
        for i, a in enumerate(sc.agents):
            if a.tags and not self._database_has(str(a.tags)):
                notes.append(f"agents[{i}].tags {a.tags!r} selects no frame of this database: "
                             "its searches use every frame")
        if abs(float(sc.fps) - TICK_HZ) > 1e-6:
            notes.append(f"fps {sc.fps:g}: the viewer steps at {TICK_HZ} Hz (times in seconds are kept)")
        req = sc.database.get("requires") or []
        missing = [r for r in req if not self._database_has(str(r))]
        if missing:
            notes.append(f"database.requires {missing}: this database lacks them, so the expected outcome "
                         "may not be reached (build one with them: see scenarios/README.md)")
        gaits = sorted({str(a.gait) for a in sc.agents if getattr(a, "gait", "walk") not in (None, "walk")})
        if gaits:
            notes.append(f"agents' gait {gaits} is not used (motionmatch scenario does not use it either)")
        if sc.regions:
            notes.append(f"regions {sorted(sc.regions)} are for tests and reports; the viewer does not use them")
        return notes

    def _database_has(self, what: str) -> bool:
        """Whether the session's database has ``what`` (a tag, or ``heights``: height features)."""
        if what == "heights":
            return shared_matcher(self.db).ellipses.shape[-1] >= 7
        db = self.db
        if what in db.tags:
            return True
        try:
            return bool(db.mask(what).any())
        except Exception:
            return False

    @property
    def scenario_time(self) -> float:
        """Seconds since the loaded scenario started (0 without one)."""
        return self.world.time if self.scenario is not None else 0.0

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
