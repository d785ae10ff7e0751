"""Hostile input costs little: a corpus of small hostile files, made here, each refused by
the command that reads it with exit code 1 and one line naming the file, no traceback,
nothing written, within 10 s and bounded memory.

Every case runs the real ``motionmatch`` command in a child process under an address-space
limit (``RLIMIT_AS``) of :data:`ADDRESS_SPACE`: Numba and LLVM reserve about half a GiB of
virtual memory at import, and the good files of the same commands run in it (checked by
``test_the_limit_lets_good_files_through``), so a reader that allocates what a header
declares fails with ``MemoryError`` (a traceback) instead of passing. The child's peak
resident memory, from ``wait4``, must stay under :data:`PEAK_RSS`, and its CPU time
(user and system, also from ``wait4``) under :data:`SECONDS`: the machine the tests run on
may be shared, so its wall-clock time is only held to a looser bound.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from motionmatch.anim import save_bvh
from motionmatch.database import MotionDatabase
from motionmatch.io.gltf import write_glb
from synthetic import walker

REPO = Path(__file__).resolve().parents[1]
ADDRESS_SPACE = 3 * 2**29
"""The child's virtual memory limit: 1.5 GiB. With one Numba and one BLAS thread (as
here) the good commands need 0.55 GiB (``inspect``, ``run``) to 0.7 GiB (``convert
--body``) of address space, measured by lowering the limit until they fail; 1.5 GiB
leaves them twice that, and makes a reader that allocates what a header declares fail
beyond about 0.8 GiB."""
PEAK_RSS = 2**30
"""The child's peak resident memory: under 1 GiB."""
SECONDS = 10.0
"""CPU seconds of the child (Python's and Numba's imports take 2-3 of them)."""
WALL_SECONDS = 60.0


_LAUNCHER = """
import json, os, resource, subprocess, sys, threading
limit, wall, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
proc = subprocess.Popen([sys.executable, "-m", "motionmatch", *sys.argv[4:]], preexec_fn=cap)
killer = threading.Timer(wall, proc.kill)  # (a reader blocked on a FIFO fails, not hangs)
killer.start()
_, status, usage = os.wait4(proc.pid, 0)
killer.cancel()
proc.returncode = 0  # (reaped by wait4)
with open(out, "w") as f:
    json.dump([os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime], f)
"""
"""Runs ``motionmatch`` as its child and reports the child's exit code, peak RSS and CPU
time. A small process of its own, because Linux keeps the peak RSS of a process across
``exec`` from the moment it was forked: a child forked straight from the test worker
(hundreds of MiB after other tests) would report the worker's size, not its own."""


def _run(args: list[str], cwd: Path) -> tuple[int, str, int, float]:
    """Exit code, stderr, peak RSS (bytes) and CPU seconds of ``motionmatch ARGS`` under the limits."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    report = cwd / "usage.json"
    t0 = time.perf_counter()
    with open(cwd / "stderr.txt", "w+") as err:
        launcher = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(ADDRESS_SPACE), str(2 * WALL_SECONDS),
                                     str(report), *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            launcher.wait(timeout=3 * WALL_SECONDS)
        finally:
            launcher.kill()
        wall = time.perf_counter() - t0
        err.seek(0)
        text = err.read()
    assert wall < WALL_SECONDS, f"{wall:.1f} s of wall-clock time"
    code, rss, cpu = json.loads(report.read_text())
    report.unlink()
    return code, text, rss, cpu


# ----------------------------------------------------------------------------- good inputs
@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("good")
    motion = walker(n=120)
    save_bvh(motion, d / "walk.bvh")
    MotionDatabase.build([walker(n=240)], mirror_copies=False).save(d / "db.npz")
    (d / "script.json").write_text(json.dumps({"duration": 0.5, "events": [{"t": 0.0, "keys": ["w"]}]}))
    (d / "path.json").write_text(json.dumps({"points": [[0, 0, 0], [1, 0, 1], [2, 0, 2]]}))
    write_glb(d / "body.glb", motion)
    return d


def _glb_parts(path: Path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    n = struct.unpack_from("<I", raw, 12)[0]
    doc = json.loads(raw[20:20 + n])
    bn = struct.unpack_from("<I", raw, 20 + n)[0]
    return doc, raw[28 + n:28 + n + bn]


def _gltf(d: Path, good: Path, name: str, change: Callable[[dict], None], blob: bytes | None = None) -> Path:
    """A ``.gltf`` of the good body with its buffer beside it (``body.bin``), then ``change``d."""
    doc, bin_ = _glb_parts(good / "body.glb")
    (d / "body.bin").write_bytes(bin_ if blob is None else blob)
    doc["buffers"] = [{"uri": "body.bin", "byteLength": len(bin_)}]
    change(doc)
    (d / name).write_text(json.dumps(doc))
    return d / name


def _glb(d: Path, good: Path, name: str, change: Callable[[dict], None]) -> Path:
    doc, bin_ = _glb_parts(good / "body.glb")
    change(doc)
    text = json.dumps(doc).encode()
    text += b" " * (-len(text) % 4)
    body = struct.pack("<II", len(text), 0x4E4F534A) + text + struct.pack("<II", len(bin_), 0x004E4942) + bin_
    (d / name).write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body)
    return d / name


def _accessor(doc: dict, semantic: str) -> dict:
    return doc["accessors"][doc["meshes"][0]["primitives"][0]["attributes"][semantic]]


def _view(doc: dict, semantic: str) -> dict:
    return doc["bufferViews"][_accessor(doc, semantic)["bufferView"]]


# ----------------------------------------------------------------------------- the corpus
def _bvh_header(frames: str, channels: str = "CHANNELS 0") -> str:
    return f"HIERARCHY\nROOT a\n{{\nOFFSET 0 0 0\n{channels}\n}}\nMOTION\nFrames: {frames}\nFrame Time: 0.1\n"


def _deep_bvh(depth: int) -> str:
    body = "".join(f"JOINT j{i}\n{{\nOFFSET 0 1 0\nCHANNELS 0\n" for i in range(depth))
    return ("HIERARCHY\nROOT r\n{\nOFFSET 0 0 0\nCHANNELS 3 Zrotation Yrotation Xrotation\n" + body
            + "}\n" * (depth + 1) + "MOTION\nFrames: 1\nFrame Time: 0.1\n0 0 0\n")


def _wide_bvh(joints: int) -> str:
    body = "".join(f"JOINT j{i}\n{{\nOFFSET 0 1 0\nCHANNELS 0\n}}\n" for i in range(joints))
    rows = "0\n" * 10
    return ("HIERARCHY\nROOT r\n{\nOFFSET 0 0 0\nCHANNELS 1 Yrotation\n" + body + "}\nMOTION\n"
            f"Frames: 100000\nFrame Time: 0.1\n{rows}")


def _npz(path: Path, members: dict[str, bytes], compress: bool = False) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name + ".npy", data)
    return path


def _npy(shape: tuple[int, ...], dtype: str = "<f8", data: bytes = b"\0" * 16) -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def _zip_bomb(path: Path, nbytes: int) -> Path:
    """An honest bomb: a deflated ``.npy`` of ``nbytes`` zeros (about 1,000 : 1)."""
    chunk = bytes(2**24)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z, \
            z.open("raw_features.npy", "w", force_zip64=True) as f:
        f.write(_npy((nbytes // 8,), data=b""))
        for _ in range(nbytes // len(chunk)):
            f.write(chunk)
    return path


def _meta_npz(path: Path, meta: str) -> Path:
    return _npz(path, {"meta": _npy((), f"<U{len(meta)}", meta.encode("utf-32-le"))})


DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "9" * 5000


def _obj(key: str, raw: str) -> str:
    """``{"key": raw}`` with ``raw`` written as it is (a number JSON's encoder would not write)."""
    return "{" + json.dumps(key) + ": " + raw + "}"


def _path_json(points) -> str:
    return json.dumps({"points": points})


# name -> (file name, how it is made (folder, good) -> None, the command with {f} the file and {g} the good folder)
CORPUS: dict[str, tuple[str, Callable[[Path, Path], object], str]] = {
    # BVH
    "bvh-no-channels-1e9-frames": ("a.bvh", lambda d, g: (d / "a.bvh").write_text(_bvh_header("1000000000")),
                                   "inspect {f}"),
    "bvh-1e30-frames": ("a.bvh", lambda d, g: (d / "a.bvh").write_text(_bvh_header("1" + "0" * 30,
                                                                                  "CHANNELS 1 Yrotation")),
                        "inspect {f}"),
    "bvh-5000-digit-frames": ("a.bvh", lambda d, g: (d / "a.bvh").write_text(_bvh_header(HUGE_INT)), "inspect {f}"),
    "bvh-100000-deep": ("a.bvh", lambda d, g: (d / "a.bvh").write_text(_deep_bvh(100_000)), "convert {f} out.bvh"),
    "bvh-4000-joints-100000-frames": ("a.bvh", lambda d, g: (d / "a.bvh").write_text(_wide_bvh(4000)),
                                      "inspect {f}"),
    "bvh-one-frame-build": ("a.bvh", lambda d, g: save_bvh(walker(n=1), d / "a.bvh"), "build {f} -o out.npz"),
    # .npz databases
    "npz-zip-bomb": ("db.npz", lambda d, g: _zip_bomb(d / "db.npz", 2**31 + 2**28),
                     "run --db {f} --input {g}/script.json -o out.bvh"),
    "npz-93-GiB-array": ("db.npz", lambda d, g: _npz(d / "db.npz", {"raw_features": _npy((100_000, 125_000))}),
                         "run --db {f} --input {g}/script.json -o out.bvh"),
    "npz-meta-100000-deep": ("db.npz", lambda d, g: _meta_npz(d / "db.npz", DEEP),
                             "run --db {f} --input {g}/script.json -o out.bvh"),
    "npz-meta-5000-digits": ("db.npz", lambda d, g: _meta_npz(d / "db.npz", _obj("version", HUGE_INT)),
                             "run --db {f} --input {g}/script.json -o out.bvh"),
    "npz-pickled-object": ("db.npz", lambda d, g: _npz(d / "db.npz", {"meta": _npy((1,), "|O", b"\x80\x04N.")}),
                           "run --db {f} --input {g}/script.json -o out.bvh"),
    # keypoints
    "keypoints-npz-93-GiB": ("k.npz", lambda d, g: _npz(d / "k.npz", {"times": _npy((100_000, 125_000))}),
                             "pose run --db {g}/db.npz --keypoints {f} -o out.bvh --classifier knn"),
    "keypoints-json-deep": ("k.json", lambda d, g: (d / "k.json").write_text(DEEP),
                            "pose run --db {g}/db.npz --keypoints {f} -o out.bvh --classifier knn"),
    "keypoints-json-5000-digits": ("k.json", lambda d, g: (d / "k.json").write_text(_obj("times", f"[{HUGE_INT}]")),
                                   "pose run --db {g}/db.npz --keypoints {f} -o out.bvh --classifier knn"),
    # paths
    "path-times-1e9": ("p.json", lambda d, g: (d / "p.json").write_text(_path_json([[0, 0, 0], [1e9, 5, 5]])),
                       "follow --db {g}/db.npz --path {f} -o out.bvh"),
    "path-x-1e300": ("p.json", lambda d, g: (d / "p.json").write_text(_path_json([[0, 0, 0], [1, 1e300, 0]])),
                     "follow --db {g}/db.npz --path {f} -o out.bvh"),
    "path-1e6-points": ("p.json", lambda d, g: (d / "p.json").write_text(
        _path_json(np.c_[np.arange(1e6) / 1e3, np.zeros((10**6, 2))].round(3).tolist())),
        "follow --db {g}/db.npz --path {f} -o out.bvh"),
    "path-scale-1e-300": ("p.json", lambda d, g: (d / "p.json").write_text(
        json.dumps({"points": [[0, 0, 0], [1, 1, 1]], "scale": 1e-300})), "follow --db {g}/db.npz --path {f} -o out.bvh"),
    "path-json-deep": ("p.json", lambda d, g: (d / "p.json").write_text(DEEP),
                       "follow --db {g}/db.npz --path {f} -o out.bvh"),
    "path-csv-5000-digits": ("p.csv", lambda d, g: (d / "p.csv").write_text(f"t,x,z\n0,0,0\n1,{HUGE_INT},0\n"),
                             "follow --db {g}/db.npz --path {f} -o out.bvh"),
    "path-fifo": ("p.json", lambda d, g: os.mkfifo(d / "p.json"), "follow --db {g}/db.npz --path {f} -o out.bvh"),
    # scenarios, sweeps, scripts, schemas, GenMM's parts and reassembly files
    "scenario-deep": ("s.json", lambda d, g: (d / "s.json").write_text(DEEP), "scenario {f} --db {g}/db.npz -o out.npz"),
    "scenario-5000-digits": ("s.json", lambda d, g: (d / "s.json").write_text(_obj("duration", HUGE_INT)),
                             "scenario {f} --db {g}/db.npz -o out.npz"),
    "scenario-1e400": ("s.json", lambda d, g: (d / "s.json").write_text('{"duration": 1e400}'),
                       "scenario {f} --db {g}/db.npz -o out.npz"),
    "sweep-deep": ("w.json", lambda d, g: (d / "w.json").write_text(DEEP), "batch sweep {f} -o out"),
    "sweep-5000-digits": ("w.json", lambda d, g: (d / "w.json").write_text(_obj("seeds", f"[{HUGE_INT}]")),
                          "batch sweep {f} -o out"),
    "script-deep": ("k.json", lambda d, g: (d / "k.json").write_text(DEEP),
                    "run --db {g}/db.npz --input {f} -o out.bvh"),
    "script-5000-digits": ("k.json", lambda d, g: (d / "k.json").write_text(_obj("duration", HUGE_INT)),
                           "run --db {g}/db.npz --input {f} -o out.bvh"),
    "schema-deep": ("sc.json", lambda d, g: (d / "sc.json").write_text(DEEP),
                    "build {g}/walk.bvh --schema {f} -o out.npz"),
    "parts-deep": ("pa.json", lambda d, g: (d / "pa.json").write_text(DEEP),
                   "genmm {g}/walk.bvh --parts {f} -o out.bvh"),
    "reassembly-deep": ("re.json", lambda d, g: (d / "re.json").write_text(DEEP), "genmm --reassemble {f} -o out.bvh"),
    # glTF bodies
    "gltf-buffer-parent-folders": ("b.gltf", lambda d, g: _gltf(d, g, "b.gltf", lambda doc: doc["buffers"][0].update(
        uri="../../../../../../../../etc/passwd")), "convert {g}/walk.bvh out.glb --body {f}"),
    "gltf-buffer-percent-encoded-parent": ("b.gltf", lambda d, g: _gltf(d, g, "b.gltf", lambda doc: doc["buffers"][0]
                                                                          .update(uri="%2e%2e/%2e%2e/etc/passwd")),
                                           "convert {g}/walk.bvh out.glb --body {f}"),
    "gltf-buffer-absolute": ("b.gltf", lambda d, g: _gltf(d, g, "b.gltf", lambda doc: doc["buffers"][0].update(
        uri="/etc/passwd")), "convert {g}/walk.bvh out.glb --body {f}"),
    "gltf-buffer-dev-zero": ("b.gltf", lambda d, g: _gltf(d, g, "b.gltf", lambda doc: doc["buffers"][0].update(
        uri="/dev/zero")), "convert {g}/walk.bvh out.glb --body {f}"),
    "gltf-buffer-file-scheme": ("b.gltf", lambda d, g: _gltf(d, g, "b.gltf", lambda doc: doc["buffers"][0].update(
        uri="file:///dev/zero")), "convert {g}/walk.bvh out.glb --body {f}"),
    "gltf-buffer-fifo": ("b.gltf", lambda d, g: (_gltf(d, g, "b.gltf", lambda doc: doc["buffers"][0].update(
        uri="pipe.bin")), os.mkfifo(d / "pipe.bin")), "convert {g}/walk.bvh out.glb --body {f}"),
    "gltf-buffer-symlink-out": ("b.gltf", lambda d, g: (_gltf(d, g, "b.gltf", lambda doc: doc["buffers"][0].update(
        uri="link.bin")), os.symlink("/etc/passwd", d / "link.bin")), "convert {g}/walk.bvh out.glb --body {f}"),
    "gltf-image-parent-folders": ("b.gltf", lambda d, g: _gltf(d, g, "b.gltf", lambda doc: doc.update(
        images=[{"uri": "../../secret.png"}])), "convert {g}/walk.bvh out.glb --body {f}"),
    "gltf-data-uri-too-large": ("b.gltf", lambda d, g: _gltf(d, g, "b.gltf", lambda doc: doc["buffers"][0].update(
        uri="data:application/octet-stream;base64," + "A" * (2**26 + 4))), "convert {g}/walk.bvh out.glb --body {f}"),
    "glb-count-2^31": ("b.glb", lambda d, g: _glb(d, g, "b.glb", lambda doc: _accessor(doc, "POSITION").update(
        count=2**31)), "convert {g}/walk.bvh out.glb --body {f}"),
    "glb-count-2^31-no-view": ("b.glb", lambda d, g: _glb(d, g, "b.glb", lambda doc: _accessor(doc, "POSITION").update(
        count=2**31, bufferView=None)), "convert {g}/walk.bvh out.glb --body {f}"),
    "glb-negative-stride": ("b.glb", lambda d, g: _glb(d, g, "b.glb", lambda doc: _view(doc, "POSITION").update(
        byteStride=-4096)), "convert {g}/walk.bvh out.glb --body {f}"),
    "glb-negative-offset": ("b.glb", lambda d, g: _glb(d, g, "b.glb", lambda doc: _accessor(doc, "POSITION").update(
        byteOffset=-64)), "convert {g}/walk.bvh out.glb --body {f}"),
    "glb-view-past-buffer": ("b.glb", lambda d, g: _glb(d, g, "b.glb", lambda doc: _view(doc, "POSITION").update(
        byteOffset=2**40)), "convert {g}/walk.bvh out.glb --body {f}"),
    "glb-unknown-component-type": ("b.glb", lambda d, g: _glb(d, g, "b.glb", lambda doc: _accessor(doc, "POSITION")
                                                               .update(componentType=5130)),
                                   "convert {g}/walk.bvh out.glb --body {f}"),
    "glb-index-past-vertices": ("b.glb", lambda d, g: _glb(d, g, "b.glb", lambda doc: _accessor(doc, "POSITION")
                                                           .update(count=3)), "convert {g}/walk.bvh out.glb --body {f}"),
    "glb-chunk-longer-than-file": ("b.glb", lambda d, g: (d / "b.glb").write_bytes(
        struct.pack("<4sII", b"glTF", 2, 40) + struct.pack("<II", 2**31, 0x4E4F534A) + b"{}      "),
        "convert {g}/walk.bvh out.glb --body {f}"),
    "gltf-deep": ("b.gltf", lambda d, g: (d / "b.gltf").write_text('{"a": ' + DEEP + "}"),
                  "convert {g}/walk.bvh out.glb --body {f}"),
}


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_a_hostile_file_is_refused_in_one_line(case, good, tmp_path):
    name, make, command = CORPUS[case]
    make(tmp_path, good)
    args = command.format(f=tmp_path / name, g=good).split()
    code, err, rss, seconds = _run(args, tmp_path)
    lines = err.strip().splitlines()
    assert code == 1, (code, err[-2000:])
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert name in lines[0], lines[0]
    assert rss < PEAK_RSS, f"peak RSS {rss / 2**20:.0f} MiB"
    assert seconds < SECONDS, f"{seconds:.1f} CPU seconds"
    assert not list(tmp_path.glob("out*")) and not list(tmp_path.glob(".*tmp*")), "something was written"


def test_the_limit_lets_good_files_through(good, tmp_path):
    """The address-space limit is honest: the same commands on good files pass under it."""
    for command in ("inspect {g}/walk.bvh", "convert {g}/walk.bvh out.glb --body {g}/body.glb",
                    "run --db {g}/db.npz --input {g}/script.json -o out.bvh"):
        code, err, rss, _ = _run(command.format(g=good).split(), tmp_path)
        assert code == 0, err[-2000:]
        assert rss < PEAK_RSS


def test_a_good_gltf_with_its_buffer_beside_it_is_read(good, tmp_path):
    """The confinement refuses only what leaves the folder: ``body.bin`` beside it is read,
    and so is a data URI."""
    from motionmatch.io.user_mesh import read_user_mesh

    motion = walker(n=120)
    ours = read_user_mesh(good / "body.glb", motion.skeleton)
    beside = read_user_mesh(_gltf(tmp_path, good, "b.gltf", lambda doc: None), motion.skeleton)
    np.testing.assert_array_equal(beside.vertices, ours.vertices)
    blob = (tmp_path / "body.bin").read_bytes()
    uri = "data:application/octet-stream;base64," + base64.b64encode(blob).decode()
    inline = read_user_mesh(_gltf(tmp_path, good, "c.gltf", lambda doc: doc["buffers"][0].update(uri=uri)),
                            motion.skeleton)
    np.testing.assert_array_equal(inline.triangles, ours.triangles)


def test_json_limits_count_structure_not_strings():
    """The depth check counts the brackets of arrays and objects, not those inside strings
    (escaped quotes included), and names the line; integers and overflowing floats are
    refused by size, not by Python's own 4,300-digit limit."""
    from motionmatch._limits import MAX_INT_DIGITS, MAX_JSON_DEPTH, loads_json
    from motionmatch.errors import InputError

    deep_ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert loads_json(deep_ok, "f") is not None
    text = json.dumps({"s": '\\"' + "[" * 500, "t": "\\" * 3 + "{" * 500, "u": [[1]]})
    assert loads_json(text, "f")["u"] == [[1]]
    with pytest.raises(InputError, match=r"^f: line 2: arrays and objects nested more than 64"):
        loads_json('{"a": "]]]]]]",\n "b": ' + "[" * 65 + "]" * 65 + "}", "f")
    assert loads_json("[" + "9" * MAX_INT_DIGITS + "]", "f") == [int("9" * MAX_INT_DIGITS)]
    with pytest.raises(InputError, match="21 digits"):
        loads_json("[" + "9" * (MAX_INT_DIGITS + 1) + "]", "f")
    with pytest.raises(InputError, match="too large"):
        loads_json('{"x": 1e400}', "f")
