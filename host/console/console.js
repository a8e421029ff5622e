// outboxd operator console. Plain JavaScript, no framework: every page is built with DOM
// calls and API text only ever becomes text nodes, so nothing the API returns can run as
// script, and the strict Content-Security-Policy of /console/ holds. The page has no privilege of its own:
// each read and action is an API request with the operator's token, checked by the API.
'use strict';

(function () {
  const TOKEN_KEY = 'outboxd.console.token';
  const SIGNED_OUT_KEY = 'outboxd.console.signed_out';
  const STATUSES = ['PENDING', 'PROCESSING', 'RETRY_WAIT', 'COMPLETED', 'REVIEW_REQUIRED', 'DISCARDED'];
  const READER_ROLES = ['ADMIN', 'HR', 'VIEWER'];
  const REFRESH_MS = 3000;
  const REASON_MIN = 10;
  const REASON_MAX = 300;

  const state = { token: null, me: null, timer: null, route: null, reviewGroup: null };

  // --- small DOM helpers -----------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === 'text') node.textContent = String(value);
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const $ = (id) => document.getElementById(id);

  // A time in the viewer's zone; the UTC value on hover (title) and in datetime.
  function timeEl(iso) {
    if (!iso) return el('span', { class: 'muted', text: '—' });
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return el('span', { text: iso });
    return el('time', { datetime: date.toISOString(), title: 'UTC: ' + date.toISOString() }, date.toLocaleString());
  }

  function duration(seconds) {
    let s = Math.max(0, Math.round(Number(seconds) || 0));
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (d) return d + 'd ' + h + 'h';
    if (h) return h + 'h ' + m + 'm';
    if (m) return m + 'm ' + s + 's';
    return s + 's';
  }

  function table(id, headers, rows, emptyText) {
    if (!rows.length) return el('p', { id: id, class: 'empty', 'data-empty': true, text: emptyText });
    return el('div', { class: 'table-wrap' },
      el('table', { id: id },
        el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col', class: h.num ? 'num' : null, text: h.label || h })))),
        el('tbody', {}, rows)));
  }

  // An Idempotency-Key without crypto.randomUUID, which plain-HTTP pages lack.
  function newKey() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return 'console-' + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  }

  // --- the API ---------------------------------------------------------------------------

  // Resolves {ok, status, data, message}; message is the API's error message, never a trace.
  async function api(method, path, body, headers) {
    const init = { method: method, headers: Object.assign({ Accept: 'application/json' }, headers || {}),
                   credentials: 'omit', cache: 'no-store', redirect: 'error' };
    if (state.token) init.headers.Authorization = 'Bearer ' + state.token;
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      return { ok: false, status: 0, data: null, message: 'the host did not answer' };
    }
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    const message = response.ok ? '' :
      (data && data.error && data.error.message) ? data.error.message : 'the host answered HTTP ' + response.status;
    const code = data && data.error && data.error.code ? data.error.code : '';
    return { ok: response.ok, status: response.status, data: data, message: message, code: code };
  }

  // A failed page read: an expired or revoked token goes back to the sign-in form.
  function failed(answer) {
    if (answer.status === 401) {
      signOut(answer.message);
      return true;
    }
    return false;
  }

  // --- sign-in ---------------------------------------------------------------------------

  async function signIn(token) {
    state.token = token;
    const answer = await api('GET', '/api/v1/admin/me');
    if (!answer.ok) {
      state.token = null;
      sessionStorage.removeItem(TOKEN_KEY);
      showSignIn(answer.message);
      return;
    }
    state.me = answer.data;
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.removeItem(SIGNED_OUT_KEY);
    $('token').value = '';
    $('who-sub').textContent = state.me.sub;
    $('who-role').textContent = state.me.role;
    $('who-company').textContent = state.me.company_id;
    $('who').hidden = false;
    $('nav').hidden = false;
    for (const link of document.querySelectorAll('#nav [data-reader]')) link.hidden = !isReader();
    for (const link of document.querySelectorAll('#nav [data-platform]')) link.hidden = !isPlatform();
    for (const link of document.querySelectorAll('#nav [data-admin]')) link.hidden = !isAdmin();
    $('signin').hidden = true;
    $('page').hidden = false;
    route();
  }

  function signOut(message) {
    stopRefresh();
    state.token = null;
    state.me = null;
    state.reviewGroup = null;
    sessionStorage.removeItem(TOKEN_KEY);
    if (!message) sessionStorage.setItem(SIGNED_OUT_KEY, '1');
    $('who').hidden = true;
    $('nav').hidden = true;
    $('page').replaceChildren();
    showSignIn(message || '');
  }

  function showSignIn(message) {
    $('page').hidden = true;
    $('signin').hidden = false;
    const error = $('signin-error');
    error.textContent = message || '';
    error.hidden = !message;
    $('token').focus();
  }

  const isReader = () => !!state.me && READER_ROLES.includes(state.me.role);
  const isAdmin = () => !!state.me && state.me.role === 'ADMIN';
  // admin.platform_roles is the host's list: /me says whether the caller's role is in it.
  const isPlatform = () => !!state.me && (state.me.platform_role === undefined ? !isReader() : !!state.me.platform_role);

  // --- routing ---------------------------------------------------------------------------

  function stopRefresh() {
    if (state.timer) clearInterval(state.timer);
    state.timer = null;
  }

  function route() {
    if (!state.me) return;
    stopRefresh();
    const hash = location.hash || '';
    let match;
    let name;
    if ((match = /^#\/event\/([0-9a-fA-F-]{36})$/.exec(hash))) {
      name = 'event';
      renderEvent(match[1].toLowerCase());
    } else if (hash === '#/review') {
      name = 'review';
      renderReview();
    } else if (hash === '#/replay') {
      name = 'replay';
      renderReplay();
    } else if (hash === '#/jobs') {
      name = 'jobs';
      renderJobs();
    } else if (hash === '#/fleet') {
      name = 'fleet';
      renderFleet();
    } else if (hash === '#/overview') {
      name = 'overview';
      renderOverview();
    } else {
      location.hash = isReader() || !isPlatform() ? '#/overview' : '#/fleet';
      return;
    }
    state.route = name;
    for (const link of document.querySelectorAll('#nav a')) {
      if (link.id === 'nav-' + name) link.setAttribute('aria-current', 'page');
      else link.removeAttribute('aria-current');
    }
    document.title = 'outboxd console — ' + name;
  }

  function page(id, title, ...children) {
    const section = el('div', { id: id, 'data-page': id }, el('h1', { text: title }), children);
    $('page').replaceChildren(section);
    return section;
  }

  function errorBox(id, message) {
    return el('p', { id: id, class: 'error', role: 'alert', text: message });
  }

  // --- Overview --------------------------------------------------------------------------

  function renderOverview() {
    const body = el('div', { id: 'overview-body' }, el('p', { class: 'muted', text: 'Loading…' }));
    page('page-overview', 'Overview', el('p', { class: 'hint' }, 'Events of company ', el('strong', { text: state.me.company_id }),
      '; refreshed every ' + REFRESH_MS / 1000 + ' seconds. ', el('span', { id: 'overview-updated' })), body);
    let loading = false;  // a slow answer is not overtaken by the next refresh
    const load = async () => {
      if (loading) return;
      loading = true;
      const answer = await api('GET', '/api/v1/admin/overview');
      loading = false;
      if (state.route !== 'overview' || !document.contains(body)) return;
      if (!answer.ok) {
        if (failed(answer)) return;
        body.replaceChildren(errorBox('overview-error', answer.message));
        return;
      }
      body.replaceChildren(...overviewContent(answer.data));
      $('overview-updated').replaceChildren('Updated ', timeEl(answer.data.generated_at), '.');
    };
    load();
    state.timer = setInterval(load, REFRESH_MS);
  }

  function overviewContent(data) {
    const counts = data.counts || {};
    const cards = el('div', { class: 'counts', id: 'status-counts' }, STATUSES.map((status) =>
      el('div', { class: 'count status-' + status },
        el('span', { class: 'label', id: 'label-' + status, text: status }),
        el('span', { class: 'num', 'data-status': status, 'aria-labelledby': 'label-' + status, text: String(counts[status] || 0) }))));

    const byType = new Map();
    for (const row of data.by_event_type || []) {
      if (!byType.has(row.event_type)) byType.set(row.event_type, {});
      byType.get(row.event_type)[row.status] = row.count;
    }
    const typeRows = Array.from(byType.keys()).sort().map((type) =>
      el('tr', { 'data-event-type': type }, el('td', { text: type }),
        STATUSES.map((status) => el('td', { class: 'num', 'data-status': status, text: String(byType.get(type)[status] || 0) }))));

    const oldestRows = (data.oldest_unfinished || []).map((row) =>
      el('tr', { 'data-handler': row.handler }, el('td', { text: row.handler }),
        el('td', { class: 'num', title: row.oldest_seconds + ' s', text: duration(row.oldest_seconds) })));

    const headRows = (data.blocking_heads || []).map((h) =>
      el('tr', { 'data-blocking-head': h.event_id },
        el('td', {}, el('a', { href: '#/event/' + h.event_id, class: 'mono', text: h.event_id })),
        el('td', { text: h.event_type }), el('td', { text: h.status }),
        el('td', { class: 'num', text: String(h.successors) })));

    return [
      el('h2', { text: 'Events by status' }), cards,
      el('h2', { text: 'Blocking heads no handler supports' }),
      el('p', { class: 'hint', text: 'No loaded handler supports these events\' types, so the later events of their aggregates wait; discard one to release them.' }),
      table('blocking-heads', [{ label: 'Event' }, { label: 'Event type' }, { label: 'Status' }, { label: 'Successors waiting', num: true }],
        headRows, 'No aggregate is blocked by an event nobody handles.'),
      el('h2', { text: 'Completed and failed per minute, last hour' }), sparkline(data.per_minute || []),
      el('h2', { text: 'By event type' }),
      table('by-event-type', [{ label: 'Event type' }].concat(STATUSES.map((s) => ({ label: s, num: true }))), typeRows,
        'No events yet.'),
      el('h2', { text: 'Oldest unfinished event per handler' }),
      table('oldest-unfinished', [{ label: 'Handler' }, { label: 'Waiting for', num: true }], oldestRows,
        'Nothing is waiting: every handler is caught up.'),
    ];
  }

  function sparkline(points) {
    const NS = 'http://www.w3.org/2000/svg';
    const width = 600;
    const height = 90;
    const pad = 4;
    const max = Math.max(1, ...points.map((p) => Math.max(p.completed || 0, p.failed || 0)));
    const svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('id', 'sparkline');
    svg.setAttribute('viewBox', '0 0 ' + width + ' ' + height);
    svg.setAttribute('width', String(width));
    svg.setAttribute('height', String(height));
    svg.setAttribute('role', 'img');
    let completed = 0;
    let failedTotal = 0;
    for (const p of points) { completed += p.completed || 0; failedTotal += p.failed || 0; }
    svg.setAttribute('aria-label', completed + ' completed and ' + failedTotal + ' failed in the last hour');
    const title = document.createElementNS(NS, 'title');
    title.textContent = svg.getAttribute('aria-label');
    svg.append(title);
    for (const series of ['completed', 'failed']) {
      const line = document.createElementNS(NS, 'polyline');
      const step = points.length > 1 ? (width - 2 * pad) / (points.length - 1) : 0;
      line.setAttribute('points', points.map((p, i) =>
        (pad + i * step).toFixed(1) + ',' + (height - pad - ((p[series] || 0) / max) * (height - 2 * pad)).toFixed(1)).join(' '));
      line.setAttribute('fill', 'none');
      line.setAttribute('stroke-width', '2');
      line.setAttribute('class', series);
      line.setAttribute('data-series', series);
      svg.append(line);
    }
    return el('div', { class: 'spark' }, svg,
      el('p', {}, el('span', { class: 'legend-completed', id: 'spark-completed', text: completed + ' completed' }), ' · ',
        el('span', { class: 'legend-failed', id: 'spark-failed', text: failedTotal + ' failed' }),
        el('br'), el('span', { class: 'hint', text: 'peak ' + max + ' per minute' })));
  }

  // --- Needs review ----------------------------------------------------------------------

  function renderReview() {
    const groups = el('div', { id: 'review-groups-box' }, el('p', { class: 'muted', text: 'Loading…' }));
    const detail = el('div', { id: 'group-detail' });
    page('page-review', 'Needs review',
      el('p', { class: 'hint', text: 'REVIEW_REQUIRED events grouped by event type and error code. Payloads are never shown.' }),
      groups, detail);
    loadGroups(groups, detail);
  }

  async function loadGroups(box, detail) {
    const answer = await api('GET', '/api/v1/admin/review-groups');
    if (!answer.ok) {
      if (failed(answer)) return;
      box.replaceChildren(errorBox('review-error', answer.message));
      return;
    }
    const rows = (answer.data.groups || []).map((g) => {
      const show = el('button', { type: 'button', class: 'secondary', 'data-action': 'show-group',
        'aria-label': 'Show events of ' + g.event_type + ' ' + g.last_error_code, text: 'Show events' });
      const key = g.event_type + '\n' + (g.last_error_code || '');
      const row = el('tr', { 'data-event-type': g.event_type, 'data-error-code': g.last_error_code || '',
                             class: state.reviewGroup === key ? 'selected' : null },
        el('td', { text: g.event_type }), el('td', { class: 'mono', text: g.last_error_code || '—' }),
        el('td', { class: 'num', 'data-field': 'count', text: String(g.count) }),
        el('td', {}, timeEl(g.oldest)), el('td', {}, timeEl(g.newest)), el('td', {}, show));
      show.addEventListener('click', () => {
        for (const other of box.querySelectorAll('tr.selected')) other.classList.remove('selected');
        row.classList.add('selected');
        state.reviewGroup = key;
        showGroup(g, detail, () => loadGroups(box, detail));
      });
      return row;
    });
    box.replaceChildren(table('review-groups',
      ['Event type', 'Error code', { label: 'Events', num: true }, 'Oldest', 'Newest', ''], rows,
      'Nothing needs review.'));
  }

  // The reason every action needs: 10 to 300 characters, checked here and by the API.
  function reasonField(prefix) {
    const input = el('textarea', { id: prefix + '-reason', name: 'reason', maxlength: String(REASON_MAX * 2),
      'aria-describedby': prefix + '-reason-hint' });
    return {
      node: el('div', {}, el('label', { for: prefix + '-reason', text: 'Reason (required)' }), input,
        el('p', { class: 'hint', id: prefix + '-reason-hint',
          text: REASON_MIN + ' to ' + REASON_MAX + ' characters; recorded with the action. No personal data.' })),
      input: input,
      check() {
        const length = Array.from(input.value.trim()).length;
        if (length < REASON_MIN || length > REASON_MAX) {
          return 'The reason must be ' + REASON_MIN + ' to ' + REASON_MAX + ' characters (it has ' + length + ').';
        }
        return null;
      },
    };
  }

  // A labelled form control with an optional hint (`<id>-hint`).
  function formField(id, label, input, hint) {
    return el('div', {}, el('label', { for: id, text: label }), input,
      hint ? el('p', { class: 'hint', id: id + '-hint', text: hint }) : null);
  }

  // A job page (replay, jobs): its intro, fields and reason, the count button, the form's
  // error, the confirmation box and the result, with ids `<prefix>-form`, `-count`, `-error`,
  // `-confirm-box` and `-result`. showError(problem) shows or clears the form's error and
  // says whether there was none.
  function jobPage(prefix, title, intro, fields, reason) {
    const formError = el('p', { id: prefix + '-error', class: 'error', role: 'alert', hidden: true });
    const count = el('button', { type: 'button', id: prefix + '-count', text: 'Count events' });
    const confirmBox = el('div', { id: prefix + '-confirm-box' });
    const result = el('div', { id: prefix + '-result', 'aria-live': 'polite' });
    page('page-' + prefix, title, el('p', { class: 'hint', text: intro }),
      el('div', { id: prefix + '-form' }, ...fields, reason.node), count, formError, confirmBox, result);
    const showError = (problem) => {
      formError.textContent = problem || '';
      formError.hidden = !problem;
      return !problem;
    };
    return { count, confirmBox, result, showError };
  }

  function showAnswer(box, answer, success) {
    if (answer.ok) {
      box.replaceChildren(el('p', { class: 'ok answer', 'data-outcome': 'ok', text: success(answer.data) }));
    } else {
      box.replaceChildren(el('p', { class: 'error answer', role: 'alert', 'data-outcome': 'error',
        text: (answer.code ? answer.code + ': ' : '') + answer.message }));
    }
  }

  // A group's events and, for ADMIN, the actions on them. After an action both the groups
  // and this list are read again; the action's answer stays shown.
  function showGroup(group, detail, reloadGroups) {
    const admin = isAdmin();
    const eventsBox = el('div', { id: 'group-events-box' }, el('p', { class: 'muted', text: 'Loading…' }));
    const result = el('div', { id: 'action-result', 'aria-live': 'polite' });
    const reason = reasonField('action');
    const reasonError = el('p', { id: 'action-error', class: 'error', role: 'alert', hidden: true });
    const checkReason = () => {
      const problem = reason.check();
      reasonError.textContent = problem || '';
      reasonError.hidden = !problem;
      return !problem;
    };
    reason.input.addEventListener('input', () => { reasonError.hidden = true; });
    const confirmBox = el('div', { id: 'discard-confirm-box' });
    const refresh = () => {
      reloadGroups();
      loadGroupEvents();
    };

    const loadGroupEvents = async () => {
      const params = new URLSearchParams({ status: 'REVIEW_REQUIRED', event_type: group.event_type, limit: '100' });
      if (group.last_error_code) params.set('last_error_code', group.last_error_code);
      const answer = await api('GET', '/api/v1/admin/outbox-events?' + params.toString());
      if (!answer.ok) {
        if (failed(answer)) return;
        eventsBox.replaceChildren(errorBox('group-error', answer.message));
        return;
      }
      // Filtered here too, so a group never shows another group's events.
      const events = (answer.data.events || []).filter((e) => (e.last_error_code || '') === (group.last_error_code || ''));
      const rows = events.map((e) => {
        const cells = [];
        if (admin) {
          cells.push(el('td', {}, el('input', { type: 'checkbox', class: 'select-event', value: e.event_id,
            id: 'select-' + e.event_id, 'aria-label': 'Select event ' + e.event_id })));
        }
        cells.push(el('td', { class: 'mono' }, el('a', { href: '#/event/' + e.event_id, text: e.event_id })),
          el('td', { text: e.status }), el('td', { class: 'num', text: String(e.attempt_count) }),
          el('td', {}, timeEl(e.occurred_at)), el('td', {}, timeEl(e.updated_at)));
        if (admin) {
          const discard = el('button', { type: 'button', class: 'danger', 'data-action': 'discard',
            'aria-label': 'Discard event ' + e.event_id, text: 'Discard' });
          discard.addEventListener('click', () => {
            if (!checkReason()) return;
            askDiscard(e, reason, confirmBox, result, refresh);
          });
          cells.push(el('td', {}, discard));
        }
        return el('tr', { 'data-event-id': e.event_id }, cells);
      });
      const headers = (admin ? [''] : []).concat(['Event', 'Status', { label: 'Attempts', num: true }, 'Occurred', 'Updated'])
        .concat(admin ? [''] : []);
      eventsBox.replaceChildren(table('group-events', headers, rows, 'No event of this group needs review any more.'),
        answer.data.next_cursor ? el('p', { class: 'hint', text: 'Showing the newest 100 events of this group.' }) : '');
    };

    const parts = [
      el('h2', { id: 'group-title' }, 'Events of ', el('code', { text: group.event_type }), ' with ',
        el('code', { text: group.last_error_code || '(no code)' })),
      eventsBox,
    ];
    if (admin) {
      const redriveGroup = el('button', { type: 'button', id: 'redrive-group', text: 'Re-drive the whole group' });
      const redriveSelected = el('button', { type: 'button', id: 'redrive-selected', class: 'secondary', text: 'Re-drive selected events' });
      redriveGroup.addEventListener('click', async () => {
        if (!checkReason()) return;
        // A group can take several requests: a second click meanwhile would start a second pass.
        redriveGroup.disabled = true;
        try {
          await redriveGroupEvents(group, reason, confirmBox, result, refresh);
        } finally {
          redriveGroup.disabled = false;
        }
      });
      redriveSelected.addEventListener('click', () => {
        if (!checkReason()) return;
        const ids = Array.from(eventsBox.querySelectorAll('input.select-event:checked'), (box) => box.value);
        if (!ids.length) {
          reasonError.textContent = 'Select at least one event first.';
          reasonError.hidden = false;
          return;
        }
        redrive({ event_ids: ids }, reason, result, refresh);
      });
      parts.push(el('div', { class: 'actions card', id: 'review-actions' }, reason.node, reasonError,
        el('div', { class: 'row' }, redriveGroup, redriveSelected), confirmBox, result));
    }
    detail.replaceChildren(...parts);
    loadGroupEvents();
  }

  async function redrive(filter, reason, result, reloadGroups) {
    result.replaceChildren(el('p', { class: 'muted', text: 'Sending…' }));
    const answer = await api('POST', '/api/v1/admin/outbox-events/retry',
      { filter: filter, reason: reason.input.value.trim() }, { 'Idempotency-Key': newKey() });
    if (failed(answer)) return;
    showAnswer(result, answer, (d) => 'Re-driven: ' + d.count + ' event(s) are PENDING again.');
    if (answer.ok) reloadGroups();
  }

  // A whole group is re-driven by an operator job (POST /api/v1/admin/operations): a dry run
  // first shows how many events it takes, the confirmation starts the job, and its progress
  // is read until it is over. Any size: the hosts work it in batches.
  async function redriveGroupEvents(group, reason, confirmBox, result, reloadGroups) {
    // A group without a code asks for exactly that; the API refuses a null code.
    const filter = group.last_error_code
      ? { event_type: group.event_type, last_error_code: group.last_error_code, status: 'REVIEW_REQUIRED' }
      : { event_type: group.event_type, no_error_code: true, status: 'REVIEW_REQUIRED' };
    const body = { action: 'redrive', filter: filter, reason: reason.input.value.trim(), dry_run: true };
    await previewJob(body, result, confirmBox, 'redrive-group', 'Re-drive',
      (count) => count + ' event(s) of this group match now. Re-drive them all?',
      () => runRedriveJob(Object.assign({}, body, { dry_run: false }), result, reloadGroups));
  }

  // A job's dry run, then a confirmation that names its count (ids `<prefix>-preview`,
  // `-confirm`, `-cancel`); `start` runs the job once confirmed.
  async function previewJob(body, result, confirmBox, prefix, verb, question, start) {
    result.replaceChildren(el('p', { class: 'muted', text: 'Counting…' }));
    const preview = await api('POST', '/api/v1/admin/operations', body);
    if (failed(preview)) return;
    if (!preview.ok) {
      showAnswer(result, preview, () => '');
      return;
    }
    result.replaceChildren();
    const count = preview.data.count;
    const yes = el('button', { type: 'button', id: prefix + '-confirm', text: verb + ' ' + count + ' event(s)' });
    const no = el('button', { type: 'button', class: 'secondary', id: prefix + '-cancel', text: 'Cancel' });
    no.addEventListener('click', () => confirmBox.replaceChildren());
    yes.addEventListener('click', async () => {
      confirmBox.replaceChildren();
      await start();
    });
    confirmBox.replaceChildren(el('div', { class: 'confirm', id: prefix + '-preview', role: 'group' },
      el('p', { 'data-field': 'count', text: question(count) }),
      el('div', { class: 'row' }, yes, no)));
  }

  async function runRedriveJob(body, result, reloadGroups) {
    const over = await runJob(body, result, {
      running: 'Re-driving…',
      done: (x) => 'Re-driven: ' + x.done + ' event(s) are PENDING again.',
      stopped: (x) => x.done + ' event(s) were re-driven before it stopped.',
    });
    if (over) reloadGroups();
  }

  // Starts an operator job and reads its progress every 300 ms until it is over; `words`
  // says what it does (running text, done and stopped answers). True once the job is over.
  async function runJob(body, result, words) {
    result.replaceChildren(el('p', { class: 'muted', text: 'Starting…' }));
    const started = await api('POST', '/api/v1/admin/operations', body, { 'Idempotency-Key': newKey() });
    if (failed(started)) return false;
    if (!started.ok) {
      showAnswer(result, started, () => '');
      return false;
    }
    const path = '/api/v1/admin/operations/' + encodeURIComponent(started.data.operation_id);
    const progress = el('p', { id: 'operation-progress', class: 'muted', 'aria-live': 'polite', text: words.running });
    result.replaceChildren(progress);
    for (;;) {
      const job = await api('GET', path);
      if (failed(job)) return false;
      if (!job.ok) {
        showAnswer(result, job, () => '');
        return false;
      }
      const d = job.data;
      progress.textContent = words.running + ' ' + d.done + ' of ' + d.total + ' done' + (d.failed ? ', ' + d.failed + ' failed' : '') +
        ' (job ' + started.data.operation_id + ').';
      if (d.state !== 'running') {
        const ok = d.state === 'done';
        showAnswer(result, ok ? { ok: true, data: d } : { ok: false, code: 'OPERATION_' + d.state.toUpperCase(), message: words.stopped(d) },
          (x) => words.done(x) + (x.failed ? ' ' + x.failed + ' changed meanwhile and were left as they are.' : ''));
        return true;
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  }

  function askDiscard(event, reason, confirmBox, result, reloadGroups) {
    const yes = el('button', { type: 'button', class: 'danger', id: 'discard-confirm', text: 'Discard it' });
    const no = el('button', { type: 'button', class: 'secondary', id: 'discard-cancel', text: 'Cancel' });
    no.addEventListener('click', () => confirmBox.replaceChildren());
    yes.addEventListener('click', async () => {
      confirmBox.replaceChildren();
      result.replaceChildren(el('p', { class: 'muted', text: 'Sending…' }));
      const answer = await api('POST', '/api/v1/admin/outbox-events/' + event.event_id + '/discard',
        { expected_version: event.version, reason: reason.input.value.trim() }, { 'Idempotency-Key': newKey() });
      if (failed(answer)) return;
      showAnswer(result, answer, (d) => 'Event ' + d.event_id + ' is ' + d.status + ' (version ' + d.version + ').');
      if (answer.ok) reloadGroups();
    });
    confirmBox.replaceChildren(el('div', { class: 'confirm', role: 'alertdialog', 'aria-labelledby': 'discard-question' },
      el('p', { id: 'discard-question' }, 'Discard event ', el('code', { text: event.event_id }),
        '? It will never be delivered. This cannot be undone.'),
      el('div', { class: 'row' }, yes, no)));
    yes.focus();
  }

  // --- Event -----------------------------------------------------------------------------

  async function renderEvent(id) {
    const body = el('div', { id: 'event-body' }, el('p', { class: 'muted', text: 'Loading…' }));
    page('page-event', 'Event', el('p', { class: 'mono', id: 'event-id', text: id }), body);
    const [event, history] = await Promise.all([
      api('GET', '/api/v1/admin/outbox-events/' + id),
      api('GET', '/api/v1/admin/outbox-events/' + id + '/history'),
    ]);
    // After the two above: a company has two API database connections by default
    // (admin.db_connections_per_company), and a third request at once would be refused (503).
    const attempts = event.ok ? await api('GET', '/api/v1/admin/outbox-events/' + id + '/attempts') : null;
    if (state.route !== 'event' || !document.contains(body)) return;
    if (!event.ok) {
      if (failed(event)) return;
      body.replaceChildren(errorBox('event-error', event.message));
      return;
    }
    const e = event.data;
    const fields = [['Status', e.status], ['Event type', e.event_type], ['Company', e.company_id],
      ['Aggregate key', e.aggregate_key], ['Attempts', e.attempt_count], ['Last error code', e.last_error_code],
      ['Version', e.version], ['Occurred', timeEl(e.occurred_at)], ['Deliver after', timeEl(e.deliver_after)],
      ['Updated', timeEl(e.updated_at)],
      ['Next attempt', timeEl(e.next_attempt_at)], ['Finished', timeEl(e.completed_at)],
      // Company roles get no lease_owner (the platform's host name): no row rather than '—'.
      ...('lease_owner' in e ? [['Lease owner', e.lease_owner]] : []), ['Lease expires', timeEl(e.lease_expires_at)],
      ['Blocked by', e.blocked_by ? el('a', { href: '#/event/' + e.blocked_by, id: 'blocked-by', class: 'mono', text: e.blocked_by })
        : el('span', { id: 'blocked-by', class: 'muted', text: 'nothing' })]];
    const dl = el('dl', { class: 'fields', id: 'event-fields' }, fields.map(([name, value]) => [
      el('dt', { text: name }),
      el('dd', { 'data-field': name.toLowerCase().replace(/ /g, '_') },
        value instanceof Node ? value : (value === null || value === undefined || value === '' ? '—' : String(value)))]));

    const parts = [el('div', { class: 'card' }, dl)];
    if (!history.ok) {
      parts.push(el('h2', { text: 'Consuming handlers' }),
        table('consumed-by', ['Handler'], (e.consumed_by || []).map((h) => el('tr', { 'data-handler': h }, el('td', { text: h }))),
          'No handler has consumed this event yet.'),
        errorBox('history-error', history.message));
    } else {
      const h = history.data;
      parts.push(el('h2', { text: 'Consuming handlers' }),
        table('consumed-by', ['Handler', 'Consumed'], (h.consumed_by || []).map((c) =>
          el('tr', { 'data-handler': c.handler }, el('td', { text: c.handler }), el('td', {}, timeEl(c.consumed_at)))),
          'No handler has consumed this event yet.'),
        el('h2', { text: 'Manual actions' }),
        table('action-history', ['Action', 'Actor', 'Reason', 'When', 'Details'], (h.actions || []).map((a) => {
          const details = Object.entries(a).filter(([k]) => !['action', 'actor', 'reason', 'at'].includes(k))
            .map(([k, v]) => k + ': ' + (v === null ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v))).join(', ');
          return el('tr', { 'data-action': a.action }, el('td', { text: a.action }), el('td', { text: a.actor }),
            el('td', { text: a.reason }), el('td', {}, timeEl(a.at)), el('td', { class: 'mono', text: details || '—' }));
        }), 'No manual action was taken on this event.'));
    }
    // Every handler call of every attempt (outbox_attempt), oldest first.
    parts.push(el('h2', { text: 'Attempts' }));
    if (!attempts.ok) {
      parts.push(errorBox('attempts-error', attempts.message));
    } else {
      parts.push(table('attempts', ['Attempt', 'Handler', 'Outcome', 'Error code', 'Started', 'Ended', 'Retry after'],
        (attempts.data.attempts || []).map((a) => el('tr', { 'data-attempt': String(a.attempt), 'data-outcome': a.outcome },
          el('td', { text: String(a.attempt) }), el('td', { text: a.handler || '—' }), el('td', { text: a.outcome }),
          el('td', { class: 'mono', text: a.error_code || '—' }), el('td', {}, timeEl(a.started_at)),
          el('td', {}, timeEl(a.ended_at)), el('td', {}, timeEl(a.retry_after)))),
        'No attempt on record (not run yet, older than the retention, or attempt history is off).'));
    }
    body.replaceChildren(...parts);
  }

  // --- Replay ----------------------------------------------------------------------------

  // Finished events run again by one handler (an operator job with action "replay"): a dry
  // run counts them first, the confirmation starts the job, and its progress is read until
  // it is over. The hosts pace it by how fast the handler finishes the events.
  function renderReplay() {
    if (!isAdmin()) {
      page('page-replay', 'Replay', el('p', { id: 'replay-not-admin', class: 'hint', text: 'Only an ADMIN of a company can replay events.' }));
      return;
    }
    const handler = el('input', { id: 'replay-handler', name: 'handler', type: 'text', spellcheck: 'false',
      'aria-describedby': 'replay-handler-hint' });
    const eventType = el('input', { id: 'replay-event-type', name: 'event_type', type: 'text', spellcheck: 'false' });
    const status = el('select', { id: 'replay-status', name: 'status' },
      el('option', { value: '', text: 'COMPLETED and DISCARDED' }),
      el('option', { value: 'COMPLETED', text: 'COMPLETED' }), el('option', { value: 'DISCARDED', text: 'DISCARDED' }));
    const after = el('input', { id: 'replay-after', name: 'occurred_after', type: 'datetime-local',
      'aria-describedby': 'replay-after-hint' });
    const reason = reasonField('replay');
    const { count, confirmBox, result, showError } = jobPage('replay', 'Replay',
      'Run COMPLETED or DISCARDED events of company ' + state.me.company_id +
        ' again for one handler only, after a fix or to backfill a handler added later. The handler is told it is a replay; ' +
        'the other handlers of the events are not called.',
      [formField('replay-handler', 'Handler (required)', handler, 'Its name as the fleet lists it, e.g. mission-log-forwarding.'),
        formField('replay-event-type', 'Event type (required)', eventType),
        formField('replay-status', 'Status', status),
        formField('replay-after', 'Occurred at or after (optional)', after, 'In your time zone.')],
      reason);
    for (const input of [handler, eventType, reason.input]) input.addEventListener('input', () => showError(null));
    count.addEventListener('click', async () => {
      confirmBox.replaceChildren();
      const problem = !handler.value.trim() ? 'Name the handler to run again.'
        : !eventType.value.trim() ? 'Name the event type.' : reason.check();
      if (!showError(problem)) return;
      const filter = { event_type: eventType.value.trim() };
      if (status.value) filter.status = status.value;
      if (after.value) filter.occurred_after = new Date(after.value).toISOString();
      const body = { action: 'replay', handler: handler.value.trim(), filter: filter,
        reason: reason.input.value.trim(), dry_run: true };
      await previewJob(body, result, confirmBox, 'replay', 'Replay',
        (count) => count + ' event(s) match now. Run them again for ' + body.handler + '?',
        () => runJob(Object.assign({}, body, { dry_run: false }), result, {
          running: 'Replaying…',
          done: (x) => 'Replayed: ' + x.done + ' event(s) are PENDING for ' + body.handler + ' again.',
          stopped: (x) => x.done + ' event(s) were replayed before it stopped.',
        }));
    });
  }

  // --- Jobs: re-drive, discard or cancel over any filter ---------------------------------

  // The statuses each action takes (POST /api/v1/admin/operations); the first is the default.
  const JOB_ACTIONS = {
    redrive: { verb: 'Re-drive', statuses: ['REVIEW_REQUIRED'], done: 'are PENDING again', running: 'Re-driving…' },
    discard: { verb: 'Discard', statuses: ['REVIEW_REQUIRED', 'PENDING', 'RETRY_WAIT'], done: 'are DISCARDED', running: 'Discarding…' },
    cancel: { verb: 'Cancel', statuses: ['PENDING', 'RETRY_WAIT'], done: 'are DISCARDED', running: 'Cancelling…' },
  };

  // Any filter the API takes, a dry run that counts first, the confirmation, then the job's
  // progress until it is over (`outboxd operations cancel ID` or the API stops it).
  function renderJobs() {
    if (!isAdmin()) {
      page('page-jobs', 'Jobs', el('p', { id: 'jobs-not-admin', class: 'hint', text: 'Only an ADMIN of a company can start jobs.' }));
      return;
    }
    const text = (id, name) => el('input', { id: id, name: name, type: 'text', spellcheck: 'false' });
    const action = el('select', { id: 'jobs-action', name: 'action' },
      Object.entries(JOB_ACTIONS).map(([value, a]) => el('option', { value: value, text: a.verb })));
    const status = el('select', { id: 'jobs-status', name: 'status' });
    const fillStatuses = () => {
      const statuses = JOB_ACTIONS[action.value].statuses;
      status.replaceChildren(el('option', { value: '', text: statuses.length > 1 ? 'any of ' + statuses.join(', ') : statuses[0] }),
        ...(statuses.length > 1 ? statuses.map((x) => el('option', { value: x, text: x })) : []));
    };
    fillStatuses();
    const eventType = text('jobs-event-type', 'event_type');
    const code = text('jobs-error-code', 'last_error_code');
    const aggregate = text('jobs-aggregate-key', 'aggregate_key');
    const handler = text('jobs-handler', 'handler');
    const after = el('input', { id: 'jobs-after', name: 'occurred_after', type: 'datetime-local', 'aria-describedby': 'jobs-after-hint' });
    const before = el('input', { id: 'jobs-before', name: 'occurred_before', type: 'datetime-local' });
    const reason = reasonField('jobs');
    const { count, confirmBox, result, showError } = jobPage('jobs', 'Jobs',
      'Re-drive, discard or cancel every event of company ' + state.me.company_id +
        ' that a filter matches, however many: counted first, then worked in batches by the hosts, one history and audit row per event.',
      [formField('jobs-action', 'Action', action),
        formField('jobs-status', 'Status', status),
        formField('jobs-event-type', 'Event type', eventType),
        formField('jobs-error-code', 'Last error code', code),
        formField('jobs-aggregate-key', 'Aggregate key', aggregate),
        formField('jobs-handler', 'Not yet consumed by handler', handler),
        formField('jobs-after', 'Occurred at or after', after, 'Times in your time zone. Give at least one filter.'),
        formField('jobs-before', 'Occurred before', before)],
      reason);
    const jobsBox = el('div', { id: 'jobs-list-box' }, el('p', { class: 'muted', text: 'Loading…' }));
    const jobsResult = el('div', { id: 'jobs-list-result', 'aria-live': 'polite' });
    const refresh = el('button', { type: 'button', class: 'secondary', id: 'jobs-refresh', text: 'Refresh' });
    refresh.addEventListener('click', () => loadJobs(jobsBox, jobsResult));
    $('page-jobs').append(el('h2', { id: 'jobs-list-title', text: 'Recent jobs' }), refresh, jobsResult, jobsBox);
    loadJobs(jobsBox, jobsResult);
    action.addEventListener('change', () => {
      fillStatuses();
      confirmBox.replaceChildren();
    });
    for (const input of [eventType, code, aggregate, handler, reason.input]) input.addEventListener('input', () => showError(null));
    count.addEventListener('click', async () => {
      confirmBox.replaceChildren();
      const filter = {};
      if (status.value) filter.status = status.value;
      if (eventType.value.trim()) filter.event_type = eventType.value.trim();
      if (code.value.trim()) filter.last_error_code = code.value.trim();
      if (aggregate.value.trim()) filter.aggregate_key = aggregate.value.trim();
      if (handler.value.trim()) filter.handler = handler.value.trim();
      if (after.value) filter.occurred_after = new Date(after.value).toISOString();
      if (before.value) filter.occurred_before = new Date(before.value).toISOString();
      const problem = Object.keys(filter).length === 0 ? 'Give at least one filter: a job over every event is never what you meant.'
        : reason.check();
      if (!showError(problem)) return;
      const chosen = JOB_ACTIONS[action.value];
      const body = { action: action.value, filter: filter, reason: reason.input.value.trim(), dry_run: true };
      await previewJob(body, result, confirmBox, 'jobs', chosen.verb,
        (n) => n + ' event(s) match now. ' + chosen.verb + ' them all?',
        async () => {
          const started = runJob(Object.assign({}, body, { dry_run: false }), result, {
            running: chosen.running,
            done: (x) => chosen.verb + ': ' + x.done + ' event(s) ' + chosen.done + '.',
            stopped: (x) => x.done + ' event(s) were done before it stopped.',
          });
          // The new job shows in the list while it runs, and again as it ended.
          setTimeout(() => loadJobs(jobsBox, jobsResult), 500);
          await started;
          loadJobs(jobsBox, jobsResult);
        });
    });
  }

  // The company's newest jobs (GET /api/v1/admin/operations), each running one with a button
  // that stops it after its batch in flight (POST …/{id}/cancel).
  async function loadJobs(box, result) {
    const answer = await api('GET', '/api/v1/admin/operations?limit=20');
    if (state.route !== 'jobs' || !document.contains(box)) return;
    if (!answer.ok) {
      if (failed(answer)) return;
      box.replaceChildren(errorBox('jobs-list-error', answer.message));
      return;
    }
    const rows = (answer.data.operations || []).map((job) => {
      // The stop button sits by the state, so a narrow screen shows it without scrolling.
      const stop = job.state !== 'running' ? '' : el('button', { type: 'button', class: 'danger', 'data-action': 'stop-job',
        'aria-label': 'Stop job ' + job.operation_id, text: 'Stop' });
      const cells = [el('td', { class: 'mono', text: job.operation_id }), el('td', { text: job.action }),
        el('td', {}, el('span', { 'data-field': 'state', text: job.state }), stop ? ' ' : '', stop),
        el('td', { class: 'num', text: job.done + ' of ' + job.total + (job.failed ? ', ' + job.failed + ' failed' : '') }),
        el('td', {}, timeEl(job.created_at)), el('td', {}, timeEl(job.finished_at))];
      if (stop) {
        stop.addEventListener('click', async () => {
          stop.disabled = true;
          const stopped = await api('POST', '/api/v1/admin/operations/' + encodeURIComponent(job.operation_id) + '/cancel',
            undefined, { 'Idempotency-Key': newKey() });
          if (failed(stopped)) return;
          showAnswer(result, stopped, (x) => 'Job ' + x.operation_id + ' is ' + x.state + ' after ' + x.done + ' of ' + x.total + ' event(s).');
          loadJobs(box, result);
        });
      }
      return el('tr', { 'data-operation-id': job.operation_id }, cells);
    });
    box.replaceChildren(table('jobs-list', ['Job', 'Action', 'State', { label: 'Progress', num: true }, 'Started', 'Finished'],
      rows, 'No job has been started for this company yet.'));
  }

  // --- Fleet -----------------------------------------------------------------------------

  function renderFleet() {
    const body = el('div', { id: 'fleet-body' }, el('p', { class: 'muted', text: 'Loading…' }));
    const result = el('div', { id: 'fleet-result', 'aria-live': 'polite' });
    page('page-fleet', 'Fleet', el('p', { class: 'hint', text: 'Every host sharing this database, its handlers and plugins; pausing a handler pauses it on every host.' }),
      result, body);
    loadFleet(body, result);
  }

  async function loadFleet(body, result) {
    const answer = await api('GET', '/api/v1/admin/fleet');
    if (state.route !== 'fleet' || !document.contains(body)) return;
    if (!answer.ok) {
      if (failed(answer)) return;
      body.replaceChildren(errorBox('fleet-error', answer.message));
      return;
    }
    const fleet = answer.data;
    const mismatchHosts = new Set();
    for (const m of fleet.mismatches || []) for (const set of m.handler_sets || []) for (const h of set.hosts || []) mismatchHosts.add(h);
    for (const m of fleet.plugin_mismatches || []) for (const b of m.builds || []) for (const h of b.hosts || []) mismatchHosts.add(h);
    // A build is named by the first 12 hex digits of its SHA-256; the whole digest on hover.
    const build = (sha256) => el('span', { class: 'mono', 'data-sha256': sha256, title: 'SHA-256 ' + sha256, text: sha256.slice(0, 12) });
    const hostRows = (fleet.hosts || []).map((h) => el('tr', { 'data-host': h.host_id, class: mismatchHosts.has(h.host_id) ? 'mismatch' : null },
      el('td', { class: 'mono', text: h.host_id }),
      el('td', {}, el('span', { class: 'badge ' + h.state, text: h.state }), h.processing_enabled ? '' : ' (processing off)'),
      el('td', { text: h.version }),
      el('td', {}, (h.handlers || []).length ? el('ul', {}, (h.handlers || []).map((x) =>
        el('li', {}, el('strong', { text: x.handler }), ' — ', (x.event_types || []).join(', '),
          el('br'), el('span', { class: 'hint mono', text: x.file + (x.abi ? ' (' + x.abi + ')' : '') }),
          x.sha256 ? [el('br'), el('span', { class: 'hint' }, 'build ', build(x.sha256))] : ''))) : el('span', { class: 'muted', text: 'none' })),
      el('td', {}, timeEl(h.last_heartbeat_at))));

    const mismatchRows = (fleet.mismatches || []).map((m) => el('tr', { 'data-event-type': m.event_type, class: 'mismatch' },
      el('td', { text: m.event_type }),
      el('td', {}, el('ul', {}, (m.handler_sets || []).map((s) =>
        el('li', {}, '[' + (s.handlers || []).join(', ') + '] on ', (s.hosts || []).join(', ')))))));

    const buildRows = (fleet.plugin_mismatches || []).map((m) => el('tr', { 'data-handler': m.handler, class: 'mismatch' },
      el('td', { text: m.handler }),
      el('td', {}, el('ul', {}, (m.builds || []).map((b) => el('li', {}, build(b.sha256), ' on ', (b.hosts || []).join(', ')))))));

    // Every handler a host runs, and every paused one even when no host runs it now.
    const paused = new Map((fleet.paused || []).map((p) => [p.handler, p]));
    const names = new Set(paused.keys());
    for (const h of fleet.hosts || []) for (const x of h.handlers || []) names.add(x.handler);
    const handlerRows = Array.from(names).sort().map((name) => {
      const p = paused.get(name);
      const button = el('button', { type: 'button', class: p ? '' : 'secondary', 'data-action': p ? 'resume' : 'pause',
        'aria-label': (p ? 'Resume ' : 'Pause ') + name, text: p ? 'Resume' : 'Pause' });
      button.addEventListener('click', async () => {
        button.disabled = true;
        const action = p ? 'resume' : 'pause';
        const a = await api('POST', '/api/v1/admin/handlers/' + encodeURIComponent(name) + '/' + action, {});
        if (failed(a)) return;
        showAnswer(result, a, (d) => 'Handler ' + d.handler + (d.paused ? ' is paused' : ' runs again') +
          ' on every host' + (d.changed ? '.' : ' (it already was).'));
        loadFleet(body, result);
      });
      // A pause an open circuit breaker set: its own badge, and when it probes next.
      const circuit = p && p.circuit_open;
      return el('tr', { 'data-handler': name, 'data-paused': p ? 'true' : 'false', 'data-circuit': circuit ? 'open' : 'closed' },
        el('td', { text: name }),
        el('td', {}, p ? el('span', { class: 'badge paused', text: 'paused' }) : el('span', { class: 'badge live', text: 'running' }),
          circuit ? [' ', el('span', { class: 'badge circuit-open', title: 'its calls kept failing; one probe call after the cool-down resumes it', text: 'circuit open' })] : ''),
        el('td', {}, p ? [p.paused_by ? 'by ' + p.paused_by + ' ' : '', timeEl(p.paused_at),
          circuit && p.next_probe_at ? [el('br'), el('span', { class: 'hint' }, 'next probe ', timeEl(p.next_probe_at))] : ''] : ''),
        el('td', {}, button));
    });

    body.replaceChildren(
      el('h2', { text: 'Hosts' }),
      table('fleet-hosts', ['Host', 'State', 'Version', 'Handlers and plugins', 'Last heartbeat'], hostRows, 'No host has registered.'),
      el('h2', { text: 'Handler mismatches' }),
      table('fleet-mismatches', ['Event type', 'Handler sets'], mismatchRows, 'Every live host runs the same handlers for each event type.'),
      el('h2', { text: 'Plugin builds that differ' }),
      table('fleet-builds', ['Handler', 'Builds'], buildRows, 'Every live host runs the same build of each handler.'),
      el('h2', { text: 'Handlers' }),
      table('fleet-handlers', ['Handler', 'State', 'Paused', ''], handlerRows, 'No handler is loaded or paused.'));
  }

  // --- start -----------------------------------------------------------------------------

  async function start() {
    $('signin-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const token = $('token').value.trim();
      if (!token) {
        showSignIn('Paste a token first.');
        return;
      }
      signIn(token);
    });
    $('sign-out').addEventListener('click', () => signOut());
    window.addEventListener('hashchange', route);

    const kept = sessionStorage.getItem(TOKEN_KEY);
    if (kept) return signIn(kept);
    // Behind a reverse proxy that puts the operator's token into admin.console_token_header
    // (the host marks the page so; otherwise there is nothing to ask, and no failed request).
    const proxied = document.querySelector('meta[name="outboxd-proxy-session"]');
    if (proxied && proxied.content === 'on' && !sessionStorage.getItem(SIGNED_OUT_KEY)) {
      const session = await api('GET', '/console/session');
      if (session.ok && session.data && session.data.token) return signIn(session.data.token);
    }
    showSignIn('');
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
