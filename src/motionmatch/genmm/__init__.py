"""GenMM: generative motion matching from a few examples (Li et al., SIGGRAPH 2023).

From one or a few example clips of any skeleton, synthesize new motions of any length
that look like the examples, diverse, training-free, in a fraction of a second. See
:class:`GenMM` and the applications below; the method, the representation and every
setting are documented in the modules:

* :mod:`~motionmatch.genmm.representation`: the per-frame features (6D rotations, root
  ground velocity and height, optional foot contacts) and the way back to a Motion.
* :mod:`~motionmatch.genmm.engine`: the multi-stage pyramid and match-and-blend loop.
* :mod:`~motionmatch.genmm._core`: patch distances, completeness-normalised nearest
  neighbours and average voting (array-API code: numpy, or PyTorch on CPU/GPU).
* :mod:`~motionmatch.genmm._cpu`: the same on the CPU as compiled kernels on several
  threads (``threads=``; the same output on any number), what ``device="cpu"`` runs.
* :mod:`~motionmatch.genmm.parts`: skeleton-aware parts (automatic or given).
* :mod:`~motionmatch.genmm.applications`: reassembly, random locomotion.
* :mod:`~motionmatch.genmm.footik`: contact-aware foot clean-up.
* :mod:`~motionmatch.genmm.rates`: which example frame rates are taken at face value
  (10-480 fps), and the warning or refusal for the others.

Syntheses are quiet; pass ``progress=`` to :meth:`GenMM.sample` for a
:class:`SynthesisProgress` (stage, fraction done, estimated seconds left) after every
iteration.
"""

from motionmatch.genmm.applications import (
    ReassemblySource,
    complete,
    keyframe_guided,
    loop,
    random_locomotion,
    reassemble,
    turn,
)
from motionmatch.genmm.engine import SynthesisProgress
from motionmatch.genmm.footik import fix_foot_contacts
from motionmatch.genmm.parts import auto_parts, resolve_parts
from motionmatch.genmm.rates import PLAUSIBLE_FPS, FrameRateWarning
from motionmatch.genmm.representation import FeatureLayout, body_scale, decode, detect_feet, encode
from motionmatch.genmm.synthesis import (
    Completion,
    GenMM,
    GenMMConfig,
    GenMMResult,
    Keyframes,
    load_examples,
    synthesize,
)

__all__ = [
    "PLAUSIBLE_FPS",
    "Completion",
    "FeatureLayout",
    "FrameRateWarning",
    "GenMM",
    "GenMMConfig",
    "GenMMResult",
    "Keyframes",
    "ReassemblySource",
    "SynthesisProgress",
    "auto_parts",
    "body_scale",
    "complete",
    "decode",
    "detect_feet",
    "encode",
    "fix_foot_contacts",
    "keyframe_guided",
    "load_examples",
    "loop",
    "random_locomotion",
    "reassemble",
    "resolve_parts",
    "synthesize",
    "turn",
]
