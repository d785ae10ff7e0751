"""Hypothesis strategies for JSON input checked by :mod:`motionmatch.validation`'s
fields (the viewer's messages, scenario files): values of each field's kind, in and out
of its range, and now and then any JSON at all."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from motionmatch import validation as V

# numbers a JSON parser can produce: small and huge integers (hundreds of digits), floats
# of every size, and the NaN / Infinity that Python's json module reads
huge_ints = st.builds(lambda digits, sign, extra: sign * (10**digits + extra), st.integers(15, 450),
                      st.sampled_from([1, -1]), st.integers(0, 10**6))
numbers = st.one_of(st.integers(), huge_ints, st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0, -0.0, 1e308, -1e308, 5e-324, 2**53, 2**63, -(2**63), 2**64]))
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=40))
junk = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=6),
                                                     st.dictionaries(st.text(max_size=12), inner, max_size=6)),
                    max_leaves=6)

obstacles = st.fixed_dictionaries({}, optional={
    "shape": st.sampled_from(["disk", "box", "ellipse", "cone"]),
    "center": st.lists(numbers, min_size=1, max_size=3),
    "radius": numbers, "size": st.lists(numbers, min_size=2, max_size=2),
    "axes": st.lists(numbers, min_size=2, max_size=2), "yaw_deg": numbers,
    "height": st.lists(numbers, min_size=2, max_size=2), "velocity": st.lists(numbers, min_size=2, max_size=2),
    "path": st.lists(st.lists(numbers, min_size=3, max_size=3), max_size=4), "name": st.text(max_size=70)})

# what a Custom field may hold: obstacles, scenes, directions, timelines, timed paths, regions
customs = st.one_of(
    obstacles, st.fixed_dictionaries({"obstacles": st.lists(obstacles, max_size=4)}),
    st.lists(numbers, min_size=2, max_size=2), st.lists(st.lists(numbers, min_size=3, max_size=3), max_size=6),
    st.fixed_dictionaries({"events": st.lists(junk, max_size=3)}),
    st.fixed_dictionaries({"points": st.lists(st.lists(numbers, min_size=3, max_size=3), max_size=4)},
                          optional={"scale": numbers, "rate": numbers}),
    st.dictionaries(st.text(max_size=8), st.fixed_dictionaries({}, optional={
        "x": st.lists(numbers, min_size=2, max_size=2), "z": st.lists(numbers, min_size=2, max_size=2)}), max_size=3),
    st.text(max_size=20))


def value_for(field: V.Field) -> st.SearchStrategy:
    """Values for one field: mostly of its kind (in and out of its range), sometimes anything."""
    if isinstance(field, V.Num):
        lo, hi = field.lo, field.hi
        inside = (st.integers(math.ceil(lo), math.floor(hi)) if field.integer
                  else st.floats(lo, hi, allow_nan=False))
        kind = st.one_of(inside, inside, numbers)
    elif isinstance(field, V.Str):
        kind = st.one_of(st.text(max_size=field.max_len + 4),
                         st.sampled_from(field.choices) if field.choices else st.text(max_size=8))
    elif isinstance(field, V.Bool):
        kind = st.booleans()
    elif isinstance(field, V.Tuple):
        n = len(field.items)
        kind = st.one_of(st.tuples(*map(value_for, field.items)).map(list),
                         st.lists(value_for(field.items[0]), min_size=max(n - 1, 0), max_size=n + 1))
    elif isinstance(field, V.List):
        kind = st.lists(value_for(field.item), min_size=0, max_size=min(field.max_len, 6))
    elif isinstance(field, V.Obj):
        kind = fields_of(field.fields)
    else:
        kind = customs
    return st.one_of(kind, kind, kind, junk)


def fields_of(schema: dict) -> st.SearchStrategy:
    """An object with a random subset of ``schema``'s fields (and now and then one it lacks)."""
    optional = {name: value_for(f) for name, f in schema.items()}
    return st.fixed_dictionaries({}, optional=optional).flatmap(
        lambda d: st.one_of(st.just(d), st.builds(lambda k, v: {**d, k: v}, st.text(max_size=10), junk)))


def valid_for(field: V.Field) -> st.SearchStrategy:
    """Values for one field within its bounds and lengths (objects leave out their optional
    Custom fields), to reach what lies behind the checks: rules across fields, what is
    built from the values."""
    if isinstance(field, V.Num):
        return (st.integers(math.ceil(field.lo), math.floor(field.hi)) if field.integer
                else st.floats(field.lo, field.hi, allow_nan=False))
    if isinstance(field, V.Str):
        return st.sampled_from(field.choices) if field.choices else st.text(max_size=min(field.max_len, 12))
    if isinstance(field, V.Bool):
        return st.booleans()
    if isinstance(field, V.Tuple):
        return st.tuples(*map(valid_for, field.items)).map(list)
    if isinstance(field, V.List):
        return st.lists(valid_for(field.item), min_size=field.min_len, max_size=max(field.min_len, min(field.max_len, 4)))
    if isinstance(field, V.Obj):
        required = {k: valid_for(f) for k, f in field.fields.items() if not (f.optional or field.partial)}
        optional = {k: valid_for(f) for k, f in field.fields.items()
                    if k not in required and not isinstance(f, V.Custom)}
        return st.fixed_dictionaries(required, optional=optional)
    return customs
