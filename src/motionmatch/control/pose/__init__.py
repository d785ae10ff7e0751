"""Human pose control (paper Sec. 3.4.3): a performer's movements, classified into
commands, drive the character.

Pipeline: body keypoints over time (:mod:`.keypoints`: files; :mod:`.sources`: a webcam
through MediaPipe, an optional extra; :mod:`.render`: motion capture filmed by a virtual
camera; :mod:`.imitate`: a real estimator's measured errors added to them) -> normalisation (:mod:`.normalize`: hips-centred, torso-scaled) -> window
features (:mod:`.features`) -> a classifier over the 13 commands (:mod:`.classify`: the
paper's kNN baseline and an improved temporal classifier) -> intents
(:mod:`.commands`) -> the controller (:mod:`.drive`).

Training and test data are rendered from the shared motion capture and labelled by
rules (:mod:`.labels`, :mod:`.dataset`); :mod:`.default` builds and caches the default
classifiers and :mod:`.evaluate` measures them (per-class precision/recall/F1,
confusion matrix, latency, flicker).

Typical use::

    from motionmatch.control.pose import default_classifier, load_keypoints
    from motionmatch.runtime.pose_run import run_keypoints

    clf = default_classifier()                        # trained once, then cached
    stream = load_keypoints("performance.json")
    run = run_keypoints(db, stream, clf)              # run.record.motion: the character
"""

from motionmatch.control.pose.classify import (
    ClassifiedStream,
    HMMFilter,
    KNNPoseClassifier,
    MajorityVote,
    MLPPoseClassifier,
    PoseClassifier,
    StreamingClassifier,
    load_classifier,
    resample_stream,
)
from motionmatch.control.pose.commands import CommandMapper
from motionmatch.control.pose.default import TrainConfig, default_classifier, default_classifiers
from motionmatch.control.pose.drive import PoseControl
from motionmatch.control.pose.keypoints import (
    KEYPOINTS,
    KeypointError,
    KeypointStream,
    canonical_name,
    load_keypoints,
    save_keypoints,
)
from motionmatch.control.pose.labels import COMMANDS, label_frames, motion_facts
from motionmatch.control.pose.normalize import NormalizedPoses, normalize_stream
from motionmatch.control.pose.render import Camera, RenderSettings, render_keypoints, render_motion, world_keypoints
from motionmatch.control.pose.sources import WebcamError, WebcamSource, render_bvh

__all__ = [
    "COMMANDS",
    "KEYPOINTS",
    "Camera",
    "ClassifiedStream",
    "CommandMapper",
    "HMMFilter",
    "KNNPoseClassifier",
    "KeypointError",
    "KeypointStream",
    "MLPPoseClassifier",
    "MajorityVote",
    "NormalizedPoses",
    "PoseClassifier",
    "PoseControl",
    "RenderSettings",
    "StreamingClassifier",
    "TrainConfig",
    "WebcamError",
    "WebcamSource",
    "canonical_name",
    "default_classifier",
    "default_classifiers",
    "label_frames",
    "load_classifier",
    "load_keypoints",
    "motion_facts",
    "normalize_stream",
    "render_bvh",
    "render_keypoints",
    "render_motion",
    "resample_stream",
    "save_keypoints",
    "world_keypoints",
]
