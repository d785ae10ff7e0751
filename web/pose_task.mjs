// Assembles MediaPipe Tasks' PoseLandmarker model bundles (.task) at build time from the
// TFLite models that the npm package @mediapipe/pose ships (Apache-2.0):
//   pose_solution_packed_assets.data   = pose_detection.tflite (the BlazePose detector)
//   pose_landmark_{lite,full,heavy}.tflite
// A .task file is a zip holding pose_detector.tflite and pose_landmarks_detector.tflite.
// MediaPipe Tasks reads each model's input normalisation from its TFLite metadata, which the
// legacy package's models lack, so the build adds it: a ModelMetadata flatbuffer ("M001")
// stored in a new model buffer named TFLITE_METADATA, with the same ranges as the legacy
// solution's graphs (detector input in [-1, 1], landmark model input in [0, 1]).
//
// The model flatbuffer is extended without re-serialising it: flatbuffer offsets only point
// forward, so a new root table placed in front of the unchanged model can refer to all of
// its tables; the prefix is a multiple of 64 bytes, which keeps the weights' alignment.
// Usage: writePoseTasks(sourceDir, outDir) -> list of written .task files.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// ---------------------------------------------------------------- a forward flatbuffer writer
// An object is {table: [slot, ...]} (slot: null, {u8}, {u32}, {ref: object}, {ext: position
// in the original model}), {vec: [object | {ext}, ...]} (a vector of tables), {f32: [...]},
// {bytes: Uint8Array, align}, or {str: '...'}. Children are written after their parent, so
// every offset points forward, as flatbuffers require.
class Writer {
  constructor() { this.buf = new Uint8Array(1 << 16); this.n = 0; this.ext = []; }
  grow(k) {
    while (this.n + k > this.buf.length) { const b = new Uint8Array(this.buf.length * 2); b.set(this.buf); this.buf = b; }
  }
  pad(align, before = 0) { while ((this.n + before) % align) { this.grow(1); this.buf[this.n++] = 0; } }
  u8(v) { this.grow(1); this.buf[this.n++] = v; }
  u16(v) { this.grow(2); new DataView(this.buf.buffer).setUint16(this.n, v, true); this.n += 2; }
  u32(v) { this.grow(4); new DataView(this.buf.buffer).setUint32(this.n, v >>> 0, true); this.n += 4; }
  setU32(at, v) { new DataView(this.buf.buffer).setUint32(at, v >>> 0, true); }

  /** Writes obj and its children; returns obj's position. */
  write(obj) {
    if (obj.table) {
      const slots = obj.table;
      this.pad(2);
      const vt = this.n;
      this.u16(4 + 2 * slots.length);
      this.u16(4 + 4 * slots.length);
      slots.forEach((s, i) => this.u16(s ? 4 + 4 * i : 0));
      this.pad(4);
      const at = this.n;
      this.u32(at - vt);                                   // soffset to the vtable (signed, positive)
      const refs = [];
      for (const s of slots) {
        const pos = this.n;
        if (!s) this.u32(0);
        else if ('u8' in s) { this.u8(s.u8); this.u8(0); this.u16(0); }
        else if ('u32' in s) this.u32(s.u32);
        else if ('ext' in s) { this.u32(0); this.ext.push([pos, s.ext]); }
        else { this.u32(0); refs.push([pos, s.ref]); }
      }
      for (const [pos, child] of refs) this.setU32(pos, this.write(child) - pos);
      return at;
    }
    if (obj.vec) {
      this.pad(4);
      const at = this.n;
      this.u32(obj.vec.length);
      const refs = [];
      for (const e of obj.vec) {
        const pos = this.n;
        this.u32(0);
        if ('ext' in e) this.ext.push([pos, e.ext]);
        else refs.push([pos, e]);
      }
      for (const [pos, child] of refs) this.setU32(pos, this.write(child) - pos);
      return at;
    }
    if (obj.f32) {
      this.pad(4);
      const at = this.n;
      this.u32(obj.f32.length);
      for (const v of obj.f32) { this.grow(4); new DataView(this.buf.buffer).setFloat32(this.n, v, true); this.n += 4; }
      return at;
    }
    if (obj.str !== undefined) {
      this.pad(4);
      const at = this.n;
      const b = new TextEncoder().encode(obj.str);
      this.u32(b.length);
      this.grow(b.length + 1);
      this.buf.set(b, this.n);
      this.n += b.length;
      this.u8(0);
      return at;
    }
    if (obj.bytes) {
      this.pad(obj.align || 4, 4);                          // the data (after the length) is aligned
      const at = this.n;
      this.u32(obj.bytes.length);
      this.grow(obj.bytes.length);
      this.buf.set(obj.bytes, this.n);
      this.n += obj.bytes.length;
      return at;
    }
    throw new Error('unknown flatbuffer object');
  }

  /** A whole buffer: root offset, file identifier, then the root object. */
  static finish(root, ident, { prefixOf } = {}) {
    const w = new Writer();
    w.u32(0);
    for (const c of ident) w.u8(c.charCodeAt(0));
    w.setU32(0, w.write(root));
    if (!prefixOf) return w.buf.slice(0, w.n);
    w.pad(64);
    const size = w.n;
    for (const [pos, target] of w.ext) w.setU32(pos, size + target - pos);
    const out = new Uint8Array(size + prefixOf.length);
    out.set(w.buf.subarray(0, size));
    out.set(prefixOf, size);
    return out;
  }
}

// ---------------------------------------------------------------- reading the original model
function reader(bytes) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u32 = (p) => dv.getUint32(p, true);
  const table = (p) => {
    const vt = p - dv.getInt32(p, true);
    const nslots = (dv.getUint16(vt, true) - 4) / 2;
    const field = (i) => (i < nslots ? dv.getUint16(vt + 4 + 2 * i, true) : 0);
    return {
      has: (i) => field(i) !== 0,
      scalar: (i) => (field(i) ? u32(p + field(i)) : 0),
      target: (i) => (field(i) ? p + field(i) + u32(p + field(i)) : null),
    };
  };
  const vector = (p) => Array.from({ length: u32(p) }, (_, k) => p + 4 + 4 * k + u32(p + 4 + 4 * k));
  const str = (p) => new TextDecoder().decode(bytes.subarray(p + 4, p + 4 + u32(p)));
  return { root: u32(0), table, vector, str, ident: new TextDecoder().decode(bytes.subarray(4, 8)) };
}

/** The ModelMetadata of an image model whose input is (pixel - mean) / std. */
function imageMetadata(name, mean, std) {
  const normalization = { table: [{ ref: { f32: [mean] } }, { ref: { f32: [std] } }] };
  const processUnit = { table: [{ u8: 1 /* NormalizationOptions */ }, { ref: normalization }] };
  const imageProps = { table: [{ u8: 1 /* RGB */ }, null] };
  const content = { table: [{ u8: 2 /* ImageProperties */ }, { ref: imageProps }, null] };
  const input = { table: [{ ref: { str: 'image' } }, null, null, { ref: content }, { ref: { vec: [processUnit] } }] };
  const subgraph = { table: [null, null, { ref: { vec: [input] } }] };
  return Writer.finish({ table: [{ ref: { str: name } }, null, null, { ref: { vec: [subgraph] } }] }, 'M001');
}

const MODEL_SLOTS = 8;          // tflite Model: version, operator_codes, subgraphs, description,
const BUFFERS = 4;              //   buffers, metadata_buffer, metadata, signature_defs
const METADATA = 6;

/** The TFLite model `bytes` with `metadata` (a ModelMetadata buffer) added. */
export function withMetadata(bytes, metadata) {
  const r = reader(bytes);
  if (r.ident !== 'TFL3') throw new Error('not a TFLite model (no TFL3 identifier)');
  const m = r.table(r.root);
  const oldMeta = m.has(METADATA) ? r.vector(m.target(METADATA)) : [];
  for (const p of oldMeta) {
    const t = r.table(p);
    if (t.has(0) && r.str(t.target(0)) === 'TFLITE_METADATA') throw new Error('the model already has TFLITE_METADATA');
  }
  const buffers = m.has(BUFFERS) ? r.vector(m.target(BUFFERS)) : [];
  const newBuffer = { table: [{ ref: { bytes: metadata, align: 16 } }] };
  const newMeta = { table: [{ ref: { str: 'TFLITE_METADATA' } }, { u32: buffers.length }] };
  const slots = [];
  for (let i = 0; i < MODEL_SLOTS; i++) {
    if (i === 0) slots.push({ u32: m.scalar(0) });
    else if (i === BUFFERS) slots.push({ ref: { vec: [...buffers.map((p) => ({ ext: p })), newBuffer] } });
    else if (i === METADATA) slots.push({ ref: { vec: [...oldMeta.map((p) => ({ ext: p })), newMeta] } });
    else slots.push(m.has(i) ? { ext: m.target(i) } : null);
  }
  return Writer.finish({ table: slots }, 'TFL3', { prefixOf: bytes });
}

// ---------------------------------------------------------------- a stored (uncompressed) zip
const CRC = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();
function crc32(b) {
  let c = 0xffffffff;
  for (let i = 0; i < b.length; i++) c = CRC[(c ^ b[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A zip archive of `files` ([name, Uint8Array]), stored without compression. */
export function storedZip(files) {
  const parts = [];
  const central = [];
  let offset = 0;
  for (const [name, data] of files) {
    const nm = new TextEncoder().encode(name);
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0); local.writeUInt16LE(20, 4); local.writeUInt16LE(0, 6);
    local.writeUInt16LE(0, 8); local.writeUInt32LE(0x00210000, 10);     // stored; 1980-01-01 00:00
    local.writeUInt32LE(crc, 14); local.writeUInt32LE(data.length, 18); local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(nm.length, 26); local.writeUInt16LE(0, 28);
    const c = Buffer.alloc(46);
    c.writeUInt32LE(0x02014b50, 0); c.writeUInt16LE(20, 4); c.writeUInt16LE(20, 6); c.writeUInt16LE(0, 8);
    c.writeUInt16LE(0, 10); c.writeUInt32LE(0x00210000, 12); c.writeUInt32LE(crc, 16);
    c.writeUInt32LE(data.length, 20); c.writeUInt32LE(data.length, 24); c.writeUInt16LE(nm.length, 28);
    c.writeUInt32LE(offset, 42);
    central.push(c, nm);
    parts.push(local, nm, data);
    offset += 30 + nm.length + data.length;
  }
  const cdSize = central.reduce((s, b) => s + b.length, 0);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0); end.writeUInt16LE(files.length, 8); end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(cdSize, 12); end.writeUInt32LE(offset, 16);
  return Buffer.concat([...parts, ...central, end]);
}

export const POSE_MODELS = ['lite', 'full', 'heavy'];

/** Writes OUT/pose_landmarker_{lite,full,heavy}.task from @mediapipe/pose's folder SRC. */
export function writePoseTasks(src, out) {
  const detector = withMetadata(new Uint8Array(readFileSync(join(src, 'pose_solution_packed_assets.data'))),
    imageMetadata('pose detector (BlazePose)', 127.5, 127.5));
  const written = [];
  for (const m of POSE_MODELS) {
    const landmarks = withMetadata(new Uint8Array(readFileSync(join(src, `pose_landmark_${m}.tflite`))),
      imageMetadata(`pose landmarks (BlazePose GHUM 3D, ${m})`, 0.0, 255.0));
    const file = join(out, `pose_landmarker_${m}.task`);
    writeFileSync(file, storedZip([['pose_detector.tflite', detector], ['pose_landmarks_detector.tflite', landmarks]]));
    written.push(file);
  }
  return written;
}
