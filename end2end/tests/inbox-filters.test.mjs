// The inbox's filters live in the URL (and work without JavaScript), new questions that match them appear live,
// and j/k/Enter move through the list and open a question.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, eventually, resultPath } from './harness.mjs';

let server;
let browser;
const ids = {};

before(async () => {
  server = await startServer();
  browser = await launchBrowser();
  const questions = [
    { title: 'Deploy billing v2 to production?', kind: 'approval', project: 'billing',
      action: { tool_name: 'deploy', arguments: { service: 'billing' } }, timeout_seconds: 3600 },
    { title: 'Which persona for the release notes?', project: 'docs', response_type: 'choice',
      options: [{ value: 'a', label: 'A' }, { value: 'b', label: 'B' }], timeout_seconds: 600 },
    { title: 'Mention the deprecation?', kind: 'non_blocking', project: 'docs', response_type: 'boolean' },
    { title: 'Rotate the infra keys?', project: 'infra', urgency: 'critical', body: 'They are **old**.', timeout_seconds: 1200 },
  ];
  for (const body of questions) {
    const created = await api(server, 'POST', '/questions', body);
    assert.equal(created.status, 201, JSON.stringify(created.json));
    ids[body.title] = created.json.id;
  }
  await api(server, 'POST', `/questions/${ids['Mention the deprecation?']}/answer`, { value: true });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const titles = async (page) =>
  (await page.getByTestId('question-link').allTextContents()).map((t) => t.trim());

test('filters go into the URL and select what they say; every item carries its kind and response type', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/inbox');
  assert.deepEqual((await titles(page)).length, 3, 'pending questions only by default');
  const kinds = await page.getByTestId('question-item').evaluateAll((items) =>
    items.map((i) => `${i.dataset.kind}/${i.dataset.responseType}`));
  assert.deepEqual(kinds.sort(), ['approval/approval', 'blocking/choice', 'blocking/text']);

  // Hydrated, a choice applies at once, in place: no Apply button, no reload.
  await waitForLive(page);
  assert.equal(await page.getByTestId('filter-apply').isVisible(), false, 'no Apply button with JavaScript');
  const navigations = [];
  page.on('framenavigated', (frame) => frame === page.mainFrame() && navigations.push(frame.url()));
  await page.getByTestId('filter-kind-approval').check();
  await page.waitForURL(/kind=approval/);
  await eventually('the list filtered', async () =>
    JSON.stringify(await titles(page)) === JSON.stringify(['Deploy billing v2 to production?']));
  await page.getByTestId('filter-q').fill('billing');
  await page.getByTestId('filter-q').press('Enter');
  await page.waitForURL(/kind=approval&q=billing|q=billing.*kind=approval/);
  await page.getByTestId('filter-kind-default').check();
  await page.waitForURL((url) => !url.search.includes('kind='));
  await eventually('the search alone', async () =>
    JSON.stringify(await titles(page)) === JSON.stringify(['Deploy billing v2 to production?']));
  await page.getByTestId('filter-status-all').check();
  await page.waitForURL(/status=all/);
  assert.ok(await page.getByTestId('filter-q').inputValue() === 'billing', 'the search stays');
  assert.ok(navigations.every((url) => url.includes('/inbox')), `in place: ${navigations}`);
  await page.screenshot({ path: resultPath('inbox-filters.png') });

  // Back shows the filters of the URL it goes back to, and the next choice goes on from them.
  await page.goBack();
  await page.waitForURL((url) => !url.search.includes('status=all'));
  await eventually('the bar follows Back', async () => await page.getByTestId('filter-status-default').isChecked());
  assert.equal(await page.getByTestId('filter-kind-default').isChecked(), true);
  await page.goBack();
  await page.waitForURL(/kind=approval/);
  await eventually('the bar follows Back again', async () => await page.getByTestId('filter-kind-approval').isChecked());
  assert.equal(await page.getByTestId('filter-q').inputValue(), 'billing');
  await page.goBack();
  await page.waitForURL((url) => !url.search.includes('q='));
  await eventually('the search empties', async () => (await page.getByTestId('filter-q').inputValue()) === '');
  await page.getByTestId('filter-urgency-high').check();
  await page.waitForURL(/urgency=high/);
  const search = new URL(page.url()).searchParams;
  assert.deepEqual([...search.keys()].sort(), ['kind', 'urgency'], `only what the bar shows: ${page.url()}`);
  assert.equal(search.get('kind'), 'approval');

  await page.goto(`${server.baseUrl}/inbox?status=all&project=docs`);
  assert.deepEqual((await titles(page)).sort(), ['Mention the deprecation?', 'Which persona for the release notes?']);
  await page.goto(`${server.baseUrl}/inbox?status=answered`);
  assert.deepEqual(await titles(page), ['Mention the deprecation?']);
  await page.goto(`${server.baseUrl}/inbox?q=ROTATE`);
  assert.deepEqual(await titles(page), ['Rotate the infra keys?']);
  await page.goto(`${server.baseUrl}/inbox?urgency=critical`);
  assert.deepEqual(await titles(page), ['Rotate the infra keys?']);
  assert.ok(await page.getByTestId('filter-urgency-critical').isChecked(), 'the form shows the URL');

  await page.goto(`${server.baseUrl}/inbox?sort=deadline`);
  assert.deepEqual(await titles(page), [
    'Which persona for the release notes?', 'Rotate the infra keys?', 'Deploy billing v2 to production?',
  ]);
  await page.goto(`${server.baseUrl}/inbox`);
  assert.deepEqual(await titles(page), [
    'Rotate the infra keys?', 'Which persona for the release notes?', 'Deploy billing v2 to production?',
  ], 'newest first');
  await page.close();
});

test('without JavaScript the filter form works too', async () => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await signIn(page, server, '/inbox');
  await page.getByTestId('filter-project').fill('infra');
  await page.getByTestId('filter-urgency-critical').check();
  await page.getByTestId('filter-apply').click();
  await page.waitForURL(/urgency=critical/);
  assert.deepEqual(await titles(page), ['Rotate the infra keys?']);
  await context.close();
});

test('live: a new question that matches the filters appears, one that does not stays out', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/inbox?kind=approval');
  await waitForLive(page);
  const other = await api(server, 'POST', '/questions', { title: 'Not an approval' });
  const approval = await api(server, 'POST', '/questions', {
    title: 'Restart the billing workers?', kind: 'approval', action: { tool_name: 'restart', arguments: {} },
  });
  await page.getByTestId('question-item').filter({ hasText: 'Restart the billing workers?' }).waitFor({ timeout: 2_000 });
  assert.deepEqual(await titles(page), ['Restart the billing workers?', 'Deploy billing v2 to production?']);
  // The live modal showed both; defer them to get back to the list.
  await page.locator(`[data-testid="live-modal"][data-question-id="${other.json.id}"]`).waitFor();
  await page.keyboard.press('Escape');
  await page.locator(`[data-testid="live-modal"][data-question-id="${approval.json.id}"]`).waitFor();
  await page.keyboard.press('Escape');
  await page.getByTestId('live-modal').waitFor({ state: 'detached' });
  // Resolved elsewhere: it leaves the pending list.
  await api(server, 'POST', `/questions/${approval.json.id}/answer`, { value: false, comment: 'not now' });
  await page.getByTestId('question-item').filter({ hasText: 'Restart the billing workers?' }).waitFor({ state: 'detached' });
  await api(server, 'POST', `/questions/${other.json.id}/cancel`, null);
  await page.close();
});

test('live: the text filter matches in any case, in the title or the body', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/inbox?q=%C3%9Cberweisung');
  await waitForLive(page);
  assert.deepEqual(await titles(page), []);
  const inTitle = await api(server, 'POST', '/questions', { title: 'ÜBERWEISUNG freigeben?', timeout_seconds: 900 });
  const inBody = await api(server, 'POST', '/questions', { title: 'Payment run', body: 'Eine überweisung fehlt.' });
  const neither = await api(server, 'POST', '/questions', { title: 'Rotate the logs?' });
  await page.getByTestId('question-item').filter({ hasText: 'Payment run' }).waitFor({ timeout: 2_000 });
  assert.deepEqual(await titles(page), ['Payment run', 'ÜBERWEISUNG freigeben?']);
  // The deadline arrived as RFC 3339 text and counts down.
  assert.match(await page.getByTestId('question-item').filter({ hasText: 'ÜBERWEISUNG freigeben?' }).innerText(), /1[45]:\d\d left/);
  for (const q of [inTitle, inBody, neither]) {
    await page.locator(`[data-testid="live-modal"][data-question-id="${q.json.id}"]`).waitFor();
    await page.keyboard.press('Escape');
  }
  await page.getByTestId('live-modal').waitFor({ state: 'detached' });
  for (const q of [inTitle, inBody, neither]) await api(server, 'POST', `/questions/${q.json.id}/cancel`, null);
  await page.close();
});

test('j/k move the selection and Enter opens the question', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  const items = page.getByTestId('question-item');
  await page.keyboard.press('j');
  await page.keyboard.press('j');
  assert.equal(await items.nth(1).getAttribute('aria-current'), 'true');
  await page.keyboard.press('k');
  assert.equal(await items.nth(0).getAttribute('aria-current'), 'true');
  assert.equal(await items.nth(1).getAttribute('aria-current'), null);
  await page.keyboard.press('j');
  const id = await items.nth(1).getAttribute('data-question-id');
  await page.screenshot({ path: resultPath('inbox-selected.png') });
  await page.keyboard.press('Enter');
  await page.waitForURL(`**/questions/${id}`);
  await page.getByTestId('question-page').waitFor();
  await page.close();
});

test('a filter that selects more than the list holds says so', async () => {
  for (let n = 0; n < 201; n += 1) {
    let created = await api(server, 'POST', '/questions', { title: `Bulk ${n}`, project: 'bulk', kind: 'non_blocking' });
    // Past the creation burst, the token's rate says when to go on.
    while (created.status === 429) {
      await new Promise((resolve) => setTimeout(resolve, created.json.error.details.retry_after_seconds * 1000));
      created = await api(server, 'POST', '/questions', { title: `Bulk ${n}`, project: 'bulk', kind: 'non_blocking' });
    }
    assert.equal(created.status, 201, JSON.stringify(created.json));
  }
  const page = await browser.newPage();
  await signIn(page, server, '/inbox?project=bulk');
  assert.equal(await page.getByTestId('question-item').count(), 200);
  assert.match(await page.getByTestId('list-cut').innerText(), /the first 200: narrow the filters/);
  await page.goto(`${server.baseUrl}/inbox?project=bulk&q=${encodeURIComponent('Bulk 7')}`);
  await page.getByTestId('question-item').first().waitFor();
  assert.equal(await page.getByTestId('list-cut').count(), 0, 'a list that holds them all says nothing');
  await page.close();
});
