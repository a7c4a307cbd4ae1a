// The epitaph web console: dead-letter flows, queues, peek and redrive.
//
// Every string that comes from the broker (queue and exchange names,
// message bodies, headers, properties, errors) is rendered as a Preact text
// child or attribute, never as markup, so a body holding <script> is shown
// as text. Nothing here sets innerHTML.
import { h, render } from 'preact';
import { useState, useEffect, useRef, useCallback } from 'preact/hooks';
import htm from 'htm';
import dagre from 'dagre';

const html = htm.bind(h);

// ---------------------------------------------------------------- API

const AUTH_KEY = 'epitaph-console-auth';

function loadAuth() {
  try { return JSON.parse(sessionStorage.getItem(AUTH_KEY)); } catch { return null; }
}
function saveAuth(a) { sessionStorage.setItem(AUTH_KEY, JSON.stringify(a)); }
function clearAuth() { sessionStorage.removeItem(AUTH_KEY); }

// base64 of UTF-8 text (btoa alone takes Latin-1 only).
function b64(text) {
  let bin = '';
  for (const byte of new TextEncoder().encode(text)) bin += String.fromCharCode(byte);
  return btoa(bin);
}

// authHeaders are the API's credentials: basic auth, or an OAuth 2 token
// as a bearer token when no user name is given.
function authHeaders(a) {
  if (!a) return {};
  if (!a.user) return { Authorization: 'Bearer ' + a.password };
  return { Authorization: 'Basic ' + b64(a.user + ':' + a.password) };
}

class ApiError extends Error {
  constructor(status, reason, body) {
    super(reason);
    this.status = status;
    this.body = body;
  }
}

let onUnauthorized = () => {};

async function api(method, path, body) {
  const headers = authHeaders(loadAuth());
  // credentials 'omit': the Authorization header is the console's own, and
  // no cookie or cached browser login is wanted (nor the browser's login
  // prompt on a 401).
  const init = { method, headers, credentials: 'omit' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch('/api' + path, init);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (res.status === 401) onUnauthorized();
  if (!res.ok) {
    const reason = (data && (data.reason || data.error)) || text || res.statusText;
    throw new ApiError(res.status, `${res.status}: ${reason}`, data);
  }
  return data;
}

const enc = encodeURIComponent;
const qpath = (vhost, name) => `/queues/${enc(vhost)}/${enc(name)}`;

// ---------------------------------------------------------------- live events

// The dead-letter event stream (GET /api/events/dead-letters, Server-Sent
// Events), read with fetch so that it carries the same Authorization header
// as every other call (EventSource cannot send one). One stream serves the
// whole page; it reconnects after a failure.
const live = {
  connected: false,
  listeners: new Set(),
  deaths: new Map(),   // vhost\0queue\0reason -> {times: [ms], total}
  flows: new Map(),    // vhost\0exchange\0target\0reason -> {times, total}
  arrivals: new Map(), // vhost\0queue -> {times, total}
  inflows: new Map(),  // vhost\0target\0source queue\0reason -> {times, total}
  targets: new Map(),  // vhost\0exchange -> Set of target queues seen
  recent: [],          // the last events, newest first
  lost: 0,
  abort: null,
};

const WINDOW_MS = 10000;

function bump(map, key, now) {
  let c = map.get(key);
  if (!c) { c = { times: [], total: 0 }; map.set(key, c); }
  c.times.push(now);
  c.total++;
  while (c.times.length && c.times[0] < now - WINDOW_MS) c.times.shift();
}

// rate is events per second over the last WINDOW_MS.
function rate(map, key) {
  const c = map.get(key);
  if (!c) return 0;
  const since = Date.now() - WINDOW_MS;
  let n = 0;
  for (const t of c.times) if (t >= since) n++;
  return n / (WINDOW_MS / 1000);
}
const total = (map, key) => (map.get(key) ? map.get(key).total : 0);

function keyOf(...parts) { return parts.join('\u0000'); }

function handleEvent(kind, data) {
  if (kind === 'gap') {
    live.lost += data.lost || 0;
  } else if (kind === 'dead_letter') {
    const now = Date.now();
    bump(live.deaths, keyOf(data.vhost, data.queue, data.reason), now);
    for (const t of data.target_queues || []) {
      bump(live.arrivals, keyOf(data.vhost, t), now);
      bump(live.inflows, keyOf(data.vhost, t, data.queue, data.reason), now);
      if (data.exchange !== null && data.exchange !== undefined) {
        bump(live.flows, keyOf(data.vhost, data.exchange, t, data.reason), now);
        const k = keyOf(data.vhost, data.exchange);
        if (!live.targets.has(k)) live.targets.set(k, new Set());
        live.targets.get(k).add(t);
      }
    }
    live.recent.unshift(data);
    if (live.recent.length > 50) live.recent.length = 50;
  } else {
    return;
  }
  for (const fn of live.listeners) fn(data);
}

function setConnected(v) {
  live.connected = v;
  for (const fn of live.listeners) fn(null);
}

async function connectEvents() {
  if (live.abort) return;
  const ctl = new AbortController();
  live.abort = ctl;
  while (!ctl.signal.aborted) {
    try {
      const res = await fetch('/api/events/dead-letters', { headers: authHeaders(loadAuth()), credentials: 'omit', signal: ctl.signal });
      if (!res.ok || !res.body) throw new Error(`events: ${res.status}`);
      setConnected(true);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let kind = 'message';
          const data = [];
          for (const line of block.split('\n')) {
            if (line.startsWith('event:')) kind = line.slice(6).trim();
            else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
          }
          if (data.length) {
            try { handleEvent(kind, JSON.parse(data.join('\n'))); } catch { /* not an event */ }
          }
        }
      }
    } catch (e) {
      if (ctl.signal.aborted) break;
    }
    setConnected(false);
    if (ctl.signal.aborted) break;
    await new Promise((r) => setTimeout(r, 2000));
  }
}

// disconnectEvents ends the stream and forgets what it showed, so that the
// next user of the tab sees only their own events.
function disconnectEvents() {
  if (live.abort) live.abort.abort();
  live.abort = null;
  for (const m of [live.deaths, live.flows, live.arrivals, live.inflows, live.targets]) m.clear();
  live.recent = [];
  live.lost = 0;
  setConnected(false);
}

// useLive re-renders the component on every event and every second (the
// rates move as the window slides).
function useLive(filter) {
  const [, setTick] = useState(0);
  useEffect(() => {
    const fn = (ev) => { if (!ev || !filter || filter(ev)) setTick((t) => t + 1); };
    live.listeners.add(fn);
    const timer = setInterval(() => setTick((t) => t + 1), 1000);
    return () => { live.listeners.delete(fn); clearInterval(timer); };
  }, []);
}

// usePoll calls load now and every ms, and when an event passes trigger.
function usePoll(load, ms, deps, trigger) {
  const [state, setState] = useState({ data: null, error: null });
  useEffect(() => {
    let stopped = false;
    let busy = false;
    const run = async () => {
      if (busy) return;
      busy = true;
      try {
        const data = await load();
        if (!stopped) setState({ data, error: null });
      } catch (error) {
        if (!stopped) setState((s) => ({ data: s.data, error }));
      } finally { busy = false; }
    };
    run();
    const timer = setInterval(run, ms);
    let fn = null;
    if (trigger) {
      fn = (ev) => { if (ev && trigger(ev)) run(); };
      live.listeners.add(fn);
    }
    return () => { stopped = true; clearInterval(timer); if (fn) live.listeners.delete(fn); };
  }, deps);
  return state;
}

// ---------------------------------------------------------------- small parts

// inVHost names something of another vhost than the default one.
const inVHost = (name, vhost) => (vhost === '/' ? name : `${name} (vhost ${vhost})`);
const fmtRate = (r) => (r >= 10 ? r.toFixed(0) : r.toFixed(1));
const exName = (x) => (x === '' ? 'amq.default' : x);

function ErrorBox({ error }) {
  if (!error) return null;
  return html`<div class="error" role="alert">${String(error.message || error)}</div>`;
}

function Json({ value }) {
  if (value === null || value === undefined) return html`<span class="muted">none</span>`;
  return html`<pre>${JSON.stringify(value, null, 2)}</pre>`;
}

function queueLink(vhost, name) {
  return `#/queue/${enc(vhost)}/${enc(name)}`;
}

function RecentDeaths({ vhost, queue }) {
  useLive(null);
  const rows = live.recent.filter((e) => !queue || (e.vhost === vhost && (e.queue === queue || (e.target_queues || []).includes(queue))));
  return html`<section class="card">
    <h2>Recent deaths <span class="muted">(live, this page's session)</span></h2>
    ${live.lost > 0 && html`<p class="error">${live.lost} events were lost (the stream fell behind).</p>`}
    ${rows.length === 0 ? html`<p class="muted">None since this page was opened.</p>` : html`
    <table class="recent" data-testid="recent-deaths">
      <thead><tr><th>time</th><th>queue</th><th>reason</th><th class="num">count</th><th>outcome</th><th>to</th><th>message id</th><th>error</th></tr></thead>
      <tbody>${rows.slice(0, 20).map((e) => html`<tr key=${e.seq}>
        <td class="mono">${e.time}</td>
        <td><a href=${queueLink(e.vhost, e.queue)}>${e.queue}</a></td>
        <td><span class=${'pill ' + e.reason}>${e.reason}</span></td>
        <td class="num">${e.count}</td>
        <td>${e.outcome}${e.drop_cause ? ` (${e.drop_cause})` : ''}</td>
        <td>${(e.target_queues || []).map((t) => html`<a class="pill" href=${queueLink(e.vhost, t)}>${t}</a>`)}</td>
        <td class="mono msgid">${e.message_id ?? ''}</td>
        <td class="mono err">${e.error ? `${e.error.condition}${e.error.description ? ': ' + e.error.description : ''}` : ''}</td>
      </tr>`)}</tbody>
    </table>`}
  </section>`;
}

// ---------------------------------------------------------------- topology

const NODE_H = 42;

// nodeID names a graph node: its kind, vhost and name as a JSON array (the
// test finds edges by it).
const nodeID = (...parts) => JSON.stringify(parts);
const textWidth = (s) => Math.min(360, 7.2 * [...s].length + 28);

// buildGraph turns the flows (and the flows seen live) into nodes and edges.
function buildGraph(flows, base) {
  const nodes = new Map();
  const edges = new Map();
  const node = (id, attrs) => { if (!nodes.has(id)) nodes.set(id, attrs); return nodes.get(id); };
  const depth = new Map(flows.queues.map((q) => [keyOf(q.vhost, q.name), q.messages]));
  const qnode = (vhost, name, dlq) => {
    const n = node(nodeID('q', vhost, name), { kind: 'queue', vhost, name, label: inVHost(name, vhost), dlq: false });
    n.dlq = n.dlq || dlq;
    n.depth = depth.get(keyOf(vhost, name));
    return n;
  };
  for (const f of flows.flows) {
    const src = nodeID('q', f.vhost, f.queue);
    qnode(f.vhost, f.queue, false);
    const reasons = new Set(Object.keys(f.dead_lettering || {}));
    for (const k of live.deaths.keys()) {
      const [v, q, r] = k.split('\u0000');
      if (v === f.vhost && q === f.queue) reasons.add(r);
    }
    const lines = [...reasons].sort().map((r) => {
      const c = (f.dead_lettering || {})[r] || {};
      const counted = (c.dead_lettered || 0) + (c.dropped_no_dlx || 0) + (c.dropped_no_route || 0) + (c.dropped_cycle || 0);
      const k = keyOf(f.vhost, f.queue, r);
      const n = counted + Math.max(0, total(live.deaths, k) - (base.get(k) || 0));
      return { reason: r, count: n, rate: rate(live.deaths, k) };
    });
    let dst;
    if (f.dead_letter_exchange === null) {
      dst = nodeID('drop', f.vhost);
      node(dst, { kind: 'drop', vhost: f.vhost, label: 'dropped (no DLX)' });
    } else {
      dst = nodeID('x', f.vhost, f.dead_letter_exchange);
      node(dst, { kind: 'exchange', vhost: f.vhost, name: f.dead_letter_exchange,
        label: inVHost(exName(f.dead_letter_exchange), f.vhost) + (f.exchange_exists ? (f.exchange_type ? ` (${f.exchange_type})` : '') : ' (missing)') });
    }
    const how = f.configured_by === 'policy' ? `policy ${f.policy}` : f.configured_by === 'argument' ? 'queue argument' : 'no dead-letter exchange';
    edges.set(src + '>' + dst, { from: src, to: dst, title: how, lines, kind: 'death' });
    if (f.dead_letter_exchange !== null) {
      const targets = new Set(f.target_queues);
      const seen = live.targets.get(keyOf(f.vhost, f.dead_letter_exchange));
      if (seen) for (const t of seen) targets.add(t);
      for (const t of targets) {
        const tid = nodeID('q', f.vhost, t);
        qnode(f.vhost, t, true);
        const id = dst + '>' + tid;
        if (edges.has(id)) continue;
        const rlines = [];
        for (const k of live.flows.keys()) {
          const [v, x, q, r] = k.split('\u0000');
          if (v === f.vhost && x === f.dead_letter_exchange && q === t) rlines.push({ reason: r, count: total(live.flows, k), rate: rate(live.flows, k), live: true });
        }
        rlines.sort((a, b) => a.reason.localeCompare(b.reason));
        const title = f.routing === 'routing_key' && f.dead_letter_routing_key !== null ? `key ${f.dead_letter_routing_key}` : 'original keys';
        edges.set(id, { from: dst, to: tid, title, lines: rlines, kind: 'route' });
      }
    }
  }
  return { nodes, edges };
}

function layout({ nodes, edges }) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'LR', nodesep: 28, ranksep: 90, edgesep: 16, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const [id, n] of nodes) {
    const text = n.depth !== undefined ? `${n.label}` : n.label;
    g.setNode(id, { width: textWidth(text), height: NODE_H });
  }
  for (const [, e] of edges) {
    const labelLines = [e.title, ...e.lines.map(lineText)];
    const w = Math.max(...labelLines.map((l) => 6.4 * l.length)) + 10;
    g.setEdge(e.from, e.to, { width: w, height: 15 * labelLines.length + 4, labelpos: 'c' });
  }
  dagre.layout(g);
  return g;
}

const lineText = (l) => `${l.reason} ${l.count} · ${fmtRate(l.rate)}/s`;

function FlowGraph({ graph }) {
  if (graph.nodes.size === 0) {
    return html`<p class="muted">No queue has a dead-letter exchange (by argument or policy) and nothing has been dead-lettered yet.</p>`;
  }
  const g = layout(graph);
  const { width, height } = g.graph();
  return html`<div class="graph"><svg width=${width} height=${height} viewBox=${`0 0 ${width} ${height}`} role="img" aria-label="dead-letter flows">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#8b96a1" /></marker></defs>
    ${[...graph.edges.values()].map((e) => {
      const ge = g.edge(e.from, e.to);
      const d = ge.points.map((p, i) => `${i ? 'L' : 'M'}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(' ');
      const liveEdge = e.lines.some((l) => l.rate > 0);
      const top = ge.y - (15 * (e.lines.length + 1)) / 2 + 11;
      return html`<g class=${'edge ' + e.kind + (liveEdge ? ' live' : '')} data-edge=${e.from + '>' + e.to}>
        <path d=${d} marker-end="url(#arrow)" />
        <text x=${ge.x} y=${top} text-anchor="middle">
          <tspan x=${ge.x} dy="0" class="muted">${e.title}</tspan>
          ${e.lines.map((l) => html`<tspan x=${ge.x} dy="15" class="reason" data-reason=${l.reason}>${lineText(l)}</tspan>`)}
        </text>
      </g>`;
    })}
    ${[...graph.nodes.entries()].map(([id, n]) => {
      const gn = g.node(id);
      const x = gn.x - gn.width / 2;
      const y = gn.y - gn.height / 2;
      const cls = 'node ' + n.kind + (n.dlq ? ' dlq' : '');
      const body = html`<rect x=${x} y=${y} width=${gn.width} height=${gn.height} rx="6" />
        <text x=${gn.x} y=${gn.y - 3} text-anchor="middle">${n.label}</text>
        ${n.kind === 'queue' && html`<text class="depth" x=${gn.x} y=${gn.y + 13} text-anchor="middle">${n.depth === undefined ? '' : `${n.depth} messages`}</text>`}`;
      if (n.kind === 'queue') {
        return html`<g class=${cls} data-node=${id}><a href=${queueLink(n.vhost, n.name)}>${body}</a></g>`;
      }
      return html`<g class=${cls} data-node=${id}>${body}</g>`;
    })}
  </svg></div>`;
}

function TopologyPage() {
  // base holds the live totals at the time of the last poll, so that the
  // edge counts are the broker's counters plus the deaths seen since.
  const base = useRef(new Map());
  useLive(null);
  const { data, error } = usePoll(async () => {
    const snapshot = new Map();
    for (const [k, c] of live.deaths) snapshot.set(k, c.total);
    const [flows, queues] = await Promise.all([api('GET', '/dead-letter-flows'), api('GET', '/queues')]);
    base.current = snapshot;
    return { flows, queues };
  }, 3000, []);
  const graph = data ? buildGraph(data, base.current) : null;
  return html`<main>
    <h1>Dead-letter flows</h1>
    <p class="muted">Each queue with a dead-letter exchange (set by queue argument or policy), its exchange and the queues that exchange routes to. Edge labels: deaths per reason (broker counters plus live events) and the rate over the last 10 s.</p>
    <${ErrorBox} error=${error} />
    ${graph ? html`<${FlowGraph} graph=${graph} />` : !error && html`<p class="muted">Loading…</p>`}
    ${data && html`<section class="card"><h2>Queues</h2><${QueueTable} queues=${data.queues} /></section>`}
    <${RecentDeaths} />
  </main>`;
}

function QueueTable({ queues }) {
  return html`<table data-testid="queues">
    <thead><tr><th>vhost</th><th>name</th><th>type</th><th class="num">messages</th><th>dead-letter exchange</th><th>dead-lettered</th></tr></thead>
    <tbody>${queues.map((q) => html`<tr key=${q.vhost + '\u0000' + q.name}>
      <td>${q.vhost}</td>
      <td><a href=${queueLink(q.vhost, q.name)}>${q.name}</a></td>
      <td>${q.type}</td>
      <td class="num">${q.messages}</td>
      <td>${q.dead_letter_exchange === undefined ? html`<span class="muted">none</span>` : exName(q.dead_letter_exchange)}</td>
      <td>${Object.entries(q.dead_lettering || {}).map(([r, c]) => html`<span class=${'pill ' + r}>${r} ${c.dead_lettered}</span>`)}</td>
    </tr>`)}</tbody>
  </table>`;
}

// ---------------------------------------------------------------- queue page

const REASONS = ['rejected', 'expired', 'maxlen', 'delivery_limit'];
const EMPTY_FILTER = { reason: '', source_queue: '', exchange: '', death_after: '', death_before: '', error_condition: '', min_count: '', sql: '' };

// filterParams are the contract's filter names with the given values only;
// times from the datetime inputs become RFC 3339.
function filterParams(f) {
  const out = {};
  for (const [k, v] of Object.entries(f)) {
    if (v === '' || v === null || v === undefined) continue;
    if (k === 'death_after' || k === 'death_before') {
      const t = new Date(v);
      out[k] = isNaN(t) ? v : t.toISOString();
    } else if (k === 'min_count') {
      out[k] = Number(v);
    } else {
      out[k] = v;
    }
  }
  return out;
}

function QueuePage({ vhost, name }) {
  const [filter, setFilter] = useState(EMPTY_FILTER);
  // moves counts finished redrive tasks, so that a shown peek page is read
  // again once messages have left.
  const [moves, setMoves] = useState(0);
  useLive((ev) => ev.vhost === vhost);
  const touches = (ev) => ev.vhost === vhost && (ev.queue === name || (ev.target_queues || []).includes(name));
  const { data: q, error } = usePoll(() => api('GET', qpath(vhost, name)), 2000, [vhost, name], touches);
  return html`<main>
    <p><a href="#/">← flows</a></p>
    <h1>Queue <span class="mono" data-testid="queue-name">${name}</span> <span class="muted">in vhost ${vhost}</span></h1>
    <${ErrorBox} error=${error} />
    ${q && html`<${QueueStats} q=${q} />`}
    <${PeekBrowser} vhost=${vhost} name=${name} filter=${filter} setFilter=${setFilter} moves=${moves} />
    <${RedrivePanel} vhost=${vhost} name=${name} filter=${filter} onFinished=${() => setMoves((n) => n + 1)} />
    <${RecentDeaths} vhost=${vhost} queue=${name} />
  </main>`;
}

function QueueStats({ q }) {
  const vhost = q.vhost;
  const ms = q.message_stats || {};
  const reasons = new Set([...Object.keys(q.dead_lettering || {})]);
  for (const k of live.deaths.keys()) {
    const [v, qn, r] = k.split('\u0000');
    if (v === vhost && qn === q.name) reasons.add(r);
  }
  return html`<section class="card grid2">
    <div>
      <div class="stats">
        <div class="stat"><b data-testid="depth">${q.messages}</b><span>messages</span></div>
        <div class="stat"><b>${q.messages_ready}</b><span>ready</span></div>
        <div class="stat"><b>${q.messages_unacknowledged}</b><span>unacknowledged</span></div>
        <div class="stat"><b>${q.consumers}</b><span>consumers</span></div>
        <div class="stat"><b data-testid="arrival-rate">${fmtRate(rate(live.arrivals, keyOf(vhost, q.name)))}/s</b><span>dead letters in</span></div>
      </div>
      <div class="stats" data-testid="message-rates">
        <div class="stat"><b data-testid="publish-count">${ms.publish ?? 0}</b><span>in, ${fmtRate(ms.publish_details?.rate ?? 0)}/s</span></div>
        <div class="stat"><b data-testid="deliver-count">${ms.deliver_get ?? 0}</b><span>delivered, ${fmtRate(ms.deliver_get_details?.rate ?? 0)}/s</span></div>
        <div class="stat"><b data-testid="ack-count">${ms.ack ?? 0}</b><span>acknowledged, ${fmtRate(ms.ack_details?.rate ?? 0)}/s</span></div>
        <div class="stat"><b>${ms.redeliver ?? 0}</b><span>redelivered, ${fmtRate(ms.redeliver_details?.rate ?? 0)}/s</span></div>
      </div>
      <table style="margin-top:.8em">
        <tr><th>type</th><td>${q.type}</td></tr>
        <tr><th>dead-letter exchange</th><td>${q.dead_letter_exchange === undefined ? html`<span class="muted">none</span>` : exName(q.dead_letter_exchange)}</td></tr>
        <tr><th>dead-letter routing key</th><td>${q.dead_letter_routing_key ?? html`<span class="muted">the message's own keys</span>`}</td></tr>
        <tr><th>strategy</th><td>${q.dead_letter_strategy ?? ''}</td></tr>
        <tr><th>policy</th><td>${q.policy ?? html`<span class="muted">none</span>`}</td></tr>
        <tr><th>arguments</th><td><${Json} value=${q.arguments} /></td></tr>
      </table>
    </div>
    <div>
      <${Arrivals} vhost=${vhost} queue=${q.name} />
      <h2>Deaths from this queue</h2>
      <table>
        <thead><tr><th>reason</th><th class="num">dead-lettered</th><th class="num">dropped (no DLX / no route / cycle)</th><th class="num">rate</th></tr></thead>
        <tbody>${reasons.size === 0 && html`<tr><td colspan="4" class="muted">none counted since the broker started</td></tr>`}${[...reasons].sort().map((r) => {
          const c = (q.dead_lettering || {})[r] || {};
          return html`<tr data-reason=${r}><td><span class=${'pill ' + r}>${r}</span></td><td class="num">${c.dead_lettered || 0}</td>
            <td class="num">${c.dropped_no_dlx || 0} / ${c.dropped_no_route || 0} / ${c.dropped_cycle || 0}</td>
            <td class="num">${fmtRate(rate(live.deaths, keyOf(vhost, q.name, r)))}/s</td></tr>`;
        })}</tbody>
      </table>
    </div>
  </section>`;
}

// Arrivals: the dead letters that came into this queue while the page was
// open, by source queue and reason (from the event stream).
function Arrivals({ vhost, queue }) {
  const rows = [];
  for (const k of live.inflows.keys()) {
    const [v, t, src, r] = k.split('\u0000');
    if (v !== vhost || t !== queue) continue;
    rows.push({ src, r, total: total(live.inflows, k), rate: rate(live.inflows, k) });
  }
  if (rows.length === 0) return null;
  rows.sort((a, b) => a.src.localeCompare(b.src) || a.r.localeCompare(b.r));
  return html`<h2>Dead letters into this queue <span class="muted">(since the console was opened)</span></h2>
    <table data-testid="arrivals">
      <thead><tr><th>from queue</th><th>reason</th><th class="num">messages</th><th class="num">rate</th></tr></thead>
      <tbody>${rows.map((a) => html`<tr data-source=${a.src} data-reason=${a.r}><td><a href=${queueLink(vhost, a.src)}>${a.src}</a></td><td><span class=${'pill ' + a.r}>${a.r}</span></td>
        <td class="num">${a.total}</td><td class="num">${fmtRate(a.rate)}/s</td></tr>`)}</tbody>
    </table>`;
}

function FilterForm({ filter, setFilter, onSubmit, children }) {
  const field = (k, label, attrs = {}) => html`<label>${label}<input name=${k} value=${filter[k]} onInput=${(e) => setFilter({ ...filter, [k]: e.target.value })} ...${attrs} /></label>`;
  return html`<form class="filters" onSubmit=${(e) => { e.preventDefault(); onSubmit(); }}>
    <label>reason<select name="reason" value=${filter.reason} onChange=${(e) => setFilter({ ...filter, reason: e.target.value })}>
      <option value="">any</option>
      ${REASONS.map((r) => html`<option value=${r}>${r}</option>`)}
    </select></label>
    ${field('source_queue', 'source queue')}
    ${field('exchange', 'exchange')}
    ${field('death_after', 'last death after', { type: 'datetime-local', step: '1' })}
    ${field('death_before', 'last death before', { type: 'datetime-local', step: '1' })}
    ${field('error_condition', 'error condition', { placeholder: 'amqp:internal-error' })}
    ${field('min_count', 'death count ≥', { type: 'number', min: '1' })}
    ${field('sql', 'SQL filter', { placeholder: "k = 'v'" })}
    ${children}
  </form>`;
}

function PeekBrowser({ vhost, name, filter, setFilter, moves }) {
  const [count, setCount] = useState(50);
  const [page, setPage] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const peek = async (position) => {
    setBusy(true);
    setError(null);
    try {
      const params = new URLSearchParams({ position: String(position), count: String(count) });
      for (const [k, v] of Object.entries(filterParams(filter))) params.set(k, String(v));
      const res = await api('GET', `${qpath(vhost, name)}/peek?${params}`);
      setPage({ ...res, position });
    } catch (e) {
      setError(e);
    } finally { setBusy(false); }
  };
  useEffect(() => { if (page) peek(page.position); }, [moves]);
  return html`<section class="card" data-testid="peek">
    <h2>Peek <span class="muted">(nothing is consumed)</span></h2>
    <${FilterForm} filter=${filter} setFilter=${setFilter} onSubmit=${() => peek(0)}>
      <label>page size<input name="count" type="number" min="1" max="1000" value=${count} onInput=${(e) => setCount(Number(e.target.value) || 50)} /></label>
      <div class="row">
        <button type="submit" class="primary" name="peek" disabled=${busy}>Peek</button>
        <button type="button" name="clear" onClick=${() => setFilter(EMPTY_FILTER)}>Clear filters</button>
      </div>
    <//>
    <${ErrorBox} error=${error} />
    ${page && html`<div class="peek-result">
      <p class="muted" data-testid="peek-summary">${page.messages.length} message(s) from position ${page.position}; queue depth ${page.depth}.</p>
      ${page.messages.map((m) => html`<${PeekedMessage} m=${m} key=${m.position} />`)}
      ${page.next_position !== null && page.next_position !== undefined && page.next_position > page.position && page.next_position < page.depth &&
        html`<button name="next" onClick=${() => peek(page.next_position)}>Next page (from ${page.next_position})</button>`}
    </div>`}
  </section>`;
}

function PeekedMessage({ m }) {
  return html`<div class="msg" data-testid="peeked-message" data-position=${m.position}>
    <p><b>#${m.position}</b> message id <span class="mono msgid">${m.message_id ?? '(none)'}</span>
      ${m.redelivered && html` <span class="pill">redelivered</span>`}
      ${m.redrive_count > 0 && html` <span class="pill">redriven ${m.redrive_count}×</span>`}
      <span class="muted"> ${m.body_size} bytes</span></p>
    <div class="grid2">
      <div>
        <table class="deaths">
          <thead><tr><th>queue</th><th>reason</th><th class="num">count</th><th>exchange</th><th>routing keys</th><th>first</th><th>last</th><th>ttl</th></tr></thead>
          <tbody>${(m.deaths || []).map((d, i) => html`<tr key=${i}>
            <td>${d.queue}</td><td><span class=${'pill ' + d.reason}>${d.reason}</span></td><td class="num">${d.count}</td>
            <td>${exName(d.exchange)}</td><td>${(d.routing_keys || []).join(', ')}</td>
            <td class="mono">${d.first_time}</td><td class="mono">${d.last_time}</td><td>${d.ttl ?? ''}</td></tr>`)}</tbody>
        </table>
        <h3 class="muted">application properties</h3>
        ${Object.keys(m.application_properties || {}).length === 0 && html`<p class="muted">none</p>`}
        <table class="app-props">${Object.entries(m.application_properties || {}).map(([k, v]) => html`<tr><th class="mono">${k}</th><td class="mono">${typeof v === 'string' ? v : JSON.stringify(v)}</td></tr>`)}</table>
      </div>
      <div>
        <h3 class="muted">body ${m.body_encoding === 'base64' ? '(base64: not UTF-8 text)' : ''}</h3>
        <pre class="body" data-testid="body">${m.body}</pre>
        <details><summary>properties and annotations</summary>
          <${Json} value=${m.properties} />
          <${Json} value=${m.annotations} />
        </details>
      </div>
    </div>
  </div>`;
}

// ---------------------------------------------------------------- redrive

const TARGETS = [
  ['first_death_queue', "each message's first death queue"],
  ['last_death_queue', "each message's last death queue"],
  ['original_exchange', "its original exchange and routing keys"],
  ['queue', 'a named queue'],
];

function RedrivePanel({ vhost, name, filter, onFinished }) {
  const [target, setTarget] = useState('first_death_queue');
  const [targetQueue, setTargetQueue] = useState('');
  const [useFilter, setUseFilter] = useState(true);
  const [rateLimit, setRateLimit] = useState('');
  const [max, setMax] = useState('');
  const [dry, setDry] = useState(null); // {key, report}
  const [task, setTask] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);

  const request = () => {
    const body = { vhost, source_queue: name, target, filter: useFilter ? filterParams(filter) : {} };
    if (target === 'queue') body.target_queue = targetQueue;
    if (rateLimit !== '') body.rate = Number(rateLimit);
    if (max !== '') body.max = Number(max);
    return body;
  };
  const key = JSON.stringify(request());

  const run = async (dryRun) => {
    setBusy(true);
    setError(null);
    try {
      const res = await api('POST', '/redrives', { ...request(), dry_run: dryRun });
      if (dryRun) setDry({ key, report: res, used: false });
      else { setTask({ ...res, planned: sum(dry.report.would_move) }); setDry({ ...dry, used: true }); }
    } catch (e) { setError(e); } finally { setBusy(false); }
  };

  // Progress: the task is read again every second while it runs.
  const running = task && task.state === 'running';
  useEffect(() => {
    if (!running) return undefined;
    const timer = setInterval(async () => {
      try {
        const next = await api('GET', `/redrives/${enc(task.id)}`);
        setTask((cur) => ({ ...next, planned: cur && cur.planned }));
        if (next.state !== 'running') onFinished();
      } catch (e) { setError(e); }
    }, 1000);
    return () => clearInterval(timer);
  }, [running, task && task.id]);

  const cancel = async (id) => {
    try {
      await api('DELETE', `/redrives/${enc(id)}`);
      const next = await api('GET', `/redrives/${enc(id)}`);
      if (task && task.id === id) setTask((cur) => ({ ...next, planned: cur && cur.planned }));
      onFinished();
    } catch (e) { setError(e); }
  };

  const dryFresh = dry && dry.key === key && !dry.used;
  return html`<section class="card" data-testid="redrive">
    <h2>Redrive <span class="muted">(move messages back; dry run first)</span></h2>
    <div class="row">
      <label class="field">target<select name="target" value=${target} onChange=${(e) => setTarget(e.target.value)}>
        ${TARGETS.map(([v, l]) => html`<option value=${v}>${l}</option>`)}
      </select></label>
      ${target === 'queue' && html`<label class="field">target queue<input name="target_queue" value=${targetQueue} onInput=${(e) => setTargetQueue(e.target.value)} /></label>`}
      <label class="field">rate (msg/s, empty: unlimited)<input name="rate" type="number" min="1" value=${rateLimit} onInput=${(e) => setRateLimit(e.target.value)} /></label>
      <label class="field">at most<input name="max" type="number" min="1" value=${max} onInput=${(e) => setMax(e.target.value)} /></label>
      <label class="field"><span><input type="checkbox" name="use_filter" checked=${useFilter} onChange=${(e) => setUseFilter(e.target.checked)} /> only messages matching the peek filters</span></label>
    </div>
    <div class="row" style="margin-top:.6em">
      <button name="dry_run" onClick=${() => run(true)} disabled=${busy}>Dry run</button>
      <button name="start" class="primary" onClick=${() => run(false)} disabled=${busy || !dryFresh || running}
        title=${dryFresh ? '' : 'run a dry run with these settings first'}>Start redrive</button>
    </div>
    <${ErrorBox} error=${error} />
    ${dry && html`<div data-testid="dry-run" class=${dryFresh ? '' : 'muted'}>
      <h3>Dry run ${dryFresh ? '' : dry.used ? '(started below; run a new dry run for another redrive)' : '(settings changed since: run it again)'}</h3>
      <${CountTable} title="would move to" counts=${dry.report.would_move} testid="would-move" />
      <${CountTable} title="would skip" counts=${dry.report.would_skip} testid="would-skip" />
    </div>`}
    ${task && html`<${TaskView} task=${task} onCancel=${() => cancel(task.id)} />`}
    <${TaskList} vhost=${vhost} name=${name} onCancel=${cancel} />
  </section>`;
}

function CountTable({ title, counts, testid }) {
  const rows = Object.entries(counts || {});
  return html`<table data-testid=${testid}>
    <thead><tr><th>${title}</th><th class="num">messages</th></tr></thead>
    <tbody>${rows.length === 0 ? html`<tr><td colspan="2" class="muted">nothing</td></tr>` :
      rows.map(([k, v]) => html`<tr><td class="mono">${k}</td><td class="num">${v}</td></tr>`)}</tbody>
  </table>`;
}

function sum(counts) { return Object.values(counts || {}).reduce((a, b) => a + b, 0); }

function TaskView({ task, onCancel }) {
  const done = task.moved + sum(task.skipped) + sum(task.failed);
  const planned = task.planned || task.max || null;
  return html`<div class="task" data-testid="task" data-state=${task.state}>
    <h3>Task <span class="mono">${task.id}</span>: <span data-testid="task-state">${task.state}</span></h3>
    ${planned && html`<p><progress max=${planned} value=${Math.min(done, planned)}></progress> ${Math.min(done, planned)} of ${planned}</p>`}
    <p>moved <b data-testid="task-moved">${task.moved}</b>, skipped ${sum(task.skipped)}, failed ${sum(task.failed)}
      ${task.rate ? ` · at most ${task.rate}/s` : ''} · started ${task.started}${task.finished ? ` · finished ${task.finished}` : ''}</p>
    ${sum(task.skipped) > 0 && html`<${CountTable} title="skipped (cause)" counts=${task.skipped} testid="task-skipped" />`}
    ${sum(task.failed) > 0 && html`<${CountTable} title="failed (cause)" counts=${task.failed} testid="task-failed" />`}
    ${task.state === 'running' && html`<button name="cancel" onClick=${onCancel}>Cancel</button>`}
  </div>`;
}

function TaskList({ vhost, name, onCancel }) {
  const { data, error } = usePoll(() => api('GET', '/redrives'), 3000, [vhost, name]);
  const tasks = (data || []).filter((t) => t.vhost === vhost && t.source_queue === name);
  if (error && error.status === 404) return html`<p class="muted">This broker has no redrive API.</p>`;
  if (tasks.length === 0) return null;
  return html`<details><summary>${tasks.length} redrive task(s) from this queue</summary>
    <table><thead><tr><th>id</th><th>state</th><th>target</th><th class="num">moved</th><th>started</th><th></th></tr></thead>
    <tbody>${tasks.map((t) => html`<tr key=${t.id}><td class="mono">${t.id}</td><td>${t.state}</td><td>${t.target}</td><td class="num">${t.moved}</td><td class="mono">${t.started}</td>
      <td>${t.state === 'running' && html`<button onClick=${() => onCancel(t.id)}>Cancel</button>`}</td></tr>`)}</tbody></table>
  </details>`;
}

// ---------------------------------------------------------------- shell

function Login({ onLogin }) {
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    saveAuth({ user, password });
    try {
      const me = await api('GET', '/whoami');
      onLogin(me);
    } catch (err) {
      clearAuth();
      setError(err);
    }
  };
  return html`<main class="login card">
    <h1>epitaph console</h1>
    <form onSubmit=${submit} name="login">
      <label class="field">user<input name="user" autocomplete="username" value=${user} onInput=${(e) => setUser(e.target.value)} /></label>
      <label class="field">password or OAuth 2 token<input name="password" type="password" autocomplete="current-password" value=${password} onInput=${(e) => setPassword(e.target.value)} /></label>
      <p class="muted">The console uses the HTTP API's users and permissions. For an OAuth 2 token, leave the user empty and paste the token.</p>
      <button type="submit" class="primary">Log in</button>
    </form>
    <${ErrorBox} error=${error} />
  </main>`;
}

function parseRoute(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/');
  if (parts[0] === 'queue' && parts.length === 3) {
    try { return { page: 'queue', vhost: decodeURIComponent(parts[1]), name: decodeURIComponent(parts[2]) }; } catch { /* fall through */ }
  }
  return { page: 'flows' };
}

function App() {
  const [me, setMe] = useState(null);
  const [checked, setChecked] = useState(false);
  const [route, setRoute] = useState(parseRoute(location.hash));
  useLive(null);
  useEffect(() => {
    const fn = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', fn);
    return () => removeEventListener('hashchange', fn);
  }, []);
  const logout = useCallback(() => { clearAuth(); disconnectEvents(); setMe(null); }, []);
  useEffect(() => {
    onUnauthorized = logout;
    if (!loadAuth()) { setChecked(true); return; }
    api('GET', '/whoami').then(setMe, () => clearAuth()).finally(() => setChecked(true));
  }, []);
  useEffect(() => { if (me) connectEvents(); }, [me]);
  if (!checked) return html`<p class="loading">Loading…</p>`;
  if (!me) return html`<${Login} onLogin=${setMe} />`;
  return html`<div>
    <header>
      <a class="brand" href="#/">epitaph</a>
      <a href="#/">Flows</a>
      <span class="who"><span class=${'live-dot' + (live.connected ? ' on' : '')} data-testid="live" data-connected=${String(live.connected)}></span>${live.connected ? 'live' : 'not live'} · ${me.name}</span>
      <button onClick=${logout}>Log out</button>
    </header>
    ${route.page === 'queue' ? html`<${QueuePage} vhost=${route.vhost} name=${route.name} key=${route.vhost + '\u0000' + route.name} />` : html`<${TopologyPage} />`}
  </div>`;
}

render(html`<${App} />`, document.getElementById('app'));
