// The stockflow operations console. Plain JavaScript, no build step, nothing from another
// origin. The token lives in sessionStorage (this tab only, gone when it closes) and goes to
// the console's /api proxy as a bearer header; the services verify it and check every role.
// The claims are decoded here only to say who is signed in and to hide what the role may not do.
'use strict';

const TOKEN_KEY = 'stockflow.console.token';
const READERS = ['viewer', 'operator', 'approver', 'admin'];
// Who may do what, as docs/security.md's table says; the services enforce it.
const RULES = {
  read: READERS,
  move: ['operator', 'admin'],      // adjustments requested, purchases, receipts
  decide: ['approver'],             // approve / reject, never one's own
  verify: ['operator', 'admin'],
  check: ['operator', 'admin'],     // reconcile check
  repair: ['admin'],                // reconcile repair
};
const JOBS = {
  stock: ['overdue_locks', 'orphan_locks', 'ledger_summary', 'gate', 'outbox'],
  order: ['stuck_orders', 'outbox'],
  'payment-adapter': ['paid_not_sold', 'lost_callbacks', 'unconfirmed_refunds', 'outbox'],
  timeout: ['outbox'],
};
const CHANGE_TYPES = ['lock', 'sell', 'release_timeout', 'release_cancel', 'refund_restock', 'ship',
  'purchase_expected', 'purchase_inbound', 'purchase_cancelled', 'manual_adjust', 'stocktake', 'rebalance'];
const FIGURES = ['on_hand', 'available', 'locked', 'sold', 'incoming'];

let session = null; // {token, claims}
let live = null;    // the open water-level stream: {abort}

// --- small helpers ---

const $ = (sel, el = document) => el.querySelector(sel);

// el builds an element; strings become text nodes (never HTML), so nothing a service answers
// is ever parsed as markup.
function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

const svg = (tag, attrs = {}) => {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};

function flash(text, isError) {
  const f = $('#flash');
  f.textContent = text;
  f.className = isError ? 'error' : '';
  f.hidden = false;
}

const fmtTime = (t) => (t ? new Date(t).toLocaleString() : '');

function can(action) {
  return session !== null && session.claims.roles.some((r) => RULES[action].includes(r));
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(`${code}: ${message}`);
    this.status = status;
    this.code = code;
  }
}

// api calls a service through the console with the signed-in token.
async function api(method, service, path, body, headers = {}) {
  const h = { Authorization: 'Bearer ' + session.token, ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(`/api/${service}${path}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, 'network', `the console did not answer (${e.message})`);
  }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) {
    const err = data && data.error ? data.error : { code: `http_${resp.status}`, message: text.slice(0, 200) };
    if (resp.status === 401) {
      signOut(`Your token was refused (${err.code}: ${err.message}). Sign in again.`);
    }
    throw new ApiError(resp.status, err.code, err.message);
  }
  return data;
}

// --- sign in ---

// decodeClaims reads a JWT's payload for display only; it checks the shape, not the signature.
function decodeClaims(token) {
  const parts = token.split('.');
  if (parts.length !== 3) throw new Error('this is not a JWT: it needs three dot-separated parts');
  let claims;
  try {
    const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
    claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))));
  } catch {
    throw new Error('the token\'s payload is not base64url JSON');
  }
  if (typeof claims.sub !== 'string' || !claims.sub) throw new Error('the token names no subject (sub)');
  if (!Array.isArray(claims.roles) || claims.roles.length === 0) throw new Error('the token carries no roles');
  if (typeof claims.exp === 'number' && claims.exp * 1000 < Date.now()) {
    throw new Error(`the token expired at ${new Date(claims.exp * 1000).toLocaleString()}`);
  }
  return claims;
}

function signIn(token) {
  token = token.trim().replace(/^Bearer\s+/i, '');
  const claims = decodeClaims(token);
  sessionStorage.setItem(TOKEN_KEY, token);
  session = { token, claims };
}

function signOut(message) {
  stopLive();
  sessionStorage.removeItem(TOKEN_KEY);
  session = null;
  render();
  if (message) {
    const e = $('#signin-error');
    e.textContent = message;
    e.hidden = false;
  }
}

function showMe() {
  const signed = session !== null;
  $('#signin').hidden = signed;
  $('#nav').hidden = !signed;
  $('#me').hidden = !signed;
  if (!signed) return;
  $('#who').textContent = session.claims.sub;
  $('#roles').replaceChildren(...session.claims.roles.map((r) => el('span', { class: 'role' }, r)));
  $('#expires').textContent = session.claims.exp ? `until ${new Date(session.claims.exp * 1000).toLocaleTimeString()}` : '';
}

// confirmAction asks in the page's own dialog (not window.confirm) and resolves true on Confirm.
function confirmAction(text) {
  const d = $('#confirm');
  $('#confirm-text').textContent = text;
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
    d.returnValue = '';
    d.showModal();
  });
}

// --- routing ---

function render() {
  stopLive();
  showMe();
  // Each render draws into a fresh container: a page still loading from an earlier render
  // then fills a container no longer on the page instead of mixing into this one.
  const view = el('div');
  $('#view').replaceChildren(view);
  if (!session) return;
  const [, page, arg] = (location.hash || '#/skus').split('/').map(decodeURIComponent);
  const pages = { skus: skusPage, sku: skuPage, adjustments: adjustmentsPage, adjustment: adjustmentPage, reconcile: reconcilePage, orders: ordersPage, compare: comparePage };
  (pages[page] || skusPage)(view, arg).catch((e) => flash(e.message, true));
}

// --- SKUs ---

function stackedBar(s) {
  const total = Math.max(s.available + s.locked + s.sold + s.incoming, 1);
  const seg = (name, n) => {
    if (n <= 0) return null; // an empty segment would still show its padding
    const d = el('div', { class: 'seg-' + name, title: `${name} ${n}`, 'data-figure': name }, `${name} ${n}`);
    d.style.width = `${(100 * n) / total}%`;
    return d;
  };
  return el('div', { class: 'bar' }, seg('available', s.available), seg('locked', s.locked), seg('sold', s.sold), seg('incoming', s.incoming));
}

// skusPage lists stock's SKUs a page at a time (prefix filter), each with its stacked bar.
async function skusPage(view, prefix) {
  const input = el('input', { id: 'sku-input', placeholder: 'CUP-1', required: true });
  const filter = el('input', { id: 'sku-prefix', placeholder: 'prefix', value: prefix || '' });
  const list = el('tbody');
  const more = el('button', { id: 'sku-more', hidden: true }, 'more ▶');
  view.append(el('section', { class: 'card' },
    el('h2', {}, 'SKUs'),
    el('form', { class: 'inline', id: 'sku-open', onsubmit: (e) => { e.preventDefault(); location.hash = '#/sku/' + encodeURIComponent(input.value.trim()); } },
      el('label', {}, 'SKU', input), el('button', { type: 'submit' }, 'Open')),
    el('form', { class: 'inline', id: 'sku-filter', onsubmit: (e) => { e.preventDefault(); location.hash = '#/skus/' + encodeURIComponent(filter.value.trim()); } },
      el('label', {}, 'starting with', filter), el('button', { type: 'submit' }, 'Filter')),
    el('table', { id: 'sku-list' }, el('thead', {}, el('tr', {}, el('th', {}, 'SKU'), ...FIGURES.map((f) => el('th', { class: 'num' }, f)), el('th', {}, ''))), list),
    el('p', {}, more)));
  let after = '';
  const page = async () => {
    const q = new URLSearchParams({ limit: '50' });
    if (prefix) q.set('prefix', prefix);
    if (after) q.set('after', after);
    const r = await api('GET', 'stock', `/v1/skus?${q}`);
    for (const s of r.skus) {
      list.append(el('tr', { class: 'clickable', 'data-sku': s.sku, onclick: () => { location.hash = '#/sku/' + encodeURIComponent(s.sku); } },
        el('td', {}, s.sku), ...FIGURES.map((f) => el('td', { class: 'num' }, s[f])), el('td', {}, stackedBar(s))));
    }
    if (r.skus.length === 0 && !after) list.append(el('tr', {}, el('td', { colspan: 7, class: 'muted' }, prefix ? `No SKU starts with ${prefix}.` : 'No SKUs yet.')));
    after = r.next_after || '';
    more.hidden = !after;
  };
  more.addEventListener('click', () => page().catch((e) => flash(e.message, true)));
  await page();
}

async function skuPage(view, sku) {
  let s;
  try {
    s = await api('GET', 'stock', `/v1/skus/${encodeURIComponent(sku)}`);
  } catch (e) {
    view.append(el('section', { class: 'card' }, el('h2', {}, sku), el('p', { class: 'error', id: 'sku-error' }, `Cannot read ${sku}: ${e.message}`)));
    return;
  }
  const summary = el('section', { class: 'card', id: 'summary' });
  const fold = el('section', { class: 'card', id: 'fold' });
  const liveCard = el('section', { class: 'card', id: 'live' });
  const ledgerCard = el('section', { class: 'card', id: 'ledger' });
  view.append(summary);
  const purchases = el('section', { class: 'card', id: 'purchases' });
  if (can('move')) view.append(movesCard(s));
  view.append(liveCard, purchases, fold, ledgerCard);
  purchasesCard(purchases, sku).catch((e) => purchases.append(el('p', { class: 'error' }, e.message)));
  drawSummary(summary, s);
  api('GET', 'stock', `/v1/skus/${encodeURIComponent(sku)}/gate`).then((g) => {
    const state = g.armed ? `armed by ${g.armed_by} at ${fmtTime(g.armed_at)}: ${g.remaining} left in Redis, ${g.available} available in the database, drift ${g.drift}`
      : g.planned ? `planned: arms at ${fmtTime(g.arm_at)} (by ${g.armed_by})` : 'not armed';
    summary.append(el('p', { id: 'gate' }, 'Flash-sale gate: ', state));
  }).catch(() => {});
  liveCard.append(el('h2', {}, 'Water level'),
    el('button', { id: 'live-start', onclick: () => startLive(sku, liveCard, (x) => drawSummary(summary, { ...s, ...x, updated_at: x.at })) }, 'Watch live'),
    el('span', { id: 'live-status', class: 'muted' }, ' not watching'));
  drawLedger(ledgerCard, sku);
  drawFold(fold, s, await loadLedger(sku, fold));
}

function drawSummary(card, s) {
  card.replaceChildren(el('h2', {}, `SKU ${s.sku}`),
    el('table', { id: 'figures' },
      el('tr', {}, ...FIGURES.map((f) => el('th', { class: 'num' }, f)), el('th', { class: 'num' }, 'slots')),
      el('tr', {}, ...FIGURES.map((f) => el('td', { class: 'num', 'data-figure': f }, s[f])), el('td', { class: 'num' }, s.slots))),
    el('h3', {}, 'on hand = available + locked + sold; incoming is on its way'),
    el('div', { id: 'bar' }, stackedBar(s)),
    el('p', { class: 'muted' }, `updated ${fmtTime(s.updated_at)}`));
}

// movesCard is the adjustment form. A stocktake is a count: as it is typed the card shows the
// book's on hand and the variance the count would book, and approval (by a second person)
// books it against the ledger as it stood when the count was filed.
function movesCard(s) {
  const sku = s.sku;
  const kind = el('select', { id: 'adj-kind' }, el('option', { value: 'manual_adjust' }, 'manual_adjust (delta)'), el('option', { value: 'stocktake' }, 'stocktake (counted)'));
  const qty = el('input', { id: 'adj-qty', type: 'number', placeholder: '-3 or 340' });
  const reason = el('input', { id: 'adj-reason', placeholder: 'damaged in transit' });
  const preview = el('p', { id: 'adj-preview', class: 'muted' });
  const result = el('p', { id: 'move-result' });
  const showPreview = () => {
    const n = Number(qty.value);
    if (qty.value === '' || !Number.isInteger(n)) { preview.textContent = ''; return; }
    if (kind.value === 'stocktake') {
      const v = n - s.on_hand;
      preview.textContent = `Book on hand ${s.on_hand}; counted ${n} → variance ${v > 0 ? '+' : ''}${v}${v === 0 ? ' (the count agrees)' : ''}.`;
    } else {
      preview.textContent = `On hand ${s.on_hand} → ${s.on_hand + n}, available ${s.available} → ${s.available + n} once approved.`;
    }
  };
  kind.addEventListener('input', showPreview);
  qty.addEventListener('input', showPreview);
  const submitAdj = async (e) => {
    e.preventDefault();
    const n = Number(qty.value);
    if (qty.value === '' || !Number.isInteger(n)) { flash('Enter a whole number of units', true); return; }
    const body = { kind: kind.value, reason: reason.value };
    if (kind.value === 'stocktake') body.counted = n; else body.delta = n;
    try {
      const a = await api('POST', 'stock', `/v1/skus/${encodeURIComponent(sku)}/adjustments`, body);
      result.replaceChildren('Adjustment ', el('a', { href: `#/adjustment/${a.id}`, id: 'adj-link' }, `#${a.id}`), ` ${a.state}, requested by ${a.requested_by}; a second person with the approver role decides it.`);
      flash(`Adjustment #${a.id} requested by ${a.requested_by}: ${a.state}`);
    } catch (err) { flash(`Adjustment refused: ${err.message}`, true); }
  };
  return el('section', { class: 'card', id: 'moves' }, el('h2', {}, 'Adjustment or stocktake (four eyes)'),
    el('form', { class: 'inline', id: 'adj-form', onsubmit: submitAdj },
      el('label', {}, 'kind', kind), el('label', {}, 'units', qty), el('label', {}, 'reason', reason),
      el('button', { type: 'submit', id: 'adj-submit' }, 'Request adjustment')),
    preview, result);
}

// purchasesCard is the SKU's purchase orders: expected units arrive as incoming, are received
// in parts (each receipt moves incoming to on hand) and an order is closed when the rest will
// not come. Each action carries an idempotency key made once per form, so a retried click
// cannot book twice.
async function purchasesCard(card, sku) {
  const key = () => (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random());
  let createKey = key();
  const qty = el('input', { id: 'po-qty', type: 'number', min: '1', placeholder: '50' });
  const remark = el('input', { id: 'po-remark', placeholder: 'supplier, reference' });
  const list = el('tbody');
  const create = async (e) => {
    e.preventDefault();
    const n = Number(qty.value);
    if (!Number.isInteger(n) || n <= 0) { flash('Enter a positive whole number of units', true); return; }
    try {
      const po = await api('POST', 'stock', `/v1/skus/${encodeURIComponent(sku)}/purchase-orders`, { quantity: n, remark: remark.value }, { 'Idempotency-Key': createKey });
      createKey = key();
      flash(`Purchase order #${po.id} for ${po.expected} by ${po.created_by}: incoming +${po.expected}`);
      render();
    } catch (err) { flash(`Purchase order refused: ${err.message}`, true); }
  };
  const receive = (po, input, rkey) => async () => {
    const n = Number(input.value);
    if (!Number.isInteger(n) || n <= 0) { flash('Enter a positive whole number of units received', true); return; }
    try {
      const after = await api('POST', 'stock', `/v1/purchase-orders/${po.id}/receipts`, { quantity: n }, { 'Idempotency-Key': rkey });
      flash(`Purchase order #${po.id}: received ${n}, ${after.received} of ${after.expected} in all (${after.status})`);
      render();
    } catch (err) { flash(`Receipt refused: ${err.message}`, true); }
  };
  const close = (po) => async () => {
    if (!(await confirmAction(`Close purchase order #${po.id}? The ${po.expected - po.received} units not received leave incoming: they will not come.`))) return;
    try {
      const after = await api('POST', 'stock', `/v1/purchase-orders/${po.id}/close`, undefined, { 'Idempotency-Key': key() });
      flash(`Purchase order #${po.id} ${after.status}: ${after.received} of ${after.expected} received`);
      render();
    } catch (err) { flash(`Close refused: ${err.message}`, true); }
  };
  card.replaceChildren(el('h2', {}, 'Purchase orders'),
    can('move') ? el('form', { class: 'inline', id: 'po-form', onsubmit: create },
      el('label', {}, 'units expected', qty), el('label', {}, 'remark', remark),
      el('button', { type: 'submit', id: 'po-create' }, 'New purchase order')) : null,
    el('table', { id: 'po-list' }, el('thead', {}, el('tr', {}, ['#', 'status', 'received / expected', 'receipts', 'by', ''].map((h) => el('th', {}, h)))), list));
  const r = await api('GET', 'stock', `/v1/skus/${encodeURIComponent(sku)}/purchase-orders`);
  if (r.purchase_orders.length === 0) list.append(el('tr', {}, el('td', { colspan: 6, class: 'muted' }, 'No purchase orders.')));
  for (const po of r.purchase_orders) {
    const open = po.status === 'open' || po.status === 'partially_received';
    const input = el('input', { type: 'number', min: '1', max: String(po.expected - po.received), value: String(po.expected - po.received), 'data-receive-qty': po.id, class: 'narrow' });
    list.append(el('tr', { 'data-po': po.id },
      el('td', { class: 'num' }, po.id),
      el('td', {}, el('span', { class: `state state-${po.status}`, 'data-po-status': po.id }, po.status)),
      el('td', { class: 'num', 'data-po-received': po.id }, `${po.received} / ${po.expected}`),
      el('td', {}, (po.receipts || []).map((x) => el('div', {}, `${x.quantity} by ${x.operator}, ${fmtTime(x.at)}`))),
      el('td', {}, po.created_by),
      el('td', {}, open && can('move') ? [input, el('button', { 'data-receive': po.id, onclick: receive(po, input, key()) }, 'Receive'), ' ',
        el('button', { 'data-close': po.id, onclick: close(po) }, 'Close')] : null)));
  }
}

// loadLedger reads the whole ledger of a SKU, 1,000 rows a page (up to 50,000 rows): the fold
// needs every row. Past that the fold says so, and stock's verify (below it) is the check.
async function loadLedger(sku, card) {
  card.replaceChildren(el('h2', {}, 'Why is this number what it is'), el('p', { class: 'muted' }, 'reading the ledger…'));
  const entries = [];
  let after = 0;
  for (let page = 0; page < 50; page++) {
    const r = await api('GET', 'stock', `/v1/skus/${encodeURIComponent(sku)}/ledger?after=${after}&limit=1000`);
    entries.push(...r.entries);
    if (!r.next_after) return entries;
    after = r.next_after;
  }
  entries.truncated = true;
  return entries;
}

// drawFold is "why is this number what it is": each slot's last ledger row says what the slot
// holds; their sum must be the summary. Next to it, every change type's rows and units.
function drawFold(card, s, entries) {
  const bySlot = new Map();
  const byType = new Map();
  for (const e of entries) {
    bySlot.set(e.slot, e.after);
    const t = byType.get(e.change_type) || { rows: 0, qty: 0 };
    t.rows++; t.qty += e.qty;
    byType.set(e.change_type, t);
  }
  const folded = Object.fromEntries(FIGURES.map((f) => [f, 0]));
  for (const a of bySlot.values()) for (const f of FIGURES) folded[f] += a[f];
  const rows = FIGURES.map((f) => {
    const same = folded[f] === s[f];
    return el('tr', {}, el('td', {}, f), el('td', { class: 'num' }, s[f]), el('td', { class: 'num', 'data-fold': f }, folded[f]),
      el('td', { class: same ? 'ok' : 'error' }, same ? 'matches' : `differs by ${s[f] - folded[f]}`));
  });
  const consistent = FIGURES.every((f) => folded[f] === s[f]);
  card.replaceChildren(el('h2', {}, 'Why is this number what it is'),
    el('p', { id: 'fold-verdict', class: consistent ? 'ok' : 'error' },
      entries.truncated ? `The ledger has more than ${entries.length} rows: too many to fold here; Verify below folds it on the server.`
        : consistent ? `The ledger's ${entries.length} rows fold to the summary.` : `The ledger's ${entries.length} rows do not fold to the summary.`),
    el('table', {}, el('tr', {}, el('th', {}, 'figure'), el('th', { class: 'num' }, 'summary'), el('th', { class: 'num' }, 'ledger fold'), el('th', {}, '')), rows),
    el('h3', {}, 'Rows by change type'),
    el('table', { id: 'by-type' }, el('tr', {}, el('th', {}, 'change type'), el('th', { class: 'num' }, 'rows'), el('th', { class: 'num' }, 'units')),
      [...byType.entries()].map(([t, v]) => el('tr', {}, el('td', {}, t), el('td', { class: 'num' }, v.rows), el('td', { class: 'num' }, v.qty)))));
  if (can('verify')) {
    const out = el('p', { id: 'verify-result' });
    card.append(el('button', {
      id: 'verify', onclick: async () => {
        try {
          const r = await api('POST', 'stock', '/v1/admin/verify');
          out.className = r.consistent ? 'ok' : 'error';
          out.textContent = r.consistent ? 'Server verify: every SKU\'s ledger folds to its summary.' : `Server verify: ${JSON.stringify(r.differences)}`;
        } catch (e) { flash(`Verify refused: ${e.message}`, true); }
      },
    }, 'Verify every SKU on the server'), out);
  }
}

const PAGE = 50;

// drawLedger shows the SKU's ledger rows that match the filters, asked of stock (it filters
// in SQL), a page at a time in ledger order; "later" pages on with stock's cursor.
function drawLedger(card, sku) {
  const type = el('select', { id: 'f-type' }, el('option', { value: '' }, 'any change'), CHANGE_TYPES.map((t) => el('option', { value: t }, t)));
  const order = el('input', { id: 'f-order', placeholder: 'order id' });
  const operator = el('input', { id: 'f-operator', placeholder: 'operator' });
  const from = el('input', { id: 'f-from', type: 'datetime-local' });
  const to = el('input', { id: 'f-to', type: 'datetime-local' });
  const body = el('tbody');
  const info = el('span', { id: 'ledger-info' });
  const prev = el('button', { id: 'ledger-prev' }, '◀ earlier');
  const next = el('button', { id: 'ledger-next' }, 'later ▶');
  let cursors = [0]; // the after= cursor of each page reached
  let page = 0;
  let shown = 0; // the newest request, so a slow answer to an older one is dropped
  const show = async () => {
    const q = new URLSearchParams({ after: String(cursors[page]), limit: String(PAGE) });
    if (type.value) q.set('type', type.value);
    if (order.value.trim()) q.set('order_id', order.value.trim());
    if (operator.value.trim()) q.set('operator', operator.value.trim());
    if (from.value) q.set('since', new Date(from.value).toISOString());
    if (to.value) q.set('until', new Date(to.value).toISOString());
    const mine = ++shown;
    let r;
    try {
      r = await api('GET', 'stock', `/v1/skus/${encodeURIComponent(sku)}/ledger?${q}`);
    } catch (e) { if (mine === shown) info.textContent = ` ${e.message}`; return; }
    if (mine !== shown) return;
    body.replaceChildren(...r.entries.map((e) => el('tr', {},
      el('td', { class: 'num' }, e.id), el('td', {}, fmtTime(e.created_at)), el('td', {}, e.change_type), el('td', { class: 'num' }, e.qty),
      el('td', { class: 'num' }, e.slot), el('td', {}, e.order_id || ''), el('td', {}, e.operator), el('td', {}, e.remark),
      el('td', { class: 'num' }, `${e.after.available}/${e.after.locked}/${e.after.sold}`))));
    if (r.next_after) cursors[page + 1] = r.next_after;
    prev.disabled = page === 0;
    next.disabled = !r.next_after;
    info.textContent = ` ${r.entries.length} rows on page ${page + 1}${r.next_after ? '' : ' (the last)'}`;
  };
  prev.addEventListener('click', () => { page = Math.max(0, page - 1); show(); });
  next.addEventListener('click', () => { page++; show(); });
  const refilter = () => { cursors = [0]; page = 0; show(); };
  for (const i of [type, order, operator, from, to]) i.addEventListener('input', refilter);
  card.replaceChildren(el('h2', {}, 'Ledger'),
    el('form', { class: 'inline', id: 'ledger-filters', onsubmit: (e) => e.preventDefault() },
      el('label', {}, 'change', type), el('label', {}, 'order', order), el('label', {}, 'operator', operator),
      el('label', {}, 'from', from), el('label', {}, 'to', to)),
    el('p', {}, prev, next, info),
    el('table', { id: 'ledger-table' }, el('thead', {}, el('tr', {}, ['id', 'at', 'change', 'qty', 'slot', 'order', 'operator', 'remark', 'after avail/locked/sold'].map((h) => el('th', {}, h)))), body));
  show();
}

// --- live water level ---

function stopLive() {
  if (live) { live.abort(); live = null; }
}

// startLive reads /api/live/{sku} as server-sent events through fetch (EventSource cannot
// send the bearer header) and draws available, locked and sold over time.
// onSample is called with every reading (the summary above follows the water level).
async function startLive(sku, card, onSample) {
  stopLive();
  const ctl = new AbortController();
  live = ctl;
  const samples = [];
  const chart = svg('svg', { class: 'chart', id: 'chart', viewBox: '0 0 600 160', preserveAspectRatio: 'none' });
  const lines = Object.fromEntries(['available', 'locked', 'sold'].map((k) => [k, svg('polyline', { class: 'l-' + k, points: '' })]));
  chart.append(...Object.values(lines));
  const legend = el('p', { class: 'legend', id: 'live-legend' });
  const status = el('span', { id: 'live-status' }, ' connecting…');
  card.replaceChildren(el('h2', {}, 'Water level'), el('button', { id: 'live-stop', onclick: () => { stopLive(); status.textContent = ' stopped'; } }, 'Stop'), status, chart, legend);
  let resp;
  try {
    resp = await fetch(`/api/live/${encodeURIComponent(sku)}`, { headers: { Authorization: 'Bearer ' + session.token }, signal: ctl.signal });
  } catch (e) { status.textContent = ` ${e.message}`; return; }
  if (!resp.ok) {
    const d = await resp.json().catch(() => ({ error: { code: resp.status, message: '' } }));
    status.className = 'error';
    status.textContent = ` ${d.error.code}: ${d.error.message}`;
    return;
  }
  status.textContent = ' live, one reading a second';
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    let chunk;
    try { chunk = await reader.read(); } catch { return; }
    if (chunk.done) { status.textContent = ' the stream ended'; return; }
    buf += chunk.value;
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
      if (!data) continue;
      const s = JSON.parse(data);
      if (s.error) { status.className = 'error'; status.textContent = ` ${s.error}`; continue; }
      status.className = '';
      samples.push(s);
      if (samples.length > 180) samples.shift();
      drawChart(samples, lines, legend);
      if (onSample) onSample(s);
    }
  }
}

function drawChart(samples, lines, legend) {
  const top = Math.max(1, ...samples.map((s) => Math.max(s.available, s.locked, s.sold)));
  const n = samples.length;
  for (const k of Object.keys(lines)) {
    lines[k].setAttribute('points', samples.map((s, i) => `${n === 1 ? 0 : (600 * i) / (n - 1)},${155 - (150 * s[k]) / top}`).join(' '));
  }
  const last = samples[n - 1];
  // Rates over the last five readings: how fast units are being locked, sold, given back.
  const back = samples[Math.max(0, n - 6)];
  const secs = Math.max((new Date(last.at) - new Date(back.at)) / 1000, 1);
  const rate = (k) => ((last[k] - back[k]) / secs).toFixed(1);
  legend.replaceChildren(...['available', 'locked', 'sold'].map((k) => el('span', { 'data-live': k },
    el('i', { class: 'seg-' + k }), `${k} ${last[k]} (${rate(k)}/s)`)), el('span', { class: 'muted' }, `at ${new Date(last.at).toLocaleTimeString()}`));
}

// --- adjustments ---

// adjustmentsPage is the queue: stock's adjustment orders by state, newest first (pending
// first of all: what waits for a second person).
async function adjustmentsPage(view, status) {
  status = status || 'pending';
  const id = el('input', { id: 'adj-id', type: 'number', min: '1', placeholder: '12', required: true });
  const state = el('select', { id: 'adj-status', onchange: () => { location.hash = '#/adjustments/' + state.value; } },
    ['pending', 'approved', 'rejected'].map((v) => el('option', { value: v, selected: v === status }, v)));
  const list = el('tbody');
  const more = el('button', { id: 'adj-more', hidden: true }, 'older ▶');
  view.append(el('section', { class: 'card' }, el('h2', {}, 'Adjustments'),
    el('p', {}, 'An operator requests an adjustment or files a stocktake count from a SKU\'s page; a second person with the approver role approves or rejects it — never the one who requested it.'),
    el('form', { class: 'inline', id: 'adj-open', onsubmit: (e) => { e.preventDefault(); location.hash = '#/adjustment/' + id.value; } },
      el('label', {}, 'adjustment #', id), el('button', { type: 'submit' }, 'Open'), el('label', {}, 'state', state)),
    el('table', { id: 'adj-list' }, el('thead', {}, el('tr', {}, ['#', 'SKU', 'kind', 'units', 'reason', 'requested by', 'decided by', 'state'].map((h) => el('th', {}, h)))), list),
    el('p', {}, more)));
  let before = '';
  const page = async () => {
    const q = new URLSearchParams({ status, limit: '50' });
    if (before) q.set('before', before);
    const r = await api('GET', 'stock', `/v1/adjustments?${q}`);
    for (const a of r.adjustments) {
      list.append(el('tr', { class: 'clickable', 'data-adj': a.id, onclick: () => { location.hash = '#/adjustment/' + a.id; } },
        el('td', { class: 'num' }, a.id), el('td', {}, a.sku), el('td', {}, a.kind),
        el('td', { class: 'num' }, a.kind === 'stocktake' ? `counted ${a.counted}` : a.delta), el('td', {}, a.reason),
        el('td', {}, a.requested_by), el('td', {}, a.decided_by || '—'), el('td', {}, el('span', { class: `state state-${a.state}` }, a.state))));
    }
    if (r.adjustments.length === 0 && !before) list.append(el('tr', {}, el('td', { colspan: 8, class: 'muted' }, `No ${status} adjustments.`)));
    before = r.next_before ? String(r.next_before) : '';
    more.hidden = !before;
  };
  more.addEventListener('click', () => page().catch((e) => flash(e.message, true)));
  await page();
}

async function adjustmentPage(view, id) {
  if (!/^[1-9][0-9]*$/.test(id || '')) { view.append(el('p', { class: 'error' }, `"${id}" is not an adjustment number`)); return; }
  let a;
  try {
    a = await api('GET', 'stock', `/v1/adjustments/${id}`);
  } catch (e) {
    view.append(el('section', { class: 'card' }, el('p', { class: 'error', id: 'adj-error' }, `Adjustment #${id}: ${e.message}`)));
    return;
  }
  const card = el('section', { class: 'card', id: 'adjustment' });
  view.append(card);
  const result = el('p', { id: 'decide-result' });
  const decide = (approve) => async () => {
    try {
      const d = await api('POST', 'stock', `/v1/adjustments/${a.id}/${approve ? 'approve' : 'reject'}`);
      flash(`Adjustment #${d.id} ${d.state} by ${d.decided_by}`);
      render();
    } catch (e) {
      result.className = 'error';
      result.textContent = e.code === 'self_approval' ? `Refused: you requested this adjustment, so a second person must decide it (${e.message}).` : `Refused: ${e.message}`;
      flash(result.textContent, true);
    }
  };
  const own = a.requested_by === session.claims.sub;
  card.append(el('h2', {}, `Adjustment #${a.id} `, el('span', { class: `state state-${a.state}`, id: 'adj-state' }, a.state)),
    el('table', {},
      el('tr', {}, el('th', {}, 'SKU'), el('td', {}, el('a', { href: '#/sku/' + encodeURIComponent(a.sku) }, a.sku))),
      el('tr', {}, el('th', {}, 'kind'), el('td', {}, a.kind)),
      el('tr', {}, el('th', {}, a.kind === 'stocktake' ? 'counted' : 'delta'), el('td', {}, a.kind === 'stocktake' ? a.counted : a.delta)),
      el('tr', {}, el('th', {}, 'reason'), el('td', {}, a.reason)),
      el('tr', {}, el('th', {}, 'requested by'), el('td', { id: 'adj-requested-by' }, a.requested_by)),
      el('tr', {}, el('th', {}, 'decided by'), el('td', { id: 'adj-decided-by' }, a.decided_by || '—')),
      a.ledger_id ? el('tr', {}, el('th', {}, 'ledger row'), el('td', {}, a.ledger_id)) : null));
  if (a.state === 'pending' && a.kind === 'stocktake') {
    // The count's variance against the book, as it stands now: what approving would change.
    try {
      const now = await api('GET', 'stock', `/v1/skus/${encodeURIComponent(a.sku)}`);
      const v = a.counted - now.on_hand;
      card.append(el('p', { id: 'variance', class: v === 0 ? 'ok' : '' },
        `Variance: counted ${a.counted}, on hand ${now.on_hand} now → ${v > 0 ? '+' : ''}${v} on approval.`));
    } catch (e) { card.append(el('p', { class: 'error' }, `Cannot read ${a.sku} for the variance: ${e.message}`)); }
  }
  if (a.state === 'pending' && can('decide')) {
    card.append(own ? el('p', { class: 'muted', id: 'own-note' }, 'You requested this adjustment: the four-eyes rule needs a second approver.') : null,
      el('button', { id: 'approve', onclick: decide(true) }, 'Approve'), ' ',
      el('button', { id: 'reject', onclick: decide(false) }, 'Reject'), result);
  } else if (a.state === 'pending') {
    card.append(el('p', { class: 'muted' }, 'Waiting for a person with the approver role.'));
  }
}

// --- reconciliation ---

async function reconcilePage(view) {
  const lastRuns = [];
  for (const [svc, jobs] of Object.entries(JOBS)) {
    const runs = el('tbody');
    const findings = el('div', { class: 'findings' });
    const card = el('section', { class: 'card', id: 'reconcile-' + svc }, el('h2', {}, svc),
      el('table', { class: 'jobs' }, el('tr', {}, ['job', 'last run', ''].map((h) => el('th', {}, h))),
        jobs.map((job) => el('tr', {}, el('td', {}, el('strong', {}, job)),
          el('td', { 'data-last': job, class: 'muted' }, '…'),
          el('td', {},
            can('check') ? el('button', { 'data-job': job, 'data-mode': 'check', onclick: () => runJob(svc, job, 'check') }, 'Check') : null, ' ',
            can('repair') ? el('button', { 'data-job': job, 'data-mode': 'repair', onclick: () => runJob(svc, job, 'repair') }, 'Repair') : null)))),
      el('h3', {}, 'Recent runs'),
      el('table', {}, el('thead', {}, el('tr', {}, ['run', 'job', 'mode', 'trigger', 'started', 'checked', 'found', 'repaired', ''].map((h) => el('th', {}, h)))), runs),
      findings);
    view.append(card);
    for (const job of jobs) {
      const cell = card.querySelector(`[data-last="${job}"]`);
      lastRuns.push(api('GET', svc, `/v1/admin/reconcile/runs?job=${job}&limit=1`).then((r) => {
        const run = r.runs[0];
        cell.className = run && run.found > run.repaired ? 'error' : '';
        cell.replaceChildren(run ? el('a', { href: '#/reconcile', onclick: (e) => { e.preventDefault(); showRun(findings, svc, run); } },
          `run ${run.id}, ${run.mode} by ${run.trigger}, ${fmtTime(run.finished)}: found ${run.found}, repaired ${run.repaired}`) : 'never run');
      }).catch((e) => { cell.className = 'error'; cell.textContent = e.message; }));
    }
    try {
      const r = await api('GET', svc, '/v1/admin/reconcile/runs?limit=10');
      for (const run of r.runs) {
        runs.append(el('tr', { class: 'clickable', 'data-run': run.id, onclick: () => showRun(findings, svc, run) },
          el('td', { class: 'num' }, run.id), el('td', {}, run.job), el('td', {}, run.mode), el('td', {}, run.trigger),
          el('td', {}, fmtTime(run.started)), el('td', { class: 'num' }, run.checked), el('td', { class: 'num' }, run.found),
          el('td', { class: 'num' }, run.repaired), el('td', { class: 'error' }, run.error || '')));
      }
      if (r.runs.length === 0) runs.append(el('tr', {}, el('td', { colspan: 9, class: 'muted' }, 'no runs yet')));
    } catch (e) {
      runs.append(el('tr', {}, el('td', { colspan: 9, class: 'error' }, e.message)));
    }
  }
  await Promise.all(lastRuns);
  view.dataset.loaded = ''; // every figure is in: the page stops moving
}

async function runJob(svc, job, mode) {
  const what = mode === 'repair' ? 'find and REPAIR (through the normal use cases: ledger rows and events)' : 'check (report only, changes nothing)';
  if (!(await confirmAction(`Run ${svc}'s ${job} job: ${what}?`))) { flash(`${job}: cancelled`); return; }
  try {
    const run = await api('POST', svc, `/v1/admin/reconcile/${encodeURIComponent(job)}?mode=${mode}`);
    flash(`${svc} ${job} ${mode} run ${run.id} by you: checked ${run.checked}, found ${run.found}, repaired ${run.repaired}`);
    await render();
  } catch (e) {
    flash(`${job} ${mode} refused: ${e.message}`, true);
  }
}

function showRun(box, svc, run) {
  box.replaceChildren(el('h3', {}, `${svc} run ${run.id}: ${run.job}, ${run.mode}, ${run.trigger}, ${fmtTime(run.started)} → ${fmtTime(run.finished)}`),
    el('p', { id: 'run-summary' }, `Checked ${run.checked}, found ${run.found}, repaired ${run.repaired}.`, run.error ? ` Error: ${run.error}` : ''),
    run.findings.length === 0 ? el('p', { class: 'ok' }, 'Nothing found.') :
      el('table', { id: 'findings' }, el('tr', {}, ['kind', 'what', 'ids', 'values', 'repaired'].map((h) => el('th', {}, h))),
        run.findings.map((f) => el('tr', {}, el('td', {}, f.kind), el('td', {}, f.detail),
          el('td', {}, Object.entries(f.ids || {}).map(([k, v]) => `${k} ${v}`).join(', ')),
          el('td', {}, Object.entries(f.values || {}).map(([k, v]) => `${k} ${v}`).join(', ')),
          el('td', { class: f.repaired ? 'ok' : '' }, f.repaired ? 'yes' : (f.error || 'no'))))));
}

// --- orders ---

async function ordersPage(view, q) {
  const input = el('input', { id: 'order-q', placeholder: 'order id or buyer id', value: q || '' });
  const out = el('div', { id: 'order-out' });
  view.append(el('section', { class: 'card' }, el('h2', {}, 'Orders'),
    el('form', { class: 'inline', id: 'order-search', onsubmit: (e) => { e.preventDefault(); location.hash = '#/orders/' + encodeURIComponent(input.value.trim()); } },
      el('label', {}, 'order id or buyer', input), el('button', { type: 'submit' }, 'Search')), out));
  if (!q) return;
  const isID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(q);
  try {
    if (isID) {
      await orderTimeline(out, await api('GET', 'order', `/v1/orders/${q}`));
      return;
    }
    const r = await api('GET', 'order', `/v1/orders?buyer_id=${encodeURIComponent(q)}`);
    if (r.orders.length === 0) { out.append(el('p', { class: 'muted' }, `No orders of buyer ${q}.`)); return; }
    out.append(el('table', { id: 'orders' }, el('tr', {}, ['order', 'status', 'total', 'created'].map((h) => el('th', {}, h))),
      r.orders.map((o) => el('tr', { class: 'clickable', onclick: () => { location.hash = '#/orders/' + o.order_id; } },
        el('td', {}, o.order_id), el('td', {}, o.status), el('td', { class: 'num' }, `${(o.total / 100).toFixed(2)} ${o.currency}`), el('td', {}, fmtTime(o.created_at))))));
  } catch (e) {
    out.append(el('p', { class: 'error' }, e.message));
  }
}

// orderTimeline is what happened to an order across the services: its history at the order
// service, its payments, its payment deadline.
async function orderTimeline(out, o) {
  const events = o.history.map((h) => ({ at: h.at, source: 'order', what: h.status + (h.reason ? ` (${h.reason})` : '') }));
  try {
    const p = await api('GET', 'payment-adapter', `/v1/payments?order_id=${o.order_id}`);
    for (const pay of p.payments || []) events.push({ at: pay.updated_at || pay.created_at, source: 'payment', what: `${pay.status} ${pay.amount} ${pay.currency} via ${pay.provider}` });
  } catch (e) { events.push({ at: '', source: 'payment', what: e.message }); }
  try {
    const d = await api('GET', 'timeout', `/v1/deadlines/${o.order_id}`);
    // A pending deadline is due at its time; a settled one happened when it was settled.
    events.push({ at: d.state === 'pending' ? d.deadline : d.updated_at, source: 'timeout', what: `payment deadline ${fmtTime(d.deadline)}: ${d.state}${d.resolution ? ' (' + d.resolution + ')' : ''}` });
  } catch (e) { events.push({ at: '', source: 'timeout', what: e.code === 'not_found' || e.status === 404 ? 'no deadline' : e.message }); }
  events.sort((a, b) => String(a.at).localeCompare(String(b.at)));
  out.append(el('h3', {}, `Order ${o.order_id} of buyer ${o.buyer_id}: `, el('span', { class: 'state', id: 'order-status' }, o.status)),
    el('p', {}, o.items.map((i) => `${i.qty} × ${i.sku}`).join(', '), ` — ${(o.total / 100).toFixed(2)} ${o.currency}`),
    el('table', { id: 'timeline' }, el('tr', {}, ['at', 'service', 'what'].map((h) => el('th', {}, h))),
      events.map((e) => el('tr', {}, el('td', {}, fmtTime(e.at)), el('td', {}, e.source), el('td', {}, e.what)))));
}

// --- compare ---

// comparePage draws the report `stockflow compare` writes while it runs: the same small flash
// sale against the single-column design, a Redis-only counter and stockflow, side by side.
// It reads the report again every second until the run is done.
async function comparePage(view) {
  const card = el('section', { class: 'card', id: 'compare' }, el('h2', {}, 'Three designs, one flash sale'),
    el('p', { class: 'muted' }, 'The seed\'s three-approach chart, measured: run ', el('code', {}, 'make compare'),
      ' beside ', el('code', {}, 'make up'), ' and this page follows the run.'));
  const out = el('div', { id: 'compare-out' });
  card.append(out);
  view.append(card);
  for (;;) {
    let r;
    try {
      r = await api('GET', 'compare', '');
    } catch (e) {
      out.replaceChildren(el('p', { class: e.status === 404 ? 'muted' : 'error', id: 'compare-missing' }, e.message));
      return;
    }
    drawCompare(out, r);
    if (r.done || !card.isConnected) return;
    await new Promise((ok) => setTimeout(ok, 1000));
    if (!card.isConnected) return;
  }
}

const COMPARE_ROWS = [
  ['sold', 'units sold (paid)'],
  ['oversold', 'oversold: sold beyond the units there were'],
  ['stuck', 'stuck: held by unpaid orders, never given back'],
  ['turned_away', 'buyers turned away while units were free'],
  ['second_wave_sold', 'sold to the second wave, after the deadline'],
  ['orders', 'orders'],
];

function drawCompare(out, r) {
  const head = el('p', { id: 'compare-head' }, `${r.units} units, ${r.buyers} buyers then ${r.second_wave} more after the ${r.deadline_ms} ms deadline; `,
    `${Math.round(r.pay_rate * 100)}% pay. `, r.done ? el('strong', { id: 'compare-done' }, 'Done.') : el('span', { class: 'muted' }, 'running…'));
  const cols = r.designs.map((d) => {
    const lines = Object.fromEntries(['available', 'locked', 'sold'].map((k) => [k, svg('polyline', { class: 'l-' + k, points: '' })]));
    const chart = svg('svg', { class: 'chart small', viewBox: '0 0 600 160', preserveAspectRatio: 'none' });
    chart.append(...Object.values(lines));
    const samples = d.samples || [];
    const top = Math.max(1, r.units, ...samples.map((s) => Math.max(s.available, s.locked, s.sold)));
    const span = Math.max(1, ...samples.map((s) => s.t_ms));
    for (const k of Object.keys(lines)) {
      lines[k].setAttribute('points', samples.map((s) => `${(600 * s.t_ms) / span},${155 - (150 * Math.max(0, s[k])) / top}`).join(' '));
    }
    const res = d.result || {};
    return el('div', { class: 'design', 'data-design': d.name },
      el('h3', {}, d.title || d.name), el('p', { class: 'muted' }, d.note || ''),
      d.error ? el('p', { class: 'error', 'data-error': d.name }, `could not run: ${d.error}`) : null, chart,
      el('table', {}, COMPARE_ROWS.map(([k, label]) => {
        const bad = (k === 'oversold' || k === 'stuck' || k === 'turned_away') && res[k] > 0;
        return el('tr', {}, el('td', {}, label), el('td', { class: 'num' + (bad ? ' error' : ''), 'data-result': k }, res[k] ?? '—'));
      })));
  });
  out.replaceChildren(head, el('p', { class: 'legend' }, ['available', 'locked', 'sold'].map((k) => el('span', {}, el('i', { class: 'seg-' + k }), k))),
    el('div', { class: 'designs' }, cols));
}

// --- start ---

document.addEventListener('DOMContentLoaded', () => {
  $('#signin-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const err = $('#signin-error');
    try {
      signIn($('#token').value);
      err.hidden = true;
      $('#token').value = '';
      flash(`Signed in as ${session.claims.sub} (${session.claims.roles.join(', ')})`);
      render();
    } catch (ex) {
      err.textContent = `Cannot sign in: ${ex.message}`;
      err.hidden = false;
    }
  });
  $('#signout').addEventListener('click', () => signOut());
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) {
    try { signIn(saved); } catch (e) { sessionStorage.removeItem(TOKEN_KEY); $('#signin-error').textContent = e.message; $('#signin-error').hidden = false; }
  }
  window.addEventListener('hashchange', render);
  render();
});
