"""Search weights written as text (``motionmatch build/run --weights``).

A weight spec describes the whole loss a search minimises: comma-separated
``name=value`` items, where ``name`` is ``responsiveness`` (multiplies the squared
distance of the trajectory groups), ``continuity`` (of the pose groups) or a feature
group of the schema (multiplies its normalised features); every group it does not name
weighs 1, and so does a knob it does not name. So ``responsiveness=0.8,continuity=0.2``
is the paper's weighted loss (Eq. 13: ``0.8 |x_traj - x_k,traj|^2 + 0.2 |x_feat -
x_k,feat|^2`` on normalised features), and ``responsiveness=1`` the unweighted distance
(Eq. 12). ``paper`` is short for the former, ``unit`` for the latter; items after a
preset change it (``paper,trajectory_direction=1.5``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from motionmatch.database.schema import FeatureSchema
from motionmatch.errors import MotionMatchError

KNOBS = ("responsiveness", "continuity")
PRESETS = {"paper": {"responsiveness": 0.8, "continuity": 0.2}, "unit": {}}


class WeightsError(MotionMatchError, ValueError):
    """A weight spec that cannot be read, or names a group the schema does not have."""


@dataclass(frozen=True)
class SearchWeights:
    """What :meth:`MotionDatabase.set_weights` takes: per-group weights (groups of the
    schema, each >= 0) and the two knobs (>= 0)."""

    group_weights: dict[str, float] = field(default_factory=dict)
    responsiveness: float = 1.0
    continuity: float = 1.0

    @classmethod
    def parse(cls, text: str, schema: FeatureSchema) -> SearchWeights:
        """Read a weight spec (see the module docstring) for ``schema``; raises
        :class:`WeightsError` with one line naming the bad item and what is accepted."""
        groups = [t.name for t in schema.terms if t.kind != "ellipse"]
        accepted = f"use 'paper', 'unit' or name=value items with names {', '.join((*KNOBS, *groups))}"
        values: dict[str, float] = {}
        items = [s.strip() for s in str(text).split(",")]
        if not any(items):
            raise WeightsError(f"--weights is empty; {accepted}")
        for item in items:
            if item.lower() in PRESETS:
                values.clear()
                values.update(PRESETS[item.lower()])
                continue
            name, eq, number = item.partition("=")
            name = name.strip()
            if not eq or not name:
                raise WeightsError(f"--weights item {item!r} is not name=value; {accepted}")
            if name not in KNOBS and name not in groups:
                raise WeightsError(f"--weights names {name!r}, which is neither a knob nor a feature group of "
                                   f"schema '{schema.name}'; {accepted}")
            try:
                value = float(number)
            except ValueError:
                value = math.nan
            if not (0 <= value < math.inf):
                raise WeightsError(f"--weights {name}={number.strip()!r}: expected a number >= 0")
            values[name] = value
        return cls({g: values.get(g, 1.0) for g in groups}, values.get("responsiveness", 1.0),
                   values.get("continuity", 1.0))

    def apply(self, db) -> None:
        """Weight ``db``'s features so (:meth:`MotionDatabase.set_weights`)."""
        db.set_weights(self.group_weights, responsiveness=self.responsiveness, continuity=self.continuity)

    def describe(self) -> str:
        """One line: the knobs and the group weights."""
        groups = ", ".join(f"{k} {v:g}" for k, v in self.group_weights.items())
        return f"responsiveness {self.responsiveness:g}, continuity {self.continuity:g}; groups: {groups}"
