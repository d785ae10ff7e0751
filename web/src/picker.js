// A searchable, grouped picker of data files (the GenMM examples): a filter box, a list
// grouped by folder (one <optgroup> per folder, full names as titles), and the chosen
// files, by their full names, each with a button that removes it.
//
// Keyboard: type in the filter to narrow the list (every word must appear in the folder or
// name, in any order and case); Enter in the filter picks the only match; ArrowDown goes to
// the list. The list is a native multiple <select>: arrows move, Shift+arrows extend,
// Ctrl/Cmd+click adds. Choices survive a change of the filter.

/** The folder a file is shown under: its data folder's name and its directory inside it. */
export function fileFolder(f) {
  const name = f.name || f.id.slice(f.id.indexOf(':') + 1);
  const slash = name.lastIndexOf('/');
  const dir = slash >= 0 ? name.slice(0, slash) : '';
  const root = f.root || f.id.slice(0, f.id.indexOf(':'));
  if (root === 'data') return dir || '(data folder)';
  return dir ? `${root}: ${dir}` : root;
}

/** A file's short label: its base name without the extension. */
export function fileLabel(f) {
  const name = f.name || f.id.slice(f.id.indexOf(':') + 1);
  return name.slice(name.lastIndexOf('/') + 1).replace(/\.[^.]+$/, '');
}

/** The lower-cased words of a filter text. */
export function filterTerms(text) {
  return text.toLowerCase().split(/[\s,]+/).filter(Boolean);
}

/** Whether a file matches every word of ``terms`` (in its folder or name, words joined by - or _ too). */
export function fileMatches(f, terms) {
  if (!terms.length) return true;
  const hay = `${fileFolder(f)}/${fileLabel(f)}`.toLowerCase();
  const loose = hay.replace(/[-_]+/g, ' ');
  return terms.every((t) => hay.includes(t) || loose.includes(t));
}

/** ``[{folder, files}]``: the files matching ``terms``, grouped by folder, in list order. */
export function groupFiles(files, terms) {
  const groups = new Map();
  for (const f of files) {
    if (!fileMatches(f, terms)) continue;
    const folder = fileFolder(f);
    if (!groups.has(folder)) groups.set(folder, []);
    groups.get(folder).push(f);
  }
  return [...groups].map(([folder, fs]) => ({ folder, files: fs }));
}

/** Fill a <select> with grouped options (full name as each option's title). */
export function fillGrouped(select, groups, isChosen) {
  select.textContent = '';
  for (const g of groups) {
    const og = document.createElement('optgroup');
    og.label = `${g.folder} (${g.files.length})`;
    for (const f of g.files) {
      const o = document.createElement('option');
      o.value = f.id;
      o.textContent = fileLabel(f);
      o.title = f.name || f.id;
      o.selected = isChosen(f.id);
      og.append(o);
    }
    select.append(og);
  }
}

export class FilePicker {
  /**
   * @param {object} opts  {id: prefix of the elements' ids, label: what is picked,
   *   max: how many may be chosen, onLimit(text): told when more are asked for}
   */
  constructor({ id, label, max, onLimit }) {
    this.max = max;
    this.onLimit = onLimit;
    this.files = [];
    this.byId = new Map();
    this.chosen = new Set();
    this.filter = el('input', { type: 'search', id: `${id}-filter`, placeholder: `filter ${label}: words of folder or name`,
      'aria-controls': `${id}-examples`, autocomplete: 'off' });
    this.list = el('select', { id: `${id}-examples`, multiple: '', size: '10', 'aria-label': label });
    this.count = el('div', { class: 'note', id: `${id}-count`, 'aria-live': 'polite' });
    this.chosenEl = el('div', { class: 'chosen', id: `${id}-chosen`, 'aria-label': `chosen ${label}` });
    this.element = el('div', { class: 'picker' });
    this.element.append(this.filter, this.list, this.count, this.chosenEl);
    this.filter.addEventListener('input', () => this.render());
    this.filter.addEventListener('keydown', (e) => this.filterKey(e));
    this.list.addEventListener('change', () => this.takeSelection());
  }

  /** The data files to offer (``[{id, name, root}]``); choices no longer offered are dropped. */
  setFiles(files) {
    this.files = files;
    this.byId = new Map(files.map((f) => [f.id, f]));
    for (const id of [...this.chosen]) if (!this.byId.has(id)) this.chosen.delete(id);
    this.render();
  }

  /** The chosen file ids, in the order they were chosen. */
  values() { return [...this.chosen]; }

  /** The files the filter shows. */
  visible() { return groupFiles(this.files, filterTerms(this.filter.value)); }

  render() {
    const groups = this.visible();
    fillGrouped(this.list, groups, (id) => this.chosen.has(id));
    const shown = groups.reduce((n, g) => n + g.files.length, 0);
    const folders = groups.length === 1 ? '1 folder' : `${groups.length} folders`;
    this.count.textContent = `${shown} of ${this.files.length} files shown, in ${folders}`
      + (this.chosen.size ? ` · ${this.chosen.size} chosen (at most ${this.max})` : '');
    this.renderChosen();
  }

  renderChosen() {
    this.chosenEl.textContent = '';
    for (const id of this.chosen) {
      const f = this.byId.get(id);
      const name = f ? (f.name || f.id) : id;
      const rm = el('button', { type: 'button', title: `remove ${name}`, 'aria-label': `remove ${name}` });
      rm.textContent = '×';
      rm.addEventListener('click', () => { this.chosen.delete(id); this.render(); });
      const chip = el('span', { class: 'chip', 'data-id': id, title: id });
      chip.append(el('span', { class: 'chip-name' }, name), rm);
      this.chosenEl.append(chip);
    }
  }

  /** The list's selection decides the choice among the files it shows (others keep theirs). */
  takeSelection() {
    const added = [];
    for (const o of this.list.options) {
      if (o.selected && !this.chosen.has(o.value)) added.push(o.value);
      else if (!o.selected) this.chosen.delete(o.value);
    }
    for (const id of added) {
      if (this.chosen.size >= this.max) { this.onLimit?.(`at most ${this.max} examples at once`); break; }
      this.chosen.add(id);
    }
    for (const o of this.list.options) o.selected = this.chosen.has(o.value);
    this.render();
  }

  filterKey(e) {
    const opts = [...this.list.options];
    if (e.key === 'ArrowDown' && opts.length) {
      e.preventDefault();
      this.list.focus();
      if (!opts.some((o) => o.selected)) { opts[0].selected = true; this.takeSelection(); }
    } else if (e.key === 'Enter') {
      e.preventDefault();
      if (opts.length === 1) { opts[0].selected = true; this.takeSelection(); } else this.onLimit?.(
        opts.length ? `${opts.length} files match: narrow the filter or choose in the list` : 'no file matches the filter');
    }
  }
}

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text != null) e.textContent = text;
  return e;
}
