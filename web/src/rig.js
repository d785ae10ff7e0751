// "Use my character" (the Characters panel): a rig file the user picks (.glb/.gltf with a
// skeleton, optionally skinned, or .bvh) is sent to the server (POST /api/rig/{session},
// with the tab's upload key: see motionmatch/viewer/server.py), which retargets every
// motion-matching character onto it; "Use the mannequin" goes back (rig_clear). The server
// says what is in use with ``rig`` messages (and the welcome's ``rig``); a refused file is
// one line, and the session stays as it was.

/** The rig controls of the Characters panel. */
export class RigPanel {
  /**
   * @param {{h: Function, toast: (text: string, ms?: number) => void, conn: {send: Function}}} deps
   */
  constructor({ h, toast, conn }) {
    this.toast = toast;
    this.conn = conn;
    this.state = null; // the server's rig state: {active, name, joints, skinned, upload, key, max_bytes, warnings}
    this.busy = false;
    this.file = h('input', {
      type: 'file', id: 'rig-file', accept: '.glb,.gltf,.bvh,.fbx', hidden: true,
      onchange: () => { const f = this.file.files[0]; this.file.value = ''; if (f) this.upload(f); },
    });
    this.useButton = h('button', {
      id: 'rig-use', onclick: () => this.file.click(),
      title: 'play every character on your own rig: a .glb/.gltf with a skeleton (its skinned mesh is drawn) or a .bvh',
    }, 'Use my character…');
    this.clearButton = h('button', { id: 'rig-clear', onclick: () => this.clear(), title: 'the generated mannequin again' },
      'Use the mannequin');
    this.note = h('div', { class: 'note', id: 'rig-note' });
    this.el = h('div', { class: 'rig' }, h('div', { class: 'row' }, this.useButton, this.clearButton, this.file), this.note);
    this.render();
  }

  /** The server's rig state (welcome's ``rig`` or a ``rig`` message). */
  setState(s) {
    this.state = s || null;
    this.render();
  }

  render() {
    const s = this.state;
    this.clearButton.disabled = this.busy || !s || !s.active;
    this.useButton.disabled = this.busy || !s;
    if (this.busy) return;
    if (s && s.active) {
      this.note.textContent = `Characters on ${s.name} (${s.joints} joints, ${s.skinned ? 'its own skinned mesh' : 'the mannequin of its skeleton: the file has no skin'}).`
        + (s.warnings && s.warnings.length ? ` Note: ${s.warnings.join(' ')}` : '');
    } else {
      this.note.textContent = 'Characters on the mannequin of the database\'s skeleton.';
    }
  }

  /** Send the rig file ``file`` (a File or Blob with a name). Resolves with the server's answer. */
  async upload(file) {
    const s = this.state;
    if (!s || this.busy) return { ok: false, error: 'not connected' };
    const name = file.name || 'rig.glb';
    if (s.max_bytes && file.size > s.max_bytes) {
      const error = `${name}: ${file.size.toLocaleString()} bytes, over the ${s.max_bytes.toLocaleString()} a rig file may have here; give a smaller file`;
      this.toast(error, 6000);
      return { ok: false, error };
    }
    this.busy = true;
    this.note.textContent = `reading ${name}…`;
    this.render();
    let answer;
    try {
      const r = await fetch(s.upload, {
        method: 'POST', body: file,
        headers: { 'Content-Type': 'application/octet-stream', 'X-Rig-Key': s.key, 'X-Rig-Name': encodeURIComponent(name) },
      });
      answer = await r.json().catch(() => ({ ok: false, error: `HTTP ${r.status}` }));
    } catch (err) {
      answer = { ok: false, error: `${name}: could not be sent (${err.message})` };
    }
    this.busy = false;
    this.render();
    if (answer.ok) this.toast(`your character: ${answer.name} (${answer.joints} joints)`);
    else this.toast(answer.error, 8000);
    this.lastAnswer = answer;
    return answer;
  }

  clear() {
    return this.conn.send('rig_clear', {}).then((r) => { if (r.type === 'error') this.toast(r.message); return r; });
  }
}
