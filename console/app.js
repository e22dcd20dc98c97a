// The console's entry: the key (session storage; the local stack offers its demo key),
// the sections and the hash routes.
import { api, consoleSettings, session } from './api.js';
import { errorBox, field, h, put } from './ui.js';
import { renderKnowledgeBase, renderKnowledgeBases } from './kbs.js';
import { renderAgent, renderAgents } from './agents.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const signOut = document.getElementById('sign-out');
let signingIn = false; // a refused key is answered on the sign-in form itself
let generation = 0; // a view started before the last navigation stops updating the page

const ROUTES = [
  [/^#\/knowledge-bases\/([^/]+)$/, (ctx, id) => renderKnowledgeBase(ctx, decodeURIComponent(id))],
  [/^#\/knowledge-bases$/, (ctx) => renderKnowledgeBases(ctx)],
  [/^#\/agents\/([^/]+)$/, (ctx, id) => renderAgent(ctx, decodeURIComponent(id))],
  [/^#\/agents$/, (ctx) => renderAgents(ctx)],
];

function context() {
  const mine = ++generation;
  return {
    main,
    live: () => mine === generation,
    go: (hash) => { if (location.hash === hash) route(); else location.hash = hash; },
  };
}

async function signInView() {
  nav.hidden = true;
  signOut.hidden = true;
  document.title = 'Sign in · Knowledge bases console';
  const settings = await consoleSettings();
  const input = h('input', { type: 'password', name: 'apiKey', autocomplete: 'off', required: true, spellcheck: 'false' });
  const failure = errorBox();
  const submit = h('button', { type: 'submit', class: 'primary', text: 'Use this key' });
  const tryKey = async (key) => {
    failure.clear();
    session.set(key);
    signingIn = true;
    try {
      await api('GET', '/knowledge-bases?limit=1');
      signingIn = false;
      if (!location.hash || location.hash === '#/') location.hash = '#/knowledge-bases';
      route();
    } catch (err) {
      signingIn = false;
      session.clear();
      failure.show(err);
    }
  };
  const form = h('form', { class: 'panel narrow', onsubmit: (e) => { e.preventDefault(); tryKey(input.value); } },
    h('h1', { text: 'Sign in with an API key' }),
    h('p', { text: 'The key stays in this browser tab (session storage) and goes to the API with every request.' }),
    field('API key', input, 'kbk_… from `make key`, the API keys endpoint or your administrator'),
    failure,
    h('div', { class: 'actions' }, submit,
      settings.demoKey ? h('button', { type: 'button', id: 'use-demo-key', onclick: () => tryKey(settings.demoKey),
        text: 'Use the local demo key' }) : null));
  put(main, form);
  input.focus();
}

function markSection(hash) {
  for (const link of nav.querySelectorAll('a')) {
    if (hash.startsWith(`#/${link.dataset.section}`)) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

export async function route() {
  if (!session.key) { generation++; await signInView(); return; }
  nav.hidden = false;
  signOut.hidden = false;
  const hash = location.hash || '#/knowledge-bases';
  markSection(hash);
  for (const [pattern, render] of ROUTES) {
    const match = hash.match(pattern);
    if (match) {
      const ctx = context();
      put(main, h('p', { class: 'muted', text: 'Loading…' }));
      await render(ctx, ...match.slice(1));
      if (ctx.live()) { const heading = main.querySelector('h1'); if (heading) { heading.tabIndex = -1; } }
      return;
    }
  }
  location.hash = '#/knowledge-bases';
}

signOut.addEventListener('click', () => { session.clear(); location.hash = ''; route(); });
window.addEventListener('hashchange', () => { route(); main.focus({ preventScroll: true }); });
window.addEventListener('kb:unauthorized', () => { if (!signingIn) { session.clear(); route(); } });
route();
