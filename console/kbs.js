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
  const failure = errorBox();
  const formId = 'create-kb-form';
  const submit = h('button', { type: 'submit', class: 'primary', form: formId, text: 'Create' });
  const form = h('form', { id: formId, novalidate: true },
    field('Name', name), field('Description', description), field('Visibility', visibility),
    h('fieldset', {}, h('legend', { text: 'Chunking (fixed at creation)' }),
      h('div', { class: 'row' },
        field('Tokens per chunk', chunkTokens, 'empty: 500'),
        field('Overlap tokens', chunkOverlap, 'empty: 50'))),
    failure);
  const { close } = openDialog({ title: 'New knowledge base', body: form, actions: [submit] });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    failure.clear();
    const body = { name: name.value, description: description.value, visibility: visibility.value };
    const chunking = {};
    if (chunkTokens.value !== '') chunking.chunkTokens = Number(chunkTokens.value);
    if (chunkOverlap.value !== '') chunking.chunkOverlap = Number(chunkOverlap.value);
    if (Object.keys(chunking).length) body.chunking = chunking;
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
      + `${kb.chunking.chunkTokens}-token chunks, ${kb.chunking.chunkOverlap} overlap · `, h('code', { text: kb.id })),
    failure, stats, documents.section, searchSection(kb));
  documents.refresh();
}

function documentsSection(ctx, kb, showStats) {
  const failure = errorBox();
  const listHolder = h('div', {}, h('p', { class: 'muted', text: 'Loading documents…' }));
  const uploads = h('ul', { class: 'uploads', 'aria-label': 'Uploads' });
  const active = new Map(); // document id -> upload row, until its document is processed or failed
  let timer = null;
  let latest = [];

  const refresh = async () => {
    clearTimeout(timer);
    if (!ctx.live()) return;
    try {
      const [docs, fresh] = await Promise.all([
        api('GET', `${kbPath(kb.id)}/documents`), api('GET', kbPath(kb.id))]);
      if (!ctx.live()) return;
      latest = docs.items;
      showStats(fresh);
      put(listHolder, documentTable(latest));
      for (const doc of latest) {
        const row = active.get(doc.id);
        if (row) row.setStatus(doc);
      }
      failure.clear();
    } catch (err) {
      failure.show(err);
    }
    const waiting = latest.some((d) => IN_FLIGHT.has(d.status)) || [...active.values()].some((r) => !r.done);
    if (waiting && ctx.live()) timer = setTimeout(refresh, POLL_MS);
  };

  const documentTable = (docs) => {
    if (!docs.length) return h('p', { class: 'muted', text: 'No documents yet: drop files above.' });
    return table(`Documents of ${kb.name}`,
      ['File', 'Status', 'Error', 'Chunks', 'Tokens', 'Size', 'Updated', 'Actions'],
      docs.map((doc) => [
        doc.filename, statusBadge(doc.status),
        doc.error ? h('span', { class: 'error-text', text: `${doc.error.code}: ${doc.error.message}` }) : '–',
        fmtNumber(doc.chunks), fmtNumber(doc.tokens), fmtBytes(doc.size), fmtDate(doc.updatedAt),
        h('span', { class: 'row-actions' },
          h('button', { type: 'button', class: 'small', text: 'Reindex', 'aria-label': `Reindex ${doc.filename}`,
            onclick: (e) => reindex(doc, e.currentTarget) }),
          h('button', { type: 'button', class: 'small danger', text: 'Delete', 'aria-label': `Delete ${doc.filename}`,
            onclick: (e) => removeDocument(doc, e.currentTarget) })),
      ]));
  };

  const reindex = async (doc, button) => {
    if (!await confirmDialog(`Extract, chunk and embed "${doc.filename}" again? It stays searchable meanwhile.`,
      { confirmLabel: 'Reindex', title: 'Reindex document' })) return;
    try {
      await busy(button, api('POST', `${kbPath(kb.id)}/documents/${encodeURIComponent(doc.id)}/reindex`));
      announce(`${doc.filename} is being indexed again`);
    } catch (err) { failure.show(err); }
    refresh();
  };

  const removeDocument = async (doc, button) => {
    if (!await confirmDialog(`Delete "${doc.filename}" and its ${doc.chunks} chunks from ${kb.name}?`,
      { confirmLabel: 'Delete document', title: 'Delete document' })) return;
    try {
      await busy(button, api('DELETE', `${kbPath(kb.id)}/documents/${encodeURIComponent(doc.id)}`));
      announce(`${doc.filename} deleted`);
    } catch (err) { failure.show(err); }
    refresh();
  };

  const uploadOne = async (file) => {
    const progress = h('progress', { max: 1, value: 0 });
    const state = h('span', { class: 'upload-state', text: 'registering…' });
    const label = h('span', { class: 'upload-name', text: file.name });
    const item = h('li', { class: 'upload' }, label, progress, state);
    progress.setAttribute('aria-label', `Upload of ${file.name}`);
    uploads.append(item);
    const row = {
      done: false,
      setStatus(doc) {
        put(state, statusBadge(doc.status),
          ...(doc.error ? [h('span', { class: 'error-text', text: ` ${doc.error.code}: ${doc.error.message}` })] : []));
        if (!IN_FLIGHT.has(doc.status)) { row.done = true; announce(`${file.name}: ${doc.status}`); }
      },
    };
    try {
      const body = { filename: file.name, size: file.size };
      if (file.type) body.contentType = file.type;
      const answer = await api('POST', `${kbPath(kb.id)}/documents`, body);
      active.set(answer.document.id, row);
      item.dataset.documentId = answer.document.id;
      state.textContent = 'uploading…';
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
      ' — PDF, Word, text, Markdown, HTML.'), picker);
  zone.addEventListener('dragover', (e) => { e.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => { e.preventDefault(); zone.classList.remove('over'); uploadAll(e.dataTransfer.files); });

  const section = h('section', { 'aria-labelledby': 'documents-heading' },
    h('div', { class: 'section-head' }, h('h2', { id: 'documents-heading', text: 'Documents' }),
      h('button', { type: 'button', class: 'small', text: 'Refresh', onclick: () => refresh() })),
    zone, uploads, failure, listHolder);
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
  const debug = h('input', { name: 'debug', type: 'checkbox', checked: true });
  const failure = errorBox();
  const filterField = field('Filter (JSON, Bedrock operators)', filter);
  const results = h('div', { class: 'results', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', class: 'primary', text: 'Search' });
  const form = h('form', { class: 'search-form', novalidate: true },
    field('Question', query),
    h('div', { class: 'row' }, field('Strategy', strategy), field('topK', topK), field('minScore', minScore),
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
      h('strong', { text: r.source }), r.page ? ` p. ${r.page}` : '', ` · chunk ${r.chunkIndex}`,
      r.headers && r.headers.length ? h('span', { class: 'muted', text: ` · ${r.headers.join(' › ')}` }) : null,
      h('span', { class: 'score', text: `score ${fmtScore(r.similarity)}` }),
      r.truncated ? badge('truncated', 'wait') : null),
    debug && r.scores ? h('dl', { class: 'scores' },
      [['Semantic', r.scores.vectorScore], ['Keyword', r.scores.keywordScore], ['Fused', r.scores.fusedScore]]
        .map(([term, value]) => h('div', {}, h('dt', { text: term }), h('dd', { text: fmtScore(value) })))) : null,
    h('p', { class: 'passage-text', text: r.content })))));
}
