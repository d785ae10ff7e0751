// motionmatch viewer: the page. Connects to the session websocket, draws what the server
// simulates, and turns the user's input into commands (see motionmatch/viewer/messages.py).
import './style.css';
import { Connection } from './net.js';
import { View } from './view.js';
import { characterColor } from './body.js';
import { Gamepad, Keyboard, Pointer, returnFocusAfterPointer } from './input.js';
import { VideoRecorder } from './recorder.js';
import { CameraControl } from './camera.js';
import { FilePicker, fillGrouped, groupFiles } from './picker.js';
import { FLAG_PAUSED, FLAG_HISTORY, FLAG_PARTIAL } from './protocol.js';
import { RigPanel } from './rig.js';

// ------------------------------------------------------------------ tiny DOM helpers
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c != null) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}
const $ = (id) => document.getElementById(id);
function num(label, attrs) { const i = h('input', { type: 'number', ...attrs }); return [h('label', {}, label, i), i]; }
function section(title, open, ...body) {
  return h('details', { open, class: 'section', 'data-section': title.toLowerCase() }, h('summary', { text: title }), ...body);
}

// ------------------------------------------------------------------ state
const state = {
  welcome: null, characters: [], selected: null, skeletons: {}, capabilities: {},
  paused: false, history: 0, back: 0, tick: 0, time: 0, frame: null,
  obstacles: [], debug: null, stats: null, files: {}, pathInfo: {}, lastError: null, genmm: null,
  pose: null, scenario: null, arrived: [], terrain: null,
};

const view = new View($('view'), $('labels'), { onError: (msg) => toast(msg, 6000) });
const wsUrl = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`;
const conn = new Connection(wsUrl);
const recorder = new VideoRecorder(view.canvas);

function toast(text, ms = 3500) {
  const el = $('toast');
  el.textContent = text;
  el.classList.add('show');
  clearTimeout(toast.t);
  toast.t = setTimeout(() => el.classList.remove('show'), ms);
}

function download(url, filename) {
  const a = h('a', { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
}

// ------------------------------------------------------------------ tools
let tool = 'orbit';
const toolButtons = {};
const TOOLS = [
  ['orbit', 'Orbit', 'drag: orbit, right-drag: pan, wheel: zoom'],
  ['path', 'Draw path', 'drag on the ground: the selected character follows, at the speed you draw'],
  ['obstacle', 'Obstacles', 'click the ground: place; drag one: move; Delete: remove'],
  ['add', 'Add character', 'click the ground to add a character'],
];
function setTool(t) {
  tool = t;
  const open = { obstacle: 'obstacles & scenes', path: 'path', add: 'characters' }[t];
  if (open) document.querySelector(`details[data-section="${open}"]`)?.setAttribute('open', '');
  for (const [k, b] of Object.entries(toolButtons)) b.classList.toggle('active', k === t);
  view.canvas.dataset.tool = t;
}
const toolsEl = $('tools');
for (const [key, label, title] of TOOLS) {
  toolButtons[key] = h('button', { class: 'tool', title, 'data-tool': key, onclick: () => setTool(key) }, label);
  toolsEl.append(toolButtons[key]);
}
const followBox = h('input', { type: 'checkbox', checked: true, onchange: (e) => { view.follow = e.target.checked; } });
toolsEl.append(h('label', { class: 'follow', title: 'camera follows the selected character' }, followBox, 'follow'));
setTool('orbit');

// ------------------------------------------------------------------ panels
const panel = $('panel');

// characters
const charList = h('div', { class: 'list', id: 'char-list' });
const sliders = {};
const controlsBox = h('div', { class: 'controls' });
for (const name of ['responsiveness', 'continuity', 'evasion', 'anticipation']) {
  const out = h('span', { class: 'value', text: '1.00' });
  const input = h('input', {
    type: 'range', min: 0, max: 2, step: 0.05, value: 1, 'data-control': name,
    oninput: (e) => { out.textContent = Number(e.target.value).toFixed(2); },
    onchange: (e) => conn.send('controls', { [name]: Number(e.target.value) }).then(replyToast),
  });
  sliders[name] = { input, out };
  controlsBox.append(h('label', { class: 'slider' }, h('span', { text: name[0].toUpperCase() + name.slice(1) }), input, out));
}
const envNote = h('div', { class: 'note' });
const exportFormat = h('select', { id: 'export-format', title: 'BVH: skeleton and motion; glTF (.glb): with the skinned body, for Blender, Unity, Unreal' },
  h('option', { value: 'bvh' }, 'BVH'), h('option', { value: 'glb' }, 'glTF (.glb)'));
const [gCountL, gCount] = num('count', { value: 10, min: 1, max: 100 });
const [gSpaceL, gSpace] = num('spacing m', { value: 1.2, min: 0.5, max: 10, step: 0.1 });
const [gDxL, gDx] = num('target dx', { value: 0, step: 0.5 });
const [gDzL, gDz] = num('target dz', { value: 10, step: 0.5 });
const [gSpL, gSp] = num('speed', { value: 1.3, min: 0.3, max: 6, step: 0.1 });
const gVia = h('input', { type: 'text', id: 'group-via', placeholder: 'e.g. 0 5; 4 8 (dx dz; …)', title: 'a target path: offsets walked through before the target, each member from its own place' });
const crowdNote = h('div', { class: 'note', id: 'crowd-note' });
function parseVia(text) {
  const out = [];
  for (const part of text.split(/[;|]/)) {
    const v = part.trim().split(/[\s,]+/).filter(Boolean).map(Number);
    if (!v.length) continue;
    if (v.length !== 2 || v.some((x) => !Number.isFinite(x))) throw new Error(`waypoint "${part.trim()}" is not "dx dz"`);
    out.push(v);
  }
  return out;
}
const rigPanel = new RigPanel({ h, toast, conn });
panel.append(section('Characters', true,
  charList, rigPanel.el,
  h('div', { class: 'row' },
    h('button', { onclick: () => setTool('add'), title: 'then click the ground' }, 'Add…'),
    h('button', { onclick: () => state.selected != null && conn.send('remove_character', { id: state.selected }).then(replyToast) }, 'Remove'),
    exportFormat, h('button', { id: 'export', title: 'the selected character\'s motion this session', onclick: exportMotion }, 'Export')),
  h('div', { class: 'sub' }, 'High-level controls (selected)'), controlsBox, envNote,
  h('div', { class: 'sub' }, 'Spawn a group at the view centre'),
  h('div', { class: 'grid' }, gCountL, gSpaceL, gDxL, gDzL, gSpL),
  h('label', {}, 'via ', gVia),
  h('button', {
    id: 'spawn-group',
    onclick: () => {
      const t = view.controls.target;
      let via;
      try { via = parseVia(gVia.value); } catch (err) { toast(err.message); return; }
      conn.send('spawn_group', {
        count: Number(gCount.value), spacing: Number(gSpace.value), center: [t.x, t.z],
        target: [Number(gDx.value), Number(gDz.value)], speed: Number(gSp.value), via: via.length ? via : null,
      }).then((r) => replyToast(r, r.type === 'ack' ? `${r.ids.length} agents walking to their goals` : ''));
    },
  }, 'Spawn group'), crowdNote));

// path
const pathMode = h('select', { id: 'path-mode', title: 'local: the path moves to the character; global: it walks to where the path was drawn first; drawn: straight to the drawing\'s nearest point, then along it at a constant speed (Shift: run)' },
  h('option', { value: 'local' }, 'local: path moves to the character'),
  h('option', { value: 'global' }, 'global: walk to where it was drawn'),
  h('option', { value: 'drawn' }, 'drawn: along it from its nearest point'));
const pathLoop = h('input', { type: 'checkbox', id: 'path-loop', title: 'drawn mode: go round again (a closed drawing always does)' });
const [pathScaleL, pathScale] = num('drawing time ÷', { value: 1, min: 0.05, max: 20, step: 0.05, title: '1: the character walks at your drawing speed; 0.2: five times slower' });
const pathFacing = h('select', { id: 'path-facing', title: 'where the character faces along a local or global path: along it (tangent), turned by a joystick angle, or as DirectionNet predicts the people of the data would (trained once on this machine: motionmatch follow --facing net)' },
  h('option', { value: 'tangent' }, 'tangent: along the path'),
  h('option', { value: 'joystick' }, 'joystick: turned by an angle'),
  h('option', { value: 'net' }, 'network: DirectionNet'));
const [pathJoyL, pathJoy] = num('joystick °', { value: 30, min: -180, max: 180, step: 5, title: 'joystick facing: degrees to the right of the path (negative: left)' });
const pathInfoEl = h('div', { class: 'note', id: 'path-info', text: 'Choose "Draw path", then drag on the ground.' });
panel.append(section('Path', true,
  h('label', {}, 'mode ', pathMode), pathScaleL, h('label', {}, pathLoop, ' loop (drawn)'),
  h('label', {}, 'facing ', pathFacing), pathJoyL,
  h('div', { class: 'row' },
    h('button', { onclick: () => setTool('path') }, 'Draw path'),
    h('button', { onclick: () => conn.send('path_cancel', {}).then(replyToast) }, 'Cancel path')),
  pathInfoEl));

// debug
const debugBox = h('input', {
  type: 'checkbox', id: 'debug-toggle',
  onchange: (e) => {
    conn.send('debug', { enabled: e.target.checked, candidates: Number(candK.value) });
    if (e.target.checked) e.target.closest('details').scrollIntoView({ block: 'start', behavior: 'smooth' });
    else { state.debug = null; view.setDebug(null); renderDebug(); }
  },
});
const [candKL, candK] = num('candidates', { value: 5, min: 0, max: 16 });
const stickBox = h('input', { type: 'checkbox', id: 'stick-toggle', onchange: (e) => view.setStick(e.target.checked) });
candK.addEventListener('change', () => debugBox.checked && conn.send('debug', { enabled: true, candidates: Number(candK.value) }));
const debugEl = h('div', { id: 'debug', class: 'debug' });
panel.append(section('Debug', true,
  h('div', { class: 'row' }, h('label', {}, debugBox, 'overlays and costs'), candKL),
  h('div', { class: 'row' }, h('label', { title: 'draw the characters as stick figures (joints and bones) instead of skinned bodies' }, stickBox, 'stick figures')),
  h('div', { class: 'legend' }, h('span', { class: 'sw desired' }), 'desired future', h('span', { class: 'sw matched' }), 'matched future'),
  debugEl));

// obstacles & scenes
const obShape = h('select', { id: 'ob-shape' }, h('option', { value: 'disk' }, 'disk'), h('option', { value: 'box' }, 'box'));
const [obRL, obR] = num('radius', { id: 'ob-radius', value: 0.5, min: 0.05, max: 50, step: 0.05 });
const [obAlongL, obAlong] = num('length', { value: 1, min: 0.05, max: 100, step: 0.1 });
const [obAcrossL, obAcross] = num('width', { value: 1, min: 0.05, max: 100, step: 0.1 });
const [obHL, obH] = num('height', { id: 'ob-height', value: 1.0, min: 0.02, max: 20, step: 0.1 });
const [obYawL, obYaw] = num('yaw °', { value: 0, step: 5 });
const [obVxL, obVx] = num('vel x', { value: 0, step: 0.1 });
const [obVzL, obVz] = num('vel z', { value: 0, step: 0.1 });
const obSel = h('div', { class: 'note', id: 'ob-selected', text: 'no obstacle selected' });
function obstacleTemplate() {
  const o = { shape: obShape.value, height: [0, Number(obH.value)] };
  if (o.shape === 'disk') o.radius = Number(obR.value);
  else { o.size = [Number(obAlong.value), Number(obAcross.value)]; }
  if (Number(obYaw.value)) o.yaw_deg = Number(obYaw.value);
  if (Number(obVx.value) || Number(obVz.value)) o.velocity = [Number(obVx.value), Number(obVz.value)];
  return o;
}
function applyToSelected() {
  const id = view.obstacleSel;
  if (id == null) { toast('select an obstacle first (Obstacles tool, click one)'); return; }
  const cur = state.obstacles.find((o) => o.id === id);
  const m = view.obstacles.get(id);
  const center = m ? [m.position.x, m.position.z] : cur.center;
  conn.send('obstacle_update', { id, obstacle: { ...obstacleTemplate(), center } }).then(replyToast);
}
function onObstacleSelect(id) {
  view.selectObstacle(id);
  const o = state.obstacles.find((x) => x.id === id);
  obSel.textContent = o ? `obstacle ${id}: ${o.shape}` : 'no obstacle selected';
  if (o) {
    obShape.value = o.shape === 'box' ? 'box' : 'disk';
    if (o.radius) obR.value = o.radius;
    if (o.size) { obAlong.value = o.size[0]; obAcross.value = o.size[1]; }
    if (o.height) obH.value = o.height[1] - o.height[0];
    obYaw.value = o.yaw_deg || 0;
    obVx.value = (o.velocity || [0, 0])[0];
    obVz.value = (o.velocity || [0, 0])[1];
  }
}
const sceneFile = h('input', {
  type: 'file', accept: '.json,application/json', class: 'hidden',
  onchange: async (e) => {
    const f = e.target.files[0];
    e.target.value = '';
    if (!f) return;
    try {
      const scene = JSON.parse(await f.text());
      const obstacles = scene.obstacles || [];
      const r = await conn.send('scene_set', { scene: { obstacles } });
      replyToast(r, `loaded ${obstacles.length} obstacles`);
      // a saved scene carries its ground; a scene without one keeps the ground as it is
      if (r.type === 'ack' && scene.terrain !== undefined) replyToast(await conn.send('terrain_set', { terrain: scene.terrain }), '');
    } catch (err) { toast(`not a scene file: ${err.message}`); }
  },
});
// A terrain file: a scenario's "terrain" object with its heights inline (or a scenario file
// holding one), sent as it is; the server checks it as it checks a scenario's.
const terrainFile = h('input', {
  type: 'file', accept: '.json,application/json', class: 'hidden', id: 'terrain-file',
  onchange: async (e) => {
    const f = e.target.files[0];
    e.target.value = '';
    if (!f) return;
    let terrain;
    try {
      const doc = JSON.parse(await f.text());
      terrain = doc && doc.terrain ? doc.terrain : doc;
    } catch (err) { toast(`not a terrain file: ${err.message}`); return; }
    const r = await conn.send('terrain_set', { terrain });
    replyToast(r, r.type === 'ack' ? `terrain: ${r.terrain}${r.rows ? ` (${r.rows} x ${r.cols} heights)` : ''}` : '');
  },
});
const terrainNote = h('div', { class: 'note', id: 'terrain-note' });
function renderTerrainNote() {
  const t = state.terrain;
  const span = (a) => a.reduce(([lo, hi], v) => [Math.min(lo, v), Math.max(hi, v)], [Infinity, -Infinity]);
  const [lo, hi] = t && t.kind === 'height_field' ? span(t.heights) : [0, 0];
  terrainNote.textContent = !t ? 'Ground: flat (y = 0).'
    : t.kind === 'height_field' ? `Ground: height field, ${t.rows} x ${t.cols} heights every ${t.cell[0].toFixed(2)} m, `
      + `${lo.toFixed(2)} to ${hi.toFixed(2)} m; the characters walk on it.`
      : `Ground: mesh of ${t.triangles.length / 3} triangles; the characters walk on it.`;
}
const scenarioSel = h('select', { id: 'scenario-select' }, h('option', { value: '' }, '(scenario files)'));
const scenarioNote = h('div', { class: 'note', id: 'scenario-note' });
const sceneSection = section('Obstacles & scenes', false,
  h('div', { class: 'grid' }, h('label', {}, 'shape ', obShape), obRL, obAlongL, obAcrossL, obHL, obYawL, obVxL, obVzL),
  h('div', { class: 'row' },
    h('button', { onclick: () => setTool('obstacle') }, 'Place…'),
    h('button', { onclick: applyToSelected }, 'Apply to selected'),
    h('button', { onclick: () => { if (view.obstacleSel != null) { conn.send('obstacle_remove', { id: view.obstacleSel }); onObstacleSelect(null); } } }, 'Delete')),
  obSel,
  h('div', { class: 'row' },
    h('button', { onclick: () => conn.send('scene_save', {}) }, 'Save scene'),
    h('button', { onclick: () => sceneFile.click() }, 'Load scene'),
    h('button', { onclick: () => conn.send('scene_clear', {}) }, 'Clear')),
  sceneFile,
  h('div', { class: 'row' },
    h('button', { id: 'terrain-load', onclick: () => terrainFile.click() }, 'Load terrain'),
    h('button', { id: 'terrain-flat', onclick: () => conn.send('terrain_set', { terrain: null }).then((r) => replyToast(r, 'flat ground')) }, 'Flat ground')),
  terrainFile, terrainNote,
  h('div', { class: 'sub' }, 'Scenarios (from the data folders)'),
  h('div', { class: 'row' }, scenarioSel,
    h('button', {
      id: 'scenario-load',
      onclick: () => {
        if (!scenarioSel.value) { toast('choose a scenario file'); return; }
        conn.send('scenario_load', { file: scenarioSel.value }).then((r) => {
          if (r.type === 'ack') { state.scenario = { file: scenarioSel.value, ...r }; renderScenarioNote(); }
          replyToast(r, r.type === 'ack' ? `${r.name || 'scenario'}: ${r.agents} agents, ${r.obstacles} obstacles — press Play` : '');
        });
      },
    }, 'Load'),
    h('button', { id: 'scenario-play', onclick: () => conn.send('pause', { paused: false }) }, 'Play')),
  scenarioNote);
panel.append(sceneSection);

// the loaded scenario: size, length, what it shows, and the fields the viewer cannot apply
function renderScenarioNote() {
  const sc = state.scenario;
  scenarioNote.textContent = '';
  if (!sc) return;
  const when = sc.ended ? `its ${sc.duration} s are over (paused; Play goes on, Load starts it again)` : `${sc.duration} s (loaded paused: press Play; it pauses at its end)`;
  scenarioNote.append(h('div', { text: `${sc.name || sc.file}: ${sc.agents} agents, ${sc.obstacles} obstacles, ${when}` }));
  if (sc.description) scenarioNote.append(h('div', { text: sc.description }));
  if (sc.expect) scenarioNote.append(h('div', { text: `expected: ${sc.expect}` }));
  for (const n of sc.notes || []) scenarioNote.append(h('div', { class: 'note warn', text: `not applied here: ${n}` }));
}
sceneSection.addEventListener('toggle', () => { if (sceneSection.open) conn.send('files', { kind: 'scenario' }); });

// GenMM
const GENMM_EXAMPLES = 8; // messages.py: Limits.examples
const gmPicker = new FilePicker({ id: 'genmm', label: 'example clips', max: GENMM_EXAMPLES, onLimit: (t) => toast(t) });
const [gmSecL, gmSec] = num('seconds', { value: 8, min: 1, max: 120, step: 1 });
const [gmSeedL, gmSeed] = num('seed', { value: 0, min: 0, step: 1 });
const [gmVarL, gmVar] = num('variants', { value: 3, min: 1, max: 8, step: 1 });
const gmLoop = h('input', { type: 'checkbox' });
const gmKeys = h('select', { id: 'genmm-keys' }, h('option', { value: '' }, '(no keyframes)'));
const gmStatus = h('div', { class: 'note', id: 'genmm-status' });
/** The GenMM lists from the data folders' BVH files: the examples, and the keyframe files. */
function fillExamples() {
  const files = state.files.bvh || [];
  gmPicker.setFiles(files);
  const keep = gmKeys.value;
  fillGrouped(gmKeys, groupFiles(files.filter((f) => /key/i.test(f.id)), []), (id) => id === keep);
  gmKeys.prepend(h('option', { value: '', selected: !keep }, '(no keyframes)'));
}
panel.append(section('GenMM', false,
  gmPicker.element,
  h('div', { class: 'grid' }, gmSecL, gmSeedL, gmVarL, h('label', {}, gmLoop, 'loop')),
  h('label', {}, 'keyframes ', gmKeys),
  h('div', { class: 'row' },
    h('button', {
      id: 'genmm-run',
      onclick: () => {
        const examples = gmPicker.values();
        if (!examples.length) { toast('choose one or more example clips (same skeleton)'); return; }
        conn.send('genmm', {
          examples, seconds: Number(gmSec.value), seed: Number(gmSeed.value), loop: gmLoop.checked,
          keyframes: gmKeys.value || null, variants: Number(gmVar.value),
        }).then((r) => replyToast(r));
      },
    }, 'Synthesize'),
    h('button', { onclick: () => conn.send('genmm_clear', {}) }, 'Remove variants')),
  gmStatus));

// pose
const poseKind = h('select', { id: 'pose-kind' }, h('option', { value: 'off' }, 'off'), h('option', { value: 'webcam' }, 'webcam'), h('option', { value: 'file' }, 'recorded keypoints'));
const poseFile = h('select', { id: 'pose-file' }, h('option', { value: '' }, '(keypoint files)'));
const poseNote = h('div', { class: 'note' });
const poseStatusEl = h('div', { class: 'pose-status', id: 'pose-status' });
const WEBCAM_NOTE = 'Webcam: press "Use camera" below (the pose estimator runs in this page, nothing is downloaded), '
  + 'or send 13 COCO keypoints per frame as pose_keypoints messages from another estimator.';
poseKind.addEventListener('change', () => { poseNote.textContent = poseKind.value === 'webcam' ? WEBCAM_NOTE : ''; });
const poseSection = section('Pose control', false,
  h('div', { class: 'row' }, poseKind, poseFile,
    h('button', {
      id: 'pose-use',
      onclick: () => {
        if (poseKind.value === 'file' && !poseFile.value) { toast('choose a keypoint file'); return; }
        conn.send('pose_source', { kind: poseKind.value, file: poseKind.value === 'file' ? poseFile.value : null }).then((r) => replyToast(r, r.type === 'ack' && r.state === 'on' ? 'pose commands drive the selected character' : ''));
      },
    }, 'Use')),
  poseNote, poseStatusEl);
const camera = new CameraControl(conn, toast);
poseSection.append(camera.element);
panel.append(poseSection);
// the lists are read again whenever a panel opens (files may have been added meanwhile)
poseSection.addEventListener('toggle', () => { if (poseSection.open && state.capabilities.pose) conn.send('files', { kind: 'keypoints' }); });

// record
const recBtn = h('button', { id: 'video-btn', onclick: toggleVideo }, 'Record video');
panel.append(section('Record', false,
  h('div', { class: 'row' }, h('button', { onclick: exportMotion }, 'Export motion (selected)'), recBtn),
  h('div', { class: 'note', text: 'Motion: the selected character\'s motion this session (last minutes), as BVH or glTF (.glb, with its body) as chosen beside Export. Video: the view, as WebM.' })));

// help
const KEY_HELP = [['W A S D', 'move (relative to the camera)'], ['Shift', 'sprint'], ['↑ ↓', 'target speed'],
  ['J / Space', 'jump', 'jump'], ['P', 'dance', 'dance'], ['C', 'creep', 'creep'], ['F', 'punch', 'punch'], ['Delete', 'remove the selected obstacle']];
const keysEl = h('div', { class: 'keys' });
panel.append(section('Keys', false, keysEl, h('div', {
  class: 'note',
  text: 'The keys drive the selected character unless you are typing in a text field. A slider or button reached '
    + 'with Tab keeps its own keys (a slider its arrows, a button or checkbox Space); one used with the mouse hands '
    + 'the keyboard back to the view.',
})));

/** The Keys panel: each key, and for a mode key whether the database can play the mode (and why not). */
function renderKeys() {
  const modes = state.welcome?.modes || {};
  keysEl.textContent = '';
  for (const [k, d, mode] of KEY_HELP) {
    const m = mode && modes[mode];
    const off = m && !m.available;
    keysEl.append(h('div', { class: off ? 'unavailable' : null, 'data-mode': mode || null, title: off ? m.reason : null },
      h('kbd', { text: k }), ' ', d, off ? ` — unavailable: ${m.reason}` : ''));
  }
}
renderKeys();

// the selected character's mode as played (from the pose frames), and a mode asked for that
// the database cannot play (a mode_unavailable reply), for a few seconds
const modeEl = $('mode');
const modeNote = { text: '', until: 0 };
function renderMode(now) {
  const c = state.frame?.characters.find((x) => x.id === state.selected);
  const note = now < modeNote.until ? modeNote.text : '';
  const text = (c ? `mode: ${c.mode}` : '') + (note ? ` · ${note}` : '');
  if (modeEl.textContent !== text) modeEl.textContent = text;
  modeEl.classList.toggle('warn', Boolean(note));
}
renderMode.at = -Infinity;

// timeline
const playBtn = h('button', { id: 'play', onclick: () => conn.send('pause', { paused: !state.paused }) }, 'Pause');
const stepBtn = h('button', { id: 'step', onclick: () => conn.send('step', { frames: 1 }).then(replyToast) }, 'Step');
const step10Btn = h('button', { onclick: () => conn.send('step', { frames: 10 }).then(replyToast) }, '+10');
const scrub = h('input', {
  type: 'range', id: 'scrub', min: 0, max: 0, value: 0, step: 1,
  oninput: (e) => { if (state.paused) conn.post('scrub', { back: Number(scrub.max) - Number(e.target.value) }); },
});
const timeEl = h('span', { class: 'time', id: 'time' });
$('timeline').append(playBtn, stepBtn, step10Btn, scrub, timeEl);

// ------------------------------------------------------------------ actions
function replyToast(r, ok) {
  if (!r) return;
  if (r.type === 'error') { state.lastError = r; toast(r.message); } else if (ok) toast(ok);
}
function exportMotion() {
  if (state.selected == null) { toast('select a character'); return; }
  const format = exportFormat.value;
  conn.send('export', { id: state.selected, format }).then((r) => replyToast(r, `preparing the ${format === 'glb' ? 'glTF file' : 'BVH'}…`));
}
function toggleVideo() {
  if (recorder.active) {
    recorder.stop().then(({ url, filename }) => { download(url, filename); recBtn.textContent = 'Record video'; toast(`saved ${filename}`); });
  } else if (recorder.start()) {
    recBtn.textContent = 'Stop recording';
  } else toast('this browser cannot record the canvas (MediaRecorder)');
}

function renderCharacters() {
  charList.textContent = '';
  for (const c of state.characters) {
    const b = h('button', {
      class: `char ${c.id === state.selected ? 'selected' : ''} ${c.kind}`, 'data-id': c.id,
      onclick: () => conn.send('select', { id: c.id }),
    }, c.name, c.following ? ' · path' : '', c.kind === 'clip' ? ' · clip' : '');
    charList.append(b);
  }
  const sel = state.characters.find((c) => c.id === state.selected);
  const mm = sel && sel.kind === 'mm';
  for (const [name, s] of Object.entries(sliders)) {
    s.input.disabled = !mm;
    if (mm && sel.controls) { s.input.value = sel.controls[name]; s.out.textContent = Number(sel.controls[name]).toFixed(2); }
  }
  envNote.textContent = state.capabilities.environment
    ? 'Responsiveness: follow the input; Continuity: keep the current clip; Evasion: how much the heading may give way near obstacles (lower: more); Anticipation: obstacle weight grows with speed.'
    : 'Evasion and Anticipation act once environment-aware matching is installed; they are stored now.';
}

/**
 * A table that fits the panel: fixed column widths (``cols``: one class per column, see
 * style.css: ``c-idx``, ``c-num``, ``c-bar``, ``c-name``), long names shortened with an
 * ellipsis and their full text as the cell's title.
 */
function table(attrs, cols, head, rows) {
  const t = h('table', attrs, h('colgroup', {}, ...cols.map((c) => h('col', { class: c }))));
  if (head) t.append(h('tr', {}, ...head.map((text, i) => h('th', { class: cols[i], text }))));
  t.append(...rows);
  return t;
}

/** A table cell; a name cell carries its full text as its title (it may be shortened). */
function cell(cls, text) {
  return h('td', { class: cls, text, title: cls.split(' ').includes('c-name') ? String(text) : null });
}

/** Rows of ``[name, value]`` with a bar scaled to the largest value. */
function barRows(entries, digits) {
  const max = Math.max(1e-9, ...entries.map(([, v]) => v));
  return entries.map(([name, v]) => h('tr', {}, cell('c-name', name), h('td', { class: 'c-bar' }, bar(v, max)),
    cell('c-num num', v.toFixed(digits))));
}
const BAR_COLS = ['c-name', 'c-bar', 'c-num'];

function bar(value, max) {
  const w = max > 0 ? Math.min(100, (100 * value) / max) : 0;
  return h('span', { class: 'bar' }, h('span', { style: `width:${w.toFixed(1)}%` }));
}

function renderDebug() {
  const d = state.debug;
  debugEl.textContent = '';
  if (!debugBox.checked) return;
  if (!d) { debugEl.append(h('div', { class: 'note', text: 'select a motion-matching character' })); return; }
  const groups = Object.entries(d.costs || {});
  debugEl.append(
    h('div', { class: 'kv clip-line', title: `${d.frame.clip} #${d.frame.clip_frame}` }, h('b', { text: d.mode }), ` · ${d.frame.clip} #${d.frame.clip_frame}`),
    h('div', { class: 'kv' }, `target ${d.target_speed} m/s · ${d.searches} searches · ${d.transitions} transitions${d.following ? ' · following a path' : ''}`),
    h('div', { class: 'sub' }, `Current match: cost ${Number(d.total).toFixed(3)}`),
    table({ class: 'costs', id: 'cost-table' }, BAR_COLS, null, barRows(groups, 3)),
  );
  if (d.candidates && d.candidates.length) {
    debugEl.append(h('div', { class: 'sub' }, 'Nearest candidates'),
      table({ class: 'cands', id: 'cand-table' }, ['c-idx num', 'c-name clip', 'c-frame num', 'c-num num'], ['#', 'clip', 'frame', 'cost'],
        d.candidates.map((c, i) => h('tr', { title: Object.entries(c.groups).map(([g, v]) => `${g}: ${v.toFixed(3)}`).join('\n') },
          cell('c-idx num', i + 1), cell('c-name clip', c.clip), cell('c-frame num', c.clip_frame), cell('c-num num', c.cost.toFixed(3))))));
  }
  if (d.environment) debugEl.append(...renderEnvironment(d.environment));
}

function renderPose() {
  const p = state.pose;
  poseStatusEl.textContent = '';
  if (!p || !p.active) { if (p && p.state === 'off') poseStatusEl.append(h('div', { class: 'note', text: 'pose input off' })); return; }
  const prog = p.duration ? ` · ${p.t.toFixed(1)} / ${p.duration.toFixed(1)} s` : ` · ${p.t.toFixed(1)} s`;
  poseStatusEl.append(
    h('div', { class: 'kv' }, h('span', { class: `badge ${p.state}`, text: p.state }), ' ', h('b', { id: 'pose-command', text: p.command || '—' }), prog),
    h('div', { class: 'note', text: `${p.kind === 'file' ? p.file : 'webcam'} · ${p.frames} frames · ${p.classifier}` }),
  );
  if (p.top && p.top.length) poseStatusEl.append(table({ class: 'costs', id: 'pose-table' }, BAR_COLS, null, barRows(p.top, 2)));
  if (p.history && p.history.length) poseStatusEl.append(h('div', { class: 'note', text: 'commands: ' + p.history.map(([t, c]) => `${c || '—'} @${t.toFixed(1)}s`).join(' → ') }));
  if (p.message) poseStatusEl.append(h('div', { class: 'note warn', text: p.message }));
}

function renderEnvironment(env) {
  const out = [h('div', { class: 'sub' }, 'Environment')];
  if (env.error) { out.push(h('div', { class: 'note warn', text: env.error })); return out; }
  const pen = env.penalties || {};
  const cl = env.clearance == null ? 'nothing near' : `${Number(env.clearance).toFixed(2)} m`;
  const srch = pen.search ? ` · search ${pen.search.method}${pen.search.collides ? ' (collides!)' : ''}` : '';
  out.push(h('div', { class: 'kv', id: 'env-summary' }, `clearance ${cl} · penalty ${Number(pen.total || 0).toFixed(3)}${srch}`));
  const obs = pen.obstacles || [];
  if (obs.length) {
    const named = obs.map(([id, v]) => [typeof id === 'number' ? `obstacle ${id}` : id, v]);
    out.push(table({ class: 'costs', id: 'penalty-table' }, BAR_COLS, null, barRows(named, 3)));
  } else out.push(h('div', { class: 'note', text: 'no obstacle penalties on the future body ellipses' }));
  out.push(h('div', { class: 'legend' }, h('span', { class: 'sw ellipse' }), 'future body ellipses', h('span', { class: 'sw penalty' }), 'penalised obstacles'));
  return out;
}

function renderTime() {
  playBtn.textContent = state.paused ? 'Play' : 'Pause';
  playBtn.classList.toggle('paused', state.paused);
  stepBtn.disabled = !state.paused;
  step10Btn.disabled = !state.paused;
  scrub.disabled = !state.paused;
  const hist = Math.max(state.history - 1, 0);
  scrub.max = hist;
  if (!state.paused || state.back === 0) scrub.value = hist;
  const back = state.back ? ` (−${(state.back / 60).toFixed(2)} s)` : '';
  timeEl.textContent = `${state.time.toFixed(2)} s${back}`;
}

// ------------------------------------------------------------------ messages
conn.onStatus = (s) => { $('status').textContent = s; state.status = s; };
// the viewer's warm-up (first run only): what is still compiling, the time left, and how
// many of this page's requests wait for it
const warmEl = $('warmup');
const warm = { status: null, at: 0 };
function renderWarmup() {
  const m = warm.status;
  if (!m || m.ready) { warmEl.hidden = true; warmEl.textContent = ''; return; }
  const left = Math.max(Math.round(m.eta_s - (performance.now() - warm.at) / 1000), 1);
  const held = m.held ? ` · ${m.held} request${m.held > 1 ? 's' : ''} waiting for it` : '';
  warmEl.textContent = `preparing ${m.what}: compiling (first run only), about ${left} s left${held}`;
  warmEl.hidden = false;
}
function setWarmup(m) {
  const was = warm.status;
  Object.assign(warm, { status: m, at: performance.now() });
  renderWarmup();
  if (m?.ready && was && !was.ready) toast(m.released ? `ready: ${m.released} waiting request${m.released > 1 ? 's' : ''} carried out` : 'ready');
}
setInterval(renderWarmup, 1000);
conn.on('warmup', setWarmup);

conn.on('welcome', (m) => {
  state.welcome = m;
  setWarmup(m.warmup);
  rigPanel.setState(m.rig);
  state.capabilities = m.capabilities;
  state.skeletons = m.skeletons;
  state.characters = m.characters;
  state.selected = m.selected;
  state.obstacles = m.obstacles;
  view.setSkeletons(m.skeletons);
  view.setCharacters(m.characters, m.selected);
  view.setObstacles(m.obstacles, 0);
  state.terrain = m.terrain || null;
  view.setTerrain(state.terrain);
  renderTerrainNote();
  Object.assign(state, { paused: m.time.paused, history: m.time.history, time: m.time.time });
  $('status').textContent = `connected · ${m.db.description} · ${m.db.frames} frames`;
  renderCharacters();
  renderTime();
  renderKeys();
  poseNote.textContent = m.capabilities.pose ? '' : 'Pose control is not available in this installation yet.';
  crowdNote.textContent = m.capabilities.crowd ? 'Members steer to their goals (cone of vision) and avoid each other.' : 'Without crowd steering, members walk straight to their targets.';
  poseKind.disabled = !m.capabilities.pose;
  conn.send('files', { kind: 'bvh' });
  conn.send('files', { kind: 'scenario' });
  if (m.capabilities.pose) conn.send('files', { kind: 'keypoints' });
});
conn.on('rig', (m) => rigPanel.setState(m));
conn.on('characters', (m) => {
  state.characters = m.characters;
  state.selected = m.selected;
  state.skeletons = m.skeletons;
  view.setSkeletons(m.skeletons);
  view.setCharacters(m.characters, m.selected);
  for (const id of [...view.paths.keys()]) if (!m.characters.some((c) => c.id === id)) view.clearPath(id);
  renderCharacters();
});
conn.on('selected', (m) => {
  state.selected = m.id;
  view.setCharacters(state.characters, m.id);
  state.debug = null;
  view.setDebug(null);
  renderCharacters();
  renderDebug();
});
conn.on('path_info', (m) => {
  state.pathInfo[m.id] = m;
  view.setPath(m);
  pathInfoEl.textContent = m.mode === 'drawn'
    ? `drawn path: ${m.length} m at ${m.v_max} m/s (Shift: run; W/A/S/D take over)${m.loops ? ', going round' : ''}`
    : `${m.mode} path: ${m.length} m in ${m.duration} s (speeds capped at ${m.v_max} m/s)`;
  state.characters.forEach((c) => { if (c.id === m.id) c.following = true; });
  renderCharacters();
});
conn.on('path_done', (m) => {
  delete state.pathInfo[m.id];
  view.clearPath(m.id);
  state.characters.forEach((c) => { if (c.id === m.id) c.following = false; });
  renderCharacters();
  if (m.reason === 'completed') toast('path completed');
});
conn.on('obstacles', (m) => { state.obstacles = m.obstacles; view.setObstacles(m.obstacles, m.time); });
conn.on('terrain', (m) => { state.terrain = m.terrain; view.setTerrain(m.terrain); renderTerrainNote(); });
conn.on('debug', (m) => { if (!debugBox.checked) return; state.debug = m; view.setDebug(m); renderDebug(); });
conn.on('stats', (m) => {
  state.stats = m;
  const lod = m.agent_hz && m.agent_hz < 60 ? ` (others at ${m.agent_hz} Hz)` : '';
  $('stats').textContent = `${m.tick_hz.toFixed(0)} Hz · step ${m.step_ms_mean.toFixed(2)} ms · ${(m.bytes_per_s / 1024).toFixed(1)} KB/s · ${m.characters} char.${lod}`
    + (view.quality ? ` · drawn with ${view.quality} (slow frames)` : '');
});
conn.on('time', (m) => { Object.assign(state, { paused: m.paused, history: m.history, back: m.back, tick: m.tick, time: m.time }); renderTime(); });
conn.on('files', (m) => {
  state.files[m.kind] = m.files;
  if (m.kind === 'bvh') fillExamples();
  if (m.kind === 'scenario') {
    const keep = scenarioSel.value;
    scenarioSel.textContent = '';
    scenarioSel.append(h('option', { value: '' }, m.files.length ? '(choose a scenario)' : '(no scenario files)'));
    for (const f of m.files) scenarioSel.append(h('option', { value: f.id, selected: f.id === keep }, f.id));
  }
  if (m.kind === 'keypoints') {
    const keep = poseFile.value;
    poseFile.textContent = '';
    poseFile.append(h('option', { value: '' }, m.files.length ? '(keypoint files)' : '(no keypoint files)'));
    for (const f of m.files) poseFile.append(h('option', { value: f.id, selected: f.id === keep }, f.id));
  }
});
conn.on('genmm_status', (m) => {
  state.genmm = m;
  gmStatus.textContent = m.state === 'running' ? `synthesizing ${m.variants} variants…`
    : m.state === 'done' ? `${m.ids.length} variants of ${m.frames} frames at ${m.fps} fps in ${m.seconds} s — playing side by side`
      : `failed: ${m.message}`;
});
conn.on('download', (m) => { download(m.url, m.filename); toast(`${m.filename}: ${m.frames} frames (${m.seconds} s)`); });
conn.on('scene', (m) => {
  const blob = new Blob([JSON.stringify(m.scene, null, 1)], { type: 'application/json' });
  download(URL.createObjectURL(blob), 'scene.json');
});
conn.on('error', (m) => { state.lastError = m; if (m.seq == null) toast(m.message); });
conn.on('warning', (m) => toast(m.message));
conn.on('mode_unavailable', (m) => {
  toast(m.message, 5000);
  Object.assign(modeNote, { text: `${m.mode} unavailable: ${m.reason}`, until: performance.now() + 5000 });
  renderMode(performance.now());
});
conn.on('pose_status', (m) => { state.pose = m; renderPose(); camera.onStatus(m); });
conn.on('arrived', (m) => { state.arrived.push(m.id); });
conn.on('scenario_end', () => { if (state.scenario) { state.scenario.ended = true; renderScenarioNote(); } });

conn.onFrame = (f) => {
  if ((f.flags & FLAG_PARTIAL) && state.frame) {
    // characters outside the view come at a lower rate: the others keep their last pose
    const here = new Set(f.characters.map((c) => c.id));
    const known = new Set((state.characters || []).map((c) => c.id));
    for (const c of state.frame.characters) if (!here.has(c.id) && known.has(c.id)) f.characters.push(c);
  }
  state.frame = f;
  state.paused = (f.flags & FLAG_PAUSED) !== 0;
  if ((f.flags & FLAG_HISTORY) === 0) { state.tick = f.tick; state.time = f.time; state.history = f.history; state.back = 0; }
  view.setFrame(f);
  if (!state.paused || (f.flags & FLAG_HISTORY)) renderTime.pending = true;
};

new Keyboard(conn, view, () => {});
const gamepad = new Gamepad(conn, view);
returnFocusAfterPointer(view.canvas);
new Pointer({
  conn, view, tool: () => tool, pathMode: () => pathMode.value, pathScale: () => Number(pathScale.value) || 1,
  pathFacing: () => pathFacing.value, pathJoystick: () => Number(pathJoy.value) || 0,
  pathLoop: () => pathLoop.checked,
  obstacleTemplate, onObstacleSelect, toast,
});

// ------------------------------------------------------------------ render loop
let lastTimeUpdate = 0;
let lastView = null;
let lastViewAt = 0;
conn.on('welcome', () => { lastView = null; }); // a new session: tell it the view
/** Tell the server what ground the camera sees (a few times a second, when it changed). */
function sendView(now) {
  if (now - lastViewAt < 200 || !conn.open) return;
  lastViewAt = now;
  const v = view.groundView().map((p) => p.map((x) => Math.max(-999, Math.min(999, Math.round(x * 10) / 10))));
  const moved = !lastView || v.some((p, i) => Math.hypot(p[0] - lastView[i][0], p[1] - lastView[i][1]) > 0.5);
  if (!moved) return;
  lastView = v;
  conn.post('view', { polygon: v });
}

let lastRender = -1e9;
// Frames that come too slowly (under about 20 a second, the median of the last 20) make the
// view draw cheaper (View.drawCheaper), a step at a time, at most one step a second. Only
// frames drawn back to back count (not those the camera paces, nor a hidden tab's gaps).
// "?quality=full" in the page's address keeps the full drawing (benchmarks compare drawings).
// (``atFloor``: nothing is measured, with ?quality=full or once the cheapest drawing is reached)
const frameGaps = [];
let cheaperAt = 0;
let atFloor = new URLSearchParams(window.location.search).get('quality') === 'full';
function adaptQuality(now, gap) {
  if (atFloor) return;
  if (gap > 1000) { frameGaps.length = 0; return; }
  frameGaps.push(gap);
  if (frameGaps.length > 20) frameGaps.shift();
  if (frameGaps.length < 20 || now - cheaperAt < 1000) return;
  const median = [...frameGaps].sort((a, b) => a - b)[10];
  if (median <= 50) return;
  cheaperAt = now;
  frameGaps.length = 0;
  atFloor = view.drawCheaper() === null;  // (nothing left to give up: stop measuring)
}
// With a software renderer (no GPU: SwiftShader) the 3D view takes the CPU that the camera's
// pose estimator needs: while the camera starts or runs, the view is drawn once per estimated
// camera frame (the character moves with them), and at least 4 times a second.
function loop(now) {
  if (!(view.software && camera.active) || camera.takeNewFrame() || now - lastRender > 250) {
    if (!camera.active) adaptQuality(now, now - lastRender);
    lastRender = now;
    view.render();
  }
  sendView(now);
  if (renderTime.pending && now - lastTimeUpdate > 100) { renderTime.pending = false; lastTimeUpdate = now; renderTime(); }
  if (now - renderMode.at > 100) { renderMode.at = now; renderMode(now); }
  requestAnimationFrame(loop);
}
requestAnimationFrame(loop);
view.canvas.focus();

// For tests and the curious: the page's state, and world -> screen positions.
window.__mm = {
  state, conn, view, gamepad,
  character: (id) => state.frame?.characters.find((c) => c.id === (id ?? state.selected)) || null,
  toScreen: (x, z, y = 0) => view.toScreen(x, y, z),
  setTool,
  /** Stick figures (true) or bodies; how many bodies were drawn in the last frame. */
  setStick: (on) => { stickBox.checked = !!on; view.setStick(on); },
  bodiesDrawn: () => view.bodies.count,
  characterColor: (id) => characterColor(id).getHex(),
  /** The drawn ground's height (m) under (x, z), read back from the page's scene. */
  terrainHeight: (x, z) => view.terrainHeight(x, z),
  rig: rigPanel,
};
