// Reader of the server's binary pose frames (see motionmatch/viewer/protocol.py for the layout).

export const KIND_POSE = 1;
export const PROTOCOL_VERSION = 3;
export const FLAG_PAUSED = 1;
export const FLAG_HISTORY = 2;
/** The frame holds only some characters (the others are outside the view: keep their last pose). */
export const FLAG_PARTIAL = 4;
export const CF_SEARCHED = 1;
export const CF_TRANSITIONED = 2;
export const CF_SELECTED = 4;
export const CF_FOLLOWING = 8;
export const CF_CLIP = 16;
export const MODES = ['idle', 'locomotion', 'jump', 'dance', 'creep', 'clip', 'follow', 'agent', 'punch'];

const FRAME_HEADER = 20;
const CHAR_HEADER = 32;

const ROT_SCALE = Math.SQRT1_2 / (0.5 * 32767);
// (w, x, y, z) component k of the wire -> its place in three.js's (x, y, z, w)
const XYZW = [3, 0, 1, 2];
const OTHERS = [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]];

/** A "smallest three" rotation (see protocol.py) into ``out[o..o+3]`` as (x, y, z, w). */
export function decodeRotation(a, b, c, out, o) {
  const big = (a >> 15) | ((b >> 15) << 1);
  const s0 = ((a & 0x7fff) - 16383.5) * ROT_SCALE;
  const s1 = ((b & 0x7fff) - 16383.5) * ROT_SCALE;
  const s2 = ((c & 0x7fff) - 16383.5) * ROT_SCALE;
  const others = OTHERS[big];
  out[o + XYZW[others[0]]] = s0;
  out[o + XYZW[others[1]]] = s1;
  out[o + XYZW[others[2]]] = s2;
  out[o + XYZW[big]] = Math.sqrt(Math.max(0, 1 - s0 * s0 - s1 * s1 - s2 * s2));
}

/**
 * Decode one pose frame.
 * @param {ArrayBuffer} buf
 * @returns {{flags:number, tick:number, time:number, history:number, back:number,
 *   characters: Array<{id:number, joints:number, mode:string, flags:number, contacts:number,
 *   root:number[], yaw:number, positions: Float32Array, rotations: Float32Array}>}}
 * ``rotations``: J world quaternions as (x, y, z, w) (three.js order), unit.
 */
export function decodeFrame(buf) {
  const dv = new DataView(buf);
  if (buf.byteLength < FRAME_HEADER) throw new Error('pose frame too short');
  const kind = dv.getUint8(0);
  const version = dv.getUint8(1);
  if (kind !== KIND_POSE || version !== PROTOCOL_VERSION) {
    throw new Error(`unsupported frame (kind ${kind}, version ${version})`);
  }
  const frame = {
    flags: dv.getUint16(2, true),
    tick: dv.getUint32(4, true),
    time: dv.getFloat32(8, true),
    history: dv.getUint16(14, true),
    back: dv.getUint16(16, true),
    characters: [],
  };
  const n = dv.getUint16(12, true);
  let off = FRAME_HEADER;
  for (let i = 0; i < n; i++) {
    const id = dv.getUint16(off, true);
    const J = dv.getUint16(off + 2, true);
    const mode = MODES[dv.getUint8(off + 4)] || '?';
    const flags = dv.getUint8(off + 5);
    const contacts = dv.getUint8(off + 6);
    const rx = dv.getFloat32(off + 8, true);
    const ry = dv.getFloat32(off + 12, true);
    const rz = dv.getFloat32(off + 16, true);
    const yaw = dv.getFloat32(off + 20, true);
    const scale = dv.getFloat32(off + 24, true);
    const positions = new Float32Array(J * 3);
    let p = off + CHAR_HEADER;
    for (let j = 0; j < J; j++) {
      positions[3 * j] = rx + dv.getInt16(p, true) * scale;
      positions[3 * j + 1] = ry + dv.getInt16(p + 2, true) * scale;
      positions[3 * j + 2] = rz + dv.getInt16(p + 4, true) * scale;
      p += 6;
    }
    const rotations = new Float32Array(J * 4);
    for (let j = 0; j < J; j++) {
      decodeRotation(dv.getUint16(p, true), dv.getUint16(p + 2, true), dv.getUint16(p + 4, true), rotations, 4 * j);
      p += 6;
    }
    frame.characters.push({ id, joints: J, mode, flags, contacts, root: [rx, ry, rz], yaw, positions, rotations });
    let size = CHAR_HEADER + 12 * J;
    size += (4 - (size % 4)) % 4;
    off += size;
  }
  return frame;
}
