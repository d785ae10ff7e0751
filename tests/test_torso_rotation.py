"""The torso-rotation measure (motionmatch.metrics.torso) on bodies with known answers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from motionmatch.anim import Skeleton
from motionmatch.metrics.torso import shoulder_pair, torso_rotation, torso_summary

NAMES = ("Root", "Hips", "LeftUpLeg", "RightUpLeg", "Spine", "LeftArm", "RightArm")
PARENTS = np.array([-1, 0, 1, 1, 1, 4, 4])
OFFSETS = np.array([[0, 0, 0], [0, 0.9, 0], [0.1, 0, 0], [-0.1, 0, 0], [0, 0.5, 0], [0.2, 0, 0], [-0.2, 0, 0]],
                   dtype=float)
SKELETON = Skeleton(NAMES, PARENTS, OFFSETS)


def _body(travel_deg: float, turn_deg: float, speed: float = 1.0, n: int = 90, fps: float = 60.0) -> np.ndarray:
    """``[n, J, 3]`` world positions of a body moving at ``speed`` m/s toward ``travel_deg``
    (about +Y, 0 = +Z) with its shoulders turned ``turn_deg`` away from square to it."""
    t = np.arange(n) / fps
    d = np.array([math.sin(math.radians(travel_deg)), 0.0, math.cos(math.radians(travel_deg))])
    yaw = math.radians(travel_deg + turn_deg)
    left = np.array([math.cos(yaw), 0.0, -math.sin(yaw)])  # the body's +X turned by yaw about +Y
    root = t[:, None] * speed * d
    out = np.zeros((n, len(NAMES), 3))
    out[:, 0] = root
    out[:, 1] = root + [0, 0.9, 0]
    out[:, 2] = out[:, 1] + 0.1 * left
    out[:, 3] = out[:, 1] - 0.1 * left
    out[:, 4] = out[:, 1] + [0, 0.5, 0]
    out[:, 5] = out[:, 4] + 0.2 * left
    out[:, 6] = out[:, 4] - 0.2 * left
    return out


def test_the_shoulders_are_the_highest_lateral_pair():
    assert shoulder_pair(SKELETON, _body(0, 0)[0]) == (5, 6)


@pytest.mark.parametrize("travel", [0.0, 37.0, -120.0])
@pytest.mark.parametrize("turn", [0.0, 20.0, 45.0, -60.0, 90.0])
def test_known_angles(travel, turn):
    """Shoulders square to the travel: 0; turned by a degrees either way: |a|; along it: 90."""
    r = torso_rotation(_body(travel, turn), SKELETON, 60.0)
    assert np.all(np.isfinite(r))
    np.testing.assert_allclose(r, abs(turn), atol=1e-6)


def test_backward_walking_is_square_and_standing_has_no_travel():
    back = torso_rotation(_body(0.0, 180.0), SKELETON, 60.0)
    np.testing.assert_allclose(back, 0.0, atol=1e-6)
    still = torso_rotation(_body(0.0, 45.0, speed=0.1), SKELETON, 60.0)
    assert np.all(np.isnan(still))
    s = torso_summary(still)
    assert s["mean"] is None and s["moving_frames"] == 0


def test_summary_over_moving_frames():
    r = np.array([np.nan, 10.0, 20.0, 30.0, np.nan])
    s = torso_summary(r)
    assert s["moving_frames"] == 3 and s["mean"] == pytest.approx(20.0) and s["max"] == 30.0


def test_the_scenario_command_reports_it(data_dir, tmp_path, capsys):
    """End to end on real data: ``motionmatch scenario`` reports the torso rotation of every
    agent (from the recorded poses; none without them) and prints it."""
    import json

    from motionmatch.cli.main import main

    clips = [data_dir / "lafan1-60fps" / f for f in ("ground1_subject1_walk.bvh", "multipleActions1_subject1_run.bvh")]
    for c in clips:
        if not c.exists():
            pytest.skip(f"{c} not found")
    db = tmp_path / "db.npz"
    assert main(["build", *map(str, clips), "--mirror", "--schema", "environment", "-q", "-o", str(db)]) == 0
    scene = Path(__file__).resolve().parents[1] / "scenarios" / "run-walk.json"
    report = tmp_path / "r.json"
    assert main(["scenario", str(scene), "--db", str(db), "-o", str(tmp_path / "r.npz"), "--report", str(report),
                 "--duration", "3", "-q"]) == 0
    assert "torso rotation (shoulders against the direction of travel" in capsys.readouterr().out
    rep = json.loads(report.read_text())
    assert rep["torso_rotation_deg"]["moving_frames"] > 4 * 60  # four agents walking or running, 3 s
    for a in rep["agents"]:
        t = a["torso_rotation_deg"]
        assert 0.0 <= t["mean"] <= t["p90"] <= t["max"] <= 90.0, (a["name"], t)
    assert main(["scenario", str(scene), "--db", str(db), "-o", str(tmp_path / "n.npz"), "--report", str(report),
                 "--duration", "1", "--no-poses", "-q"]) == 0
    assert json.loads(report.read_text())["torso_rotation_deg"] is None
