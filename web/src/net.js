// The websocket to the server: JSON commands out (with sequence numbers), JSON events and
// binary pose frames in.
import { decodeFrame } from './protocol.js';

export class Connection {
  constructor(url) {
    this.url = url;
    this.seq = 1;
    this.handlers = new Map();
    this.onFrame = null;
    this.onStatus = null;
    this.pending = new Map();
    this.open = false;
    this.bytesIn = 0;
    this.connect();
  }

  connect() {
    const ws = new WebSocket(this.url);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onopen = () => { this.open = true; this.onStatus?.('connected'); };
    ws.onclose = (e) => {
      this.open = false;
      this.onStatus?.(`disconnected (${e.code}${e.reason ? ': ' + e.reason : ''}) — reload the page to start a new session`);
    };
    ws.onerror = () => this.onStatus?.('connection error');
    ws.onmessage = (e) => {
      if (e.data instanceof ArrayBuffer) {
        this.bytesIn += e.data.byteLength;
        try { this.onFrame?.(decodeFrame(e.data)); } catch (err) { console.error(err); }
        return;
      }
      this.bytesIn += e.data.length;
      let msg;
      try { msg = JSON.parse(e.data); } catch { return; }
      if (msg.seq != null && this.pending.has(msg.seq)) {
        const { resolve } = this.pending.get(msg.seq);
        this.pending.delete(msg.seq);
        resolve(msg);
      }
      for (const h of this.handlers.get(msg.type) || []) h(msg);
      for (const h of this.handlers.get('*') || []) h(msg);
    };
  }

  on(type, fn) {
    if (!this.handlers.has(type)) this.handlers.set(type, []);
    this.handlers.get(type).push(fn);
  }

  /** Send a command; resolves with its ack or error reply. */
  send(type, fields = {}) {
    if (!this.open) return Promise.resolve({ type: 'error', message: 'not connected' });
    const seq = this.seq++;
    this.ws.send(JSON.stringify({ type, seq, ...fields }));
    return new Promise((resolve) => {
      this.pending.set(seq, { resolve });
      setTimeout(() => {
        if (this.pending.has(seq)) { this.pending.delete(seq); resolve({ type: 'timeout', seq }); }
      }, 30000);
    });
  }

  /** Fire and forget (key events: no reply wanted). */
  post(type, fields = {}) {
    if (this.open) this.ws.send(JSON.stringify({ type, ...fields }));
  }
}
