// Characters as skinned bodies: each skeleton's mannequin mesh (fetched once from the
// server, /api/body/KEY, see motionmatch/viewer/body.py for the layout) drawn as a three.js
// SkinnedMesh per character, skinned on the GPU. The geometry is shared by every character
// of a skeleton and the materials by colour; a character's bones are set each frame from
// the pose frame's world joint positions and rotations (bone matrix = T(position) R(rotation),
// times the inverse of the joint's bind transform). Two levels of detail share the bones: the
// mannequin near the camera, its coarse copy (about 1/7 of the vertices) farther than
// LOD_DISTANCE and, always, for the shadow (the sun's shadow camera draws layer SHADOW_LAYER).
import * as THREE from 'three';

const MAGIC = 0x32424d4d; // "MMB2" read as a little-endian u32
/** Metres from the camera beyond which a character is drawn with its coarse mesh. */
export const LOD_DISTANCE = 9;
/** The layer of what casts shadows (the sun's shadow camera sees only it). */
export const SHADOW_LAYER = 1;
const ONE = new THREE.Vector3(1, 1, 1);
const tmpP = new THREE.Vector3();
const tmpQ = new THREE.Quaternion();

/** A distinct colour per character id (hues a golden angle apart), as a THREE.Color. */
export function characterColor(id, out = new THREE.Color()) {
  const hue = (0.08 + id * 0.6180339887) % 1;
  return out.setHSL(hue, 0.55, 0.58);
}

/**
 * Read one encoded body.
 * @param {ArrayBuffer} buf
 * @returns {{geometry: THREE.BufferGeometry, coarse: THREE.BufferGeometry, inverseBinds: THREE.Matrix4[], joints: number}}
 */
export function parseBody(buf) {
  const dv = new DataView(buf);
  if (buf.byteLength < 24 || dv.getUint32(0, true) !== MAGIC) throw new Error('not a body (bad magic)');
  const J = dv.getUint32(4, true);
  const sizes = [[dv.getUint32(8, true), dv.getUint32(12, true)], [dv.getUint32(16, true), dv.getUint32(20, true)]];
  let off = 24;
  const take = (Type, n) => { const a = new Type(buf, off, n); off += n * Type.BYTES_PER_ELEMENT; return a; };
  const inv = take(Float32Array, 16 * J);
  const [geometry, coarse] = sizes.map(([V, F]) => {
    const g = new THREE.BufferGeometry();
    g.setAttribute('position', new THREE.BufferAttribute(take(Float32Array, 3 * V), 3));
    g.setAttribute('normal', new THREE.BufferAttribute(take(Float32Array, 3 * V), 3));
    g.setIndex(new THREE.BufferAttribute(take(Uint32Array, 3 * F), 1));
    g.setAttribute('skinIndex', new THREE.Uint16BufferAttribute(take(Uint16Array, 4 * V), 4));
    g.setAttribute('skinWeight', new THREE.BufferAttribute(take(Float32Array, 4 * V), 4));
    g.computeBoundingSphere();
    return g;
  });
  if (off !== buf.byteLength) throw new Error(`body of ${buf.byteLength} bytes, expected ${off}`);
  const inverseBinds = [];
  for (let j = 0; j < J; j++) inverseBinds.push(new THREE.Matrix4().fromArray(inv, 16 * j));
  return { geometry, coarse, inverseBinds, joints: J };
}

/** The skinned bodies of a view's characters. */
export class Bodies {
  /**
   * @param {THREE.Scene} scene
   * @param {{software?: boolean, onError?: (msg: string) => void}} opts software: cheaper
   *   materials (software rasterisers); onError: told once per body that cannot be loaded.
   */
  constructor(scene, { software = false, onError = () => {} } = {}) {
    this.group = new THREE.Group();
    this.group.name = 'bodies';
    scene.add(this.group);
    this.software = software;
    this.onError = onError;
    this.shapes = new Map(); // url -> {state: 'loading'|'ready'|'failed', body}
    this.chars = new Map(); // character id -> {mesh, url, bones}
    this.materials = new Map(); // colour hex -> material
    this.seen = new Set();
  }

  /** Fetch the bodies of ``skeletons`` ({id: {body: url, ...}}) not yet known. */
  load(skeletons) {
    for (const sk of Object.values(skeletons || {})) {
      const url = sk && sk.body;
      if (!url || this.shapes.has(url)) continue;
      const entry = { state: 'loading', body: null };
      this.shapes.set(url, entry);
      fetch(url).then((r) => {
        if (!r.ok) return r.text().then((t) => { throw new Error(t || `HTTP ${r.status}`); });
        return r.arrayBuffer();
      }).then((buf) => {
        entry.body = parseBody(buf);
        entry.state = 'ready';
      }).catch((err) => {
        entry.state = 'failed';
        this.onError(`the characters' body could not be loaded (stick figures instead): ${err.message}`);
      });
    }
  }

  /** Whether the body at ``url`` is loaded (a character of that skeleton can be drawn). */
  ready(url) {
    const e = url && this.shapes.get(url);
    return !!e && e.state === 'ready';
  }

  material(color) {
    const key = color.getHex();
    let m = this.materials.get(key);
    if (!m) {
      m = this.software ? new THREE.MeshLambertMaterial({ color })
        : new THREE.MeshStandardMaterial({ color, roughness: 0.62, metalness: 0.02 });
      this.materials.set(key, m);
    }
    return m;
  }

  make(id, url) {
    const { geometry, coarse, inverseBinds } = this.shapes.get(url).body;
    const bones = inverseBinds.map(() => {
      const b = new THREE.Bone();
      b.matrixAutoUpdate = false;
      b.matrixWorldAutoUpdate = false;
      return b;
    });
    const skeleton = new THREE.Skeleton(bones, inverseBinds);
    const material = this.material(characterColor(id));
    const skinned = (g) => {
      const m = new THREE.SkinnedMesh(g, material);
      m.bindMode = THREE.DetachedBindMode;
      m.bind(skeleton, new THREE.Matrix4());
      m.frustumCulled = false; // posed far from its bind bounds
      m.userData.id = id;
      this.group.add(m);
      return m;
    };
    const mesh = skinned(geometry); // drawn near the camera; casts no shadow
    mesh.receiveShadow = true;
    const low = skinned(coarse); // drawn far away; always casts the shadow
    low.castShadow = true;
    low.receiveShadow = true;
    const c = { mesh, low, url, bones, skeleton };
    this.chars.set(id, c);
    return c;
  }

  /** Start a frame: characters not drawn again before :meth:`end` are removed. */
  begin() { this.seen.clear(); }

  /**
   * Pose character ``c`` (a decoded frame's character) with the body at ``url`` (ready),
   * seen from ``eye`` (the camera's position: the level of detail). Its bones take the
   * frame's world positions and rotations.
   */
  draw(c, url, eye) {
    let e = this.chars.get(c.id);
    if (e && e.url !== url) { this.drop(c.id); e = null; }
    if (!e) e = this.make(c.id, url);
    const P = c.positions;
    const R = c.rotations;
    const n = Math.min(e.bones.length, c.joints);
    for (let j = 0; j < n; j++) {
      tmpP.set(P[3 * j], P[3 * j + 1], P[3 * j + 2]);
      tmpQ.set(R[4 * j], R[4 * j + 1], R[4 * j + 2], R[4 * j + 3]);
      e.bones[j].matrixWorld.compose(tmpP, tmpQ, ONE);
    }
    const near = eye.distanceToSquared(tmpP.set(c.root[0], c.root[1], c.root[2])) < LOD_DISTANCE * LOD_DISTANCE;
    e.mesh.visible = near;
    e.low.visible = true;
    e.low.layers.mask = near ? (1 << SHADOW_LAYER) : (1 | (1 << SHADOW_LAYER));
    this.seen.add(c.id);
  }

  /** End a frame: hide (and free, when gone for good) the bodies not drawn. */
  end(alive) {
    for (const [id, e] of this.chars) {
      if (this.seen.has(id)) continue;
      if (alive && alive.has(id)) { e.mesh.visible = false; e.low.visible = false; } else this.drop(id);
    }
  }

  drop(id) {
    const e = this.chars.get(id);
    if (!e) return;
    this.group.remove(e.mesh, e.low);
    e.skeleton.dispose();
    this.chars.delete(id);
  }

  /** How many bodies were drawn this frame. */
  get count() { return this.seen.size; }
}
