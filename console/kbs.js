// Knowledge bases: the list with stats, creation, one knowledge base's documents (upload
// with progress and live status, reindex, delete) and its search playground.
import { api, putFile } from './api.js';
import {
  announce, badge, busy, confirmDialog, errorBox, field, fmtBytes, fmtDate, fmtNumber, fmtScore, h,
  openDialog, put, statusBadge, table,
} from './ui.js';

const POLL_MS = 1500;
const IN_FLIGHT = new Set(['PENDING', 'PROCESSING']);
const kbPath = (id) => `/knowledge-bases/${encodeURIComponent(id)}`;

export async function listKnowledgeBases() {
  const items = [];
  let token = null;
  for (let page = 0; page < 20; page++) {
    const query = `?limit=100${token ? `&nextToken=${encodeURIComponent(token)}` : ''}`;
    const data = await api('GET', `/knowledge-bases${query}`);
    items.push(...data.items);
    token = data.nextToken;
    if (!token) break;
  }
  return items;
}

export function statusSummary(byStatus = {}) {
  const parts = [];
  if (byStatus.PROCESSED) parts.push(badge(`${byStatus.PROCESSED} processed`, 'ok'));
  const waiting = (byStatus.PENDING || 0) + (byStatus.PROCESSING || 0);
  if (waiting) parts.push(badge(`${waiting} in progress`, 'wait'));
  if (byStatus.FAILED) parts.push(badge(`${byStatus.FAILED} failed`, 'bad'));
  return parts.length ? h('span', { class: 'badges' }, parts) : '–';
}

export async function renderKnowledgeBases(ctx) {
  document.title = 'Knowledge bases · console';
  const failure = errorBox();
  let items = [];
  try { items = await listKnowledgeBases(); } catch (err) { failure.show(err); }
  if (!ctx.live()) return;
  const create = h('button', { type: 'button', class: 'primary', text: 'New knowledge base', onclick: () => createDialog(ctx) });
  const rows = items.map((kb) => [
    h('a', { href: `#${kbPath(kb.id)}`, text: kb.name }),
    badge(kb.visibility),
    fmtNumber(kb.stats.documentCount), fmtNumber(kb.stats.chunkCount), fmtNumber(kb.stats.totalTokens),
    statusSummary(kb.stats.documentsByStatus), fmtDate(kb.stats.lastIngestedAt),
  ]);
  put(ctx.main,
    h('div', { class: 'page-head' }, h('h1', { text: 'Knowledge bases' }), create),
    failure,
    items.length
      ? table('Your knowledge bases', ['Name', 'Visibility', 'Documents', 'Chunks', 'Tokens', 'Status', 'Last ingested'], rows)
      : h('p', { class: 'muted', text: 'No knowledge bases yet: create one, then upload documents into it.' }));
}

function createDialog(ctx) {
  const name = h('input', { name: 'name', required: true, maxlength: 200, autocomplete: 'off' });
  const description = h('textarea', { name: 'description', rows: 2 });
  const visibility = h('select', { name: 'visibility' },
    h('option', { value: 'private', text: 'Private: only you' }),
    h('option', { value: 'org', text: 'Organisation: everyone in it' }),
    h('option', { value: 'public', text: 'Public: every organisation may search it' }));
  const chunkTokens = h('input', { name: 'chunkTokens', type: 'number', inputmode: 'numeric', placeholder: '500' });
  const chunkOverlap = h('input', { name: 'chunkOverlap', type: 'number', inputmode: 'numeric', placeholder: '50' });
  const strategy = h('select', { name: 'strategy' },
    h('option', { value: 'fixed', text: 'Fixed: as many sentences as fit' }),
    h('option', { value: 'semantic', text: 'Semantic: also end a chunk where the topic changes' }));
  const failure = errorBox();
  const formId = 'create-kb-form';
  const submit = h('button', { type: 'submit', class: 'primary', form: formId, text: 'Create' });
  const form = h('form', { id: formId, novalidate: true },
    field('Name', name), field('Description', description), field('Visibility', visibility),
    h('fieldset', {}, h('legend', { text: 'Chunking (fixed at creation)' }),
      h('div', { class: 'row' },
        field('Tokens per chunk', chunkTokens, 'empty: 500'),
        field('Overlap tokens', chunkOverlap, 'empty: 50')),
      field('Strategy', strategy)),
    failure);
  const { close } = openDialog({ title: 'New knowledge base', body: form, actions: [submit] });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    failure.clear();
    const body = { name: name.value, description: description.value, visibility: visibility.value };
    const chunking = { strategy: strategy.value };
    if (chunkTokens.value !== '') chunking.chunkTokens = Number(chunkTokens.value);
    if (chunkOverlap.value !== '') chunking.chunkOverlap = Number(chunkOverlap.value);
    body.chunking = chunking;
    try {
      const kb = await busy(submit, api('POST', '/knowledge-bases', body));
      close();
      announce(`Knowledge base ${kb.name} created`);
      ctx.go(`#${kbPath(kb.id)}`);
    } catch (err) {
      failure.show(err);
    }
  });
}

export async function renderKnowledgeBase(ctx, id) {
  const failure = errorBox();
  let kb;
  try { kb = await api('GET', kbPath(id)); } catch (err) { failure.show(err); }
  if (!ctx.live()) return;
  if (!kb) {
    put(ctx.main, h('h1', { text: 'Knowledge base' }), failure,
      h('p', {}, h('a', { href: '#/knowledge-bases', text: 'Back to the knowledge bases' })));
    return;
  }
  document.title = `${kb.name} · console`;
  const stats = h('dl', { class: 'stats' });
  const showStats = (k) => put(stats, ...[
    ['Documents', fmtNumber(k.stats.documentCount)], ['Chunks', fmtNumber(k.stats.chunkCount)],
    ['Tokens', fmtNumber(k.stats.totalTokens)], ['Last ingested', fmtDate(k.stats.lastIngestedAt)],
  ].map(([term, value]) => h('div', {}, h('dt', { text: term }), h('dd', { text: value }))));
  showStats(kb);
  const remove = h('button', { type: 'button', class: 'danger', text: 'Delete knowledge base' });
  remove.addEventListener('click', async () => {
    const sure = await confirmDialog(`Delete "${kb.name}" with its ${kb.stats.documentCount} documents? `
      + 'Agents that link it keep their tool, which then answers that the knowledge base is gone.',
    { confirmLabel: 'Delete knowledge base', title: 'Delete knowledge base' });
    if (!sure) return;
    try {
      await busy(remove, api('DELETE', kbPath(kb.id)));
      announce(`Knowledge base ${kb.name} deleted`);
      ctx.go('#/knowledge-bases');
    } catch (err) { failure.show(err); }
  });
  const documents = documentsSection(ctx, kb, showStats);
  put(ctx.main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/knowledge-bases', text: 'Knowledge bases' }), ' / '),
    h('div', { class: 'page-head' }, h('h1', { text: kb.name }), remove),
    kb.description ? h('p', { class: 'lead', text: kb.description }) : null,
    h('p', { class: 'muted small' },
      badge(kb.visibility), ` ${kb.embedding.provider} · ${kb.embedding.model} (${kb.embedding.dimension} dimensions) · `
      + (kb.chunking.strategy === 'hierarchical'
        ? `hierarchical: ${kb.chunking.childTokens}-token chunks in ${kb.chunking.parentTokens}-token passages, `
        : `${kb.chunking.strategy} ${kb.chunking.chunkTokens}-token chunks, `)
      + `${kb.chunking.chunkOverlap} overlap · `, h('code', { text: kb.id })),
    failure, stats, documents.section, searchSection(kb));
  documents.refresh();
}

// Pages of documents: 50 rows (the API's default of 100 drew a page taller than three
// screens), in a box of their own so the search below stays near.
const PAGE_SIZE = 50;
const SORTS = [['path', 'Path'], ['updatedAt', 'Last updated'], ['status', 'Status']];
const STATUSES = ['PENDING', 'PROCESSING', 'PROCESSED', 'FAILED'];
const TYPING_MS = 300; // the prefix box asks once typing pauses

function pathCell(doc) {
  const path = doc.path || doc.filename; // an entry has no path
  const cut = path.lastIndexOf('/') + 1;
  return h('span', { class: 'doc-path', title: path },
    cut ? h('span', { class: 'doc-dir', text: path.slice(0, cut) }) : null, path.slice(cut));
}

function documentsSection(ctx, kb, showStats) {
  const failure = errorBox();
  const notice = h('p', { class: 'notice small', role: 'status', hidden: true });
  const listHolder = h('div', { class: 'doc-list' }, h('p', { class: 'muted', text: 'Loading documents…' }));
  const uploads = h('ul', { class: 'uploads', 'aria-label': 'Uploads' });
  const active = new Map(); // document id -> upload row, until its document is processed or failed
  let timer = null;
  let loads = 0; // the latest load wins: a poll that started before a page turn is dropped
  let latest = [];
  let stats = kb.stats;
  // What the table shows: the filters, and the nextToken of each page up to this one
  // (null: the first), so Previous goes back without the API knowing pages.
  const view = { status: '', prefix: '', sort: 'path', tokens: [null], nextToken: null };

  const listPath = (token, { sort = view.sort, limit = PAGE_SIZE, filtered = true } = {}) => {
    const query = new URLSearchParams({ limit: String(limit), sort });
    if (filtered && view.status) query.set('status', view.status);
    if (filtered && view.prefix) query.set('prefix', view.prefix);
    if (token) query.set('nextToken', token);
    return `${kbPath(kb.id)}/documents?${query}`;
  };

  const loadPage = async () => {
    const token = view.tokens[view.tokens.length - 1];
    try {
      return await api('GET', listPath(token));
    } catch (err) {
      if (!token || err.status !== 400) throw err;
      // A token the API no longer takes (issued before a redeploy, say): start again.
      view.tokens = [null];
      notice.textContent = `That page could not be shown (${err.message}); here is the first page.`;
      notice.hidden = false;
      return api('GET', listPath(null));
    }
  };

  // The uploads' documents: the most recently updated ones hold them (the pipeline
  // touches each), whatever page the table shows; one by one only those not among them.
  const trackUploads = async () => {
    const waiting = [...active].filter(([, row]) => !row.done);
    if (!waiting.length) return;
    const recent = await api('GET', listPath(null, { sort: 'updatedAt', limit: Math.min(1000, waiting.length + 100), filtered: false }));
    const found = new Map(recent.items.map((doc) => [doc.id, doc]));
    await Promise.all(waiting.filter(([id]) => !found.has(id)).slice(0, 10).map(async ([id, row]) => {
      try {
        found.set(id, await api('GET', `${kbPath(kb.id)}/documents/${encodeURIComponent(id)}`));
      } catch (err) {
        if (err.status === 404) row.gone();
      }
    }));
    for (const [id, row] of waiting) if (found.has(id)) row.setStatus(found.get(id));
  };

  const refresh = async () => {
    clearTimeout(timer);
    if (!ctx.live()) return;
    const mine = ++loads;
    try {
      const [page, fresh] = await Promise.all([loadPage(), api('GET', kbPath(kb.id)), trackUploads()]);
      if (!ctx.live() || mine !== loads) return;
      if (!page.items.length && view.tokens.length > 1) { // its last rows were deleted: the page before
        view.tokens.pop();
        refresh();
        return;
      }
      latest = page.items;
      view.nextToken = page.nextToken;
      stats = fresh.stats;
      showStats(fresh);
      // a poll redraws the page shown: where its box was scrolled to stays
      const shown = JSON.stringify([view.status, view.prefix, view.sort, view.tokens]);
      const scrolled = shown === listHolder.dataset.shown ? listHolder.querySelector('.doc-scroll')?.scrollTop : 0;
      put(listHolder, documentTable(latest));
      listHolder.dataset.shown = shown;
      const box = listHolder.querySelector('.doc-scroll');
      if (box && scrolled) box.scrollTop = scrolled;
      showPager();
      failure.clear();
    } catch (err) {
      if (mine !== loads) return;
      failure.show(err);
    }
    const waiting = latest.some((d) => IN_FLIGHT.has(d.status)) || [...active.values()].some((r) => !r.done);
    if (waiting && ctx.live()) timer = setTimeout(refresh, POLL_MS);
  };

  const filtered = () => Boolean(view.status || view.prefix);
  const documentTable = (docs) => {
    if (!docs.length) {
      return h('p', { class: 'muted', text: filtered() ? 'No documents match these filters.' : 'No documents yet: drop files above.' });
    }
    return h('div', { class: 'doc-scroll', role: 'region', tabindex: '0', 'aria-label': `Documents of ${kb.name}` },
      table(`Documents of ${kb.name}`,
        ['Path', 'Status', 'Chunks', 'Tokens', 'Size', 'Updated', 'Actions'],
        docs.map((doc) => {
          const name = doc.path || doc.filename;
          return [
            pathCell(doc),
            h('span', { class: 'doc-status' }, statusBadge(doc.status),
              doc.error ? h('span', { class: 'error-text', text: ` ${doc.error.code}: ${doc.error.message}` }) : null,
              doc.note ? h('span', { class: 'note-text', text: ` ${doc.note}` }) : null),
            fmtNumber(doc.chunks), fmtNumber(doc.tokens), fmtBytes(doc.size), fmtDate(doc.updatedAt),
            h('span', { class: 'row-actions' },
              h('button', { type: 'button', class: 'small', text: 'Reindex', 'aria-label': `Reindex ${name}`,
                onclick: (e) => reindex(doc, e.currentTarget) }),
              h('button', { type: 'button', class: 'small danger', text: 'Delete', 'aria-label': `Delete ${name}`,
                onclick: (e) => removeDocument(doc, e.currentTarget) })),
          ];
        })));
  };

  // Previous / "51–100 of 1,234" / Next; the count when the stats know it (no prefix).
  const previous = h('button', { type: 'button', class: 'small', text: 'Previous' });
  const next = h('button', { type: 'button', class: 'small', text: 'Next' });
  const range = h('span', { class: 'pager-range', 'aria-live': 'polite' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of documents', hidden: true }, previous, range, next);
  const showPager = () => {
    const first = (view.tokens.length - 1) * PAGE_SIZE + 1;
    const total = view.prefix ? null : view.status ? (stats.documentsByStatus || {})[view.status] : stats.documentCount;
    range.textContent = latest.length
      ? `${fmtNumber(first)}–${fmtNumber(first + latest.length - 1)}${total == null ? '' : ` of ${fmtNumber(total)}`}`
      : '';
    previous.disabled = view.tokens.length === 1;
    next.disabled = !view.nextToken;
    pager.hidden = view.tokens.length === 1 && !view.nextToken;
  };
  const turn = async (button, other, move) => {
    move();
    notice.hidden = true;
    await refresh();
    if (button.disabled && !other.disabled) other.focus(); // the first or the last page: focus stays in the pager
  };
  previous.addEventListener('click', () => turn(previous, next, () => view.tokens.pop()));
  next.addEventListener('click', () => turn(next, previous, () => view.tokens.push(view.nextToken)));

  const statusSelect = h('select', { name: 'status' }, h('option', { value: '', text: 'Any' }),
    STATUSES.map((status) => h('option', { value: status, text: status })));
  const prefixInput = h('input', { name: 'prefix', type: 'search', placeholder: 'guides/', autocomplete: 'off',
    spellcheck: 'false', maxlength: 1000 });
  const sortSelect = h('select', { name: 'sort' }, SORTS.map(([value, text]) => h('option', { value, text })));
  let typing = null;
  const apply = () => {
    clearTimeout(typing);
    const wanted = { status: statusSelect.value, prefix: prefixInput.value.trim(), sort: sortSelect.value };
    if (wanted.status === view.status && wanted.prefix === view.prefix && wanted.sort === view.sort) return;
    Object.assign(view, wanted, { tokens: [null], nextToken: null });
    notice.hidden = true;
    refresh();
  };
  statusSelect.addEventListener('change', apply);
  sortSelect.addEventListener('change', apply);
  prefixInput.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(apply, TYPING_MS); });
  const filters = h('form', { class: 'doc-filters', role: 'search', 'aria-label': 'Filter documents', novalidate: true,
    onsubmit: (e) => { e.preventDefault(); apply(); } },
  field('Status', statusSelect), field('Path starts with', prefixInput), field('Sort by', sortSelect));

  const reindex = async (doc, button) => {
    const name = doc.path || doc.filename;
    if (!await confirmDialog(`Extract, chunk and embed "${name}" again? It stays searchable meanwhile.`,
      { confirmLabel: 'Reindex', title: 'Reindex document' })) return;
    try {
      await busy(button, api('POST', `${kbPath(kb.id)}/documents/${encodeURIComponent(doc.id)}/reindex`));
      announce(`${name} is being indexed again`);
    } catch (err) { failure.show(err); }
    refresh();
  };

  const removeDocument = async (doc, button) => {
    const name = doc.path || doc.filename;
    if (!await confirmDialog(`Delete "${name}" and its ${doc.chunks} chunks from ${kb.name}?`,
      { confirmLabel: 'Delete document', title: 'Delete document' })) return;
    try {
      await busy(button, api('DELETE', `${kbPath(kb.id)}/documents/${encodeURIComponent(doc.id)}`));
      announce(`${name} deleted`);
    } catch (err) { failure.show(err); }
    refresh();
  };

  const uploadOne = async (file) => {
    const path = file.webkitRelativePath || file.name; // a folder picked keeps its paths
    const progress = h('progress', { max: 1, value: 0 });
    const state = h('span', { class: 'upload-state', text: 'registering…' });
    const label = h('span', { class: 'upload-name', text: path, title: path });
    const item = h('li', { class: 'upload' }, label, progress, state);
    progress.setAttribute('aria-label', `Upload of ${path}`);
    uploads.append(item);
    const row = {
      done: false,
      setStatus(doc) {
        put(state, statusBadge(doc.status),
          ...(doc.error ? [h('span', { class: 'error-text', text: ` ${doc.error.code}: ${doc.error.message}` })] : []),
          ...(doc.note ? [h('span', { class: 'note-text', text: ` ${doc.note}` })] : []));
        if (!IN_FLIGHT.has(doc.status)) { row.done = true; announce(`${path}: ${doc.status}`); }
      },
      gone() { row.done = true; state.textContent = 'deleted'; },
    };
    try {
      const body = { path, size: file.size };
      if (file.type) body.contentType = file.type;
      const answer = await api('POST', `${kbPath(kb.id)}/documents`, body);
      item.dataset.documentId = answer.document.id;
      if (!answer.upload) { // the same bytes are indexed already: nothing to send
        progress.value = 1;
        row.done = true;
        put(state, statusBadge(answer.document.status), ' unchanged');
        return;
      }
      active.set(answer.document.id, row);
      state.textContent = answer.result === 'updated' ? 'uploading a new version…' : 'uploading…';
      await putFile(answer.upload, file, (share) => { progress.value = share; });
      state.textContent = 'uploaded, waiting for the pipeline…';
    } catch (err) {
      row.done = true;
      put(state, h('span', { class: 'error-text', role: 'alert', text: `${err.code}: ${err.message}` }));
    }
  };

  const uploadAll = async (files) => {
    if (!files.length) return;
    await Promise.all([...files].map(uploadOne));
    refresh();
  };

  const picker = h('input', { type: 'file', multiple: true, id: `files-${kb.id}`, class: 'visually-hidden' });
  picker.addEventListener('change', () => { uploadAll(picker.files); picker.value = ''; });
  const zone = h('div', { class: 'dropzone' },
    h('p', {}, 'Drop files here or ', h('label', { for: picker.id, class: 'link', text: 'choose files' }),
      ' — PDF, Word, HTML, Markdown and any other text.'), picker);
  zone.addEventListener('dragover', (e) => { e.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => { e.preventDefault(); zone.classList.remove('over'); uploadAll(e.dataTransfer.files); });

  const section = h('section', { 'aria-labelledby': 'documents-heading' },
    h('div', { class: 'section-head' }, h('h2', { id: 'documents-heading', text: 'Documents' }),
      h('button', { type: 'button', class: 'small', text: 'Refresh', onclick: () => refresh() })),
    zone, uploads, failure, filters, notice, listHolder, pager);
  return { section, refresh };
}

function searchSection(kb) {
  const query = h('input', { name: 'query', type: 'search', required: true, maxlength: 2000 });
  const strategy = h('select', { name: 'strategy' },
    ['hybrid', 'semantic', 'keyword'].map((s) => h('option', { value: s, text: s })));
  const topK = h('input', { name: 'topK', type: 'number', min: 1, max: 20, value: 5 });
  const minScore = h('input', { name: 'minScore', type: 'number', min: 0, max: 1, step: 0.05, placeholder: 'none' });
  const maxTokens = h('input', { name: 'maxTokens', type: 'number', min: 50, placeholder: '4000' });
  const filter = h('textarea', { name: 'filter', rows: 2, spellcheck: 'false',
    placeholder: '{"equals": {"key": "team", "value": "support"}}' });
  const debug = h('input', { name: 'debug', type: 'checkbox' });  // off: the answer as every client gets it
  const failure = errorBox();
  const filterField = field('Filter (JSON, Bedrock operators)', filter);
  const results = h('div', { class: 'results', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', class: 'primary', text: 'Search' });
  const form = h('form', { class: 'search-form', novalidate: true },
    field('Question', query),
    h('div', { class: 'row' }, field('Strategy', strategy), field('topK', topK), field('minScore (cosine)', minScore),
      field('Token budget', maxTokens)),
    filterField,
    h('div', { class: 'check' }, debug, h('label', { for: debug.id || (debug.id = 'search-debug'),
      text: 'Debug: semantic, keyword and fused scores side by side' })),
    h('div', { class: 'actions' }, submit), failure);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    failure.clear();
    filterField.setError('');
    const body = { query: query.value, strategy: strategy.value, debug: debug.checked };
    if (topK.value !== '') body.topK = Number(topK.value);
    if (minScore.value !== '') body.minScore = Number(minScore.value);
    if (maxTokens.value !== '') body.maxTokens = Number(maxTokens.value);
    if (filter.value.trim()) {
      try { body.filter = JSON.parse(filter.value); } catch (err) {
        filterField.setError(`not JSON: ${err.message}`);
        filter.focus();
        return;
      }
    }
    try {
      const answer = await busy(submit, api('POST', `${kbPath(kb.id)}/search`, body));
      put(results, renderResults(answer, body.debug));
    } catch (err) {
      put(results);
      failure.show(err);
    }
  });
  return h('section', { 'aria-labelledby': 'search-heading' },
    h('h2', { id: 'search-heading', text: 'Search playground' }), form, results);
}

function renderResults(answer, debug) {
  const meta = answer.metadata || {};
  const summary = h('p', { class: 'muted small' },
    `${answer.resultCount} passages · ${meta.strategy} · ${fmtNumber(meta.totalTokensUsed)} tokens used`
    + `${meta.omittedCount ? ` · ${meta.omittedCount} left out of the budget` : ''}`
    + ` · ${meta.tookMs} ms${meta.cached ? ' · cached query embedding' : ''}`);
  if (!answer.results.length) return h('div', {}, summary, h('p', { text: 'No passage passed the threshold.' }));
  return h('div', {}, summary, h('ol', { class: 'passages' }, answer.results.map((r) => h('li', { class: 'passage' },
    h('div', { class: 'passage-head' },
      h('strong', { text: r.source }), r.page ? ` p. ${r.page}` : '',
      ` · chunk ${r.chunkIndex}${r.metadata.totalChunks == null ? '' : ` of ${fmtNumber(r.metadata.totalChunks)}`}`,
      r.headers && r.headers.length ? h('span', { class: 'muted', text: ` · ${r.headers.join(' › ')}` }) : null,
      h('span', { class: 'score', title: 'score orders the list; minScore applies to the cosine',
        text: `score ${fmtScore(r.similarity)}${r.scores && r.scores.vectorScore != null
          ? ` · cosine ${fmtScore(r.scores.vectorScore)}` : ''}` }),
      r.truncated ? badge('truncated', 'wait') : null),
    r.alsoIn && r.alsoIn.length ? h('p', { class: 'muted small',
      text: `Also in ${r.alsoIn.map((a) => a.path || a.source).join(', ')}` }) : null,
    debug && r.scores ? h('dl', { class: 'scores' },
      [['Semantic', r.scores.vectorScore], ['Keyword', r.scores.keywordScore], ['Fused', r.scores.fusedScore]]
        .map(([term, value]) => h('div', {}, h('dt', { text: term }), h('dd', { text: fmtScore(value) })))) : null,
    h('p', { class: 'passage-text', text: r.content }),
    origin(r.metadata) ? h('p', { class: 'muted small passage-origin', text: origin(r.metadata) }) : null))),
  debug && meta.debug ? candidatesView(meta.debug.candidates) : null);
}

// Where a passage's document came from: its size, and when and by whom it was added.
function origin(m) {
  return [m.filesize == null ? null : fmtBytes(m.filesize),
    m.uploadedAt ? `added ${fmtDate(m.uploadedAt)}` : null,
    m.uploadedBy ? `by ${m.uploadedBy}` : null].filter(Boolean).join(' · ');
}

// Both candidate lists before fusion, each with its own score and the start of its text.
function candidatesView(candidates) {
  const list = (title, items) => h('div', { class: 'candidates' }, h('h3', { text: title }),
    items.length ? h('ol', {}, items.map((c) => h('li', {},
      h('span', { class: 'score', text: fmtScore(c.score) }), ' ', h('span', { text: c.text }))))
      : h('p', { class: 'muted small', text: 'none' }));
  return h('details', { class: 'debug-candidates' },
    h('summary', { text: 'Candidates before fusion' }),
    list('Semantic', candidates.semantic), list('Keyword', candidates.keyword));
}
