"""Saving and loading databases as versioned ``.npz`` files (no pickle).

The file holds the arrays and one JSON string of metadata (format version, schema,
weights, skeleton, clip names and tags, and the hash of the inputs it was built from).
Loading checks all of it; a file from another format version, with missing or
mis-shaped arrays, or (when the caller knows the inputs) built from other inputs, is
rejected with a :class:`DatabaseError` that says what to do.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from motionmatch._files import atomic_write, not_npz
from motionmatch._limits import loads_json, read_npz
from motionmatch.anim.skeleton import Skeleton
from motionmatch.database.database import FORMAT_VERSION, DatabaseError, MotionDatabase
from motionmatch.database.schema import FeatureSchema, SchemaError

_ARRAYS = ("raw_features", "valid", "clip_starts", "clip_stops", "rotations", "translations", "contacts")


def save_database(db: MotionDatabase, path: str | Path) -> Path:
    """Write ``db`` to ``path`` (``.npz``) atomically."""
    path = Path(path)
    if path.suffix != ".npz":
        raise DatabaseError(f"{path}: a database file must end in .npz")
    s = db.skeleton
    meta = {
        "format": "motionmatch-database",
        "version": FORMAT_VERSION,
        "fps": db.fps,
        "schema": db.schema.to_json(),
        "group_weights": db.group_weights,
        "responsiveness": db.responsiveness,
        "continuity": db.continuity,
        "file_scale": db.file_scale,
        "input_hash": db.input_hash,
        "clip_names": db.clip_names,
        "clip_tags": [list(t) for t in db.clip_tags],
        "foot_joints": list(db.foot_joints),
        "skeleton": {"names": list(s.names), "parents": s.parents.tolist(), "offsets": s.offsets.tolist(),
                     "end_site_parents": s.end_site_parents.tolist(), "end_site_offsets": s.end_site_offsets.tolist(),
                     "channels": [list(c) for c in s.channels]},
    }
    arrays = {k: getattr(db, k) for k in _ARRAYS}
    with atomic_write(path, "wb") as f:
        np.savez(f, meta=np.array(json.dumps(meta)), **arrays)
    return path


def load_database(path: str | Path, *, expect_hash: str | None = None) -> MotionDatabase:
    """Read a database written by :func:`save_database`.

    Args:
        expect_hash: the input hash the caller expects (e.g. of the clips it would build
            from); a different one raises ``DatabaseError`` (stale file).
    """
    path = Path(path)
    build = f"build one with 'motionmatch build CLIPS... -o {path.with_suffix('.npz')}'"
    if not path.exists():
        raise DatabaseError(f"{path}: no such database file; {build}")
    kind = not_npz(path)
    if kind:
        raise DatabaseError(f"{path}: {kind}, not a motionmatch database (.npz); {build}")
    rebuild = "delete it and rebuild it with 'motionmatch build'"
    z = read_npz(path, "database", rebuild, error=DatabaseError)
    if "meta" not in z:
        raise DatabaseError(f"{path}: not a motionmatch database (no metadata); rebuild it with 'motionmatch build'")
    meta = loads_json(str(z["meta"]), f"{path}: meta", error=DatabaseError)
    if not isinstance(meta, dict):
        raise DatabaseError(f"{path}: meta: expected a JSON object; {rebuild}")
    missing = [k for k in _ARRAYS if k not in z]
    if missing:
        raise DatabaseError(f"{path}: corrupt database, arrays {missing} are missing; rebuild it with 'motionmatch build'")
    arrays = {k: z[k] for k in _ARRAYS}
    if meta.get("format") != "motionmatch-database":
        raise DatabaseError(f"{path}: not a motionmatch database file")
    if meta.get("version") != FORMAT_VERSION:
        raise DatabaseError(
            f"{path}: database format version {meta.get('version')} but this motionmatch reads version "
            f"{FORMAT_VERSION}; rebuild it with 'motionmatch build'"
        )
    if expect_hash is not None and meta.get("input_hash") != expect_hash:
        raise DatabaseError(f"{path}: stale database, built from other clips or settings; rebuild it")
    try:
        sk = meta["skeleton"]
        skeleton = Skeleton(tuple(sk["names"]), np.asarray(sk["parents"]), np.asarray(sk["offsets"]),
                            np.asarray(sk["end_site_parents"], dtype=np.int64),
                            np.asarray(sk["end_site_offsets"]).reshape(-1, 3), tuple(tuple(c) for c in sk["channels"]))
        schema = FeatureSchema.from_json(meta["schema"])
        db = MotionDatabase(
            skeleton=skeleton, fps=meta["fps"], schema=schema, clip_names=meta["clip_names"],
            clip_tags=meta["clip_tags"], foot_joints=meta["foot_joints"], input_hash=meta["input_hash"],
            group_weights=meta["group_weights"], responsiveness=meta["responsiveness"],
            continuity=meta["continuity"], file_scale=meta.get("file_scale", 1.0), **arrays,
        )
    except (KeyError, TypeError, SchemaError, ValueError) as e:
        if isinstance(e, DatabaseError):
            raise DatabaseError(f"{path}: {e}") from None
        raise DatabaseError(f"{path}: corrupt database metadata ({e}); rebuild it with 'motionmatch build'") from None
    J = skeleton.num_joints
    N = db.num_frames
    if db.raw_features.shape != (N, schema.dims) or db.rotations.shape != (N, J, 4) or db.translations.shape != (N, J, 3):
        raise DatabaseError(f"{path}: corrupt database, array shapes do not match the schema/skeleton; rebuild it")
    if not np.all(np.isfinite(db.raw_features)):
        raise DatabaseError(f"{path}: corrupt database, features contain NaN/inf; rebuild it")
    return db
