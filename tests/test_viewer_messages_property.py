"""Property tests of the viewer's message schema (hypothesis): whatever JSON a page sends,
the parser either accepts it or refuses it with a :class:`MessageError` (an error reply);
nothing else escapes, so no message can end a session."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from json_strategies import fields_of, numbers
from motionmatch.viewer import messages as M

messages = st.sampled_from(sorted(M.SCHEMAS)).flatmap(
    lambda kind: st.builds(lambda body, seq: {"type": kind, **body, **({} if seq is None else {"seq": seq})},
                           fields_of(M.SCHEMAS[kind]), st.one_of(st.none(), st.integers(0, 2**60), numbers)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(messages, min_size=20, max_size=20))
def test_every_message_is_accepted_or_answered_with_an_error(batch):
    """4,000 messages in all (200 examples of 20)."""
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
