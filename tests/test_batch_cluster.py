"""Batch jobs on a real Ray cluster started here on 127.0.0.1: a head (``ray start --head``)
and a worker node (``ray start --address``), each with one CPU, joined with ``--address``.

The nodes run in the foreground (``--block``) in their own process groups with their own
ports and temporary folder, and are stopped at the end of the module (their process
groups, never Ray processes of others on the machine). The last test kills the worker
node in the middle of a job: the finished cells are kept, and the rerun computes only
the missing ones."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from _batch_common import BUILD_CLIPS, FRAMES, GENMM_EXAMPLE, REPO, same_npz

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'motionmatch[ray]'")

from motionmatch import batch  # noqa: E402
from motionmatch.cli.main import main  # noqa: E402

pytestmark = pytest.mark.data
RAY = str(Path(sys.executable).with_name("ray"))
START_S = 240  # a node's start-up on 2 loaded cores can take a minute or more


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_ports() -> list[str]:
    names = ("node-manager-port", "object-manager-port", "metrics-export-port", "dashboard-agent-listen-port",
             "dashboard-agent-grpc-port", "runtime-env-agent-port")
    out = [a for n in names for a in (f"--{n}", str(_free_port()))]
    low = _free_port()
    return [*out, "--min-worker-port", str(low), "--max-worker-port", "0"]


def _start(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    """A node in the foreground (``--block``), in a process group of its own; returns when it has started."""
    p = subprocess.Popen([RAY, "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
                          "--disable-usage-stats", *_node_ports(), *args], env=env, stdout=log.open("w"),
                         stderr=subprocess.STDOUT, start_new_session=True)
    t0 = time.monotonic()
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if p.poll() is not None or time.monotonic() - t0 > START_S:
            _stop([p])
            pytest.fail(f"a Ray node did not start: {log.read_text(errors='replace')[-800:]}")
        time.sleep(0.5)
    return p


def _stop(nodes: list[subprocess.Popen]) -> None:
    """Stop nodes started by :func:`_start`: SIGTERM to their process groups, SIGKILL to what remains."""
    for p in nodes:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 3  # a graceful stop of a head takes 15 s or more: what is left is killed
    for p in nodes:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def cluster():
    """``(address, env, worker node)`` of a two-node cluster on 127.0.0.1."""
    # a short folder: Ray's sockets live in it and a Unix socket's path has at most 107 bytes
    # (pytest's own temporary folders, under pytest-xdist, are longer)
    tmp = Path(tempfile.mkdtemp(prefix="mmray", dir="/tmp"))
    # this checkout's code on every node; a local test cluster without token authentication
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
               RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    port = _free_port()
    nodes = []
    old = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    try:
        # Ray's client server (default port 10001) runs only where grpcio is installed
        # (``ray[client]``); a port of its own then, and the option refused without it
        client = ["--ray-client-server-port", str(_free_port())] if importlib.util.find_spec("grpc") else []
        nodes.append(_start(["--head", "--port", str(port), "--include-dashboard", "false", "--dashboard-port",
                             str(_free_port()), *client, "--temp-dir", str(tmp)], tmp / "head.log", env))
        nodes.append(_start(["--address", f"127.0.0.1:{port}"], tmp / "worker.log", env))
        yield f"127.0.0.1:{port}", env, nodes[1]
    finally:
        _stop(nodes)
        shutil.rmtree(tmp, ignore_errors=True)
        if old is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = old


def test_cli_build_on_the_cluster_equals_motionmatch_build(cluster, data_dir, tmp_path):
    address, env, _ = cluster
    files = [str(data_dir / "lafan1-60fps" / f) for f in BUILD_CLIPS]
    assert main(["build", *files, "--mirror", "-q", "-o", str(tmp_path / "ref.npz")]) == 0
    run = subprocess.run([sys.executable, "-m", "motionmatch", "batch", "build", *files, "--mirror", "-q",
                          "--address", address, "-o", str(tmp_path / "db.npz")],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "3 computed" in run.stdout
    assert same_npz(tmp_path / "db.npz", tmp_path / "ref.npz")


class _Stopped(Exception):
    """The job's driver stopped by the test (after the worker node was killed)."""


def test_killing_the_worker_node_keeps_finished_cells_and_the_rerun_does_only_the_rest(cluster, data_dir, tmp_path):
    address, _, worker = cluster
    example = data_dir / GENMM_EXAMPLE
    seeds = list(range(6))
    out = tmp_path / "out"

    def kill_after_first(status) -> None:
        if status.finished >= 1 and any((out / "Xia_normal").glob("*.bvh")):  # a cell's output on disk
            os.killpg(worker.pid, signal.SIGKILL)  # the worker node and its tasks die mid-job
            raise _Stopped

    with pytest.raises(_Stopped):
        batch.genmm([example], out, seeds=seeds, frames=FRAMES, address=address, progress=kill_after_first)
    kept = {p.name: p.read_bytes() for p in (out / "Xia_normal").glob("*.bvh")}
    assert 1 <= len(kept) < len(seeds)
    rerun = batch.genmm([example], out, seeds=seeds, frames=FRAMES, address=address)  # the head node alone
    assert not rerun.failed
    assert len(rerun.skipped) == len(kept) and len(rerun.done) == len(seeds) - len(kept)
    for name, content in kept.items():
        assert (out / "Xia_normal" / name).read_bytes() == content
    for s in seeds:  # every output equals a single-process run's
        ref = tmp_path / f"ref{s}.bvh"
        assert main(["genmm", str(example), "-o", str(ref), "--seed", str(s), "--frames", str(FRAMES), "--quiet",
                     "--no-metrics"]) == 0
        assert (out / "Xia_normal" / f"Xia_normal_seed{s}.bvh").read_bytes() == ref.read_bytes()
