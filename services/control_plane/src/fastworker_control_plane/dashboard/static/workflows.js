/* FastWorker dashboard: the workflow view.
 *
 * Draws one workflow (GET /api/workflows/{id}, docs/http-api.md) as a graph: each step a
 * box coloured by its state, an edge from every step in its `after` to it. The layout is
 * layered: a step's column is one more than its deepest parent's, and within a column
 * steps sit in the order of their parents' rows (fewer crossings for chains and chords).
 * While the workflow runs it is read again every second; it stops once it is final.
 *
 * Reached by entering a workflow id, from a task whose id is "<workflow_id>.<i>" (the
 * task details offer it), or by the address's "#workflow=<id>". Data reaches the DOM only
 * through textContent and attributes, never as markup. No dependency.
 */
'use strict';

(() => {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const BOX_W = 168;
  const BOX_H = 44;
  const COL_GAP = 56;
  const ROW_GAP = 14;
  const MARGIN = 12;
  const POLL_MS = 1000;
  const MAX_DRAWN = 2000; // steps drawn; a larger workflow shows its first ones
  const HASH_PREFIX = '#workflow=';

  const $ = (id) => document.getElementById(id);

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function truncate(text, max) {
    const s = String(text ?? '');
    return s.length > max ? `${s.slice(0, max - 1)}…` : s;
  }

  /** Each step's column: 0 without parents, else one past its deepest parent's. */
  function columns(steps) {
    const column = new Array(steps.length).fill(-1);
    const visiting = new Set();
    const place = (start) => {
      // Iterative depth-first walk: a 1,000-step chain must not overflow the stack.
      const stack = [start];
      while (stack.length) {
        const i = stack[stack.length - 1];
        const parents = (steps[i].after || []).filter((p) => p >= 0 && p < steps.length);
        const open = parents.filter((p) => column[p] < 0 && !visiting.has(p));
        if (open.length && !visiting.has(i)) {
          visiting.add(i);
          stack.push(...open);
          continue;
        }
        stack.pop();
        visiting.delete(i);
        if (column[i] < 0) column[i] = parents.reduce((c, p) => Math.max(c, column[p] + 1), 0);
      }
    };
    steps.forEach((_, i) => { if (column[i] < 0) place(i); });
    return column;
  }

  /** Where each step's box goes: {x, y} by index, and the drawing's size. */
  function layout(steps) {
    const column = columns(steps);
    const byColumn = [];
    steps.forEach((_, i) => { (byColumn[column[i]] ||= []).push(i); });
    const row = new Array(steps.length).fill(0);
    for (const members of byColumn) {
      if (!members) continue;
      const key = (i) => {
        const parents = steps[i].after || [];
        if (!parents.length) return i;
        return parents.reduce((sum, p) => sum + row[p], 0) / parents.length;
      };
      members.sort((a, b) => key(a) - key(b) || a - b);
      members.forEach((i, r) => { row[i] = r; });
    }
    const tallest = Math.max(1, ...byColumn.map((m) => (m ? m.length : 0)));
    const height = MARGIN * 2 + tallest * BOX_H + (tallest - 1) * ROW_GAP;
    const place = steps.map((_, i) => {
      const members = byColumn[column[i]].length;
      const offset = (height - (members * BOX_H + (members - 1) * ROW_GAP)) / 2;
      return { x: MARGIN + column[i] * (BOX_W + COL_GAP), y: offset + row[i] * (BOX_H + ROW_GAP) };
    });
    const width = MARGIN * 2 + byColumn.length * BOX_W + (byColumn.length - 1) * COL_GAP;
    return { place, width, height };
  }

  function draw(workflow) {
    const all = Array.isArray(workflow.steps) ? workflow.steps : [];
    const steps = all.slice(0, MAX_DRAWN).map((s) => ({
      ...s,
      after: (s.after || []).filter((p) => p < MAX_DRAWN),
    }));
    const { place, width, height } = layout(steps);
    const graph = $('workflow-graph');
    graph.setAttribute('width', String(width));
    graph.setAttribute('height', String(height));
    graph.setAttribute('viewBox', `0 0 ${width} ${height}`);
    const defs = svg('defs');
    const marker = svg('marker', {
      id: 'wf-arrow', viewBox: '0 0 8 8', refX: 8, refY: 4,
      markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse',
    });
    marker.append(svg('path', { d: 'M0 0L8 4L0 8z', class: 'wf-arrow' }));
    defs.append(marker);
    const edges = svg('g', { class: 'wf-edges' });
    const boxes = svg('g', { class: 'wf-steps' });
    steps.forEach((step, i) => {
      const to = place[i];
      for (const p of step.after) {
        const from = place[p];
        const x1 = from.x + BOX_W;
        const y1 = from.y + BOX_H / 2;
        const x2 = to.x;
        const y2 = to.y + BOX_H / 2;
        const bend = (x2 - x1) / 2;
        edges.append(svg('path', {
          class: 'wf-edge',
          d: `M${x1} ${y1}C${x1 + bend} ${y1} ${x2 - bend} ${y2} ${x2} ${y2}`,
          'marker-end': 'url(#wf-arrow)',
          'data-from': p,
          'data-to': i,
        }));
      }
      const box = svg('g', {
        class: `wf-step wf-${step.state}`,
        transform: `translate(${to.x} ${to.y})`,
        'data-index': i,
        'data-state': step.state,
        'data-task-id': step.task_id,
        tabindex: 0,
        role: 'button',
        'aria-label': `step ${i}: ${step.name}, ${step.state}`,
      });
      box.append(
        svg('title', null, `${step.task_id}\n${step.name}: ${step.state}`),
        svg('rect', { width: BOX_W, height: BOX_H, rx: 6 }),
        svg('text', { x: 10, y: 18, class: 'wf-name' }, truncate(step.name, 22)),
        svg('text', { x: 10, y: 35, class: 'wf-state' }, `${i} · ${step.state}`),
      );
      boxes.append(box);
    });
    graph.replaceChildren(defs, edges, boxes);
    const state = $('workflow-state');
    state.textContent = workflow.state;
    state.className = `badge state wf-badge wf-${workflow.state}`;
    const counts = {};
    for (const s of all) counts[s.state] = (counts[s.state] || 0) + 1;
    const summary = Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(' · ');
    const cut = all.length > MAX_DRAWN ? ` (the first ${MAX_DRAWN} drawn)` : '';
    $('workflow-summary').textContent = `${all.length} steps: ${summary}${cut}`;
  }

  let shown = null; // the workflow id on view
  let timer = 0;
  let token = 0;

  function message(text) {
    $('workflow-message').textContent = text;
  }

  async function load() {
    const id = shown;
    const mine = ++token;
    window.clearTimeout(timer);
    let response;
    let body = null;
    try {
      response = await fetch(`/api/workflows/${encodeURIComponent(id)}`, {
        headers: { Accept: 'application/json' },
        cache: 'no-store',
      });
      body = await response.json().catch(() => null);
    } catch (err) {
      if (mine !== token) return;
      message(`Could not load the workflow: ${err && err.message ? err.message : err}`);
      timer = window.setTimeout(load, POLL_MS * 3);
      return;
    }
    if (mine !== token) return;
    if (!response.ok) {
      $('workflow-view').hidden = true;
      message(response.status === 404
        ? `No workflow ${id}: it is unknown, or ended and expired.`
        : (body && body.message) || `HTTP ${response.status}`);
      return;
    }
    message('');
    $('workflow-view').hidden = false;
    $('workflow-title').textContent = body.workflow_id;
    draw(body);
    if (body.state === 'running') timer = window.setTimeout(load, POLL_MS);
  }

  /** Show workflow `id` (a step's task id "<id>.<i>" is taken as its workflow's). */
  function show(id) {
    const text = String(id || '').trim();
    if (!text) return;
    shown = text;
    $('workflow-id').value = text;
    const panel = $('workflow-panel');
    if (window.location.hash !== HASH_PREFIX + encodeURIComponent(text)) {
      window.history.replaceState(null, '', HASH_PREFIX + encodeURIComponent(text));
    }
    load();
    if (panel.scrollIntoView) panel.scrollIntoView({ block: 'start' });
  }

  function fromHash() {
    const hash = window.location.hash;
    if (!hash.startsWith(HASH_PREFIX)) return;
    try {
      show(decodeURIComponent(hash.slice(HASH_PREFIX.length)));
    } catch {
      /* a malformed address: nothing to show */
    }
  }

  function init() {
    $('workflow-form').addEventListener('submit', (event) => {
      event.preventDefault();
      show($('workflow-id').value);
    });
    // A step's box opens its task's details (app.js owns the dialog).
    $('workflow-graph').addEventListener('click', (event) => {
      const box = event.target.closest && event.target.closest('.wf-step');
      const dashboard = window.fastworkerDashboard;
      if (box && dashboard && dashboard.openDetail) dashboard.openDetail(box.dataset.taskId, box);
    });
    $('workflow-graph').addEventListener('keydown', (event) => {
      if (event.key !== 'Enter' && event.key !== ' ') return;
      const box = event.target.closest && event.target.closest('.wf-step');
      const dashboard = window.fastworkerDashboard;
      if (!box || !dashboard || !dashboard.openDetail) return;
      event.preventDefault();
      dashboard.openDetail(box.dataset.taskId, box);
    });
    window.addEventListener('hashchange', fromHash);
    fromHash();
  }

  /** The workflow a task is a step of, by its id "<workflow_id>.<i>", else null. */
  function workflowOf(taskId) {
    const match = /^(.+)\.(\d+)$/.exec(String(taskId || ''));
    return match ? match[1] : null;
  }

  window.fastworkerWorkflows = { show, workflowOf, layout };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
