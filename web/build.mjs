// Bundles the viewer's page with esbuild into the Python package (default
// ../src/motionmatch/viewer/static): app.js (src/main.js and three.js), app.css and index.html.
// Usage: node build.mjs [--outdir DIR] [--watch] [--dev]
import { build, context } from 'esbuild';
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

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
// the camera's pose estimator (src/camera.js): MediaPipe Pose's script, WebAssembly runtime and
// landmark models, served by the viewer itself
const mpSrc = join(here, 'node_modules', '@mediapipe', 'pose');
const mpOut = join(outdir, 'mediapipe-pose');
mkdirSync(mpOut, { recursive: true });
for (const f of readdirSync(mpSrc)) if (!/\.(md|json|ts)$/.test(f)) copyFileSync(join(mpSrc, f), join(mpOut, f));
if (flag('--watch')) {
  const ctx = await context(options);
  await ctx.watch();
  console.log(`watching; bundle in ${outdir}`);
} else {
  await build(options);
  console.log(`bundle written to ${outdir}`);
}
