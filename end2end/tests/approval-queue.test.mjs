// The approval queue, for deciding quickly: the most urgent first, each call on one line that expands to its
// arguments, the selection said before a batch, a confirmation when it holds a critical approval, and the form
// cleared after.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, resultPath } from './harness.mjs';

let server;
let browser;

before(async () => {
  server = await startServer();
  browser = await launchBrowser();
  const ask = (title, urgency, timeout_seconds, action) =>
    api(server, 'POST', '/questions', { title, kind: 'approval', urgency, timeout_seconds, action });
  for (const [title, urgency, timeout, action] of [
    ['Clean the build cache', 'normal', 600, { tool_name: 'shell', arguments: { command: 'rm -rf ./build-cache' } }],
    ['Restart the staging workers', 'high', 1800, { tool_name: 'http_request', arguments: { method: 'POST', url: 'https://staging/restart' } }],
    ['terraform apply on prod', 'critical', 3600, { tool_name: 'shell', arguments: { command: 'terraform apply -auto-approve', workdir: 'infra/prod' } }],
    ['Rotate the staging keys', 'high', 600, { tool_name: 'shell', arguments: { command: 'vault rotate staging' } }],
  ]) {
    const created = await ask(title, urgency, timeout, action);
    assert.equal(created.status, 201, JSON.stringify(created.json));
  }
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const titles = async (page) =>
  (await page.getByTestId('approval-item').locator('.question-title').allTextContents()).map((t) => t.trim());

test('most urgent first; one line per call that expands; a critical batch is summarised and confirmed', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  await signIn(page, server, '/approvals');
  await waitForLive(page);
  assert.deepEqual(await titles(page), [
    'terraform apply on prod', 'Rotate the staging keys', 'Clean the build cache', 'Restart the staging workers',
  ], 'by urgency, then deadline; the group of the most urgent first');

  const first = page.getByTestId('approval-item').first();
  const call = first.getByTestId('approval-call');
  assert.equal((await call.innerText()).trim(), 'shell command=terraform apply -auto-approve workdir=infra/prod');
  assert.ok((await call.boundingBox()).height < 30, 'one line');
  assert.equal(await first.getByTestId('approval-arguments').isVisible(), false, 'the arguments are folded');
  await call.click();
  assert.match(await first.getByTestId('approval-arguments').innerText(), /"workdir": "infra\/prod"/);

  assert.equal(await page.getByTestId('batch-approve').isDisabled(), true);
  await page.getByTestId('approval-select-all').check();
  assert.equal(
    (await page.getByTestId('batch-selection').textContent()).trim(),
    '4 approvals, 1 critical: terraform apply on prod',
  );
  await page.getByTestId('batch-comment').fill('reviewed in the change meeting');
  await page.getByTestId('batch-approve').click();
  // Held for a confirmation that names the critical one; nothing is sent yet.
  const confirm = page.getByTestId('batch-confirm');
  await confirm.waitFor();
  assert.match(await confirm.textContent(), /critical.*terraform apply on prod/);
  await page.screenshot({ path: resultPath('approval-queue-confirm.png') });
  await page.getByTestId('batch-confirm-cancel').click();
  await confirm.waitFor({ state: 'detached' });
  assert.equal((await api(server, 'GET', '/questions?status=pending&kind=approval')).json.items.length, 4);

  await page.getByTestId('batch-approve').click();
  await page.getByTestId('batch-confirm-yes').click();
  await page.getByTestId('batch-summary').filter({ hasText: '4 approved' }).waitFor({ timeout: 10_000 });
  assert.equal(await page.getByTestId('approval-result').count(), 4);
  assert.equal(await page.getByTestId('batch-comment').inputValue(), '', 'the comment is cleared');
  assert.equal((await page.getByTestId('batch-selection').textContent()).trim(), 'Nothing selected');
  assert.equal(await page.getByTestId('batch-approve').isDisabled(), true);
  await page.screenshot({ path: resultPath('approval-queue-done.png') });
  await page.close();
});

test('a selection without a critical approval is sent without a confirmation', async () => {
  const created = await api(server, 'POST', '/questions', {
    title: 'Clear the CDN cache', kind: 'approval', urgency: 'normal',
    action: { tool_name: 'http_request', arguments: { method: 'POST', url: 'https://cdn/purge' } },
  });
  const page = await browser.newPage();
  await signIn(page, server, '/approvals');
  await waitForLive(page);
  // Each checkbox is named after its approval, for a screen reader.
  await page.getByRole('checkbox', { name: 'Select “Clear the CDN cache”' }).check();
  assert.equal((await page.getByTestId('batch-selection').textContent()).trim(), '1 approval');
  await page.getByTestId('batch-reject').click();
  await page.getByTestId('batch-summary').filter({ hasText: '1 rejected' }).waitFor();
  assert.equal(await page.getByTestId('batch-confirm').count(), 0);
  await page.close();
});

test('an approval answered elsewhere leaves the selection; a claim elsewhere keeps the focus where it is', async () => {
  const ask = async (title) => {
    const created = await api(server, 'POST', '/questions', {
      title, kind: 'approval', urgency: 'low',
      action: { tool_name: 'dns_update', arguments: { record: title } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    return created.json.id;
  };
  const [a, b, c] = [await ask('Point www at the new host'), await ask('Drop the old MX record'), await ask('Lower the TTL')];
  const page = await browser.newPage();
  await signIn(page, server, '/approvals');
  await waitForLive(page);
  const box = (title) => page.getByRole('checkbox', { name: `Select “${title}”` });
  await box('Point www at the new host').check();
  await box('Drop the old MX record').check();
  assert.equal((await page.getByTestId('batch-approve').textContent()).trim(), 'Approve 2');

  // Someone else rejects one of them: it is no longer chosen, and the batch would not send it.
  assert.equal((await api(server, 'POST', `/questions/${b}/answer`, { value: false, comment: 'keep MX' })).status, 200);
  await page.getByTestId('batch-approve').filter({ hasText: 'Approve 1' }).waitFor({ timeout: 5_000 });
  assert.equal((await page.getByTestId('batch-selection').textContent()).trim(), '1 approval');

  // A claim of another approval of the same tool redraws that row only: the focused checkbox keeps the focus.
  await box('Lower the TTL').focus();
  assert.equal((await api(server, 'POST', `/questions/${a}/claim`, {})).status, 200);
  await page.locator(`[data-question-id="${a}"]`).getByTestId('approval-claimed-by').waitFor({ timeout: 5_000 });
  assert.ok(await box('Lower the TTL').evaluate((el) => el === document.activeElement), 'the focus stayed');

  await page.getByTestId('batch-approve').click();
  await page.getByTestId('batch-summary').filter({ hasText: '1 approved' }).waitFor();
  const stored = async (id) => (await api(server, 'GET', `/questions/${id}`)).json;
  assert.equal((await stored(a)).status, 'answered');
  assert.equal((await stored(b)).response.value, false, 'the rejection given elsewhere stands');
  assert.equal((await stored(c)).status, 'pending');
  await page.close();
});

test("a claim that lapses stops showing in the queue and in the inbox, though nothing else about the row changed", async () => {
  const created = await api(server, 'POST', '/questions', {
    title: 'Purge the CDN cache', kind: 'approval', urgency: 'low',
    action: { tool_name: 'http_request', arguments: { method: 'POST', url: 'https://cdn/purge' } },
  });
  assert.equal(created.status, 201, JSON.stringify(created.json));
  const id = created.json.id;
  const context = await browser.newContext();
  const queue = await context.newPage();
  await signIn(queue, server, '/approvals');
  await waitForLive(queue);
  const inbox = await context.newPage();
  await inbox.goto(`${server.baseUrl}/inbox`);
  await waitForLive(inbox);
  assert.equal((await api(server, 'POST', `/questions/${id}/claim`, { ttl_seconds: 3 })).status, 200);
  const queued = queue.locator(`[data-question-id="${id}"]`).getByTestId('approval-claimed-by');
  const listed = inbox.locator(`li[data-question-id="${id}"]`).getByTestId('row-claimed-by');
  await queued.waitFor({ timeout: 5_000 });
  await listed.waitFor({ timeout: 5_000 });
  await queued.waitFor({ state: 'detached', timeout: 10_000 });
  await listed.waitFor({ state: 'detached', timeout: 10_000 });
  await context.close();
});
