"""Generate the scenario files of this folder (deterministic; run from anywhere).

    python scenarios/make_scenarios.py            # rewrites every scenarios/*.json

Each scenario is data (see scenarios/README.md for the format); this script only exists
so that the geometry (walls, fields of obstacles, groups) is written down as code once.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def wall(p0, p1, thickness=0.2, height=(0.0, 2.5), name=""):
    """A box from ``p0`` to ``p1`` (its centre line), ``thickness`` wide."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    d = p1 - p0
    length = float(np.hypot(*d))
    yaw = math.degrees(math.atan2(d[0], d[1]))
    c = (p0 + p1) / 2
    o = {"shape": "box", "center": [round(float(c[0]), 4), round(float(c[1]), 4)],
         "size": [round(length, 4), thickness], "yaw_deg": round(yaw, 4), "height": list(height)}
    if name:
        o["name"] = name
    return o


def side_walls(profile, thickness=0.3, height=(0.0, 2.5)):
    """Walls along +Z for a corridor with the given ``[(z, half_width), ...]`` profile,
    the wall's inner face at +-half_width."""
    out = []
    for (z0, w0), (z1, w1) in itertools.pairwise(profile):
        for sgn in (-1, 1):
            off = sgn * thickness / 2
            out.append(wall((sgn * w0 + off, z0), (sgn * w1 + off, z1), thickness, height))
    return out


def corridor_narrowing():
    prof = [(-1.0, 1.0), (2.0, 1.0), (5.5, 0.175), (6.3, 0.175), (9.0, 1.0), (14.0, 1.0)]
    return {
        "name": "corridor-narrowing",
        "description": "A corridor 2 m wide narrowing to 0.35 m between z = 5.5 and z = 6.3, then widening "
                       "again; the character walks with the forward key held (W = +Z) and nothing else.",
        "expect": "It slows down and side-steps through the narrow part (torso turned more than 45 degrees "
                  "from +Z), without touching the walls there, and gets out the other side.",
        "duration": 24.0,
        "obstacles": side_walls(prof),
        "agents": [{"name": "hero", "start": [0.0, 0.0], "facing": [0.0, 1.0],
                    "script": {"events": [{"t": 0.0, "keys": ["w"]}]},
                    "controls": {"evasion": 0.0}}],
        "regions": {"narrow": {"z": [5.5, 6.3]}, "exit": {"z": [9.0, 100.0]}},
    }


def _support(kind, size, yaw_deg, n):
    """Extent of an obstacle toward the unit ground direction ``n`` (x, z)."""
    if kind == "disk":
        return size[0]
    y = math.radians(yaw_deg)
    f1 = np.array([math.sin(y), math.cos(y)])
    f2 = np.array([-f1[1], f1[0]])
    if kind == "ellipse":
        return float(np.sqrt((size[0] * (n @ f1)) ** 2 + (size[1] * (n @ f2)) ** 2))
    return float(size[0] / 2 * abs(n @ f1) + size[1] / 2 * abs(n @ f2))


def _obstacle(rng, c, kind, size, yaw):
    o = {"shape": kind, "center": [round(float(c[0]), 3), round(float(c[1]), 3)]}
    if kind == "disk":
        o["radius"] = round(size[0], 3)
    elif kind == "ellipse":
        o["axes"] = [round(size[0], 3), round(size[1], 3)]
        o["yaw_deg"] = round(yaw, 1)
    else:
        o["size"] = [round(size[0], 3), round(size[1], 3)]
        o["yaw_deg"] = round(yaw, 1)
    o["height"] = [0.0, round(float(rng.uniform(0.8, 2.0)), 2)]
    return o


def _random_shape(rng):
    kind = str(rng.choice(["disk", "disk", "ellipse", "box"]))
    base = float(rng.uniform(0.15, 0.32))
    yaw = float(rng.uniform(0, 180))
    size = {"disk": (base,), "ellipse": (base * 1.5, base * 0.8), "box": (base * 2.4, base * 1.6)}[kind]
    return kind, size, yaw


def dense_obstacles(seed=3):
    """A ~117 m closed path (90 s at 1.3 m/s) through a field of obstacles: one every 3-4.5 m
    whose near edge is within 0.3 m of the path (up to 5 cm over it), on a random side (the
    other side is left free, so a detour of a few tens of centimetres always exists), and
    clutter 1-3 m from the path on both sides."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, 480, endpoint=False)
    r = 15.0 + 2.5 * np.sin(3 * t) + 1.5 * np.cos(5 * t)
    path = np.stack([r * np.cos(t), 0.8 * r * np.sin(t)], axis=1)
    path = np.vstack([path, path[:1]])
    seg = np.linalg.norm(np.diff(path, axis=0), axis=1)
    cum = np.r_[0, np.cumsum(seg)]
    length = float(cum[-1])

    def at(s):
        return np.array([np.interp(s, cum, path[:, 0]), np.interp(s, cum, path[:, 1])])

    def normal(s):
        tan = at(s + 0.2) - at(s - 0.2)
        tan /= np.linalg.norm(tan)
        return np.array([-tan[1], tan[0]])

    obstacles = []
    s = 3.0
    while s < length - 2.0:  # obstacles at the path
        nrm = normal(s) * rng.choice([-1.0, 1.0])
        kind, size, yaw = _random_shape(rng)
        gap = float(rng.uniform(-0.05, 0.3))  # near edge's distance from the path line
        obstacles.append(_obstacle(rng, at(s) + nrm * (gap + _support(kind, size, yaw, -nrm)), kind, size, yaw))
        s += float(rng.uniform(3.0, 4.5))
    s = 1.0
    while s < length - 1.0:  # clutter beside the path
        nrm = normal(s) * rng.choice([-1.0, 1.0])
        kind, size, yaw = _random_shape(rng)
        gap = float(rng.uniform(1.0, 3.0))
        c = at(s) + nrm * (gap + _support(kind, size, yaw, -nrm))
        d = np.min(np.linalg.norm(path - c, axis=1)) - _support(kind, size, yaw, nrm)
        if d > 0.9:  # (the path bends: keep clutter off it)
            obstacles.append(_obstacle(rng, c, kind, size, yaw))
        s += float(rng.uniform(1.0, 2.0))
    return {
        "name": "dense-obstacles",
        "description": f"The evaluation scenario (paper Sec. 6.3): a closed {length:.0f} m path through a field of "
                       f"{len(obstacles)} static disks, ellipses and boxes: one every 3-4.5 m with its near edge within "
                       "0.3 m of the path (up to 5 cm over it) on a random side, and clutter 1-3 m beside it; the "
                       "character follows the path at 1.3 m/s for 90 s.",
        "expect": "The full method's collision fraction is at most a third of plain motion matching's, and its "
                  "mean distance to the path at most 0.1 m larger.",
        "duration": 90.0,
        "obstacles": obstacles,
        "agents": [{"name": "walker", "start": [round(float(path[0, 0]), 3), round(float(path[0, 1]), 3)],
                    "facing": [0.0, 1.0], "path": path.round(3).tolist(), "speed": 1.3, "loop": True}],
    }


def zigzag_cones():
    cones = []
    for i, z in enumerate(np.arange(2.5, 14.0, 1.4)):
        side = 1 if i % 2 == 0 else -1
        x = side * 0.45 + 0.06 * math.sin(3.1 * i)  # not perfectly even
        cones.append({"shape": "disk", "center": [round(x, 3), round(float(z), 3)], "radius": 0.17,
                      "height": [0.0, 0.7], "name": f"cone{i}"})
    return {
        "name": "zigzag-cones",
        "description": "A corridor 2 m wide with cones (r = 0.17 m) every 1.4 m alternately on the left and the "
                       "right, each leaving a 0.7 m lane; forward key only.",
        "expect": "The character weaves through the cones to the end with little collision (collision time "
                  "under 0.3 s per intersection, under 10% of the time).",
        # 30 s: with the shared defaults it slows down among the cones (about 0.65 m/s
        # against the key's 0.85 m/s; measured 13.2 m at 20 s), so 20 s was too short to
        # see it reach the end
        "duration": 30.0,
        "obstacles": side_walls([(-1.0, 1.0), (18.0, 1.0)]) + cones,
        "agents": [{"name": "hero", "start": [0.0, 0.0], "facing": [0.0, 1.0],
                    "script": {"events": [{"t": 0.0, "keys": ["w"]}]}}],
        "regions": {"cones": {"z": [2.0, 14.5]}, "exit": {"z": [15.0, 100.0]}},
    }


def cubes_approach():
    return {
        "name": "cubes-approach",
        "description": "A character stands at the origin without any input; two 0.8 m cubes slide toward it along "
                       "the X axis from both sides at 1 m/s and pass through where it stands.",
        "expect": "It steps out of their way (forward or back) before they arrive and is not hit (or only "
                  "grazed), while plain motion matching stands still and is run over.",
        "duration": 10.0,
        "obstacles": [
            {"shape": "box", "center": [6.0, 0.0], "size": [0.8, 0.8], "height": [0.0, 0.8], "velocity": [-1.0, 0.0],
             "name": "cube-right"},
            {"shape": "box", "center": [-7.0, 0.0], "size": [0.8, 0.8], "height": [0.0, 0.8], "velocity": [1.0, 0.0],
             "name": "cube-left"},
        ],
        "agents": [{"name": "hero", "start": [0.0, 0.0], "facing": [0.0, 1.0]}],
    }


def car():
    return {
        "name": "car",
        "description": "A car (2.2 x 4.4 m) drives at 0.6 m/s down a 3 m wide street toward a character that "
                       "walks toward it (forward key held the whole time); there is no room to get around it.",
        "expect": "The character walks up to the car, then backs away in front of it (moving with the car while "
                  "still facing it) instead of being run over.",
        "duration": 14.0,
        "obstacles": side_walls([(-8.0, 1.5), (16.0, 1.5)]) + [
            {"shape": "box", "center": [0.0, 11.0], "size": [4.4, 2.2], "height": [0.0, 1.5],
             "velocity": [0.0, -0.6], "name": "car"}],
        "agents": [{"name": "hero", "start": [0.0, 0.0], "facing": [0.0, 1.0],
                    "script": {"events": [{"t": 0.0, "keys": ["w"]}]}}],
    }


def corridors_pass():
    obstacles, agents = [], []
    x0 = -4.0
    for k, width in enumerate((1.55, 1.20, 0.95)):
        cx = x0 + 4.0 * k
        for sgn in (-1, 1):
            x = cx + sgn * (width / 2 + 0.15)
            obstacles.append(wall((x, -1.0), (x, 13.0), 0.3))
        agents.append({"name": f"w{width:.2f}-north", "start": [cx - 0.1, 0.0], "facing": [0.0, 1.0],
                       "path": [[cx - 0.1, 0.0], [cx - 0.1, 12.0]], "speed": 1.3})
        agents.append({"name": f"w{width:.2f}-south", "start": [cx + 0.1, 12.0], "facing": [0.0, -1.0],
                       "path": [[cx + 0.1, 12.0], [cx + 0.1, 0.0]], "speed": 1.3})
    return {
        "name": "corridors-pass",
        "description": "Three corridors, 1.55, 1.20 and 0.95 m wide, each with two characters walking toward "
                       "each other along it (path following at 1.3 m/s).",
        "expect": "In every corridor the two characters pass each other and reach the far end; the narrower "
                  "the corridor, the more they turn their bodies; they barely touch.",
        "duration": 16.0,
        "obstacles": obstacles,
        "agents": agents,
    }


def doors(per_group=50, name="doors"):
    wall_h = (0.0, 2.5)
    # a wall along X at z = 0 with a 1.85 m door at x = -3 and a 0.9 m door at x = +3
    obstacles = [
        wall((-12.0, 0.0), (-3.925, 0.0), 0.3, wall_h, "wall-west"),
        wall((-2.075, 0.0), (2.55, 0.0), 0.3, wall_h, "wall-middle"),
        wall((3.45, 0.0), (12.0, 0.0), 0.3, wall_h, "wall-east"),
    ]
    groups = [
        {"name": "south", "count": per_group, "area": [[-8.0, -9.5], [8.0, -2.5]], "facing": [0.0, 1.0],
         "goal_offset": [0.0, 12.0], "via": [[-3.0, -0.6], [-3.0, 0.6]], "speed": 1.3, "spacing": 0.9, "seed": 1},
        {"name": "north", "count": per_group, "area": [[-8.0, 2.5], [8.0, 9.5]], "facing": [0.0, -1.0],
         "goal_offset": [0.0, -12.0], "via": [[3.0, 0.6], [3.0, -0.6]], "speed": 1.3, "spacing": 0.9, "seed": 2},
    ]
    return {
        "name": name,
        "description": f"Two groups of {per_group} characters cross a wall in opposite directions, the southern "
                       "group through a 1.85 m door (x = -3), the northern one through a 0.9 m door (x = +3), then "
                       "spread out to goals 12 m from their starts, crossing each other's stream; rule-based crowd "
                       "steering (cone of vision, lateral force) gives their target trajectories.",
        "expect": "Most characters get through to the other side within the duration; the narrow door is "
                  "crossed one at a time (waiting, side-stepping); bodies rarely overlap.",
        "duration": 40.0 if per_group > 10 else 30.0,
        "obstacles": obstacles,
        "agents": [],
        "groups": groups,
        "search": {"collision_fallback": False},
    }


def fence_ceilings():
    obstacles = side_walls([(-1.0, 1.0), (22.0, 1.0)])
    obstacles += [
        {"shape": "box", "center": [0.0, 5.0], "size": [0.15, 2.0], "height": [0.0, 0.4], "name": "fence"},
        {"shape": "box", "center": [0.0, 10.5], "size": [2.0, 2.0], "height": [1.25, 3.0], "name": "ceiling-high"},
        {"shape": "box", "center": [0.0, 16.5], "size": [2.5, 2.0], "height": [0.75, 3.0], "name": "ceiling-low"},
    ]
    return {
        "name": "fence-ceilings",
        "description": "A corridor with a 0.4 m fence across it (z = 5), then a ceiling 1.25 m high (z = 9.5-11.5) "
                       "and one 0.75 m high (z = 15.25-17.75); forward key only. Needs a database with height "
                       "features (schema 'environment-heights') and jumping and crawling clips (LAFAN1 "
                       "obstacles1_subject1 and ground1_subject4 tagged jump / crawl), with jump and crawl frames "
                       "allowed in the locomotion search.",
        "expect": "The character gets over the fence (with LAFAN1 the way its capture subject jogs over a 0.48 m "
                  "box: the whole body above the fence while over it), crouches under the first ceiling and "
                  "gets down on the ground to crawl under the second, without intersecting any of them for long.",
        "duration": 40.0,
        "obstacles": obstacles,
        # responsiveness 3 (as in the narrowing corridor): with the default 2, standing in
        # front of the fence scores lower than jogging over it (10.4 against 11.4 at t = 10 s)
        "agents": [{"name": "hero", "start": [0.0, 0.0], "facing": [0.0, 1.0],
                    "script": {"events": [{"t": 0.0, "keys": ["w"]}]},
                    "controls": {"responsiveness": 3.0}}],
        "database": {"requires": ["heights", "jump", "crawl"], "locomotion_tags": "!dance"},
        "regions": {"fence": {"z": [4.6, 5.4]}, "ceiling-high": {"z": [9.5, 11.5]},
                    "ceiling-low": {"z": [15.25, 17.75]}},
    }


# ------------------------------------------------------------------ the paper's scenes (issue 33 item 5)
def dense_crowd(seed=6):
    """Fig. 6: a field of standing people, treated as static obstacles (each the ellipse of a
    standing body, 0.48 m across the shoulders, 0.28 m front to back, turned at random),
    on staggered rows 0.9 m apart, 1.2 m apart along a row (0.93 people per square metre),
    so that no straight line crosses it; the character holds the forward key."""
    rng = np.random.default_rng(seed)
    people = []
    for r, z in enumerate(np.arange(2.5, 11.6, 0.9)):
        shift = 0.6 if r % 2 else 0.0
        for x in np.arange(-4.2 + shift, 4.3, 1.2):
            c = np.array([x, z]) + rng.uniform(-0.12, 0.12, 2)
            people.append({"shape": "ellipse", "center": [round(float(c[0]), 3), round(float(c[1]), 3)],
                           "axes": [0.24, 0.14], "yaw_deg": round(float(rng.uniform(0, 180)), 1),
                           "height": [0.0, 1.75], "name": f"person{len(people)}"})
    return {
        "name": "dense-crowd",
        "description": f"Paper Fig. 6: a dense static crowd, {len(people)} standing people (each the ellipse of a "
                       "standing body, 0.48 x 0.28 m, turned at random) on staggered rows 0.9 m apart and 1.2 m "
                       "apart along a row (about 0.9 people per square metre) between z = 2.5 and 11.5 m; the "
                       "character holds the forward key (W = +Z) and nothing else.",
        "expect": "The character crosses the crowd slowly, weaving and turning between the people, and comes out "
                  "the other side without colliding with them (plain motion matching walks through them).",
        "duration": 40.0,
        "obstacles": people,
        "agents": [{"name": "hero", "start": [0.0, 0.0], "facing": [0.0, 1.0],
                    "script": {"events": [{"t": 0.0, "keys": ["w"]}]}}],
        "regions": {"crowd": {"z": [2.0, 12.0]}, "exit": {"z": [12.5, 100.0]}},
    }


def narrow_passage(disk=False, width=1.0):
    """Fig. 7: two characters walk toward each other along a passage ``width`` m wide; with
    ``disk`` the disk-body ablation (each body the circle around its ellipse)."""
    obstacles = []
    for sgn in (-1, 1):
        x = sgn * (width / 2 + 0.15)
        obstacles.append(wall((x, -1.0), (x, 13.0), 0.3))
    name = "narrow-passage-disk" if disk else "narrow-passage"
    d = {
        "name": name,
        "description": f"Paper Fig. 7: two characters walk toward each other along a passage {width:.2f} m wide "
                       "and 14 m long (path following at 1.3 m/s, their lines 0.2 m apart)"
                       + (", their bodies represented as disks (the circle around each body ellipse: the "
                          "ablation of Sec. 6.5)." if disk else ", their bodies represented as ellipses."),
        "expect": ("With disks they get stuck: no motion but standing fits past the other one, so neither gets "
                   "past the other." if disk else
                   "With ellipses they find poses (turning, side-stepping) that fit past each other and both "
                   "reach the far end."),
        "duration": 16.0,
        "obstacles": obstacles,
        "agents": [{"name": "north", "start": [-0.1, 0.0], "facing": [0.0, 1.0],
                    "path": [[-0.1, 0.0], [-0.1, 12.0]], "speed": 1.3},
                   {"name": "south", "start": [0.1, 12.0], "facing": [0.0, -1.0],
                    "path": [[0.1, 12.0], [0.1, 0.0]], "speed": 1.3}],
        "regions": {"north-end": {"z": [9.0, 100.0]}, "south-end": {"z": [-100.0, 3.0]}},
    }
    if disk:
        d["penalty"] = {"disk_body": True}
    return d


def run_walk():
    """Fig. 17: in two lanes 8 m apart in the open, the same oncoming walker (1.3 m/s) is met
    by a runner (3.5 m/s, lane x = -4) and by a walker (1.3 m/s, lane x = +4)."""
    agents = []
    for lane, (who, speed) in ((-4.0, ("runner", 3.5)), (4.0, ("walker", 1.3))):
        agents.append({"name": who, "start": [lane - 0.1, 0.0], "facing": [0.0, 1.0],
                       "path": [[lane - 0.1, 0.0], [lane - 0.1, 24.0]], "speed": speed})
        agents.append({"name": f"{who}-oncoming", "start": [lane + 0.1, 14.0], "facing": [0.0, -1.0],
                       "path": [[lane + 0.1, 14.0], [lane + 0.1, -6.0]], "speed": 1.3})
    return {
        "name": "run-walk",
        "description": "Paper Fig. 17: two lanes 8 m apart in the open; in the western one (x = -4) a runner "
                       "(3.5 m/s) meets a character walking toward it (1.3 m/s), in the eastern one (x = +4) a "
                       "walker (1.3 m/s) meets the same oncoming walker; lines 0.2 m apart, path following.",
        "expect": "The runner turns its torso considerably to get past and keeps its speed (there is room); the "
                  "walker's avoidance is subtler (less torso rotation).",
        "duration": 12.0,
        "obstacles": [],
        "agents": agents,
    }


def zigzag_cones_door():
    """The cones of :func:`zigzag_cones`, then a wall across the corridor at z = 16 whose
    door (0.9 m) stands ajar: its leaf, hinged on the east jamb, is open by 35 degrees,
    leaving about 0.5 m between its free end and the west jamb."""
    d = zigzag_cones()
    cones = [o for o in d["obstacles"] if o["shape"] == "disk"]
    z_door = 16.0
    walls = side_walls([(-1.0, 1.0), (22.0, 1.0)])
    walls.append(wall((-1.0, z_door), (-0.45, z_door), 0.2, name="wall-west"))
    walls.append(wall((0.45, z_door), (1.0, z_door), 0.2, name="wall-east"))
    a = math.radians(35.0)
    hinge = np.array([0.45, z_door + 0.1])
    tip = hinge + 0.85 * np.array([-math.cos(a), math.sin(a)])
    walls.append(wall(hinge, tip, 0.05, name="door-leaf"))
    gap = float(np.hypot(*(tip - np.array([-0.45, z_door + 0.1]))))
    return {
        "name": "zigzag-cones-door",
        "description": "Paper Fig. 13: the corridor of zigzag-cones (2 m wide, cones every 1.4 m alternately "
                       "left and right, not perfectly even), ending at a wall at z = 16 m whose 0.9 m door stands "
                       f"nearly closed (its leaf open by 35 degrees: {gap:.2f} m from its end to the other "
                       "jamb); forward key only.",
        "expect": "The character weaves through the cones, then squeezes through the door's opening turning "
                  "its torso (side-stepping), and comes out the other side.",
        # 60 s: it reaches the door at about 23 s and works its way through it until about 47 s
        "duration": 60.0,
        "obstacles": walls + cones,
        "agents": d["agents"],
        "regions": {"cones": {"z": [2.0, 14.5]}, "door": {"z": [15.3, 17.0]}, "exit": {"z": [17.5, 100.0]}},
    }


def _demo_path(waypoints, speed, seed, wobble=0.03):
    """A drawn-looking timed path ``[[t, x, z], ...]`` through ``waypoints`` (corners
    rounded over 0.6 m) at ``speed`` m/s, events every 10-25 ms, a hand's small wobble."""
    rng = np.random.default_rng(seed)
    w = np.asarray(waypoints, float)
    dense = [w[0]]
    for i in range(1, len(w) - 1):
        a, b, c = w[i - 1], w[i], w[i + 1]
        r = min(0.6, np.linalg.norm(b - a) / 2, np.linalg.norm(c - b) / 2)
        p0, p1 = b + (a - b) / np.linalg.norm(a - b) * r, b + (c - b) / np.linalg.norm(c - b) * r
        dense += [(1 - u) ** 2 * p0 + 2 * (1 - u) * u * b + u**2 * p1 for u in np.linspace(0, 1, 12)]
    dense.append(w[-1])
    d = np.asarray(dense)
    s = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(d, axis=0), axis=1))]
    T = s[-1] / speed
    t = [0.0]
    while t[-1] < T:
        t.append(t[-1] + rng.uniform(0.010, 0.025))
    t = np.array(t[:-1] + [T])
    sv = np.interp(t, [0, T], [0, s[-1]])
    pts = np.stack([np.interp(sv, s, d[:, 0]), np.interp(sv, s, d[:, 1])], axis=1)
    pts[1:-1] += rng.normal(0.0, wobble, (len(pts) - 2, 2)) * 0.3
    return [[round(float(a), 4), round(float(x), 4), round(float(z), 4)] for a, (x, z) in zip(t, pts)]


def finish_line():
    """The path paper's demo "cross the finish line" (local control): a line drawn to the
    finish, three blocks crossing it from the left to the right at 0.6, 1.0 and 1.4 m/s,
    timed to meet a character that keeps to the drawn timing."""
    path = _demo_path([(0.0, 0.0), (0.0, 14.0)], 1.5, seed=31)
    blocks = []
    for z, v, size in ((4.0, 0.6, 0.8), (7.5, 1.0, 0.9), (11.0, 1.4, 1.0)):
        meet = z / 1.5  # when a character on time reaches this block's lane
        blocks.append({"shape": "box", "center": [round(v * meet, 3), z], "size": [size, size], "height": [0.0, 1.2],
                       "velocity": [-v, 0.0], "name": f"block {v:g} m/s"})
    return {
        "name": "finish-line",
        "description": "The path-following paper's demo 'cross the finish line' (local control): the user draws a "
                       "line 14 m ahead across the finish line at z = 12 m; three blocks slide across it from the "
                       "character's left to its right (0.6, 1.0, 1.4 m/s), each timed to reach the line just as a "
                       "character on the drawn timing does. Path: paths/demos/finish_line.json.",
        "expect": "The character crosses the finish line (z = 12 m) within 14 s, its body never hit by a block "
                  "(LHMM over the penalised search); following the same path blind, it is hit.",
        "duration": 16.0,
        "obstacles": blocks,
        "agents": [{"name": "runner", "start": [0.0, 0.0], "facing": [0.0, 1.0], "timed_path": {"points": path}}],
        "regions": {"finish": {"x": [-20.0, 20.0], "z": [12.0, 40.0]}},
    }


def reach_target():
    """The path paper's demo "reach the target location" (global control): the path is
    drawn where the obstacles are, away from the character, who walks to its start first."""
    path = _demo_path([(2.0, 2.0), (2.0, 4.5), (-1.5, 6.0), (-1.5, 8.5), (2.5, 10.5), (3.0, 12.0)], 1.3, seed=32)
    obstacles = [wall((-4.0, 5.0), (1.0, 5.0), 0.3, name="wall west"), wall((4.5, 5.0), (7.0, 5.0), 0.3,
                                                                        name="wall east"),
                 {"shape": "box", "center": [1.5, 7.5], "size": [2.0, 1.0], "height": [0.0, 1.0], "name": "crate"},
                 {"shape": "disk", "center": [-0.2, 10.6], "radius": 0.5, "name": "pillar"},
                 {"shape": "ellipse", "center": [4.8, 9.0], "axes": [0.9, 0.4], "yaw_deg": 30, "name": "bush"}]
    return {
        "name": "reach-target",
        "description": "The path-following paper's demo 'reach the target location' (global control): the character "
                       "stands at the origin; the user draws, where the obstacles are, a path from (2, 2) through "
                       "the gap of a wall, past a crate, a pillar and a bush to the target at (3, 12). Path: "
                       "paths/demos/reach_target.json (follow it with --mode global).",
        "expect": "The character walks to the drawn path's start, follows it and stops within 0.5 m of the "
                  "target, its body clear of every obstacle.",
        "duration": 24.0,
        "obstacles": obstacles,
        "agents": [{"name": "walker", "start": [0.0, 0.0], "facing": [0.0, 1.0], "timed_path": {"points": path}}],
        "regions": {"target": {"x": [2.5, 3.5], "z": [11.5, 12.5]}},
    }


SCENARIOS = {
    "corridor-narrowing": corridor_narrowing,
    "zigzag-cones": zigzag_cones,
    "cubes-approach": cubes_approach,
    "car": car,
    "corridors-pass": corridors_pass,
    "doors": doors,
    "doors-small": lambda: doors(6, "doors-small"),
    "fence-ceilings": fence_ceilings,
    "dense-obstacles": dense_obstacles,
    "dense-crowd": dense_crowd,
    "narrow-passage": narrow_passage,
    "narrow-passage-disk": lambda: narrow_passage(disk=True),
    "run-walk": run_walk,
    "zigzag-cones-door": zigzag_cones_door,
    "finish-line": finish_line,
    "reach-target": reach_target,
}
#: the demos' paths, also as path files for 'motionmatch follow --path ... --scene ...'
DEMO_PATHS = {"finish-line": "finish_line", "reach-target": "reach_target"}


def main() -> None:
    for name, fn in SCENARIOS.items():
        d = fn()
        text = json.dumps(d, indent=1)
        (HERE / f"{name}.json").write_text(text + "\n")
        print(f"wrote scenarios/{name}.json ({len(d.get('obstacles', []))} obstacles, "
              f"{len(d.get('agents', []))} agents)")
        if name in DEMO_PATHS:
            out = HERE.parent / "paths" / "demos" / f"{DEMO_PATHS[name]}.json"
            out.parent.mkdir(exist_ok=True)
            doc = {"name": DEMO_PATHS[name], "description": d["description"], "scene": f"scenarios/{name}.json",
                   "points": d["agents"][0]["timed_path"]["points"]}
            out.write_text(json.dumps(doc) + "\n")
            print(f"wrote paths/demos/{out.name}")


if __name__ == "__main__":
    main()
