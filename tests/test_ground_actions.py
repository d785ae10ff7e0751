"""Jumps and creeping on uneven ground (issue 31, "Jumps and creeping work on it"), on the
real data: LAFAN1 with the 3D schema and the original ``ground1_subject4`` take for the
creeping (as ``test_runtime_e2e.py`` builds it), each terrain run compared with the same
script on the flat floor.

* a jump whose take-off and landing are at different heights (onto a 25 cm step, down
  from a 30 cm one): the character leaves the lower ground and lands on the other, its
  hips after landing as high above the ground as on the floor, feet at contacts on the
  surface, none in it, no pop. Up a 60 cm ledge it lands on top, but the root's lift
  (a spring, half-life 0.12 s) is still 3.5-6.5 cm short at touch-down and the trailing
  foot, carried across the ledge's edge at the top's height, cannot reach above it (its
  leg at full stretch): 7.5 cm into the ledge for two frames (strict xfail);
* creeping (the C key) over hills and up steps: the same modes, feet on the surface
  and no deeper than on the floor, no more skating, no pop. The hands are not placed
  (the stage puts the feet on the ground, not the hands): on the hills they go up to
  41 cm into the rising ground (strict xfail).
"""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.anim import load_bvh
from motionmatch.control.script import parse_script
from motionmatch.database import MotionDatabase, default_schema
from motionmatch.environment.scene import Scene
from motionmatch.environment.terrain import HeightField
from motionmatch.metrics.feet import foot_skating
from motionmatch.metrics.ground import ground_report
from motionmatch.runtime.offline import run_script

CELL = 0.1
AXIS = np.arange(-5.0, 25.0 + 1e-9, CELL)
JUMP = {"duration": 7.0, "events": [{"t": 0.0, "keys": ["w"]}, {"t": 3.0, "keys": ["w", "j"]}, {"t": 3.3, "keys": ["w"]}]}
CREEP = {"duration": 10.0, "events": [{"t": 0.0, "keys": ["w"]}, {"t": 1.0, "keys": ["w", "c"]}, {"t": 9.0, "keys": ["w"]}]}


def _field(h_of) -> HeightField:
    X, Z = np.meshgrid(AXIS, AXIS)
    return HeightField((AXIS[0], AXIS[0]), CELL, h_of(X, Z))


@pytest.fixture(scope="module")
def db(data_dir):
    from motionmatch.datasets import load_folder

    folder, take = data_dir / "lafan1-60fps", data_dir / "lafan1" / "ground1_subject4.bvh"
    if not folder.is_dir() or not take.is_file():
        pytest.skip(f"{folder} or {take} not found")
    ground = load_bvh(take)
    ground.tags = ("creep",)
    return MotionDatabase.build([*load_folder(folder), ground], mirror_copies=True, schema=default_schema(vertical=True))


def _acc_p99(rec) -> float:
    wp = rec.motion.world_positions
    return float(np.percentile(np.linalg.norm(wp[2:] - 2 * wp[1:-1] + wp[:-2], axis=-1) * rec.motion.fps ** 2, 99))


def _measure(db, rec, terrain) -> dict:
    wp = rec.motion.world_positions
    out = ground_report(wp, rec.frames, db, terrain)
    out["skating"] = foot_skating(wp[:, list(db.foot_joints)], db.contacts[rec.frames], rec.motion.fps)
    out["acc_p99"] = _acc_p99(rec)
    return out


@pytest.fixture(scope="module")
def jump_flat(db):
    """The jump on the floor, and the z between its flight's take-off and touch-down
    (where the terrains below put their edge)."""
    rec = run_script(db, parse_script(JUMP))
    wp = rec.motion.world_positions
    jump = np.flatnonzero(rec.modes == "jump")
    assert jump.size, "no jump on the floor"
    toes = wp[:, list(db.foot_joints), 1].min(axis=1)
    air = np.flatnonzero(toes > 0.05)
    air = air[(air >= jump[0]) & (air <= jump[-1] + 20)]
    assert air.size > 5, "no flight phase on the floor"
    return rec, 0.5 * (wp[air[0], 0, 2] + wp[air[-1], 0, 2])


LEDGE_UP = pytest.param(0.0, 0.6, id="up-60cm", marks=pytest.mark.xfail(
    strict=True, reason="the lift lags in flight; the trailing foot at full stretch: 7.5 cm into the ledge (issue 31)"))


@pytest.mark.parametrize("low, high", [(0.0, 0.25), (0.3, 0.0), LEDGE_UP], ids=["up-25cm", "down-30cm", "up-60cm"])
def test_a_jump_lands_on_the_ground_at_another_height(db, jump_flat, low, high):
    flat, edge = jump_flat
    terrain = _field(lambda X, Z: np.where(Z > edge, high, low))
    rec = run_script(db, parse_script(JUMP), scene=Scene(terrain=terrain))
    wp = rec.motion.world_positions
    assert np.isfinite(wp).all()
    jump = np.flatnonzero(rec.modes == "jump")
    assert jump.size and abs(jump[0] - np.flatnonzero(flat.modes == "jump")[0]) <= 2
    ground = terrain.heights(wp[:, 0, [0, 2]])
    assert ground[jump[0]] == pytest.approx(low) and ground[-1] == pytest.approx(high)  # (took off low, landed high)
    after = min(jump[-1] + 30, len(wp) - 1)  # half a second after the jump
    fwp = flat.motion.world_positions
    # the hips after landing as high above the new ground as on the floor; the root on it
    assert wp[after, 1, 1] - ground[after] == pytest.approx(fwp[after, 1, 1], abs=0.05)
    assert abs(wp[-1, 0, 1] - high) < 0.02
    m, f = _measure(db, rec, terrain), _measure(db, flat, None)
    # (the floor's own error is the jump's contact labels, 7 cm; at the edge the take-off foot's toe
    # is over the lower ground: 1.6 cm more, jumping down)
    assert m["foot_ground_error_m"] <= max(0.03, f["foot_ground_error_m"] + 0.02), (m, f)
    assert m["foot_penetration_m"] <= 0.03, m
    # no foot sinks into the ground in flight or at landing
    toes = wp[:, list(db.foot_joints)]
    under = toes[..., 1] - terrain.heights(toes[..., [0, 2]].reshape(-1, 2)).reshape(toes.shape[:2])
    assert under.min() > -0.01
    assert m["skating"] <= 1.5 * f["skating"], (m, f)
    assert m["acc_p99"] <= 1.6 * f["acc_p99"], (m, f)  # (the hips' lift onto the new height in flight)


@pytest.fixture(scope="module")
def creep_flat(db):
    rec = run_script(db, parse_script(CREEP))
    return rec, _measure(db, rec, None)


CREEP_GROUNDS = {
    # hills along the way: 0.5 m from trough to crest every 3 m
    "hills": _field(lambda X, Z: 0.25 * (1.0 - np.cos(2.0 * np.pi * Z / 3.0))),
    # steps of 15 cm every 0.6 m from z = 1 m, up to 0.6 m
    "steps": _field(lambda X, Z: np.floor(np.clip(Z - 1.0, 0.0, 2.4) / 0.6) * 0.15),
}


def _creep(db, name):
    terrain = CREEP_GROUNDS[name]
    rec = run_script(db, parse_script(CREEP), scene=Scene(terrain=terrain))
    return terrain, rec


@pytest.mark.parametrize("name", list(CREEP_GROUNDS))
def test_creeping_keeps_its_feet_on_the_ground(db, creep_flat, name):
    flat, f = creep_flat
    terrain, rec = _creep(db, name)
    creeping = rec.modes == "creep"
    assert creeping[2 * 60:9 * 60].all()  # creeping all along, as on the floor
    wp = rec.motion.world_positions
    assert np.isfinite(wp).all()
    ground = terrain.heights(wp[:, 0, [0, 2]])
    assert np.ptp(ground[creeping]) > 0.3  # (over the bumps)
    hips = wp[:, db.skeleton.index("Hips"), 1] - ground
    fh = np.median(flat.motion.world_positions[flat.modes == "creep", db.skeleton.index("Hips"), 1])
    # low as on the floor: lowered up to a step's height more (the feet behind reach down)
    assert fh - 0.2 < np.median(hips[creeping]) < fh + 0.05, (np.median(hips[creeping]), fh)
    m = _measure(db, rec, terrain)
    assert m["foot_ground_error_m"] <= f["foot_ground_error_m"] + 0.01, (m, f)
    # (on the floor this take's feet dip 15 cm into it: no deeper here)
    assert m["foot_penetration_m"] <= max(0.03, f["foot_penetration_m"]), (m, f)
    assert m["skating"] <= 1.5 * f["skating"], (m, f)
    assert m["acc_p99"] <= 1.5 * f["acc_p99"], (m, f)


@pytest.mark.xfail(strict=True, reason="the hands are not put on the ground: 41 cm into the hills (issue 31)")
def test_creeping_keeps_its_hands_out_of_the_ground(db):
    terrain, rec = _creep(db, "hills")
    creeping = rec.modes == "creep"
    hands = rec.motion.world_positions[creeping][:, [db.skeleton.index(n) for n in ("LeftHand", "RightHand")]]
    under = hands[..., 1] - terrain.heights(hands[..., [0, 2]].reshape(-1, 2)).reshape(hands.shape[:2])
    assert under.min() > -0.03, under.min()
