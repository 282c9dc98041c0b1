// The inbox's filters live in the URL (and work without JavaScript), new questions that match them appear live,
// and j/k/Enter move through the list and open a question.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, waitForHydration, eventually, resultPath } from './harness.mjs';

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

test('a list longer than a page shows more in place, and without JavaScript on the page that starts there', async () => {
  // 201 approvals of one project: the inbox and the approval queue load 200 at a time.
  const bulk = [];
  for (let n = 0; n < 201; n += 1) {
    const body = { title: `Bulk ${n}`, project: 'bulk', kind: 'approval', action: { tool_name: 'bulk_tool', arguments: { n } } };
    let created = await api(server, 'POST', '/questions', body);
    // Past the creation burst, the token's rate says when to go on.
    while (created.status === 429) {
      await new Promise((resolve) => setTimeout(resolve, created.json.error.details.retry_after_seconds * 1000));
      created = await api(server, 'POST', '/questions', body);
    }
    assert.equal(created.status, 201, JSON.stringify(created.json));
    bulk.push(created.json.id);
  }
  const oldest = (page) => page.locator(`[data-question-id="${bulk[0]}"]`);

  const page = await browser.newPage();
  await signIn(page, server, '/inbox?project=bulk');
  assert.equal(await page.getByTestId('question-item').count(), 200);
  assert.match(await page.getByTestId('pending-count').innerText(), /^200 questions$/);
  assert.match(await page.getByTestId('list-cut').innerText(), /more: “Show more” under the list loads them/);
  assert.equal(await oldest(page).count(), 0, 'newest first: the oldest is on the next page');
  await waitForHydration(page);
  await page.getByTestId('list-more').click();
  await oldest(page).waitFor();
  assert.equal(await page.getByTestId('question-item').count(), 201);
  assert.equal(await page.getByTestId('list-more').count(), 0, 'the list is whole');
  assert.equal(await page.getByTestId('list-cut').count(), 0);
  assert.equal(new URL(page.url()).search, '?project=bulk', 'the page stays where it is');
  await page.screenshot({ path: resultPath('inbox-shown-more.png'), fullPage: true });
  await page.close();

  // The queue loads the approvals that run out first: the newest is on the next page, and joins at the bottom.
  const queue = await browser.newPage();
  await signIn(queue, server, '/approvals?project=bulk');
  assert.equal(await queue.getByTestId('approval-item').count(), 200);
  assert.equal(await oldest(queue).count(), 1);
  const newest = queue.locator(`[data-question-id="${bulk[200]}"]`);
  assert.equal(await newest.count(), 0);
  await queue.getByText('Select all 200 shown (more below)').waitFor();
  await waitForHydration(queue);
  await queue.getByTestId('list-more').click();
  await newest.waitFor();
  assert.equal(await queue.getByTestId('approval-item').count(), 201);
  assert.equal(await queue.getByTestId('approval-item').last().getAttribute('data-question-id'), bulk[200]);
  await queue.getByText('Select all 201 matching').waitFor();
  await queue.close();

  // Without JavaScript, "Show more" is a link to the page that starts after the last row, which links back.
  const context = await browser.newContext({ javaScriptEnabled: false });
  const plain = await context.newPage();
  await signIn(plain, server, '/inbox?project=bulk');
  await plain.getByTestId('list-more').click();
  await plain.waitForURL(/project=bulk&after=/);
  assert.deepEqual(await titles(plain), ['Bulk 0']);
  assert.match(await plain.locator('.list-head').innerText(), /^1 question further down the list/);
  assert.equal(await plain.getByTestId('list-more').count(), 0);
  await plain.getByTestId('list-top').click();
  await plain.waitForURL((url) => url.search === '?project=bulk');
  assert.equal(await plain.getByTestId('question-item').count(), 200);
  // A position the list never gave out is refused, and says how to go on.
  await plain.goto(`${server.baseUrl}/inbox?project=bulk&after=nonsense`);
  assert.match(await plain.getByRole('alert').innerText(), /not one it gave out/);
  await context.close();

  // Signing in on the way to a filtered list lands on that list, its search's escaped space and all.
  const narrow = await browser.newPage();
  await signIn(narrow, server, `/inbox?project=bulk&q=${encodeURIComponent('Bulk 7')}`);
  assert.equal(new URL(narrow.url()).search, '?project=bulk&q=Bulk%207');
  await narrow.getByTestId('question-item').first().waitFor();
  assert.equal(await narrow.getByTestId('question-item').count(), 11, 'Bulk 7 and Bulk 70 to 79');
  assert.equal(await narrow.getByTestId('list-cut').count(), 0, 'a list that holds them all says nothing');
  await narrow.close();
});
