"""Extension points for capabilities that plug into the viewer.

The viewer runs the simulation, draws, and carries the page's messages; what obstacles
do to characters, how crowds steer and how pose commands become intents belongs to
their own packages. Each registers a factory here (usually from a module the viewer
imports if it exists, see :data:`PLUGIN_MODULES`); the page shows a capability's panel
as working when its factory is registered, and as "not available yet" otherwise. A factory
may have a ``warm_up(db)`` attribute, called once when the viewer starts (see :func:`warm_up`).

Environment (``register_environment``): ``factory(db) -> adapter`` with

* ``set_obstacles(obstacles: list[dict], t: float)``: the scene changed (obstacles in
  the scenario format, each with an ``"id"``; moving ones carry ``"velocity"``);
* ``attach(character)`` / ``detach(character)``: a motion-matching character
  (:class:`~motionmatch.viewer.characters.MMCharacter`) joined or left; the adapter may
  set ``character.chooser`` to its frame chooser (e.g. the penalised search,
  ``(controller, query, mask, view) -> (indices, costs)``), which the character installs
  behind its query tap (so the debug panel still sees every query) whenever it is not
  following a drawn path; while it follows one, the character installs
  ``chooser.for_path(path_matcher)`` if the chooser has that method (e.g. the penalised
  search on the path's query when obstacles are near, the path's matcher otherwise), else
  the path's matcher. It may set ``character.reweight_locally = False`` when it applies
  Responsiveness and Continuity itself, ``character.intent_filter`` (``(character,
  intent, dt) -> Intent``, applied to every intent: keyboard, crowd, pose, e.g. to steer
  around obstacles), ``character.path_filter`` (``(times, xz) -> (times, xz)``, a drawn
  path in world metres before it is followed, e.g. routed around obstacles) and
  ``character.intent_source``; it honours ``character.environment`` (``False``: a plain
  motion-matching character that ignores obstacles but is still one for the others,
  scenario ``environment: false``) and ``character.assist`` (``False``: no viewer-only
  aids such as the intent and path filters: scenario agents play as ``motionmatch
  scenario`` runs them);
  ``character.ctrl`` is the :class:`~motionmatch.runtime.controller.Controller`, which
  is replaced when the controls re-weight the database (``attach`` is called again);
* ``before_step(characters, t, dt)``: called every tick before the characters move
  (other agents' predicted ellipses, moving obstacles' positions);
* ``debug(character) -> dict``: overlays for the debug panel, any of
  ``{"ellipses": [[cx, cz, ux, uz, a, b], ...], "penalties": {"total": x, "obstacles":
  [[id, penalty], ...], "search": {...}}, "clearance": m, "controls": {...}}`` (the page
  draws the ellipses, tints the penalised obstacles and lists the rest);
* ``controls_changed(character)``: ``character.controls`` (responsiveness, continuity,
  evasion, anticipation) changed;
* optional ``configure(settings)``: a scenario's environment settings
  (:class:`~motionmatch.runtime.world.EnvironmentSettings` from its ``penalty``,
  ``search`` and ``controller.controls``) for the whole session.

An intent source (``character.intent_source``, any of the kinds below) may also have a
``desired_trajectory`` attribute (a :class:`~motionmatch.control.trajectory.PredictedTrajectory`
or ``None``), read after each ``intent`` call: the trajectory the controller matches
instead of its own prediction (a scenario agent's path).

Crowds (``register_crowd``): ``factory(db) -> steering``, one per session, with
``assign(character, *, goal=None, via=None, path=None, speed=1.3)`` (steer the character
to ``goal`` ``[x, z]`` through the waypoints ``via``, or along the target ``path [[x, z],
...]``: it sets itself as ``character.intent_source``), ``intent(character, dt) -> Intent
| None``, and optional ``before_step(characters, t, dt)`` (called every tick before the
environment's), ``release(character)`` (the character was removed) and ``status()``.
Spawned groups and scenario agents with a goal or a path are assigned to it.

Pose commands (``register_pose``): ``factory(db, kind, file) -> source`` where ``kind``
is ``"webcam"`` (the page sends ``pose_keypoints`` messages, passed to
``source.push(keypoints, t)``) or ``"file"`` (a recorded keypoint file from the data
folders); ``source.intent(character, dt) -> Intent | None`` then drives the selected
character, and optional ``source.status() -> dict`` is shown in the page (sent as
``pose_status`` messages about 5 times a second while a source is active).

Scenarios (``register_scenario``): ``loader(path) -> dict``, the scenario format of
``scenarios/README.md`` with groups expanded into agents: ``name``, ``duration`` (s),
``fps``, ``description``, ``expect``, ``obstacles`` (list of dicts), ``agents`` (list of
``{"name", "start": [x, z], "facing": [x, z], "script": {...} | None, "path": [[x, z],
...] | None, "loop": bool, "goal": [x, z] | None, "via": [[x, z], ...] | None, "speed":
m/s, "gait", "controls": {...}, "environment": bool, "start_time": s, "tags": str |
None}``; absent keys take the format's defaults) and the scene-wide ``penalty``,
``search``, ``controller`` (with its ``controls``), ``database``, ``steering`` and
``regions`` objects. The session applies them as ``motionmatch scenario`` does
(:func:`motionmatch.runtime.world.world_from_scenario`) and says, in a ``warning`` message
and the reply's ``notes``, which fields cannot apply in the viewer. The default loader
reads the file with :func:`motionmatch.environment.scenario.load_scenario` when that
module exists.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

__all__ = [
    "PLUGIN_MODULES",
    "capabilities",
    "crowd_factory",
    "environment_factory",
    "load_plugins",
    "pose_factory",
    "register_crowd",
    "register_environment",
    "register_pose",
    "register_scenario",
    "scenario_loader",
    "warm_up",
]

#: Modules imported (if they exist) before the first session; they call ``register_*``.
PLUGIN_MODULES = (
    "motionmatch.environment.viewer_plugin",
    "motionmatch.control.pose.viewer_plugin",
    "motionmatch.runtime.crowd_viewer_plugin",
)

_registry: dict[str, Any] = {"environment": None, "crowd": None, "pose": None, "scenario": None}
_loaded = False


def register_environment(factory: Callable[[Any], Any] | None) -> None:
    _registry["environment"] = factory


def register_crowd(factory: Callable[[Any], Any] | None) -> None:
    _registry["crowd"] = factory


def register_pose(factory: Callable[..., Any] | None) -> None:
    _registry["pose"] = factory


def register_scenario(loader: Callable[[Any], dict] | None) -> None:
    _registry["scenario"] = loader


def environment_factory():
    return _registry["environment"]


def crowd_factory():
    return _registry["crowd"]


def pose_factory():
    return _registry["pose"]


def _default_scenario_loader(path) -> dict:
    """A scenario file as a plain dict (see the module doc), read and checked by the
    environment package's reader (groups expanded into agents)."""
    from motionmatch.environment.scenario import load_scenario

    sc = load_scenario(path)
    d = sc.to_dict()
    d["name"] = sc.name
    d["agents"] = [{"path": None, "goal": None, "via": None, "script": None, "loop": False, "environment": True,
                    "start_time": 0.0, "tags": None, "gait": "walk", "speed": 1.3, "controls": {}, **a}
                   for a in d["agents"]]
    return d


def scenario_loader():
    if _registry["scenario"] is not None:
        return _registry["scenario"]
    try:
        importlib.import_module("motionmatch.environment.scenario")
    except Exception:
        return None
    return _default_scenario_loader


def load_plugins() -> list[str]:
    """Import the plugin modules that exist (once); returns the names imported."""
    global _loaded
    done = []
    if _loaded:
        return done
    _loaded = True
    for name in PLUGIN_MODULES:
        try:
            importlib.import_module(name)
            done.append(name)
        except ModuleNotFoundError as e:
            if e.name is None or not name.startswith(e.name):
                warnings.warn(f"viewer plugin {name} failed to import: {e}", stacklevel=2)
        except Exception as e:  # a broken plugin must not take the viewer down
            warnings.warn(f"viewer plugin {name} failed to import: {type(e).__name__}: {e}", stacklevel=2)
    return done


def warm_up(db) -> None:
    """Let each registered factory that has a ``warm_up(db)`` attribute prepare for ``db``
    (build shared structures, compile kernels) before the first session; failures warn."""
    for key in ("environment", "crowd", "pose"):
        fn = getattr(_registry[key], "warm_up", None)
        if fn is None:
            continue
        try:
            fn(db)
        except Exception as e:  # a broken plugin must not take the viewer down
            warnings.warn(f"viewer plugin {key} failed to warm up: {type(e).__name__}: {e}", stacklevel=2)


def capabilities() -> dict[str, bool]:
    """Which panels work now."""
    return {
        "keyboard": True,
        "path": True,
        "genmm": True,
        "obstacles_edit": True,
        "environment": _registry["environment"] is not None,
        "crowd": _registry["crowd"] is not None,
        "pose": _registry["pose"] is not None,
        "scenario": scenario_loader() is not None,
    }
