"""Compiling the viewer's kernels before a page needs them: scripted sessions, in stages.

Numba compiles a kernel the first time it is called with new argument types and keeps the
machine code in its disk cache (``cache=True``), so a fresh install pays its compilation
once: about a minute of CPU in all. Paid inside a session, it froze the 60 Hz loop for up
to a minute on the first obstacle. The viewer pays it here instead, in two stages, each a
short scripted :class:`~motionmatch.viewer.session.Session` (the messages a page sends, and
ticks) on the viewer's own database, so the kernels are compiled for exactly the argument
types the sessions will use:

* ``character``: one character walking, running, turning, strafing, jumping, dancing,
  creeping and idling. Run in the viewer's process before it prints its address (about 20 s of CPU
  when nothing is cached, under a second when everything is).
* ``environment``: drawn paths (timed, and the drawn-trajectory control), obstacles (static and moving), a second character, a
  spawned crowd with goals. The penalised search alone is about 20 s of CPU. It is
  compiled by a worker process (``python -m motionmatch.viewer.warmup DB.npz``) on the
  other core while the first stage runs and pages connect; then the viewer runs the same
  script in a background thread, which now only loads the machine code from the cache.
  Until then a session holds the page's requests that need it (see
  :meth:`Warmup.ready`) and tells the page what it is waiting for.

No session compiles anything afterwards (``tests/test_warmup.py`` checks that a session's
first walk, path, obstacle, crowd and scenario compile nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from motionmatch._jit import compile_intervals

__all__ = ["STAGES", "StageReport", "Warmup", "run_stage"]

#: the stages, in order: what a moving character needs, then everything else
STAGES = ("character", "environment")
#: what the page is told each stage prepares
STAGE_WHAT = {"character": "the character", "environment": "paths, obstacles and crowds"}
#: CPU seconds of each stage when nothing is cached (2-core machine, measured with
#: ``benchmarks/bench_coldstart.py``): the estimate of the time left shown meanwhile
STAGE_SECONDS = {"character": 20.0, "environment": 35.0}


@dataclass(frozen=True)
class StageReport:
    """One stage run: its name, wall seconds, and how many kernels it compiled (outermost
    compilations; 0 when every kernel was in memory or in Numba's disk cache)."""

    stage: str
    seconds: float
    compiled: int


def _send(s, kind: str, **fields) -> None:
    """A page's message, validated as the server does, handled now."""
    from motionmatch.viewer.messages import parse

    s.handle(parse(json.dumps({"type": kind, **fields})))


def _script_character(s, ticks: Callable[[int], None]) -> None:
    """Every locomotion mode the keyboard reaches, with the turns and speed changes."""
    steps = [([], 20), (["w"], 40), (["w", "d"], 20), (["w", "shift"], 30), (["w", "a"], 20), (["s"], 20),
             (["w", "j"], 30), (["c", "w"], 30), (["p"], 30), (["up"], 5), (["down"], 5), (["q", "d"], 20),
             (["q", "s"], 20), ([], 30)]
    for held, n in steps:
        _send(s, "keys", held=held, yaw=0.0)
        ticks(n)


def _script_environment(s, ticks: Callable[[int], None]) -> None:
    """Drawn paths; walking among static obstacles (a few, then a scene of many), a moving
    one, a second character near the first; spawned groups walking to goals through them."""
    cid = s.selected
    _send(s, "path", id=cid, points=[[0, 0, 0], [1, 1, 1], [2, 2, 3]], mode="local", scale=1.0)
    ticks(30)
    _send(s, "obstacle_add", obstacle={"shape": "disk", "center": [0.2, 1.5], "radius": 0.4})
    _send(s, "path", id=cid, points=[[0, 0, 0], [3, 0, 4]], mode="global", scale=1.0)
    ticks(30)
    _send(s, "path", id=cid, points=[[0, 0, 0], [1, 1, 1], [2, 2, 3]], mode="drawn")  # the ETH paper's control
    ticks(20)
    _send(s, "path_cancel", id=cid)
    _send(s, "keys", held=["w"], yaw=0.0)
    ticks(30)
    _send(s, "spawn_group", count=4, center=[4.0, 4.0], target=[0.0, 5.0], spacing=1.0, speed=1.3)
    ticks(40)
    _send(s, "obstacle_add", obstacle={"shape": "box", "center": [-1.0, 2.0], "size": [1.0, 0.5], "yaw_deg": 30.0,
                                       "velocity": [0.5, 0.0]})
    _send(s, "add_character", name="other", position=[0.5, 3.0], facing=[0.0, -1.0])
    _send(s, "keys", held=["w"], yaw=0.0)
    ticks(30)
    many = [{"shape": "disk", "center": [1.5 * (i % 5) - 3.0, 1.5 * (i // 5) + 1.0], "radius": 0.3} for i in range(20)]
    _send(s, "scene_set", scene={"obstacles": many})
    _send(s, "spawn_group", count=6, center=[0.0, -3.0], target=[0.0, 12.0], spacing=1.0, speed=1.3)
    ticks(60)
    _send(s, "scene_clear")
    ticks(10)


SCRIPTS: dict[str, Callable] = {"character": _script_character, "environment": _script_environment}


def _ticks(s, n: int, pause: float = 0.0) -> None:
    """``n`` ticks of session ``s`` (its messages, a step, a pose frame), sleeping ``pause``
    seconds after each."""
    for _ in range(n):
        s._drain_inbox()
        s.step()
        s._emit_pose(stepped=True)
        if pause:
            time.sleep(pause)


def run_stage(viewer, stage: str, pause: float = 0.0) -> StageReport:
    """Run ``stage``'s script on a headless session of ``viewer`` (its database, limits
    and catalog; the session is not registered with the server and sends nowhere).
    ``pause``: seconds to sleep after each tick (a run beside live sessions leaves them the
    interpreter between its ticks)."""
    from motionmatch.viewer.session import Session

    t0 = time.perf_counter()
    errors: list[dict] = []

    def send(m) -> None:
        if isinstance(m, dict) and m.get("type") == "error":
            errors.append(m)

    with compile_intervals() as counter:
        s = Session(viewer, send, holds=False)
        SCRIPTS[stage](s, lambda n: _ticks(s, n, pause))
    if errors:  # a script that no longer matches the messages would warm up nothing
        raise RuntimeError(f"the {stage} warm-up's {errors[0].get('for')!r} request was refused: "
                           f"{errors[0].get('message')}")
    return StageReport(stage, time.perf_counter() - t0, len(counter.intervals))


@dataclass
class Warmup:
    """The viewer's warm-up: :meth:`run_first` before serving, :meth:`start_rest` after.

    Args:
        viewer: the :class:`~motionmatch.viewer.server.Viewer` (its database is used).
        db_path: the database file the worker process loads (the viewer's database as
            saved: the same array types); ``None`` runs every stage in this process.
        log: one line per event (stage started, finished, failed).
    """

    viewer: object
    db_path: Path | None = None
    log: Callable[[str], None] = lambda m: None
    reports: list[StageReport] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._ready = {stage: threading.Event() for stage in STAGES}
        self._started: dict[str, float] = {}
        self._worker: subprocess.Popen | None = None
        self._listeners: list[Callable[[], None]] = []
        self.error: str | None = None

    # ------------------------------------------------------------------ state
    def ready(self, stage: str) -> bool:
        """Whether ``stage``'s kernels are in memory (a session may use them without compiling)."""
        return self._ready[stage].is_set()

    def status(self) -> dict:
        """For the page: ``{"ready": bool, "what": ..., "elapsed_s", "eta_s"}`` of the stage
        still running (``ready`` true when none is)."""
        for stage in STAGES:
            if not self.ready(stage):
                t0 = self._started.get(stage)
                elapsed = time.perf_counter() - t0 if t0 is not None else 0.0
                return {"ready": False, "stage": stage, "what": STAGE_WHAT[stage], "elapsed_s": round(elapsed, 1),
                        "eta_s": round(max(STAGE_SECONDS[stage] - elapsed, 3.0))}
        return {"ready": True}

    def on_ready(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (from the warm-up's thread) when the last stage is ready."""
        self._listeners.append(fn)

    # ------------------------------------------------------------------ running
    def run_first(self) -> StageReport:
        """The character stage, here and now (blocking); starts the worker that compiles
        the environment stage meanwhile, unless everything was cached already."""
        if self.db_path is not None:
            self._start_worker()
        rep = self._run("character")
        w = self._worker
        if rep.compiled == 0 and w is not None and w.poll() is None:
            w.kill()  # everything was cached: loading it here is quicker than the worker
            w.wait()
            self._worker = None
        return rep

    def start_rest(self) -> threading.Thread:
        """The environment stage in a background thread: after the worker has compiled it
        (loading only), or compiling here when there is no worker."""
        t = threading.Thread(target=self._rest, name="viewer-warmup", daemon=True)
        t.start()
        return t

    def run_all(self) -> list[StageReport]:
        """Every stage in this process, blocking (``Viewer.prepare(background=False)``: tests)."""
        return [self._run(stage) for stage in STAGES]

    def close(self) -> None:
        w = self._worker
        if w is not None and w.poll() is None:
            w.kill()

    def _start_worker(self) -> None:
        self._started["environment"] = time.perf_counter()
        self.log(f"preparing the kernels for {STAGE_WHAT['environment']} in a background process "
                 "(compiling them on a first run; a page's requests that need them wait until they are ready)")
        cmd = [sys.executable, "-m", "motionmatch.viewer.warmup", str(self.db_path), "--stage", "environment"]
        self._worker = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def _rest(self) -> None:
        w = self._worker
        if w is not None:
            _, err = w.communicate()
            if w.returncode != 0:  # compile here instead: slower for the first page, never wrong
                last = (err or "").strip().splitlines()[-1:] or ["no output"]
                self.log(f"warm-up worker failed ({last[0]}); compiling here")
        try:
            self._run("environment", pause=0.002)  # beside live sessions: they get the interpreter between ticks
        except Exception as e:  # pragma: no cover - a bug in a script: sessions then compile on first use
            self.error = f"{type(e).__name__}: {e}"
            self.log(f"warm-up of the environment stage failed: {self.error}")
            self._ready["environment"].set()
        for fn in self._listeners:
            fn()

    def _run(self, stage: str, pause: float = 0.0) -> StageReport:
        self._started.setdefault(stage, time.perf_counter())
        done = threading.Event()
        threading.Thread(target=self._progress, args=(stage, done), daemon=True).start()
        try:
            rep = run_stage(self.viewer, stage, pause=pause)
        finally:
            done.set()
        self.reports.append(rep)
        self._ready[stage].set()
        if rep.compiled:
            total = time.perf_counter() - self._started[stage]
            self.log(f"kernels for {STAGE_WHAT[stage]}: ready after {total:.1f} s "
                     f"({rep.compiled} kernels compiled)")
        return rep

    def _progress(self, stage: str, done: threading.Event, first: float = 3.0, every: float = 10.0) -> None:
        """A line after ``first`` seconds, then every ``every`` seconds, while ``stage`` runs."""
        wait = first
        while not done.wait(wait):
            st = self.status()
            if st.get("stage") != stage:
                return
            self.log(f"compiling the kernels for {STAGE_WHAT[stage]} (first run only; cached afterwards): "
                     f"{st['elapsed_s']:.0f} s so far, about {st['eta_s']:.0f} s left")
            wait = every


def _main(argv: list[str] | None = None) -> int:
    """The worker: ``python -m motionmatch.viewer.warmup DB.npz --stage environment``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m motionmatch.viewer.warmup",
                                 description="Compile the viewer's kernels of one stage into Numba's disk cache.")
    ap.add_argument("db", help="the viewer's database file (.npz)")
    ap.add_argument("--stage", choices=STAGES, default="environment")
    args = ap.parse_args(argv)
    from motionmatch.database import MotionDatabase
    from motionmatch.errors import MotionMatchError
    from motionmatch.viewer.server import Viewer

    try:
        db = MotionDatabase.load(args.db)
    except (MotionMatchError, OSError, ValueError) as e:
        print(f"motionmatch.viewer.warmup: {args.db}: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    viewer = Viewer(db)
    try:
        rep = run_stage(viewer, args.stage)
    finally:
        viewer.close()
    print(f"{rep.stage}: {rep.seconds:.1f} s, {rep.compiled} kernels compiled", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
