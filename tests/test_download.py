"""Downloading, verifying and extracting datasets, against a local HTTP server (no internet).

The server (``http.server`` in a thread, on 127.0.0.1 with a free port) serves zip archives
built here from small synthetic BVH files. It honours ``Range`` requests, can ignore them,
and can drop the connection half-way through a response.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import io
import json
import re
import shutil
import socket
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from motionmatch.cli import datasets_cmd
from motionmatch.datasets import (
    Dataset,
    archive_path,
    cached,
    download,
    extract_archive,
    fetch,
    load_folder,
)
from motionmatch.datasets import catalogue as catalogue_mod
from motionmatch.errors import DatasetError


# --------------------------------------------------------------------------- test data
def make_bvh(num_frames: int = 5, fps: float = 30.0, bone_cm: float = 10.0) -> str:
    """A tiny valid BVH (two joints and an end site, centimetres, ZYX) with moving values."""
    lines = [
        "HIERARCHY",
        "ROOT Hips",
        "{",
        "  OFFSET 0.0 0.0 0.0",
        "  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation",
        "  JOINT Spine",
        "  {",
        f"    OFFSET 0.0 {bone_cm:.2f} 0.0",
        "    CHANNELS 3 Zrotation Yrotation Xrotation",
        "    End Site",
        "    {",
        f"      OFFSET 0.0 {bone_cm:.2f} 0.0",
        "    }",
        "  }",
        "}",
        "MOTION",
        f"Frames: {num_frames}",
        f"Frame Time: {1.0 / fps:.6f}",
    ]
    for f in range(num_frames):
        lines.append(f"{1.5 * f:.3f} 90.000 {3.0 * f:.3f} 0.000 {5.0 * f:.3f} 0.000 {2.0 * f:.3f} 0.000 0.000")
    return "\n".join(lines) + "\n"


BVH_NAMES = ("walk1_subject1_walk.bvh", "run1_subject2_sprint.bvh", "dataset-1_walk-back_happy_001.bvh")


def make_zip(members: dict[str, str | bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def dataset_zip(prefix: str = "motions/", frames: int = 40) -> bytes:
    members: dict[str, str | bytes] = {f"{prefix}{n}": make_bvh(frames + i) for i, n in enumerate(BVH_NAMES)}
    members[f"{prefix}README.txt"] = "synthetic test data\n"
    return make_zip(members)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- the server
class FileServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), RangeHandler)
        self.files: dict[str, bytes] = {}
        self.requests: list[dict[str, str | None]] = []
        self.ignore_range = False
        self.drop_next = 0  # number of responses to cut off half-way
        self.lock = threading.Lock()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


class RangeHandler(http.server.BaseHTTPRequestHandler):
    server: FileServer

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        srv = self.server
        rng = self.headers.get("Range")
        with srv.lock:
            srv.requests.append({"path": self.path, "range": rng})
            drop = srv.drop_next > 0
            if drop:
                srv.drop_next -= 1
        body = srv.files.get(self.path)
        if body is None:
            self.send_error(404, "Not Found")
            return
        start = 0
        if rng and not srv.ignore_range:
            m = re.fullmatch(r"bytes=(\d+)-", rng)
            assert m, rng
            start = int(m.group(1))
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        payload = body[start:]
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if drop:
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(payload)


@pytest.fixture
def server() -> Iterator[FileServer]:
    srv = FileServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the real user cache, real data folder or waits between retries."""
    monkeypatch.setenv("MOTIONMATCH_CACHE", str(tmp_path / "default-cache"))
    monkeypatch.setenv("MOTIONMATCH_DATA", str(tmp_path / "no-local-data"))
    monkeypatch.setattr(download, "_RETRY_BASE_DELAY", 0.0)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def make_dataset(
    server: FileServer, data: bytes, *, known: bool = True, path: str = "/files/synth.zip", **kw
) -> Dataset:
    server.files[path] = data
    fields = dict(
        name="synthetic",
        title="Synthetic test motions",
        urls=(server.url(path),),
        filename="synth.zip",
        size=len(data) if known else None,
        sha256=sha(data) if known else None,
        bvh_subdirs=("motions",),
        licence="CC0-1.0",
        fps=30.0,
        units="cm",
    )
    fields.update(kw)
    return Dataset(**fields)


def free_port() -> int:
    """A port nobody listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- tests
def test_fetch_downloads_verifies_extracts_and_loads(server: FileServer, cache: Path) -> None:
    data = dataset_zip()
    ds = make_dataset(server, data)
    folder = fetch(ds, cache_dir=cache, progress=False)

    assert folder == cache / "datasets" / "synthetic" / "motions"
    assert sorted(p.name for p in folder.glob("*.bvh")) == sorted(BVH_NAMES)
    archive = archive_path(ds, cache_dir=cache)
    assert archive.read_bytes() == data
    assert not archive.with_name(archive.name + ".part").exists()
    marker = json.loads((cache / "datasets" / "synthetic" / download.EXTRACTED_MARKER).read_text())
    assert marker["sha256"] == sha(data)
    assert not (cache / download.CHECKSUMS_FILE).exists()  # the catalogue knew size and digest

    motions = load_folder(folder, units="cm")
    assert [m.name for m in motions] == sorted(Path(n).stem for n in BVH_NAMES)
    by_name = {m.name: m for m in motions}
    assert by_name["walk1_subject1_walk"].tags == ("walk",)
    assert by_name["run1_subject2_sprint"].tags == ("run", "sprint")
    assert by_name["dataset-1_walk-back_happy_001"].tags == ("walk", "backward", "happy")
    assert by_name["walk1_subject1_walk"].num_frames == 40
    assert by_name["walk1_subject1_walk"].fps == pytest.approx(30.0)

    # Second call: from the cache, no request.
    n_requests = len(server.requests)
    assert fetch(ds, cache_dir=cache, progress=False) == folder
    assert len(server.requests) == n_requests
    assert cached(ds, cache_dir=cache) == folder


def test_fetch_finds_bvh_folder_when_subdir_is_wrong(server: FileServer, cache: Path) -> None:
    ds = make_dataset(server, dataset_zip(prefix="deep/inside/"), bvh_subdirs=("data",))
    folder = fetch(ds, cache_dir=cache, progress=False)
    assert folder == cache / "datasets" / "synthetic" / "deep" / "inside"


def test_resume_after_interrupted_download(server: FileServer, cache: Path) -> None:
    data = dataset_zip(frames=200)
    ds = make_dataset(server, data)
    server.drop_next = 1
    with pytest.raises(DatasetError, match="run again to resume"):
        fetch(ds, cache_dir=cache, progress=False, retries=0)
    part = archive_path(ds, cache_dir=cache).with_name("synth.zip.part")
    half = len(data) // 2
    assert part.stat().st_size == half
    assert server.requests[-1]["range"] is None

    folder = fetch(ds, cache_dir=cache, progress=False, retries=0)
    assert server.requests[-1]["range"] == f"bytes={half}-"
    assert archive_path(ds, cache_dir=cache).read_bytes() == data
    assert not part.exists()
    assert len(load_folder(folder)) == 3


def test_interrupted_download_is_retried_automatically(server: FileServer, cache: Path) -> None:
    data = dataset_zip(frames=200)
    ds = make_dataset(server, data)
    server.drop_next = 1
    fetch(ds, cache_dir=cache, progress=False, retries=2)
    assert [r["range"] for r in server.requests] == [None, f"bytes={len(data) // 2}-"]
    assert archive_path(ds, cache_dir=cache).read_bytes() == data


def test_server_ignoring_range_restarts_from_zero(server: FileServer, cache: Path) -> None:
    data = dataset_zip()
    ds = make_dataset(server, data)
    server.ignore_range = True
    part = archive_path(ds, cache_dir=cache).with_name("synth.zip.part")
    part.parent.mkdir(parents=True)
    part.write_bytes(b"stale bytes from another file")
    fetch(ds, cache_dir=cache, progress=False)
    assert server.requests[-1]["range"] == "bytes=29-"  # asked to resume, got the whole file
    assert archive_path(ds, cache_dir=cache).read_bytes() == data


def test_complete_part_file_is_not_downloaded_again(server: FileServer, cache: Path) -> None:
    data = dataset_zip()
    ds = make_dataset(server, data)
    part = archive_path(ds, cache_dir=cache).with_name("synth.zip.part")
    part.parent.mkdir(parents=True)
    part.write_bytes(data)
    fetch(ds, cache_dir=cache, progress=False)
    assert server.requests == []


def test_sha256_mismatch_raises_and_deletes(server: FileServer, cache: Path) -> None:
    data = dataset_zip()
    wrong = "0" * 64
    ds = make_dataset(server, data, sha256=wrong)
    with pytest.raises(DatasetError) as info:
        fetch(ds, cache_dir=cache, progress=False)
    msg = str(info.value)
    assert "synth.zip" in msg and wrong in msg and sha(data) in msg and "deleted" in msg
    folder = archive_path(ds, cache_dir=cache).parent
    assert list(folder.iterdir()) == []
    assert not (cache / "datasets" / "synthetic").exists()


def test_size_mismatch_detected_from_headers(server: FileServer, cache: Path) -> None:
    data = dataset_zip()
    ds = make_dataset(server, data, size=len(data) + 1)
    with pytest.raises(DatasetError, match=rf"expected {len(data) + 1} bytes.*{len(data)} bytes"):
        fetch(ds, cache_dir=cache, progress=False)
    assert list(archive_path(ds, cache_dir=cache).parent.iterdir()) == []


def test_trust_on_first_use(server: FileServer, cache: Path) -> None:
    data = dataset_zip()
    ds = make_dataset(server, data, known=False)
    folder = fetch(ds, cache_dir=cache, progress=False)
    records = json.loads((cache / download.CHECKSUMS_FILE).read_text())
    assert records["synthetic/synth.zip"]["sha256"] == sha(data)
    assert records["synthetic/synth.zip"]["size"] == len(data)
    assert records["synthetic/synth.zip"]["url"] == ds.urls[0]

    # The file upstream changes (same size): a forced re-download fails the digest check.
    changed = data.replace(b"synthetic test data", b"synthetic TEST data")
    assert len(changed) == len(data)
    server.files["/files/synth.zip"] = changed
    with pytest.raises(DatasetError) as info:
        fetch(ds, cache_dir=cache, progress=False, force=True)
    msg = str(info.value)
    assert "synth.zip" in msg and sha(data) in msg and sha(changed) in msg
    assert "recorded on first download" in msg and "synthetic/synth.zip" in msg
    assert not archive_path(ds, cache_dir=cache).exists()
    assert not archive_path(ds, cache_dir=cache).with_name("synth.zip.part").exists()

    # It changes size: caught from the response headers, before the body is read.
    bigger = dataset_zip(frames=41)
    server.files["/files/synth.zip"] = bigger
    with pytest.raises(
        DatasetError, match=rf"expected {len(data)} bytes \(recorded on first download.*{len(bigger)} bytes"
    ):
        fetch(ds, cache_dir=cache, progress=False, force=True)
    assert not archive_path(ds, cache_dir=cache).with_name("synth.zip.part").exists()

    # The original file is accepted again.
    server.files["/files/synth.zip"] = data
    assert fetch(ds, cache_dir=cache, progress=False, force=True) == folder

    # A cached archive that was tampered with is caught before extraction, and deleted.
    archive = archive_path(ds, cache_dir=cache)
    tampered = bytearray(data)
    tampered[100] ^= 0xFF
    archive.write_bytes(bytes(tampered))
    shutil.rmtree(cache / "datasets" / "synthetic")
    with pytest.raises(DatasetError, match="SHA-256 mismatch") as info:
        fetch(ds, cache_dir=cache, progress=False)
    assert "checksums.json" in str(info.value)
    assert not archive.exists()


def test_extraction_is_checked_against_the_record(server: FileServer, cache: Path) -> None:
    data = dataset_zip()
    ds = make_dataset(server, data, known=False)
    folder = fetch(ds, cache_dir=cache, progress=False)
    n = len(server.requests)
    # A damaged extraction (a file lost) is re-extracted from the verified archive, offline.
    victim = folder / BVH_NAMES[0]
    victim.unlink()
    assert cached(ds, cache_dir=cache) is None
    assert fetch(ds, cache_dir=cache, progress=False) == folder
    assert victim.is_file()
    assert len(server.requests) == n


@pytest.mark.parametrize("bad_name", ["../evil.bvh", "/tmp/absolute_evil.bvh", "motions/../../evil.bvh", "C:/evil.bvh"])
def test_unsafe_zip_members_are_rejected(server: FileServer, cache: Path, tmp_path: Path, bad_name: str) -> None:
    data = make_zip({"motions/ok.bvh": make_bvh(), bad_name: make_bvh()})
    ds = make_dataset(server, data)
    with pytest.raises(DatasetError, match="unsafe archive member"):
        fetch(ds, cache_dir=cache, progress=False)
    datasets = cache / "datasets"
    assert not (datasets / "synthetic").exists()
    assert list(datasets.iterdir()) == []  # the temporary folder is gone too
    assert not (cache / "evil.bvh").exists() and not (tmp_path / "evil.bvh").exists()


def _tar_bytes(add: Callable[[tarfile.TarFile], None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        add(tf)
    return buf.getvalue()


def _add_file(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def test_tar_archives_extract_and_unsafe_members_rejected(tmp_path: Path) -> None:
    good = tmp_path / "good.tar.gz"
    good.write_bytes(_tar_bytes(lambda tf: _add_file(tf, "set/a_walk.bvh", make_bvh().encode())))
    out = extract_archive(good, tmp_path / "out")
    assert (out / "set" / "a_walk.bvh").read_text() == make_bvh()
    assert (out / download.EXTRACTED_MARKER).is_file()

    dotdot = tmp_path / "dotdot.tar.gz"
    dotdot.write_bytes(_tar_bytes(lambda tf: _add_file(tf, "../escape.bvh", b"x")))
    with pytest.raises(DatasetError, match=r"unsafe archive member '\.\./escape\.bvh'"):
        extract_archive(dotdot, tmp_path / "out2")

    def add_link(tf: tarfile.TarFile) -> None:
        link = tarfile.TarInfo("set/link.bvh")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tf.addfile(link)

    linked = tmp_path / "link.tar.gz"
    linked.write_bytes(_tar_bytes(add_link))
    with pytest.raises(DatasetError, match="link or special file"):
        extract_archive(linked, tmp_path / "out3")
    assert not (tmp_path / "escape.bvh").exists()
    assert not (tmp_path / "out2").exists() and not (tmp_path / "out3").exists()
    # Re-extracting replaces the folder atomically.
    assert extract_archive(good, tmp_path / "out") == tmp_path / "out"


def test_damaged_archive_gives_dataset_error(server: FileServer, cache: Path) -> None:
    data = b"this is not a zip file at all" * 10
    ds = make_dataset(server, data)
    with pytest.raises(DatasetError, match="cannot extract it as a zip archive"):
        fetch(ds, cache_dir=cache, progress=False)


def test_offline_gives_helpful_error(cache: Path) -> None:
    port = free_port()
    ds = Dataset(
        name="synthetic",
        title="Synthetic test motions",
        urls=(f"http://127.0.0.1:{port}/synth.zip",),
        local_names=("synthetic-local",),
        sha256="1" * 64,
    )
    with pytest.raises(DatasetError) as info:
        fetch(ds, cache_dir=cache, progress=False)
    msg = str(info.value)
    assert "refused" in msg.lower()
    assert "MOTIONMATCH_DATA" in msg
    assert str(archive_path(ds, cache_dir=cache)) in msg  # where to save a manual download
    assert ds.urls[0] in msg


def test_manual_download_in_cache_is_used_offline(cache: Path) -> None:
    data = dataset_zip()
    ds = Dataset(
        name="synthetic",
        title="Synthetic",
        urls=(f"http://127.0.0.1:{free_port()}/synth.zip",),
        size=len(data),
        sha256=sha(data),
    )
    target = archive_path(ds, cache_dir=cache)
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    folder = fetch(ds, cache_dir=cache, progress=False)
    assert len(list(folder.glob("*.bvh"))) == 3


def test_http_error_then_mirror(server: FileServer, cache: Path) -> None:
    data = dataset_zip()
    ds = make_dataset(server, data)
    ds_missing = replace(ds, urls=(server.url("/missing.zip"),))
    with pytest.raises(DatasetError, match="HTTP 404"):
        fetch(ds_missing, cache_dir=cache, progress=False)
    ds_mirrors = replace(ds, urls=(server.url("/missing.zip"), ds.urls[0]))
    folder = fetch(ds_mirrors, cache_dir=cache, progress=False)
    assert [r["path"] for r in server.requests[-2:]] == ["/missing.zip", "/files/synth.zip"]
    assert folder.is_dir()


def test_progress_bar_can_be_disabled(server: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = make_dataset(server, dataset_zip())
    fetch(ds, cache_dir=tmp_path / "quiet", progress=False)
    assert capsys.readouterr().err == ""
    fetch(ds, cache_dir=tmp_path / "loud", progress=True)
    err = capsys.readouterr().err
    assert "synth.zip" in err and "100%" in err


def test_cli_fetch_through_catalogue(server: FileServer, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    ds = make_dataset(server, dataset_zip())
    monkeypatch.setitem(catalogue_mod._CATALOGUE, "synthetic", ds)
    parser = argparse.ArgumentParser(prog="motionmatch")
    datasets_cmd.register(parser.add_subparsers(dest="command"))

    args = parser.parse_args(["datasets", "fetch", "synthetic", "--cache-dir", str(cache), "--no-progress"])
    assert args.func(args) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(cache / "datasets" / "synthetic" / "motions")
    assert err == ""

    args = parser.parse_args(["datasets", "list", "--json", "--cache-dir", str(cache)])
    assert args.func(args) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["synthetic"]["cached"] == str(cache / "datasets" / "synthetic" / "motions")
    assert rows["lafan1"]["cached"] is None

    server.files.clear()  # --force must download again; the server now answers 404
    args = parser.parse_args(["datasets", "fetch", "synthetic", "--cache-dir", str(cache), "--force", "--no-progress"])
    assert args.func(args) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "HTTP 404" in err
