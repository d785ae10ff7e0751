"""Declarative feature schemas: which numbers describe a frame for matching.

A schema is a list of :class:`FeatureTerm`. Each term is one *group* of dimensions
(normalised together, weighted together) of one kind:

* ``bone_position``: positions of joints relative to the character root, in its frame.
* ``bone_velocity``: velocities of joints, in the character frame (m/s).
* ``trajectory_position``: the root's future positions at ``offsets`` (seconds), relative
  to the current root, in the character frame. 2D = ground plane (x, z); 3D adds the
  hips' height above the ground at that time (jumping, creeping).
* ``trajectory_direction``: the root's future facing at ``offsets``, in the character
  frame (x, z). 3D adds the hips' vertical velocity (m/s) at that time.
* ``ground_height``: how the ground under the root rises or falls along its future
  trajectory: at each ``offset``, the ground's height (m) then minus its height now, the
  ground estimated from the planted feet (:func:`motionmatch.database.ground.support_heights`;
  0 on flat ground). One number per offset, a pose-like term (continuity) until a
  runtime fills it from a terrain (issue 31): a query carries the playing frame's values.
  Only schemas that ask for it have it (:meth:`FeatureSchema.with_ground`, the ``+ground``
  names of :func:`schema_by_name`).
* ``ellipse`` (environment feature): the body's ground footprint at each future
  ``offset`` as an ellipse in the character frame: centre (x, z), semi-major axis vector
  (x, z; along the direction of motion at that time, its length the semi-axis) and
  semi-minor axis length: 5 numbers per offset. ``vertical=True`` adds the body's lowest
  and highest joint heights above the ground at that time (2 more). Environment terms
  are stored un-normalised in ``raw_features`` and never enter distances (their weight
  is always 0): a penalised search reads them to score frames against obstacles (see
  :mod:`motionmatch.search.penalized`).

Joints are named by humanoid role or by joint name. Roles are found per skeleton by
:func:`motionmatch.anim.humanoid.find_humanoid` (names, topology and rest pose, for
Mixamo, Unreal, Character Creator, LAFAN1, Bandai-Namco, CMU, VRM and SMPL rigs): ``hips``,
``spine``, ``chest``, ``neck``, ``head``, and per side ``left_shoulder``,
``left_upper_arm``, ``left_lower_arm``, ``left_hand``, ``left_upper_leg``,
``left_lower_leg``, ``left_ankle``, ``left_toe`` and ``left_foot``, the foot's contact
joint (the toe where the rig has one, else the ankle). Terms group into *pose* terms
(bones: continuity), *trajectory* terms (responsiveness) and *environment* terms
(penalties, not distances).

The schema file (``motionmatch build --schema FILE.json``) is JSON::

    {
      "name": "my-rig",
      "roles": {"left_foot": "CC_Base_L_ToeBase", "right_foot": "CC_Base_R_ToeBase",
                "hips": "CC_Base_Hip"},
      "terms": [
        {"name": "foot_position", "kind": "bone_position", "joints": ["left_foot", "right_foot"],
         "weight": 0.75},
        {"name": "foot_velocity", "kind": "bone_velocity", "joints": ["left_foot", "right_foot"]},
        {"name": "hip_velocity", "kind": "bone_velocity", "joints": ["hips"]},
        {"name": "trajectory_position", "kind": "trajectory_position", "offsets": [0.333, 0.667, 1.0]},
        {"name": "trajectory_direction", "kind": "trajectory_direction", "offsets": [0.333, 0.667, 1.0],
         "weight": 1.5}
      ]
    }

``terms`` (required): the feature groups, each with ``name``, ``kind`` (one of
:data:`KINDS`), ``joints`` (bone terms: roles or joint names), ``offsets`` (trajectory
and ellipse terms: seconds ahead), ``vertical`` and ``weight`` (see :class:`FeatureTerm`).
``roles`` (optional): ``{role: joint name}``, overriding what is found on the rig. What it
names is what the database uses everywhere: the features, the foot contacts
(``left_foot``/``right_foot``), the hips of the trajectory's height, and the legs that
foot locking bends (``left_upper_leg``, ``left_lower_leg``, ``left_ankle``).
``name`` (optional): shown in reports.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from motionmatch._limits import loads_json, read_json
from motionmatch.anim.humanoid import ROLES as HUMANOID_ROLES
from motionmatch.errors import MotionMatchError

KINDS = ("bone_position", "bone_velocity", "trajectory_position", "trajectory_direction", "ground_height",
         "ellipse")
#: Kinds of environment features (stored raw, weight 0, excluded from distances).
ENVIRONMENT_KINDS = ("ellipse",)
#: Numbers per offset of an ``ellipse`` term: centre x, z, semi-major vector x, z, semi-minor.
ELLIPSE_SIZE = 5
#: ... and with ``vertical=True``: plus the lowest and highest joint height.
ELLIPSE_SIZE_VERTICAL = 7
ROLES = HUMANOID_ROLES


class SchemaError(MotionMatchError, ValueError):
    """A feature schema is malformed or does not fit a skeleton."""


@dataclass(frozen=True)
class FeatureTerm:
    """One feature group.

    Attributes:
        name: group name, unique in the schema (used for weights and debugging).
        kind: one of :data:`KINDS`.
        joints: roles or joint names (bone terms only).
        offsets: future times in seconds (trajectory terms only), e.g. ``(1/3, 2/3, 1)``.
        vertical: include the vertical component (3D trajectory terms).
        weight: multiplier on the normalised features of the group (always 0 for
            environment terms, which never enter distances).
    """

    name: str
    kind: str
    joints: tuple[str, ...] = ()
    offsets: tuple[float, ...] = ()
    vertical: bool = False
    weight: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SchemaError(f"feature term {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        object.__setattr__(self, "joints", tuple(self.joints))
        object.__setattr__(self, "offsets", tuple(float(o) for o in self.offsets))
        if self.is_bone and not self.joints:
            raise SchemaError(f"feature term {self.name!r}: a {self.kind} term needs joints=(...)")
        if not self.is_bone:
            if not self.offsets or any(o <= 0 for o in self.offsets):
                raise SchemaError(f"feature term {self.name!r}: trajectory terms need positive offsets in seconds")
        if not (self.weight >= 0):
            raise SchemaError(f"feature term {self.name!r}: weight must be >= 0, got {self.weight}")
        if self.is_environment:
            object.__setattr__(self, "weight", 0.0)

    @property
    def is_bone(self) -> bool:
        return self.kind.startswith("bone_")

    @property
    def is_trajectory(self) -> bool:
        return self.kind.startswith("trajectory_")

    @property
    def is_environment(self) -> bool:
        """Environment features: stored raw for penalties, excluded from distances."""
        return self.kind in ENVIRONMENT_KINDS

    @property
    def size(self) -> int:
        if self.is_bone:
            return 3 * len(self.joints)
        if self.is_environment:
            return (ELLIPSE_SIZE_VERTICAL if self.vertical else ELLIPSE_SIZE) * len(self.offsets)
        if self.kind == "ground_height":
            return len(self.offsets)
        return (3 if self.vertical else 2) * len(self.offsets)


@dataclass(frozen=True)
class FeatureSchema:
    """An ordered list of feature terms; dimensions are laid out term after term."""

    terms: tuple[FeatureTerm, ...]
    name: str = "custom"
    #: ``(role, joint name)`` pairs overriding the humanoid roles found on a rig.
    roles: tuple[tuple[str, str], ...] = ()
    _slices: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "terms", tuple(self.terms))
        roles = dict(self.roles.items() if isinstance(self.roles, dict) else self.roles)
        for role, joint in roles.items():
            if role not in HUMANOID_ROLES:
                raise SchemaError(f"roles: unknown role {role!r}; roles are {', '.join(HUMANOID_ROLES)}")
            if not isinstance(joint, str) or not joint:
                raise SchemaError(f"roles: {role!r} must name a joint (a non-empty string), got {joint!r}")
        object.__setattr__(self, "roles", tuple(sorted(roles.items())))
        if not self.terms:
            raise SchemaError("a feature schema needs at least one term")
        names = [t.name for t in self.terms]
        if len(set(names)) != len(names):
            raise SchemaError(f"feature term names must be unique, got {names}")
        start = 0
        slices = {}
        for t in self.terms:
            slices[t.name] = slice(start, start + t.size)
            start += t.size
        object.__setattr__(self, "_slices", slices)

    @property
    def dims(self) -> int:
        return sum(t.size for t in self.terms)

    def slice(self, name: str) -> slice:
        try:
            return self._slices[name]
        except KeyError:
            raise SchemaError(f"no feature term {name!r}; terms are {list(self._slices)}") from None

    @property
    def max_offset(self) -> float:
        """The furthest future time any term looks at (s)."""
        return max((max(t.offsets) for t in self.terms if t.offsets), default=0.0)

    @property
    def trajectory_offsets(self) -> tuple[float, ...]:
        """Sorted union of the trajectory terms' offsets (s)."""
        return tuple(sorted({o for t in self.terms for o in t.offsets}))

    @property
    def environment_terms(self) -> tuple[FeatureTerm, ...]:
        return tuple(t for t in self.terms if t.is_environment)

    def query_columns(self):
        """Indices of the dimensions that enter distances (every non-environment term)."""
        cols = [np.arange(self.slice(t.name).start, self.slice(t.name).stop) for t in self.terms
                if not t.is_environment]
        return np.concatenate(cols).astype(np.int64) if cols else np.zeros(0, dtype=np.int64)

    def term(self, name: str) -> FeatureTerm:
        for t in self.terms:
            if t.name == name:
                return t
        raise SchemaError(f"no feature term {name!r}; terms are {[t.name for t in self.terms]}")

    @property
    def roles_map(self) -> dict[str, str]:
        """``{role: joint name}`` of the roles this schema names."""
        return dict(self.roles)

    def to_json(self) -> str:
        d: dict[str, Any] = {"name": self.name, "terms": [asdict(t) for t in self.terms]}
        if self.roles:  # absent when empty: a schema without roles hashes as it always did
            d["roles"] = dict(self.roles)
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FeatureSchema:
        return cls.from_dict(loads_json(text, "feature schema", error=SchemaError))

    @classmethod
    def from_dict(cls, d: Any) -> FeatureSchema:
        """The schema of a decoded JSON description (what :meth:`to_json` writes)."""
        try:
            roles = d.get("roles", {})
            if not isinstance(roles, dict):
                raise SchemaError(f"roles must be an object {{role: joint name}}, got {type(roles).__name__}")
            return cls(tuple(FeatureTerm(**t) for t in d["terms"]), name=d.get("name", "custom"),
                       roles=tuple(roles.items()))
        except (KeyError, TypeError, AttributeError) as e:
            raise SchemaError(f"not a valid feature schema description: {e}") from None

    def with_terms(self, *extra: FeatureTerm) -> FeatureSchema:
        """This schema with user terms appended."""
        return FeatureSchema(self.terms + tuple(extra), name=f"{self.name}+custom", roles=self.roles)

    def with_roles(self, roles: dict[str, str]) -> FeatureSchema:
        """This schema with ``roles`` added to (and overriding) its roles map."""
        return FeatureSchema(self.terms, name=self.name, roles=tuple({**dict(self.roles), **roles}.items()))

    def with_ground(self, weight: float = 1.0) -> FeatureSchema:
        """This schema with a ``ground_height`` term at its trajectory offsets appended
        (named ``<name>+ground``); its other features are unchanged."""
        if any(t.kind == "ground_height" for t in self.terms):
            return self
        term = FeatureTerm("ground_height", "ground_height", offsets=self.trajectory_offsets or _OFFSETS,
                           weight=weight)
        return FeatureSchema(self.terms + (term,), name=f"{self.name}+ground")


_OFFSETS = (1 / 3, 2 / 3, 1.0)


def default_schema(*, vertical: bool = False, offsets: Sequence[float] = _OFFSETS) -> FeatureSchema:
    """The classic 27-D schema (``vertical=False``) or its 33-D 3D variant.

    Both feet's positions (6) and velocities (6), the hips' velocity (3), the root's
    future positions (6 or 9) and facings (6 or 9) at +1/3, +2/3 and +1 s. Group weights
    follow the classic tuning (0.75, 1, 1, 1, 1.5).
    """
    return FeatureSchema(
        (
            FeatureTerm("foot_position", "bone_position", joints=("left_foot", "right_foot"), weight=0.75),
            FeatureTerm("foot_velocity", "bone_velocity", joints=("left_foot", "right_foot"), weight=1.0),
            FeatureTerm("hip_velocity", "bone_velocity", joints=("hips",), weight=1.0),
            FeatureTerm("trajectory_position", "trajectory_position", offsets=tuple(offsets), vertical=vertical, weight=1.0),
            FeatureTerm("trajectory_direction", "trajectory_direction", offsets=tuple(offsets), vertical=vertical, weight=1.5),
        ),
        name="classic-3d" if vertical else "classic",
    )


def environment_schema(*, heights: bool = False, vertical: bool = False,
                       offsets: Sequence[float] = _OFFSETS) -> FeatureSchema:
    """The classic schema (2D, or 3D with ``vertical``) plus body ellipses at the same
    offsets (environment-aware motion matching); ``heights`` adds the body's lowest and
    highest joint heights per ellipse (jumping over and crouching under obstacles).

    The query part is unchanged (27-D or 33-D); the ellipses add 15 (or 21 with heights)
    raw dimensions that never enter distances.
    """
    base = default_schema(vertical=vertical, offsets=offsets)
    env = FeatureTerm("body_ellipse", "ellipse", offsets=tuple(offsets), vertical=heights)
    name = "environment" + ("-heights" if heights else "") + ("-3d" if vertical else "")
    return FeatureSchema(base.terms + (env,), name=name)


def _roles_of(d: Any) -> dict[str, str]:
    if not isinstance(d, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in d.items()):
        raise SchemaError('a roles map is a JSON object of role names to joint names, e.g. {"left_foot": "ball_l"}')
    FeatureSchema(default_schema().terms, roles=tuple(d.items()))  # checks the role names
    return dict(d)


def load_roles(path: str | Path) -> dict[str, str]:
    """A roles map file: a JSON object ``{role: joint name}`` (or ``{"roles": {...}}``),
    the roles of :data:`ROLES` it names overriding what is found on a rig."""
    try:
        d = read_json(path, "roles map", error=SchemaError)
        return _roles_of(d["roles"] if isinstance(d, dict) and set(d) == {"roles"} else d)
    except SchemaError as e:
        raise SchemaError(e if str(e).startswith(f"{path}: ") else f"{path}: {e}") from None


def schema_by_name(name: str) -> FeatureSchema:
    """``"classic"`` (27-D), ``"classic-3d"`` (33-D), ``"environment"`` (classic + body
    ellipses), ``"environment-heights"`` (+ body heights), ``"environment-3d"`` /
    ``"environment-heights-3d"`` (the same on the 3D schema), any of them with ``+ground``
    (plus the ``ground_height`` term: :meth:`FeatureSchema.with_ground`), or a path to a
    JSON schema file (one with only ``"roles"``: the classic terms with that roles map)."""
    if name.endswith("+ground") and not name.endswith(".json"):
        return schema_by_name(name[: -len("+ground")]).with_ground()
    if name in ("classic", "2d", "default"):
        return default_schema()
    if name in ("classic-3d", "3d"):
        return default_schema(vertical=True)
    if name.startswith("environment") and name in ("environment", "environment-heights", "environment-3d",
                                                    "environment-heights-3d"):
        return environment_schema(heights="heights" in name, vertical=name.endswith("-3d"))
    p = Path(name)
    if p.suffix == ".json" and p.exists():
        try:
            d = read_json(p, "feature schema", error=SchemaError)
            if isinstance(d, dict) and "terms" not in d and "roles" in d:  # only a roles map: the classic terms
                return default_schema().with_roles(_roles_of(d["roles"]))
            return FeatureSchema.from_dict(d)
        except SchemaError as e:
            raise SchemaError(e if str(e).startswith(f"{p}: ") else f"{p}: {e}") from None
    raise SchemaError(f"unknown schema {name!r}: use 'classic', 'classic-3d', 'environment', "
                      "'environment-heights' (each with '+ground' to add the ground heights) or a .json schema file")
