"""Long-horizon motion matching: Algorithm 1 against a naive recursive implementation, k-NN counts,
root advancement, and LHMM(1, 1) = plain matching, on a small synthetic database."""

from __future__ import annotations

import numpy as np
import pytest

from motionmatch.control.path import TimedPath
from motionmatch.control.revision import RevisionSettings
from motionmatch.database import MotionDatabase
from motionmatch.metrics.follow import follow_report
from motionmatch.runtime.follow import FollowSettings, PathFollower
from motionmatch.runtime.lhmm import LongHorizonMatcher, PlainNodeSearch, advance_roots
from synthetic import walker


@pytest.fixture(scope="module")
def db():
    clips = []
    specs = [(1.0, 1.4, 0.0), (0.4, 1.2, 0.8), (1.2, 0.6, -0.8), (2.0, 3.0, 0.3), (0.0, 1.0, 0.0), (1.5, 0.0, 0.0),
             (1.0, 1.0, 1.5), (1.0, 1.0, -1.5), (2.5, 2.0, -0.4), (0.8, 0.8, 0.0)]
    for i, (v0, v1, turn) in enumerate(specs):
        clips.append(walker(n=240, speed=v0, end_speed=v1, turn_rate=turn, name=f"walk_{i}"))
    return MotionDatabase.build(clips)


def curved_path(speed=1.2, seconds=8.0):
    t = np.linspace(0.0, seconds, 400)
    s = speed * t
    return TimedPath.from_samples(t, np.stack([1.5 * np.sin(s / 3.0), s], axis=1))


def reference_lhmm(ctrl, planner, query, mask, view, k, levels, interval):
    """Algorithm 1 as written: recursive, every query built and searched on its own."""
    searcher, w = ctrl.searcher(), ctrl.view_weights(view)
    n = max(1, round(interval * ctrl.db.fps))
    calls = [0]

    def rec(q, frame_pos, yaw, state, level):
        calls[0] += 1
        if level == 1:
            i, d = searcher.nearest(q, mask=mask, k=1, weights=w)
            return int(i[0]), float(d[0])
        idx, dist = searcher.nearest(q, mask=mask, k=k, weights=w)
        best, choice = np.inf, -1
        for f, d in zip(idx, dist):
            nf, p2, y2 = advance_roots(ctrl.db, np.array([f]), frame_pos[None], np.array([yaw]), n)
            q2, st2 = planner.queries(ctrl, nf, p2, y2, state, view, interval)
            _, dd = rec(q2[0], p2[0], float(y2[0]), st2, level - 1)
            if d + dd < best:
                best, choice = d + dd, int(f)
        return choice, best

    f, total = rec(query, np.asarray(ctrl.root_pos, float), float(ctrl.root_yaw), planner.start_state(ctrl), levels)
    return f, total, calls[0]


class Recorder:
    """A chooser that runs the matcher and the reference on the same controller query."""

    def __init__(self, matcher, planner):
        self.m, self.planner, self.rows = matcher, planner, []

    def __call__(self, ctrl, q, mask, view):
        out = self.m(ctrl, q, mask, view)
        ref = reference_lhmm(ctrl, self.planner, q, mask, view, self.m.k, self.m.levels, self.m.interval)
        direct = ctrl.searcher().nearest(q, mask=mask, k=1, weights=ctrl.view_weights(view))
        self.rows.append((self.m.last_choice, ref, self.m.calls_per_match[-1], direct))
        return out


@pytest.mark.parametrize(("k", "levels"), [(3, 3), (2, 4), (4, 2), (1, 1), (3, 1)])
def test_lhmm_is_algorithm_1(db, k, levels):
    f = PathFollower(db, curved_path(), FollowSettings(k=k, levels=levels, revision=RevisionSettings(v_max=2.5)))
    rec = Recorder(f.matcher, f.planner)
    f.matcher = rec  # the follower's chooser (the world installs it every step)
    for _ in range(150):
        f.step(1 / 60)
    assert len(rec.rows) >= 10
    for (frame, total), (ref_frame, ref_total, ref_calls), calls, (di, dd) in rec.rows:
        assert frame == ref_frame
        assert total == pytest.approx(ref_total, rel=1e-9, abs=1e-9)
        assert calls == ref_calls == sum(k**i for i in range(levels))
        if levels == 1:  # LHMM(k, 1) is plain motion matching
            assert frame == di[0] and total == pytest.approx(dd[0])


def test_counts_knn_calls(db):
    f = PathFollower(db, curved_path(), FollowSettings(k=3, levels=3, revision=RevisionSettings(v_max=2.5)))
    rec = f.run()
    m = f.matcher
    assert m.expected_calls == 13
    assert m.matches == len(rec.match_seconds) > 0
    assert set(m.calls_per_match) == {13} and m.knn_calls == 13 * m.matches
    assert follow_report(rec)["knn_calls_per_match"] == 13.0
    assert LongHorizonMatcher(10, 3, planner=f.planner).expected_calls == 111


class _OneByOne:
    """Each node searched alone, unseeded: the reference the batched, seeded levels must equal."""

    def nearest(self, controller, queries, mask, k, seeds, positions, yaws, ahead):
        s, w = controller.searcher(), controller.view_weights("planar")
        found = [s.nearest(q, mask=mask, k=k, weights=w) for q in queries]
        return np.array([f[0] for f in found]), np.array([f[1] for f in found])

    def cost(self, controller, query, frame):
        return controller.view_cost(query, frame, "planar")


def test_batched_levels_give_the_same_answer(db):
    a = PathFollower(db, curved_path(), FollowSettings(revision=RevisionSettings(v_max=2.5)))
    b = PathFollower(db, curved_path(), FollowSettings(revision=RevisionSettings(v_max=2.5)))
    b.matcher.node_search = _OneByOne()
    ra, rb = a.run(), b.run()
    assert isinstance(a.matcher.node_search, PlainNodeSearch) or a.matcher.node_search is None
    np.testing.assert_array_equal(ra.frames, rb.frames)


def test_advance_roots_turns_the_clip_motion_into_the_character_frame(db):
    clip = db.clip_names.index("walk_9")  # straight, 0.8 m/s, heading +Z
    f0 = int(db.clip_starts[clip]) + 10
    nf, pos, yaw = advance_roots(db, np.array([f0, f0]), np.array([[5.0, 0, 5.0], [0.0, 0, 0.0]]),
                                 np.array([np.pi / 2, 0.0]), 12)
    np.testing.assert_array_equal(nf, [f0 + 12, f0 + 12])
    np.testing.assert_allclose(pos[0], [5.0 + 0.8 * 12 / 60, 0, 5.0], atol=1e-5)  # facing +X: moves along +X
    np.testing.assert_allclose(pos[1], [0.0, 0, 0.8 * 12 / 60], atol=1e-5)
    np.testing.assert_allclose(yaw, [np.pi / 2, 0.0], atol=1e-6)
    # a turning clip turns the character by the clip's own turn
    c7 = db.clip_names.index("walk_6")  # 1.5 rad/s to the left
    g = int(db.clip_starts[c7]) + 20
    _, _, y = advance_roots(db, np.array([g]), np.zeros((1, 3)), np.array([0.3]), 30)
    assert y[0] == pytest.approx(0.3 + 1.5 * 30 / 60, abs=1e-4)
    # past the clip's end: clamped to its last frame
    last = int(db.clip_stops[clip]) - 1
    nf, _, _ = advance_roots(db, np.array([last - 3]), np.zeros((1, 3)), np.zeros(1), 10)
    assert nf[0] == last


def test_hysteresis_keeps_playing_an_equally_good_clip(db):
    f = PathFollower(db, curved_path(), FollowSettings(hysteresis=True, revision=RevisionSettings(v_max=2.5)))
    for _ in range(30):
        f.step(1 / 60)
    ctrl = f.ctrl
    cur = ctrl.frame
    q = ctrl.db.features[cur].copy()  # a query the playing frame answers exactly
    idx, cost = f.matcher(ctrl, q, ctrl.mask(ctrl.s.locomotion_tags), "planar")
    assert idx[0] == cur and cost[0] == pytest.approx(0.0, abs=1e-9)
    assert f.matcher.calls_per_match[-1] >= 13


def test_checks_its_arguments(db):
    with pytest.raises(ValueError, match="planner"):
        LongHorizonMatcher(3, 3)
    with pytest.raises(ValueError, match="k >= 1"):
        LongHorizonMatcher(0, 1)
    with pytest.raises(ValueError, match="interval"):
        LongHorizonMatcher(1, 1, interval=0)
    assert LongHorizonMatcher(1, 1).expected_calls == 1
