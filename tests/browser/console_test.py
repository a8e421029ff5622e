#!/usr/bin/env python3
"""The operator console in a real browser (headless Chromium driven by Selenium).

Starts a real `outboxd run` (the fixture plugin `scripted` from the build, HS256 tokens
minted here) against a fresh database on OUTBOX_TEST_DATABASE_URL, seeds events with SQL,
and drives /console/ as an operator would, from a browser in another time zone than the
host's: a bad token, ADMIN (overview equal to the database, re-drive a review group and
watch it complete, reasons refused by the page and by the API, discard an event, its
history, a group without an error code re-driven alone, a group larger than one bulk
request re-driven whole, a replay of our completed events for the one handler, counted
first, a job cancelling every event a filter matches, counted first), a platform role (handler
mismatches highlighted, pause and resume a handler on the fleet page), VIEWER (no action
buttons, no replay or jobs page, a forged action refused by the API), another company's ADMIN (none of our
events) and a company without events (the empty states). Full-page screenshots go to
--artifacts. Every process it starts is stopped by pid.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime
from zoneinfo import ZoneInfo
from urllib.parse import urlsplit, urlunsplit

SECRET = 'console-test-secret-0123456789abcdef0123456789'
PROXY_HEADER = 'X-Forwarded-Access-Token'
STATUSES = ['PENDING', 'PROCESSING', 'RETRY_WAIT', 'COMPLETED', 'REVIEW_REQUIRED', 'DISCARDED']
OURS = 'acme'
THEIRS = 'globex'
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
TIMEOUT = 30  # seconds any one wait may take
VIEWER_ZONE = 'Asia/Colombo'  # UTC+05:30: every local time differs from UTC in its minutes
BIG_GROUP = 1050  # more events than one bulk re-drive request may take (1,000)


# Run on every page a screenshot is taken of, at its width: every visible control has a
# name a screen reader reads and is reachable with Tab, and the page is no wider than the
# window (wide tables scroll inside their own box).
USABILITY_PROBLEMS = '''
const problems = [];
for (const c of document.querySelectorAll('input, button, select, textarea, a[href]')) {
  if (c.offsetParent === null) continue;
  const named = (c.labels && c.labels.length) || c.getAttribute('aria-label') || c.getAttribute('aria-labelledby')
    || (c.type !== 'checkbox' && c.textContent.trim()) || c.getAttribute('title');
  const what = c.tagName.toLowerCase() + (c.id ? '#' + c.id : '');
  if (!named) problems.push(what + ' has no label');
  if (c.tabIndex < 0 || c.disabled) problems.push(what + ' cannot be reached with Tab');
}
if (document.documentElement.scrollWidth > window.innerWidth + 1) {
  problems.push('the page is ' + document.documentElement.scrollWidth + ' px wide in a ' + window.innerWidth + ' px window');
}
return problems;
'''


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def wait_for(what, probe, timeout=TIMEOUT, interval=0.2):
    """Polls probe() until it returns something truthy; fails naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except Exception as e:  # a page element not there yet, a stale element
            last = 'error: %s' % type(e).__name__
        if last and not (isinstance(last, str) and last.startswith('error: ')):
            return last
        time.sleep(interval)
    raise Failure('timed out waiting for %s (last: %r)' % (what, last))


# --- tokens ---------------------------------------------------------------------------------

def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b'=').decode()


def token(sub, role, company):
    now = int(time.time())
    header = b64url(json.dumps({'alg': 'HS256', 'typ': 'JWT'}).encode())
    claims = b64url(json.dumps({'sub': sub, 'role': role, 'company_id': company, 'iat': now - 5,
                                'exp': now + 1800}).encode())
    signature = hmac.new(SECRET.encode(), (header + '.' + claims).encode(), hashlib.sha256).digest()
    return header + '.' + claims + '.' + b64url(signature)


# --- database -------------------------------------------------------------------------------

class Database:
    def __init__(self, psql, server_url):
        self.psql = psql
        self.server_url = server_url
        self.name = 'console_test_%d' % os.getpid()
        parts = urlsplit(server_url)
        self.url = urlunsplit((parts.scheme, parts.netloc, '/' + self.name, parts.query, parts.fragment))
        self.run_on(server_url, 'DROP DATABASE IF EXISTS %s WITH (FORCE)' % self.name)
        self.run_on(server_url, 'CREATE DATABASE %s' % self.name)

    def run_on(self, url, sql):
        out = subprocess.run([self.psql, url, '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-c', sql],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise Failure('psql failed: %s' % out.stderr.strip())
        return out.stdout.strip()

    def sql(self, sql):
        return self.run_on(self.url, sql)

    def rows(self, sql):
        text = self.sql(sql)
        return [line.split('|') for line in text.splitlines()] if text else []

    def counts(self, company):
        found = dict(self.rows("SELECT status, count(*) FROM event_publication WHERE company_id = '%s' GROUP BY status"
                               % company))
        return {s: int(found.get(s, 0)) for s in STATUSES}

    def publish(self, company, event_type, payload, n):
        return self.sql("SELECT string_agg(outbox_publish('%s', '%s', '%s'::jsonb)::text, ',') FROM generate_series(1, %d)"
                        % (company, event_type, payload, n)).split(',')

    def drop(self):
        self.run_on(self.server_url, 'DROP DATABASE IF EXISTS %s WITH (FORCE)' % self.name)


# --- the host -------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Host:
    def __init__(self, outboxd, plugin, database_url, workdir):
        self.port = free_port()
        self.base = 'http://127.0.0.1:%d' % self.port
        plugins = os.path.join(workdir, 'plugins')
        os.makedirs(plugins)
        shutil.copy(plugin, os.path.join(plugins, 'libscripted.so'))
        self.log_path = os.path.join(workdir, 'host.log')
        env = {k: v for k, v in os.environ.items() if not k.startswith('OUTBOX_')}
        env.update({'OUTBOX_DATABASE_URL': database_url, 'OUTBOX_PLUGIN_DIR': plugins,
                    'OUTBOX_POLL_INTERVAL': '100ms', 'OUTBOX_ADMIN_LISTEN': '127.0.0.1:%d' % self.port,
                    'OUTBOX_ADMIN_JWT_SECRET': SECRET, 'OUTBOX_LOG_LEVEL': 'warn', 'OUTBOX_SHUTDOWN_TIMEOUT': '5s'})
        migrate = subprocess.run([outboxd, 'migrate'], env=env, capture_output=True, text=True, timeout=120)
        if migrate.returncode != 0:
            raise Failure('outboxd migrate failed: ' + migrate.stderr[-2000:])
        self.env = env
        self.outboxd = outboxd
        self.process = None

    def start(self):
        with open(self.log_path, 'ab') as log:
            self.process = subprocess.Popen([self.outboxd, 'run'], env=self.env, stdout=log, stderr=log)
        wait_for('the host to answer /healthz', lambda: self.request('GET', '/healthz')[0] == 200, timeout=60)

    def stop(self):
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def request(self, method, path, body=None, headers=None):
        """(status, headers, body text) of one request; never raises on an HTTP status."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})
        if data is not None:
            req.add_header('Content-Type', 'application/json')

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(req, timeout=10) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()
        except OSError:
            return 0, {}, ''


# --- the browser ----------------------------------------------------------------------------

class Browser:
    def __init__(self, artifacts):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
        self.By = By
        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which('chromium') or '/usr/bin/chromium'
        for arg in ('--headless=new', '--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu',
                    '--window-size=1280,800', '--disable-extensions', '--no-first-run'):
            options.add_argument(arg)
        options.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
        # The operator is somewhere else than the host: times must be shown in the viewer's zone.
        service = Service(executable_path=shutil.which('chromedriver') or '/usr/bin/chromedriver',
                          env=dict(os.environ, TZ=VIEWER_ZONE))
        self.driver = webdriver.Chrome(service=service, options=options)
        self.driver.set_page_load_timeout(TIMEOUT)
        self.artifacts = artifacts
        self.severe = []

    def quit(self):
        self.driver.quit()

    def find(self, css):
        return self.driver.find_element(self.By.CSS_SELECTOR, css)

    def find_all(self, css):
        return self.driver.find_elements(self.By.CSS_SELECTOR, css)

    def visible(self, css):
        found = self.find_all(css)
        return found[0] if found and found[0].is_displayed() else None

    def wait_visible(self, css, what=None):
        return wait_for(what or css, lambda: self.visible(css))

    def text(self, css):
        element = self.visible(css)
        return element.text if element else None

    def go(self, url):
        self.driver.get(url)

    def screenshot(self, name, width=1280):
        """A full-page PNG: the window is made as tall as the page, then restored."""
        self.driver.set_window_size(width, 800)
        time.sleep(0.2)
        height = self.driver.execute_script('return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)')
        self.driver.set_window_size(width, max(800, min(int(height) + 140, 6000)))
        time.sleep(0.3)
        path = os.path.join(self.artifacts, name + '.png')
        self.driver.save_screenshot(path)
        problems = self.driver.execute_script(USABILITY_PROBLEMS)
        self.driver.set_window_size(1280, 800)
        check(not problems, 'page %s at %d px: %s' % (name, width, problems))
        return path

    def new_console_errors(self):
        """Messages the page logged at SEVERE since the last call (a CSP violation or a failed
        request lands here)."""
        fresh = [e['message'] for e in self.driver.get_log('browser') if e.get('level') == 'SEVERE']
        self.severe.extend(fresh)
        return fresh

    def console_errors(self):
        """Every SEVERE message of the whole run."""
        self.new_console_errors()
        return list(self.severe)

    def clean_load(self, url, ready, what):
        """A normal page load logs nothing at SEVERE: no failed request, no CSP violation."""
        self.new_console_errors()
        self.go(url)
        self.wait_visible(ready, what)
        time.sleep(0.5)  # requests the page starts after it shows
        errors = self.new_console_errors()
        check(not errors, 'loading %s logged at SEVERE: %s' % (what, errors))


def sign_in(browser, host, jwt):
    browser.go(host.base + '/console/')
    browser.wait_visible('#signin-form input[name="token"]', 'the sign-in form')
    field = browser.find('#signin-form input[name="token"]')
    check(field.get_attribute('type') == 'password', 'the token field is a password field')
    check(browser.find('label[for="token"]').text.strip() != '', 'the token field has a label')
    field.clear()
    field.send_keys(jwt)
    field.send_keys('\ue007')  # Enter: the form works from the keyboard


def sign_out(browser):
    browser.wait_visible('#sign-out').click()
    browser.wait_visible('#signin-form', 'the sign-in form after signing out')
    check(browser.driver.execute_script("return sessionStorage.getItem('outboxd.console.token')") is None,
          'signing out forgets the token')


def page_counts(browser):
    counts = {}
    for status in STATUSES:
        element = browser.visible('#status-counts [data-status="%s"]' % status)
        if element is None:
            return None
        counts[status] = int(element.text)
    return counts


def group_row(browser, event_type, code):
    return browser.visible('#review-groups tr[data-event-type="%s"][data-error-code="%s"]' % (event_type, code))


# --- the scenario ---------------------------------------------------------------------------

def run(args, workdir):
    db = Database(args.psql, os.environ['OUTBOX_TEST_DATABASE_URL'])
    host = None
    browser = None
    try:
        host = Host(args.outboxd, args.plugin, db.url, workdir)
        # Ours: 5 that complete, 4 the handler rejects (HTTP_422, stay in review), 4 put into
        # review by hand (HTTP_503; their payload succeeds when re-driven). Theirs: 2 of the latter.
        db.publish(OURS, 'TestRequested', '{}', 5)
        rejected = db.publish(OURS, 'TestRequested', '{"mode": "review"}', 4)
        redrive = db.publish(OURS, 'TestBatch', '{}', 4)
        theirs = db.publish(THEIRS, 'TestBatch', '{}', 2)
        db.sql("UPDATE event_publication SET status = 'REVIEW_REQUIRED', last_error_code = 'HTTP_503', attempt_count = 1 "
               "WHERE event_type = 'TestBatch'")
        host.start()
        wait_for('the seeded events to settle', lambda: db.counts(OURS)['REVIEW_REQUIRED'] == 8
                 and db.counts(OURS)['COMPLETED'] == 5)

        # The console's files and headers, without a browser.
        status, headers, body = host.request('GET', '/console/')
        check(status == 200 and headers.get('Content-Type', '').startswith('text/html'), '/console/ serves HTML')
        check(headers.get('Content-Security-Policy') == CSP, 'CSP header: %r' % headers.get('Content-Security-Policy'))
        check(headers.get('X-Content-Type-Options') == 'nosniff', 'nosniff header')
        check(headers.get('Referrer-Policy') == 'no-referrer', 'Referrer-Policy header')
        check(headers.get('Cache-Control') == 'no-store', 'Cache-Control header')
        check('<script src="console.js"' in body and 'style=' not in body and 'onclick' not in body,
              'index.html has no inline script or style')
        status, headers, _ = host.request('GET', '/console/console.js')
        check(status == 200 and headers.get('Content-Type', '').startswith('text/javascript'), 'console.js type')
        status, headers, _ = host.request('GET', '/console/console.css')
        check(status == 200 and headers.get('Content-Type', '').startswith('text/css'), 'console.css type')
        status, headers, _ = host.request('GET', '/console')
        check(status == 308 and headers.get('Location') == '/console/', '/console redirects to /console/')
        status, _, body = host.request('GET', '/console/missing.js')
        check(status == 404 and json.loads(body)['error']['code'] == 'NOT_FOUND', 'an unknown console file is 404 JSON')
        status, _, body = host.request('GET', '/console/session', headers={PROXY_HEADER: token('x@acme', 'HR', OURS)})
        check(status == 404 and json.loads(body)['error']['code'] == 'NO_CONSOLE_SESSION',
              '/console/session is 404 while admin.console_token_header is not configured')
        check('<meta name="outboxd-proxy-session" content="off">' in host.request('GET', '/console/')[2],
              'the page is marked as having no proxy session')

        browser = Browser(args.artifacts)
        # With no proxy header configured the page asks nothing it cannot have: a normal
        # load logs nothing at SEVERE (no 404 from /console/session).
        browser.clean_load(host.base + '/console/', '#signin-form input[name="token"]', 'the sign-in page')

        # A bad token: the API's own message on the sign-in form, nothing kept.
        status, _, body = host.request('GET', '/api/v1/admin/me', headers={'Authorization': 'Bearer not-a-token'})
        check(status == 401, 'the API refuses a bad token (%d)' % status)
        api_message = json.loads(body)['error']['message']
        sign_in(browser, host, 'not-a-token')
        shown = wait_for('the sign-in error', lambda: browser.text('#signin-error'))
        check(shown == api_message, 'the sign-in error is the API message: %r != %r' % (shown, api_message))
        check(browser.driver.execute_script("return sessionStorage.length") == 0, 'a bad token is not kept')
        browser.screenshot('signin-error')

        # ADMIN of our company: the overview equals the database.
        admin = token('alice@acme', 'ADMIN', OURS)
        sign_in(browser, host, admin)
        browser.wait_visible('#status-counts', 'the overview')
        check(browser.text('#who-sub') == 'alice@acme' and browser.text('#who-role') == 'ADMIN'
              and browser.text('#who-company') == OURS, 'the signed-in operator is shown')
        check(browser.driver.execute_script("return sessionStorage.getItem('outboxd.console.token')") == admin,
              'the token is in sessionStorage')
        check(browser.driver.get_cookies() == [] and admin not in browser.driver.current_url,
              'the token is in no cookie and no URL')
        wait_for('the overview to equal the database', lambda: page_counts(browser) == db.counts(OURS))
        check(browser.visible('#by-event-type tr[data-event-type="TestBatch"]') is not None, 'counts by event type')
        check(browser.visible('#sparkline polyline[data-series="completed"]') is not None, 'the sparkline')
        check(browser.visible('#oldest-unfinished') is not None, 'oldest unfinished per handler')
        browser.screenshot('overview')
        browser.screenshot('overview-390px', width=390)
        # It refreshes by itself: new events appear without a page load.
        browser.driver.execute_script('window.consoleTestMarker = 42')
        db.publish(OURS, 'TestRequested', '{}', 2)
        wait_for('the overview to refresh by itself', lambda: page_counts(browser) == db.counts(OURS)
                 and page_counts(browser)['COMPLETED'] == 7)
        check(browser.driver.execute_script('return window.consoleTestMarker') == 42, 'the page was not reloaded')

        # Needs review: our two groups only (theirs would make TestBatch 6).
        browser.go(host.base + '/console/#/review')
        wait_for('our review groups', lambda: group_row(browser, 'TestBatch', 'HTTP_503'))
        check(group_row(browser, 'TestBatch', 'HTTP_503').find_element(browser.By.CSS_SELECTOR, '[data-field="count"]').text == '4',
              'the re-drive group counts our 4 events, none of the other company')
        check(group_row(browser, 'TestRequested', 'HTTP_422') is not None, 'the rejected group')
        group_row(browser, 'TestBatch', 'HTTP_503').find_element(browser.By.CSS_SELECTOR, '[data-action="show-group"]').click()
        wait_for('the group events', lambda: len(browser.find_all('#group-events tr[data-event-id]')) == 4)
        shown_ids = {r.get_attribute('data-event-id') for r in browser.find_all('#group-events tr[data-event-id]')}
        check(shown_ids == set(redrive), 'the group lists exactly our events')
        check('"mode"' not in browser.find('#page').text, 'no payload is shown')
        # The page refuses a short reason before asking the API.
        browser.find('#action-reason').send_keys('too short')
        browser.find('#redrive-group').click()
        wait_for('the reason error', lambda: browser.text('#action-error'))
        check(db.counts(OURS)['REVIEW_REQUIRED'] == 8, 'a refused reason re-drives nothing')
        browser.find('#action-reason').clear()
        browser.find('#action-reason').send_keys('x' * 301)
        browser.find('#redrive-group').click()
        wait_for('the long reason error', lambda: '301' in browser.text('#action-error'))
        check(db.counts(OURS)['REVIEW_REQUIRED'] == 8, 'a reason over 300 characters re-drives nothing')
        browser.find('#action-reason').clear()
        browser.find('#action-reason').send_keys('the stats service is back up')
        browser.screenshot('review')
        browser.screenshot('review-390px', width=390)
        browser.find('#redrive-group').click()
        # The dry run's count comes before the confirmation, and changes nothing.
        preview = wait_for('the dry-run count', lambda: browser.visible('#redrive-group-preview [data-field="count"]'))
        check(preview.text.startswith('4 event(s)'), 'the dry run counts our 4 events: ' + preview.text)
        check(db.counts(OURS)['REVIEW_REQUIRED'] == 8, 'the dry run re-drives nothing')
        check(db.sql('SELECT count(*) FROM outbox_operation') == '0', 'the dry run starts no job')
        browser.screenshot('review-confirm')
        browser.screenshot('review-confirm-390px', width=390)
        browser.find('#redrive-group-confirm').click()
        answer = wait_for('the re-drive answer', lambda: browser.visible('#action-result [data-outcome]'))
        check(answer.get_attribute('data-outcome') == 'ok' and '4 event' in answer.text, 'the re-drive answer: ' + answer.text)
        wait_for('the re-driven events to complete',
                 lambda: db.sql("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED' AND event_id IN (%s)"
                                % ','.join("'%s'" % i for i in redrive)) == '4')
        check(db.counts(THEIRS)['REVIEW_REQUIRED'] == 2, 'the other company\'s group is untouched')
        browser.screenshot('review-redriven')
        browser.go(host.base + '/console/#/overview')
        wait_for('the overview to show the completions', lambda: page_counts(browser) == db.counts(OURS)
                 and page_counts(browser)['COMPLETED'] == 11)

        # Discard one rejected event, with confirmation.
        browser.go(host.base + '/console/#/review')
        wait_for('the rejected group', lambda: group_row(browser, 'TestRequested', 'HTTP_422'))
        check(group_row(browser, 'TestBatch', 'HTTP_503') is None, 'the re-driven group is gone')
        group_row(browser, 'TestRequested', 'HTTP_422').find_element(browser.By.CSS_SELECTOR, '[data-action="show-group"]').click()
        wait_for('the rejected events', lambda: len(browser.find_all('#group-events tr[data-event-id]')) == 4)
        victim = browser.find_all('#group-events tr[data-event-id]')[0].get_attribute('data-event-id')
        check(victim in rejected, 'the discarded event is one of ours')
        browser.find('#action-reason').send_keys('customer cancelled the request')
        browser.find('#group-events tr[data-event-id="%s"] [data-action="discard"]' % victim).click()
        browser.wait_visible('#discard-confirm', 'the discard confirmation')
        check(db.sql("SELECT status FROM event_publication WHERE event_id = '%s'" % victim) == 'REVIEW_REQUIRED',
              'nothing is discarded before the confirmation')
        browser.screenshot('review-discard-confirm')
        browser.find('#discard-confirm').click()
        answer = wait_for('the discard answer', lambda: browser.visible('#action-result [data-outcome]'))
        check(answer.get_attribute('data-outcome') == 'ok' and 'DISCARDED' in answer.text, 'the discard answer: ' + answer.text)
        check(db.sql("SELECT status FROM event_publication WHERE event_id = '%s'" % victim) == 'DISCARDED',
              'the event is DISCARDED in the database')

        # Re-drive one selected event (its payload fails again, so it comes back to review).
        wait_for('the group without the discarded event',
                 lambda: len(browser.find_all('#group-events tr[data-event-id]')) == 3)
        again = browser.find_all('#group-events tr[data-event-id]')[0].get_attribute('data-event-id')
        version = int(db.sql("SELECT version FROM event_publication WHERE event_id = '%s'" % again))
        browser.find('#action-reason').clear()
        browser.find('#action-reason').send_keys('the rules service was fixed, try once more')
        browser.find('#select-' + again).click()
        browser.find('#redrive-selected').click()
        answer = wait_for('the selected re-drive answer',
                          lambda: browser.visible('#action-result [data-outcome]') if '1 event' in browser.text('#action-result') else None)
        check(answer.get_attribute('data-outcome') == 'ok', 'the selected re-drive answer: ' + answer.text)
        def tried_again():
            status, now = db.sql("SELECT status || ' ' || version FROM event_publication WHERE event_id = '%s'" % again).split()
            return status == 'REVIEW_REQUIRED' and int(now) > version + 1
        wait_for('the selected event to be tried again and return to review', tried_again)
        check(db.counts(OURS)['REVIEW_REQUIRED'] == 3, 'only the selected event was re-driven')

        # A group without an error code: its re-drive takes its own events only, not the older
        # one of its type that has a code (the console once sent last_error_code: null, "any").
        coded = db.publish(OURS, 'TestBatch', '{"mode": "review"}', 1)[0]
        uncoded = db.publish(OURS, 'TestBatch', '{"mode": "review"}', 2)
        mine = ','.join("'%s'" % i for i in [coded] + uncoded)
        wait_for('the three to need review', lambda: db.sql(
            "SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED' AND event_id IN (%s)" % mine) == '3')
        db.sql("UPDATE event_publication SET last_error_code = CASE WHEN event_id = '%s' THEN 'HTTP_409' END "
               "WHERE event_id IN (%s)" % (coded, mine))
        versions = dict(db.rows("SELECT event_id, version FROM event_publication WHERE event_id IN (%s)" % mine))
        browser.go(host.base + '/console/#/overview')  # the review page is open: load it afresh
        browser.go(host.base + '/console/#/review')
        wait_for('the group without a code', lambda: group_row(browser, 'TestBatch', ''))
        group_row(browser, 'TestBatch', '').find_element(browser.By.CSS_SELECTOR, '[data-action="show-group"]').click()
        wait_for('its two events', lambda: len(browser.find_all('#group-events tr[data-event-id]')) == 2)
        browser.find('#action-reason').send_keys('the batch service is back up')
        browser.find('#redrive-group').click()
        wait_for('the no-code dry run', lambda: browser.visible('#redrive-group-confirm'))
        check(browser.text('#redrive-group-preview').startswith('2 event(s)'), 'the no-code group counts 2')
        browser.find('#redrive-group-confirm').click()
        answer = wait_for('the no-code re-drive answer', lambda: browser.visible('#action-result [data-outcome]'))
        check(answer.get_attribute('data-outcome') == 'ok' and '2 event' in answer.text,
              'the no-code group re-drive answer: ' + answer.text)
        now = dict(db.rows("SELECT event_id, version FROM event_publication WHERE event_id IN (%s)" % mine))
        check(all(int(now[i]) > int(versions[i]) for i in uncoded), 'both events of the group were re-driven')
        check(now[coded] == versions[coded], 'the older event with a code was left alone')
        # Out of review again: the rest of the test counts our review queue.
        wait_for('the re-driven events back in review', lambda: db.sql(
            "SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED' AND event_id IN (%s)" % mine) == '3')
        db.sql("UPDATE event_publication SET status = 'COMPLETED', completed_at = now() WHERE event_id IN (%s)" % mine)

        # The event page: fields, consuming handlers, blocked_by and the action history.
        browser.go(host.base + '/console/#/event/' + victim)
        wait_for('the event fields', lambda: browser.text('#event-fields [data-field="status"]') == 'DISCARDED')
        wait_for('the discard in the history', lambda: browser.visible('#action-history tr[data-action]'))
        check('customer cancelled the request' in browser.find('#action-history').text, 'the history shows the reason')
        check(browser.visible('#blocked-by') is not None, 'blocked_by is shown')
        check(browser.driver.execute_script('return Intl.DateTimeFormat().resolvedOptions().timeZone') == VIEWER_ZONE,
              'the browser runs in the viewer\'s zone: %s' % browser.driver.execute_script(
                  'return Intl.DateTimeFormat().resolvedOptions().timeZone'))
        time_el = browser.find('#action-history time')
        utc = time_el.get_attribute('datetime')
        check(time_el.get_attribute('title') == 'UTC: ' + utc, 'times carry UTC in their title')
        local = datetime.fromisoformat(utc.replace('Z', '+00:00')).astimezone(ZoneInfo(VIEWER_ZONE))
        check(':%02d:%02d' % (local.minute, local.second) in time_el.text,
              'times are shown in the viewer\'s zone: %r for %s' % (time_el.text, utc))
        browser.screenshot('event')
        browser.screenshot('event-390px', width=390)
        browser.go(host.base + '/console/#/event/' + redrive[0])
        wait_for('the consuming handler', lambda: browser.visible('#consumed-by tr[data-handler="scripted"]'))
        # Every call of its attempts, as outbox_attempt holds them: the run after the re-drive.
        wait_for('the attempts', lambda: browser.visible('#attempts tr[data-outcome="succeeded"]'))
        recorded = int(db.sql("SELECT count(*) FROM outbox_attempt WHERE event_id = '%s'" % redrive[0]))
        shown = len(browser.find_all('#attempts tr[data-attempt]'))
        check(recorded >= 1 and shown == recorded, 'the event page shows its %d attempt rows: %d' % (recorded, shown))
        browser.screenshot('event-attempts')
        browser.screenshot('event-attempts-390px', width=390)
        # Ordering: an event waits behind an earlier one of its aggregate that needs review.
        first = db.sql("SELECT outbox_publish('%s', 'TestBatch', '{\"mode\": \"review\"}'::jsonb, 'order-7')" % OURS)
        second = db.sql("SELECT outbox_publish('%s', 'TestBatch', '{}'::jsonb, 'order-7')" % OURS)
        wait_for('the first event of the aggregate to need review',
                 lambda: db.sql("SELECT status FROM event_publication WHERE event_id = '%s'" % first) == 'REVIEW_REQUIRED')
        browser.go(host.base + '/console/#/event/' + second)
        blocked = wait_for('blocked_by', lambda: browser.visible('a#blocked-by'))
        check(blocked.text == first, 'the event page names the event it waits for: %r' % blocked.text)
        check(db.sql("SELECT status FROM event_publication WHERE event_id = '%s'" % second) == 'PENDING', 'it waits')
        browser.screenshot('event-blocked')
        # A delayed event's page says when it is due.
        delayed = db.sql("SELECT outbox_publish('%s', 'TestBatch', '{}'::jsonb, deliver_after => now() + interval '1 hour')"
                         % OURS)
        due = db.sql("SELECT to_char(deliver_after AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') "
                     "FROM event_publication WHERE event_id = '%s'" % delayed)
        browser.go(host.base + '/console/#/event/' + delayed)
        deliver = wait_for('the deliver-after field',
                           lambda: browser.visible('#event-fields [data-field="deliver_after"] time'))
        check(deliver.get_attribute('datetime').startswith(due), 'the page shows deliver_after: %r, want %s'
              % (deliver.get_attribute('datetime'), due))
        check(browser.text('#event-fields [data-field="status"]') == 'PENDING', 'it waits for its time')
        browser.screenshot('event-delayed-390px', width=390)

        # A group larger than one bulk request may take is re-driven whole by one click; a reason
        # the API refuses shows the API's answer and re-drives nothing. The events are published
        # and put into review in one transaction, so the running host never sees them PENDING.
        db.sql("SELECT count(outbox_publish('%s', 'TestRequested', '{\"batch\": \"big\"}'::jsonb)) "
               "FROM generate_series(1, %d); "
               "UPDATE event_publication SET status = 'REVIEW_REQUIRED', last_error_code = 'HTTP_504', attempt_count = 1 "
               "WHERE company_id = '%s' AND status = 'PENDING' AND payload->>'batch' = 'big'" % (OURS, BIG_GROUP, OURS))
        big = lambda status: int(db.sql("SELECT count(*) FROM event_publication WHERE payload->>'batch' = 'big' "
                                        "AND status = '%s'" % status))
        check(big('REVIEW_REQUIRED') == BIG_GROUP, 'the large group is in review')
        browser.go(host.base + '/console/#/review')
        wait_for('the large group', lambda: group_row(browser, 'TestRequested', 'HTTP_504'))
        row = group_row(browser, 'TestRequested', 'HTTP_504')
        check(row.find_element(browser.By.CSS_SELECTOR, '[data-field="count"]').text == str(BIG_GROUP), 'the large group\'s count')
        row.find_element(browser.By.CSS_SELECTOR, '[data-action="show-group"]').click()
        wait_for('the newest 100 of the large group', lambda: len(browser.find_all('#group-events tr[data-event-id]')) == 100)
        browser.find('#action-reason').send_keys('ask ops.lead@example.com before re-driving')
        browser.find('#redrive-group').click()
        answer = wait_for('the API\'s refusal', lambda: browser.visible('#action-result [data-outcome="error"]'))
        check(answer.text.startswith('INVALID_REASON: ') and 'e-mail' in answer.text and '@' not in answer.text,
              'the API\'s message is shown, without the value: %r' % answer.text)
        check(big('REVIEW_REQUIRED') == BIG_GROUP, 'a refused re-drive changes nothing')
        browser.find('#action-reason').clear()
        browser.find('#action-reason').send_keys('the category service limit was raised')
        browser.find('#redrive-group').click()
        wait_for('the large dry run', lambda: browser.visible('#redrive-group-confirm'))
        check(browser.text('#redrive-group-preview').startswith('%d event(s)' % BIG_GROUP), 'the large group\'s dry-run count')
        check(big('REVIEW_REQUIRED') == BIG_GROUP, 'the dry run changes nothing')
        browser.find('#redrive-group-confirm').click()
        progress = wait_for('the job\'s progress', lambda: browser.visible('#operation-progress, #action-result [data-outcome]'))
        check(progress is not None, 'the progress or the outcome is shown')
        answer = wait_for('the large re-drive answer',
                          lambda: browser.visible('#action-result [data-outcome="ok"]')
                          if ('%d event' % BIG_GROUP) in browser.text('#action-result') else None, timeout=60)
        check(big('REVIEW_REQUIRED') == 0, 'every event of the large group was re-driven: %s' % answer.text)
        check(int(db.sql("SELECT count(*) FROM outbox_manual_retry r JOIN event_publication e USING (event_id) "
                         "WHERE e.payload->>'batch' = 'big'")) == BIG_GROUP, 'one re-drive per event, none twice')
        wait_for('the large group to complete', lambda: big('COMPLETED') == BIG_GROUP, timeout=120)
        browser.screenshot('review-large-group')

        # Replay: our COMPLETED TestRequested events run again for the one handler, counted first.
        check(browser.find('#nav-replay').is_displayed(), 'an ADMIN has the replay page in the navigation')
        browser.go(host.base + '/console/#/replay')
        browser.wait_visible('#replay-handler', 'the replay form')
        browser.find('#replay-count').click()
        error = wait_for('the page asks for the handler', lambda: browser.visible('#replay-error'))
        check('handler' in error.text, 'the page names what is missing: %r' % error.text)
        browser.find('#replay-handler').send_keys('scripted')
        browser.find('#replay-event-type').send_keys('TestRequested')
        from selenium.webdriver.support.ui import Select
        Select(browser.find('#replay-status')).select_by_value('COMPLETED')
        browser.find('#replay-reason').send_keys('the scripted handler was fixed in release 1.4.2')
        check(browser.visible('#replay-error') is None, 'the complaint goes once the form is filled in')
        browser.screenshot('replay-form')
        browser.screenshot('replay-form-390px', width=390)
        replayable = int(db.sql("SELECT count(*) FROM event_publication WHERE company_id = '%s' "
                                "AND event_type = 'TestRequested' AND status = 'COMPLETED'" % OURS))
        check(replayable >= BIG_GROUP, 'our completed events to replay: %d' % replayable)
        browser.find('#replay-count').click()
        preview = wait_for('the replay dry run', lambda: browser.visible('#replay-preview [data-field="count"]'))
        check(preview.text.startswith('%d event(s)' % replayable), 'the dry run counts them: %r' % preview.text)
        replayed = lambda: int(db.sql("SELECT count(*) FROM event_publication WHERE replay_handler = 'scripted'"))
        check(replayed() == 0, 'the dry run changes nothing')
        browser.screenshot('replay-confirm-390px', width=390)
        browser.find('#replay-confirm').click()
        answer = wait_for('the replay answer', lambda: browser.visible('#replay-result [data-outcome="ok"]'), timeout=60)
        check(answer.text.startswith('Replayed: %d event(s)' % replayable), 'the job is over: %r' % answer.text)
        check(replayed() == replayable, 'every counted event is replayed for the handler')
        check(int(db.sql("SELECT count(*) FROM audit_event WHERE action = 'outbox.replay'")) == replayable,
              'one audit row per replayed event')
        wait_for('the replayed events to complete',
                 lambda: int(db.sql("SELECT count(*) FROM event_publication WHERE replay_handler = 'scripted' "
                                    "AND status = 'COMPLETED'")) == replayable, timeout=120)

        # A job over a filter: cancel every PENDING event of a type no host handles, counted first.
        orphans = 45
        db.sql("SELECT count(outbox_publish('%s', 'OrphanStep', '{}'::jsonb)) FROM generate_series(1, %d)" % (OURS, orphans))
        db.sql("SELECT outbox_publish('%s', 'OrphanStep', '{}'::jsonb)" % THEIRS)
        check(browser.find('#nav-jobs').is_displayed(), 'an ADMIN has the jobs page in the navigation')
        browser.go(host.base + '/console/#/jobs')
        browser.wait_visible('#jobs-action', 'the jobs form')
        Select(browser.find('#jobs-action')).select_by_value('cancel')
        browser.find('#jobs-reason').send_keys('the OrphanStep producer was removed in release 2.0')
        browser.find('#jobs-count').click()
        error = wait_for('the page asks for a filter', lambda: browser.visible('#jobs-error'))
        check('at least one filter' in error.text, 'a job without a filter is refused by the page: %r' % error.text)
        Select(browser.find('#jobs-status')).select_by_value('PENDING')
        browser.find('#jobs-event-type').send_keys('OrphanStep')
        browser.screenshot('jobs-form')
        browser.screenshot('jobs-form-390px', width=390)
        browser.find('#jobs-count').click()
        preview = wait_for('the job\'s dry run', lambda: browser.visible('#jobs-preview [data-field="count"]'))
        check(preview.text.startswith('%d event(s)' % orphans), 'the dry run counts ours only: %r' % preview.text)
        pending_orphans = lambda: int(db.sql("SELECT count(*) FROM event_publication WHERE event_type = 'OrphanStep' "
                                             "AND status = 'PENDING'"))
        check(pending_orphans() == orphans + 1, 'the dry run changes nothing')
        browser.find('#jobs-confirm').click()
        answer = wait_for('the job\'s answer', lambda: browser.visible('#jobs-result [data-outcome="ok"]'), timeout=60)
        check(answer.text.startswith('Cancel: %d event(s) are DISCARDED' % orphans), 'the job is over: %r' % answer.text)
        check(int(db.sql("SELECT count(*) FROM event_publication WHERE event_type = 'OrphanStep' AND company_id = '%s' "
                         "AND status = 'DISCARDED'" % OURS)) == orphans, 'every counted event is discarded')
        check(pending_orphans() == 1, "another company's event is untouched")
        check(int(db.sql("SELECT count(*) FROM audit_event a JOIN event_publication e ON e.event_id::text = a.target_id "
                         "WHERE e.event_type = 'OrphanStep'")) >= orphans, 'an audit row per event')
        browser.screenshot('jobs-done-390px', width=390)
        finished = wait_for('the finished job in the list', lambda: browser.visible('#jobs-list tr[data-operation-id]'))
        check(finished.find_element(browser.By.CSS_SELECTOR, '[data-field="state"]').text == 'done' and
              '%d of %d' % (orphans, orphans) in finished.text, 'the list shows the job as it ended: %r' % finished.text)

        # A running job is stopped from the list: a replay over a paused handler waits with it
        # after its first batch, so it is still running when the page shows it.
        db.sql("INSERT INTO outbox_handler_pause (handler_name, paused_by) VALUES ('scripted', 'console-test')")
        db.sql("NOTIFY outboxd_handlers, 'scripted'")
        wait_for('the host to see the pause', lambda: 'outbox_handler_paused{handler="scripted"} 1'
                 in host.request('GET', '/metrics')[2], timeout=30)
        status, _, body = host.request('POST', '/api/v1/admin/operations', {
            'action': 'replay', 'handler': 'scripted', 'filter': {'event_type': 'TestRequested', 'status': 'COMPLETED'},
            'reason': 'a replay left waiting behind a paused handler', 'dry_run': False},
            {'Authorization': 'Bearer ' + admin, 'Idempotency-Key': 'console-test-stop-1'})
        check(status == 202, 'a replay job starts: %d %s' % (status, body))
        waiting = json.loads(body)['operation_id']
        row = '#jobs-list tr[data-operation-id="%s"]' % waiting
        wait_for('the replay to wait for its handler', lambda: db.sql(
            "SELECT done > 0 FROM outbox_operation WHERE id = '%s' AND state = 'running'" % waiting) == 't', timeout=60)
        browser.find('#jobs-refresh').click()
        wait_for('the running job in the list', lambda: browser.visible(row + ' [data-action="stop-job"]'))
        browser.screenshot('jobs-running')
        browser.screenshot('jobs-running-390px', width=390)
        browser.find(row + ' [data-action="stop-job"]').click()
        stopped = wait_for('the stop\'s answer', lambda: browser.visible('#jobs-list-result [data-outcome="ok"]'))
        check('is cancelled' in stopped.text, 'the page says the job stopped: %r' % stopped.text)
        wait_for('the list to show it cancelled', lambda: browser.visible(row) is not None and
                 browser.text(row + ' [data-field="state"]') == 'cancelled' and not browser.find_all(row + ' button'))
        check(db.sql("SELECT state FROM outbox_operation WHERE id = '%s'" % waiting) == 'cancelled', 'the job is cancelled')
        check(int(db.sql("SELECT count(*) FROM audit_event WHERE action = 'outbox.operation_cancel' AND target_id = '%s'"
                         % waiting)) == 1, 'the stop is audited')
        db.sql("DELETE FROM outbox_handler_pause WHERE handler_name = 'scripted'")
        db.sql("NOTIFY outboxd_handlers, 'scripted'")
        wait_for('the replayed events to complete after the resume',
                 lambda: int(db.sql("SELECT count(*) FROM event_publication WHERE status IN ('PENDING', 'PROCESSING') "
                                    "AND event_type = 'TestRequested'")) == 0, timeout=120)
        sign_out(browser)

        # A platform role: pause and resume a handler on the fleet page.
        sign_in(browser, host, token('ops@platform', 'PLATFORM_ADMIN', 'platform'))
        check(browser.wait_visible('#nav-fleet').is_displayed() and not browser.find('#nav-review').is_displayed(),
              'a platform role sees the fleet link, not the company pages')
        wait_for('the fleet handlers', lambda: browser.visible('#fleet-handlers tr[data-handler="scripted"][data-paused="false"]'))
        check(browser.visible('#fleet-hosts tr[data-host]') is not None, 'the fleet lists the host')
        check(browser.visible('#fleet-mismatches[data-empty]') is not None and browser.visible('#fleet-builds[data-empty]') is not None,
              'one host: no mismatch')
        with open(args.plugin, 'rb') as plugin_file:
            digest = hashlib.sha256(plugin_file.read()).hexdigest()
        shown = browser.find('#fleet-hosts tr[data-host] [data-sha256]')
        check(shown.get_attribute('data-sha256') == digest and shown.text == digest[:12],
              'the host shows the SHA-256 of the plugin file it loaded: %s' % shown.get_attribute('data-sha256'))
        # Another host joins (its registration writes this row) with another build of scripted
        # and a mailer for TestRequested: both hosts are highlighted, both mismatches listed.
        other = 'ab' * 32
        db.sql("INSERT INTO outbox_host (host_id, version, started_at, last_heartbeat_at, heartbeat_interval_ms, enabled, handlers) "
               "VALUES ('other-host:7', '0.2.0', now(), now(), 60000, true, "
               "'[{\"handler\": \"scripted\", \"event_types\": [\"TestRequested\"], \"file\": \"libscripted.so\", "
               "\"abi\": \"1.1\", \"sha256\": \"%s\"}, {\"handler\": \"mailer\", \"event_types\": [\"TestRequested\"], "
               "\"file\": \"libmailer.so\", \"abi\": \"1.1\", \"sha256\": \"%s\"}]')" % (other, 'cd' * 32))
        browser.driver.refresh()
        wait_for('the mismatch', lambda: browser.visible('#fleet-mismatches tr.mismatch[data-event-type="TestRequested"]'))
        builds = browser.visible('#fleet-builds tr.mismatch[data-handler="scripted"]')
        check(builds is not None and {e.get_attribute('data-sha256') for e in builds.find_elements(browser.By.CSS_SELECTOR, '[data-sha256]')}
              == {digest, other}, 'the two builds of scripted are listed')
        hosts = browser.find_all('#fleet-hosts tr[data-host]')
        check(len(hosts) == 2 and all('mismatch' in (h.get_attribute('class') or '') for h in hosts),
              'both hosts of the mismatch are highlighted')
        browser.screenshot('fleet-mismatch')
        browser.screenshot('fleet-390px', width=390)
        db.sql("DELETE FROM outbox_host WHERE host_id = 'other-host:7'")
        browser.driver.refresh()
        wait_for('the mismatch to go', lambda: browser.visible('#fleet-mismatches[data-empty]') and browser.visible('#fleet-builds[data-empty]'))
        browser.find('#fleet-handlers tr[data-handler="scripted"] [data-action="pause"]').click()
        wait_for('the handler to show paused', lambda: browser.visible('#fleet-handlers tr[data-handler="scripted"][data-paused="true"]'))
        check(db.sql("SELECT count(*) FROM outbox_handler_pause WHERE handler_name = 'scripted'") == '1', 'paused in the database')
        check('paused' in browser.text('#fleet-result'), 'the pause answer is shown')
        browser.screenshot('fleet-paused')
        browser.find('#fleet-handlers tr[data-handler="scripted"] [data-action="resume"]').click()
        wait_for('the handler to show running', lambda: browser.visible('#fleet-handlers tr[data-handler="scripted"][data-paused="false"]'))
        check(db.sql("SELECT count(*) FROM outbox_handler_pause WHERE handler_name = 'scripted'") == '0', 'resumed in the database')
        check(browser.visible('#fleet-handlers tr[data-handler="scripted"][data-circuit="closed"]') is not None
              and browser.visible('#fleet-handlers .badge.circuit-open') is None, 'no circuit badge on a running handler')
        # An open circuit breaker (its pause, as a host writes it): a badge of its own and the
        # next probe; resuming it from the page closes it.
        db.sql("INSERT INTO outbox_handler_pause (handler_name, paused_by, probe_after) "
               "VALUES ('scripted', 'circuit-breaker', now() + interval '30 seconds')")
        browser.driver.refresh()
        badge = wait_for('the circuit-open badge', lambda: browser.visible(
            '#fleet-handlers tr[data-handler="scripted"][data-paused="true"][data-circuit="open"] .badge.circuit-open'))
        check(badge.text == 'circuit open', 'the badge says the circuit is open: %r' % badge.text)
        row_text = browser.text('#fleet-handlers tr[data-handler="scripted"]')
        check('by circuit-breaker' in row_text and 'next probe' in row_text,
              'the row names the breaker and its next probe: %r' % row_text)
        browser.screenshot('fleet-circuit-open')
        browser.screenshot('fleet-circuit-open-390px', width=390)
        browser.find('#fleet-handlers tr[data-handler="scripted"] [data-action="resume"]').click()
        wait_for('the breaker to close', lambda: browser.visible('#fleet-handlers tr[data-handler="scripted"][data-circuit="closed"]'))
        check(db.sql("SELECT count(*) FROM outbox_handler_pause WHERE handler_name = 'scripted'") == '0',
              'resuming closes the breaker in the database')
        browser.screenshot('fleet')
        sign_out(browser)

        # VIEWER: reads, but no action buttons; a forged action is refused by the API.
        viewer = token('victor@acme', 'VIEWER', OURS)
        sign_in(browser, host, viewer)
        wait_for('the viewer overview', lambda: page_counts(browser) == db.counts(OURS))
        check(browser.find('#nav-fleet').is_displayed() is False, 'no fleet link for a VIEWER')
        review_group_without_actions(browser, host, 'a VIEWER')
        browser.screenshot('review-viewer')
        status, _, body = host.request('POST', '/api/v1/admin/outbox-events/retry',
                                       {'filter': {'event_type': 'TestRequested'}, 'reason': 'forged by a viewer'},
                                       {'Authorization': 'Bearer ' + viewer, 'Idempotency-Key': 'forged-1'})
        check(status == 403, 'a forged re-drive with a VIEWER token is refused: %d %s' % (status, body))
        status, _, _ = host.request('POST', '/api/v1/admin/outbox-events/%s/discard' % rejected[1],
                                    {'expected_version': 1, 'reason': 'forged by a viewer'},
                                    {'Authorization': 'Bearer ' + viewer, 'Idempotency-Key': 'forged-2'})
        check(status == 403, 'a forged discard with a VIEWER token is refused: %d' % status)
        check(db.counts(OURS)['REVIEW_REQUIRED'] == 4, 'the forged actions changed nothing')
        sign_out(browser)

        # Another company's ADMIN sees its own events only.
        sign_in(browser, host, token('gina@globex', 'ADMIN', THEIRS))
        wait_for('their overview', lambda: page_counts(browser) == db.counts(THEIRS))
        check(page_counts(browser)['COMPLETED'] == 0 and page_counts(browser)['REVIEW_REQUIRED'] == 2, 'their counts only')
        browser.go(host.base + '/console/#/review')
        wait_for('their review group', lambda: group_row(browser, 'TestBatch', 'HTTP_503'))
        check(group_row(browser, 'TestBatch', 'HTTP_503').find_element(browser.By.CSS_SELECTOR, '[data-field="count"]').text == '2',
              'their group counts their 2 events')
        check(group_row(browser, 'TestRequested', 'HTTP_422') is None, 'our group is not shown to them')
        browser.go(host.base + '/console/#/event/' + victim)
        wait_for('our event refused to them', lambda: browser.text('#event-error'))
        check(not browser.find_all('#event-fields') and 'customer cancelled' not in browser.find('#page').text,
              'nothing of our event is shown to them')
        check(db.counts(THEIRS)['REVIEW_REQUIRED'] == len(theirs), 'their events are untouched')
        browser.screenshot('other-company-event')
        sign_out(browser)

        # A company without events: zeros, and each list says it is empty.
        sign_in(browser, host, token('ida@initech', 'ADMIN', 'initech'))
        wait_for('the empty overview', lambda: page_counts(browser) == {s: 0 for s in STATUSES})
        check(browser.visible('#by-event-type[data-empty]') is not None, 'the by-type list says it is empty')
        check(browser.text('#oldest-unfinished tr[data-handler="scripted"] td.num') == '0s',
              'every handler is caught up for a company without events')
        browser.go(host.base + '/console/#/review')
        empty = wait_for('the empty review list', lambda: browser.visible('#review-groups[data-empty]'))
        check(empty.text.strip() != '', 'the empty review list says so')
        browser.screenshot('review-empty')
        sign_out(browser)

        # Behind a proxy that puts the operator's token into admin.console_token_header: the
        # page signs in by itself (the header is added to the browser's requests here).
        host.stop()
        host.env['OUTBOX_ADMIN_CONSOLE_TOKEN_HEADER'] = PROXY_HEADER
        host.start()
        proxied = token('hal@acme', 'HR', OURS)
        status, _, body = host.request('GET', '/console/session', headers={PROXY_HEADER: proxied})
        check(status == 200 and json.loads(body) == {'token': proxied}, '/console/session echoes the proxy header')
        status, _, _ = host.request('GET', '/console/session')
        check(status == 404, '/console/session without the header is 404')
        status, _, _ = host.request('GET', '/console/session', headers={PROXY_HEADER: 'not a token'})
        check(status == 400, '/console/session refuses a header value that is not a JWT')
        check('<meta name="outboxd-proxy-session" content="on">' in host.request('GET', '/console/')[2],
              'the page is marked as having a proxy session')
        browser.driver.execute_cdp_cmd('Network.enable', {})
        browser.driver.execute_cdp_cmd('Network.setExtraHTTPHeaders', {'headers': {PROXY_HEADER: proxied}})
        browser.driver.execute_script('sessionStorage.clear()')
        browser.clean_load(host.base + '/console/', '#who-sub', 'the page signed in by the proxy')
        wait_for('the proxy sign-in', lambda: browser.text('#who-sub') == 'hal@acme')
        check(browser.text('#who-role') == 'HR', 'the proxy token\'s role is shown')
        wait_for('the HR overview', lambda: page_counts(browser) == db.counts(OURS))
        review_group_without_actions(browser, host, 'HR')
        browser.driver.execute_cdp_cmd('Network.setExtraHTTPHeaders', {'headers': {}})

        errors = [e for e in browser.console_errors() if 'Content Security Policy' in e or 'Refused' in e]
        check(not errors, 'the page broke its Content-Security-Policy: %s' % errors)
    except Exception:
        if host is not None and os.path.exists(host.log_path):
            with open(host.log_path) as log:
                sys.stderr.write('--- host log (tail) ---\n' + log.read()[-4000:] + '\n')
        if browser is not None:
            try:
                browser.screenshot('failure')
                sys.stderr.write('browser console: %s\n' % browser.console_errors())
            except Exception:
                pass
        raise
    finally:
        if browser is not None:
            browser.quit()
        if host is not None:
            host.stop()
        db.drop()


def review_group_without_actions(browser, host, who):
    """`who` has no replay page, and opens our TestRequested/HTTP_422 review group: its events
    are listed, and `who` gets no control to re-drive, select or discard them."""
    check(not browser.find('#nav-replay').is_displayed(), '%s has no replay page in the navigation' % who)
    browser.go(host.base + '/console/#/replay')
    browser.wait_visible('#replay-not-admin', who + ' on the replay page')
    check(not browser.find_all('#replay-handler'), '%s gets no replay form' % who)
    check(not browser.find('#nav-jobs').is_displayed(), '%s has no jobs page in the navigation' % who)
    browser.go(host.base + '/console/#/jobs')
    browser.wait_visible('#jobs-not-admin', who + ' on the jobs page')
    check(not browser.find_all('#jobs-action'), '%s gets no jobs form' % who)
    browser.go(host.base + '/console/#/review')
    wait_for(who + ' review groups', lambda: group_row(browser, 'TestRequested', 'HTTP_422'))
    group_row(browser, 'TestRequested', 'HTTP_422').find_element(browser.By.CSS_SELECTOR, '[data-action="show-group"]').click()
    wait_for(who + ' group events', lambda: len(browser.find_all('#group-events tr[data-event-id]')) == 3)
    for css in ('#redrive-group', '#redrive-selected', '[data-action="discard"]', 'input.select-event', '#action-reason'):
        check(not browser.find_all(css), '%s sees no %s' % (who, css))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--outboxd', required=True)
    parser.add_argument('--plugin', required=True, help='the scripted fixture plugin (.so)')
    parser.add_argument('--psql', default=shutil.which('psql') or 'psql')
    parser.add_argument('--artifacts', required=True, help='where the screenshots go')
    args = parser.parse_args()
    if not os.environ.get('OUTBOX_TEST_DATABASE_URL'):
        sys.exit('console_test: OUTBOX_TEST_DATABASE_URL is not set (scripts/test.sh sets it)')
    try:
        import selenium  # noqa: F401
    except ImportError:
        sys.exit('console_test: python3-selenium is missing (scripts/install-deps.sh installs it)')
    os.makedirs(args.artifacts, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix='outbox-console-')
    try:
        run(args, workdir)
    except Failure as e:
        sys.exit('console_test: FAILED: %s (screenshots in %s)' % (e, args.artifacts))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print('console_test: passed; screenshots in ' + args.artifacts)


if __name__ == '__main__':
    main()
