// Input: real key-down/key-up events for the selected character, and the mouse tools
// (orbit, draw a path, place/drag obstacles, add characters).
//
// Where the keys go: W/A/S/D, Shift, J/Space, P, C, Q (held: strafe, facing where the camera
// looks) and the arrows drive the selected
// character whenever the keyboard focus is not in a text field (text, search and number
// inputs, text areas, selects, editable text). A slider, checkbox, button or panel title
// does not swallow them; reached with Tab, such a control keeps only its own keys (a
// slider its arrows, a button or checkbox Space/Enter), and used with the mouse it gives
// the focus back to the 3D view at once (returnFocusAfterPointer).

/** Browser KeyboardEvent.code -> what the server's keyboard mapping understands. */
export const KEY_CODES = {
  KeyW: 'w', KeyA: 'a', KeyS: 's', KeyD: 'd',
  ShiftLeft: 'shift', ShiftRight: 'shift',
  ArrowUp: 'up', ArrowDown: 'down',
  KeyJ: 'j', Space: 'j', KeyP: 'p', KeyC: 'c', KeyF: 'f', KeyQ: 'q',
};

/** Input types that take typed text: keys pressed there are the field's. */
const TEXT_INPUTS = new Set(['text', 'search', 'number', 'email', 'password', 'url', 'tel', 'date', 'time',
  'datetime-local', 'month', 'week']);

/** Whether an element is a text field (keys typed there are text, never commands). */
export function isTextField(el) {
  if (!el || el.nodeType !== 1) return false;
  if (el.isContentEditable || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT') return true;
  return el.tagName === 'INPUT' && TEXT_INPUTS.has((el.getAttribute('type') || 'text').toLowerCase());
}

/** Keys a focused control keeps for itself (reached with Tab, it works as usual): a slider
 * its arrows, a button, checkbox or radio button (and a panel's title) Space and Enter.
 * Every other key of the keyboard mapping drives the character from any such control. */
const NATIVE_KEYS = {
  range: new Set(['ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight', 'PageUp', 'PageDown', 'Home', 'End']),
  press: new Set(['Space', 'Enter', 'NumpadEnter']),
};

/** Whether the focused element ``el`` keeps key ``code`` (see NATIVE_KEYS). */
export function controlKeepsKey(el, code) {
  if (!el || el.nodeType !== 1) return false;
  if (el.tagName === 'INPUT' && el.type === 'range') return NATIVE_KEYS.range.has(code);
  const pressable = el.tagName === 'BUTTON' || el.tagName === 'SUMMARY' || el.tagName === 'A'
    || (el.tagName === 'INPUT' && ['checkbox', 'radio', 'button', 'submit', 'reset', 'file'].includes(el.type));
  return pressable && NATIVE_KEYS.press.has(code);
}

/** Whether a key event belongs to the focused element rather than to the character. */
function typing(e) {
  return isTextField(e.target) || controlKeepsKey(e.target, e.code);
}

/** The controls that give the keyboard back to the 3D view after the mouse used them. */
const POINTER_CONTROLS = 'button, summary, input[type=checkbox], input[type=radio], input[type=range]';

/**
 * After a button, checkbox, slider or panel title is used with the mouse, the keyboard
 * goes back to the 3D view: Space then jumps (instead of pressing the button again) and
 * the arrows set the speed (instead of moving the slider). Controls reached with Tab keep
 * the focus (and their own Space/Enter/arrows, see NATIVE_KEYS); W/A/S/D act either way.
 */
export function returnFocusAfterPointer(canvas) {
  document.addEventListener('pointerup', (e) => {
    const el = e.target instanceof Element ? e.target.closest(POINTER_CONTROLS) : null;
    if (!el || isTextField(el)) return;
    // after the click/change that this pointerup ends
    setTimeout(() => { if (document.activeElement === el || document.activeElement === document.body) canvas.focus({ preventScroll: true }); }, 0);
  }, true);
}

export class Keyboard {
  constructor(conn, view, onChange) {
    this.conn = conn;
    this.view = view;
    this.onChange = onChange;
    this.held = new Set();
    this.lastYaw = 0;
    window.addEventListener('keydown', (e) => this.down(e));
    window.addEventListener('keyup', (e) => this.up(e));
    window.addEventListener('blur', () => this.releaseAll());
    document.addEventListener('visibilitychange', () => { if (document.hidden) this.releaseAll(); });
    setInterval(() => this.tickYaw(), 100);
  }

  down(e) {
    if (typing(e)) return;
    const k = KEY_CODES[e.code];
    if (!k) return;
    e.preventDefault();
    if (e.repeat || this.held.has(e.code)) return; // auto-repeat is not a new press
    this.held.add(e.code);
    this.lastYaw = this.view.cameraYaw();
    this.conn.post('key', { key: e.code, down: true, yaw: this.lastYaw });
    this.onChange?.(this.held);
  }

  up(e) {
    const k = KEY_CODES[e.code];
    if (!k || !this.held.has(e.code)) return;
    e.preventDefault();
    this.held.delete(e.code);
    this.conn.post('key', { key: e.code, down: false, yaw: this.view.cameraYaw() });
    this.onChange?.(this.held);
  }

  releaseAll() {
    if (this.held.size === 0) return;
    this.held.clear();
    this.conn.post('keys', { held: [] });
    this.onChange?.(this.held);
  }

  tickYaw() {
    if (this.held.size === 0) return;
    const yaw = this.view.cameraYaw();
    if (Math.abs(yaw - this.lastYaw) > 0.02) {
      this.lastYaw = yaw;
      this.conn.post('camera', { yaw });
    }
  }
}

/** A stick's [x right, y forward] past this radius counts as pushed. */
const STICK_DEADZONE = 0.15;

/**
 * The first connected gamepad (standard mapping) drives the selected character: the left
 * stick moves it, the right stick sets its facing (strafing), the right trigger or a click
 * of the left stick sprints; camera-relative like the keys. Polled 20 times a second; a
 * change is sent as a 'stick' message, and one more when both sticks come to rest (the
 * keys drive again).
 */
export class Gamepad {
  constructor(conn, view) {
    this.conn = conn;
    this.view = view;
    this.last = null;
    setInterval(() => this.poll(), 50);
  }

  /** [x, y forward] of a stick from a gamepad's axes (its y is down-positive). */
  static stick(axes, i) {
    const x = Number(axes[i]) || 0;
    const y = -(Number(axes[i + 1]) || 0);
    return [Math.max(-1, Math.min(1, x)), Math.max(-1, Math.min(1, y))];
  }

  poll() {
    const pads = navigator.getGamepads ? navigator.getGamepads() : [];
    const pad = [...pads].find((p) => p && p.connected && p.axes.length >= 4);
    if (!pad) return;
    const left = Gamepad.stick(pad.axes, 0);
    const right = Gamepad.stick(pad.axes, 2);
    const sprint = (pad.buttons[7]?.value ?? 0) >= 0.5 || !!pad.buttons[10]?.pressed;
    this.send(left, right, sprint);
  }

  /** Send the sticks when they moved (or came to rest); also used by tests. */
  send(left, right, sprint = false) {
    const rest = Math.max(Math.hypot(...left), Math.hypot(...right)) <= STICK_DEADZONE;
    const r2 = (v) => v.map((c) => Math.round(c * 100) / 100);
    const now = { left: r2(left), right: r2(right), sprint };
    const yaw = this.view.cameraYaw();
    // (moved: a stick, the trigger, or the camera turned while a stick is held: camera-relative)
    const moved = !this.last || now.sprint !== this.last.sprint || Math.abs(yaw - this.last.yaw) > 0.02
      || [...now.left, ...now.right].some((c, i) => Math.abs(c - [...this.last.left, ...this.last.right][i]) > 0.02);
    if (rest && (!this.last || this.last.rest)) return;
    if (!moved && !rest) return;
    this.last = { ...now, rest, yaw };
    this.conn.post('stick', { ...now, yaw });
  }
}

const MAX_POINTS = 4096;

export class Pointer {
  /**
   * @param {object} app  {conn, view, tool(): string, pathMode(): string, pathScale(): number,
   *                       obstacleTemplate(): object, onObstacleSelect(id), toast(text)}
   */
  constructor(app) {
    this.app = app;
    const c = app.view.canvas;
    this.drawing = null;
    this.dragging = null;
    c.addEventListener('pointerdown', (e) => this.down(e));
    c.addEventListener('pointermove', (e) => this.move(e));
    c.addEventListener('pointerup', (e) => this.up(e));
    c.addEventListener('pointercancel', (e) => this.up(e));
    window.addEventListener('keydown', (e) => {
      if (typing(e)) return;
      if ((e.key === 'Delete' || e.key === 'Backspace') && app.view.obstacleSel != null) {
        e.preventDefault();
        app.conn.send('obstacle_remove', { id: app.view.obstacleSel });
        app.onObstacleSelect(null);
      }
    });
  }

  down(e) {
    if (e.button !== 0) return;
    const { view } = this.app;
    const tool = this.app.tool();
    if (tool === 'path') {
      const p = view.groundAt(e.clientX, e.clientY);
      if (!p) return;
      view.controls.enabled = false;
      this.app.view.canvas.setPointerCapture(e.pointerId);
      this.drawing = { t0: e.timeStamp, points: [[0, p.x, p.z]] };
      e.preventDefault();
    } else if (tool === 'obstacle') {
      const id = view.obstacleAt(e.clientX, e.clientY);
      if (id != null) {
        this.app.onObstacleSelect(id);
        const m = view.obstacles.get(id);
        const p = view.groundAt(e.clientX, e.clientY);
        view.controls.enabled = false;
        this.app.view.canvas.setPointerCapture(e.pointerId);
        this.dragging = { id, mesh: m, offset: p ? [m.position.x - p.x, m.position.z - p.z] : [0, 0], moved: false };
        m.userData.dragging = true;
      } else {
        const p = view.groundAt(e.clientX, e.clientY);
        if (!p) return;
        const o = { ...this.app.obstacleTemplate(), center: [round(p.x), round(p.z)] };
        this.app.conn.send('obstacle_add', { obstacle: o }).then((r) => {
          if (r.type === 'ack') this.app.onObstacleSelect(r.id);
          else this.app.toast(r.message || 'obstacle refused');
        });
      }
      e.preventDefault();
    } else if (tool === 'add') {
      const p = view.groundAt(e.clientX, e.clientY);
      if (!p) return;
      const yaw = view.cameraYaw();
      this.app.conn.send('add_character', { position: [round(p.x), round(p.z)], facing: [Math.sin(yaw), Math.cos(yaw)] });
    }
  }

  move(e) {
    const { view } = this.app;
    if (this.drawing) {
      const events = e.getCoalescedEvents ? e.getCoalescedEvents() : [e];
      for (const ev of events.length ? events : [e]) {
        const p = view.groundAt(ev.clientX, ev.clientY);
        if (!p) continue;
        const t = (ev.timeStamp - this.drawing.t0) / 1000;
        const pts = this.drawing.points;
        const last = pts[pts.length - 1];
        if (t <= last[0] + 1e-4 || Math.hypot(p.x - last[1], p.z - last[2]) < 0.02) continue;
        pts.push([t, p.x, p.z]);
      }
      view.setDraft(this.drawing.points);
    } else if (this.dragging) {
      const p = view.groundAt(e.clientX, e.clientY);
      if (!p) return;
      this.dragging.mesh.position.set(p.x + this.dragging.offset[0], 0, p.z + this.dragging.offset[1]);
      this.dragging.moved = true;
    }
  }

  up(e) {
    const { view, conn } = this.app;
    if (this.drawing) {
      const pts = this.drawing.points;
      this.drawing = null;
      view.controls.enabled = true;
      view.setDraft(null);
      let len = 0;
      for (let i = 1; i < pts.length; i++) len += Math.hypot(pts[i][1] - pts[i - 1][1], pts[i][2] - pts[i - 1][2]);
      if (pts.length < 3 || len < 0.3) { this.app.toast('path too short: drag on the ground to draw one'); return; }
      let sent = pts;
      if (sent.length > MAX_POINTS) {
        const step = Math.ceil(sent.length / MAX_POINTS);
        sent = sent.filter((_, i) => i % step === 0 || i === sent.length - 1);
      }
      sent = sent.map(([t, x, z]) => [Math.round(t * 1e4) / 1e4, round(x), round(z)]);
      sent = sent.filter((p, i) => i === 0 || p[0] > sent[i - 1][0]);
      const mode = this.app.pathMode();
      const msg = { points: sent, mode, scale: this.app.pathScale() };
      if (mode === 'drawn' && this.app.pathLoop?.()) msg.loop = true;
      if (mode !== 'drawn' && this.app.pathFacing) {
        msg.facing = this.app.pathFacing();
        if (msg.facing === 'joystick') msg.joystick_deg = Math.max(-180, Math.min(180, this.app.pathJoystick()));
      }
      conn.send('path', msg).then((r) => {
        if (r.type === 'error') this.app.toast(r.message);
      });
    } else if (this.dragging) {
      const d = this.dragging;
      this.dragging = null;
      view.controls.enabled = true;
      d.mesh.userData.dragging = false;
      if (d.moved) {
        const o = { ...d.mesh.userData.o };
        delete o.id; delete o.t0;
        o.center = [round(d.mesh.position.x), round(d.mesh.position.z)];
        d.mesh.userData.o = { ...d.mesh.userData.o, center: o.center, t0: view.simTime };
        conn.send('obstacle_update', { id: d.id, obstacle: o });
      }
    }
  }
}

function round(v) { return Math.round(v * 1000) / 1000; }
