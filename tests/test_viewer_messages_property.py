"""Property tests of the viewer's message schema (hypothesis): whatever JSON a page sends,
the parser either accepts it or refuses it with a :class:`MessageError` (an error reply);
nothing else escapes, so no message can end a session."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from motionmatch import validation as V
from motionmatch.viewer import messages as M

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
    else:  # Custom: obstacles, scenes
        kind = st.one_of(obstacles, st.fixed_dictionaries({"obstacles": st.lists(obstacles, max_size=4)}),
                         st.lists(st.lists(numbers, min_size=3, max_size=3), min_size=0, max_size=6))
    return st.one_of(kind, kind, kind, junk)


def fields_of(schema: dict) -> st.SearchStrategy:
    """An object with a random subset of ``schema``'s fields (and now and then one it lacks)."""
    optional = {name: value_for(f) for name, f in schema.items()}
    return st.fixed_dictionaries({}, optional=optional).flatmap(
        lambda d: st.one_of(st.just(d), st.builds(lambda k, v: {**d, k: v}, st.text(max_size=10), junk)))


obstacles = st.fixed_dictionaries({}, optional={
    "shape": st.sampled_from(["disk", "box", "ellipse", "cone"]),
    "center": st.lists(numbers, min_size=1, max_size=3),
    "radius": numbers, "size": st.lists(numbers, min_size=2, max_size=2),
    "axes": st.lists(numbers, min_size=2, max_size=2), "yaw_deg": numbers,
    "height": st.lists(numbers, min_size=2, max_size=2), "velocity": st.lists(numbers, min_size=2, max_size=2),
    "path": st.lists(st.lists(numbers, min_size=3, max_size=3), max_size=4), "name": st.text(max_size=70)})

messages = st.sampled_from(sorted(M.SCHEMAS)).flatmap(
    lambda kind: st.builds(lambda body, seq: {"type": kind, **body, **({} if seq is None else {"seq": seq})},
                           fields_of(M.SCHEMAS[kind]), st.one_of(st.none(), st.integers(0, 2**60), numbers)))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(messages, min_size=20, max_size=20))
def test_every_message_is_accepted_or_answered_with_an_error(batch):
    """10,000 messages in all (500 examples of 20)."""
    for msg in batch:
        text = json.dumps(msg)  # NaN and Infinity as Python writes them: the parser reads them too
        try:
            out = M.parse(text)
        except M.MessageError as e:
            assert e.code and str(e)
            continue
        assert out["type"] == msg["type"]
        for v in _leaves(out):  # an accepted message carries only finite, bounded numbers
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                assert math.isfinite(v) and abs(v) < 2**53


def _leaves(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _leaves(v)
    else:
        yield x


def test_a_400_digit_number_is_refused_in_one_line():
    for kind, field in (("camera", "yaw"), ("select", "id"), ("step", "frames")):
        try:
            M.parse(json.dumps({"type": kind, field: 10**400}))
        except M.MessageError as e:
            assert e.code == "invalid" and "401 digits" in str(e) and "\n" not in str(e)
        else:
            raise AssertionError(f"{kind}.{field} = 10**400 was accepted")
