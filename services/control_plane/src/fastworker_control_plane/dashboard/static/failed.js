/* FastWorker dashboard: acting on tasks, and what operators did.
 *
 * - The Failed tasks panel: the dead-letter store (GET /api/failed, docs/http-api.md) with
 *   filters, a row's details (its traceback, arguments, what it retried), and retry or
 *   purge of the selected ones or of all that match (those two ask for a confirmation).
 * - The task details' actions (app.js calls taskActions): Cancel for a task not final,
 *   Retry for a failed task that is a dead letter.
 * - The Activity list: the operators' actions from the event stream (`event: actions`),
 *   whoever made them and through whichever door.
 *
 * Actions go through app.js's postAction (the action header; the token cookie goes along).
 * Data reaches the DOM only through textContent and attributes, never as markup.
 */
'use strict';

(() => {
  const dashboard = window.fastworkerDashboard;
  if (!dashboard) return; // app.js failed to load: nothing to attach to
  const { el, getJSON, postAction, HttpError, warn, fmt } = dashboard;
  const $ = (id) => document.getElementById(id);

  const FINAL_STATES = new Set(['success', 'failure', 'cancelled']);
  const LISTED = 200; // dead letters listed at once
  const MAX_ACTIVITY = 100; // actions the Activity list keeps
  const REFRESH_DELAY_MS = 400; // batch the refreshes a burst of failures asks for
  const MESSAGE_CHARS = 120;

  const ACTION_TEXT = {
    'task.cancel': 'cancelled task',
    'failed.retry': 'retried failed tasks',
    'failed.purge': 'purged failed tasks',
    'queue.pause': 'paused queue',
    'queue.resume': 'resumed queue',
    'queue.purge': 'purged queue',
    'limit.set': 'changed limit',
    'schedule.add': 'added schedule',
    'schedule.remove': 'removed schedule',
  };

  function say(id, text) {
    const node = $(id);
    if (node) node.textContent = text;
  }

  function failure(err) {
    return err && err.message ? err.message : String(err);
  }

  function timeCell(ts) {
    if (typeof ts !== 'number') return '–';
    return el('span', { title: fmt.isoTitle(ts) }, fmt.dateTime(ts));
  }

  // ---------------------------------------------------------------------------------------
  // The Failed tasks panel
  // ---------------------------------------------------------------------------------------

  let letters = []; // the dead letters listed, newest first
  let listing = null; // the last listing's counts
  const selected = new Set();
  let shownId = null; // the dead letter whose details are open
  let loadToken = 0;
  let refreshTimer = 0;
  let pendingConfirm = null; // the action waiting for its confirmation

  function filters() {
    const params = new URLSearchParams();
    const name = $('failed-task-name').value.trim();
    const errorType = $('failed-error-type').value.trim();
    const window_ = Number($('failed-since').value);
    if (name) params.set('task_name', name);
    if (errorType) params.set('error_type', errorType);
    if (window_ > 0) params.set('since', String(Date.now() / 1000 - window_));
    return params;
  }

  /** The filters as a retry or purge body selecting all that match. */
  function matchingBody() {
    const params = filters();
    const body = { all_matching: true };
    for (const key of ['task_name', 'error_type']) if (params.has(key)) body[key] = params.get(key);
    if (params.has('since')) body.since = Number(params.get('since'));
    return body;
  }

  async function loadFailed() {
    const token = ++loadToken;
    const params = filters();
    params.set('limit', String(LISTED));
    try {
      const document_ = await getJSON(`/api/failed?${params}`);
      if (token !== loadToken) return;
      letters = Array.isArray(document_.tasks) ? document_.tasks : [];
      listing = document_;
      const present = new Set(letters.map((d) => d.task_id));
      for (const id of Array.from(selected)) if (!present.has(id)) selected.delete(id);
      renderFailed();
    } catch (err) {
      if (token !== loadToken) return;
      warn('loading /api/failed failed', err);
      say('failed-message', `Could not list failed tasks: ${failure(err)}`);
    }
  }

  function refreshSoon() {
    if (refreshTimer) return;
    refreshTimer = window.setTimeout(() => {
      refreshTimer = 0;
      loadFailed();
    }, REFRESH_DELAY_MS);
  }

  function renderFailed() {
    const body = $('failed-table').tBodies[0];
    const rows = letters.map((d) => {
      const row = el('tr', { dataset: { taskId: d.task_id }, class: d.task_id === shownId ? 'is-selected' : '' });
      const box = el('input', { type: 'checkbox', class: 'failed-select', 'aria-label': `Select failed task ${d.task_id}` });
      box.checked = selected.has(d.task_id);
      const open = el('button', { type: 'button', class: 'link-button mono failed-open',
        'aria-label': `Show failed task ${d.task_id}`, title: d.task_id }, fmt.shortId(d.task_id));
      const error = d.error || {};
      row.append(
        el('td', { class: 'col-check' }, box),
        el('td', { class: 'mono' }, open),
        el('td', { class: 'mono' }, d.name),
        el('td', null, error.type || '–'),
        el('td', { class: 'col-error', title: error.message || '' }, fmt.truncate(error.message || '', MESSAGE_CHARS)),
        el('td', { class: 'num' }, fmt.count(d.attempts)),
        el('td', null, timeCell(d.failed_at)),
      );
      return row;
    });
    body.replaceChildren(...rows);
    $('failed-empty').hidden = letters.length > 0;
    const total = listing ? listing.total : 0;
    say('failed-count', listing
      ? `${fmt.count(total)} matching${listing.more ? `, newest ${letters.length} shown` : ''} · ${fmt.count(listing.stored)} stored`
      : '');
    renderSelection();
  }

  function renderSelection() {
    const all = $('failed-select-all');
    all.checked = letters.length > 0 && selected.size === letters.length;
    all.indeterminate = selected.size > 0 && selected.size < letters.length;
    $('failed-retry-selected').disabled = selected.size === 0;
    $('failed-purge').textContent = selected.size ? `Purge selected (${selected.size})` : 'Purge all matching';
    $('failed-retry-all').disabled = !listing || listing.total === 0;
    $('failed-purge').disabled = !listing || listing.total === 0;
  }

  function onTableChange(event) {
    const box = event.target.closest('input.failed-select');
    if (!box) return;
    const id = box.closest('tr').dataset.taskId;
    if (box.checked) selected.add(id);
    else selected.delete(id);
    renderSelection();
  }

  function onSelectAll(event) {
    selected.clear();
    if (event.target.checked) for (const d of letters) selected.add(d.task_id);
    for (const box of $('failed-table').querySelectorAll('input.failed-select')) box.checked = event.target.checked;
    renderSelection();
  }

  function onTableClick(event) {
    const button = event.target.closest('button.failed-open');
    if (button) showLetter(button.closest('tr').dataset.taskId);
  }

  // --- one dead letter's details ---------------------------------------------------------

  async function showLetter(taskId) {
    shownId = taskId;
    for (const row of $('failed-table').tBodies[0].rows) row.classList.toggle('is-selected', row.dataset.taskId === taskId);
    const box = $('failed-detail');
    box.hidden = false;
    box.replaceChildren(el('p', { class: 'muted loading' }, 'Loading…'));
    try {
      const letter = await getJSON(`/api/failed/${encodeURIComponent(taskId)}`);
      if (shownId === taskId) renderLetter(letter);
    } catch (err) {
      if (shownId !== taskId) return;
      const gone = err instanceof HttpError && err.status === 404;
      box.replaceChildren(el('p', { class: 'detail-message' }, gone
        ? `Task ${taskId} is no longer a dead letter (retried, purged or expired).`
        : `Could not load the failed task: ${failure(err)}`));
    }
  }

  function renderLetter(d) {
    const error = d.error || {};
    const retryOf = d.retry_of
      ? el('button', { type: 'button', class: 'link-button mono', 'aria-label': `Open task ${d.retry_of}, which this task retried` }, d.retry_of)
      : '–';
    if (d.retry_of) retryOf.addEventListener('click', () => dashboard.openDetail(d.retry_of, retryOf));
    const fields = [
      ['Task id', el('code', { class: 'mono selectable' }, d.task_id)],
      ['Task', el('code', { class: 'mono' }, d.name)],
      ['Queue', `${d.queue} · ${d.priority}`],
      ['Attempts', fmt.count(d.attempts)],
      ['Worker', d.worker_id ? el('code', { class: 'mono' }, d.worker_id) : '–'],
      ['Submitted', timeCell(d.submitted_at)],
      ['Failed', timeCell(d.failed_at)],
      ['Retry of', retryOf],
    ];
    const list = el('dl', { class: 'detail-grid' });
    for (const [label, value] of fields) list.append(el('dt', null, label), el('dd', null, value));

    const retry = el('button', { type: 'button', class: 'button button-small', 'aria-label': `Retry failed task ${d.task_id}` }, 'Retry');
    retry.addEventListener('click', () => retryIds([d.task_id], 'failed-detail-message'));
    const open = el('button', { type: 'button', class: 'button button-small', 'aria-label': `Open task ${d.task_id}` }, 'Open task');
    open.addEventListener('click', () => dashboard.openDetail(d.task_id, open));
    const close = el('button', { type: 'button', class: 'icon-button', 'aria-label': 'Close failed task details' }, '✕');
    close.addEventListener('click', hideLetter);

    $('failed-detail').replaceChildren(
      el('div', { class: 'detail-head' }, el('h3', null, `Failed task ${fmt.shortId(d.task_id)}`), close),
      list,
      el('div', { class: 'action-bar' }, retry, open,
        el('span', { class: 'panel-note', id: 'failed-detail-message', role: 'status', 'aria-live': 'polite' })),
      el('section', { class: 'detail-section' }, el('h4', null, 'Arguments'),
        el('div', { class: 'args-grid' },
          el('div', null, el('h4', null, 'args'), el('pre', { class: 'code', id: 'failed-args' }, JSON.stringify(d.args ?? [], null, 2))),
          el('div', null, el('h4', null, 'kwargs'), el('pre', { class: 'code', id: 'failed-kwargs' }, JSON.stringify(d.kwargs ?? {}, null, 2))))),
      el('section', { class: 'detail-section detail-error' }, el('h4', null, 'Error'),
        el('p', { class: 'error-headline' }, el('strong', null, error.type || 'Error'), error.message ? `: ${error.message}` : ''),
        el('pre', { class: 'code traceback', id: 'failed-traceback' }, error.traceback || 'No traceback recorded.')),
    );
  }

  function hideLetter() {
    shownId = null;
    $('failed-detail').hidden = true;
    for (const row of $('failed-table').tBodies[0].rows) row.classList.remove('is-selected');
  }

  // --- retry and purge -------------------------------------------------------------------

  function retriedText(reply) {
    const retried = reply.retried || [];
    const missing = reply.missing || [];
    let text = retried.length === 1
      ? `Retried as ${fmt.shortId(retried[0].new_task_id)}`
      : `Retried ${retried.length} tasks`;
    if (missing.length) text += `; ${missing.length} no longer failed`;
    if (reply.more) text += '; more match: retry again';
    return text;
  }

  async function act(path, body, messageId, describe) {
    try {
      const reply = await postAction(path, body);
      say(messageId, describe(reply));
      if (messageId !== 'failed-message') say('failed-message', describe(reply));
      return reply;
    } catch (err) {
      warn(`${path} failed`, err);
      say(messageId, `Failed: ${failure(err)}`);
      return null;
    } finally {
      loadFailed();
    }
  }

  async function retryIds(ids, messageId) {
    const reply = await act('/api/failed/retry', { task_ids: ids }, messageId, retriedText);
    if (!reply) return;
    for (const id of ids) selected.delete(id);
    if (shownId !== null && ids.includes(shownId)) hideLetter();
    dashboard.reloadDetail();
  }

  const purgedText = (reply) => `Purged ${fmt.count(reply.purged)} failed task${reply.purged === 1 ? '' : 's'}`;

  /** Ask before acting on everything matching: an inline bar, not window.confirm. */
  function askFirst(question, confirmLabel, run) {
    pendingConfirm = run;
    say('failed-confirm-text', question);
    $('failed-confirm-yes').textContent = confirmLabel;
    $('failed-confirm-yes').setAttribute('aria-label', confirmLabel);
    $('failed-confirm').hidden = false;
    $('failed-confirm-yes').focus();
  }

  function answerConfirm(yes) {
    const run = pendingConfirm;
    pendingConfirm = null;
    $('failed-confirm').hidden = true;
    if (yes && run) run();
  }

  function onRetryAll() {
    const count = listing ? listing.total : 0;
    askFirst(`Retry all ${fmt.count(count)} failed tasks matching these filters?`, 'Confirm retry all matching',
      () => act('/api/failed/retry', matchingBody(), 'failed-message', retriedText));
  }

  function onPurge() {
    if (selected.size) {
      const ids = Array.from(selected);
      askFirst(`Purge ${ids.length} selected failed task${ids.length === 1 ? '' : 's'}? They cannot be retried afterwards.`,
        'Confirm purge', async () => {
          if (await act('/api/failed/purge', { task_ids: ids }, 'failed-message', purgedText)) selected.clear();
        });
      return;
    }
    const count = listing ? listing.total : 0;
    askFirst(`Purge all ${fmt.count(count)} failed tasks matching these filters? They cannot be retried afterwards.`,
      'Confirm purge', () => act('/api/failed/purge', matchingBody(), 'failed-message', purgedText));
  }

  // ---------------------------------------------------------------------------------------
  // The task details' actions
  // ---------------------------------------------------------------------------------------

  const notes = new Map(); // task id -> what its last action said (the dialog re-renders)

  /** Say `make()` in `message`, and again whenever the dialog is drawn anew. */
  function note(id, message, make) {
    notes.set(id, make);
    if (notes.size > 50) notes.delete(notes.keys().next().value);
    message.replaceChildren(make());
  }

  /** Cancel (a task not final) and Retry (a failed task in the dead-letter store). */
  function taskActions(task) {
    const id = task.task_id;
    const message = el('span', { class: 'panel-note', id: 'task-action-message', role: 'status', 'aria-live': 'polite' });
    if (notes.has(id)) message.replaceChildren(notes.get(id)());
    const bar = el('div', { class: 'action-bar', id: 'task-actions' });
    if (!FINAL_STATES.has(task.status)) {
      const cancel = el('button', { type: 'button', class: 'button button-small button-danger', id: 'task-cancel',
        'aria-label': `Cancel task ${id}` }, 'Cancel task');
      cancel.addEventListener('click', async () => {
        cancel.disabled = true;
        try {
          const reply = await postAction(`/api/tasks/${encodeURIComponent(id)}/cancel`);
          const said = reply.changed ? 'Cancelled' : `Not cancelled: it is ${reply.status}`;
          note(id, message, () => said);
        } catch (err) {
          const said = `Cancel failed: ${failure(err)}`;
          note(id, message, () => said);
          cancel.disabled = false;
        }
        dashboard.reloadDetail();
      });
      bar.append(cancel);
    }
    if (task.status === 'failure') {
      const retry = el('button', { type: 'button', class: 'button button-small', id: 'task-retry',
        'aria-label': `Retry task ${id}`, hidden: true }, 'Retry');
      retry.addEventListener('click', async () => {
        retry.disabled = true;
        try {
          const reply = await postAction('/api/failed/retry', { task_ids: [id] });
          const again = (reply.retried || [])[0];
          note(id, message, () => (again ? openButton(again.new_task_id, 'Retried as ') : 'No longer a dead letter'));
        } catch (err) {
          const said = `Retry failed: ${failure(err)}`;
          note(id, message, () => said);
          retry.disabled = false;
        }
        loadFailed();
      });
      bar.append(retry);
      // Only a dead letter can be retried (a task whose failure was retried already is not).
      getJSON(`/api/failed/${encodeURIComponent(id)}`).then(() => { retry.hidden = false; }, () => {});
    }
    bar.append(message);
    return el('section', { class: 'detail-section' }, bar);
  }

  function openButton(taskId, prefix) {
    const button = el('button', { type: 'button', class: 'link-button mono', id: 'task-retried-as',
      'aria-label': `Open task ${taskId}` }, taskId);
    button.addEventListener('click', () => dashboard.openDetail(taskId, button));
    return el('span', null, prefix, button);
  }

  // ---------------------------------------------------------------------------------------
  // Activity: operators' actions from the stream
  // ---------------------------------------------------------------------------------------

  const activity = new Map(); // seq -> action, newest kept

  function addActions(list) {
    let failedChanged = false;
    for (const a of list) {
      if (!a || typeof a.seq !== 'number') continue;
      activity.set(a.seq, a);
      if (String(a.kind).startsWith('failed.')) failedChanged = true;
    }
    const seqs = Array.from(activity.keys()).sort((x, y) => x - y);
    for (const seq of seqs.slice(0, Math.max(0, seqs.length - MAX_ACTIVITY))) activity.delete(seq);
    renderActivity();
    if (failedChanged) refreshSoon();
  }

  function detailText(detail) {
    if (!detail || typeof detail !== 'object') return '';
    const parts = [];
    for (const [key, value] of Object.entries(detail)) {
      if (value === null || value === undefined || value === false) continue;
      parts.push(`${key} ${typeof value === 'object' ? JSON.stringify(value) : value}`);
    }
    return parts.join(', ');
  }

  function renderActivity() {
    const items = Array.from(activity.values()).sort((a, b) => b.seq - a.seq).map((a) => {
      const what = ACTION_TEXT[a.kind] || a.kind;
      const detail = detailText(a.detail);
      return el('li', { class: 'activity-item', dataset: { kind: a.kind, target: a.target || '', seq: a.seq } },
        el('span', { class: 'activity-time', title: fmt.isoTitle(a.at) }, fmt.dateTime(a.at)),
        el('span', { class: 'badge' }, a.source),
        el('span', { class: 'activity-what' }, what),
        a.target ? el('code', { class: 'mono' }, a.target) : null,
        detail ? el('span', { class: 'muted' }, detail) : null);
    });
    $('activity-list').replaceChildren(...items);
    $('activity-empty').hidden = items.length > 0;
  }

  async function loadActivity() {
    try {
      const list = await getJSON('/api/actions');
      if (Array.isArray(list)) addActions(list);
    } catch (err) {
      warn('loading /api/actions failed', err);
    }
  }

  function onActionsEvent(event) {
    const list = dashboard.parseEventData(event);
    if (Array.isArray(list)) addActions(list);
  }

  function onTasksEvent(event) {
    // A task that failed for good became a dead letter; a retried one started again.
    const transitions = dashboard.parseEventData(event);
    if (Array.isArray(transitions) && transitions.some((t) => t && t.kind === 'task.failure')) refreshSoon();
  }

  // ---------------------------------------------------------------------------------------

  function init() {
    $('failed-filters').addEventListener('submit', (event) => {
      event.preventDefault();
      selected.clear();
      loadFailed();
    });
    $('failed-since').addEventListener('change', () => loadFailed());
    const body = $('failed-table').tBodies[0];
    body.addEventListener('change', onTableChange);
    body.addEventListener('click', onTableClick);
    $('failed-select-all').addEventListener('change', onSelectAll);
    $('failed-retry-selected').addEventListener('click', () => retryIds(Array.from(selected), 'failed-message'));
    $('failed-retry-all').addEventListener('click', onRetryAll);
    $('failed-purge').addEventListener('click', onPurge);
    $('failed-confirm-yes').addEventListener('click', () => answerConfirm(true));
    $('failed-confirm-no').addEventListener('click', () => answerConfirm(false));
    dashboard.onStream('actions', onActionsEvent);
    dashboard.onStream('tasks', onTasksEvent);
    dashboard.onResync(() => {
      loadFailed();
      loadActivity();
    });
    loadFailed();
    loadActivity();
  }

  window.fastworkerOperations = { taskActions, reload: loadFailed };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
