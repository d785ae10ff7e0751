// Bundles the viewer's page with esbuild into the Python package (default
// ../src/motionmatch/viewer/static): app.js (src/main.js and three.js), app.css, index.html, and the
// camera's pose estimator: pose-worker.js (src/pose_worker.js and MediaPipe Tasks) with pose/.
// Usage: node build.mjs [--outdir DIR] [--watch] [--dev]
import { build, context } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writePoseTasks } from './pose_task.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
};
const outdir = resolve(opt('--outdir', join(here, '..', 'src', 'motionmatch', 'viewer', 'static')));
const dev = flag('--dev') || flag('--watch');

mkdirSync(outdir, { recursive: true });
const options = {
  entryPoints: { app: join(here, 'src', 'main.js') },
  bundle: true,
  format: 'esm',
  target: ['es2020'],
  outdir,
  minify: !dev,
  sourcemap: dev ? 'inline' : false,
  legalComments: 'linked',
  logLevel: 'info',
  loader: { '.css': 'css' },
};
copyFileSync(join(here, 'index.html'), join(outdir, 'index.html'));
// the camera's pose estimator (src/camera.js): MediaPipe Tasks' WebAssembly runtime and the
// PoseLandmarker model bundles assembled from @mediapipe/pose's models (pose_task.mjs), served
// by the viewer itself
const poseOut = join(outdir, 'pose');
rmSync(poseOut, { recursive: true, force: true });
rmSync(join(outdir, 'mediapipe-pose'), { recursive: true, force: true });   // earlier builds' estimator
mkdirSync(poseOut, { recursive: true });
const wasmSrc = join(here, 'node_modules', '@mediapipe', 'tasks-vision', 'wasm');
for (const f of readdirSync(wasmSrc)) if (/\.(js|wasm)$/.test(f)) copyFileSync(join(wasmSrc, f), join(poseOut, f));
writePoseTasks(join(here, 'node_modules', '@mediapipe', 'pose'), poseOut);
const pkg = (name) => JSON.parse(readFileSync(join(here, 'node_modules', ...name.split('/'), 'package.json'), 'utf8'));
writeFileSync(join(poseOut, 'NOTICE.txt'), ['@mediapipe/tasks-vision', '@mediapipe/pose'].map((n) => {
  const p = pkg(n);
  return `${n} ${p.version} (${p.license}, by Google): ${n === '@mediapipe/pose'
    ? 'the BlazePose models in the .task files (pose_detection.tflite and pose_landmark_*.tflite, '
      + 'with TFLite metadata added by web/pose_task.mjs)'
    : 'the WebAssembly runtime (vision_wasm_*) and the library bundled into pose-worker.js'}`;
}).join('\n') + '\nApache License 2.0: https://www.apache.org/licenses/LICENSE-2.0\n');
// the estimator's worker: a classic script (MediaPipe Tasks loads its runtime with importScripts)
const workerOptions = { ...options, entryPoints: { 'pose-worker': join(here, 'src', 'pose_worker.js') }, format: 'iife' };
if (flag('--watch')) {
  const ctxs = [await context(options), await context(workerOptions)];
  await Promise.all(ctxs.map((c) => c.watch()));
  console.log(`watching; bundle in ${outdir}`);
} else {
  await Promise.all([build(options), build(workerOptions)]);
  console.log(`bundle written to ${outdir}`);
}
