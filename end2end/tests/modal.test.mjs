// The live modal: a question created through the API opens a modal on an open page within a second, with the right
// input for its response type; questions queue; answering in one tab (or anywhere) closes it in the others and says
// by whom; the keyboard alone can answer; Escape defers; focus stays inside.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, waitForHydration, eventually, resultPath } from './harness.mjs';

let server;
let browser;
let context;

before(async () => {
  server = await startServer();
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

/** A signed-in page on `path` whose event stream is open. */
async function livePage(path = '/inbox') {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (err) => errors.push(err.message));
  page.errors = errors;
  await openSignedIn(page, path);
  await waitForLive(page);
  return page;
}

/** Opens `path` on `page`, signing in through the form if the context is not signed in yet. */
async function openSignedIn(page, path) {
  await page.goto(`${server.baseUrl}${path}`);
  if (page.url().includes('/signin')) {
    await page.getByTestId('signin-username').fill(server.username);
    await page.getByTestId('signin-password').fill(server.password);
    await page.getByTestId('signin-password-submit').click();
    await page.waitForURL((url) => url.pathname === path);
  }
}

async function ask(body) {
  const created = await api(server, 'POST', '/questions', body);
  assert.equal(created.status, 201, JSON.stringify(created.json));
  return created.json;
}

async function stored(id) {
  return (await api(server, 'GET', `/questions/${id}`)).json;
}

const modal = (page) => page.getByTestId('live-modal');

async function modalShows(page, id, timeout = 2_000) {
  await page.locator(`[data-testid="live-modal"][data-question-id="${id}"]`).waitFor({ timeout });
}

test('a question opens the modal within 1 s, rendered, and the keyboard alone answers it', async () => {
  const page = await livePage('/inbox');
  const started = Date.now();
  const q = await ask({
    title: 'Which region should we deploy to?',
    body: 'We need **one** region.\n\n- `eu-west-1` is closest\n- `us-east-1` is cheapest\n\n<script>window.pwned = 1</script>',
    context: { ticket: 'OPS-12' },
    project: 'infra',
    timeout_seconds: 600,
  });
  await modalShows(page, q.id, 1_000);
  const elapsed = Date.now() - started;
  console.log(`modal open ${elapsed} ms after the API call`);
  assert.ok(elapsed < 1_000, `opened after ${elapsed} ms`);

  assert.equal(await page.getByTestId('modal-title').textContent(), 'Which region should we deploy to?');
  const body = page.getByTestId('modal-body');
  assert.equal(await body.locator('strong').textContent(), 'one');
  assert.equal(await body.locator('li').count(), 2);
  assert.match(await body.textContent(), /<script>window.pwned = 1<\/script>/, 'raw HTML is shown as text');
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.match(await modal(page).getByTestId('countdown').textContent(), /^(9|10):\d\d left$/);
  assert.match(await page.getByTestId('modal-context').textContent(), /OPS-12/);

  // Keyboard only: focus starts on the answer, Tab moves to the comment, then to the button.
  await page.waitForFunction(() => document.activeElement?.dataset.testid === 'modal-text');
  await page.keyboard.type('eu-west-1');
  await page.keyboard.press('Tab');
  await page.keyboard.type('closest to users');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.dataset.testid), 'modal-submit');
  await page.keyboard.press('Enter');
  await modal(page).waitFor({ state: 'detached', timeout: 3_000 });
  await page.getByTestId('modal-notice').filter({ hasText: 'Answer sent' }).waitFor();
  const answered = await stored(q.id);
  assert.equal(answered.status, 'answered');
  assert.deepEqual(answered.response, { value: 'eu-west-1', comment: 'closest to users' });
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('several questions queue; Escape defers one; focus stays in the modal', async () => {
  const page = await livePage('/inbox');
  const first = await ask({ title: 'First of two', response_type: 'boolean', kind: 'non_blocking' });
  const second = await ask({ title: 'Second of two', response_type: 'boolean', kind: 'non_blocking' });
  await modalShows(page, first.id);
  await page.getByTestId('modal-queue-count').filter({ hasText: '1 of 2' }).waitFor();
  assert.equal(await page.getByTestId('live-modal').count(), 1, 'one modal, not two stacked');

  // Tab around more often than there are controls: focus never leaves the dialog.
  for (let i = 0; i < 12; i += 1) await page.keyboard.press('Tab');
  assert.ok(await page.evaluate(() => !!document.activeElement.closest('[data-testid="live-modal"]')));
  await page.keyboard.press('Shift+Tab');
  assert.ok(await page.evaluate(() => !!document.activeElement.closest('[data-testid="live-modal"]')));

  await page.keyboard.press('Escape');
  await modalShows(page, second.id);
  assert.equal((await stored(first.id)).status, 'pending', 'deferring does not answer');
  await page.getByTestId('modal-yes').click();
  await modal(page).waitFor({ state: 'detached' });
  assert.equal((await stored(second.id)).response.value, true);
  // The deferred question is still in the inbox.
  await page.getByTestId('question-item').filter({ hasText: 'First of two' }).waitFor();
  await page.close();
});

test('once the modal closes, the focus is back where it was before it opened', async () => {
  const page = await livePage('/inbox');
  await page.getByTestId('filter-project').focus();
  const q = await ask({ title: 'Focus comes back', response_type: 'boolean', kind: 'non_blocking' });
  await modalShows(page, q.id);
  await eventually('the focus moves into the modal', () =>
    page.evaluate(() => !!document.activeElement?.closest('[data-testid="live-modal"]')));
  await page.getByTestId('modal-yes').click();
  await modal(page).waitFor({ state: 'detached' });
  await eventually('the focus is back on the field', () =>
    page.evaluate(() => document.activeElement?.getAttribute('data-testid') === 'filter-project'));
  await page.close();
});

test('the keys work with the focus outside the modal: Tab brings it in, Escape defers', async () => {
  const page = await livePage('/inbox');
  const q = await ask({ title: 'Keys from anywhere', response_type: 'boolean', kind: 'non_blocking' });
  await modalShows(page, q.id);
  // As when a key comes before the focus has moved into a newly shown question, or a click left the dialog.
  const outside = () => page.evaluate(() => {
    document.activeElement?.blur();
    return !document.activeElement?.closest('[data-testid="live-modal"]');
  });
  assert.ok(await outside());
  await page.keyboard.press('Tab');
  assert.ok(await page.evaluate(() => !!document.activeElement.closest('[data-testid="live-modal"]')));
  assert.ok(await outside());
  await page.keyboard.press('Escape');
  await modal(page).waitFor({ state: 'detached', timeout: 2_000 });
  assert.equal((await stored(q.id)).status, 'pending', 'deferring does not answer');
  await page.close();
});

test('answering in tab A closes the modal in tab B and says by whom; so does an answer from the API', async () => {
  const tabA = await livePage('/inbox');
  const tabB = await livePage('/inbox');
  const q = await ask({
    title: 'Pick a colour',
    response_type: 'choice',
    options: [{ value: 'red', label: 'Red' }, { value: 'blue', label: 'Blue', description: 'the calm one' }],
  });
  await modalShows(tabA, q.id);
  await modalShows(tabB, q.id);
  await tabA.getByTestId('modal-option-blue').check();
  await tabA.getByTestId('modal-submit').click();
  await modal(tabB).waitFor({ state: 'detached', timeout: 3_000 });
  const notice = await tabB.getByTestId('modal-notice').textContent();
  assert.match(notice, /Pick a colour/);
  assert.match(notice, /answered by .+: Blue/, 'a choice reads as its label');

  const other = await ask({ title: 'Answered from the CLI' });
  await modalShows(tabB, other.id);
  const answered = await api(server, 'POST', `/questions/${other.id}/answer`, { value: 'done' });
  assert.equal(answered.status, 200);
  await modal(tabB).waitFor({ state: 'detached', timeout: 3_000 });
  assert.match(await tabB.getByTestId('modal-notice').textContent(), /Answered from the CLI.*answered by/);
  const cancelled = await ask({ title: 'Cancelled by the agent' });
  await modalShows(tabB, cancelled.id);
  await api(server, 'POST', `/questions/${cancelled.id}/cancel`, null);
  await modal(tabB).waitFor({ state: 'detached', timeout: 3_000 });
  assert.match(await tabB.getByTestId('modal-notice').textContent(), /cancelled/);
  await tabA.close();
  await tabB.close();
});

test('each response type has its input: multi-choice, error recovery, form', async () => {
  const page = await livePage('/inbox');

  const multi = await ask({
    title: 'Which regions?',
    response_type: 'multi_choice',
    options: ['eu', 'us', 'ap'].map((value) => ({ value, label: value.toUpperCase() })),
  });
  await modalShows(page, multi.id);
  await page.screenshot({ path: resultPath('modal-multi-choice.png') });
  await page.getByTestId('modal-option-eu').check();
  await page.getByTestId('modal-option-ap').check();
  await page.getByTestId('modal-submit').click();
  await modal(page).waitFor({ state: 'detached' });
  assert.deepEqual((await stored(multi.id)).response.value.sort(), ['ap', 'eu']);

  const recovery = await ask({
    title: 'The migration plan could not be fetched',
    kind: 'error_recovery',
    body: 'GET https://plans.internal/orders-db answered **503**.',
    options: [{ value: 'use_backup', label: 'Use the backup plan' }],
  });
  await modalShows(page, recovery.id);
  assert.equal(await modal(page).getAttribute('data-response-type'), 'error_recovery');
  await page.screenshot({ path: resultPath('modal-error-recovery.png') });
  await page.getByTestId('modal-option-retry').check();
  await page.getByTestId('modal-comment').fill('the service is back');
  await page.getByTestId('modal-submit').click();
  await modal(page).waitFor({ state: 'detached' });
  assert.deepEqual((await stored(recovery.id)).response, { value: 'retry', comment: 'the service is back' });

  const form = await ask({
    title: 'Triage SUP-1',
    response_type: 'form',
    fields: [
      { key: 'severity', label: 'Severity', response_type: 'choice', required: true,
        options: [{ value: 'sev1', label: 'SEV1' }, { value: 'sev2', label: 'SEV2' }] },
      { key: 'users', label: 'Affected users', response_type: 'number', required: true },
      { key: 'customer', label: 'Customer impact', response_type: 'boolean' },
      { key: 'note', label: 'Note', response_type: 'text' },
    ],
  });
  await modalShows(page, form.id);
  await page.screenshot({ path: resultPath('modal-form.png') });
  await page.getByTestId('modal-submit').click();
  await page.getByTestId('modal-error').filter({ hasText: 'required' }).waitFor();
  await page.getByTestId('modal-field-severity').selectOption('sev2');
  await page.getByTestId('modal-field-users').fill('120');
  await page.getByTestId('modal-field-customer').selectOption('true');
  await page.getByTestId('modal-submit').click();
  await modal(page).waitFor({ state: 'detached' });
  assert.deepEqual((await stored(form.id)).response.value, { severity: 'sev2', users: 120, customer: true });
  await page.close();
});

test('an approval with editable arguments: validated, diffed, and both versions stored', async () => {
  const page = await livePage('/inbox');
  const q = await ask({
    title: 'Run terraform apply?',
    kind: 'approval',
    action: { tool_name: 'shell', arguments: { command: 'terraform apply', dir: 'infra/prod' } },
    allow_edit: true,
  });
  await modalShows(page, q.id);
  assert.equal(await page.getByTestId('modal-tool').textContent(), 'shell');
  const args = page.getByTestId('modal-arguments');
  assert.deepEqual(JSON.parse(await args.inputValue()), { command: 'terraform apply', dir: 'infra/prod' });

  await args.fill('{ "command": ');
  await page.getByTestId('arguments-error').waitFor();
  assert.ok(await page.getByTestId('modal-approve').isDisabled(), 'invalid JSON cannot be approved');

  await args.fill(JSON.stringify({ command: 'terraform plan', dir: 'infra/prod' }, null, 2));
  await page.getByTestId('arguments-error').waitFor({ state: 'detached' });
  const diff = page.getByTestId('arguments-diff');
  assert.match(await diff.locator('.diff-del').textContent(), /terraform apply/);
  assert.match(await diff.locator('.diff-add').textContent(), /terraform plan/);
  await page.screenshot({ path: resultPath('modal-approval.png') });
  await page.getByTestId('modal-approve').click();
  await modal(page).waitFor({ state: 'detached' });
  const answered = await stored(q.id);
  assert.equal(answered.response.value, true);
  assert.deepEqual(answered.action.arguments, { command: 'terraform apply', dir: 'infra/prod' });
  assert.deepEqual(answered.response.edited_arguments, { command: 'terraform plan', dir: 'infra/prod' });
  await page.close();
});

test('a question asked between the page render and its event stream still opens the modal', async () => {
  const page = await context.newPage();
  // Hold the app back after the server render, and ask meanwhile: the stream must start where the page was rendered.
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  await page.route('**/pkg/*.wasm', async (route) => { await held; await route.continue(); });
  await openSignedIn(page, '/inbox');
  const position = await page.locator('meta[name="holdpoint-event-position"]').getAttribute('content');
  assert.match(position, /^\d+$/, 'the render carries its event position');
  const q = await ask({ title: 'Asked while the page was still loading', timeout_seconds: 600 });
  release();
  await waitForLive(page);
  await modalShows(page, q.id, 5_000);
  await page.close();
});

test('a claim of a question that was there before does not bring it up', async () => {
  const before = await ask({ title: 'Asked before the page opened', timeout_seconds: 600 });
  const page = await livePage('/inbox');
  assert.equal((await api(server, 'POST', `/questions/${before.id}/claim`, {})).status, 200);
  // The claim reaches the page (its row shows it), and the modal stays closed.
  await page.locator(`li[data-question-id="${before.id}"] [data-testid="row-claimed-by"]`).waitFor({ timeout: 5_000 });
  await page.waitForTimeout(1_000);
  assert.equal(await modal(page).isVisible(), false, 'no modal for a question that was there before');
  // A question asked now still brings it up.
  const now = await ask({ title: 'Asked while the page is open', timeout_seconds: 600 });
  await modalShows(page, now.id);
  assert.deepEqual(page.errors, []);
  for (const q of [before, now]) await api(server, 'POST', `/questions/${q.id}/cancel`, null);
  await page.close();
});

test('an event stream the server refuses is opened again, the page says so meanwhile, and catches up', async () => {
  const page = await context.newPage();
  await page.route('**/api/v1/events**', (route) => route.fulfill({ status: 503, contentType: 'application/json',
    body: '{"error":{"code":"unavailable","message":"restarting"}}' }));
  await openSignedIn(page, '/inbox');
  await waitForHydration(page);
  await page.getByTestId('live-reconnecting').waitFor({ timeout: 10_000 });
  assert.match(await page.getByTestId('live-reconnecting').innerText(), /Not live: reconnecting/);
  await page.screenshot({ path: resultPath('live-reconnecting.png') });
  const missed = await ask({ title: 'Asked while the page was not live', timeout_seconds: 600 });
  await page.unroute('**/api/v1/events**');
  await waitForLive(page);
  await modalShows(page, missed.id, 5_000);
  assert.equal(await page.getByTestId('live-reconnecting').count(), 0);
  await api(server, 'POST', `/questions/${missed.id}/cancel`, null);
  await page.close();
});

test('Escape in a field holding typed text keeps the text; "Later" defers', async () => {
  const page = await livePage('/inbox');
  const q = await ask({ title: 'Which region?', response_type: 'text', timeout_seconds: 600 });
  await modalShows(page, q.id);
  await page.waitForFunction(() => document.activeElement?.dataset.testid === 'modal-text');
  await page.keyboard.type('eu-west');
  await page.keyboard.press('Escape');
  await page.waitForTimeout(300);
  assert.equal(await modal(page).isVisible(), true, 'the modal stays');
  assert.equal(await page.getByTestId('modal-text').inputValue(), 'eu-west', 'the text stays');
  await page.getByTestId('modal-defer').click();
  await modal(page).waitFor({ state: 'detached' });
  assert.equal((await stored(q.id)).status, 'pending');
  await api(server, 'POST', `/questions/${q.id}/cancel`, null);
  await page.close();
});
