"""Live pose control from a camera (issue 18): calibration, the body video, and the page's
"Use camera" in headless Chromium with a fake camera playing a rendered video."""

from __future__ import annotations

import collections
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import data_root
from motionmatch.control.pose.calibrate import (
    MAX_OFFSET,
    TRAINING_NEUTRAL,
    CalibrationError,
    Calibrator,
    calibrate_stream,
    neutral_target,
)
from motionmatch.control.pose.keypoints import KEYPOINTS, KP, KeypointStream, standing_pose
from motionmatch.control.pose.normalize import normalize_stream


def _frames(pose: np.ndarray, seconds: float, fps: float = 30.0, jitter: float = 0.5, seed: int = 0):
    rng = np.random.default_rng(seed)
    n = int(seconds * fps) + 1
    return np.arange(n) / fps, pose[None] + rng.normal(0, jitter, (n, *pose.shape))


def _training_like(scale: float = 80.0, centre=(320.0, 240.0)) -> np.ndarray:
    """``[13, 2]`` image keypoints (y down) of the training data's neutral pose."""
    return np.array(centre) + neutral_target() * np.array([1.0, -1.0]) * scale


def test_calibration_moves_a_biased_neutral_pose_onto_the_training_one():
    biased = _training_like()
    shift = np.zeros_like(biased)
    shift[[KP["left_hip"], KP["right_hip"]], 1] = -10.0                          # hips 10 px higher
    shift[[KP["left_shoulder"], KP["right_shoulder"]], 0] = [8.0, -8.0]          # shoulders wider
    t, kp = _frames(biased + shift, 4.0)
    cal, rest = calibrate_stream(KeypointStream(t, kp, KEYPOINTS))
    assert cal.facing_ratio > 0.4 and cal.frames >= 90 and 60.0 < cal.scale < 100.0
    before = np.median(normalize_stream(KeypointStream(t, kp, KEYPOINTS)).poses, axis=0)
    after = np.median(normalize_stream(rest).poses, axis=0)
    assert np.abs(before - neutral_target()).max() > 0.08                         # the bias shows
    assert np.abs(after - neutral_target()).max() < 0.02                          # and is gone
    assert np.abs(cal.offset).max() <= MAX_OFFSET + 1e-9
    # a performer already like the training data is left alone
    t, kp = _frames(_training_like(120.0), 3.5, seed=1)
    cal, _ = calibrate_stream(KeypointStream(t, kp, KEYPOINTS))
    assert np.abs(cal.offset).max() < 0.02


def test_calibration_refuses_a_back_to_the_camera_a_moving_performer_and_no_body():
    back = _training_like()
    back[:, 0] = 2 * 320.0 - back[:, 0]           # left shoulder on the image's left: seen from behind
    with pytest.raises(CalibrationError, match="from behind"):
        calibrate_stream(KeypointStream(*_frames(back, 3.5), KEYPOINTS))
    t, kp = _frames(_training_like(), 3.5)
    kp = kp + (np.sin(t * 4.0) * 120.0)[:, None, None] * np.array([1.0, 0.0])   # swaying across the image
    with pytest.raises(CalibrationError, match="move"):
        calibrate_stream(KeypointStream(t, kp, KEYPOINTS))
    t, kp = _frames(_training_like(), 3.5)
    kp[::2] = np.nan
    kp[1::4] = np.nan
    with pytest.raises(CalibrationError, match="found a body"):
        calibrate_stream(KeypointStream(t, kp, KEYPOINTS))
    with pytest.raises(CalibrationError, match="needs the first"):
        calibrate_stream(KeypointStream(*_frames(_training_like(), 1.0), KEYPOINTS))
    cal = Calibrator(3.0)
    assert not cal.push(0.0, standing_pose()) and not cal.push(1.0, standing_pose()) and cal.push(3.0, standing_pose())


def test_the_training_neutral_pose_is_the_rendered_stand_still_pose():
    """TRAINING_NEUTRAL against one clip's stand-still frames rendered from the front."""
    from motionmatch.anim import load_bvh
    from motionmatch.control.pose.labels import label_frames, motion_facts
    from motionmatch.control.pose.render import RenderSettings, render_keypoints, world_keypoints
    from motionmatch.datasets import tags_from_name

    path = data_root() / "lafan1" / "walk1_subject1_stop.bvh"
    if not path.is_file():
        pytest.skip(f"{path} not found; set MOTIONMATCH_DATA to the shared data folder")
    m = load_bvh(path)
    m.tags = tags_from_name(path.stem)
    kp = world_keypoints(m)
    s = RenderSettings(noise_px=0.0, noise_rel=0.0)
    stream, info = render_keypoints(kp, m.fps, s, 0, 0.0)
    lab = label_frames(motion_facts(m, kp), info.cam_forward, info.cam_right)
    poses = normalize_stream(stream).poses[lab == "stand_still"]
    assert len(poses) > 30
    assert np.abs(np.median(poses, axis=0) - TRAINING_NEUTRAL).max() < 0.2


# ----------------------------------------------------------------------------- the page
FAKE_CAMERA = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]
CAMERA_FPS = 15.0                               # the camera video's rate (the estimator's is below it)


def camera_video(path: Path) -> tuple[Path, float, float, float]:
    """A performance filmed on the skinned body (320 x 240, 15 fps), 3.5 m from the camera
    (re-anchored when the performer comes closer than 2 m): standing still for 7.5 s (the
    calibration), then walking, then running, toward the camera (Bandai-Namco takes).
    Returns the y4m file and the seconds of standing, walking and running."""
    from motionmatch.anim import load_bvh
    from motionmatch.control.pose.bodyvideo import render_body_video, write_y4m
    from motionmatch.control.pose.render import RenderSettings

    root = data_root() / "bandai-namco"
    walk_f = root / "dataset-1" / "dataset-1_walk_normal_001.bvh"
    run_fs = [root / "dataset-2" / f"dataset-2_run_normal_00{i}.bvh" for i in (1, 2)]
    if not all(f.is_file() for f in (walk_f, *run_fs)):
        pytest.skip(f"{root} lacks the walk/run takes; set MOTIONMATCH_DATA to the shared data folder")
    s = RenderSettings(fps=CAMERA_FPS, distance=(3.5, 3.5), height=(1.2, 1.2), max_segment_s=30.0, min_distance=2.0)
    walk = load_bvh(walk_f)
    stand = render_body_video(walk[0:1], s, seed=0, azimuth=0.0, labels=False, scale=0.5).frames  # standing
    # 7.5 s: room for the 3 s calibration after a slow start (on the loaded 2-core machine the
    # first estimates can come seconds into the stream; 1 run in 7 never calibrated with 6 s)
    stand = np.repeat(stand, int(7.5 * CAMERA_FPS), 0)
    walking = render_body_video(walk[30:150], s, seed=0, azimuth=0.0, labels=False, scale=0.5).frames
    running = np.concatenate([render_body_video(load_bvh(f), s, seed=0, azimuth=0.0, labels=False, scale=0.5).frames
                              for f in run_fs])
    write_y4m(path, np.concatenate([stand, walking, running]), CAMERA_FPS)
    return path, len(stand) / CAMERA_FPS, len(walking) / CAMERA_FPS, len(running) / CAMERA_FPS


def _quantiles(values) -> tuple[float, float]:
    v = np.asarray(values, dtype=float)
    return float(np.median(v)), float(np.percentile(v, 95))


class _Flatbuffer:
    """Just enough of a flatbuffer reader to check the page's model bundles."""

    def __init__(self, data: bytes, base: int = 0):
        self.d, self.base = data, base

    def u32(self, p: int) -> int:
        return int.from_bytes(self.d[p:p + 4], "little")

    def root(self) -> int:
        return self.base + self.u32(self.base)

    def ident(self) -> bytes:
        return self.d[self.base + 4:self.base + 8]

    def field(self, table: int, slot: int) -> int | None:
        """Position of a table's field (``None``: absent)."""
        vt = table - int.from_bytes(self.d[table:table + 4], "little", signed=True)
        size = int.from_bytes(self.d[vt:vt + 2], "little")
        if 4 + 2 * slot >= size:
            return None
        off = int.from_bytes(self.d[vt + 4 + 2 * slot:vt + 6 + 2 * slot], "little")
        return table + off if off else None

    def ref(self, table: int, slot: int) -> int:
        p = self.field(table, slot)
        return p + self.u32(p)

    def vector(self, table: int, slot: int, tables: bool = True) -> list[int]:
        v = self.ref(table, slot)
        return [v + 4 + 4 * k + (self.u32(v + 4 + 4 * k) if tables else 0) for k in range(self.u32(v))]

    def string(self, table: int, slot: int) -> str:
        v = self.ref(table, slot)
        return self.d[v + 4:v + 4 + self.u32(v)].decode()


def _input_normalisation(model: bytes) -> tuple[float, float]:
    """(mean, std) of a TFLite model's input from its TFLITE_METADATA (metadata_schema.fbs)."""
    import struct

    fb = _Flatbuffer(model)
    assert fb.ident() == b"TFL3"
    root = fb.root()
    meta = {fb.string(m, 0): fb.u32(fb.field(m, 1)) for m in fb.vector(root, 6)}
    buffer = fb.vector(root, 4)[meta["TFLITE_METADATA"]]
    data = fb.ref(buffer, 0) + 4
    assert data % 16 == 0                                                    # force_align: 16
    mm = _Flatbuffer(model, data)
    assert mm.ident() == b"M001"
    subgraph = mm.vector(mm.root(), 3)[0]
    tensor = mm.vector(subgraph, 2)[0]
    unit = mm.vector(tensor, 4)[0]
    assert model[mm.field(unit, 0)] == 1                                    # NormalizationOptions
    norm = mm.ref(unit, 1)
    mean, std = (struct.unpack("<f", model[v + 4:v + 8])[0] for v in (mm.ref(norm, 0), mm.ref(norm, 1)))
    return mean, std


def test_the_page_model_bundles_are_the_packaged_models_with_their_input_normalisation():
    """web/pose_task.mjs: each .task is a zip of the detector and one landmark model from
    @mediapipe/pose, unchanged after a prefix holding a new root table and the metadata
    (the detector reads [-1, 1], the landmark models [0, 1], as in MediaPipe's graphs)."""
    import zipfile

    from motionmatch.viewer._bundle import STATIC_DIR, web_source

    web = web_source()
    pose = None if web is None else web / "node_modules" / "@mediapipe" / "pose"
    if pose is None or not (STATIC_DIR / "pose" / "pose_landmarker_lite.task").is_file() or not pose.is_dir():
        pytest.skip("the page is not built here (cd web && npm ci && npm run build)")
    detector = (pose / "pose_solution_packed_assets.data").read_bytes()
    for m in ("lite", "full", "heavy"):
        with zipfile.ZipFile(STATIC_DIR / "pose" / f"pose_landmarker_{m}.task") as z:
            assert z.namelist() == ["pose_detector.tflite", "pose_landmarks_detector.tflite"]
            assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
            det, lm = z.read("pose_detector.tflite"), z.read("pose_landmarks_detector.tflite")
        original = (pose / f"pose_landmark_{m}.tflite").read_bytes()
        for built, source, expected in ((det, detector, (127.5, 127.5)), (lm, original, (0.0, 255.0))):
            prefix = len(built) - len(source)
            assert prefix % 64 == 0 and built[prefix:] == source                  # weights untouched, aligned
            assert _input_normalisation(built) == expected
            new, old = _Flatbuffer(built), _Flatbuffer(source)
            assert new.ref(new.root(), 2) == prefix + old.ref(old.root(), 2)    # the same subgraphs


@pytest.mark.slow
def test_the_page_camera_drives_the_character_with_nothing_from_outside(tmp_path_factory, request):
    """The page's "Use camera" in headless Chromium, its fake camera playing a rendered
    stand / walk / run performance (about 50 s on the loaded 2-core machine): MediaPipe's
    PoseLandmarker (CPU, WebAssembly, in a worker) finds the body, the keypoints calibrate and
    reach the session's classifier, every request stays on the viewer's origin, the session
    reads the walk as a walk and the run as a run, and the character moves. With the quick
    classifier of the tests (no default classifier cached here), walk then run is an expected
    failure (see the end)."""
    pytest.importorskip("sklearn")
    pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    from test_viewer_e2e import CHROMIUM_ARGS, chromium_path
    from test_viewer_support import small_database, start_server, viewer_deps_or_skip

    viewer_deps_or_skip()
    from motionmatch.control.pose import default as d
    from motionmatch.viewer import pose as plugin
    from motionmatch.viewer._bundle import BundleError, ensure_bundle

    clock = {"start": time.monotonic()}
    try:
        static = ensure_bundle(log=lambda m: None)
    except BundleError as e:
        pytest.skip(f"the page's bundle cannot be built: {e}")
    if not (Path(static) / "pose" / "pose_landmarker_lite.task").is_file():
        pytest.skip("the page's bundle has no pose estimator (rebuild: cd web && npm ci && npm run build)")
    exe = chromium_path()
    if exe is None:
        pytest.skip("Debian's chromium is not installed")
    clock["bundle"] = time.monotonic()
    tmp = tmp_path_factory.mktemp("camera")
    video, stand_s, walk_s, run_s = camera_video(tmp / "performance.y4m")
    clock["video"] = time.monotonic()
    # the default classifier where this machine has it (`motionmatch pose eval` caches it;
    # MOTIONMATCH_TRAIN_TESTS=1 trains it here, about 4 min), else the quick one of the tests
    pair = d.cached_classifiers(data_root())
    if pair is None and os.environ.get("MOTIONMATCH_TRAIN_TESTS") == "1":
        pair = d.default_classifiers(data_root(), progress=True)
    quick = pair is None
    if quick:
        pair = d.default_classifiers(data_root(), d.QUICK, cache_dir=request.config.cache.mkdir("motionmatch-pose-quick"))
    clf = pair[1]
    plugin.set_classifier(clf, "quick default classifier (test)" if quick else "default classifier")
    clock["classifier"] = time.monotonic()
    srv = start_server(small_database(tmp_path_factory.getbasetemp()), {"data": data_root()}, static_dir=static)
    clock["server"] = time.monotonic()
    from playwright.sync_api import sync_playwright

    origin = srv.url.rstrip("/")
    requests: list[str] = []
    console: list[str] = []
    end = stand_s + walk_s + run_s
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                tempfile.mkdtemp(prefix="mm-chromium-"), executable_path=exe, headless=True,
                args=[*CHROMIUM_ARGS, *FAKE_CAMERA, f"--use-file-for-fake-video-capture={video}"],
                viewport={"width": 640, "height": 400})        # the page's own Content-Security-Policy
            ctx.on("request", lambda r: requests.append(r.url))
            page = ctx.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: console.append(f"{m.type}: {m.text[:300]}"))
            page.goto(srv.url)
            page.wait_for_function("() => window.__mm && window.__mm.state.frame && window.__mm.state.welcome",
                                   timeout=30000)
            page.click("summary:has-text('Pose control')")
            page.select_option("#camera-model", "lite")
            p0 = page.evaluate("() => window.__mm.character().root")
            clock["page"] = time.monotonic()
            page.click("#camera-use")
            page.wait_for_function("() => window.__cameraStats && window.__cameraStats.sent > 0", timeout=60000)
            clock["first keypoints"] = time.monotonic()
            (session,) = [s for s in list(srv.viewer.sessions.values()) if s.pose_source is not None]
            dropped0 = session.dropped_ticks         # ticks a starved session skipped (60 a second)
            samples = []                   # (video seconds of the last estimated frame, pose status)
            while True:
                vt, st = page.evaluate("() => [window.__cameraStats.videoTime, window.__mm.state.pose]")
                samples.append((vt, st))
                if vt >= end or time.monotonic() - clock["first keypoints"] > 2 * end:
                    break
                time.sleep(0.2)
            stats = page.evaluate("() => window.__cameraStats")
            # the session's own view (the page's pose_status lags when the server is starved):
            # every frame sent so far arrives (the page goes on sending meanwhile)
            source = session.pose_source
            lost_s = (session.dropped_ticks - dropped0) / 60.0
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline and source.frames_received < stats["sent"]:
                time.sleep(0.1)
            received, classified, timeline = source.frames_received, source.frames_in, list(source.timeline)
            clock["video played, keypoints in"] = time.monotonic()
            root = page.evaluate("() => window.__mm.character().root")
            shown = page.locator("#camera-info").text_content()
            page.screenshot(path=str(tmp / "camera.png"))
            page.locator("#camera-view").screenshot(path=str(tmp / "camera-preview.png"))
            ctx.close()
    finally:
        srv.stop()
        plugin.set_classifier(None)
    clock["browser"] = time.monotonic()
    phases = list(clock.items())
    print("camera test phases (s): " + ", ".join(f"{k} {t - phases[i][1]:.1f}" for i, (k, t) in enumerate(phases[1:])))
    assert not errors, (errors, console[-20:])
    # at least one estimate per second of video (4-8 at load average 11-15 on the 2-core
    # machine; 2 at load 20), and a body in most of them
    assert stats["frames"] > end and stats["detected"] >= 0.8 * stats["frames"], (stats, console[-20:])
    running = [(vt, s) for vt, s in samples if s and s.get("state") == "running"]
    states = [(round(vt, 1), s.get("state"), s.get("frames"), s.get("dropped"), (s.get("message") or "")[-90:])
              for i, (vt, s) in enumerate(samples) if s and (i == 0 or s.get("state") != (samples[i - 1][1] or {}).get("state")
                                                           or s.get("message") != (samples[i - 1][1] or {}).get("message"))]
    # every keypoint frame the page sent reached the session, which calibrated on the standing
    # frames and classified the rest into commands other than standing. The session's
    # commands are taken at the camera time of the frames that made them (its timeline: on a
    # loaded machine the page's pose_status can lag by seconds), put on the video's clock by
    # the first frame sent (its video time in the page's log of estimates)
    assert received >= stats["sent"] and classified > 10, (received, classified, stats["sent"], states)
    first_sent = next(vt for vt, found in stats["log"] if found)
    timeline = [(round(t + first_sent, 2), c) for t, c in timeline]
    assert timeline and timeline[0][0] < stand_s + 1.0, (timeline[:3], states)          # calibrated standing
    assert running and "calibration" in running[-1][1] and "intent_ms" in running[-1][1], states
    assert "latency" in shown and "frames/s" in shown, shown
    assert {c for _, c in timeline} - {"stand_still", ""}, timeline
    moved = math.dist(p0, root)
    outside = [u for u in requests if not (u.startswith(origin) or u.startswith(("data:", "blob:")))]
    assert not outside, outside                                                           # nothing from outside
    assert any("/static/pose/pose_landmarker_lite.task" in u for u in requests), requests
    page_med, page_p95 = _quantiles(stats["pageMs"])
    est_med, est_p95 = _quantiles(stats["estimateMs"])
    log = stats["log"]                                   # (stream seconds, body found) per estimate
    print(f"camera: {stats['frames']} frames, body in {100 * stats['detected'] / stats['frames']:.0f}%, "
          f"estimator {(len(log) - 1) / (log[-1][0] - log[0][0]):.1f} frames/s over the video "
          f"(last second {stats['fps']:.1f}; {est_med:.0f} ms median, {est_p95:.0f} ms p95 per frame), "
          f"capture ({stats.get('clock')}) -> keypoints sent median {page_med:.0f} ms p95 {page_p95:.0f} ms, "
          f"server arrival->intent median {running[-1][1]['intent_ms']} ms p95 {running[-1][1]['intent_ms_p95']} ms; "
          f"character moved {moved:.1f} m")
    # walk, then run (issue 18's domain check): the share of each part's time (after 1.5 s to
    # switch) that the session spent in each family of commands, and the page's view
    walk = _shares(timeline, stand_s + 1.5, stand_s + walk_s)
    run = _shares(timeline, stand_s + walk_s + 1.5, end)
    commands = [(round(vt, 1), s["command"]) for vt, s in running]
    page = [f"{vt}:{c}" for i, (vt, c) in enumerate(commands) if i == 0 or c != commands[i - 1][1]]
    said = (f"walk part {walk}, run part {run}, moved {moved:.1f} m; session (video s:command) "
            f"{' '.join(f'{vt}:{c}' for vt, c in timeline)}; page {' '.join(page)}")
    print("camera commands: " + said)
    rate = (len(log) - 1) / (log[-1][0] - log[0][0])
    print(f"camera session: {lost_s:.1f} s of ticks skipped while the video played; estimator {rate:.1f} frames/s")
    ok = walk.get("walk", 0) > 0.5 and run.get("run", 0) > 0.5 and moved > 2.0
    if not ok and quick:
        # the quick classifier of the tests reads the estimator's damped run as a dance (the
        # limbs keep about half their swing), whatever of its data or settings was tried
        # (benchmarks/README.md, "Page camera under load"); the default one reads it
        pytest.xfail(f"the quick classifier of the tests did not read walk then run ({said}); the default "
                     "classifier does (`motionmatch pose eval` caches it)")
    # What a loaded machine does, measured here and reported rather than failed
    # (benchmarks/README.md, "Page camera under load"): below 7 estimates a second (the
    # classifier was trained on 30 Hz keypoints; the page's estimates at 5-6 a second, the
    # same recordings thinned, read the run as creep, dance or jump, where 8-10 a second read
    # it), or a session starved of the CPU for over 2 s of the video (its character stands
    # while it waits, whatever the commands)
    if not ok and rate < 7.0:
        pytest.xfail(f"the estimator made {rate:.1f} frames/s (a loaded machine), too few for the classifier: {said}")
    if not ok and lost_s > 2.0:
        pytest.xfail(f"the session skipped {lost_s:.1f} s of ticks (a CPU-starved machine): {said}")
    assert walk.get("walk", 0) > 0.5, said
    assert run.get("run", 0) > 0.5, said
    assert moved > 2.0, said


@pytest.mark.slow
def test_the_page_camera_on_a_fresh_install_reads_walk_then_run_within_a_minute(tmp_path_factory, monkeypatch):
    """Issue 33: "Use camera" from an empty cache (nothing trained) drives the character
    within a minute of the click. The loader trains the quick classifier (seconds), uses
    it at once and says so in the page, and trains the default one in a background
    process (stopped at the end). The fake camera plays the stand / walk / run video in a
    loop; within 60 s of the click the session must have read walk then run in a pass of
    the video, and the character must have moved 1 m. Prints the time from the click to
    the first command."""
    pytest.importorskip("sklearn")
    pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    from test_viewer_e2e import CHROMIUM_ARGS, chromium_path
    from test_viewer_support import small_database, start_server, viewer_deps_or_skip

    viewer_deps_or_skip()
    from motionmatch.viewer import pose as plugin
    from motionmatch.viewer._bundle import BundleError, ensure_bundle

    try:
        static = ensure_bundle(log=lambda m: None)
    except BundleError as e:
        pytest.skip(f"the page's bundle cannot be built: {e}")
    if not (Path(static) / "pose" / "pose_landmarker_lite.task").is_file():
        pytest.skip("the page's bundle has no pose estimator (rebuild: cd web && npm ci && npm run build)")
    exe = chromium_path()
    if exe is None:
        pytest.skip("Debian's chromium is not installed")
    deadline_s = float(os.environ.get("MOTIONMATCH_CAMERA_DEADLINE_S", "60"))   # (longer: to measure a slow start)
    tmp = tmp_path_factory.mktemp("fresh-camera")
    video, stand_s, walk_s, run_s = camera_video(tmp / "performance.y4m")
    loop_s = stand_s + walk_s + run_s
    monkeypatch.setenv("MOTIONMATCH_CACHE", str(tmp / "cache"))             # a fresh install: nothing cached
    loader = plugin.ClassifierLoader()
    monkeypatch.setattr(plugin, "_loader", loader)
    srv = start_server(small_database(tmp_path_factory.getbasetemp()), {"data": data_root()}, static_dir=static)
    from playwright.sync_api import sync_playwright

    marks: dict[str, float] = {}
    wall_video: list[tuple[float, float]] = []   # (seconds since the click, video seconds)
    shown: list[str] = []
    verdict = None
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                tempfile.mkdtemp(prefix="mm-chromium-"), executable_path=exe, headless=True,
                args=[*CHROMIUM_ARGS, *FAKE_CAMERA, f"--use-file-for-fake-video-capture={video}"],
                viewport={"width": 640, "height": 400})
            page = ctx.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(srv.url)
            page.wait_for_function("() => window.__mm && window.__mm.state.frame && window.__mm.state.welcome",
                                   timeout=30000)
            page.click("summary:has-text('Pose control')")
            page.select_option("#camera-model", "lite")
            p0 = page.evaluate("() => window.__mm.character().root")
            click = time.monotonic()
            page.click("#camera-use")
            first_sent = None
            while True:
                now = time.monotonic() - click
                vt, stats, info = page.evaluate("() => [window.__cameraStats ? window.__cameraStats.videoTime : 0, "
                                                "window.__cameraStats || null, "
                                                "(document.querySelector('#pose-status') || {}).textContent || '']")
                if stats and stats.get("sent", 0) > 0:
                    wall_video.append((now, vt))
                    if first_sent is None:
                        first_sent = next((v for v, found in stats["log"] if found), vt)
                        marks["first keypoints"] = now
                if info and (not shown or shown[-1] != info):
                    shown.append(info)
                sessions = [s for s in list(srv.viewer.sessions.values()) if s.pose_source is not None]
                source = sessions[0].pose_source if sessions else None
                timeline = list(source.timeline) if source is not None else []
                if timeline and "first command" not in marks and any(c for _, c in timeline):
                    marks["first command"] = now
                if first_sent is not None and timeline and "passed" not in marks:
                    verdict = _walk_then_run(timeline, first_sent, stand_s, walk_s, loop_s, wall_video)
                    if verdict is not None:      # when the pass ended, or when the session had read it
                        marks["passed"] = max(verdict[0], now)
                if "passed" in marks and "moved 1 m" not in marks:
                    if math.dist(p0, page.evaluate("() => window.__mm.character().root")) > 1.0:
                        marks["moved 1 m"] = now
                if "moved 1 m" in marks or now > deadline_s + 5.0:
                    break
                time.sleep(0.2)
            moved = math.dist(p0, page.evaluate("() => window.__mm.character().root"))
            page.screenshot(path=str(tmp / "fresh-camera.png"))
            page.evaluate("() => document.querySelector('#pose-status').scrollIntoView({block: 'end'})")
            page.locator("#pose-status").screenshot(path=str(tmp / "fresh-camera-status.png"))
            print(f"fresh camera: screenshot {tmp / 'fresh-camera.png'}")
            ctx.close()
        bg = getattr(loader, "background", None)   # (none before issue 33)
        ready = dict(getattr(loader, "ready_s", {}))
        description = loader.description
    finally:
        srv.stop()                     # stops the background training with the loader
    marks.update({f"{k} classifier ready": v for k, v in ready.items()})
    print("fresh camera: seconds from the click: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(marks.items(),
                                                                                               key=lambda kv: kv[1])))
    print(f"fresh camera: {description}; moved {moved:.1f} m; verdict {verdict}; page said {shown[-3:]}")
    assert not errors, errors
    assert "first command" in marks, (marks, shown[-3:])
    assert "passed" in marks and marks["passed"] <= deadline_s, (marks, verdict, shown[-3:])
    assert marks.get("moved 1 m", math.inf) <= deadline_s, (marks, moved)             # and drove the character
    assert any("quick classifier" in t and "background" in t for t in shown), shown[-5:]   # the page says so
    assert bg is not None and bg.poll() is not None                # the background process is gone


def _walk_then_run(timeline, first_sent, stand_s, walk_s, loop_s, wall_video):
    """The first pass of the looping video in which the session read walk then run (walk
    over half of the walk part, run over half of the run part, after 1.5 s each): ``(wall
    seconds since the click when that pass ended, pass, walk shares, run shares)``, or
    ``None``. The timeline is the session's (camera seconds since its first frame)."""
    tl = [(t + first_sent, c) for t, c in timeline]
    vt_now = wall_video[-1][1]
    k = 0
    while (k + 1) * loop_s <= vt_now:
        base = k * loop_s
        walk = _shares(tl, base + stand_s + 1.5, base + stand_s + walk_s)
        run = _shares(tl, base + stand_s + walk_s + 1.5, base + loop_s)
        if walk.get("walk", 0) > 0.5 and run.get("run", 0) > 0.5:
            walls = np.array([w for w, _ in wall_video])
            vts = np.array([v for _, v in wall_video])
            return float(np.interp(base + loop_s, vts, walls)), k, walk, run
        k += 1
    return None


def _shares(timeline: list[tuple[float, str]], start: float, stop: float) -> dict[str, float]:
    """The share of ``[start, stop)`` seconds spent in each family of commands (``walk``,
    ``run``, ...), from ``timeline`` (the time and command of each change, in order)."""
    out: dict[str, float] = collections.defaultdict(float)
    for i, (t, c) in enumerate(timeline):
        t1 = timeline[i + 1][0] if i + 1 < len(timeline) else stop
        a, b = max(t, start), min(t1, stop)
        if b > a:
            out[(c or "-").split("_")[0]] += (b - a) / (stop - start)
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def test_the_viewer_webcam_source_calibrates_first_then_corrects_frames():
    from motionmatch.viewer.pose import ClassifierLoader, ViewerPoseSource

    class Loading(ClassifierLoader):          # the classifier is still loading: calibration goes on
        def get(self):
            return None

    src = ViewerPoseSource("webcam", loader=Loading())
    back = _training_like()
    back[:, 0] = 640.0 - back[:, 0]
    t, kp = _frames(back, 2.0)
    for ti, k in zip(t, kp):
        src.push(np.c_[k, np.ones(len(k))], ti)
    src._feed(1 / 60)
    assert src.calibration is None and src.calibrator.elapsed == pytest.approx(2.0)
    assert src.status()["state"] == "loading"
    for ti, k in zip(t[:45] + 2.1, kp[:45]):
        src.push(k, ti)
    src._feed(1 / 60)
    assert src.calibration is None and "from behind" in src.calibration_error   # refused, starts again
    t3, kp3 = _frames(_training_like(), 3.2)
    for ti, k in zip(t3 + 3.7, kp3):
        src.push(k, ti)
    src._feed(1 / 60)
    assert src.calibration is not None and np.abs(src.calibration.offset).max() < 0.02
    assert src.status()["calibration"]["frames"] > 80
