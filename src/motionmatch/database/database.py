"""`MotionDatabase`: every frame of many clips, as searchable normalised features.

Build it from motions (resampled to one frame rate, optionally with mirrored copies),
then search :attr:`MotionDatabase.features` with :mod:`motionmatch.search`. The database
also keeps what playback needs: each frame's local pose under a canonical character
root (joint 0: on the ground, facing +Z), foot contacts, clip ranges and tags.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from motionmatch.anim import quat
from motionmatch.anim.contacts import foot_contacts
from motionmatch.anim.mirror import mirror
from motionmatch.anim.motion import Motion
from motionmatch.anim.resample import resample
from motionmatch.anim.root import extract_root, with_root_bone
from motionmatch.anim.skeleton import Skeleton
from motionmatch.database._normalise import column_mean_std, normalized
from motionmatch.database.features import clip_features, resolve_joint
from motionmatch.database.schema import FeatureSchema, SchemaError, default_schema
from motionmatch.database.tags import tag_mask
from motionmatch.errors import MotionMatchError

FORMAT_VERSION = 1


class DatabaseError(MotionMatchError):
    """A database cannot be built, or a saved one is corrupt, stale or from another version."""


def input_hash(motions: Sequence[Motion], fps: float, mirror_copies: bool, schema: FeatureSchema) -> str:
    """SHA-256 of everything a database is built from: the clips' data, names, tags and
    rates (one :func:`clip_digest` each, in order), the build settings and the format version."""
    return combine_digests([clip_digest(m) for m in motions], fps, mirror_copies, schema)


def clip_digest(m: Motion) -> bytes:
    """SHA-256 (32 bytes) of one source clip: its name, rate, tags, joint names and data."""
    h = hashlib.sha256()
    _hash_motion(h, m)
    return h.digest()


def combine_digests(digests: Sequence[bytes], fps: float, mirror_copies: bool, schema: FeatureSchema) -> str:
    """The :func:`input_hash` of clips whose :func:`clip_digest` are ``digests`` (so that
    clips hashed apart, e.g. in parallel, give the same database hash)."""
    h = hashlib.sha256()
    h.update(f"v{FORMAT_VERSION}|{fps}|{mirror_copies}|{schema.to_json()}".encode())
    for d in digests:
        h.update(d)
    return h.hexdigest()


def _hash_motion(h, m: Motion) -> None:
    h.update(m.name.encode())
    h.update(repr((m.fps, m.tags, m.skeleton.names)).encode())
    h.update(np.ascontiguousarray(m.rotations).tobytes())
    h.update(np.ascontiguousarray(m.translations).tobytes())


def prepare_clips(motion: Motion, fps: float, mirror_copies: bool, *, use_root_bone: bool = True) -> list[Motion]:
    """The database clips made from one source clip: resampled to ``fps``, its mirrored
    copy (tagged ``mirrored``) if asked, each with a canonical root bone (the file's own
    root bone re-oriented where it carries one and ``use_root_bone``, else a new one above
    it); clips under two frames are left out."""
    base = motion if abs(motion.fps - fps) < 1e-9 else resample(motion, fps)
    variants = [base]
    if mirror_copies:
        mm = mirror(base)
        mm.tags = (*base.tags, "mirrored")
        variants.append(mm)
    return [with_root_bone(v, extract_root(v, use_existing=use_root_bone)) for v in variants if v.num_frames >= 2]


def _one_root_per_rig(motions: list[Motion], clips: list[list[Motion]], fps: float, mirror_copies: bool) -> None:
    """Where the clips of one rig disagree on its root (a file's root bone found in some
    takes, e.g. walking, but not in others, e.g. punching on the spot, which then got a
    new root above it), make that rig's clips again each with a new root (in place), so
    that they share one skeleton."""
    def rig(m: Motion) -> tuple:
        return m.skeleton.names, m.skeleton.parents.tobytes()

    groups: dict[tuple, list[int]] = {}
    for i, m in enumerate(motions):
        groups.setdefault(rig(m), []).append(i)
    for idx in groups.values():
        if len({rig(c) for i in idx for c in clips[i]}) > 1:
            for i in idx:
                clips[i] = prepare_clips(motions[i], fps, mirror_copies, use_root_bone=False)


@dataclass(frozen=True)
class ClipPart:
    """One database clip's share of the database arrays (``F`` frames; see
    :class:`MotionDatabase` for the arrays), extracted on its own by :func:`extract_part`
    and joined in clip order by :meth:`MotionDatabase.from_parts`."""

    name: str
    tags: tuple[str, ...]
    skeleton: Skeleton
    raw_features: np.ndarray  # [F, D] float32
    valid: np.ndarray  # [F] bool
    rotations: np.ndarray  # [F, J, 4] float32
    translations: np.ndarray  # [F, J, 3] float32
    contacts: np.ndarray  # [F, 2] bool
    foot_joints: tuple[int, int]

    @property
    def num_frames(self) -> int:
        return self.raw_features.shape[0]


def extract_part(clip: Motion, schema: FeatureSchema) -> ClipPart:
    """Features, contacts and poses of one prepared clip (from :func:`prepare_clips`)."""
    roles = schema.roles_map  # what the schema names is what contacts and foot locking use
    try:
        foot_idx = (resolve_joint(clip.skeleton, "left_foot", roles), resolve_joint(clip.skeleton, "right_foot", roles))
        f, v = clip_features(clip, schema)
    except SchemaError as e:
        raise SchemaError(f"clip {clip.name!r}: {e}") from None
    return ClipPart(
        name=clip.name, skeleton=clip.skeleton,
        tags=tuple(clip.tags or tuple(w for w in clip.name.lower().replace("-", "_").split("_") if w)),
        raw_features=np.ascontiguousarray(f, dtype=np.float32), valid=np.asarray(v, dtype=bool),
        rotations=np.ascontiguousarray(clip.rotations, dtype=np.float32),
        translations=np.ascontiguousarray(clip.translations, dtype=np.float32),
        contacts=np.asarray(foot_contacts(clip, feet=list(foot_idx)).contacts, dtype=bool), foot_joints=foot_idx,
    )


def _check_topology(names: Sequence[str], skeletons: Sequence[Skeleton]) -> None:
    first = skeletons[0]
    for name, sk in zip(names[1:], skeletons[1:]):
        if not sk.same_topology(first):
            raise DatabaseError(
                f"clip {name!r} has a different skeleton from {names[0]!r} "
                f"({sk.num_joints} vs {first.num_joints} joints or other names/hierarchy); "
                "a database needs one skeleton"
            )


class MotionDatabase:
    """Features and poses of every frame of a set of clips at one frame rate.

    Array attributes (``N`` frames, ``J`` joints, ``D`` feature dimensions):
        raw_features: ``[N, D]`` float32, features before normalisation.
        features: ``[N, D]`` float32 C-contiguous, normalised and weighted: search these.
        valid: ``[N]`` bool, frames a search may return (their future stays inside the clip).
        rotations: ``[N, J, 4]`` float32 local joint rotations; joint 0 is the character
            root (world yaw), so ``rotations[:, 0]`` is the root's facing.
        translations: ``[N, J, 3]`` float32 local translations (m); ``translations[:, 0]``
            is the root's world position on the ground.
        contacts: ``[N, K]`` bool foot contacts for the joints in ``foot_joints``.
        clip_starts, clip_stops: ``[C]`` frame range of each clip (stop exclusive).
        frame_clip: ``[N]`` clip index of each frame.
    """

    def __init__(
        self,
        *,
        skeleton: Skeleton,
        fps: float,
        schema: FeatureSchema,
        raw_features: np.ndarray,
        valid: np.ndarray,
        clip_starts: np.ndarray,
        clip_stops: np.ndarray,
        clip_names: Sequence[str],
        clip_tags: Sequence[Sequence[str]],
        rotations: np.ndarray,
        translations: np.ndarray,
        contacts: np.ndarray,
        foot_joints: Sequence[int],
        input_hash: str,
        group_weights: Mapping[str, float] | None = None,
        responsiveness: float = 1.0,
        continuity: float = 1.0,
        file_scale: float = 1.0,
    ):
        self.skeleton = skeleton
        self.file_scale = float(file_scale)  # metres per unit of the source files, for exports
        self.fps = float(fps)
        self.schema = schema
        self.raw_features = np.ascontiguousarray(raw_features, dtype=np.float32)
        self.valid = np.asarray(valid, dtype=bool)
        self.clip_starts = np.asarray(clip_starts, dtype=np.int64)
        self.clip_stops = np.asarray(clip_stops, dtype=np.int64)
        self.clip_names = list(clip_names)
        self.clip_tags = [tuple(t) for t in clip_tags]
        self.rotations = np.ascontiguousarray(rotations, dtype=np.float32)
        self.translations = np.ascontiguousarray(translations, dtype=np.float32)
        self.contacts = np.asarray(contacts, dtype=bool)
        self.foot_joints = tuple(int(j) for j in foot_joints)
        self.input_hash = input_hash
        N = self.raw_features.shape[0]
        self.frame_clip = np.repeat(np.arange(len(self.clip_starts)), self.clip_stops - self.clip_starts)
        if self.frame_clip.shape[0] != N or self.valid.shape != (N,) or self.rotations.shape[0] != N:
            raise DatabaseError("inconsistent database arrays: clip ranges, features and poses disagree in length")
        self._compute_normalisation()
        self.set_weights(group_weights, responsiveness=responsiveness, continuity=continuity)

    # ------------------------------------------------------------------ building
    @classmethod
    def build(
        cls,
        motions: Iterable[Motion],
        *,
        fps: float = 60.0,
        mirror_copies: bool = False,
        schema: FeatureSchema | None = None,
        group_weights: Mapping[str, float] | None = None,
        responsiveness: float = 1.0,
        continuity: float = 1.0,
        progress: bool = False,
    ) -> MotionDatabase:
        """Build from clips: resample to ``fps``, add mirrored copies (tagged ``mirrored``)
        if asked, give each clip a canonical root, and extract features and contacts.

        All clips must share one joint hierarchy (same names and parents; bone lengths may
        differ). Each clip keeps its ``tags`` (plus its name's lower-cased words if it has
        no tags).
        """
        schema = schema or default_schema()
        motions = list(motions)
        if not motions:
            raise DatabaseError("no motions to build a database from")
        digest = input_hash(motions, fps, mirror_copies, schema)
        per_motion = [prepare_clips(m, fps, mirror_copies)
                      for m in tqdm(motions, desc="preparing clips", unit="clip", disable=not progress)]
        _one_root_per_rig(motions, per_motion, fps, mirror_copies)
        clips: list[Motion] = [c for cs in per_motion for c in cs]
        if not clips:
            shown = ", ".join(f"{m.source or m.name or '<motion>'!s} ({m.num_frames} frame{'s' * (m.num_frames != 1)})"
                              for m in motions[:3]) + (", ..." if len(motions) > 3 else "")
            raise DatabaseError(f"every clip has fewer than two frames at {fps:g} fps: {shown}; "
                                "give clips of at least two frames")
        _check_topology([c.name for c in clips], [c.skeleton for c in clips])
        parts = [extract_part(c, schema)
                 for c in tqdm(clips, desc="extracting features", unit="clip", disable=not progress)]
        return cls.from_parts(parts, fps=fps, schema=schema, input_hash=digest, group_weights=group_weights,
                              responsiveness=responsiveness, continuity=continuity, file_scale=motions[0].file_scale)

    @classmethod
    def from_parts(
        cls,
        parts: Sequence[ClipPart],
        *,
        fps: float,
        schema: FeatureSchema,
        input_hash: str,
        group_weights: Mapping[str, float] | None = None,
        responsiveness: float = 1.0,
        continuity: float = 1.0,
        file_scale: float = 1.0,
    ) -> MotionDatabase:
        """Join clip parts (:func:`extract_part`, in clip order) into one database; the
        normalisation is computed over all of them, as :meth:`build` does."""
        if not parts:
            raise DatabaseError("no motions to build a database from")
        _check_topology([p.name for p in parts], [p.skeleton for p in parts])
        stops = np.cumsum([p.num_frames for p in parts])
        db = cls(
            skeleton=parts[0].skeleton, fps=fps, schema=schema,
            raw_features=np.concatenate([p.raw_features for p in parts]),
            valid=np.concatenate([p.valid for p in parts]),
            clip_starts=stops - [p.num_frames for p in parts], clip_stops=stops,
            clip_names=[p.name for p in parts], clip_tags=[p.tags for p in parts],
            rotations=np.concatenate([p.rotations for p in parts]),
            translations=np.concatenate([p.translations for p in parts]),
            contacts=np.concatenate([p.contacts for p in parts]),
            foot_joints=parts[0].foot_joints, input_hash=input_hash, group_weights=group_weights,
            responsiveness=responsiveness, continuity=continuity, file_scale=file_scale,
        )
        if not db.valid.any():
            raise DatabaseError(f"every clip is shorter than the schema's future horizon ({schema.max_offset:g} s)")
        return db

    # ------------------------------------------------------------- normalisation
    def _compute_normalisation(self) -> None:
        self.mean, std = column_mean_std(self.raw_features)  # numpy's float64 mean and std, compiled
        self.scale = np.ones(self.schema.dims)
        for t in self.schema.terms:
            sl = self.schema.slice(t.name)
            s = float(std[sl].mean())
            self.scale[sl] = s if s > 1e-8 else 1.0

    def set_weights(self, group_weights: Mapping[str, float] | None = None, *,
                    responsiveness: float | None = None, continuity: float | None = None) -> None:
        """Set per-group weights and the two high-level knobs, and re-weight the features.

        ``group_weights`` multiply a group's normalised features (default: the schema's).
        ``responsiveness`` and ``continuity`` multiply the *squared-distance* contribution
        of the trajectory groups and the pose (bone) groups: ``responsiveness=0.8,
        continuity=0.2`` with unit group weights is the paper's weighted loss (Eq. 13).
        """
        gw = {t.name: t.weight for t in self.schema.terms}
        if group_weights:
            for k, v in group_weights.items():
                self.schema.term(k)  # validates the name
                if not v >= 0:
                    raise DatabaseError(f"weight of {k!r} must be >= 0, got {v}")
                gw[k] = float(v)
        self.group_weights = gw
        if responsiveness is not None:
            self.responsiveness = float(responsiveness)
        elif not hasattr(self, "responsiveness"):
            self.responsiveness = 1.0
        if continuity is not None:
            self.continuity = float(continuity)
        elif not hasattr(self, "continuity"):
            self.continuity = 1.0
        if self.responsiveness < 0 or self.continuity < 0:
            raise DatabaseError("responsiveness and continuity must be >= 0")
        w = np.empty(self.schema.dims)
        for t in self.schema.terms:
            knob = self.responsiveness if t.is_trajectory else self.continuity
            if t.kind == "ellipse":  # environment features give penalties, never distances
                gw[t.name], knob = 0.0, 0.0
            w[self.schema.slice(t.name)] = gw[t.name] * np.sqrt(knob)
        self.weights = w
        self.features = normalized(self.raw_features, self.mean, self.scale, self.weights)  # = normalize(raw_features)

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """Raw features ``[..., D]`` -> normalised, weighted float32 ``[..., D]``."""
        raw = np.asarray(raw, dtype=np.float64)
        if raw.shape[-1] != self.schema.dims:
            raise DatabaseError(f"features must have {self.schema.dims} dimensions, got {raw.shape[-1]}")
        return ((raw - self.mean) / self.scale * self.weights).astype(np.float32)

    def group_costs(self, query: np.ndarray, frame: int) -> dict[str, float]:
        """Squared distance per feature group between a normalised query and a frame."""
        d = (np.asarray(query, dtype=np.float64) - self.features[frame]) ** 2
        return {t.name: float(d[self.schema.slice(t.name)].sum()) for t in self.schema.terms}

    # ----------------------------------------------------------------- queries
    @property
    def num_frames(self) -> int:
        return self.raw_features.shape[0]

    def __len__(self) -> int:
        return self.num_frames

    def __repr__(self) -> str:
        return (f"MotionDatabase({self.num_frames} frames, {len(self.clip_names)} clips, {self.fps:g} fps, "
                f"{self.schema.dims}-D {self.schema.name})")

    @property
    def tags(self) -> list[str]:
        return sorted({t.lower() for ts in self.clip_tags for t in ts})

    def mask(self, tags: str | None = None, *, strict: bool = True) -> np.ndarray:
        """``[N]`` frames a search may return: valid, and matching the tag query if given
        (``strict=False``: a tag the data lacks is a tag no clip has, not an error)."""
        if tags is None or tags.strip() in ("", "*"):
            return self.valid.copy()
        return self.valid & tag_mask(tags, self.clip_tags, self.frame_clip, strict=strict)

    def clip_of(self, frame: int) -> int:
        return int(self.frame_clip[frame])

    def clip_end(self, frame: int) -> int:
        """Last frame index (inclusive) of ``frame``'s clip."""
        return int(self.clip_stops[self.frame_clip[frame]] - 1)

    @property
    def root_positions(self) -> np.ndarray:
        """``[N, 3]`` root positions on the ground (m), each clip in its own world."""
        return self.translations[:, 0].astype(np.float64)

    @property
    def root_rotations(self) -> np.ndarray:
        """``[N, 4]`` root rotations (yaw)."""
        return self.rotations[:, 0].astype(np.float64)

    def root_speeds(self) -> np.ndarray:
        """``[N]`` horizontal root speed (m/s) per frame, from clip-internal differences."""
        p = self.root_positions
        v = np.zeros(self.num_frames)
        d = np.linalg.norm(np.diff(p[:, [0, 2]], axis=0), axis=1) * self.fps
        same = self.frame_clip[1:] == self.frame_clip[:-1]
        v[:-1] = np.where(same, d, 0.0)
        v[1:] = np.where(same, np.maximum(v[1:], d), v[1:])
        return v

    def clip_motion(self, clip: int) -> Motion:
        """A stored clip as a :class:`Motion` (with its canonical root bone)."""
        a, b = self.clip_starts[clip], self.clip_stops[clip]
        return Motion(self.skeleton, quat.normalize(self.rotations[a:b]), self.translations[a:b].astype(np.float64),
                      self.fps, name=self.clip_names[clip], tags=self.clip_tags[clip])

    # ---------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> Path:
        from motionmatch.database.store import save_database

        return save_database(self, path)

    @classmethod
    def cached(cls, path: str | Path, motions: Sequence[Motion], *, fps: float = 60.0, mirror_copies: bool = False,
               schema: FeatureSchema | None = None, progress: bool = False, **kwargs) -> MotionDatabase:
        """Load ``path`` if it was built from exactly these clips and settings; otherwise
        (missing, stale, corrupt or from another format version) build and save it."""
        import warnings

        schema = schema or default_schema()
        expect = input_hash(motions, fps, mirror_copies, schema)
        if Path(path).exists():
            try:
                return cls.load(path, expect_hash=expect)
            except DatabaseError as e:
                warnings.warn(f"rebuilding the database: {e}", stacklevel=2)
        db = cls.build(motions, fps=fps, mirror_copies=mirror_copies, schema=schema, progress=progress, **kwargs)
        db.save(path)
        return db

    @classmethod
    def load(cls, path: str | Path, *, expect_hash: str | None = None) -> MotionDatabase:
        from motionmatch.database.store import load_database

        return load_database(path, expect_hash=expect_hash)
