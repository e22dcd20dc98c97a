// Agents and their knowledge-base tools: list and create agents; an agent's tools with
// badges and the deleted-knowledge-base warning; "Add Knowledge Base" (stats, linked,
// quick add, configure and back to the list); configure and edit with the API's tool rules;
// remove; try it. The API answers these shapes: the knowledge bases as `data`, a
// tool added or edited as `data.tool`.
import { api, BASE, session } from './api.js';
import {
  announce, badge, busy, confirmDialog, errorBox, field, fmtDate, fmtNumber, h, openDialog, put, table,
} from './ui.js';
import { statusSummary } from './kbs.js';

const agentPath = (id) => `/agents/${encodeURIComponent(id)}`;
// The tool rules, as the API words them (chalicelib/agents/tools.py, limits.py).
export const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const RULES = {
  toolName: "1 to 64 letters, digits, '_' or '-' (the rule every major LLM tool API accepts)",
  toolDescription: 'is required',
  defaultTopK: 'must be between 1 and 20',
  defaultMinScore: 'must be between 0 and 1',
};

export async function renderAgents(ctx) {
  document.title = 'Agents · console';
  const failure = errorBox();
  let items = [];
  try { items = (await api('GET', '/agents')).items; } catch (err) { failure.show(err); }
  if (!ctx.live()) return;
  const create = h('button', { type: 'button', class: 'primary', text: 'New agent', onclick: () => createAgentDialog(ctx) });
  const rows = items.map((agent) => [
    h('a', { href: `#${agentPath(agent.id)}`, text: agent.name }),
    agent.description || '–',
    fmtNumber(agent.availableTools.length),
    fmtDate(agent.updatedAt),
  ]);
  put(ctx.main,
    h('div', { class: 'page-head' }, h('h1', { text: 'Agents' }), create), failure,
    items.length ? table('Your agents', ['Name', 'Description', 'Tools', 'Updated'], rows)
      : h('p', { class: 'muted', text: 'No agents yet: create one, then link knowledge bases to it as tools.' }));
}

function createAgentDialog(ctx) {
  const name = h('input', { name: 'name', required: true, maxlength: 200, autocomplete: 'off' });
  const description = h('textarea', { name: 'description', rows: 2 });
  const failure = errorBox();
  const formId = 'create-agent-form';
  const submit = h('button', { type: 'submit', class: 'primary', form: formId, text: 'Create' });
  const form = h('form', { id: formId, novalidate: true }, field('Name', name), field('Description', description), failure);
  const { close } = openDialog({ title: 'New agent', body: form, actions: [submit] });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    failure.clear();
    try {
      const agent = await busy(submit, api('POST', '/agents', { name: name.value, description: description.value }));
      close();
      announce(`Agent ${agent.name} created`);
      ctx.go(`#${agentPath(agent.id)}`);
    } catch (err) { failure.show(err); }
  });
}

export async function renderAgent(ctx, id) {
  const failure = errorBox();
  let agent;
  try { agent = await api('GET', agentPath(id)); } catch (err) { failure.show(err); }
  if (!ctx.live()) return;
  if (!agent) {
    put(ctx.main, h('h1', { text: 'Agent' }), failure,
      h('p', {}, h('a', { href: '#/agents', text: 'Back to the agents' })));
    return;
  }
  document.title = `${agent.name} · console`;
  const toolsHolder = h('div', { class: 'tools' });
  const refresh = async () => {
    try {
      const tools = (await api('GET', `${agentPath(agent.id)}/tools`)).items;
      if (!ctx.live()) return;
      failure.clear();
      put(toolsHolder, tools.length
        ? h('ul', { class: 'tool-list', 'aria-label': `Tools of ${agent.name}` }, tools.map((tool) => toolCard(agent, tool, refresh)))
        : h('p', { class: 'muted', text: 'No tools yet: browse the knowledge bases to link one.' }));
    } catch (err) { failure.show(err); }
  };
  const browse = h('button', { type: 'button', class: 'primary', onclick: () => browseDialog(agent, refresh) },
    databaseIcon(), 'Add Knowledge Base');
  put(ctx.main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/agents', text: 'Agents' }), ' / '),
    h('div', { class: 'page-head' }, h('h1', { text: agent.name }), browse),
    agent.description ? h('p', { class: 'lead', text: agent.description }) : null,
    h('p', { class: 'muted small' }, h('code', { text: agent.id })),
    connectSection(agent),
    h('section', { 'aria-labelledby': 'tools-heading' },
      h('h2', { id: 'tools-heading', text: 'Tools' }), failure, toolsHolder));
  await refresh();
}

// The agent's MCP endpoint (streamable HTTP) and the mcpServers block Claude Code, Cursor
// and other MCP clients read; the key stays a placeholder unless asked for.
export function mcpUrl(agent) {
  return `${location.origin}${BASE}${agentPath(agent.id)}/mcp`;
}

function mcpConfig(agent, key) {
  const name = `kb-${agent.name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '') || 'agent'}`;
  return JSON.stringify({ mcpServers: { [name]: { type: 'http', url: mcpUrl(agent),
    headers: { Authorization: `Bearer ${key || 'YOUR_API_KEY'}` } } } }, null, 2);
}

function connectSection(agent) {
  const config = h('pre', { class: 'mcp-config', tabindex: 0, 'aria-label': 'MCP client configuration',
    text: mcpConfig(agent) });
  const withKey = h('input', { type: 'checkbox', id: 'mcp-with-key', name: 'withKey' });
  withKey.addEventListener('change', () => { config.textContent = mcpConfig(agent, withKey.checked ? session.key : ''); });
  return h('section', { 'aria-labelledby': 'connect-heading', class: 'connect' },
    h('h2', { id: 'connect-heading', text: 'Connect an MCP client' }),
    h('p', {}, 'MCP endpoint: ', h('code', { class: 'mcp-url', text: mcpUrl(agent) }),
      ' (streamable HTTP; send your API key as ', h('code', { text: 'Authorization: Bearer <key>' }), ').'),
    h('p', { class: 'muted small', text: 'Paste this into your MCP client\'s configuration (the mcpServers block of'
      + ' Claude Code\'s .mcp.json, Cursor\'s mcp.json and others):' }),
    config,
    h('div', { class: 'check' }, withKey, h('label', { for: 'mcp-with-key', text: 'Put the key this console uses in it' })));
}

const WARNINGS = {
  knowledge_base_missing: 'Knowledge base not found. It may have been deleted. Invoking this tool tells the model so; remove it or link another knowledge base.',
  knowledge_base_hidden: 'Its knowledge base is private to someone else: you cannot see its name or search it.',
};

const TOOL_BADGES = { knowledge_base: 'Knowledge Base', knowledge_search: 'Knowledge search tool',
  knowledge_base_write: 'Adds entries' };  // the badge says "Knowledge Base"

function toolCard(agent, tool, refresh) {
  const isKb = tool.type === 'knowledge_base';
  // A read-write tool's write tool comes with it (the read-write mode): edited and removed through it.
  const isWrite = tool.type === 'knowledge_base_write';
  const config = tool.config || {};
  const warning = WARNINGS[tool.status];
  const nameId = `tool-name-${tool.id}`;
  const edit = isKb ? h('button', { type: 'button', class: 'small', text: 'Edit', 'aria-label': `Edit ${tool.name}`,
    onclick: () => toolDialog({ agent, tool, onDone: refresh }) }) : null;
  const failure = errorBox();
  const remove = isWrite ? null
    : h('button', { type: 'button', class: 'small danger', text: 'Remove', 'aria-label': `Remove ${tool.name}` });
  remove?.addEventListener('click', async () => {
    const sure = await confirmDialog(`Remove the tool ${tool.name} from ${agent.name}? The knowledge base itself stays.`,
      { confirmLabel: 'Remove tool', title: 'Remove tool' });
    if (!sure) return;
    try {
      await busy(remove, api('DELETE', `${agentPath(agent.id)}/tools/${encodeURIComponent(tool.id)}`));
      announce(`Tool ${tool.name} removed`);
      await refresh();
    } catch (err) { failure.show(err); }
  });
  const card = h('li', { class: `tool-card${warning ? ' warn' : ''}`, 'aria-labelledby': nameId, 'data-tool-id': tool.id },
    h('div', { class: 'tool-head' },
      h('h3', { id: nameId }, isKb || isWrite ? databaseIcon() : null, h('code', { text: tool.name })),
      badge(TOOL_BADGES[tool.type] || 'Function tool', isKb || isWrite ? 'kb' : 'fn'),
      (isKb || isWrite) && tool.status === 'ok' ? badge(tool.knowledgeBaseName || config.knowledgeBaseName, 'name') : null),
    tool.description ? h('p', { class: 'tool-description', text: tool.description }) : null,
    warning ? h('p', { class: 'warning', role: 'status' }, h('strong', { text: 'Warning: ' }), warning) : null,
    isKb ? h('p', { class: 'muted small' },
      `topK ${config.defaultTopK} · minScore ${config.defaultMinScore} · ${config.mode || 'read-only'} · `,
      h('code', { text: config.knowledgeBaseId })) : null,
    isWrite ? h('p', { class: 'muted small', text: 'Comes with its read-write search tool: set that tool to read-only to take it away.' }) : null,
    isWrite ? null : h('div', { class: 'row-actions' }, edit, remove),
    failure,
    isWrite ? null : tryIt(agent, tool));
  return card;
}

// The text block the model reads, as the MCP endpoint renders it (the API's ?format=mcp
// answers MCP's CallToolResult), and the tool result's JSON behind a toggle.
function tryIt(agent, tool) {
  const query = h('input', { type: 'search', name: 'query', required: true, maxlength: 2000 });
  const failure = errorBox();
  const output = h('pre', { class: 'tool-result', hidden: true, tabindex: 0, 'aria-label': `Result of ${tool.name}` });
  const json = h('pre', { class: 'tool-json', tabindex: 0, 'aria-label': `JSON result of ${tool.name}` });
  const jsonToggle = h('details', { class: 'tool-json-toggle', hidden: true }, h('summary', { text: 'JSON' }), json);
  const submit = h('button', { type: 'submit', class: 'small', text: 'Invoke' });
  const form = h('form', { class: 'try-it', novalidate: true }, field(`Try ${tool.name}: a query`, query),
    submit, failure, output, jsonToggle);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    failure.clear();
    try {
      const result = await busy(submit, api('POST',
        `${agentPath(agent.id)}/tools/${encodeURIComponent(tool.id)}/invoke?format=mcp`, { query: query.value }, { raw: true }));
      output.textContent = (result.content || []).filter((block) => block.type === 'text').map((block) => block.text).join('\n\n');
      output.classList.toggle('is-error', Boolean(result.isError));
      json.textContent = JSON.stringify(result.structuredContent ?? result, null, 2);
      output.hidden = false;
      jsonToggle.hidden = false;
    } catch (err) { failure.show(err); output.hidden = true; jsonToggle.hidden = true; }
  });
  return h('details', { class: 'try' }, h('summary', { text: 'Try it: what the model would read' }), form);
}

async function browseDialog(agent, refresh) {
  const failure = errorBox();
  const list = h('div', { class: 'browse-list' }, h('p', { class: 'muted', text: 'Loading…' }));
  const { close } = openDialog({ title: 'Add Knowledge Base', body: h('div', {}, failure, list), wide: true });
  const load = async (focusId) => {
    let items;
    try { items = await api('GET', `${agentPath(agent.id)}/available-knowledge-bases`); } catch (err) {
      failure.show(err);
      return;
    }
    if (!items.length) {
      put(list, h('p', { class: 'muted', text: 'There is no knowledge base you may link. Create one first.' }));
      return;
    }
    put(list, h('ul', { class: 'kb-choices', 'aria-label': 'Knowledge bases' }, items.map((kb) => {
      const titleId = `browse-${kb.id}`;
      const quick = h('button', { type: 'button', class: 'small primary', text: 'Quick add', disabled: kb.linked,
        'aria-label': `Quick add ${kb.name}`, 'data-kb-id': kb.id });
      const configure = h('button', { type: 'button', class: 'small', text: 'Configure…', disabled: kb.linked,
        'aria-label': `Configure a tool for ${kb.name}` });
      quick.addEventListener('click', async () => {
        failure.clear();
        try {
          const { tool } = await busy(quick, api('POST', `${agentPath(agent.id)}/knowledge-base-tools`,
            { quickAdd: true, knowledgeBaseId: kb.id }));
          announce(`Tool ${tool.name} added`);
          await Promise.all([refresh(), load(kb.id)]);
        } catch (err) { failure.show(err); }
      });
      configure.addEventListener('click', () => {
        close();
        toolDialog({ agent, kb, onDone: refresh, onBack: () => browseDialog(agent, refresh) });
      });
      return h('li', { class: 'kb-choice', 'aria-labelledby': titleId, 'data-kb-id': kb.id },
        h('div', { class: 'tool-head' }, h('h3', { id: titleId, text: kb.name }),
          badge(kb.visibility), kb.linked ? badge('Linked', 'ok linked') : null),
        kb.description ? h('p', { class: 'small', text: kb.description }) : null,
        h('p', { class: 'muted small' }, `${fmtNumber(kb.stats.documentCount)} documents · `
          + `${fmtNumber(kb.stats.chunkCount)} chunks · ${fmtNumber(kb.stats.totalTokens)} tokens `,
        statusSummary(kb.stats.documentsByStatus)),
        h('div', { class: 'row-actions' }, quick, configure));
    })));
    const again = focusId && list.querySelector(`li[data-kb-id="${CSS.escape(focusId)}"] button:not([disabled])`);
    (again || list.querySelector('button:not([disabled])') || list.closest('dialog').querySelector('.close')).focus();
  };
  await load();
}

// A database icon (lucide's), drawn inline: the content policy allows no other images.
function databaseIcon() {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  const attrs = { viewBox: '0 0 24 24', width: 16, height: 16, fill: 'none', stroke: 'currentColor', 'stroke-width': 2,
    'stroke-linecap': 'round', 'stroke-linejoin': 'round', 'aria-hidden': 'true', focusable: 'false', class: 'icon',
    'data-icon': 'database' };
  for (const [name, value] of Object.entries(attrs)) svg.setAttribute(name, value);
  const shape = (tag, values) => {
    const el = document.createElementNS(NS, tag);
    for (const [name, value] of Object.entries(values)) el.setAttribute(name, value);
    svg.append(el);
  };
  shape('ellipse', { cx: 12, cy: 5, rx: 9, ry: 3 });
  shape('path', { d: 'M3 5v14a9 3 0 0 0 18 0V5' });
  shape('path', { d: 'M3 12a9 3 0 0 0 18 0' });
  return svg;
}

function suggestedName(kbName) {
  const snake = kbName.toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '');
  return `search_${snake || 'knowledge_base'}`.slice(0, 64);
}

// Configure (a new tool for `kb`) or edit (`tool`): the tool rules checked here first,
// field by field; whatever the API still refuses is shown as it words it. onBack: the
// configure view's "Back to the list" (back to the knowledge bases).
export function toolDialog({ agent, kb, tool, onDone, onBack }) {
  const editing = Boolean(tool);
  const config = editing ? tool.config : {};
  const name = h('input', { name: 'toolName', required: true, autocomplete: 'off', spellcheck: 'false',
    value: editing ? tool.name : suggestedName(kb.name) });
  const description = h('textarea', { name: 'toolDescription', rows: 3, required: true });
  description.value = editing ? (tool.description || '') : `Search the ${kb.name} knowledge base${kb.description ? `: ${kb.description}` : ''}`;
  const topK = h('input', { name: 'defaultTopK', type: 'number', inputmode: 'numeric', min: 1, max: 20, step: 1,
    value: editing ? config.defaultTopK : 5 });
  const minScore = h('input', { name: 'defaultMinScore', type: 'number', inputmode: 'decimal', min: 0, max: 1, step: 0.05,
    value: editing ? config.defaultMinScore : 0.3 });
  const fields = {
    toolName: field('Tool name', name, 'letters, digits, _ and -; at most 64'),
    toolDescription: field('Description (what the model reads to decide when to call it)', description),
    defaultTopK: field('Default topK (1–20)', topK),
    defaultMinScore: field('Default minScore (0–1)', minScore, 'the passage\'s cosine similarity to the question'),
  };
  const failure = errorBox();
  const formId = editing ? 'edit-tool-form' : 'configure-tool-form';
  const submit = h('button', { type: 'submit', class: 'primary', form: formId, text: editing ? 'Save' : 'Add tool' });
  const cancel = h('button', { type: 'button', text: 'Cancel' });
  const back = onBack ? h('button', { type: 'button', class: 'quiet back', text: 'Back to the list' }) : null;
  const form = h('form', { id: formId, novalidate: true },
    editing ? h('p', { class: 'muted small' }, 'Knowledge base: ', h('strong', { text: tool.knowledgeBaseName || config.knowledgeBaseName || config.knowledgeBaseId }))
      : h('p', { class: 'muted small' }, 'Knowledge base: ', h('strong', { text: kb.name })),
    Object.values(fields), failure);
  const { close } = openDialog({ title: editing ? `Edit ${tool.name}` : `Configure a tool for ${kb.name}`, body: form,
    actions: [back, cancel, submit].filter(Boolean) });
  cancel.addEventListener('click', () => close());
  if (back) back.addEventListener('click', () => { close(); onBack(); });

  const check = () => {
    const values = {
      toolName: name.value.trim(), toolDescription: description.value.trim(),
      defaultTopK: topK.value === '' ? NaN : Number(topK.value),
      defaultMinScore: minScore.value === '' ? NaN : Number(minScore.value),
    };
    const problems = {
      toolName: TOOL_NAME.test(values.toolName) ? '' : RULES.toolName,
      toolDescription: values.toolDescription ? '' : RULES.toolDescription,
      defaultTopK: Number.isInteger(values.defaultTopK) && values.defaultTopK >= 1 && values.defaultTopK <= 20 ? '' : RULES.defaultTopK,
      defaultMinScore: Number.isFinite(values.defaultMinScore) && values.defaultMinScore >= 0 && values.defaultMinScore <= 1
        ? '' : RULES.defaultMinScore,
    };
    for (const [key, problem] of Object.entries(problems)) fields[key].setError(problem ? `${key}: ${problem}` : '');
    const first = Object.keys(problems).find((key) => problems[key]);
    return first ? { first } : { values };
  };

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    failure.clear();
    const { values, first } = check();
    if (first) { fields[first].querySelector('input, textarea').focus(); return; }
    let request;
    if (editing) {
      const before = { toolName: tool.name, toolDescription: tool.description || '',
        defaultTopK: config.defaultTopK, defaultMinScore: config.defaultMinScore };
      const changes = Object.fromEntries(Object.entries(values).filter(([key, value]) => value !== before[key]));
      if (!Object.keys(changes).length) { close(); return; }
      request = api('PATCH', `${agentPath(agent.id)}/knowledge-base-tools/${encodeURIComponent(tool.id)}`, changes);
    } else {
      request = api('POST', `${agentPath(agent.id)}/knowledge-base-tools`, { knowledgeBaseId: kb.id, ...values });
    }
    try {
      const { tool: saved } = await busy(submit, request);
      close();
      announce(editing ? `Tool ${saved.name} saved` : `Tool ${saved.name} added`);
      if (onDone) await onDone();
    } catch (err) { failure.show(err); }
  });
}
