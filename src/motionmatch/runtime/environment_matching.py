"""Environment-aware matching's settings and database side (Environment-aware Motion
Matching, Sec. 5-6): the high-level controls, the search settings, and the matcher.

* :class:`Controls` (per character) and :class:`EnvironmentSettings` (per scene).
* :class:`EnvironmentMatcher` (one per database): the query columns, the body ellipses of
  every frame and the :class:`~motionmatch.search.penalized.PenalizedSearch` over them.

The frame chooser that searches with them is :class:`~motionmatch.runtime.chooser.
EnvironmentChooser`; long-horizon matching's nodes are searched with them by
:class:`~motionmatch.runtime.node_search.PenalizedNodeSearch`.

High-level controls (paper Sec. 5.3; the formulas of its Eq. 3-6 are missing from our copy
of the text, so they are read from its prose and checked against the authors' released
implementation; where the two leave room, the choice is said):
Responsiveness ``R`` multiplies the squared-distance weights of the trajectory features
(positions and directions), Continuity ``C`` those of the pose features (Eq. 3, 4).
Evasion ``E`` (Eq. 5) is the smallest factor on the direction weight near obstacles: the
factor moves toward ``max(E, 1 + log10(c / threshold))`` (clamped to 1), ``c`` the clearance
between the character and its nearest obstacle, linearly interpolated in time (rate
``EnvironmentSettings.evasion_rate`` per second, as the paper "linearly interpolates the
direction weight towards a target weight"), and back to 1 at once when no obstacle is near.
The paper measures from "the current position of the character"; a root touching an
obstacle would be a body half inside it, so ``c`` is the distance from the root minus
``EnvironmentSettings.body_radius`` (the authors' code measures from the body ellipse).
Anticipation ``A`` (Eq. 6) scales the environment weight with the target speed ``v``
(m/s): ``W_env = W_env0 * max(A v, floor)``, ``floor = EnvironmentSettings.anticipation_floor``.
The text keeps "a minimum base weight" so that a standing character still evades and gives
no value; we read the base weight as ``W_env0`` itself (floor 1). The authors' code uses
half of it: with 1/2 the standing character of ``scenarios/cubes-approach.json`` is hit
more than 2% of the time (4.5% measured) and the walker of ``scenarios/car.json`` touches
the car more than half as often as plain motion matching.
``A = 0`` leaves ``W_env0 * floor`` at every speed.

Moving obstacles are proxies where they are now (compared with every ellipse) plus, per
ellipse, "additional proxies" where they are predicted at that ellipse's time
(:meth:`motionmatch.environment.scene.Scene.query`, paper Sec. 6.1.2).

The controller is run with root motion only (``adjust_halflife = 0``): the trajectory
comes from the database, so body and root motion stay consistent (paper Sec. 5.1).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from motionmatch.database import MotionDatabase
from motionmatch.environment.body import database_ellipses, ellipse_slots, frame_ellipses, world_ellipses
from motionmatch.runtime.controller import ControllerSettings
from motionmatch.runtime.modes import vertical_columns
from motionmatch.search.penalized import PenalizedSearch, PenaltyParams, SearchOptions, chooser_view, control_weights

__all__ = ["FOLLOW_CONTROLS", "Controls", "EnvironmentMatcher", "EnvironmentSettings", "anticipation_weight",
           "environment_controller_settings", "evasion_factor"]


@dataclass(frozen=True)
class Controls:
    """High-level controls of one character (see the module docstring; the paper's
    Sec. 5.3). What a user sets per character or per scene.

    Attributes:
        responsiveness: R, multiplies the trajectory features' weights. Default 2 (ours:
            trajectory twice as important as the database's own group weights).
        continuity: C, multiplies the pose features' weights. Default 0.5 (ours: with
            ``R = C = 1`` a character tends to stand still in front of an obstacle rather
            than change gait; measured on ``scenarios/dense-obstacles.json``).
        evasion: E in [0, 1], the smallest factor on the direction weights near obstacles
            (1: off). Default 0.1 (the paper's value is missing from our copy; the
            authors' released scenes use 0.01 and 0.2; with 0.01 the walker of
            ``scenarios/car.json`` touches the car more than half as often as plain
            motion matching).
        anticipation: A (s/m), the environment weight's growth with the target speed:
            ``W_env = W_env0 * max(A v, 1)``. Default 1 (ours: the forward key's 0.85 m/s
            keeps the base weight, a sprint at 3 m/s triples it); with 2 (the authors'
            released value, on their own weight scale) the walker among the cones of
            ``scenarios/zigzag-cones.json`` slows down more (it did not get through them
            in 20 s).
    """

    responsiveness: float = 2.0
    continuity: float = 0.5
    evasion: float = 0.1
    anticipation: float = 1.0

    def with_(self, **changes) -> Controls:
        return replace(self, **changes)


@dataclass(frozen=True)
class EnvironmentSettings:
    """Environment-aware search settings shared by a world's characters.

    Attributes:
        penalty: obstacle penalties (threshold, exponent, weights, margins).
        search: search method and optimisations.
        controls: default high-level controls.
        reach: pre-selection slack (m) beyond the threshold: about half an arm span. An
            obstacle is considered when its shape comes within ``threshold + reach`` of the
            character or one of its query trajectory points.
        body_radius: subtracted from the root's distance to the nearest obstacle to give
            the clearance used by Evasion (m).
        evasion_rate: how fast (1/s) Evasion's factor moves toward its target near
            obstacles: each search it closes ``1 - exp(-rate * dt)`` of the gap, ``dt`` the
            time since the character's previous search (the authors' per-frame lerp by
            ``10 dt``).
        anticipation_floor: the smallest multiple of ``penalty.env_weight`` Anticipation
            leaves (the paper's "minimum base weight": a standing character still evades).
        enabled: ``False``: plain motion matching (the environment is ignored).
    """

    penalty: PenaltyParams = field(default_factory=PenaltyParams)
    search: SearchOptions = field(default_factory=SearchOptions)
    controls: Controls = field(default_factory=Controls)
    reach: float = 0.9
    body_radius: float = 0.25
    evasion_rate: float = 10.0
    anticipation_floor: float = 1.0
    enabled: bool = True

    @classmethod
    def from_dicts(cls, penalty: dict | None = None, search: dict | None = None, controls: dict | None = None,
                   **kw) -> EnvironmentSettings:
        """From plain dicts (scenario files): unknown keys raise ``ValueError``."""
        def build(kind, d):
            d = dict(d or {})
            names = {f.name for f in fields(kind)}
            bad = sorted(set(d) - names)
            if bad:
                raise ValueError(f"unknown {kind.__name__} field(s) {bad}; known: {sorted(names)}")
            if "slot_weights" in d:
                d["slot_weights"] = tuple(d["slot_weights"])
            return kind(**d)

        return cls(penalty=build(PenaltyParams, penalty), search=build(SearchOptions, search),
                   controls=build(Controls, controls), **kw)


def evasion_factor(controls: Controls, settings: EnvironmentSettings, nearest: float) -> float:
    """Evasion's target factor on the direction weights (Eq. 5, see the module docstring)
    for a character whose root is ``nearest`` metres from its nearest obstacle (``inf``:
    none near): ``max(E, 1 + log10(c / threshold))`` clamped to ``[E, 1]``, ``c`` the
    clearance ``nearest - body_radius``; 1 with nothing near or ``E >= 1``."""
    if nearest == math.inf or controls.evasion >= 1.0:
        return 1.0
    c = nearest - settings.body_radius
    t = settings.penalty.threshold
    if c >= t:
        return 1.0
    if c <= t * 1e-6:
        return float(controls.evasion)
    return min(1.0, max(float(controls.evasion), 1.0 + math.log10(c / t)))


def anticipation_weight(controls: Controls, settings: EnvironmentSettings, target_speed: float) -> float:
    """The environment weight W_env for a character whose input asks for ``target_speed``
    (m/s): ``W_env0 * max(A v, anticipation_floor)`` (Eq. 6, see the module docstring)."""
    scale = max(float(controls.anticipation) * float(target_speed), settings.anticipation_floor)
    return float(settings.penalty.env_weight) * scale


def environment_controller_settings(**changes) -> ControllerSettings:
    """Controller settings for environment-aware characters: searches every 10 frames at
    60 Hz (the paper's), root motion only (no pull toward the simulated root)."""
    base = {"search_interval": 10 / 60, "adjust_halflife": 0.0}
    base.update(changes)
    return ControllerSettings(**base)


class EnvironmentMatcher:
    """Everything the penalised search needs from a database (build once, share).

    Args:
        db: the database (with an ``ellipse`` environment term, or any: ellipses are then
            computed from its poses).
        heights: use height features (``None``: if the database stores them).
    """

    def __init__(self, db: MotionDatabase, heights: bool | None = None):
        self.db = db
        schema = db.schema
        self.cols = schema.query_columns()
        feats = db.features[:, self.cols]
        vcols = vertical_columns(db)
        self.vcols = vcols
        self.ellipses = database_ellipses(db, heights)
        self.slots = ellipse_slots(db)
        self.search = PenalizedSearch(feats, db.valid, self.ellipses, clip_starts=db.clip_starts,
                                      clip_stops=db.clip_stops)
        pos = np.zeros(len(self.cols), dtype=bool)
        direc = np.zeros(len(self.cols), dtype=bool)
        for t in schema.terms:
            if t.is_environment:
                continue
            sl = schema.slice(t.name)
            idx = np.searchsorted(self.cols, np.arange(sl.start, sl.stop))
            if t.kind == "trajectory_position":
                pos[idx] = True
            elif t.kind == "trajectory_direction":
                direc[idx] = True
        pose = ~(pos | direc)
        vertical = np.zeros(len(self.cols), dtype=bool)  # the planar view leaves these out
        vertical[np.searchsorted(self.cols, vcols)] = True
        #: per feature view, the masks of the search columns' weights (:meth:`weights`):
        #: left out by the view, pose, trajectory position, trajectory direction
        self.view_masks = {"planar": (vertical, pose, pos, direc), "full": (np.zeros_like(vertical), pose, pos, direc)}
        self._leaves_out = {view: bool(masks[0].any()) for view, masks in self.view_masks.items()}
        K = self.ellipses.shape[1]
        if len(self.slots) != K:
            raise ValueError(f"{K} ellipse slots but offsets {self.slots}")
        self.planar_zero = np.zeros(db.features.shape[1], dtype=bool)  # the planar view's zeroed columns
        self.planar_zero[vcols] = True
        self.no_zero = np.zeros(db.features.shape[1], dtype=bool)
        self._views: tuple = (None, {})  # (db.features, chooser views built for it): see search_view

    def search_view(self, view: str) -> tuple:
        """The :func:`~motionmatch.search.penalized.chooser_view` of a controller's feature
        view (``"planar"``: vertical columns taken as 0, else all), built once per
        ``db.features`` array."""
        feats, views = self._views
        if feats is not self.db.features:
            feats = self.db.features
            views = {"planar": chooser_view(self.cols, self.view_masks["planar"], self.planar_zero, feats),
                     "full": chooser_view(self.cols, self.view_masks["full"], self.no_zero, feats)}
            self._views = (feats, views)
        return views["planar" if view == "planar" else "full"]

    def weights(self, controls: Controls, evasion_factor: float = 1.0, view: str = "planar") -> np.ndarray | None:
        """Per-dimension squared-distance multipliers ``[len(cols)]`` of the search columns
        for a feature ``view`` (``"planar"``: vertical columns weighted 0) and ``controls``
        (``None``: all 1)."""
        c = controls
        if c.responsiveness == 1.0 and c.continuity == 1.0 and evasion_factor == 1.0 and not self._leaves_out[view]:
            return None
        return control_weights(*self.view_masks[view], float(c.continuity), float(c.responsiveness),
                               float(evasion_factor))

    def view_row(self, frame: int, view: str) -> np.ndarray:
        """Row ``frame`` of the controller's feature view (``"planar"``: vertical columns
        zeroed), as the controller measures the frame playing now."""
        row = self.db.features[frame].astype(np.float64)
        if view == "planar" and self.vcols.size:
            row[self.vcols] = 0.0
        return row

    @functools.cached_property
    def played_ellipses(self) -> np.ndarray:
        """``[N, 8]`` body ellipse of every database frame in its own character frame, as
        played (:func:`~motionmatch.environment.body.frame_ellipses`; computed on first use)."""
        return frame_ellipses(self.db)

    def world_ellipses(self, frame: int, root_xz, yaw: float) -> np.ndarray:
        """``[K, 8]`` world ellipses of database ``frame`` played by a character at ``root_xz``, ``yaw``."""
        return world_ellipses(self.ellipses[frame], root_xz, yaw)


#: Controls of a path follower among obstacles: the paper's plain penalised score (feature
#: distance + obstacle penalty), with no re-weighting, so that it differs from following
#: the path blind only by the obstacles.
FOLLOW_CONTROLS = Controls(responsiveness=1.0, continuity=1.0, evasion=1.0, anticipation=0.0)
