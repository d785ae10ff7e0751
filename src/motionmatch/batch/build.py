"""``batch build``: a feature database built clip by clip on Ray, identical to ``motionmatch build``'s.

Each source clip is one task: load the BVH file, resample it, add its mirrored copy,
extract features and contacts (:func:`~motionmatch.database.database.prepare_clips` and
:func:`~motionmatch.database.database.extract_part`, the functions
:meth:`MotionDatabase.build <motionmatch.database.MotionDatabase.build>` runs). The parts
are joined in the order ``motionmatch build`` loads the clips, and the normalisation is
computed over the joined database (:meth:`MotionDatabase.from_parts
<motionmatch.database.MotionDatabase.from_parts>`), so every array and the input hash
equal a single-process build's.

Takes of one rig that disagree on its root (a file's root bone found in some takes, e.g.
walking, not in others, which get a new root above it: Bandai-Namco's dataset-1) are made
again each with a new root, as ``motionmatch build`` makes them
(``database._one_root_per_rig``): each clip's parts carry its source rig and whether it got
a new root, and after the tasks the driver rebuilds the clips of a rig whose parts differ
that kept their own root (few: one rig's walks among its runs and dances).

Each finished clip's parts are kept in ``DB.npz.parts/`` (one ``.part`` file per source
file, :func:`save_parts`): a build stopped midway, or rerun after a file changed,
recomputes only the missing or changed clips. Tasks take a few clips each (a clip costs
about 25 ms, a task about 3 ms of the driver's time). ``DB.manifest.json`` beside the
database lists the inputs' and outputs' SHA-256, the versions and the timings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from motionmatch._files import atomic_path
from motionmatch.anim.skeleton import Skeleton
from motionmatch.batch.cluster import BatchError
from motionmatch.batch.jobs import (
    Cell,
    JobResult,
    JobStatus,
    Shared,
    add_outputs_to_manifest,
    run_cells,
    sha256_file,
    sha256_json,
    versions,
)
from motionmatch.database.database import (
    ClipPart,
    MotionDatabase,
    clip_digest,
    combine_digests,
    extract_part,
    prepare_clips,
)
from motionmatch.database.schema import FeatureSchema, schema_by_name

__all__ = ["build", "clip_files"]

_PART_ARRAYS = ("raw_features", "valid", "rotations", "translations", "contacts")
_PARTS_MAGIC = b"MMPARTS1"
_ALIGN = 64  # each array's bytes start at a multiple of this in a parts file


def clip_files(paths: Sequence[str | Path]) -> list[Path]:
    """The BVH files ``motionmatch build`` loads for ``paths``, in its order: a folder's
    ``*.bvh`` files (sub-folders too) sorted by relative path, a file as it is."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted((f for f in p.rglob("*.bvh") if f.is_file()), key=lambda f: f.relative_to(p).as_posix())
            if not found:
                raise BatchError(f"{p}: no files matching '*.bvh' in it or its sub-folders")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise BatchError(f"{p}: no such file or folder")
    if not files:
        raise BatchError("no motion clips found in " + ", ".join(map(str, paths)))
    return files


def build_clip(schema_json: str, path: str, units: str | float, fps: float, mirror_copies: bool, up: str = "auto",
               use_root_bone: bool = True) -> tuple[bytes, float, list[ClipPart], str, bool]:
    """One source clip's share of a database (a Ray task): its :func:`clip_digest`, its
    file scale, its parts (the clip, then its mirrored copy), its rig (:func:`rig_key` of
    the file's skeleton) and whether it got a new root (``prepare_clips``: its own root bone
    is used where it carries one and ``use_root_bone``). The clip is read as ``motionmatch
    build`` reads it (:func:`motionmatch.datasets.load_takes`: up axis, unit, put on the ground)."""
    from motionmatch.datasets import load_takes

    m = load_takes([path], units=units, up=up)[0]
    schema = FeatureSchema.from_json(schema_json)
    clips = prepare_clips(m, fps, mirror_copies, use_root_bone=use_root_bone)
    parts = [extract_part(c, schema) for c in clips]
    new_root = bool(clips) and clips[0].skeleton.num_joints != m.skeleton.num_joints
    return clip_digest(m), m.file_scale, parts, rig_key(m.skeleton), new_root


def rig_key(s: Skeleton) -> str:
    """Which rig a skeleton is (its joints' names and parents), as a short hex digest."""
    return sha256_json({"names": list(s.names), "parents": s.parents.tolist()})[:16]


def _skeleton_dict(s: Skeleton) -> dict:
    return {"names": list(s.names), "parents": s.parents.tolist(), "offsets": s.offsets.tolist(),
            "end_site_parents": s.end_site_parents.tolist(), "end_site_offsets": s.end_site_offsets.tolist(),
            "channels": [list(c) for c in s.channels]}


def _skeleton(d: dict) -> Skeleton:
    return Skeleton(tuple(d["names"]), np.asarray(d["parents"]), np.asarray(d["offsets"]),
                    np.asarray(d["end_site_parents"], dtype=np.int64), np.asarray(d["end_site_offsets"]).reshape(-1, 3),
                    tuple(tuple(c) for c in d["channels"]))


def save_parts(path: Path, value: tuple[bytes, float, list[ClipPart], str, bool]) -> str:
    """Write one source clip's parts (:func:`build_clip`'s result) atomically; returns the
    file's SHA-256 (hex), computed from the bytes as they are written.

    The file: ``MMPARTS1``, the header's length (8 bytes, little-endian), the header (JSON:
    the clip's digest, file scale, rig and new root, each part's name, tags, foot joints, skeleton and
    arrays' dtype, shape and offset), then the arrays' bytes, each at a multiple of 64
    bytes. No pickle, no zip: the driver writes one per clip while the workers run, so its
    cost is the driver's share of the cores. Not flushed to the disk (``fsync``): the
    journal records the SHA-256 and a rerun checks it, so a file a crash damaged is made again.
    """
    digest, file_scale, parts, rig, new_root = value
    arrays, specs, at = [], [], 0
    for p in parts:
        spec = {}
        for k in _PART_ARRAYS:
            a = np.ascontiguousarray(getattr(p, k))
            at = -(-at // _ALIGN) * _ALIGN
            spec[k] = [a.dtype.str, list(a.shape), at]
            arrays.append((at, a))
            at += a.nbytes
        specs.append(spec)
    meta = {"digest": digest.hex(), "file_scale": file_scale, "rig": rig, "new_root": new_root,
            "parts": [{"name": p.name, "tags": list(p.tags), "foot_joints": list(p.foot_joints),
                       "skeleton": _skeleton_dict(p.skeleton), "arrays": spec} for p, spec in zip(parts, specs)]}
    header = json.dumps(meta).encode()
    pieces = [_PARTS_MAGIC, len(header).to_bytes(8, "little"), header]
    at = 0
    for offset, a in arrays:
        pieces += [bytes(offset - at), a.reshape(-1).view(np.uint8).data]
        at = offset + a.nbytes
    h = hashlib.sha256()
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        for piece in pieces:
            f.write(piece)
            h.update(piece)
    return h.hexdigest()


def load_parts(path: Path) -> tuple[bytes, float, list[ClipPart], str, bool]:
    """Read what :func:`save_parts` wrote."""
    raw = Path(path).read_bytes()
    if raw[:len(_PARTS_MAGIC)] != _PARTS_MAGIC:
        raise BatchError(f"{path}: not a parts file of batch build; delete it and run the job again")
    n = int.from_bytes(raw[len(_PARTS_MAGIC):len(_PARTS_MAGIC) + 8], "little")
    start = len(_PARTS_MAGIC) + 8
    meta = json.loads(raw[start:start + n])
    body = memoryview(raw)[start + n:]

    def array(spec: list) -> np.ndarray:
        dtype, shape, offset = np.dtype(spec[0]), tuple(spec[1]), spec[2]
        return np.frombuffer(body, dtype=dtype, count=int(np.prod(shape)), offset=offset).reshape(shape)

    parts = [ClipPart(name=p["name"], tags=tuple(p["tags"]), skeleton=_skeleton(p["skeleton"]),
                      foot_joints=tuple(p["foot_joints"]), **{k: array(p["arrays"][k]) for k in _PART_ARRAYS})
             for p in meta["parts"]]
    return bytes.fromhex(meta["digest"]), float(meta["file_scale"]), parts, str(meta["rig"]), bool(meta["new_root"])


def build(
    data: Sequence[str | Path],
    output: str | Path,
    *,
    fps: float = 60.0,
    mirror_copies: bool = False,
    schema: str = "classic",
    units: str | float = "auto",
    up: str = "auto",
    address: str | None = None,
    workers: int | None = None,
    progress: Callable[[JobStatus], None] | None = None,
) -> JobResult:
    """Build the database of ``motionmatch build DATA... -o OUTPUT`` with one Ray task per clip.

    Args:
        data: BVH files or folders (as ``motionmatch build``'s ``DATA``).
        output: the database file (``.npz``) to write.
        fps, mirror_copies, schema, units, up: as ``motionmatch build``'s ``--fps``,
            ``--mirror``, ``--schema`` (a name or a ``.json`` file), ``--units`` and ``--up``.
            Takes of one rig that disagree on its root get a new root each, as
            ``motionmatch build`` gives them (see the module); takes of one rig that differ
            otherwise (a ground root, extra leaf joints) are not brought to one skeleton
            here: give takes of one skeleton.
        address: ``HOST:PORT`` of a Ray cluster to join; ``None`` starts Ray in this process.
        workers: tasks at once with the embedded Ray (default: every core).
        progress: called with each :class:`~motionmatch.batch.jobs.JobStatus`.

    Returns:
        The job's result; the database is written only when no clip failed (the failed
        cells say why; a rerun computes only them).
    """
    output = Path(output)
    if output.suffix != ".npz":
        raise BatchError(f"{output}: a database file must end in .npz")
    sch = schema_by_name(schema)
    files = clip_files(data)
    settings = {"fps": fps, "mirror": mirror_copies, "schema": json.loads(sch.to_json()), "units": units, "up": up,
                "motionmatch": versions()["motionmatch"], "parts": 2}  # parts 2: with the rig and new root
    inputs = {str(f): sha256_file(f) for f in files}
    job_hash = sha256_json({"settings": settings, "inputs": list(inputs.values()), "names": [f.stem for f in files]})
    manifest = output.with_name(output.stem + ".manifest.json")
    parts_dir = output.name + ".parts"
    cells = []
    for f in files:
        ident = sha256_json(str(f))[:12]
        cells.append(Cell(key=str(f), input_hash=sha256_json({"file": inputs[str(f)], "name": f.stem, **settings}),
                          outputs=(f"{parts_dir}/{f.stem}-{ident}.part",),
                          args=(Shared(0), str(f), units, fps, mirror_copies, up), cost=f.stat().st_size))
    done_before = _built_already(output, manifest, job_hash)
    result = run_cells("build", output.parent, manifest, cells, build_clip,
                       lambda c, v: {c.outputs[0]: save_parts(output.parent / c.outputs[0], v)},
                       shared=(sch.to_json(),), inputs=inputs, settings=settings, progress=progress, address=address,
                       workers=workers, cells_per_task=None)
    if result.failed:
        return result
    if done_before and not result.done:
        add_outputs_to_manifest(result, {"job_hash": job_hash}, [output])
        return result
    values = [o.value if o.status == "done" else load_parts(output.parent / c.outputs[0])
              for c, o in zip(cells, result.cells)]
    _one_root_per_rig(values, [str(f) for f in files], sch.to_json(), units, fps, mirror_copies, up)
    parts = [p for v in values for p in v[2]]
    db = MotionDatabase.from_parts(parts, fps=fps, schema=sch, file_scale=values[0][1],
                                   input_hash=combine_digests([v[0] for v in values], fps, mirror_copies, sch))
    db.save(output)
    add_outputs_to_manifest(result, {"job_hash": job_hash, "database": {
        "frames": db.num_frames, "searchable": int(db.valid.sum()), "clips": len(db.clip_names),
        "input_hash": db.input_hash}}, [output])
    return result


def _one_root_per_rig(values: list, files: list[str], schema_json: str, units: str | float, fps: float,
                      mirror_copies: bool, up: str) -> None:
    """``database._one_root_per_rig`` over the clips' results (in place): where the parts of
    one rig's clips differ in skeleton (some kept the file's root bone, some got a new
    root), the clips that kept theirs are built again with a new root, here."""
    groups: dict[str, list[int]] = {}
    for i, v in enumerate(values):
        groups.setdefault(v[3], []).append(i)
    for idx in groups.values():
        if len({(p.skeleton.names, p.skeleton.parents.tobytes()) for i in idx for p in values[i][2]}) > 1:
            for i in idx:
                if not values[i][4]:
                    values[i] = build_clip(schema_json, files[i], units, fps, mirror_copies, up, use_root_bone=False)


def _built_already(output: Path, manifest: Path, job_hash: str) -> bool:
    """Whether ``output`` exists, unchanged, from a build of exactly these inputs."""
    if not (output.is_file() and manifest.is_file()):
        return False
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        return doc.get("job_hash") == job_hash and doc["outputs"].get(output.name) == sha256_file(output)
    except (OSError, ValueError, KeyError, AttributeError):
        return False
