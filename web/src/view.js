// The 3D view: a sky, a lit ground with soft shadows and a grid every metre, characters as skinned bodies
// (body.js; one colour per character) or, as a debug toggle, stick figures of capsules
// (instanced cylinders and spheres), foot contacts, paths coloured by speed, obstacles,
// debug trajectories, a camera that follows the selected character and orbits with the mouse.
import * as THREE from 'three';
import { OrbitControls } from 'three/examples/jsm/controls/OrbitControls.js';
import { Bodies, characterColor, SHADOW_LAYER } from './body.js';

const UP = new THREE.Vector3(0, 1, 0);
const tmpA = new THREE.Vector3();
const tmpB = new THREE.Vector3();
const tmpD = new THREE.Vector3();
const tmpQ = new THREE.Quaternion();
const tmpM = new THREE.Matrix4();
const tmpS = new THREE.Vector3();
const tmpC = new THREE.Color();
const tmpCol = new THREE.Color();
const tmpNdc = new THREE.Vector2();
/** Metres: how far out a view corner above the horizon counts (see ``groundView``). */
const VIEW_FAR = 120;
/** Half the side (m) of the square around the camera target where shadows fall. */
const SHADOW_REACH = 12;

const COLORS = {
  selected: 0xf0a040,
  joint: 0xe8e8e8,
  contact: 0xe0443c,
  desired: 0xff8c1a,
  matched: 0x2f7df6,
  obstacle: 0xd05050,
  obstacleSelected: 0xffd24a,
};

/** Colour of a speed (m/s) along a path: blue (slow) to green to red (fast). */
export function speedColor(v, out = new THREE.Color()) {
  const t = Math.max(0, Math.min(1, v / 5));
  return out.setHSL(0.62 - 0.62 * t, 0.85, 0.5);
}

/** A square grid of ``size`` metres with lines every ``step`` metres, in 2 m segments. */
function makeGrid(size, step, color) {
  const pos = [];
  const half = size / 2;
  const seg = 2;
  for (let k = -half; k <= half + 1e-9; k += step) {
    for (let a = -half; a < half - 1e-9; a += seg) {
      const b = Math.min(a + seg, half);
      pos.push(a, 0, k, b, 0, k, k, 0, a, k, 0, b);
    }
  }
  const geo = new THREE.BufferGeometry();
  geo.setAttribute('position', new THREE.Float32BufferAttribute(pos, 3));
  const grid = new THREE.LineSegments(geo, new THREE.LineBasicMaterial({ color }));
  grid.userData.step = step;
  return grid;
}

/** The sky and the ground's colours: a zenith blue that pales to a hazy horizon, which the
 *  fog fades the far ground into; a light sage ground (a field seen from afar) with darker
 *  lines every metre and every 10 m. */
const SKY = { zenith: new THREE.Color(0x5f8fc9), horizon: new THREE.Color(0xd3dde6) };
const GROUND = { plane: 0x9ba391, line1: 0x8c9482, line10: 0x737b69, bounce: 0x8a8676 };
/** Metres: where the fog starts and where the ground has faded into the horizon. */
const FOG = [18, 110];

/**
 * A sky dome around the camera: the upper half of a sphere of ``radius`` metres and a band
 * 6 degrees below the horizon (the ground covers the rest), its colours per vertex (no
 * per-pixel work but the interpolation: software rasterisers draw it cheaply), drawn first,
 * behind everything (no depth, no fog).
 */
function makeSky(radius) {
  const below = Math.PI / 30;
  const geo = new THREE.SphereGeometry(radius, 24, 12, 0, 2 * Math.PI, 0, Math.PI / 2 + below);
  const pos = geo.attributes.position;
  const col = new Float32Array(pos.count * 3);
  for (let i = 0; i < pos.count; i++) {
    const h = pos.getY(i) / radius;
    tmpCol.copy(SKY.horizon);
    if (h > 0) tmpCol.lerp(SKY.zenith, Math.pow(h, 0.55));
    col[3 * i] = tmpCol.r; col[3 * i + 1] = tmpCol.g; col[3 * i + 2] = tmpCol.b;
  }
  geo.setAttribute('color', new THREE.BufferAttribute(col, 3));
  const mat = new THREE.MeshBasicMaterial({ vertexColors: true, side: THREE.BackSide, depthWrite: false,
    depthTest: false, fog: false });
  const sky = new THREE.Mesh(geo, mat);
  sky.renderOrder = -1000;
  sky.frustumCulled = false;
  return sky;
}

/** Metres of flat ground drawn around a height field (the model continues it flat). */
const TERRAIN_MARGIN = 150;
const GRASS = new THREE.Color(0x55703f);
const EARTH = new THREE.Color(0x7d6a4f);
const HIGH = new THREE.Color(0x8a9a62);

/** Vertex colours of a ground surface: grass, earthier where steep, lighter up high. */
function groundColors(geo, hmin, hmax) {
  const n = geo.attributes.normal;
  const p = geo.attributes.position;
  const col = new Float32Array(p.count * 3);
  const span = Math.max(hmax - hmin, 1e-6);
  for (let i = 0; i < p.count; i++) {
    const steep = Math.min(1, Math.max(0, (1 - n.getY(i)) / (1 - Math.cos(Math.PI / 9)))); // 1 at 20 degrees
    const up = Math.min(1, Math.max(0, (p.getY(i) - hmin) / span));
    tmpCol.copy(GRASS).lerp(HIGH, 0.5 * up).lerp(EARTH, steep);
    col[3 * i] = tmpCol.r; col[3 * i + 1] = tmpCol.g; col[3 * i + 2] = tmpCol.b;
  }
  geo.setAttribute('color', new THREE.BufferAttribute(col, 3));
}

/** The height field's surface: its grid plus a ring at TERRAIN_MARGIN holding the edge heights. */
function heightFieldGeometry(t) {
  const { rows, cols, heights } = t;
  const [x0, z0] = t.origin;
  const [cx, cz] = t.cell;
  const nx = cols + 2;
  const nz = rows + 2;
  const xs = [x0 - TERRAIN_MARGIN, ...Array.from({ length: cols }, (_, j) => x0 + j * cx), x0 + (cols - 1) * cx + TERRAIN_MARGIN];
  const zs = [z0 - TERRAIN_MARGIN, ...Array.from({ length: rows }, (_, i) => z0 + i * cz), z0 + (rows - 1) * cz + TERRAIN_MARGIN];
  const pos = new Float32Array(nx * nz * 3);
  let hmin = Infinity;
  let hmax = -Infinity;
  for (let i = 0; i < nz; i++) {
    const ii = Math.min(Math.max(i - 1, 0), rows - 1);
    for (let j = 0; j < nx; j++) {
      const jj = Math.min(Math.max(j - 1, 0), cols - 1);
      const h = heights[ii * cols + jj];
      const k = 3 * (i * nx + j);
      pos[k] = xs[j]; pos[k + 1] = h; pos[k + 2] = zs[i];
      hmin = Math.min(hmin, h); hmax = Math.max(hmax, h);
    }
  }
  const idx = new Uint32Array((nx - 1) * (nz - 1) * 6);
  let q = 0;
  for (let i = 0; i < nz - 1; i++) {
    for (let j = 0; j < nx - 1; j++) {
      const a = i * nx + j; const b = a + 1; const c = a + nx; const d = c + 1;
      idx[q++] = a; idx[q++] = c; idx[q++] = b; // counter-clockwise seen from above
      idx[q++] = b; idx[q++] = c; idx[q++] = d;
    }
  }
  const geo = new THREE.BufferGeometry();
  geo.setAttribute('position', new THREE.BufferAttribute(pos, 3));
  geo.setIndex(new THREE.BufferAttribute(idx, 1));
  geo.computeVertexNormals();
  groundColors(geo, hmin, hmax);
  return geo;
}

/** Grid lines on a height field every 2 m (rows and columns of its grid), just above it. */
function heightFieldLines(t) {
  const { rows, cols, heights } = t;
  const [x0, z0] = t.origin;
  const [cx, cz] = t.cell;
  const si = Math.max(1, Math.round(2 / cz));
  const sj = Math.max(1, Math.round(2 / cx));
  const pos = [];
  const at = (i, j) => [x0 + j * cx, heights[i * cols + j] + 0.01, z0 + i * cz];
  for (let i = 0; i < rows; i += si) for (let j = 0; j < cols - 1; j++) pos.push(...at(i, j), ...at(i, j + 1));
  for (let j = 0; j < cols; j += sj) for (let i = 0; i < rows - 1; i++) pos.push(...at(i, j), ...at(i + 1, j));
  const geo = new THREE.BufferGeometry();
  geo.setAttribute('position', new THREE.Float32BufferAttribute(pos, 3));
  return new THREE.LineSegments(geo, new THREE.LineBasicMaterial({ color: 0x2e3a26, transparent: true, opacity: 0.45 }));
}

/** A terrain mesh's triangles, smooth normals. */
function meshGeometry(t) {
  const geo = new THREE.BufferGeometry();
  const pos = new Float32Array(t.vertices);
  geo.setAttribute('position', new THREE.BufferAttribute(pos, 3));
  geo.setIndex(new THREE.BufferAttribute(new Uint32Array(t.triangles), 1));
  geo.computeVertexNormals();
  let hmin = Infinity;
  let hmax = -Infinity;
  for (let i = 1; i < pos.length; i += 3) { hmin = Math.min(hmin, pos[i]); hmax = Math.max(hmax, pos[i]); }
  groundColors(geo, hmin, hmax);
  return geo;
}

/** Whether WebGL runs on a software rasteriser (headless browsers, VMs): then draw cheaper. */
function softwareRenderer() {
  try {
    const gl = document.createElement('canvas').getContext('webgl2') || document.createElement('canvas').getContext('webgl');
    if (!gl) return true;
    const info = gl.getExtension('WEBGL_debug_renderer_info');
    const name = info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER);
    gl.getExtension('WEBGL_lose_context')?.loseContext();
    return /swiftshader|llvmpipe|software|softpipe/i.test(String(name));
  } catch {
    return false;
  }
}

class InstancedPool {
  constructor(scene, geometry, material, castShadow = false) {
    this.scene = scene;
    this.castShadow = castShadow;
    this.geometry = geometry;
    this.material = material;
    this.capacity = 0;
    this.mesh = null;
    this.count = 0;
    this.ensure(256);
  }

  ensure(n) {
    if (n <= this.capacity) return;
    let cap = Math.max(256, this.capacity);
    while (cap < n) cap *= 2;
    if (this.mesh) { this.scene.remove(this.mesh); this.mesh.dispose(); }
    this.mesh = new THREE.InstancedMesh(this.geometry, this.material, cap);
    this.mesh.instanceMatrix.setUsage(THREE.DynamicDrawUsage);
    this.mesh.setColorAt(0, new THREE.Color(1, 1, 1));
    this.mesh.frustumCulled = false;
    this.mesh.castShadow = this.castShadow;
    if (this.castShadow) this.mesh.layers.enable(SHADOW_LAYER);
    this.scene.add(this.mesh);
    this.capacity = cap;
  }

  begin() { this.count = 0; }

  push(matrix, color) {
    this.ensure(this.count + 1);
    this.mesh.setMatrixAt(this.count, matrix);
    this.mesh.setColorAt(this.count, color);
    this.count++;
  }

  end() {
    this.mesh.count = this.count;
    this.mesh.instanceMatrix.needsUpdate = true;
    if (this.mesh.instanceColor) this.mesh.instanceColor.needsUpdate = true;
  }
}

export class View {
  constructor(canvas, labelsEl, { onError = () => {} } = {}) {
    this.canvas = canvas;
    this.labelsEl = labelsEl;
    this.software = softwareRenderer();
    this.renderer = new THREE.WebGLRenderer({ canvas, antialias: !this.software, powerPreference: 'high-performance' });
    this.renderer.setPixelRatio(this.software ? 1 : Math.min(window.devicePixelRatio || 1, 2));
    // soft shadows: three's PCF shadow map filters with a Vogel disk of shadow.radius texels
    // (its PCFSoftShadowMap was folded into PCFShadowMap)
    this.renderer.shadowMap.enabled = true;
    this.renderer.shadowMap.type = THREE.PCFShadowMap;
    this.scene = new THREE.Scene();
    // a sky dome (it follows the camera) over a ground that fades into its horizon
    this.scene.background = SKY.horizon.clone();
    this.scene.fog = new THREE.Fog(SKY.horizon.getHex(), FOG[0], FOG[1]);
    this.sky = makeSky(400);
    this.scene.add(this.sky);
    this.camera = new THREE.PerspectiveCamera(50, 1, 0.05, 500);
    this.camera.position.set(0, 4.6, -7.2);
    this.controls = new OrbitControls(this.camera, canvas);
    this.controls.target.set(0, 0.9, 0);
    this.controls.enableDamping = true;
    this.controls.maxPolarAngle = Math.PI * 0.495;
    this.controls.minDistance = 1.0;
    this.controls.maxDistance = 80;
    this.controls.update();
    this.follow = true;
    /** What ``drawCheaper`` gave up so far (null: full quality). */
    this.quality = null;

    this.scene.add(new THREE.HemisphereLight(0xdfe8ff, GROUND.bounce, 1.5));
    // the sun casts the characters' shadows on the ground; its shadow box follows the camera target
    const sun = new THREE.DirectionalLight(0xfff4e6, 2.0);
    this.sunOffset = new THREE.Vector3(5, 12, 4);
    sun.position.copy(this.sunOffset);
    sun.castShadow = true;
    const sc = sun.shadow.camera;
    const reach = SHADOW_REACH;
    sc.left = -reach; sc.right = reach; sc.top = reach; sc.bottom = -reach; sc.near = 1; sc.far = 40;
    sun.shadow.mapSize.set(this.software ? 512 : 2048, this.software ? 512 : 2048);
    sun.shadow.radius = this.software ? 1.5 : 4;
    sun.shadow.bias = -0.0005;
    sun.shadow.normalBias = 0.02;
    sc.layers.set(SHADOW_LAYER); // the shadow is drawn from what casts it: coarse bodies, stick figures
    this.scene.add(sun, sun.target);
    this.sun = sun;

    // The ground: a flat plane is evenly lit by these lights, so it is drawn in its lit colour,
    // and the shadows fall on a shadow-receiving layer over the square the sun's shadow map
    // covers, around the camera target: the per-pixel light and shadow work only where a
    // shadow can be.
    const ground = new THREE.Mesh(new THREE.PlaneGeometry(600, 600), new THREE.MeshBasicMaterial({ color: GROUND.plane }));
    ground.rotation.x = -Math.PI / 2;
    ground.position.y = -0.002;
    this.scene.add(ground);
    this.shadowLayer = new THREE.Mesh(new THREE.PlaneGeometry(2 * reach, 2 * reach).rotateX(-Math.PI / 2),
      new THREE.ShadowMaterial({ color: 0x1b2418, opacity: 0.42, depthWrite: false }));
    this.shadowLayer.position.y = -0.001;
    this.shadowLayer.receiveShadow = true;
    this.scene.add(this.shadowLayer);
    this.ground = ground;
    // Grids of short segments (software rasterisers drop very long lines), re-centred on the
    // camera target so they look endless.
    this.grid1 = makeGrid(36, 1, GROUND.line1); // metre lines near the camera target only: far off they alias into noise
    this.grid10 = makeGrid(100, 10, GROUND.line10);
    this.grid10.position.y = 0.001;
    this.scene.add(this.grid1, this.grid10);
    const axes = new THREE.AxesHelper(0.6);
    axes.position.y = 0.003;
    this.scene.add(axes);

    const boneGeo = new THREE.CylinderGeometry(1, 1, 1, 10, 1, true);
    boneGeo.translate(0, 0.5, 0);
    const mat = this.software ? new THREE.MeshLambertMaterial({ color: 0xffffff })
      : new THREE.MeshStandardMaterial({ color: 0xffffff, roughness: 0.55, metalness: 0.05 });
    this.bones = new InstancedPool(this.scene, boneGeo, mat, true);
    this.joints = new InstancedPool(this.scene, new THREE.SphereGeometry(1, 12, 8), mat, true);
    const ringGeo = new THREE.RingGeometry(0.6, 1, 24);
    ringGeo.rotateX(-Math.PI / 2);
    this.rings = new InstancedPool(this.scene, ringGeo,
      new THREE.MeshBasicMaterial({ color: 0xffffff, transparent: true, opacity: 0.85, side: THREE.DoubleSide, depthWrite: false }));

    this.selRing = new THREE.Mesh(new THREE.RingGeometry(0.38, 0.45, 40).rotateX(-Math.PI / 2),
      new THREE.MeshBasicMaterial({ color: COLORS.selected, transparent: true, opacity: 0.8, side: THREE.DoubleSide }));
    this.selRing.position.y = 0.004;
    this.scene.add(this.selRing);
    this.heading = new THREE.ArrowHelper(new THREE.Vector3(0, 0, 1), new THREE.Vector3(), 0.7, COLORS.selected, 0.18, 0.1);
    this.scene.add(this.heading);

    this.bodies = new Bodies(this.scene, { software: this.software, onError });
    /** Draw stick figures instead of bodies (the debug toggle). */
    this.stick = false;
    this.skeletons = {};
    this.meta = new Map();
    this.frame = null;
    this.selected = null;
    this.paths = new Map();
    this.draft = null;
    this.obstacles = new Map();
    this.obstacleSel = null;
    this.simTime = 0;
    this.debugGroup = new THREE.Group();
    this.scene.add(this.debugGroup);
    this.debugData = null;
    this.labels = [];
    this.raycaster = new THREE.Raycaster();
    this.groundPlane = new THREE.Plane(new THREE.Vector3(0, 1, 0), 0);
    /** The drawn terrain ({group, mesh, info}), or null: the flat floor. */
    this.terrain = null;
    this.lastRender = performance.now();
    this.resize();
    window.addEventListener('resize', () => this.resize());
  }

  /**
   * Draw cheaper when frames come too slowly (a software rasteriser, a weak GPU): the first
   * step turns the sun's shadows off (half the cost on SwiftShader) and the sky dome (a tenth
   * where it fills half the view: the background is its horizon's colour), each next one lowers
   * the drawing resolution (down to half the canvas's pixels per side, scaled up to fill
   * it). Returns what changed (a few words for the page's stats line), or null at the floor.
   */
  drawCheaper() {
    if (this.renderer.shadowMap.enabled) {
      this.renderer.shadowMap.enabled = false;
      this.sun.castShadow = false;
      this.shadowLayer.visible = false;
      this.sky.visible = false; // the horizon's colour instead (the sky fills up to half the view)
      this.quality = 'no shadows, flat sky';
      return this.quality;
    }
    const ratio = this.renderer.getPixelRatio();
    if (ratio <= 0.5 + 1e-6) return null;
    this.renderer.setPixelRatio(Math.max(0.5, Math.round((ratio - 0.25) * 100) / 100));
    this.resize();
    this.quality = `no shadows, flat sky, ${Math.round(this.renderer.getPixelRatio() * 100)}% resolution`;
    return this.quality;
  }

  resize() {
    const w = this.canvas.clientWidth || window.innerWidth;
    const h = this.canvas.clientHeight || window.innerHeight;
    this.renderer.setSize(w, h, false);
    this.camera.aspect = w / h;
    this.camera.updateProjectionMatrix();
  }

  /** Heading of the camera's view on the ground, radians about +Y from +Z (the server's camera_yaw). */
  cameraYaw() {
    tmpD.subVectors(this.controls.target, this.camera.position);
    return Math.atan2(tmpD.x, tmpD.z);
  }

  /**
   * The ground the camera sees: the quadrilateral ``[[x, z], ...]`` (metres, in order)
   * where the four corners of the view meet the ground (a corner above the horizon counts
   * ``VIEW_FAR`` metres out along its direction). The server sends the characters outside
   * it at a lower rate.
   */
  groundView() {
    const pts = [];
    const ray = this.raycaster.ray;
    const eye = this.camera.position;
    for (const [x, y] of [[-1, -1], [1, -1], [1, 1], [-1, 1]]) {
      this.raycaster.setFromCamera(tmpNdc.set(x, y), this.camera);
      if (ray.intersectPlane(this.groundPlane, tmpA) && tmpA.distanceTo(eye) < VIEW_FAR) {
        pts.push([tmpA.x, tmpA.z]);
      } else {
        const d = Math.hypot(ray.direction.x, ray.direction.z) || 1;
        pts.push([eye.x + (ray.direction.x / d) * VIEW_FAR, eye.z + (ray.direction.z / d) * VIEW_FAR]);
      }
    }
    return pts;
  }

  /** World point on the ground under a pointer event (on the terrain where one is drawn), or null. */
  groundAt(clientX, clientY) {
    const r = this.canvas.getBoundingClientRect();
    const ndc = new THREE.Vector2(((clientX - r.left) / r.width) * 2 - 1, -((clientY - r.top) / r.height) * 2 + 1);
    this.raycaster.setFromCamera(ndc, this.camera);
    if (this.terrain) {
      const hits = this.raycaster.intersectObject(this.terrain.mesh, false);
      if (hits.length) return hits[0].point.clone();
    }
    const hit = new THREE.Vector3();
    return this.raycaster.ray.intersectPlane(this.groundPlane, hit) ? hit : null;
  }

  // ------------------------------------------------------------------ terrain
  /**
   * Draw the ground the server sends (motionmatch/viewer/terrain.py): null for the flat floor
   * (the plane and its grids), a height field as a lit, shaded surface coloured by its slope
   * (grass, earth where it is steep), continued flat out to TERRAIN_MARGIN metres around it as
   * the model continues it, with contour-like grid lines every 2 m; a mesh as its triangles
   * over the flat plane at its ``outside`` height.
   */
  setTerrain(t) {
    if (this.terrain) {
      this.scene.remove(this.terrain.group);
      this.terrain.group.traverse((o) => { o.geometry?.dispose(); o.material?.dispose(); });
      this.terrain = null;
    }
    const field = t && t.kind === 'height_field';
    for (const o of [this.grid1, this.grid10, this.shadowLayer]) o.visible = !field && (o !== this.shadowLayer || this.renderer.shadowMap.enabled);
    this.ground.visible = !field;
    this.ground.position.y = (t && t.kind === 'mesh' ? t.outside : 0) - 0.002;
    if (!t) return;
    const geo = field ? heightFieldGeometry(t) : meshGeometry(t);
    const mat = this.software ? new THREE.MeshLambertMaterial({ vertexColors: true })
      : new THREE.MeshStandardMaterial({ vertexColors: true, roughness: 0.95, metalness: 0.0 });
    const mesh = new THREE.Mesh(geo, mat);
    mesh.receiveShadow = true;
    const group = new THREE.Group();
    group.add(mesh);
    if (field) group.add(heightFieldLines(t));
    this.scene.add(group);
    this.terrain = { group, mesh, info: t };
  }

  /** The drawn ground's height (m) under (x, z): a ray straight down onto the drawn surface. */
  terrainHeight(x, z) {
    if (!this.terrain) return this.ground.position.y + 0.002;
    this.terrain.mesh.updateMatrixWorld();
    const ray = new THREE.Raycaster(new THREE.Vector3(x, 1e4, z), new THREE.Vector3(0, -1, 0), 0, 2e4);
    const hits = ray.intersectObject(this.terrain.mesh, false);
    return hits.length ? hits[0].point.y : this.ground.position.y + 0.002;
  }

  /** Obstacle id under a pointer event, or null. */
  obstacleAt(clientX, clientY) {
    const r = this.canvas.getBoundingClientRect();
    const ndc = new THREE.Vector2(((clientX - r.left) / r.width) * 2 - 1, -((clientY - r.top) / r.height) * 2 + 1);
    this.raycaster.setFromCamera(ndc, this.camera);
    const meshes = [...this.obstacles.values()];
    for (const m of meshes) m.updateMatrixWorld();
    const hits = this.raycaster.intersectObjects(meshes, false);
    return hits.length ? hits[0].object.userData.id : null;
  }

  /** Page coordinates (CSS pixels) of a world point. */
  toScreen(x, y, z) {
    const v = new THREE.Vector3(x, y, z).project(this.camera);
    const r = this.canvas.getBoundingClientRect();
    return { x: r.left + (v.x + 1) / 2 * r.width, y: r.top + (1 - v.y) / 2 * r.height, visible: v.z < 1 };
  }

  setSkeletons(sk) {
    this.skeletons = sk;
    this.bodies.load(sk);
  }

  /** Stick figures (``true``, the debug view) or skinned bodies. */
  setStick(on) { this.stick = !!on; }

  setCharacters(list, selected) {
    this.meta = new Map(list.map((c) => [c.id, c]));
    this.selected = selected;
  }

  setFrame(frame) {
    this.frame = frame;
    this.simTime = frame.time;
  }

  selectedCharacter() {
    if (!this.frame) return null;
    return this.frame.characters.find((c) => c.id === this.selected) || null;
  }

  // ------------------------------------------------------------------ characters
  drawCharacters() {
    const f = this.frame;
    this.bones.begin();
    this.joints.begin();
    this.rings.begin();
    this.bodies.begin();
    if (!f) { this.bones.end(); this.joints.end(); this.rings.end(); this.bodies.end(null); return; }
    for (const c of f.characters) {
      const meta = this.meta.get(c.id);
      const sk = this.skeletons[String(meta ? meta.skeleton : 0)];
      if (!sk) continue;
      const r = sk.radius;
      const P = c.positions;
      const body = !this.stick && this.bodies.ready(sk.body);
      if (body) this.bodies.draw(c, sk.body, this.camera.position);
      const base = characterColor(c.id, tmpCol).getHex();
      tmpC.setHex(base);
      const hidden = sk._hidden || (sk._hidden = new Set(sk.hidden));
      for (let j = 1; j < c.joints && !body; j++) {
        const p = sk.parents[j];
        if (p < 0 || hidden.has(j)) continue;
        tmpA.set(P[3 * p], P[3 * p + 1], P[3 * p + 2]);
        tmpB.set(P[3 * j], P[3 * j + 1], P[3 * j + 2]);
        tmpD.subVectors(tmpB, tmpA);
        const len = tmpD.length();
        if (len < 1e-4) continue;
        tmpQ.setFromUnitVectors(UP, tmpD.multiplyScalar(1 / len));
        tmpS.set(r, len, r);
        tmpM.compose(tmpA, tmpQ, tmpS);
        this.bones.push(tmpM, tmpC);
      }
      const isHead = sk._head || (sk._head = sk.names.map((n) => /head/i.test(n) && !/end/i.test(n)));
      const feet = sk.feet;
      for (let j = sk.ground_root ? 1 : 0; j < c.joints; j++) {
        const k = feet.indexOf(j);
        const contact = k >= 0 && (c.contacts & (1 << k)) !== 0;
        const jr = isHead[j] ? Math.max(r * 3.6, 0.07) : r * 1.25;
        tmpA.set(P[3 * j], P[3 * j + 1], P[3 * j + 2]);
        tmpQ.identity();
        if (!body) {
          tmpS.set(jr, jr, jr);
          tmpM.compose(tmpA, tmpQ, tmpS);
          tmpC.setHex(contact ? COLORS.contact : (isHead[j] ? base : COLORS.joint));
          this.joints.push(tmpM, tmpC);
        }
        if (contact) {
          // on a terrain the planted toe is on the surface (the runtime's ground stage): the
          // ring just under it; on the floor, on the floor
          tmpA.y = this.terrain ? P[3 * j + 1] - 0.025 : 0.006;
          const rr = Math.max(r * 4, 0.06);
          tmpS.set(rr, 1, rr);
          tmpM.compose(tmpA, tmpQ, tmpS);
          tmpC.setHex(COLORS.contact);
          this.rings.push(tmpM, tmpC);
        }
      }
    }
    this.bones.end();
    this.joints.end();
    this.rings.end();
    this.bodies.end(this.meta);
    const s = this.selectedCharacter();
    this.selRing.visible = !!s;
    this.heading.visible = !!s;
    if (s) {
      const y0 = this.terrain ? s.root[1] : 0;  // (on a terrain the root follows the ground)
      this.selRing.position.set(s.root[0], y0 + 0.004, s.root[2]);
      this.heading.position.set(s.root[0], y0 + 0.02, s.root[2]);
      this.heading.setDirection(tmpD.set(Math.sin(s.yaw), 0, Math.cos(s.yaw)));
    }
  }

  // ------------------------------------------------------------------ paths
  setPath(info) {
    this.clearPath(info.id);
    const pts = info.points;
    const pos = new Float32Array(pts.length * 3);
    const col = new Float32Array(pts.length * 3);
    pts.forEach(([x, z], i) => {
      pos.set([x, 0.02, z], 3 * i);
      speedColor(info.speeds[i] ?? 0, tmpC);
      col.set([tmpC.r, tmpC.g, tmpC.b], 3 * i);
    });
    const geo = new THREE.BufferGeometry();
    geo.setAttribute('position', new THREE.BufferAttribute(pos, 3));
    geo.setAttribute('color', new THREE.BufferAttribute(col, 3));
    const line = new THREE.Line(geo, new THREE.LineBasicMaterial({ vertexColors: true, linewidth: 2 }));
    const dots = new THREE.Points(geo, new THREE.PointsMaterial({ vertexColors: true, size: 0.06 }));
    const group = new THREE.Group();
    group.add(line, dots);
    // speed labels about every 1.5 m
    const labels = [];
    let acc = 1e9;
    for (let i = 1; i < pts.length; i++) {
      acc += Math.hypot(pts[i][0] - pts[i - 1][0], pts[i][1] - pts[i - 1][1]);
      if (acc >= 1.5) {
        acc = 0;
        labels.push({ x: pts[i][0], z: pts[i][1], text: `${(info.speeds[i] ?? 0).toFixed(1)} m/s`, color: `#${speedColor(info.speeds[i] ?? 0, tmpC).getHexString()}` });
      }
    }
    this.scene.add(group);
    this.paths.set(info.id, { group, labels, info });
    this.refreshLabels();
  }

  clearPath(id) {
    const p = this.paths.get(id);
    if (!p) return;
    this.scene.remove(p.group);
    p.group.traverse((o) => { o.geometry?.dispose(); o.material?.dispose(); });
    this.paths.delete(id);
    this.refreshLabels();
  }

  setDraft(points) {
    if (this.draft) { this.scene.remove(this.draft); this.draft.geometry.dispose(); this.draft = null; }
    if (!points || points.length < 2) return;
    const pos = new Float32Array(points.length * 3);
    const col = new Float32Array(points.length * 3);
    for (let i = 0; i < points.length; i++) {
      const [t, x, z] = points[i];
      pos.set([x, 0.025, z], 3 * i);
      const j = Math.max(i - 3, 0);
      const dt = t - points[j][0];
      const v = dt > 0 ? Math.hypot(x - points[j][1], z - points[j][2]) / dt : 0;
      speedColor(v, tmpC);
      col.set([tmpC.r, tmpC.g, tmpC.b], 3 * i);
    }
    const geo = new THREE.BufferGeometry();
    geo.setAttribute('position', new THREE.BufferAttribute(pos, 3));
    geo.setAttribute('color', new THREE.BufferAttribute(col, 3));
    this.draft = new THREE.Line(geo, new THREE.LineBasicMaterial({ vertexColors: true }));
    this.scene.add(this.draft);
  }

  refreshLabels() {
    this.labelsEl.textContent = '';
    this.labels = [];
    for (const p of this.paths.values()) {
      for (const l of p.labels) {
        const el = document.createElement('div');
        el.className = 'label';
        el.textContent = l.text;
        el.style.borderColor = l.color;
        this.labelsEl.appendChild(el);
        this.labels.push({ el, x: l.x, z: l.z });
      }
    }
  }

  placeLabels() {
    const r = this.canvas.getBoundingClientRect();
    for (const l of this.labels) {
      const v = tmpA.set(l.x, 0.05, l.z).project(this.camera);
      if (v.z > 1 || Math.abs(v.x) > 1.1 || Math.abs(v.y) > 1.1) { l.el.style.display = 'none'; continue; }
      l.el.style.display = '';
      l.el.style.transform = `translate(${((v.x + 1) / 2) * r.width}px, ${((1 - v.y) / 2) * r.height}px)`;
    }
  }

  // ------------------------------------------------------------------ obstacles
  setObstacles(list, time) {
    const keep = new Set(list.map((o) => o.id));
    for (const [id, m] of this.obstacles) {
      if (!keep.has(id)) { this.scene.remove(m); m.geometry.dispose(); m.material.dispose(); this.dropArrow(m); this.obstacles.delete(id); }
    }
    for (const o of list) {
      let m = this.obstacles.get(o.id);
      const key = JSON.stringify([o.shape, o.radius, o.size, o.axes, o.height]);
      if (m && m.userData.key !== key) {
        this.scene.remove(m); m.geometry.dispose(); m.material.dispose(); this.dropArrow(m); m = null;
      }
      if (!m) {
        const [y0, y1] = o.height || [0, 1.2];
        const h = Math.max(y1 - y0, 0.02);
        let geo;
        if (o.shape === 'disk') geo = new THREE.CylinderGeometry(o.radius, o.radius, h, 40);
        else if (o.shape === 'ellipse') { geo = new THREE.CylinderGeometry(1, 1, h, 40); geo.scale(o.axes[1], 1, o.axes[0]); }
        else geo = new THREE.BoxGeometry(o.size[1], h, o.size[0]);
        geo.translate(0, y0 + h / 2, 0);
        const mat = new THREE.MeshStandardMaterial({ color: COLORS.obstacle, transparent: true, opacity: o.height ? 0.8 : 0.55, roughness: 0.8 });
        m = new THREE.Mesh(geo, mat);
        m.userData.key = key;
        this.scene.add(m);
        this.obstacles.set(o.id, m);
      }
      m.userData.id = o.id;
      m.userData.o = o;
      // a moving obstacle shows where it goes: an arrow of its velocity (1 s of travel) on its top
      const v = o.velocity || null;
      const sp = v ? Math.hypot(v[0], v[1]) : 0;
      this.dropArrow(m);
      if (sp > 1e-3 || (o.path && o.path.length > 1)) {
        const dir = sp > 1e-3 ? new THREE.Vector3(v[0] / sp, 0, v[1] / sp) : new THREE.Vector3(0, 0, 1);
        const top = (o.height ? o.height[1] : 1.2) + 0.05;
        const arrow = new THREE.ArrowHelper(dir, new THREE.Vector3(), Math.max(sp, 0.4), 0xffe08a, 0.2, 0.12);
        arrow.userData.top = top;
        arrow.userData.path = !(sp > 1e-3);
        this.scene.add(arrow);
        m.userData.arrow = arrow;
      }
      m.rotation.y = ((o.yaw_deg || 0) * Math.PI) / 180;
      m.material.color.setHex(o.id === this.obstacleSel ? COLORS.obstacleSelected : COLORS.obstacle);
    }
    this.placeObstacles();
  }

  obstaclePosition(o, t) {
    if (o.path && o.path.length) {
      const P = o.path;
      const tt = t - (o.t0 || 0);
      if (tt <= P[0][0]) return [P[0][1], P[0][2]];
      for (let i = 1; i < P.length; i++) {
        if (tt <= P[i][0]) {
          const a = (tt - P[i - 1][0]) / (P[i][0] - P[i - 1][0]);
          return [P[i - 1][1] + a * (P[i][1] - P[i - 1][1]), P[i - 1][2] + a * (P[i][2] - P[i - 1][2])];
        }
      }
      const L = P[P.length - 1];
      return [L[1], L[2]];
    }
    const v = o.velocity || [0, 0];
    const dt = t - (o.t0 || 0);
    return [o.center[0] + v[0] * dt, o.center[1] + v[1] * dt];
  }

  placeObstacles() {
    for (const m of this.obstacles.values()) {
      const o = m.userData.o;
      if (m.userData.dragging) continue;
      const [x, z] = this.obstaclePosition(o, this.simTime);
      m.position.set(x, 0, z);
      const a = m.userData.arrow;
      if (a) {
        a.position.set(x, a.userData.top, z);
        if (a.userData.path) {  // along the waypoints: the direction it moves now
          const [x2, z2] = this.obstaclePosition(o, this.simTime + 0.2);
          const d = Math.hypot(x2 - x, z2 - z);
          a.visible = d > 1e-4;
          if (d > 1e-4) a.setDirection(tmpD.set((x2 - x) / d, 0, (z2 - z) / d));
        }
      }
    }
  }

  dropArrow(m) {
    const a = m.userData.arrow;
    if (a) { this.scene.remove(a); a.dispose?.(); m.userData.arrow = null; }
  }

  selectObstacle(id) {
    this.obstacleSel = id;
    for (const [oid, m] of this.obstacles) m.material.color.setHex(oid === id ? COLORS.obstacleSelected : COLORS.obstacle);
  }

  // ------------------------------------------------------------------ debug
  /** Obstacles glow red in proportion to the penalty they put on the future body ellipses. */
  shadePenalties(list) {
    const pen = new Map((list || []).filter(([id]) => typeof id === 'number').map(([id, v]) => [id, v]));
    const max = Math.max(1e-9, ...pen.values());
    for (const [id, m] of this.obstacles) {
      const k = pen.has(id) ? 0.25 + 0.75 * Math.min(1, pen.get(id) / max) : 0;
      m.material.emissive.setRGB(0.9 * k, 0.1 * k, 0.05 * k);
      m.userData.penalty = pen.get(id) || 0;
    }
  }

  setDebug(d) {
    this.debugData = d;
    const g = this.debugGroup;
    for (const o of [...g.children]) { g.remove(o); o.geometry?.dispose(); o.material?.dispose(); }
    this.shadePenalties(d && d.environment && d.environment.penalties ? d.environment.penalties.obstacles : null);
    if (!d) return;
    const s = this.selectedCharacter();
    const root = s ? [s.root[0], 0, s.root[2]] : [0, 0, 0];
    const addTrack = (track, color, y) => {
      if (!track) return;
      const pts = [new THREE.Vector3(root[0], y, root[2]), ...track.positions.map((p) => new THREE.Vector3(p[0], y, p[2]))];
      const line = new THREE.Line(new THREE.BufferGeometry().setFromPoints(pts), new THREE.LineBasicMaterial({ color }));
      g.add(line);
      track.positions.forEach((p, i) => {
        const dot = new THREE.Mesh(new THREE.SphereGeometry(0.05, 10, 6), new THREE.MeshBasicMaterial({ color }));
        dot.position.set(p[0], y, p[2]);
        g.add(dot);
        const dir = track.directions[i];
        const a = new THREE.Vector3(p[0], y, p[2]);
        const b = new THREE.Vector3(p[0] + dir[0] * 0.35, y, p[2] + dir[1] * 0.35);
        g.add(new THREE.Line(new THREE.BufferGeometry().setFromPoints([a, b]), new THREE.LineBasicMaterial({ color })));
      });
    };
    addTrack(d.desired, COLORS.desired, 0.04);
    addTrack(d.matched, COLORS.matched, 0.06);
    const env = d.environment;
    if (env && Array.isArray(env.ellipses)) {
      for (const e of env.ellipses) {
        const [cx, cz, ux, uz, a, b] = e;
        const curve = new THREE.EllipseCurve(0, 0, a, b, 0, 2 * Math.PI, false, 0);
        const pts = curve.getPoints(40).map((p) => new THREE.Vector3(p.x, 0.03, p.y));
        const line = new THREE.LineLoop(new THREE.BufferGeometry().setFromPoints(pts), new THREE.LineBasicMaterial({ color: 0xb070ff, transparent: true, opacity: 1 - 0.25 * g.children.filter((c) => c.isLineLoop).length }));
        line.position.set(cx, 0, cz);
        line.rotation.y = -Math.atan2(uz, ux);
        g.add(line);
      }
    }
  }

  // ------------------------------------------------------------------ frame
  render() {
    const now = performance.now();
    const dt = Math.min((now - this.lastRender) / 1000, 0.1);
    this.lastRender = now;
    const s = this.selectedCharacter();
    if (s && this.follow) {
      const goal = tmpA.set(s.root[0], 0.9, s.root[2]);
      const k = 1 - Math.exp(-dt * 6);
      const delta = tmpB.subVectors(goal, this.controls.target).multiplyScalar(k);
      this.controls.target.add(delta);
      this.camera.position.add(delta);
    }
    this.controls.update();
    for (const g of [this.grid1, this.grid10]) {
      const st = g.userData.step;
      g.position.x = Math.round(this.controls.target.x / st) * st;
      g.position.z = Math.round(this.controls.target.z / st) * st;
    }
    this.sky.position.copy(this.camera.position);
    this.sun.target.position.copy(this.controls.target).setY(0);
    this.sun.position.copy(this.sun.target.position).add(this.sunOffset);
    this.shadowLayer.position.set(this.sun.target.position.x, -0.001, this.sun.target.position.z);
    this.drawCharacters();
    this.placeObstacles();
    this.placeLabels();
    this.renderer.render(this.scene, this.camera);
  }
}
