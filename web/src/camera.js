// "Use camera": the webcam drives the selected character, estimated in the page.
//
// The pose estimator is MediaPipe Tasks' PoseLandmarker (npm @mediapipe/tasks-vision) on its
// CPU delegate (XNNPACK in WebAssembly): no WebGL, which headless or GPU-less browsers only
// emulate in software. Its WebAssembly runtime and the model bundles (.task, lite / full /
// heavy) are built into /static/pose/ from npm packages (web/pose_task.mjs assembles the
// bundles from the BlazePose models that @mediapipe/pose ships), so the page loads them
// from the viewer itself and no request leaves the machine. Each camera frame's 13 body
// keypoints (pixels of the raw, unmirrored image, y down, with MediaPipe's visibility as
// the score) go to the session as a pose_keypoints message, at camera rate; the server
// classifies them (after a 3 s stand-still calibration) into commands. The preview shows
// the camera mirrored, as a mirror would, with the detected skeleton drawn over it.
//
// Latency shown: camera frame captured -> keypoints sent (measured here, from the video
// frame's capture time) plus keypoints received -> intent computed (the server's intent_ms
// in pose_status).

const BASE = '/static/pose/';
// MediaPipe Pose landmark of each of the server's 13 keypoints (COCO order without eyes/ears).
const INDEX = [0, 11, 12, 13, 14, 15, 16, 23, 24, 25, 26, 27, 28];
const BONES = [[1, 2], [1, 3], [3, 5], [2, 4], [4, 6], [1, 7], [2, 8], [7, 8], [7, 9], [9, 11], [8, 10], [10, 12]];

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

/** The pose estimator in its worker (src/pose_worker.js): one frame at a time. */
class Estimator {
  constructor() {
    this.worker = new Worker('/static/pose-worker.js');
    this.loading = null;          // {resolve, reject} of the model being loaded
    this.busy = false;            // a frame is being estimated
    this.onResult = null;         // (result message) => void
    this.onError = null;          // (Error) => void
    this.worker.onmessage = (e) => {
      const m = e.data;
      if (m.type === 'result' || m.type === 'error') this.busy = false;
      if (m.type === 'result') this.onResult?.(m);
      else if (m.type === 'error') this.onError?.(new Error(m.message));
      else if (m.type === 'ready') this.loading?.resolve(m.model);
      else if (m.type === 'load-error') this.loading?.reject(new Error(m.message));
    };
    this.worker.onerror = (e) => {
      const err = new Error(e.message || 'the pose estimator\'s worker failed');
      if (this.loading) this.loading.reject(err); else this.onError?.(err);
    };
  }

  /** Loads `model` ('lite', 'full' or 'heavy'); the previous one is used until then. */
  async load(model) {
    try {
      await new Promise((resolve, reject) => {
        this.loading = { resolve, reject };
        this.worker.postMessage({ type: 'load', model, base: BASE });
      });
    } catch (e) {
      throw new Error(`the pose estimator could not start (${e.message}); if its files are missing, rebuild `
        + 'the page: cd web && npm ci && npm run build');
    } finally {
      this.loading = null;
    }
  }

  /** Estimates one frame (an ImageBitmap, transferred); the result comes to onResult. */
  send(image, captured, t) {
    this.busy = true;
    this.worker.postMessage({ type: 'frame', image, captured, t }, [image]);
  }
}

function median(a) {
  if (!a.length) return NaN;
  const s = [...a].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)];
}

export class CameraControl {
  /** conn: the session's Connection; toast(text): a message for the user. */
  constructor(conn, toast) {
    this.conn = conn;
    this.toast = toast;
    this.running = false;
    this.starting = false;
    this.estimator = null;
    // frames: estimated; detected: with a body; pageMs: capture -> keypoints sent (ms);
    // estimateMs: the estimator's own time per frame; fps: frames estimated per second
    this.stats = { frames: 0, detected: 0, sent: 0, pageMs: [], estimateMs: [], serverMs: null, fps: 0, startedAt: 0,
      model: '', videoTime: 0, log: [] };
    window.__cameraStats = this.stats;   // read by tests and benchmarks
    this.model = el('select', { id: 'camera-model', title: 'pose model (bundled with the page)' },
      el('option', { value: 'lite', text: 'lite' }), el('option', { value: 'full', text: 'full' }),
      el('option', { value: 'heavy', text: 'heavy' }));
    this.model.value = 'lite';
    this.model.addEventListener('change', () => this.running && this.switchModel()
      .catch((e) => this.toast(`camera: ${e.message || e}`)));
    this.button = el('button', { id: 'camera-use', onclick: () => (this.running ? this.stop() : this.start()) }, 'Use camera');
    this.canvas = el('canvas', { id: 'camera-view', width: 320, height: 240, class: 'camera-view', hidden: '' });
    this.info = el('div', { id: 'camera-info', class: 'note' });
    this.video = el('video', { playsinline: '', muted: '', hidden: '' });
    this.element = el('div', { class: 'camera' }, el('div', { class: 'row' }, this.button, this.model), this.canvas, this.info);
  }

  /** The camera is starting or running (the page then spares the CPU: see main.js). */
  get active() { return this.running || this.starting; }

  /** Whether a frame was estimated since the last call. */
  takeNewFrame() {
    const fresh = this.freshFrame;
    this.freshFrame = false;
    return fresh;
  }

  async start() {
    this.button.disabled = true;
    this.starting = true;
    try {
      // the model first: calibration starts with the camera's first frames
      this.info.textContent = 'loading the pose model…';
      if (!this.estimator || this.stats.model !== this.model.value) await this.switchModel();
      this.info.textContent = 'asking for the camera…';
      this.stream = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 480 }, audio: false });
      this.video.srcObject = this.stream;
      this.video.muted = true;
      await this.video.play();
      const r = await this.conn.send('pose_source', { kind: 'webcam' });
      if (r.type !== 'ack') throw new Error(r.message || 'the session refused the webcam pose source');
      this.running = true;
      this.stats.startedAt = performance.now() - 1000;   // frames' times (s) are positive, as the session needs
      this.button.textContent = 'Stop camera';
      this.canvas.hidden = false;
      this.info.textContent = 'stand still, facing the camera, for 3 s (calibration)…';
      this.loop();
    } catch (e) {
      this.toast(`camera: ${e.message || e}`);
      this.info.textContent = `camera: ${e.message || e}`;
      this.stopTracks();
    } finally {
      this.button.disabled = false;
      this.starting = false;
    }
  }

  /** Loads the chosen model (the previous one estimates until the new one is ready). */
  async switchModel() {
    if (!this.estimator) {
      this.estimator = new Estimator();
      this.estimator.onResult = (m) => this.onResult(m);
      this.estimator.onError = (e) => { this.toast(`pose estimator: ${e.message}`); if (this.running) this.stop(); };
    }
    const model = this.model.value;
    await this.estimator.load(model);
    this.stats.model = model;
  }

  stopTracks() {
    for (const t of this.stream?.getTracks() || []) t.stop();
    this.stream = null;
  }

  stop() {
    this.running = false;
    this.stopTracks();
    this.button.textContent = 'Use camera';
    this.canvas.hidden = true;
    this.conn.send('pose_source', { kind: 'off' });
  }

  /** Each new camera frame goes to the estimator when it is free (frames that come while it
   * works are skipped): requestVideoFrameCallback where the browser has it. */
  loop() {
    const v = this.video;
    let lastTime = -1;
    this.lastTimestamp = 0;
    this.lastCaptured = -Infinity;
    this.rateStart = performance.now();
    this.rateFrames = 0;
    const frame = async (now, meta) => {
      if (!this.running) return;
      if (!this.estimator.busy && v.readyState >= 2 && v.currentTime !== lastTime) {
        lastTime = v.currentTime;
        // the frame's capture time where the camera gives one, else when the page learnt of it
        // (never earlier than the previous frame's: the session drops frames whose time goes back)
        const hasCapture = meta && meta.captureTime > 0;
        const captured = Math.max(hasCapture ? meta.captureTime : performance.now(), this.lastCaptured + 0.5);
        this.lastCaptured = captured;
        this.stats.clock = hasCapture ? 'capture' : 'callback';
        const videoTime = v.currentTime;
        this.estimator.busy = true;
        try {
          const image = await createImageBitmap(v);
          const t = Math.max(performance.now(), this.lastTimestamp + 1);   // strictly increasing (VIDEO mode)
          this.lastTimestamp = t;
          this.frameInfo = { videoTime, w: v.videoWidth, h: v.videoHeight };
          this.estimator.send(image, captured, t);
        } catch (e) {
          this.estimator.busy = false;
        }
      }
      next();
    };
    const next = () => (v.requestVideoFrameCallback ? v.requestVideoFrameCallback(frame)
      : requestAnimationFrame((t) => frame(t, null)));
    next();
  }

  /** The estimator's answer for one frame: keypoints to the session, preview, figures. */
  onResult(m) {
    if (!this.running) return;
    const { videoTime, w, h: hgt } = this.frameInfo;
    const s = this.stats;
    s.frames += 1;
    s.videoTime = videoTime;                      // seconds of the camera's stream (tests)
    s.estimateMs.push(m.estimateMs);
    if (s.estimateMs.length > 300) s.estimateMs.shift();
    this.rateFrames += 1;
    const now = performance.now();
    if (now - this.rateStart > 1000) { s.fps = (1000 * this.rateFrames) / (now - this.rateStart); this.rateFrames = 0; this.rateStart = now; }
    const lms = m.landmarks;
    let kp = null;
    s.log.push([Math.round(videoTime * 100) / 100, lms ? 1 : 0]);    // (stream seconds, body found)
    if (s.log.length > 2000) s.log.shift();
    if (lms && lms.length > 28) {
      s.detected += 1;
      kp = INDEX.map((i) => [lms[i][0] * w, lms[i][1] * hgt, Math.max(0, Math.min(1, lms[i][2]))]);
      this.conn.send('pose_keypoints', { keypoints: kp, t: Math.max(0, (m.captured - s.startedAt) / 1000) });
      s.sent += 1;
      s.pageMs.push(performance.now() - m.captured);
      if (s.pageMs.length > 300) s.pageMs.shift();
    }
    this.draw(this.video, kp, w, hgt);
    this.showLatency();
    this.freshFrame = true;
  }

  draw(image, kp, w, hgt) {
    const c = this.canvas;
    const g = c.getContext('2d');
    const sx = c.width / w;
    const sy = c.height / hgt;
    g.save();
    g.translate(c.width, 0);
    g.scale(-1, 1);   // mirrored, as the user expects to see themselves
    g.drawImage(image, 0, 0, c.width, c.height);
    if (kp) {
      g.lineWidth = 3;
      g.strokeStyle = '#ffb020';
      for (const [a, b] of BONES) {
        if (kp[a][2] < 0.2 || kp[b][2] < 0.2) continue;
        g.beginPath();
        g.moveTo(kp[a][0] * sx, kp[a][1] * sy);
        g.lineTo(kp[b][0] * sx, kp[b][1] * sy);
        g.stroke();
      }
      g.fillStyle = '#ff4060';
      for (const p of kp) if (p[2] >= 0.2) g.fillRect(p[0] * sx - 2, p[1] * sy - 2, 5, 5);
    }
    g.restore();
  }

  showLatency() {
    const page = median(this.stats.pageMs.slice(-60));
    const server = this.stats.serverMs;
    const seen = this.stats.frames ? Math.round((100 * this.stats.detected) / this.stats.frames) : 0;
    const parts = [`${this.stats.fps.toFixed(1)} frames/s`, `body in ${seen}%`];
    if (Number.isFinite(page)) {
      parts.push(server != null ? `latency ${Math.round(page + server)} ms (estimator ${Math.round(page)} + server ${Math.round(server)})`
        : `estimator ${Math.round(page)} ms`);
    }
    this.info.textContent = parts.join(' · ');
  }

  /** The session's pose_status (command and probabilities are shown by the pose panel). */
  onStatus(p) {
    if (p && p.intent_ms != null) this.stats.serverMs = p.intent_ms;
    if (p && p.state === 'calibrating' && this.running) this.info.textContent = p.message || 'calibrating…';
    if (p && p.state === 'error' && p.message && this.running) this.info.textContent = p.message;
  }
}
