// Small DOM helpers, dialogs (focus trapped, Escape closes, focus returns) and formats.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') el.className = value;
    else if (name === 'text') el.textContent = value;
    else if (name.startsWith('on')) el.addEventListener(name.slice(2).toLowerCase(), value);
    else if (name in el && typeof value !== 'string') el[name] = value;
    else el.setAttribute(name, value === true ? '' : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// replaceChildren without the absent ones (a null child would show as the text "null")
export function put(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

let uid = 0;
export const newId = (prefix) => `${prefix}-${++uid}`;

export function announce(text) {
  const region = document.getElementById('announce');
  region.textContent = '';
  setTimeout(() => { region.textContent = text; }, 30);
}

// An error as the API words it, in a region screen readers announce.
export function errorBox() {
  const box = h('p', { class: 'error', role: 'alert', hidden: true });
  box.show = (err) => {
    box.textContent = err && err.code ? `${err.code}: ${err.message}` : String(err);
    box.hidden = false;
  };
  box.clear = () => { box.hidden = true; box.textContent = ''; };
  return box;
}

const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]):not([type="hidden"]), '
  + 'select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

function focusables(root) {
  return [...root.querySelectorAll(FOCUSABLE)].filter((el) => !el.closest('[hidden]') && el.getClientRects().length);
}

// A modal dialog: showModal() makes the page inert; Tab and Shift+Tab cycle inside it;
// Escape (the cancel event) closes it; focus goes back to what opened it.
export function openDialog({ title, body, actions = [], onClose, wide = false }) {
  const titleId = newId('dialog-title');
  const opener = document.activeElement;
  const closeButton = h('button', { type: 'button', class: 'quiet close', 'aria-label': 'Close', text: '×' });
  const dialog = h('dialog', { class: wide ? 'wide' : '', 'aria-labelledby': titleId },
    h('div', { class: 'dialog-head' }, h('h2', { id: titleId, text: title }), closeButton),
    h('div', { class: 'dialog-body' }, body),
    actions.length ? h('div', { class: 'dialog-actions' }, actions) : null);
  let closed = false;
  const close = (result) => {
    if (closed) return;
    closed = true;
    dialog.close();
    dialog.remove();
    if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
    if (onClose) onClose(result);
  };
  closeButton.addEventListener('click', () => close());
  dialog.addEventListener('cancel', (event) => { event.preventDefault(); close(); });
  dialog.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') { event.preventDefault(); close(); return; }
    if (event.key !== 'Tab') return;
    const items = focusables(dialog);
    if (!items.length) { event.preventDefault(); return; }
    const first = items[0];
    const last = items[items.length - 1];
    if (event.shiftKey && (document.activeElement === first || !dialog.contains(document.activeElement))) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && (document.activeElement === last || !dialog.contains(document.activeElement))) {
      event.preventDefault();
      first.focus();
    }
  });
  document.body.append(dialog);
  dialog.showModal();
  const first = dialog.querySelector('[autofocus]') || focusables(dialog.querySelector('.dialog-body'))[0] || closeButton;
  first.focus();
  return { dialog, close };
}

export function confirmDialog(message, { confirmLabel = 'Confirm', title = 'Please confirm' } = {}) {
  return new Promise((resolve) => {
    let answer = false;
    const cancel = h('button', { type: 'button', text: 'Cancel' });
    const confirm = h('button', { type: 'button', class: 'danger', text: confirmLabel });
    const { close } = openDialog({
      title, body: h('p', { text: message }), actions: [cancel, confirm],
      onClose: () => resolve(answer),
    });
    cancel.addEventListener('click', () => close());
    confirm.addEventListener('click', () => { answer = true; close(); });
    cancel.focus();
  });
}

// A labelled form field; `input` is the control, `hint` optional help text.
export function field(label, input, hint) {
  const id = input.id || newId('field');
  input.id = id;
  const message = h('span', { class: 'field-error', id: `${id}-error`, hidden: true });
  const help = hint ? h('span', { class: 'hint', id: `${id}-hint`, text: hint }) : null;
  input.setAttribute('aria-describedby', [help && help.id, message.id].filter(Boolean).join(' '));
  const wrap = h('div', { class: 'field' }, h('label', { for: id, text: label }), input, help, message);
  wrap.setError = (text) => {
    message.textContent = text || '';
    message.hidden = !text;
    if (text) input.setAttribute('aria-invalid', 'true'); else input.removeAttribute('aria-invalid');
  };
  return wrap;
}

export function badge(text, kind = '') {
  return h('span', { class: `badge ${kind}`.trim(), text });
}

const STATUS_KIND = { PROCESSED: 'ok', FAILED: 'bad', PENDING: 'wait', PROCESSING: 'wait' };
export function statusBadge(status) {
  return badge(status, STATUS_KIND[status] || '');
}

export const fmtNumber = (n) => (n === null || n === undefined ? '–' : Number(n).toLocaleString('en'));
export const fmtScore = (n) => (n === null || n === undefined ? '–' : Number(n).toFixed(3));
export function fmtDate(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short' });
}
export function fmtBytes(n) {
  if (n === null || n === undefined) return '–';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

// A table that becomes one card per row on a phone (the header text labels each cell).
export function table(caption, headers, rows) {
  return h('div', { class: 'table-wrap' },
    h('table', { class: 'cards' },
      h('caption', { class: 'visually-hidden', text: caption }),
      h('thead', {}, h('tr', {}, headers.map((text) => h('th', { scope: 'col', text })))),
      h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((cell, i) => h('td', { 'data-label': headers[i] }, cell)))))));
}

export function busy(button, promise) {
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  return promise.finally(() => { button.disabled = false; button.removeAttribute('aria-busy'); });
}
