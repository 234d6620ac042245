/* FastWorker dashboard.
 *
 * One page on the control plane's JSON API and its Server-Sent Events stream
 * (docs/http-api.md). No framework, no build step, no network beyond the control plane.
 *
 * Data flow: every incoming message updates a small in-memory model right away (bounded in
 * size), and marks what changed; the DOM is updated once per animation frame from the model.
 * That keeps hundreds of task transitions a second cheap, and costs nothing while the tab is
 * hidden (requestAnimationFrame does not run, the model stays bounded).
 *
 * Every piece of data reaches the DOM through textContent / attributes, never as markup.
 */
'use strict';

(() => {
  // ---------------------------------------------------------------------------------------
  // Theme: runs before the body is parsed, so the page paints in the right colours.
  // ---------------------------------------------------------------------------------------

  const THEME_KEY = 'fastworker.dashboard.theme';
  const darkQuery = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;

  function storedTheme() {
    try {
      const value = window.localStorage.getItem(THEME_KEY);
      return value === 'dark' || value === 'light' ? value : null;
    } catch {
      return null;
    }
  }

  function effectiveTheme() {
    return storedTheme() || (darkQuery && darkQuery.matches ? 'dark' : 'light');
  }

  function applyTheme(theme) {
    document.documentElement.setAttribute('data-theme', theme);
    const button = document.getElementById('theme-toggle');
    if (button) {
      button.setAttribute('aria-pressed', theme === 'dark' ? 'true' : 'false');
      button.title = theme === 'dark' ? 'Switch to light mode' : 'Switch to dark mode';
    }
  }

  function toggleTheme() {
    const next = document.documentElement.getAttribute('data-theme') === 'dark' ? 'light' : 'dark';
    try {
      window.localStorage.setItem(THEME_KEY, next);
    } catch {
      /* private mode: the choice lasts for this page only */
    }
    applyTheme(next);
  }

  applyTheme(effectiveTheme());
  if (darkQuery) {
    const follow = () => {
      if (!storedTheme()) applyTheme(effectiveTheme());
    };
    if (darkQuery.addEventListener) darkQuery.addEventListener('change', follow);
    else if (darkQuery.addListener) darkQuery.addListener(follow);
  }

  // ---------------------------------------------------------------------------------------
  // Constants
  // ---------------------------------------------------------------------------------------

  const TASK_STATES = [
    'pending', 'queued', 'scheduled', 'assigned', 'running',
    'success', 'failure', 'retrying', 'cancelled',
  ];
  const FINAL_STATES = new Set(['success', 'failure', 'cancelled']);
  const UNASSIGNED_STATES = new Set(['pending', 'queued', 'scheduled', 'retrying']);
  const PRIORITIES = ['critical', 'high', 'normal', 'low'];

  const MAX_ROWS = 200; // task rows in the table
  const MAX_HIDDEN = 200; // extra tasks remembered while a status filter hides them
  const INITIAL_TASKS = 100;
  const WINDOW_SECONDS = 300;
  const DETAIL_CONCURRENCY = 4; // background /api/tasks/{id} fetches at once
  const DETAIL_BATCH_DELAY_MS = 250;
  const DETAIL_BACKLOG = 400;
  const LIST_BATCH_THRESHOLD = 12; // more finished tasks waiting than this: ask for a list
  const LIST_BATCH_LIMIT = 200;
  const LIST_REFRESH_MS = 1000;
  const CATALOG_REFRESH_MS = 10000;
  const STALE_HEARTBEAT_S = 10;
  const ACTION_HEADER = 'X-FastWorker-Action'; // the server refuses actions without it (CSRF)
  const ERROR_PREVIEW_CHARS = 140;
  const MAX_FLASHING_ROWS = 5; // more new rows than this in one frame: no highlight
  const SVG_NS = 'http://www.w3.org/2000/svg';

  // ---------------------------------------------------------------------------------------
  // Small helpers
  // ---------------------------------------------------------------------------------------

  const $ = (id) => document.getElementById(id);

  /** createElement with attributes and children; strings become text nodes. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const [key, value] of Object.entries(attrs)) {
        if (value === null || value === undefined || value === false) continue;
        if (key === 'class') node.className = value;
        else if (key === 'text') node.textContent = String(value);
        else if (key === 'dataset') Object.assign(node.dataset, value);
        else node.setAttribute(key, value === true ? '' : String(value));
      }
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    if (attrs) for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function setText(node, value) {
    if (!node) return;
    const text = value === null || value === undefined ? '' : String(value);
    if (node.textContent !== text) node.textContent = text;
  }

  function setAttr(node, name, value) {
    if (!node) return;
    if (value === null || value === undefined || value === '') {
      if (node.hasAttribute(name)) node.removeAttribute(name);
    } else if (node.getAttribute(name) !== String(value)) {
      node.setAttribute(name, String(value));
    }
  }

  function setClass(node, className) {
    if (node && node.className !== className) node.className = className;
  }

  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

  function fmtCount(n) {
    return isNum(n) ? String(Math.round(n)) : '–';
  }

  function fmtBytes(n) {
    if (!isNum(n)) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return `${i === 0 ? Math.round(n) : n.toFixed(1)} ${units[i]}`;
  }

  function fmtRate(n) {
    if (!isNum(n)) return '–';
    if (n === 0) return '0';
    if (n < 10) return n.toFixed(1).replace(/\.0$/, '');
    return String(Math.round(n));
  }

  function fmtDuration(s) {
    if (!isNum(s)) return '–';
    if (s < 0) s = 0;
    if (s < 0.0005) return '<1 ms';
    if (s < 1) return `${Math.round(s * 1000)} ms`;
    if (s < 10) return `${s.toFixed(2)} s`;
    if (s < 60) return `${s.toFixed(1)} s`;
    return fmtSpan(s);
  }

  /** A span of seconds for people: "42 s", "3m 05s", "2h 10m", "4d 3h". */
  function fmtSpan(s) {
    if (!isNum(s)) return '–';
    s = Math.max(0, Math.round(s));
    if (s < 60) return `${s} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
    const h = Math.floor(m / 60);
    if (h < 24) return `${h}h ${String(m % 60).padStart(2, '0')}m`;
    return `${Math.floor(h / 24)}d ${h % 24}h`;
  }

  function fmtAgo(seconds) {
    return isNum(seconds) ? `${Math.max(0, Math.round(seconds))} s ago` : '–';
  }

  /** "in 4 s" / "12 s ago" for a server timestamp. */
  function fmtRelative(ts) {
    if (!isNum(ts)) return '–';
    const delta = ts - serverNow();
    if (Math.abs(delta) < 1) return 'now';
    return delta > 0 ? `in ${fmtSpan(delta)}` : `${fmtSpan(-delta)} ago`;
  }

  const pad2 = (n) => String(n).padStart(2, '0');

  function fmtClock(ts) {
    if (!isNum(ts)) return '–';
    const d = new Date(ts * 1000);
    return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  }

  function fmtDateTime(ts) {
    if (!isNum(ts)) return '–';
    const d = new Date(ts * 1000);
    const ms = String(d.getMilliseconds()).padStart(3, '0');
    return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ` +
      `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}.${ms}`;
  }

  function isoTitle(ts) {
    return isNum(ts) ? new Date(ts * 1000).toISOString() : '';
  }

  function shortId(id) {
    const s = String(id ?? '');
    return s.length > 12 ? s.slice(0, 8) : s;
  }

  function truncate(text, max) {
    const s = String(text ?? '');
    return s.length > max ? `${s.slice(0, max - 1)}…` : s;
  }

  function prettyJSON(value) {
    if (value === undefined) return '–';
    try {
      const text = JSON.stringify(value, null, 2);
      return text === undefined ? String(value) : text;
    } catch {
      return String(value);
    }
  }

  function errorLine(error) {
    if (!error || typeof error !== 'object') return '';
    const type = error.type || 'Error';
    return error.message ? `${type}: ${error.message}` : type;
  }

  // ---------------------------------------------------------------------------------------
  // HTTP
  // ---------------------------------------------------------------------------------------

  /** Server clock minus browser clock, in seconds, from the Date response header (1 s grain). */
  let clockOffset = 0;

  function noteServerDate(response) {
    const header = response.headers.get('Date');
    if (!header) return;
    const serverMs = Date.parse(header);
    if (Number.isNaN(serverMs)) return;
    const offset = (serverMs - Date.now()) / 1000;
    // The header has one-second resolution: only correct for clearly skewed clocks.
    clockOffset = Math.abs(offset) > 2 ? offset : 0;
  }

  function serverNow() {
    return Date.now() / 1000 + clockOffset;
  }

  class HttpError extends Error {
    constructor(status, body) {
      super((body && body.message) || `HTTP ${status}`);
      this.status = status;
      this.body = body;
    }
  }

  async function getJSON(url) {
    const response = await fetch(url, { headers: { Accept: 'application/json' }, cache: 'no-store' });
    noteServerDate(response);
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    if (!response.ok) throw new HttpError(response.status, body);
    return body;
  }

  /** POST an action (pause, resume, purge, limits): same-origin, with the action header. */
  async function postAction(url, payload) {
    const headers = { Accept: 'application/json', [ACTION_HEADER]: '1' };
    if (payload !== undefined) headers['Content-Type'] = 'application/json';
    const response = await fetch(url, {
      method: 'POST',
      headers,
      credentials: 'same-origin',
      cache: 'no-store',
      body: payload === undefined ? undefined : JSON.stringify(payload),
    });
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    if (!response.ok) throw new HttpError(response.status, body);
    return body;
  }

  function warn(what, err) {
    if (window.console) console.warn(`[fastworker] ${what}:`, err);
  }

  // ---------------------------------------------------------------------------------------
  // Render scheduling: one DOM pass per animation frame
  // ---------------------------------------------------------------------------------------

  const dirty = {
    overview: false,
    workers: false,
    queues: false,
    chart: false,
    tasks: false,
    registered: false,
    schedules: false,
    replicas: false,
  };
  let frameRequested = false;

  function scheduleRender() {
    if (frameRequested) return;
    frameRequested = true;
    window.requestAnimationFrame(flush);
  }

  function flush() {
    frameRequested = false;
    const steps = [
      ['overview', renderOverview],
      ['workers', renderWorkers],
      ['queues', renderQueues],
      ['chart', renderChart],
      ['tasks', renderTasks],
      ['registered', renderRegistered],
      ['schedules', renderSchedules],
      ['replicas', renderReplicas],
    ];
    for (const [key, render] of steps) {
      if (!dirty[key]) continue;
      dirty[key] = false;
      try {
        render();
      } catch (err) {
        warn(`rendering ${key} failed`, err);
      }
    }
  }

  function markDirty(...keys) {
    for (const key of keys) dirty[key] = true;
    scheduleRender();
  }

  // ---------------------------------------------------------------------------------------
  // Connection (EventSource)
  // ---------------------------------------------------------------------------------------

  let source = null;
  let everConnected = false;
  let reconnectTimer = 0;
  let reconnectDelay = 1000;
  let unloading = false;

  const CONNECTION_TEXT = {
    connecting: 'connecting…',
    connected: 'connected',
    reconnecting: 'reconnecting…',
    unsupported: 'no live updates',
  };

  function setConnection(state) {
    const box = $('connection-status');
    if (!box || box.dataset.state === state) return;
    box.dataset.state = state;
    setText($('connection-text'), CONNECTION_TEXT[state] || state);
    box.title = state === 'connected' ? 'Live updates from /api/events' : 'Live updates interrupted';
  }

  function connect() {
    reconnectTimer = 0;
    if (!('EventSource' in window)) {
      setConnection('unsupported');
      return;
    }
    const es = new EventSource('/api/events');
    source = es;
    es.addEventListener('open', () => {
      if (source !== es) return;
      setConnection('connected');
      reconnectDelay = 1000;
      // The stream carries what happens from now on: what happened before reaches the page
      // only through the lists. After a reconnect, reload everything (events were lost while
      // we were away). On the first open, the lists loadAll asked for may predate the stream
      // (a slow connection, or one refused before it opened): a task that finished in
      // between would never show, so load again what the events keep current.
      if (everConnected) resync();
      else catchUp();
      everConnected = true;
    });
    es.addEventListener('error', () => {
      if (source !== es || unloading) return;
      setConnection('reconnecting');
      // The browser retries by itself unless the stream is CLOSED (e.g. an HTTP error
      // status); then we retry ourselves, backing off.
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        source = null;
        if (!reconnectTimer) {
          reconnectTimer = window.setTimeout(connect, reconnectDelay);
          reconnectDelay = Math.min(reconnectDelay * 2, 15000);
        }
      }
    });
    es.addEventListener('tasks', onTasksEvent);
    es.addEventListener('snapshot', onSnapshotEvent);
    es.addEventListener('queues', onQueuesEvent);
    es.addEventListener('replicas', onReplicasEvent);
    for (const [name, handler] of streamHandlers) es.addEventListener(name, handler);
  }

  /** Handlers other scripts (failed.js) add for more of the stream's events. */
  const streamHandlers = [];
  const resyncHandlers = [];

  function onStream(name, handler) {
    streamHandlers.push([name, handler]);
    if (source) source.addEventListener(name, handler);
  }

  function parseEventData(event) {
    try {
      return JSON.parse(event.data);
    } catch (err) {
      warn(`bad ${event.type} event`, err);
      return null;
    }
  }

  function onTasksEvent(event) {
    const transitions = parseEventData(event);
    if (!Array.isArray(transitions)) return;
    for (const transition of transitions) applyTransition(transition);
    enforceTaskLimit();
    markDirty('tasks');
  }

  function onSnapshotEvent(event) {
    const snapshot = parseEventData(event);
    if (!snapshot || typeof snapshot !== 'object') return;
    if (snapshot.overview) {
      overview = snapshot.overview;
      dirty.overview = true;
    }
    if (Array.isArray(snapshot.workers)) {
      workers = snapshot.workers;
      noteWorkerSet(workers);
      dirty.workers = true;
    }
    if (Array.isArray(snapshot.throughput)) {
      // The last few seconds: the newest may still be filling, so each comes again.
      for (const point of snapshot.throughput) addThroughputPoint(point);
      dirty.chart = true;
    }
    dirty.schedules = true; // relative times ("in 3 s") move on
    scheduleRender();
  }

  // ---------------------------------------------------------------------------------------
  // Overview: header, cards, queues
  // ---------------------------------------------------------------------------------------

  let overview = null;

  async function loadOverview() {
    try {
      overview = await getJSON('/api/overview');
      markDirty('overview');
    } catch (err) {
      warn('loading /api/overview failed', err);
    }
  }

  function renderOverview() {
    const o = overview;
    if (!o) return;

    const idNode = $('instance-id');
    setText(idNode, o.instance_id ? shortId(o.instance_id) : '–');
    setAttr(idNode, 'title', o.instance_id || '');
    setText($('version'), o.version || '–');

    const totals = o.totals || {};
    setText($('count-submitted'), fmtCount(totals.submitted));
    setText($('count-succeeded'), fmtCount(totals.succeeded));
    setText($('count-failed'), fmtCount(totals.failed));
    setText($('count-retried'), fmtCount(totals.retried));
    setText($('count-cancelled'), fmtCount(totals.cancelled));
    setText($('count-in-flight'), fmtCount(o.in_flight));
    setText($('count-workers'), fmtCount(o.workers));
    setText($('count-scheduled'), fmtCount(o.scheduled));
    const failedCard = $('count-failed') && $('count-failed').closest('.card');
    if (failedCard) failedCard.classList.toggle('is-alert', isNum(totals.failed) && totals.failed > 0);

    const queues = o.queues || {};
    const depths = PRIORITIES.map((p) => (isNum(queues[p]) ? queues[p] : 0));
    const deepest = Math.max(1, ...depths);
    let total = 0;
    PRIORITIES.forEach((priority, i) => {
      const depth = depths[i];
      total += depth;
      setText($(`queue-${priority}`), isNum(queues[priority]) ? String(queues[priority]) : '–');
      const bar = $(`queue-bar-${priority}`);
      if (bar) {
        const pct = depth > 0 ? Math.max(2, (depth / deepest) * 100) : 0;
        bar.style.width = `${pct.toFixed(1)}%`;
      }
    });
    setText($('queue-total'), String(total));

    setText($('uptime'), isNum(o.started_at) ? fmtSpan(serverNow() - o.started_at) : '–');
    const results = o.results || {};
    if (isNum(results.size)) {
      const asked = (results.hits || 0) + (results.misses || 0);
      const hitRate = asked > 0 ? ` · ${Math.round((100 * (results.hits || 0)) / asked)}% hits` : '';
      const bytes = isNum(results.bytes) ? ` (${fmtBytes(results.bytes)})` : '';
      setText($('results-stats'), `${results.size} kept${bytes}${hitRate}`);
    }
    const events = o.events || {};
    const eventsNode = $('events-stats');
    if (isNum(events.published)) {
      setText(eventsNode, `${events.published} published · ${events.dropped || 0} dropped`);
      eventsNode.classList.toggle('is-warn', (events.dropped || 0) > 0);
    }
  }

  // ---------------------------------------------------------------------------------------
  // Keyed table rows (workers, queues, replicas, registered tasks, schedules)
  // ---------------------------------------------------------------------------------------

  /** Put one <tr> per item in tbody, in order, reusing rows by key; drop the rest. */
  function reconcileRows(tbody, rowMap, items, keyOf, createRow, updateRow) {
    const seen = new Set();
    let cursor = tbody.firstChild;
    for (const item of items) {
      const key = keyOf(item);
      if (key === null || key === undefined || seen.has(key)) continue;
      seen.add(key);
      let row = rowMap.get(key);
      if (!row) {
        row = createRow(item, key);
        rowMap.set(key, row);
      }
      updateRow(row, item);
      if (row === cursor) cursor = cursor.nextSibling;
      else tbody.insertBefore(row, cursor);
    }
    while (cursor) {
      const next = cursor.nextSibling;
      cursor.remove();
      cursor = next;
    }
    for (const key of Array.from(rowMap.keys())) if (!seen.has(key)) rowMap.delete(key);
    return seen.size;
  }

  function rowWithCells(count, classes) {
    const row = document.createElement('tr');
    row.cells_ = [];
    for (let i = 0; i < count; i++) {
      const cell = document.createElement('td');
      if (classes && classes[i]) cell.className = classes[i];
      row.cells_.push(cell);
      row.append(cell);
    }
    return row;
  }

  /** A cell holding one badge <span>. */
  function setBadge(cell, text, className) {
    let badge = cell.firstElementChild;
    if (!badge || badge.tagName !== 'SPAN') {
      cell.textContent = '';
      badge = cell.appendChild(document.createElement('span'));
    }
    setClass(badge, className);
    setText(badge, text);
  }

  function toggleEmpty(id, isEmpty) {
    const node = $(id);
    if (node) node.hidden = !isEmpty;
  }

  // ---------------------------------------------------------------------------------------
  // Workers
  // ---------------------------------------------------------------------------------------

  let workers = null;
  let workerSetKey = null;
  const workerRows = new Map();
  const workerNames = new Map();

  async function loadWorkers() {
    try {
      const list = await getJSON('/api/workers');
      if (!Array.isArray(list)) return;
      workers = list;
      noteWorkerSet(list);
      markDirty('workers');
    } catch (err) {
      warn('loading /api/workers failed', err);
    }
  }

  function noteWorkerSet(list) {
    const key = list.map((w) => String(w.worker_id)).sort().join('\n');
    if (workerSetKey !== null && key !== workerSetKey) refreshCatalog();
    workerSetKey = key;
    workerNames.clear();
    for (const w of list) workerNames.set(w.worker_id, w.name);
  }

  function createWorkerRow(worker, key) {
    const row = rowWithCells(7, ['mono', '', '', '', 'num', '', '']);
    row.dataset.workerId = key;
    const load = row.cells_[3];
    row.meterText = load.appendChild(el('span', { class: 'load-text' }));
    const meter = load.appendChild(el('span', { class: 'meter', 'aria-hidden': 'true' }));
    row.meterFill = meter.appendChild(el('span', { class: 'meter-fill' }));
    return row;
  }

  function updateWorkerRow(row, w) {
    const [idCell, nameCell, stateCell, , completedCell, beatCell, whereCell] = row.cells_;
    setText(idCell, w.worker_id);
    setText(nameCell, w.name || '–');
    const taskNames = Array.isArray(w.tasks) ? w.tasks : [];
    setAttr(nameCell, 'title', taskNames.length ? `Tasks: ${taskNames.join(', ')}` : 'No tasks');
    setBadge(stateCell, w.state || 'unknown', `badge wstate wstate-${String(w.state || 'unknown')}`);

    const inFlight = isNum(w.in_flight) ? w.in_flight : 0;
    const concurrency = isNum(w.concurrency) ? w.concurrency : 0;
    setText(row.meterText, `${inFlight} / ${concurrency || '–'}`);
    const pct = concurrency > 0 ? Math.min(100, (inFlight / concurrency) * 100) : 0;
    row.meterFill.style.width = `${pct.toFixed(0)}%`;
    row.meterFill.classList.toggle('is-full', concurrency > 0 && inFlight >= concurrency);

    setText(completedCell, fmtCount(w.completed));
    setText(beatCell, fmtAgo(w.last_seen_ago));
    setAttr(beatCell, 'title', isNum(w.last_heartbeat) ? fmtDateTime(w.last_heartbeat) : '');
    beatCell.classList.toggle('is-stale', isNum(w.last_seen_ago) && w.last_seen_ago > STALE_HEARTBEAT_S);
    if (w.local) setBadge(whereCell, 'local', 'badge badge-local');
    else setBadge(whereCell, 'remote', 'plain-muted');
  }

  function renderWorkers() {
    const table = $('workers-table');
    if (!table || !workers) return;
    const count = reconcileRows(
      table.tBodies[0], workerRows, workers, (w) => w.worker_id, createWorkerRow, updateWorkerRow);
    toggleEmpty('workers-empty', count === 0);
  }

  // ---------------------------------------------------------------------------------------
  // Named queues: depth, limits, pause / resume
  // ---------------------------------------------------------------------------------------

  let namedQueues = null;
  const queueRows = new Map();
  const queueActionsPending = new Set(); // queue names with a pause/resume request in flight

  async function loadQueues() {
    try {
      const list = await getJSON('/api/queues');
      if (!Array.isArray(list)) return;
      namedQueues = list;
      markDirty('queues');
    } catch (err) {
      warn('loading /api/queues failed', err);
    }
  }

  function onQueuesEvent(event) {
    const state = parseEventData(event);
    if (!state || !Array.isArray(state.queues)) return;
    namedQueues = state.queues;
    markDirty('queues');
  }

  function fmtLimits(q) {
    const parts = [];
    if (q.rate_limit) parts.push(q.rate_limit);
    if (isNum(q.concurrency_limit)) parts.push(`${q.concurrency_limit} at once`);
    return parts.length ? parts.join(' · ') : 'none';
  }

  function createQueueRow(queue, key) {
    const row = rowWithCells(12, ['mono', 'num', 'num', 'num', 'num', '', 'num', 'num', '', 'num', '', 'actions']);
    row.dataset.queue = key;
    row.actionButton = row.cells_[11].appendChild(
      el('button', { type: 'button', class: 'button button-small queue-action' }));
    return row;
  }

  function updateQueueRow(row, q) {
    const cells = row.cells_;
    setText(cells[0], q.name);
    const depth = q.depth || {};
    PRIORITIES.forEach((priority, i) => {
      const cell = cells[1 + i];
      setText(cell, fmtCount(depth[priority]));
      cell.classList.toggle('plain-muted', !depth[priority]);
    });
    setText(cells[5], isNum(q.oldest_age) ? fmtSpan(q.oldest_age) : '–');
    setText(cells[6], fmtCount(q.running));
    setText(cells[7], fmtCount(q.workers));
    cells[7].classList.toggle('is-warn', q.workers === 0 && Object.values(depth).some((n) => n > 0));
    setAttr(cells[7], 'title', q.workers === 0 ? 'No worker serves this queue' : '');
    setText(cells[8], fmtLimits(q));
    setText(cells[9], fmtCount(q.waiting_on_limits));
    cells[9].classList.toggle('is-warn', isNum(q.waiting_on_limits) && q.waiting_on_limits > 0);
    const paused = Boolean(q.paused);
    row.dataset.paused = String(paused);
    if (paused) setBadge(cells[10], 'paused', 'badge qstate qstate-paused');
    else setBadge(cells[10], 'active', 'badge qstate qstate-active');
    const button = row.actionButton;
    const action = paused ? 'resume' : 'pause';
    button.dataset.action = action;
    setText(button, paused ? 'Resume' : 'Pause');
    setAttr(button, 'aria-label', `${paused ? 'Resume' : 'Pause'} queue ${q.name}`);
    button.disabled = queueActionsPending.has(q.name);
  }

  function renderQueues() {
    const table = $('queues-table');
    if (!table || !namedQueues) return;
    const ordered = namedQueues.slice().sort((a, b) => String(a.name).localeCompare(String(b.name)));
    const count = reconcileRows(table.tBodies[0], queueRows, ordered, (q) => q.name,
      createQueueRow, updateQueueRow);
    toggleEmpty('queues-empty', count === 0);
  }

  async function onQueueTableClick(event) {
    const button = event.target.closest('button.queue-action');
    if (!button || button.disabled) return;
    const row = button.closest('tr[data-queue]');
    if (!row) return;
    const name = row.dataset.queue;
    const action = button.dataset.action;
    queueActionsPending.add(name);
    button.disabled = true;
    setText($('queues-message'), '');
    try {
      const acted = await postAction(`/api/queues/${encodeURIComponent(name)}/${action}`);
      const known = namedQueues && namedQueues.find((q) => q.name === name);
      if (known && acted && typeof acted.paused === 'boolean') known.paused = acted.paused;
      setText($('queues-message'), `${name} ${action === 'pause' ? 'paused' : 'resumed'}`);
    } catch (err) {
      warn(`${action} ${name} failed`, err);
      setText($('queues-message'), `${action} ${name} failed: ${err.message}`);
    } finally {
      queueActionsPending.delete(name);
      markDirty('queues');
    }
    loadQueues(); // the stream's next snapshot would bring it too, within a second
  }

  // ---------------------------------------------------------------------------------------
  // Replicas: a replicated control plane's leader and followers (hidden when alone)
  // ---------------------------------------------------------------------------------------

  /** /api/replicas once, then the stream's replicas event each second (only a leader
      of replicas sends it: a control plane alone never becomes replicated). */
  let replicas = null;
  const replicaRows = new Map();

  const MODE_TITLE = {
    replicated: 'Writes are acknowledged once enough followers have them',
    alone: 'Too few followers in sync: writes are acknowledged on the leader\'s disk alone',
    refusing: 'Too few followers in sync: new writes are refused (--require-sync)',
  };

  async function loadReplicas() {
    try {
      const doc = await getJSON('/api/replicas');
      if (!doc || typeof doc !== 'object') return;
      replicas = doc;
      markDirty('replicas');
    } catch (err) {
      warn('loading /api/replicas failed', err);
    }
  }

  function onReplicasEvent(event) {
    const doc = parseEventData(event);
    if (!doc || typeof doc !== 'object') return;
    replicas = doc;
    markDirty('replicas');
  }

  function createReplicaRow(replica, key) {
    const row = rowWithCells(6, ['mono', '', '', 'num', 'num', 'num']);
    row.dataset.replica = key;
    return row;
  }

  function updateReplicaRow(row, r) {
    const [nameCell, roleCell, syncCell, framesCell, bytesCell, ageCell] = row.cells_;
    const leader = r.role === 'leader';
    row.dataset.role = String(r.role);
    setText(nameCell, r.name);
    setAttr(nameCell, 'title', leader && r.candidate ? `Candidate ${r.candidate}` : '');
    setBadge(roleCell, r.role || 'unknown', `badge rrole rrole-${String(r.role || 'unknown')}`);
    if (leader) {
      delete row.dataset.inSync;
      setText(syncCell, '–');
      for (const cell of [framesCell, bytesCell, ageCell]) setText(cell, '–');
      return;
    }
    row.dataset.inSync = String(Boolean(r.in_sync));
    if (r.in_sync) setBadge(syncCell, 'in sync', 'badge rsync rsync-yes');
    else setBadge(syncCell, 'behind', 'badge rsync rsync-no');
    setText(framesCell, fmtCount(r.lag_frames));
    setText(bytesCell, fmtBytes(r.lag_bytes));
    setText(ageCell, isNum(r.lag_seconds) && r.lag_seconds > 0 ? fmtDuration(r.lag_seconds) : '–');
  }

  function renderReplicas() {
    const panel = $('replicas-panel');
    if (!panel || !replicas) return;
    panel.dataset.replicated = String(Boolean(replicas.replicated));
    panel.hidden = !replicas.replicated;
    if (!replicas.replicated) return;
    const list = Array.isArray(replicas.replicas) ? replicas.replicas : [];
    reconcileRows($('replicas-table').tBodies[0], replicaRows, list, (r) => r.name,
      createReplicaRow, updateReplicaRow);
    setText($('replicas-epoch'), fmtCount(replicas.epoch));
    const mode = $('replicas-mode');
    setText(mode, replicas.mode || '–');
    setClass(mode, `badge rmode rmode-${String(replicas.mode || 'unknown')}`);
    setAttr(mode, 'title', MODE_TITLE[replicas.mode] || '');
    const followers = list.filter((r) => r.role === 'follower');
    const inSync = followers.filter((r) => r.in_sync).length;
    const plural = followers.length === 1 ? '' : 's';
    setText($('replicas-sync'), `${inSync} of ${followers.length} follower${plural} in sync · ` +
      `${fmtCount(replicas.sync_replicas)} needed`);
  }

  // ---------------------------------------------------------------------------------------
  // Throughput chart (inline SVG)
  // ---------------------------------------------------------------------------------------

  let throughputInterval = 1;
  let throughputPoints = []; // oldest first, unique t
  let chartHoverIndex = null;
  let chartGeometry = null;
  let chartWidth = 0;

  function addThroughputPoint(point) {
    if (!point || !isNum(point.t)) return;
    const p = { t: point.t, succeeded: +point.succeeded || 0, failed: +point.failed || 0 };
    const pts = throughputPoints;
    const n = pts.length;
    if (n === 0 || pts[n - 1].t < p.t) pts.push(p);
    else if (pts[n - 1].t === p.t) pts[n - 1] = p;
    else {
      let i = n - 1;
      while (i >= 0 && pts[i].t > p.t) i--;
      if (i >= 0 && pts[i].t === p.t) pts[i] = p;
      else pts.splice(i + 1, 0, p);
    }
    const cutoff = pts[pts.length - 1].t - WINDOW_SECONDS;
    let drop = 0;
    while (drop < pts.length && pts[drop].t <= cutoff) drop++;
    if (drop) pts.splice(0, drop);
  }

  async function loadThroughput() {
    try {
      const data = await getJSON(`/api/throughput?window=${WINDOW_SECONDS}`);
      if (!data || !Array.isArray(data.points)) return;
      if (isNum(data.interval) && data.interval > 0) throughputInterval = data.interval;
      const live = throughputPoints; // points that arrived by snapshot while we waited
      throughputPoints = [];
      for (const p of data.points) addThroughputPoint(p);
      for (const p of live) addThroughputPoint(p);
      markDirty('chart');
    } catch (err) {
      warn('loading /api/throughput failed', err);
    }
  }

  function niceStep(rough) {
    if (rough <= 0) return 1;
    const pow = Math.pow(10, Math.floor(Math.log10(rough)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * pow >= rough) return m * pow;
    return 10 * pow;
  }

  function renderChart() {
    const chart = $('throughput-chart');
    const wrap = $('throughput-wrap');
    if (!chart || !wrap) return;

    // The observed width, so drawing forces no layout; measured only before the first report.
    const width = Math.max(280, chartWidth || Math.floor(wrap.clientWidth || 600));
    const height = width < 520 ? 180 : 220;
    chart.setAttribute('width', width);
    chart.setAttribute('height', height);
    chart.setAttribute('viewBox', `0 0 ${width} ${height}`);

    const m = { l: 40, r: 12, t: 24, b: 24 };
    const pw = width - m.l - m.r;
    const ph = height - m.t - m.b;
    const step = throughputInterval;
    const slots = Math.max(2, Math.round(WINDOW_SECONDS / step));
    const pts = throughputPoints;
    const end = pts.length ? pts[pts.length - 1].t : Math.floor(serverNow());
    const start = end - (slots - 1) * step;

    // Seconds with no point finished nothing: fill them with zeros.
    const ok = new Float64Array(slots);
    const bad = new Float64Array(slots);
    for (const p of pts) {
      const i = Math.round((p.t - start) / step);
      if (i >= 0 && i < slots) {
        ok[i] = p.succeeded / step;
        bad[i] = p.failed / step;
      }
    }
    let max = 0;
    let peak = 0;
    let total = 0;
    for (let i = 0; i < slots; i++) {
      max = Math.max(max, ok[i], bad[i]);
      peak = Math.max(peak, ok[i] + bad[i]);
      total += (ok[i] + bad[i]) * step;
    }
    const tick = Math.max(step < 1 ? 0.5 : 1, niceStep(max / 4));
    const top = tick * Math.max(1, Math.ceil(max / tick));

    const x = (i) => m.l + (i / (slots - 1)) * pw;
    const y = (v) => m.t + ph - (v / top) * ph;

    const nodes = [];
    const grid = svg('g', { class: 'chart-grid' });
    for (let v = 0; v <= top + 1e-9; v += tick) {
      const yy = y(v).toFixed(1);
      grid.append(svg('line', { x1: m.l, x2: m.l + pw, y1: yy, y2: yy }));
      grid.append(svg('text', { x: m.l - 6, y: yy, 'text-anchor': 'end', 'dominant-baseline': 'middle', class: 'chart-label' }, fmtRate(v)));
    }
    for (let k = 0; k <= Math.floor(WINDOW_SECONDS / 60); k++) {
      const i = Math.max(0, slots - 1 - (k * 60) / step);
      const xx = x(i);
      grid.append(svg('line', { x1: xx.toFixed(1), x2: xx.toFixed(1), y1: m.t, y2: m.t + ph, class: 'chart-vline' }));
      const anchor = k === 0 ? 'end' : i <= 0.5 ? 'start' : 'middle';
      grid.append(svg('text', { x: xx.toFixed(1), y: height - 6, 'text-anchor': anchor, class: 'chart-label' }, k === 0 ? 'now' : `−${k} min`));
    }
    grid.append(svg('text', { x: m.l - 6, y: 9, 'text-anchor': 'end', class: 'chart-label chart-unit' }, 'tasks/s'));
    nodes.push(grid);

    const series = (values, cls) => {
      let line = '';
      for (let i = 0; i < slots; i++) line += `${i ? 'L' : 'M'}${x(i).toFixed(1)},${y(values[i]).toFixed(1)}`;
      const base = y(0).toFixed(1);
      const area = `${line}L${x(slots - 1).toFixed(1)},${base}L${x(0).toFixed(1)},${base}Z`;
      nodes.push(svg('path', { d: area, class: `chart-area ${cls}` }));
      nodes.push(svg('path', { d: line, class: `chart-line ${cls}` }));
    };
    series(ok, 'series-ok');
    series(bad, 'series-fail');

    const guide = svg('line', { x1: 0, x2: 0, y1: m.t, y2: m.t + ph, class: 'chart-guide', visibility: 'hidden' });
    nodes.push(guide);
    nodes.push(svg('rect', { x: m.l, y: m.t, width: pw, height: ph, class: 'chart-hit' }));
    chart.replaceChildren(...nodes);

    chartGeometry = { ok, bad, slots, step, m, pw, width, guide, x };
    // "now": mean of the last five complete slots (the newest one may still be filling).
    let recent = 0;
    let counted = 0;
    for (let i = slots - 2; i >= 0 && counted < 5; i--, counted++) recent += ok[i] + bad[i];
    setText($('throughput-now'), fmtRate(counted ? recent / counted : 0));
    setText($('throughput-peak'), fmtRate(peak));
    setText($('throughput-total'), fmtCount(total));
    chart.setAttribute('aria-label',
      `Tasks finished per second over the last 5 minutes: peak ${fmtRate(peak)} per second, ${fmtCount(total)} in total`);
    showChartHover(chartHoverIndex);
  }

  function showChartHover(index) {
    const g = chartGeometry;
    const readout = $('throughput-readout');
    if (!g || index === null || index < 0 || index >= g.slots) {
      if (g) g.guide.setAttribute('visibility', 'hidden');
      setText(readout, '');
      return;
    }
    const xx = g.x(index).toFixed(1);
    g.guide.setAttribute('x1', xx);
    g.guide.setAttribute('x2', xx);
    g.guide.setAttribute('visibility', 'visible');
    const ago = Math.round((g.slots - 1 - index) * g.step);
    setText(readout, `${ago ? `−${ago} s` : 'now'}: ${fmtRate(g.ok[index])} succeeded, ${fmtRate(g.bad[index])} failed per s`);
  }

  function onChartPointer(event) {
    const g = chartGeometry;
    const chart = $('throughput-chart');
    if (!g || !chart) return;
    const rect = chart.getBoundingClientRect();
    const px = ((event.clientX - rect.left) * g.width) / (rect.width || g.width);
    const index = Math.round(((px - g.m.l) / g.pw) * (g.slots - 1));
    chartHoverIndex = index >= 0 && index < g.slots ? index : null;
    showChartHover(chartHoverIndex);
  }

  // ---------------------------------------------------------------------------------------
  // Tasks: a bounded model, filled by /api/tasks and upserted by the event stream
  // ---------------------------------------------------------------------------------------

  const tasks = new Map(); // task_id -> record
  let statusFilter = '';
  let insertSeq = 0; // tie-breaker: later inserts sort first
  let eventSeq = 0; // bumps with every applied transition
  let taskOrder = null; // cached sort, null when stale
  let initialTasksLoaded = false;
  const dirtyTasks = new Set();
  let flashBudget = 0;

  function newRecord(taskId, key) {
    const record = {
      task_id: taskId,
      name: '',
      status: 'pending',
      priority: null,
      attempts: 0,
      worker_id: null,
      submitted_at: null,
      started_at: null,
      finished_at: null,
      duration: null,
      error: null,
      key: isNum(key) ? key : serverNow(),
      seq: ++insertSeq,
      lastEventSeq: 0,
      detailed: false,
      fresh: false,
      row: null,
    };
    tasks.set(taskId, record);
    taskOrder = null;
    return record;
  }

  function touch(record) {
    dirtyTasks.add(record);
    dirty.tasks = true;
  }

  const matchesFilter = (record) => !statusFilter || record.status === statusFilter;

  function sortedTasks() {
    if (!taskOrder) {
      taskOrder = Array.from(tasks.values()).sort((a, b) => b.key - a.key || b.seq - a.seq);
    }
    return taskOrder;
  }

  /** Keep at most MAX_ROWS tasks that the filter shows, and MAX_HIDDEN that it hides. */
  function enforceTaskLimit() {
    if (tasks.size <= MAX_ROWS) return;
    let shown = 0;
    let hidden = 0;
    let removed = false;
    for (const record of sortedTasks()) {
      const over = matchesFilter(record) ? ++shown > MAX_ROWS : ++hidden > MAX_HIDDEN;
      if (over) {
        tasks.delete(record.task_id);
        dirtyTasks.delete(record);
        removed = true;
      }
    }
    if (removed) taskOrder = null;
  }

  /** One transition from the event stream: the live truth, always applied. */
  function applyTransition(t) {
    if (!t || typeof t.kind !== 'string' || !t.task_id) return;
    if (!t.kind.startsWith('task.')) return;
    const status = t.kind.slice(5);
    const at = isNum(t.at) ? t.at : serverNow();
    let record = tasks.get(t.task_id);
    if (!record) {
      record = newRecord(t.task_id, at);
      record.fresh = initialTasksLoaded;
      noteTaskWithoutSummary();
    }
    const previous = record.status;
    record.status = status;
    record.lastEventSeq = ++eventSeq;
    if (t.name) record.name = t.name;
    if (isNum(t.attempts)) record.attempts = t.attempts;
    if (t.worker_id) record.worker_id = t.worker_id;
    else if (UNASSIGNED_STATES.has(status)) record.worker_id = null;

    if (status === 'pending' || status === 'queued' || status === 'scheduled') {
      if (record.submitted_at === null) record.submitted_at = at;
      record.finished_at = null;
      record.duration = null;
    } else if (status === 'running') {
      record.started_at = at;
      record.finished_at = null;
      record.duration = null;
    } else if (FINAL_STATES.has(status) && (previous !== status || !record.detailed)) {
      // (A repeat of a final state the API already described in full changes nothing.)
      if (status === 'success') record.error = null;
      record.finished_at = at;
      // Provisional, until /api/tasks/{id} tells the real ones.
      record.duration = record.started_at !== null ? Math.max(0, at - record.started_at) : null;
      record.detailed = false;
      queueDetailFetch(record.task_id);
    }
    if (!FINAL_STATES.has(status)) record.detailed = false;
    touch(record);
    if (t.task_id === detailId && previous !== status) scheduleDetailReload();
  }

  /**
   * A task summary (or full task) from the API. Its state wins unless the event stream
   * moved the task on after the request was sent (`seqAtRequest`), or it would take a
   * final task back: a final state is the last, so an answer that has the task still on
   * its way is older (answers to requests under way at once may come in any order).
   */
  function mergeApiTask(item, seqAtRequest, { insert = true } = {}) {
    if (!item || !item.task_id) return;
    let record = tasks.get(item.task_id);
    if (!record) {
      if (!insert) return;
      record = newRecord(item.task_id, item.submitted_at ?? item.started_at ?? item.finished_at);
    }
    const older = FINAL_STATES.has(record.status) && !FINAL_STATES.has(item.status);
    const apiIsCurrent =
      (record.lastEventSeq <= seqAtRequest && !older) || record.status === item.status;
    if (item.name) record.name = item.name;
    if (item.priority) record.priority = item.priority;
    if (isNum(item.submitted_at)) record.submitted_at = item.submitted_at;
    if (apiIsCurrent) {
      if (item.status) record.status = item.status;
      if (isNum(item.attempts)) record.attempts = item.attempts;
      if ('worker_id' in item) record.worker_id = item.worker_id;
      record.started_at = item.started_at ?? null;
      record.finished_at = item.finished_at ?? null;
      record.duration = isNum(item.duration) ? item.duration : null;
      record.error = item.error || null;
      record.detailed = true;
    } else if (item.error && record.status === 'retrying') {
      record.error = item.error; // the attempt that just failed
    }
    touch(record);
  }

  async function loadTasks(status) {
    const seqAtRequest = eventSeq;
    const query = status ? `&status=${encodeURIComponent(status)}` : '';
    try {
      const items = await getJSON(`/api/tasks?limit=${INITIAL_TASKS}${query}`);
      if (!Array.isArray(items)) return;
      // Newest first: merge oldest first so equal keys keep the server's order.
      for (let i = items.length - 1; i >= 0; i--) mergeApiTask(items[i], seqAtRequest);
      enforceTaskLimit();
    } catch (err) {
      warn('loading /api/tasks failed', err);
    } finally {
      initialTasksLoaded = true;
      markDirty('tasks');
    }
  }

  // Background detail fetches for tasks that just finished (an event does not carry their
  // priority, duration or error). Batched: a short delay gathers them; when many are waiting,
  // one /api/tasks list answers for most; the rest go one by one, a few at a time, newest
  // first, skipping tasks that left the table or moved on meanwhile.
  const detailFresh = []; // not asked about yet, oldest first
  let detailStragglers = []; // a list answer did not cover them
  const detailQueued = new Set();
  let detailActive = 0;
  let detailListActive = false;
  let detailTimer = 0;
  let listTimer = 0;

  function needsDetail(taskId) {
    const record = tasks.get(taskId);
    return Boolean(record && !record.detailed && FINAL_STATES.has(record.status));
  }

  function trimBacklog(list) {
    if (list.length <= DETAIL_BACKLOG) return list;
    const dropped = list.splice(0, list.length - DETAIL_BACKLOG);
    for (const taskId of dropped) detailQueued.delete(taskId);
    return list;
  }

  function queueDetailFetch(taskId) {
    if (detailQueued.has(taskId)) return;
    detailQueued.add(taskId);
    detailFresh.push(taskId);
    trimBacklog(detailFresh);
    if (!detailTimer) {
      detailTimer = window.setTimeout(() => {
        detailTimer = 0;
        pumpDetailFetches();
      }, DETAIL_BATCH_DELAY_MS);
    }
  }

  /**
   * Tasks first seen through the stream (submitted after the page loaded) lack their
   * priority until they finish: at most once a LIST_REFRESH_MS, one list fills those in.
   */
  function noteTaskWithoutSummary() {
    if (listTimer) return;
    listTimer = window.setTimeout(() => {
      listTimer = 0;
      if (detailListActive) return; // the one under way answers
      if (detailActive >= DETAIL_CONCURRENCY) noteTaskWithoutSummary();
      else startListFetch();
    }, LIST_REFRESH_MS);
  }

  function startListFetch() {
    const batch = detailFresh.splice(0);
    detailActive++;
    detailListActive = true;
    const seqAtRequest = eventSeq;
    getJSON(`/api/tasks?limit=${LIST_BATCH_LIMIT}`)
      .then((items) => {
        if (!Array.isArray(items)) return;
        for (const item of items) mergeApiTask(item, seqAtRequest, { insert: false });
        scheduleRender();
      })
      .catch((err) => warn('loading /api/tasks failed', err))
      .finally(() => {
        detailActive--;
        detailListActive = false;
        for (const taskId of batch) {
          if (needsDetail(taskId)) detailStragglers.push(taskId);
          else detailQueued.delete(taskId);
        }
        detailStragglers = trimBacklog(detailStragglers);
        pumpDetailFetches();
      });
  }

  function pumpDetailFetches() {
    if (detailFresh.length > LIST_BATCH_THRESHOLD && !detailListActive && detailActive < DETAIL_CONCURRENCY) {
      startListFetch();
    }
    while (detailActive < DETAIL_CONCURRENCY) {
      let taskId;
      if (detailFresh.length && detailFresh.length <= LIST_BATCH_THRESHOLD) taskId = detailFresh.pop();
      else if (detailStragglers.length) taskId = detailStragglers.pop();
      else break; // nothing, or a crowd waiting for the next list
      detailQueued.delete(taskId);
      if (!needsDetail(taskId)) continue;
      detailActive++;
      const seqAtRequest = eventSeq;
      getJSON(`/api/tasks/${encodeURIComponent(taskId)}`)
        .then((item) => {
          mergeApiTask(item, seqAtRequest, { insert: false });
          scheduleRender();
        })
        .catch((err) => {
          if (!(err instanceof HttpError && err.status === 404)) warn(`loading task ${taskId} failed`, err);
        })
        .finally(() => {
          detailActive--;
          pumpDetailFetches();
        });
    }
  }

  function createTaskRow(record) {
    const row = rowWithCells(8, ['mono', 'task-name', '', '', 'num', 'mono', 'num', 'error-cell']);
    row.className = 'task-row';
    const button = el('button', { type: 'button', class: 'link-button mono' });
    row.cells_[0].append(button);
    row.idButton = button;
    row.addEventListener('animationend', () => row.classList.remove('row-new'));
    record.row = row;
    return row;
  }

  function updateTaskRow(record) {
    const row = record.row || createTaskRow(record);
    const [, nameCell, stateCell, prioCell, attemptsCell, workerCell, durationCell, errorCell] = row.cells_;
    if (row.dataset.taskId !== record.task_id) row.dataset.taskId = record.task_id;
    if (row.dataset.status !== record.status) row.dataset.status = record.status;
    setText(row.idButton, shortId(record.task_id));
    setAttr(row.idButton, 'title', record.task_id);
    setAttr(row.idButton, 'aria-label', `Task ${record.task_id} details`);
    setText(nameCell, record.name || '–');
    setBadge(stateCell, record.status, `badge state state-${record.status}`);
    if (record.priority) setBadge(prioCell, record.priority, `prio prio-${record.priority}`);
    else setText(prioCell, '–');
    setText(attemptsCell, fmtCount(record.attempts));
    setText(workerCell, record.worker_id || '–');
    setAttr(workerCell, 'title', record.worker_id ? workerNames.get(record.worker_id) || record.worker_id : '');
    setText(durationCell, fmtDuration(record.duration));
    const line = errorLine(record.error);
    setText(errorCell, truncate(line, ERROR_PREVIEW_CHARS));
    setAttr(errorCell, 'title', line);
    if (record.fresh) {
      record.fresh = false;
      // Highlight a new row only when few arrive at once: a busy cluster would make the
      // whole table blink (and cost a style pass per frame for nothing).
      if (flashBudget > 0) {
        flashBudget--;
        row.classList.add('row-new');
      }
    }
    return row;
  }

  function renderTasks() {
    const table = $('tasks-table');
    if (!table) return;
    const tbody = table.tBodies[0];
    let freshCount = 0;
    for (const record of dirtyTasks) if (record.fresh) freshCount++;
    flashBudget = freshCount <= MAX_FLASHING_ROWS ? freshCount : 0;
    for (const record of dirtyTasks) if (tasks.get(record.task_id) === record) updateTaskRow(record);
    dirtyTasks.clear();

    let cursor = tbody.firstChild;
    let shown = 0;
    for (const record of sortedTasks()) {
      if (shown >= MAX_ROWS) break;
      if (!matchesFilter(record)) continue;
      shown++;
      const row = record.row || updateTaskRow(record);
      if (row === cursor) cursor = cursor.nextSibling;
      else tbody.insertBefore(row, cursor);
    }
    while (cursor) {
      const next = cursor.nextSibling;
      cursor.remove();
      cursor = next;
    }

    const empty = $('tasks-empty');
    if (empty) {
      setText(empty, statusFilter ? `No recent tasks in state “${statusFilter}”.` : 'No tasks yet.');
      empty.hidden = shown > 0;
    }
    setText($('tasks-count'), shown ? `${shown} shown` : '');
  }

  function onFilterChange(event) {
    statusFilter = event.target.value;
    taskOrder = null;
    markDirty('tasks');
    loadTasks(statusFilter);
  }

  function onTaskTableClick(event) {
    const row = event.target.closest('tr[data-task-id]');
    if (!row) return;
    // Let people select text in a row without opening the panel.
    const selection = window.getSelection && window.getSelection();
    if (selection && !selection.isCollapsed && row.contains(selection.anchorNode) &&
        !event.target.closest('button')) return;
    openDetail(row.dataset.taskId, row.idButton || row);
  }

  // ---------------------------------------------------------------------------------------
  // Task detail dialog
  // ---------------------------------------------------------------------------------------

  let detailId = null;
  let detailToken = 0;
  let detailReturnFocus = null;
  let detailReloadTimer = 0;

  function openDetail(taskId, opener) {
    const dialog = $('task-detail');
    if (!dialog || !taskId) return;
    detailId = taskId;
    detailReturnFocus = opener || document.activeElement;
    const record = tasks.get(taskId);
    renderDetailHeading(record ? record.name : '', record ? record.status : null);
    $('task-detail-body').replaceChildren(el('p', { class: 'muted loading', text: 'Loading…' }));
    if (!dialog.open) {
      if (typeof dialog.showModal === 'function') dialog.showModal();
      else dialog.setAttribute('open', '');
    }
    const closeButton = $('task-detail-close');
    if (closeButton) closeButton.focus();
    loadDetail();
  }

  function closeDetail() {
    const dialog = $('task-detail');
    if (dialog && dialog.open) {
      if (typeof dialog.close === 'function') dialog.close();
      else dialog.removeAttribute('open');
    }
    afterDetailClosed();
  }

  function afterDetailClosed() {
    if (detailId === null) return;
    detailId = null;
    detailToken++;
    window.clearTimeout(detailReloadTimer);
    detailReloadTimer = 0;
    const target = detailReturnFocus;
    detailReturnFocus = null;
    if (target && target.isConnected && typeof target.focus === 'function') target.focus();
  }

  function scheduleDetailReload() {
    if (detailReloadTimer) return;
    detailReloadTimer = window.setTimeout(() => {
      detailReloadTimer = 0;
      if (detailId !== null) loadDetail();
    }, 400);
  }

  async function loadDetail() {
    const taskId = detailId;
    const token = ++detailToken;
    const seqAtRequest = eventSeq;
    try {
      const task = await getJSON(`/api/tasks/${encodeURIComponent(taskId)}`);
      if (token !== detailToken) return;
      renderDetail(task);
      mergeApiTask(task, seqAtRequest, { insert: false });
      scheduleRender();
    } catch (err) {
      if (token !== detailToken) return;
      const notFound = err instanceof HttpError && err.status === 404;
      const retry = el('button', { type: 'button', class: 'button' }, 'Try again');
      retry.addEventListener('click', () => loadDetail());
      $('task-detail-body').replaceChildren(
        el('p', { class: 'detail-message', id: 'task-detail-error' },
          notFound
            ? 'The control plane no longer knows this task (finished tasks leave the result cache).'
            : `Could not load the task: ${err && err.message ? err.message : err}`),
        el('p', null, el('code', { class: 'mono' }, taskId)),
        notFound ? null : retry,
      );
    }
  }

  function renderDetailHeading(name, status) {
    const title = $('task-detail-title');
    const parts = [el('span', { class: 'detail-name' }, name || 'Task')];
    if (status) parts.push(el('span', { class: `badge state state-${status}`, id: 'task-detail-status' }, status));
    title.replaceChildren(...parts);
  }

  function timeValue(ts) {
    if (!isNum(ts)) return '–';
    return el('span', { title: isoTitle(ts) }, fmtDateTime(ts), el('span', { class: 'muted' }, ` (${fmtRelative(ts)})`));
  }

  /** A step's task ("<workflow_id>.<i>"): a button showing its workflow (workflows.js). */
  function workflowButton(taskId) {
    const workflows = window.fastworkerWorkflows;
    const workflowId = workflows ? workflows.workflowOf(taskId) : null;
    if (!workflowId) return '–';
    const button = el('button', { type: 'button', class: 'button button-small', id: 'task-detail-workflow' },
      `Show workflow ${shortId(workflowId)}`);
    button.addEventListener('click', () => {
      closeDetail();
      workflows.show(workflowId);
    });
    return button;
  }

  /** The dead letter a retried task runs again: a button opening that task. */
  function retryOfButton(taskId) {
    if (!taskId) return '–';
    const button = el('button', { type: 'button', class: 'link-button mono', id: 'task-detail-retry-of',
      'aria-label': `Open task ${taskId}, which this task retries` }, shortId(taskId));
    button.addEventListener('click', () => openDetail(taskId, button));
    return button;
  }

  function renderDetail(task) {
    renderDetailHeading(task.name, task.status);
    const fields = [
      ['Task id', 'task_id', el('code', { class: 'mono selectable' }, task.task_id || '–')],
      ['State', 'status', el('span', { class: `badge state state-${task.status}` }, task.status || '–')],
      ['Priority', 'priority', task.priority ? el('span', { class: `prio prio-${task.priority}` }, task.priority) : '–'],
      ['Attempts', 'attempts', fmtCount(task.attempts)],
      ['Worker', 'worker_id', task.worker_id
        ? el('span', null, el('code', { class: 'mono' }, task.worker_id),
          workerNames.get(task.worker_id) ? el('span', { class: 'muted' }, ` ${workerNames.get(task.worker_id)}`) : null)
        : '–'],
      ['Submitted', 'submitted_at', timeValue(task.submitted_at)],
      ['Started', 'started_at', timeValue(task.started_at)],
      ['Finished', 'finished_at', timeValue(task.finished_at)],
      ['Duration', 'duration', fmtDuration(task.duration)],
      ['ETA', 'eta', timeValue(task.eta)],
      ['Trace id', 'trace_id', task.trace_id ? el('code', { class: 'mono selectable' }, task.trace_id) : '–'],
      ['Workflow', 'workflow', workflowButton(task.task_id)],
      ['Retry of', 'retry_of', retryOfButton(task.retry_of)],
    ];
    const list = el('dl', { class: 'detail-grid' });
    for (const [label, key, value] of fields) {
      list.append(el('dt', null, label), el('dd', { dataset: { field: key } }, value));
    }

    const sections = [list];
    // The actions on this task (Cancel, Retry), from failed.js when it is loaded.
    const operations = window.fastworkerOperations;
    if (operations) sections.push(operations.taskActions(task));
    // A finished task's arguments are dropped unless the control plane keeps them.
    sections.push(task.arguments_kept === false
      ? el('section', { class: 'detail-section' },
        el('h3', null, 'Arguments'),
        el('p', { class: 'muted', id: 'task-args' },
          'Not kept: the control plane drops a task\'s arguments when it finishes '
          + '(start it with --result-keep-arguments to keep them).'))
      : el('section', { class: 'detail-section' },
        el('h3', null, 'Arguments'),
        el('div', { class: 'args-grid' },
          el('div', null, el('h4', null, 'args'), el('pre', { class: 'code', id: 'task-args' }, prettyJSON(task.args ?? []))),
          el('div', null, el('h4', null, 'kwargs'), el('pre', { class: 'code', id: 'task-kwargs' }, prettyJSON(task.kwargs ?? {}))))));

    if (task.error) {
      const error = task.error;
      sections.push(el('section', { class: 'detail-section detail-error' },
        el('h3', null, 'Error'),
        el('p', { class: 'error-headline', id: 'task-error' },
          el('strong', null, error.type || 'Error'),
          error.message ? `: ${error.message}` : '',
          error.reason ? el('span', { class: 'badge reason' }, error.reason) : null),
        el('pre', { class: 'code traceback', id: 'task-traceback' }, error.traceback || 'No traceback recorded.'),
      ));
    } else if (task.status === 'success') {
      sections.push(el('section', { class: 'detail-section' },
        el('h3', null, 'Result'),
        el('pre', { class: 'code', id: 'task-result' }, prettyJSON(task.result))));
    } else {
      sections.push(el('section', { class: 'detail-section' },
        el('h3', null, 'Result'),
        el('p', { class: 'muted', id: 'task-result' },
          task.status === 'cancelled' ? 'Cancelled: no result.' : 'No result yet.')));
    }

    const attemptErrors = Array.isArray(task.attempt_errors) ? task.attempt_errors : [];
    const attempts = el('ol', { class: 'attempt-errors', id: 'task-attempt-errors' });
    attemptErrors.forEach((error, i) => {
      const item = el('li', null,
        el('div', { class: 'attempt-line' },
          el('span', { class: 'muted' }, `Attempt ${i + 1}`),
          ' ',
          el('strong', null, (error && error.type) || 'Error'),
          error && error.message ? `: ${error.message}` : '',
          error && error.reason ? el('span', { class: 'badge reason' }, error.reason) : null));
      if (error && error.traceback) {
        item.append(el('details', null, el('summary', null, 'Traceback'),
          el('pre', { class: 'code traceback' }, error.traceback)));
      }
      attempts.append(item);
    });
    sections.push(el('section', { class: 'detail-section' },
      el('h3', null, `Attempt errors (${attemptErrors.length})`),
      attemptErrors.length ? attempts : el('p', { class: 'muted', id: 'task-attempt-errors' }, 'None.')));

    $('task-detail-body').replaceChildren(...sections);
  }

  // ---------------------------------------------------------------------------------------
  // Registered tasks and schedules
  // ---------------------------------------------------------------------------------------

  let registered = null;
  let schedules = null;
  const registeredRows = new Map();
  const scheduleRows = new Map();
  let catalogLoading = false;

  async function loadRegistered() {
    try {
      const list = await getJSON('/api/registered');
      if (!Array.isArray(list)) return;
      registered = list.slice().sort((a, b) => String(a.name).localeCompare(String(b.name)));
      markDirty('registered');
    } catch (err) {
      warn('loading /api/registered failed', err);
    }
  }

  async function loadSchedules() {
    try {
      const list = await getJSON('/api/schedules');
      if (!Array.isArray(list)) return;
      schedules = list;
      markDirty('schedules');
    } catch (err) {
      warn('loading /api/schedules failed', err);
    }
  }

  async function refreshCatalog() {
    if (catalogLoading) return;
    catalogLoading = true;
    try {
      await Promise.all([loadRegistered(), loadSchedules()]);
    } finally {
      catalogLoading = false;
    }
  }

  /** add(x, y=…, *args, *, key, **kw) as nodes. */
  function signatureNodes(task) {
    const params = Array.isArray(task.params) ? task.params : [];
    const parts = [];
    let sawStar = false;
    params.forEach((p, i) => {
      const name = String(p && p.name);
      const kind = p && p.kind;
      if (kind === 'VAR_POSITIONAL') {
        sawStar = true;
        parts.push(`*${name}`);
      } else if (kind === 'VAR_KEYWORD') {
        parts.push(`**${name}`);
      } else {
        if (kind === 'KEYWORD_ONLY' && !sawStar) {
          sawStar = true;
          parts.push('*');
        }
        parts.push(p && p.has_default ? `${name}=…` : name);
      }
      const next = params[i + 1];
      if (kind === 'POSITIONAL_ONLY' && (!next || next.kind !== 'POSITIONAL_ONLY')) parts.push('/');
    });
    return [el('strong', null, task.name), el('span', { class: 'muted' }, `(${parts.join(', ')})`)];
  }

  function fmtSeconds(s) {
    if (!isNum(s)) return '–';
    return `${Number.isInteger(s) ? s : s.toFixed(s < 1 ? 2 : 1)} s`;
  }

  function createRegisteredRow(task, key) {
    const row = rowWithCells(6, ['mono', 'num', '', '', '', '']);
    row.dataset.taskName = key;
    return row;
  }

  function updateRegisteredRow(row, task) {
    const [sigCell, retriesCell, backoffCell, retryOnCell, limitCell, periodicCell] = row.cells_;
    const signature = JSON.stringify(task.params || []);
    if (row.signature_ !== signature) {
      row.signature_ = signature;
      sigCell.replaceChildren(...signatureNodes(task));
    }
    const retries = isNum(task.max_retries) ? task.max_retries : 0;
    setText(retriesCell, String(retries));
    setText(backoffCell, retries > 0
      ? `${fmtSeconds(task.retry_backoff)}, up to ${fmtSeconds(task.retry_backoff_max)}` : '–');
    const retryOn = Array.isArray(task.retry_on) ? task.retry_on : [];
    setText(retryOnCell, retries > 0 ? (retryOn.length ? retryOn.join(', ') : 'any exception') : '–');
    setText(limitCell, isNum(task.timeout) ? fmtSeconds(task.timeout) : 'none');
    let periodic = '–';
    if (isNum(task.repeat_interval)) periodic = `every ${fmtSeconds(task.repeat_interval)}`;
    else if (task.cron) periodic = `cron ${task.cron}${task.cron_tz ? ` (${task.cron_tz})` : ''}`;
    setText(periodicCell, periodic);
  }

  function renderRegistered() {
    const table = $('registered-table');
    if (!table || !registered) return;
    const count = reconcileRows(table.tBodies[0], registeredRows, registered, (t) => t.name,
      createRegisteredRow, updateRegisteredRow);
    toggleEmpty('registered-empty', count === 0);
  }

  function createScheduleRow(schedule, key) {
    const row = rowWithCells(8, ['mono', 'mono', 'mono', '', '', 'num', 'num', '']);
    row.dataset.scheduleName = key;
    return row;
  }

  /** What each tick of a schedule runs: `task(args, key=value)`. */
  function scheduleCall(s) {
    const parts = (Array.isArray(s.args) ? s.args : []).map((a) => JSON.stringify(a));
    for (const [k, v] of Object.entries(s.kwargs || {})) parts.push(`${k}=${JSON.stringify(v)}`);
    return `${String(s.task || s.name)}(${parts.join(', ')})`;
  }

  function updateScheduleRow(row, s) {
    const [nameCell, callCell, specCell, nextCell, lastCell, runsCell, skippedCell, stateCell] =
      row.cells_;
    setText(nameCell, s.name);
    const call = scheduleCall(s);
    const source = s.source === 'runtime' ? 'run-time' : 'declared';
    const label = s.priority && s.priority !== 'normal' ? `${source} · ${s.priority}` : source;
    const shown = `${call}\u0000${label}\u0000${s.queue || ''}`;
    if (row.call_ !== shown) {
      row.call_ = shown;
      callCell.replaceChildren(
        el('div', null, truncate(call, 60)), ' ',
        el('div', { class: 'muted' }, s.queue ? `${label} · queue ${s.queue}` : label));
    }
    setAttr(callCell, 'title', call);
    setText(specCell, s.spec || '–');
    setText(nextCell, isNum(s.next_run) ? `${fmtClock(s.next_run)} · ${fmtRelative(s.next_run)}` : '–');
    setAttr(nextCell, 'title', isNum(s.next_run) ? fmtDateTime(s.next_run) : '');
    setText(lastCell, isNum(s.last_run) ? `${fmtClock(s.last_run)} · ${fmtRelative(s.last_run)}` : 'never');
    setAttr(lastCell, 'title', isNum(s.last_run) ? fmtDateTime(s.last_run) : '');
    setText(runsCell, fmtCount(s.times_run));
    setText(skippedCell, fmtCount(s.skipped));
    skippedCell.classList.toggle('is-warn', isNum(s.skipped) && s.skipped > 0);
    if (s.running) setBadge(stateCell, 'running', 'badge state state-running');
    else setBadge(stateCell, 'idle', 'badge state state-idle');
  }

  function renderSchedules() {
    const table = $('schedules-table');
    if (!table || !schedules) return;
    const ordered = schedules.slice().sort((a, b) =>
      (isNum(a.next_run) ? a.next_run : Infinity) - (isNum(b.next_run) ? b.next_run : Infinity) ||
      String(a.name).localeCompare(String(b.name)));
    const count = reconcileRows(table.tBodies[0], scheduleRows, ordered, (s) => s.name,
      createScheduleRow, updateScheduleRow);
    toggleEmpty('schedules-empty', count === 0);
  }

  // ---------------------------------------------------------------------------------------
  // Start
  // ---------------------------------------------------------------------------------------

  function loadAll() {
    return Promise.all([
      loadOverview(),
      loadWorkers(),
      loadQueues(),
      loadTasks(statusFilter),
      loadThroughput(),
      loadRegistered(),
      loadSchedules(),
      loadReplicas(),
    ]);
  }

  function resync() {
    loadAll();
    for (const handler of resyncHandlers) handler();
  }

  /** The lists the stream's events update (the others come with its first snapshot). */
  function catchUp() {
    loadTasks(statusFilter);
    for (const handler of resyncHandlers) handler();
  }

  function init() {
    applyTheme(effectiveTheme()); // now that the toggle button exists

    $('theme-toggle').addEventListener('click', toggleTheme);
    $('task-status-filter').value = statusFilter;
    $('task-status-filter').addEventListener('change', onFilterChange);
    $('tasks-table').tBodies[0].addEventListener('click', onTaskTableClick);
    $('queues-table').tBodies[0].addEventListener('click', onQueueTableClick);

    const dialog = $('task-detail');
    $('task-detail-close').addEventListener('click', closeDetail);
    dialog.addEventListener('close', afterDetailClosed);
    dialog.addEventListener('cancel', (event) => {
      event.preventDefault();
      closeDetail();
    });
    // A click on the backdrop (the dialog box itself, outside its content) closes it.
    let pressedOnBackdrop = false;
    dialog.addEventListener('mousedown', (event) => { pressedOnBackdrop = event.target === dialog; });
    dialog.addEventListener('click', (event) => {
      if (event.target === dialog && pressedOnBackdrop) closeDetail();
      pressedOnBackdrop = false;
    });
    document.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && detailId !== null) {
        event.preventDefault();
        closeDetail();
      }
    });

    const chart = $('throughput-chart');
    chart.addEventListener('pointermove', onChartPointer);
    chart.addEventListener('pointerleave', () => {
      chartHoverIndex = null;
      showChartHover(null);
    });
    if ('ResizeObserver' in window) {
      new ResizeObserver((entries) => {
        const width = Math.floor(entries[0].contentRect.width);
        if (width !== chartWidth) {
          chartWidth = width;
          markDirty('chart');
        }
      }).observe($('throughput-wrap'));
    } else {
      window.addEventListener('resize', () => markDirty('chart'));
    }

    window.setInterval(() => {
      if (!document.hidden) refreshCatalog();
    }, CATALOG_REFRESH_MS);
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) refreshCatalog();
    });
    window.addEventListener('pagehide', () => {
      unloading = true;
      if (source) source.close();
      source = null;
    });
    window.addEventListener('pageshow', (event) => {
      if (!event.persisted) return; // restored from the back/forward cache: start over
      unloading = false;
      setConnection('connecting');
      if (!source) connect(); // its open event resyncs everything
    });

    markDirty('chart', 'tasks'); // empty axes and the empty-state text right away
    connect();
    loadAll();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();

  // A handle for debugging from the console; nothing depends on it.
  window.fastworkerDashboard = { tasks, openDetail, closeDetail, states: TASK_STATES };
  // What failed.js builds on: the HTTP helpers, the stream, and the detail dialog.
  Object.assign(window.fastworkerDashboard, {
    el, getJSON, postAction, HttpError, warn, onStream, parseEventData,
    onResync: (handler) => resyncHandlers.push(handler),
    reloadDetail: () => { if (detailId !== null) loadDetail(); },
    detailId: () => detailId,
    fmt: { count: fmtCount, dateTime: fmtDateTime, relative: fmtRelative, isoTitle, shortId, truncate, errorLine },
  });
})();
