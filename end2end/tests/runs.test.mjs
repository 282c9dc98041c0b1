// Run pages: /runs lists runs with their live status; /runs/{id} shows the timeline (messages, tool calls with
// status and duration), segments, and a pending approval answerable inline, and follows the run as it moves.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, eventually, resultPath } from './harness.mjs';

const SCRIPT = `
- content: |
    The disk is **92 %** full. I will remove old logs.
  tool_calls:
    - name: shell
      arguments:
        command: find /var/log -mtime +30 -delete
- content: Old logs removed; the disk is at 61 %.
`;

let server;
let browser;

before(async () => {
  server = await startServer({ scripts: { 'logs.yaml': SCRIPT }, env: { HOLDPOINT_SHELL: 'dry-run' } });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const agent = {
  name: 'log-janitor',
  model: 'script:logs.yaml',
  tools: ['shell'],
  approval_policy: { tools: { shell: 'prompt' } },
};

test('the run page shows the timeline, answers its approval inline and follows the run to the end', async () => {
  const created = await api(server, 'POST', '/runs', { agent, input: 'Free some disk space on web-1', project: 'ops' });
  assert.equal(created.status, 201, JSON.stringify(created.json));
  const id = created.json.id;
  await eventually('the run waits for approval', async () =>
    (await api(server, 'GET', `/runs/${id}`)).json.status === 'waiting_for_approval', 20_000);

  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  await signIn(page, server, '/runs');
  const row = page.locator(`[data-testid="run-item"][data-run-id="${id}"]`);
  assert.equal((await row.getByTestId('run-status').textContent()).trim(), 'waiting for approval');
  await row.getByRole('link', { name: 'log-janitor' }).click();
  await page.waitForURL(`**/runs/${id}`);
  await waitForLive(page);

  assert.equal((await page.getByTestId('run-status').first().textContent()).trim(), 'waiting for approval');
  const roles = await page.getByTestId('timeline-message').evaluateAll((m) => m.map((e) => e.dataset.role));
  assert.deepEqual(roles.filter((r) => r !== 'system'), ['user', 'assistant']);
  const call = page.getByTestId('timeline-tool-call');
  assert.equal(await call.getAttribute('data-status'), 'pending_approval');
  assert.equal(await page.getByTestId('run-segment').count(), 1);
  await page.screenshot({ path: resultPath('run-waiting.png'), fullPage: true });

  const question = page.getByTestId('run-question');
  await question.getByTestId('inline-comment').fill('fine, they are archived');
  // Claimed meanwhile by the operator's token: the panel says so, and what is being typed stays.
  const questionId = await question.getAttribute('data-question-id');
  assert.equal((await api(server, 'POST', `/questions/${questionId}/claim`, {})).status, 200);
  await question.getByTestId('inline-claimed-by').waitFor({ timeout: 5_000 });
  assert.equal(await question.getByTestId('inline-comment').inputValue(), 'fine, they are archived');
  await question.getByTestId('inline-approve').click();

  // Live: the page follows the run to its end without a reload.
  await page.getByTestId('run-result').waitFor({ timeout: 15_000 });
  assert.equal((await page.getByTestId('run-status').first().textContent()).trim(), 'completed');
  assert.match(await page.getByTestId('run-result').textContent(), /61 %/);
  assert.equal(await page.getByTestId('timeline-tool-call').getAttribute('data-status'), 'completed');
  await page.getByTestId('tool-duration').waitFor();
  assert.equal(await page.getByTestId('run-questions').count(), 0);
  await page.screenshot({ path: resultPath('run-completed.png'), fullPage: true });
  await page.close();
});

test('the runs list filters by status and updates a status live', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/runs?status=completed');
  await waitForLive(page);
  await page.getByTestId('run-item').first().waitFor();
  assert.equal(await page.getByTestId('run-item').count(), 1);
  await page.goto(`${server.baseUrl}/runs`);
  await waitForLive(page);
  const created = await api(server, 'POST', '/runs', { agent, input: 'Again', project: 'ops' });
  await page.goto(`${server.baseUrl}/runs`);
  await waitForLive(page);
  const row = page.locator(`[data-testid="run-item"][data-run-id="${created.json.id}"]`);
  await row.getByTestId('run-status').filter({ hasText: 'waiting for approval' }).waitFor({ timeout: 10_000 });
  const [pending] = (await api(server, 'GET', `/questions?status=pending&run_id=${created.json.id}`)).json.items;
  await api(server, 'POST', `/questions/${pending.id}/answer`, { value: false, comment: 'not today' });
  await row.getByTestId('run-status').filter({ hasText: 'completed' }).waitFor({ timeout: 15_000 });
  await page.close();
});
