"""Shared set-up for the benchmarks: where the data is, the scripted inputs, and the tests' oracles."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The repository's tests: the baselines some benchmarks measure against are test oracles (``tests/oracles``).
TESTS = REPO / "tests"


def data_root(arg: str | None = None) -> Path:
    root = Path(arg or os.environ.get("MOTIONMATCH_DATA") or REPO.parent / "shared" / "data")
    if not root.is_dir():
        sys.exit(f"motion data not found at {root}; pass --data or set MOTIONMATCH_DATA")
    return root


def reference_controller() -> type:
    """:class:`oracles.controller.ReferenceController` from the repository's ``tests/``: the
    controller with its per-frame stages in plain numpy, the baseline of the compiled path."""
    if str(TESTS) not in sys.path:
        sys.path.append(str(TESTS))
    from oracles.controller import ReferenceController

    return ReferenceController


# Walking with 90 and 180 degree turns, running, stopping: the inputs the ablations use.
TURNS_SCRIPT = {
    "duration": 48.0,
    "events": [{"t": 4.0 * i, "keys": k.split()} for i, k in enumerate(
        ["w", "d", "s", "a", "w", "a", "s", "d", "w shift", "d shift", "", "w"])],
}
