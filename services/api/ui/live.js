// The live page: first paint from GET /v1/live, then pushed by GET /v1/events (server-sent
// events, resumed with Last-Event-ID by the browser itself). Every read goes through the
// browser session's cookie, so the page shows what the signed-in token may see. Text written by
// agents is only ever set as textContent. Addresses: `/ui/` (the default project, or
// `?project=<id>` for an admin's choice) and `/ui/handoffs/<id>` (the same page with that
// handoff's timeline open in the side panel), so a link to either can be shared.

import { drawSettled, drawTimes } from './live-chart.js';

const SETTLED = new Set(['UNAVAILABLE', 'RETURNED', 'FAILED', 'ACKNOWLEDGED', 'CANCELLED', 'DUPLICATE']);
// As many settled rows as `GET /v1/live` gives (LIMITS.liveRecentlySettled in libs/domain/limits.ts; a static file cannot import it).
const KEEP_SETTLED = 20;
const $ = (id) => document.getElementById(id);

let session = null;
let query = '';
/** The project named in the address (`?project=`), sent as X-Baton-Project; null: the API's default. */
const project = new URLSearchParams(location.search).get('project');
const HANDOFF_PATH = /^\/ui\/handoffs\/([^/]+)$/;
/** Handoffs shown, by id: { id, title, from, to, state, workState, updatedAt, eventId }. */
const handoffs = new Map();
let selected = null;
let refreshTimer = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c ?? '')));
  return node;
}

const stateBadge = (state) => el('span', { class: 'state', 'data-state': state }, state);
const ms = (v) => (v === null ? '–' : v < 1000 ? `${v} ms` : `${(v / 1000).toFixed(1)} s`);
const time = (iso) => new Date(iso).toLocaleTimeString();

/** The page's own address for `path` (`/ui/` or `/ui/handoffs/<id>`), keeping the project chosen. */
const pageUrl = (path) => (project ? `${path}?project=${encodeURIComponent(project)}` : path);

async function api(path) {
  const res = await fetch(path, { headers: { accept: 'application/json', ...(project ? { 'x-baton-project': project } : {}) } });
  if (res.status === 401) {
    // Signed in again, the browser comes back to this very address (a handoff's panel, a project).
    location.assign(`/ui/sign-in?next=${encodeURIComponent(location.pathname + location.search)}`);
    throw new Error('signed out');
  }
  if (!res.ok) {
    const body = await res.json().catch(() => null);
    throw new Error(body?.error?.message ?? `${path}: ${res.status}`);
  }
  return res.json();
}

/** What an agent's turns used (GET /v1/live `usage`): turns, time, tokens, cost. */
function usageText(u) {
  const tokens = u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens;
  const cost = u.costUsd === null ? '' : ` · $${u.costUsd.toFixed(4)}`;
  return `${u.turns} turn${u.turns === 1 ? '' : 's'} · ${u.turnSeconds.toFixed(1)} s · ${tokens.toLocaleString('en-US')} tokens (${u.inputTokens.toLocaleString('en-US')} in, ${u.outputTokens.toLocaleString('en-US')} out)${cost}`;
}

function renderAgents(agents) {
  $('agents').replaceChildren(
    ...agents.map((a) =>
      el(
        'li',
        { 'data-agent': a.id, 'data-activity': a.activity },
        el('div', { class: 'name' }, a.displayName || a.id),
        el('div', { class: 'dim' }, `${a.activity} · ${a.provider}${a.pool !== 'default' ? ` · ${a.pool}` : ''}`),
        el('div', { class: 'dim' }, `${a.live} in turn · ${a.queued} waiting${a.attention ? ` · ${a.attention} need attention` : ''}`),
        ...(a.usage
          ? [
              el('div', { class: 'dim usage', 'data-usage': 'today' }, `today: ${usageText(a.usage.today)}`),
              el('div', { class: 'dim usage', 'data-usage': 'last-hour' }, `last hour: ${usageText(a.usage.lastHour)}`),
            ]
          : []),
      ),
    ),
  );
}

function renderTimes(t) {
  $('times-window').textContent = `last ${Math.round(t.windowSeconds / 60)} min`;
  for (const key of ['accepted', 'returned']) {
    const cells = document.querySelectorAll(`#times tr[data-figure="${key}"] td`);
    const f = t[key];
    cells[0].textContent = ms(f.p50Ms);
    cells[1].textContent = ms(f.p90Ms);
    cells[2].textContent = f.count;
  }
}

function renderAttention(items) {
  $('attention-count').textContent = items.length;
  $('attention-count').setAttribute('data-n', String(items.length));
  $('attention').replaceChildren(
    ...items.map((h) => {
      const li = el(
        'li',
        { 'data-handoff-id': h.id },
        ...h.reasons.map((r) => el('span', { class: 'reason' }, r)),
        h.title ?? '(message)',
        el('span', { class: 'dim' }, ` ${h.from} → ${h.to ?? '@project'} `),
        stateBadge(h.state),
      );
      li.addEventListener('click', () => showHandoff(h.id));
      return li;
    }),
  );
}

function renderHandoffs() {
  const rows = [...handoffs.values()];
  const open = rows.filter((h) => !SETTLED.has(h.state)).sort((a, b) => b.updatedAt.localeCompare(a.updatedAt));
  const settled = rows.filter((h) => SETTLED.has(h.state)).sort((a, b) => b.updatedAt.localeCompare(a.updatedAt));
  for (const old of settled.slice(KEEP_SETTLED)) handoffs.delete(old.id);
  // Rows are drawn anew on every event: a row that had the keyboard's focus gets it back.
  const focused = document.activeElement?.closest?.('#handoffs tr')?.getAttribute('data-handoff-id');
  $('handoffs').tBodies[0].replaceChildren(
    ...[...open, ...settled.slice(0, KEEP_SETTLED)].map((h) => {
      const tr = el(
        'tr',
        { 'data-handoff-id': h.id, 'data-state': h.state, 'aria-selected': String(h.id === selected) },
        el('td', {}, h.title ?? '(message)'),
        el('td', {}, `${h.from} → ${h.to ?? '@project'}`),
        el('td', {}, stateBadge(h.state)),
        el('td', {}, h.workState ?? ''),
        el('td', { class: 'dim when' }, time(h.updatedAt)),
      );
      tr.addEventListener('click', () => showHandoff(h.id));
      // Reachable without a mouse: Tab to a row, Enter opens it.
      tr.tabIndex = 0;
      tr.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') showHandoff(h.id);
      });
      return tr;
    }),
  );
  if (focused)
    $('handoffs')
      .querySelector(`tr[data-handoff-id="${CSS.escape(focused)}"]`)
      ?.focus();
}

async function refresh() {
  refreshTimer = null;
  const live = await api(`/v1/live${query}`);
  renderAgents(live.agents);
  renderTimes(live.deliveryTimes);
  renderAttention(live.attention);
  drawSettled($('chart-settled'), $('chart-legend'), live.perMinute);
  drawTimes($('chart-times'), $('chart-times-max'), live.perMinute);
  // Past the sample the chart reads (the newest 1,000 handoffs), it says so rather than undercount quietly.
  $('chart-sample').hidden = !live.perMinuteSampleFull;
  const snapshotAt = BigInt(live.lastEventId);
  const inSnapshot = new Set(live.inFlight.map((h) => h.id));
  for (const h of [...live.inFlight, ...live.recentlySettled]) {
    const known = handoffs.get(h.id);
    if (!known || known.eventId <= snapshotAt) handoffs.set(h.id, { ...h, eventId: snapshotAt });
  }
  // Open ones the snapshot no longer lists settled (or left sight) before it was read.
  for (const [id, h] of handoffs) if (!inSnapshot.has(id) && !SETTLED.has(h.state) && h.eventId <= snapshotAt) handoffs.delete(id);
  renderHandoffs();
  return live;
}

/** Counts, lists and times are re-read at most twice a second while events arrive. */
function scheduleRefresh() {
  // A failed refresh keeps what the page shows; the next event schedules another.
  if (refreshTimer === null) refreshTimer = setTimeout(() => refresh().catch(() => undefined), 500);
}

function onEvent(message) {
  const e = JSON.parse(message.data);
  const id = BigInt(e.id);
  const known = handoffs.get(e.handoffId);
  if (!known || known.eventId < id) {
    handoffs.set(e.handoffId, {
      id: e.handoffId,
      title: e.title ?? known?.title ?? null,
      from: e.sender ?? known?.from,
      to: e.recipient ?? known?.to ?? null,
      state: e.to,
      // A delivery move's row records no work state: the feed says what the handoff's is now.
      workState: e.workTo ?? e.workState ?? known?.workState ?? null,
      updatedAt: e.at,
      eventId: id,
    });
  }
  renderHandoffs();
  if (e.handoffId === selected)
    appendTimeline({
      at: e.at,
      from: e.from,
      to: e.to,
      workFrom: e.workFrom,
      workTo: e.workTo,
      event: e.event,
      actor: e.actor,
      reason: e.reason,
    });
  scheduleRefresh();
}

function follow(after) {
  const params = new URLSearchParams({ after: String(after) });
  if (query) params.set('all_owners', 'true');
  // An EventSource sends no headers: the project goes in the query.
  if (project) params.set('project', project);
  const source = new EventSource(`/v1/events?${params}`);
  const status = $('connection');
  source.addEventListener('open', () => {
    status.textContent = 'live';
    status.setAttribute('data-connection', 'live');
  });
  source.addEventListener('error', () => {
    status.textContent = 'reconnecting';
    status.setAttribute('data-connection', 'reconnecting');
  });
  source.addEventListener('delivery', onEvent);
  source.addEventListener('work', onEvent);
}

function appendTimeline(ev) {
  const move = ev.workTo && ev.from === ev.to ? `work ${ev.workFrom ?? '–'} → ${ev.workTo}` : `${ev.from ?? '–'} → ${ev.to}`;
  const actor = ev.actor?.id ? ` by ${ev.actor.kind} ${ev.actor.id}` : ev.actor ? ` by ${ev.actor.kind}` : '';
  $('timeline').append(
    el(
      'li',
      { 'data-to': ev.to },
      el('span', { class: 'dim' }, `${time(ev.at)} `),
      stateBadge(ev.to),
      ` ${move} · ${ev.event}${actor}${ev.reason ? ` · ${ev.reason}` : ''}`,
    ),
  );
}

/** Opens a handoff's timeline in the side panel, and makes its own address the page's. */
function showHandoff(id) {
  const url = pageUrl(`/ui/handoffs/${encodeURIComponent(id)}`);
  if (location.pathname + location.search !== url) history.pushState(null, '', url);
  openTimeline(id).catch((err) => showTimelineError(id, err));
}

async function openTimeline(id) {
  selected = id;
  renderHandoffs();
  const panel = $('timeline-section');
  panel.hidden = false;
  document.body.classList.add('with-panel');
  panel.setAttribute('data-handoff-id', id);
  panel.removeAttribute('data-loaded');
  $('timeline-link').href = pageUrl(`/ui/handoffs/${encodeURIComponent(id)}`);
  $('timeline-error').hidden = true;
  $('timeline-title').textContent = '…';
  $('timeline').replaceChildren();
  const h = await api(`/v1/handoffs/${encodeURIComponent(id)}${query}`);
  if (selected !== id) return;
  $('timeline-title').textContent = `${h.title ?? '(message)'} · ${h.from} → ${h.to ?? '@project'}`;
  for (const ev of h.events) appendTimeline(ev);
  panel.setAttribute('data-loaded', 'true');
  $('timeline-close').focus();
}

function showTimelineError(id, err) {
  if (selected !== id || String(err?.message) === 'signed out') return;
  $('timeline-title').textContent = '';
  $('timeline-error').textContent = err?.message ?? String(err);
  $('timeline-error').hidden = false;
}

function closeTimeline() {
  selected = null;
  $('timeline-section').hidden = true;
  document.body.classList.remove('with-panel');
  $('timeline-section').removeAttribute('data-handoff-id');
  renderHandoffs();
}

/** The panel follows the address: back and forward open and close it. */
function followAddress() {
  const id = HANDOFF_PATH.exec(location.pathname)?.[1];
  if (id) openTimeline(decodeURIComponent(id)).catch((err) => showTimelineError(decodeURIComponent(id), err));
  else closeTimeline();
}

/** An admin's token may see several projects: a picker, the choice kept in the address. */
async function fillProjects(current) {
  const { items } = await api('/v1/projects');
  const picker = $('project');
  picker.replaceChildren(...items.map((p) => el('option', { value: p.id }, p.name && p.name !== p.id ? `${p.id} · ${p.name}` : p.id)));
  picker.value = current;
  $('project-picker').hidden = items.length < 2;
  picker.addEventListener('change', () => {
    // A new project is a new page: its own snapshot and stream, no handoff of the last one open.
    location.assign(`/ui/?project=${encodeURIComponent(picker.value)}`);
  });
}

async function signOut() {
  await fetch('/ui/session', { method: 'DELETE', headers: { 'x-csrf-token': session.csrfToken } });
  location.assign('/ui/sign-in');
}

async function main() {
  session = await api('/ui/session');
  const c = session.caller;
  // An admin sees every owner's handoffs (all_owners); an agent sees its own and unowned work.
  query = c.admin ? '?all_owners=true' : '';
  $('who').textContent = c.admin ? 'admin · all owners' : `agent ${c.agent} · project ${c.project}`;
  $('queues-link').hidden = !c.admin;
  $('sign-out').addEventListener('click', () => signOut());
  $('timeline-close').addEventListener('click', () => {
    history.pushState(null, '', pageUrl('/ui/'));
    closeTimeline();
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && selected !== null) $('timeline-close').click();
  });
  window.addEventListener('popstate', followAddress);
  const live = await refresh();
  document.body.setAttribute('data-project', live.project);
  follow(live.lastEventId);
  followAddress();
  await fillProjects(live.project);
}

main().catch((err) => {
  if (String(err?.message) !== 'signed out') $('connection').textContent = `error: ${err?.message ?? err}`;
});
