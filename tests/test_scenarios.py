"""End-to-end scenarios (scenarios/*.json) on LAFAN1: what must happen in each.

The database is ``lafan1-60fps`` with mirrored copies and body ellipses (schema
``environment``); the fence/ceilings scenario adds height features and LAFAN1's
jumping/crawling takes (:func:`motionmatch.environment.data.environment_clips`). Each run
is compared, where it says something, with plain motion matching on the same controller
and inputs (``EnvironmentSettings(enabled=False)``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from motionmatch.database import MotionDatabase
from motionmatch.database.schema import environment_schema
from motionmatch.environment import load_scenario
from motionmatch.environment.collision import body_distances, collision_summary, pair_distances
from motionmatch.metrics.scenario import body_tracks, scenario_report
from motionmatch.runtime.environment_matching import EnvironmentMatcher, EnvironmentSettings
from motionmatch.runtime.scenarios import run_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


@pytest.fixture(scope="module")
def env_db(data_dir):
    from motionmatch.datasets import load_folder

    clips = load_folder(data_dir / "lafan1-60fps")
    db = MotionDatabase.build(clips, mirror_copies=True, schema=environment_schema())
    return db, EnvironmentMatcher(db)


@pytest.fixture(scope="module")
def heights_db(data_dir):
    from motionmatch.environment.data import environment_clips

    if not (data_dir / "lafan1" / "obstacles1_subject1.bvh").exists():
        pytest.skip("lafan1/obstacles1_subject1.bvh not found (jumping and crawling clips)")
    db = MotionDatabase.build(environment_clips(data_dir), mirror_copies=True,
                              schema=environment_schema(heights=True))
    return db, EnvironmentMatcher(db)


def _run(dbm, name, enabled=True, **penalty):
    db, m = dbm
    sc = load_scenario(SCENARIOS / f"{name}.json")
    p = dict(sc.penalty)
    p.update(penalty)
    st = EnvironmentSettings.from_dicts(p, sc.search, sc.controller.get("controls"), enabled=enabled)
    world, rec = run_scenario(db, sc, settings=st, matcher=m)
    rep = scenario_report(world, rec, sc)
    return sc, world, rec, rep


def _obstacle_distances(world, rec, track, names=None):
    """``[F, M]`` body-obstacle signed distances of one agent (obstacles by name if given)."""
    scene = world.scene
    F = track.shape[0]
    if scene.moving_ids.size:
        rows = np.stack([scene.rows_at(f / rec.fps) for f in range(F)])
    else:
        rows = scene.rows_at(0.0)
    d = body_distances(track, rows)
    if names is not None:
        keep = [i for i, o in enumerate(scene.obstacles) if o.name in names]
        d = d[:, keep]
    return d


def _in_region(rec, region, agent=0):
    z = rec.root_positions[agent, :, 2]
    return (z >= region["z"][0]) & (z <= region["z"][1])


# ------------------------------------------------------------------------------------ single characters
def test_scenario_files_parse():
    names = sorted(p.stem for p in SCENARIOS.glob("*.json"))
    for n in ("corridor-narrowing", "zigzag-cones", "cubes-approach", "car", "corridors-pass", "doors",
              "doors-small", "fence-ceilings", "dense-obstacles", "dense-crowd", "narrow-passage",
              "narrow-passage-disk", "run-walk", "zigzag-cones-door"):
        assert n in names
        sc = load_scenario(SCENARIOS / f"{n}.json")
        assert sc.expect and sc.description and sc.duration > 0
    assert len(load_scenario(SCENARIOS / "doors.json").agents) == 100


def test_zigzag_cones(env_db):
    """Forward key only: the character weaves through the cones to the end, with short
    and rare intersections (plain motion matching walks straight through them)."""
    sc, _world, rec, rep = _run(env_db, "zigzag-cones")
    assert rec.root_positions[0, -1, 2] > sc.regions["exit"]["z"][0]
    assert rep["collision_time_s"] < 0.3 and rep["collision_fraction"] < 0.10
    _, _, _, plain = _run(env_db, "zigzag-cones", enabled=False)
    assert rep["collision_fraction"] < 0.5 * plain["collision_fraction"]
    assert rep["collision_time_s"] < 0.5 * plain["collision_time_s"]


def test_cubes_approach(env_db):
    """No input: as the cubes come, the character steps out of their way and is not hit;
    plain motion matching stands still and is run over."""
    _sc, _world, rec, rep = _run(env_db, "cubes-approach")
    moved = np.hypot(*(rec.root_positions[0, -1, [0, 2]] - rec.root_positions[0, 0, [0, 2]]))
    assert moved > 0.4
    assert rep["collision_fraction"] < 0.02
    _, _, _, plain = _run(env_db, "cubes-approach", enabled=False)
    assert plain["collision_fraction"] > 0.15


def test_car_backs_away(env_db):
    """Walking toward an oncoming car in a street too narrow to pass it: the character
    backs away (moves with the car, still facing it) instead of being run over."""
    _sc, world, rec, _rep = _run(env_db, "car")
    z = rec.root_positions[0, :, 2]
    peak = int(np.argmax(z))
    assert z[peak] - z[-1] > 2.0  # it went back by more than 2 m
    back = slice(peak, len(z))
    yaw = np.degrees(np.abs(rec.root_yaws[0, back]))
    assert np.mean(yaw < 60) > 0.6  # mostly still facing the car (+Z): backing, not fleeing
    track = body_tracks(world, rec)[0]
    car = collision_summary(_obstacle_distances(world, rec, track, {"car"}), rec.fps)
    _sc2, world2, rec2, _ = _run(env_db, "car", enabled=False)
    car_plain = collision_summary(_obstacle_distances(world2, rec2, body_tracks(world2, rec2)[0], {"car"}), rec2.fps)
    assert car["collision_time_s"] < 0.5 < car_plain["collision_time_s"]
    assert car["collision_fraction"] < 0.5 * car_plain["collision_fraction"]


def test_corridor_narrowing(env_db):
    """Forward key only, the corridor narrowing from 2 m to 0.35 m: the character slows down
    and turns its body more than 45 degrees from the walking direction as the corridor
    narrows, and does not force its way through the walls (plain motion matching walks
    straight through them).

    It does not get through the 0.35 m part (the issue's outcome is not met with LAFAN1):
    slim side-stepping poses exist (5% of side-stepping frames are under 0.19 m across
    their motion), but hardly a frame keeps its present and three future body ellipses
    within a straight 0.35 m corridor (10 of 81,854 moving frames, one slow side-step,
    mirrored; test_environment_data.test_corridor_widths_explain_the_narrow_corridor), and
    no clip side-steps 0.8 m along a line within 0.35 m except a 2.3 m/s boxing shuffle;
    the others need 0.42 m or more. So it stops at the entrance, turned; with 0.6 m it
    passes (test_corridor_narrowing_wider). See scenarios/README.md."""
    sc, _world, rec, rep = _run(env_db, "corridor-narrowing")
    z = rec.root_positions[0, :, 2]
    speed = np.linalg.norm(np.diff(rec.root_positions[0, :, [0, 2]].T, axis=0), axis=1) * rec.fps
    wide = (z > 0.5) & (z < 2.0)
    narrow_approach = z > 4.5  # the last metre before the narrowest part (0.6 m wide and less)
    assert speed[narrow_approach[1:]].mean() < 0.5 * speed[wide[1:]].mean()
    yaw = np.degrees(np.abs(rec.root_yaws[0]))
    assert np.any(yaw[narrow_approach] > 45)
    assert z.max() < sc.regions["narrow"]["z"][0] + 0.3  # it does not walk into the walls
    _, _, rec_plain, plain = _run(env_db, "corridor-narrowing", enabled=False)
    assert rec_plain.root_positions[0, -1, 2] > sc.regions["exit"]["z"][0]  # plain MM walks through walls
    # it touches the walls at the entrance while turning (measured: ~20% of the time,
    # ~13 cm deep on average), in shorter intersections than plain motion matching's
    # passage through them (measured 0.17-0.26 s against 0.51 s)
    assert rep["collision_time_s"] < plain["collision_time_s"]


def test_corridor_narrowing_wider(env_db):
    """The same corridor narrowing to 0.6 m is traversed, slowing down in the narrow part."""
    from motionmatch.environment import parse_scenario
    from motionmatch.environment.scenario import Scenario

    db, m = env_db
    import json
    import sys

    sys.path.insert(0, str(SCENARIOS))
    try:
        import make_scenarios as M
    finally:
        sys.path.pop(0)
    d = M.corridor_narrowing()
    d["obstacles"] = M.side_walls([(-1.0, 1.0), (2.0, 1.0), (5.5, 0.3), (6.3, 0.3), (9.0, 1.0), (14.0, 1.0)])
    sc: Scenario = parse_scenario(json.loads(json.dumps(d)))
    st = EnvironmentSettings.from_dicts(sc.penalty, sc.search, None)
    _world, rec = run_scenario(db, sc, settings=st, matcher=m)
    z = rec.root_positions[0, :, 2]
    assert z[-1] > 9.0


def test_a_looping_path_agent_goes_round_and_keeps_to_its_line(env_db, tmp_path):
    """A ``path`` agent with ``loop`` walks a 10 m square at 1.3 m/s for 12 s: past its
    end into a second round (every side passed twice), never far from the line (corners
    cut by less than the steering's waypoint radius)."""
    import json

    from motionmatch.geometry.polyline import distance_to_path

    db, m = env_db
    square = [[0, 0], [0, 2.5], [2.5, 2.5], [2.5, 0], [0, 0]]
    spec = {"name": "loop", "duration": 12.0, "obstacles": [],
            "agents": [{"name": "walker", "start": [0, 0], "facing": [0, 1], "path": square, "speed": 1.3,
                        "loop": True}]}
    (tmp_path / "loop.json").write_text(json.dumps(spec))
    sc = load_scenario(tmp_path / "loop.json")
    _world, rec = run_scenario(db, sc, matcher=m)
    xz = rec.root_positions[0][:, [0, 2]]
    walked = float(np.sum(np.linalg.norm(np.diff(xz, axis=0), axis=1)))
    assert walked > 11.0, walked
    line = np.array([[x, 0.0, z] for x, z in square])
    off = distance_to_path(rec.root_positions[0], line)
    assert float(off.max()) < 0.8, float(off.max())
    for mid in ([0, 1.25], [1.25, 2.5], [2.5, 1.25], [1.25, 0]):  # every side passed on both rounds
        near = np.linalg.norm(xz - mid, axis=1) < 0.7
        visits = int(near[0]) + int(np.sum(near[1:] & ~near[:-1]))
        assert visits >= 2, (mid, visits)


def test_corridors_pass(env_db):
    """Two characters walking toward each other pass each other in corridors 1.55, 1.20 and
    0.95 m wide: both get past the middle and near the far end, and rarely overlap."""
    sc, world, rec, _rep = _run(env_db, "corridors-pass")
    tracks = body_tracks(world, rec)
    for k in range(3):
        north, south = 2 * k, 2 * k + 1
        zn, zs = rec.root_positions[north, :, 2], rec.root_positions[south, :, 2]
        assert zn[-1] > 9.0 and zs[-1] < 3.0, (sc.agents[north].name, zn[-1], zs[-1])
        pair = collision_summary(pair_distances(tracks[north], tracks[south]), rec.fps)
        assert pair["collision_fraction"] < 0.2 and pair["collision_time_s"] < 0.5


# ------------------------------------------------------------------------------------ crowds
@pytest.mark.slow
def test_doors_small_crowd(env_db):
    """Two groups of 6 cross a wall through a 1.85 m and a 0.9 m door (crowd steering in a
    World): nearly everybody gets through and reaches its goal, bodies rarely overlap,
    searches are spread over frames."""
    sc, _world, rec, rep = _run(env_db, "doors-small")
    start_side = np.sign([a.start[1] for a in sc.agents])
    crossed = np.sign(rec.root_positions[:, -1, 2]) != start_side
    assert crossed.mean() >= 0.75
    arrived = [np.hypot(*(rec.root_positions[i, -1, [0, 2]] - a.goal)) < 1.0 for i, a in enumerate(sc.agents)]
    assert np.mean(arrived) >= 0.75
    assert rep["agent_collision_fraction"] < 0.05 and rep["collision_time_s"] < 0.5
    assert rep["realtime_factor"] > 0  # reported; how fast is the benchmarks' job (bench crowd), not a test's
    # the periodic searches are spread over frames (12 agents, one search each per 10
    # frames: 1.2 per frame; sharp intent changes add a few)
    per_frame = rec.searched[:, 1:].sum(axis=0)
    assert per_frame.mean() < 1.5 and per_frame.max() <= 6


# ------------------------------------------------------------------------------------ heights
@pytest.mark.slow
def test_fence_and_ceilings(heights_db):
    """Forward key only, with height features and LAFAN1's obstacle and crawling takes: the
    character gets over the 0.4 m fence with its body above it (LAFAN1 has no jump from
    the floor over an obstacle: its subject jogs over a 0.48 m box, a foot on it, and that
    is what is chosen; plain motion matching walks through the fence), then passes under
    the 1.25 m ceiling crouched or crawling, and gets down on the ground under the 0.75 m
    one, though not low enough all the way (see scenarios/README.md)."""
    from motionmatch.geometry.shapes import ellipse_obstacle_distances

    sc, world, rec, _ = _run(heights_db, "fence-ceilings")
    track = body_tracks(world, rec)[0]
    z = rec.root_positions[0, :, 2]
    names = [o.name for o in world.scene.obstacles]
    fence_top = world.scene.obstacles[names.index("fence")].height[1]  # 0.4 m
    # over the fence: it crosses it, and its body is above it while its footprint is over it
    assert z.max() > sc.regions["ceiling-high"]["z"][1]  # past the fence and the first ceiling
    rows = world.scene.rows_at(0.0)
    over = ellipse_obstacle_distances(track[:, :6], rows[names.index("fence")][None])[:, 0] < 0.0
    assert over.sum() >= 10
    # (the rest: take-off and landing, the ellipse's front over the fence while the trailing
    # foot is still on the floor; measured 68% above)
    above = track[over, 6] > fence_top
    assert above.mean() > 0.5, above.mean()
    fence_c = collision_summary(_obstacle_distances(world, rec, track, {"fence"}), rec.fps)
    assert fence_c["collision_time_s"] < 0.25 and fence_c["collision_fraction"] < 0.02, fence_c
    # under the 1.25 m ceiling: crouched or crawling (body top = highest joint + 0.1 m)
    top = track[:, 7] + 0.1
    hi = _in_region(rec, sc.regions["ceiling-high"])
    assert hi.sum() / rec.fps > 1.0
    assert np.mean(top[hi] < 1.25) > 0.9
    high_c = collision_summary(_obstacle_distances(world, rec, track, {"ceiling-high"}), rec.fps)
    assert high_c["collision_time_s"] < 0.6, high_c
    # under the 0.75 m ceiling: never upright (standing, the body top is ~1.65 m), down on
    # the ground at times; not always under it (measured: median top 0.75-1.0 m, see
    # scenarios/README.md), and through
    lo = _in_region(rec, sc.regions["ceiling-low"])
    assert lo.sum() / rec.fps > 1.0
    assert np.mean(top[lo] < 1.4) > 0.95
    assert np.percentile(top[lo], 10) < 0.8
    assert z.max() > sc.regions["ceiling-low"]["z"][1]
    # plain motion matching walks through the fence (its feet on the floor) and upright
    # under the ceilings
    _, world_p, rec_p, _ = _run(heights_db, "fence-ceilings", enabled=False)
    track_p = body_tracks(world_p, rec_p)[0]
    over_p = ellipse_obstacle_distances(track_p[:, :6], rows[names.index("fence")][None])[:, 0] < 0.0
    assert over_p.sum() >= 10 and np.mean(track_p[over_p, 6] > fence_top) < 0.1
    inside = _obstacle_distances(world, rec, track, {"fence"}) < 0
    inside_p = _obstacle_distances(world_p, rec_p, track_p, {"fence"}) < 0
    assert inside_p.sum() > 3 * inside.sum()  # measured: 1.02 s against 0.2 s
    for name, c in (("ceiling-high", high_c),
                    ("ceiling-low", collision_summary(_obstacle_distances(world, rec, track, {"ceiling-low"}), rec.fps))):
        c_p = collision_summary(_obstacle_distances(world_p, rec_p, track_p, {name}), rec_p.fps)
        assert c["collision_time_s"] < 0.5 * c_p["collision_time_s"], (name, c, c_p)


# ------------------------------------------------------------------------------------ evaluation
@pytest.mark.slow
def test_dense_obstacles_acceptance(env_db):
    """The evaluation scenario: the full method's collision fraction is at most a third of
    plain motion matching's and its path error at most 0.1 m larger."""
    _sc, _world, _rec, full = _run(env_db, "dense-obstacles")
    _, _, _, plain = _run(env_db, "dense-obstacles", enabled=False)
    assert full["collision_fraction"] <= plain["collision_fraction"] / 3
    assert full["error_m"] <= plain["error_m"] + 0.1
    assert full["diversity"] > plain["diversity"]


# ------------------------------------------------------------------------------------ the four controls
# One small scene per control (paper Sec. 5.3), run twice with the shared defaults and only
# that control changed (the ends of its 0..4 range, or 0..1 for Evasion); each test checks
# the effect in the direction the paper reports.
def _solo(env_db, obstacles, keys, controls, duration):
    """One character holding ``keys`` from the origin (facing +Z) among ``obstacles`` for
    ``duration`` s with ``controls``: ``(record, [F, M] body-obstacle distances)``."""
    from motionmatch.environment import parse_scenario

    db, m = env_db
    sc = parse_scenario({"name": "control", "duration": duration, "obstacles": obstacles,
                         "agents": [{"name": "hero", "start": [0, 0], "facing": [0, 1],
                                     "script": {"events": [{"t": 0, "keys": keys}]}, "controls": controls}]})
    world, rec = run_scenario(db, sc, matcher=m)
    return rec, body_distances(body_tracks(world, rec)[0], world.scene.rows_at(0.0))


def _transitions(rec) -> int:
    """Non-sequential database frames in the played motion."""
    f = rec.frames[0]
    return int(np.sum(f[1:] != f[:-1] + 1))


def test_responsiveness_follows_the_input_more_closely(env_db):
    """Responsiveness (Eq. 3): "higher values result in the character more closely
    following the intended trajectory" (and, in the paper's door crowd, high
    responsiveness crosses quickly while low keeps its distance). Forward key past a post
    0.45 m right of the line (its near side 0.15 m from it) for 6 s: at 4 the character
    keeps to the input and gets further along it (measured 5.33 m against 4.65 m), at 0.5
    it gives the post more room (clearance 0.10 m against -0.07 m: at 4 it brushes it)."""
    post = [{"shape": "disk", "center": [0.45, 3.0], "radius": 0.3}]
    lo, d_lo = _solo(env_db, post, ["w"], {"responsiveness": 0.5}, 6.0)
    hi, d_hi = _solo(env_db, post, ["w"], {"responsiveness": 4.0}, 6.0)
    z_lo, z_hi = lo.root_positions[0, -1, 2], hi.root_positions[0, -1, 2]
    assert z_hi > z_lo + 0.3, (z_hi, z_lo)
    assert d_lo.min() > d_hi.min() + 0.08, (d_lo.min(), d_hi.min())


def test_continuity_makes_fewer_transitions(env_db):
    """Continuity (Eq. 4): "increasing this weight can reduce the number of potential
    transitions". The same keyboard turns (W, D, W, A, S) with continuity 4 jump to
    another database frame fewer times than with 0.1 (measured 18 against 25)."""
    from motionmatch.environment import parse_scenario

    db, m = env_db
    events = [{"t": 0, "keys": ["w"]}, {"t": 1.5, "keys": ["d"]}, {"t": 3, "keys": ["w"]}, {"t": 4.5, "keys": ["a"]},
              {"t": 6, "keys": ["s"]}]
    counts = []
    for c in (0.1, 4.0):
        sc = parse_scenario({"name": "continuity", "duration": 8.0, "agents": [
            {"name": "hero", "start": [0, 0], "script": {"events": events}, "controls": {"continuity": c}}]})
        _world, rec = run_scenario(db, sc, matcher=m)
        counts.append(_transitions(rec))
    assert counts[1] < 0.8 * counts[0], counts


def test_evasion_turns_the_body_near_obstacles(env_db):
    """Evasion (Eq. 5): near obstacles the direction weight falls toward E, so that "the
    character's body orientation adapts to the surrounding obstacles". Forward key into
    the corridor narrowing from 2 m to 0.35 m (``corridor_narrowing`` of
    ``scenarios/make_scenarios.py``, 14 s: it reaches the narrow part at about 10 s): with
    E = 0.01 the character turns its body across the input direction at the entrance
    (measured: up to 96 degrees, more than 45 degrees 30% of the time there), with E = 1
    (off) it keeps facing the way it is told (at most 15 degrees)."""
    import json
    import sys

    from motionmatch.environment import parse_scenario

    db, m = env_db
    sys.path.insert(0, str(SCENARIOS))
    try:
        import make_scenarios as M
    finally:
        sys.path.pop(0)
    turned = []
    for e in (1.0, 0.01):
        d = M.corridor_narrowing()
        d["duration"] = 14.0
        d["agents"][0]["controls"] = {"evasion": e}
        _world, rec = run_scenario(db, parse_scenario(json.loads(json.dumps(d))), matcher=m)
        near = rec.root_positions[0, :, 2] > 4.5  # the last metre before the narrow part
        assert near.sum() > 120
        turned.append(float(np.degrees(np.abs(rec.root_yaws[0, near])).max()))
    assert turned[0] < 30.0 < 45.0 < turned[1], turned


def test_anticipation_avoids_earlier_without_slowing(env_db):
    """Anticipation (Eq. 6): "the higher the anticipation, the earlier the character will
    avoid obstacles without having to slow down". Sprinting (3 m/s) at a post on the line:
    with 4 it leaves the line (by 0.2 m) further before the post than with 0 (measured at
    z = 4.88 m against 5.24 m, the post's near side at 6.6 m), at the same speed, and
    grazes it less deep (-0.19 m against -0.27 m: LAFAN1 has few sharp sprinting
    swerves)."""
    post = [{"shape": "disk", "center": [0.0, 7.0], "radius": 0.4}]
    first, speed, clear = [], [], []
    for a in (0.0, 4.0):
        rec, d = _solo(env_db, post, ["w", "shift"], {"anticipation": a}, 4.0)
        p = rec.root_positions[0]
        off = np.abs(p[:, 0]) > 0.2
        assert off.any()
        first.append(float(p[np.argmax(off), 2]))
        v = np.linalg.norm(np.diff(p[:, [0, 2]], axis=0), axis=1) * rec.fps
        speed.append(float(v[p[1:, 2] < 5.0].mean()))
        clear.append(float(d.min()))
    assert first[1] < first[0] - 0.2, first  # earlier: further from the post (z = 7)
    assert speed[1] > 0.9 * speed[0], speed
    assert clear[1] > clear[0] + 0.04, clear


# ------------------------------------------------------------------------------------ the paper's scenes (issue 33 item 5)
def _passing(rec, a: int, b: int, within: float = 1.5) -> np.ndarray:
    """``[F]`` frames where agents ``a`` and ``b`` are within ``within`` m of each other along z."""
    return np.abs(rec.root_positions[a, :, 2] - rec.root_positions[b, :, 2]) < within


def test_narrow_passage_ellipses_pass_disks_get_stuck(env_db):
    """Fig. 7 / Sec. 6.5: two characters meet in a passage 1.0 m wide. With body ellipses
    they get past each other and both reach the far end (measured: z 11.84 and 0.17 of 12
    and 0); with the disk-body ablation (each body the circle around its ellipse) no
    moving pose fits past the other one: they never get past each other and neither gets
    near its far end (measured: north at most 5.2 m, then pushed back to 2.9 m by the
    other, which ends at 3.8 m)."""
    sc, _world, rec, _rep = _run(env_db, "narrow-passage")
    zn, zs = rec.root_positions[0, :, 2], rec.root_positions[1, :, 2]
    assert zn[-1] > sc.regions["north-end"]["z"][0] and zs[-1] < sc.regions["south-end"]["z"][1], (zn[-1], zs[-1])
    disk = load_scenario(SCENARIOS / "narrow-passage-disk.json")
    assert disk.penalty == {"disk_body": True} and not sc.penalty.get("disk_body")
    assert [o.center for o in disk.scene().obstacles] == [o.center for o in sc.scene().obstacles]
    _, _, rec_d, _ = _run(env_db, "narrow-passage-disk")
    zn, zs = rec_d.root_positions[0, :, 2], rec_d.root_positions[1, :, 2]
    assert np.all(zn < zs), "with disks the two got past each other"
    assert zn.max() < sc.regions["north-end"]["z"][0] and zs.min() > sc.regions["south-end"]["z"][1], (zn.max(), zs.min())


def _run_walk_numbers(env_db) -> dict:
    """The runner's and the walker's passing in ``run-walk.json``: torso rotation (max over
    the passing, degrees), speed before / during it, clearance to the oncoming walker."""
    from motionmatch.metrics.scenario import torso_rotations

    _sc, world, rec, _rep = _run(env_db, "run-walk")
    torso = torso_rotations(world, rec)
    tracks = body_tracks(world, rec)
    out = {}
    for me, other in ((0, 1), (2, 3)):
        near = _passing(rec, me, other)
        v = np.linalg.norm(np.diff(rec.root_positions[me][:, [0, 2]], axis=0), axis=1) * rec.fps
        first = int(np.argmax(near))
        out[rec.names[me]] = {
            "torso_max": float(np.nanmax(torso[me, near])),
            "speed_before": float(v[max(0, first - 90):first].mean()),
            "speed_during": float(v[near[1:]].mean()),
            "clearance": float(pair_distances(tracks[me], tracks[other]).min()),
        }
    return out


@pytest.fixture(scope="module")
def run_walk(env_db):
    return _run_walk_numbers(env_db)


def test_run_walk_runner_keeps_its_speed(run_walk):
    """Fig. 17: the runner (3.5 m/s) meeting a walker keeps its speed while they pass
    (measured 3.45 m/s during against 3.32 before), and the two walkers (1.3 m/s) get past
    each other without touching, one turning its torso (measured 50 degrees, 0.10 m
    clearance)."""
    runner, walker = run_walk["runner"], run_walk["walker"]
    assert runner["speed_during"] > 0.9 * runner["speed_before"] > 2.5, runner
    assert walker["clearance"] > 0.0, walker


@pytest.mark.xfail(strict=True, reason="measured with today's defaults: the runner does not avoid (torso 14 "
                   "degrees, 0.45 m into the oncoming walker's body) while the walkers' avoidance turns a "
                   "torso 50 degrees; benchmarks/README.md, 'Paper scenes'")
def test_run_walk_runner_turns_more_than_the_walker(run_walk):
    """Fig. 17's claim: the runner turns its torso considerably to avoid the oncoming walker
    (more than a walker meeting the same walker does) and does not collide."""
    runner, walker = run_walk["runner"], run_walk["walker"]
    assert runner["torso_max"] > walker["torso_max"] and runner["clearance"] > 0.0, (runner, walker)


def test_corridors_torso_rotation_grows_as_they_narrow(env_db):
    """Fig. 16: the narrower the corridor, the more the two characters passing each other
    turn their bodies. The report's torso rotation (the shoulders' turn away from square
    to the direction of travel), its 90th percentile over each character's moving frames,
    averaged over the corridor's two: measured 13.7, 24.3 and 36.6 degrees for 1.55, 1.20
    and 0.95 m (means 7.1, 10.4, 13.3)."""
    sc, _world, _rec, rep = _run(env_db, "corridors-pass")
    by_width = []
    for k in range(3):
        pair = rep["agents"][2 * k:2 * k + 2]
        assert [a["name"][:5] for a in pair] == [sc.agents[2 * k].name[:5]] * 2
        by_width.append(np.mean([a["torso_rotation_deg"]["p90"] for a in pair]))
    wide, middle, narrow = by_width  # 1.55, 1.20, 0.95 m
    assert narrow > middle + 5.0 > wide + 10.0, by_width
    assert rep["torso_rotation_deg"]["moving_frames"] > 3000


@pytest.fixture(scope="module")
def dense_crowd_runs(env_db):
    """``dense-crowd.json`` run with the method and with plain motion matching: ``(scenario,
    record, report, plain record, plain report)``."""
    sc, _world, rec, rep = _run(env_db, "dense-crowd")
    _, _, rec_p, plain = _run(env_db, "dense-crowd", enabled=False)
    return sc, rec, rep, rec_p, plain


@pytest.mark.slow
def test_dense_crowd_no_collisions(dense_crowd_runs):
    """Fig. 6: forward key only into a static crowd of 83 standing people (0.9 per square
    metre): the character weaves in, turning its body, and only grazes them (measured: 4.6%
    of the frames in 40 grazes of 0.055 s, torso turned 53 degrees at the 90th percentile)
    while plain motion matching walks straight through them (15.6% of the frames, 0.62 s
    each, and through to z = 35.6 m)."""
    sc, rec, rep, rec_p, plain = dense_crowd_runs
    assert rep["collision_time_s"] < 0.1 and rep["collision_fraction"] < 0.08, rep["collision_fraction"]
    assert rep["collision_fraction"] < plain["collision_fraction"] / 2
    assert plain["collision_time_s"] > 5 * rep["collision_time_s"]
    assert rec.root_positions[0, :, 2].max() > sc.regions["crowd"]["z"][0] + 2.0  # it goes in (measured 5.9 m)
    assert rec_p.root_positions[0, -1, 2] > sc.regions["exit"]["z"][0]
    assert rep["torso_rotation_deg"]["p90"] > 30.0


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="measured with today's defaults and the forward key only: it stops 3.4 m "
                   "into the crowd (z = 5.9 m of 2.5-11.5) in front of a person and stands there from t = 24 s; "
                   "benchmarks/README.md, 'Paper scenes'")
def test_dense_crowd_crosses(dense_crowd_runs):
    """Fig. 6's claim: the character crosses the crowd and comes out the other side."""
    sc, rec, _rep, _rec_p, _plain = dense_crowd_runs
    assert rec.root_positions[0, -1, 2] > sc.regions["exit"]["z"][0], rec.root_positions[0, -1, 2]


@pytest.mark.slow
def test_zigzag_cones_door(env_db):
    """Fig. 13: forward key only, the cones of zigzag-cones, then a door ajar (0.53 m
    between its leaf's end and the other jamb): the character weaves through the cones,
    reaches the door (measured at 22.5 s), works its way through it turning its torso
    (measured: up to 90 degrees, more than 45 degrees in 27% of the moving frames there,
    most of the 24 s there standing or inching) and comes out the other side (at 47 s),
    grazing the door and its wall only briefly (10 grazes of 0.06 s, 1% of the frames)."""
    from motionmatch.metrics.scenario import torso_rotations

    sc, world, rec, rep = _run(env_db, "zigzag-cones-door")
    z = rec.root_positions[0, :, 2]
    assert z[-1] > sc.regions["exit"]["z"][0], z[-1]
    at_door = _in_region(rec, sc.regions["door"])
    torso = torso_rotations(world, rec)[0, at_door]
    moving = torso[np.isfinite(torso)]
    assert moving.size > 30 and moving.max() > 60.0 and np.mean(moving > 45.0) > 0.15, moving.max()
    track = body_tracks(world, rec)[0]
    door = collision_summary(_obstacle_distances(world, rec, track, {"door-leaf", "wall-west", "wall-east"}), rec.fps)
    assert door["collision_time_s"] < 0.15 and door["collision_fraction"] < 0.03, door
    assert rep["collision_fraction"] < 0.08 and rep["collision_time_s"] < 0.15, rep["collision_fraction"]
