// "Use camera": the webcam drives the selected character, estimated in the page.
//
// The pose estimator is MediaPipe Pose (npm @mediapipe/pose), whose landmark models
// (lite / full / heavy .tflite) and WebAssembly runtime ship inside the package; the build
// copies them to /static/mediapipe-pose/, so the page loads them from the viewer itself and
// no request leaves the machine. Each camera frame's 13 body keypoints (pixels of the raw,
// unmirrored image, y down, with MediaPipe's visibility as the score) go to the session as
// a pose_keypoints message, at camera rate; the server classifies them (after a 3 s
// stand-still calibration) into commands. The preview shows the camera mirrored, as a
// mirror would, with the detected skeleton drawn over it.
//
// Latency shown: camera frame -> keypoints sent (measured here) plus keypoints received ->
// intent computed (the server's intent_ms in pose_status).

const BASE = '/static/mediapipe-pose/';
const MODELS = { lite: 0, full: 1, heavy: 2 };
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

let scriptPromise = null;
function loadEstimator() {
  if (!scriptPromise) {
    scriptPromise = new Promise((resolve, reject) => {
      const s = el('script', { src: BASE + 'pose.js' });
      s.onload = () => (window.Pose ? resolve(window.Pose) : reject(new Error('pose.js defined no Pose')));
      s.onerror = () => reject(new Error('the pose estimator is not in this build (rebuild the page: cd web && npm ci && npm run build)'));
      document.head.append(s);
    });
  }
  return scriptPromise;
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
    this.stats = { frames: 0, detected: 0, sent: 0, pageMs: [], serverMs: null, fps: 0, startedAt: 0 };
    window.__cameraStats = this.stats;   // read by tests and benchmarks
    this.model = el('select', { id: 'camera-model', title: 'pose model (bundled with the page)' },
      el('option', { value: 'lite', text: 'lite' }), el('option', { value: 'full', text: 'full' }),
      el('option', { value: 'heavy', text: 'heavy' }));
    this.model.value = 'full';
    this.model.addEventListener('change', () => this.pose?.setOptions({ modelComplexity: MODELS[this.model.value] }));
    this.button = el('button', { id: 'camera-use', onclick: () => (this.running ? this.stop() : this.start()) }, 'Use camera');
    this.canvas = el('canvas', { id: 'camera-view', width: 320, height: 240, class: 'camera-view', hidden: '' });
    this.info = el('div', { id: 'camera-info', class: 'note' });
    this.video = el('video', { playsinline: '', muted: '', hidden: '' });
    this.element = el('div', { class: 'camera' }, el('div', { class: 'row' }, this.button, this.model), this.canvas, this.info);
  }

  async start() {
    this.button.disabled = true;
    try {
      this.info.textContent = 'asking for the camera…';
      this.stream = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 480 }, audio: false });
      this.video.srcObject = this.stream;
      this.video.muted = true;
      await this.video.play();
      this.info.textContent = 'loading the pose model…';
      const Pose = await loadEstimator();
      this.pose = new Pose({ locateFile: (f) => BASE + f });
      this.pose.setOptions({ modelComplexity: MODELS[this.model.value], smoothLandmarks: true, enableSegmentation: false,
        minDetectionConfidence: 0.5, minTrackingConfidence: 0.5, selfieMode: false });
      this.pose.onResults((r) => this.onResults(r));
      await this.pose.initialize();
      const r = await this.conn.send('pose_source', { kind: 'webcam' });
      if (r.type !== 'ack') throw new Error(r.message || 'the session refused the webcam pose source');
      this.running = true;
      this.stats.startedAt = performance.now();
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
    }
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

  async loop() {
    let lastTime = -1;
    let t0 = performance.now();
    let n = 0;
    while (this.running) {
      const vt = this.video.currentTime;
      if (vt === lastTime || this.video.readyState < 2) {
        await new Promise((res) => requestAnimationFrame(res));
        continue;
      }
      lastTime = vt;
      this.captured = performance.now();
      try {
        await this.pose.send({ image: this.video });
      } catch (e) {
        this.toast(`pose estimator: ${e.message || e}`);
        this.stop();
        return;
      }
      n += 1;
      const now = performance.now();
      if (now - t0 > 1000) { this.stats.fps = (1000 * n) / (now - t0); n = 0; t0 = now; }
    }
  }

  onResults(r) {
    const w = this.video.videoWidth;
    const hgt = this.video.videoHeight;
    this.stats.frames += 1;
    const lms = r.poseLandmarks;
    let kp = null;
    if (lms && lms.length > 28) {
      this.stats.detected += 1;
      kp = INDEX.map((i) => [lms[i].x * w, lms[i].y * hgt, Math.max(0, Math.min(1, lms[i].visibility ?? 1))]);
      const t = (this.captured - this.stats.startedAt) / 1000;
      this.conn.send('pose_keypoints', { keypoints: kp, t: Math.max(0, t) });
      this.stats.sent += 1;
      this.stats.pageMs.push(performance.now() - this.captured);
      if (this.stats.pageMs.length > 300) this.stats.pageMs.shift();
    }
    this.draw(r.image, kp, w, hgt);
    this.showLatency();
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
