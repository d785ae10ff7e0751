"""Ray for batch jobs: started inside this process (the embedded default) or joined by address.

``pip install 'motionmatch[ray]'`` installs Ray; without it every batch job stops with one
line naming the extra. A job joining a cluster (``address="HOST:PORT"``) needs
motionmatch installed on every node and its input files at the same paths there (a
shared file system); the outputs are written by the process that runs the job.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from motionmatch.errors import MotionMatchError

START_ATTEMPTS = 3
"""Tries at starting the embedded Ray (its node start-up has a fixed 30 s limit, which a
heavily loaded machine can miss)."""


class BatchError(MotionMatchError):
    """A batch job cannot start: Ray is missing or unreachable, or the job's input is invalid."""


def import_ray():
    """The ``ray`` module, or a :class:`BatchError` naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise BatchError("batch jobs need Ray, which is not installed; pip install 'motionmatch[ray]'") from None
    return ray


@contextmanager
def ray_session(address: str | None = None, workers: int | None = None) -> Iterator[float]:
    """Ray for the body of the ``with``; yields the seconds it took to start (or join).

    Args:
        address: ``HOST:PORT`` of a running cluster's head (``ray start --head``) to join;
            ``None`` starts Ray inside this process on this machine, shut down afterwards.
        workers: with no address, the number of tasks run at once (Ray's ``num_cpus``;
            default: every core). Refused with an address (the cluster's nodes decide).

    If Ray is already initialised in this process it is used as it is (and left running).
    """
    ray = import_ray()
    if workers is not None and workers < 1:
        raise BatchError(f"--workers: expected a whole number >= 1, got {workers}")
    if address is not None and workers is not None:
        raise BatchError("--workers is for the embedded Ray; a cluster joined with --address has its own CPUs")
    if ray.is_initialized():
        yield 0.0
        return
    t0 = time.perf_counter()
    kwargs = dict(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    for attempt in range(START_ATTEMPTS):
        try:
            if address is None:
                ray.init(num_cpus=workers or os.cpu_count() or 1, **kwargs)
            else:
                ray.init(address=address, **kwargs)
            break
        except Exception as e:  # Ray raises bare Exceptions too (a node that starts too slowly)
            if ray.is_initialized():
                ray.shutdown()
            if attempt + 1 < START_ATTEMPTS and address is None and "timed out" in str(e):
                continue  # a machine under heavy load: Ray's 30 s start-up limit is fixed, try again
            where = f"the Ray cluster at {address}" if address else "Ray on this machine"
            hint = (" (a cluster with token authentication, Ray's default for 'ray start': export "
                    "RAY_AUTH_MODE=token here too)" if "auth" in str(e).lower() else "")
            raise BatchError(f"cannot start or join {where}: {' '.join(str(e).split())[:300]}{hint}") from None
    reaper = _start_reaper() if address is None else None
    try:
        yield time.perf_counter() - t0
    finally:
        ray.shutdown()
        if reaper is not None:
            _stop_reaper(reaper)


def _start_reaper() -> subprocess.Popen | None:
    """A watcher (:mod:`motionmatch.batch._reaper`) that ends the embedded Ray's processes,
    this process's descendants, when this process dies without shutting Ray down
    (``kill -9``); ``None`` where there is no ``/proc``."""
    from motionmatch.batch import _reaper

    if not os.path.isdir("/proc"):
        return None
    return subprocess.Popen([sys.executable, _reaper.__file__, str(os.getpid())],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _stop_reaper(reaper: subprocess.Popen) -> None:
    """Tell the watcher that Ray was shut down here (it exits without signalling anyone)."""
    from motionmatch.batch._reaper import DONE

    try:
        reaper.stdin.write(DONE)
        reaper.stdin.close()
        reaper.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        reaper.kill()
