// The camera's pose estimator, off the page's main thread (a classic worker: MediaPipe Tasks
// loads its WebAssembly runtime with importScripts), built to /static/pose-worker.js.
//
// Messages in:  {type: 'load', model, base}          -> {type: 'ready', model} | {type: 'load-error', message}
//               {type: 'frame', image, captured, t}  -> {type: 'result', landmarks, captured, estimateMs} | {type: 'error', message}
// `image` is an ImageBitmap (transferred, closed here); `t` the frame's timestamp in ms
// (strictly increasing); `landmarks` the 33 MediaPipe pose landmarks of the body found
// (x, y normalised to the image, visibility), or null.
import { FilesetResolver, PoseLandmarker } from '@mediapipe/tasks-vision';

let fileset = null;
let estimator = null;

async function load(model, base) {
  if (!fileset) fileset = await FilesetResolver.forVisionTasks(base.replace(/\/$/, ''));
  const next = await PoseLandmarker.createFromOptions(fileset, {
    baseOptions: { modelAssetPath: `${base}pose_landmarker_${model}.task`, delegate: 'CPU' },
    runningMode: 'VIDEO', numPoses: 1, outputSegmentationMasks: false,
    minPoseDetectionConfidence: 0.5, minPosePresenceConfidence: 0.5, minTrackingConfidence: 0.5,
  });
  const old = estimator;
  estimator = next;
  old?.close();
}

self.onmessage = async (e) => {
  const m = e.data;
  if (m.type === 'load') {
    try {
      await load(m.model, m.base);
      self.postMessage({ type: 'ready', model: m.model });
    } catch (err) {
      fileset = null;
      self.postMessage({ type: 'load-error', message: String(err && err.message ? err.message : err) });
    }
  } else if (m.type === 'frame') {
    const t0 = performance.now();
    let landmarks = null;
    try {
      const r = estimator.detectForVideo(m.image, m.t);
      const lms = r.landmarks && r.landmarks[0];
      if (lms) landmarks = lms.map((p) => [p.x, p.y, p.visibility ?? 1]);
    } catch (err) {
      self.postMessage({ type: 'error', message: String(err && err.message ? err.message : err) });
      return;
    } finally {
      m.image.close();
    }
    self.postMessage({ type: 'result', landmarks, captured: m.captured, estimateMs: performance.now() - t0 });
  }
};
