// The approval queue: 20 runs wait on a `shell` approval; selecting all and approving them with one comment shows
// 20 results and the runs go on. An item someone else answered first says so.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, eventually, resultPath } from './harness.mjs';

const SCRIPT = `
- content: I will clean the build cache.
  tool_calls:
    - name: shell
      arguments:
        command: rm -rf ./build-cache
- content: Done as you decided.
`;

let server;
let browser;

before(async () => {
  server = await startServer({ scripts: { 'cleaner.yaml': SCRIPT }, env: { HOLDPOINT_SHELL: 'dry-run' } });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const agent = {
  name: 'cleaner',
  model: 'script:cleaner.yaml',
  tools: ['shell'],
  approval_policy: { tools: { shell: 'prompt' } },
};

async function pendingApprovals() {
  const listed = await api(server, 'GET', '/questions?status=pending&kind=approval&limit=200');
  return listed.json.items;
}

test('select all, approve 20 with one comment: 20 results, and the runs go on', async () => {
  const runs = [];
  for (let i = 0; i < 20; i += 1) {
    const run = await api(server, 'POST', '/runs', { agent, input: `clean cache ${i}`, project: 'ci' });
    assert.equal(run.status, 201, JSON.stringify(run.json));
    runs.push(run.json.id);
  }
  await eventually('20 pending approvals', async () => (await pendingApprovals()).length === 20, 20_000);

  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await signIn(page, server, '/approvals');
  await waitForLive(page);
  assert.equal(await page.getByTestId('approval-item').count(), 20);
  const group = page.getByTestId('approval-group');
  assert.equal(await group.count(), 1);
  assert.equal(await group.getAttribute('data-tool'), 'shell');
  await page.screenshot({ path: resultPath('approvals.png') });

  await page.getByTestId('approval-select-all').check();
  await page.getByTestId('batch-comment').fill('routine cache clean-up');
  assert.equal((await page.getByTestId('batch-approve').textContent()).trim(), 'Approve 20');
  await page.getByTestId('batch-approve').click();
  await page.getByTestId('batch-summary').filter({ hasText: '20 approved' }).waitFor({ timeout: 10_000 });
  const results = page.getByTestId('approval-result');
  assert.equal(await results.count(), 20);
  assert.deepEqual([...new Set(await results.evaluateAll((r) => r.map((e) => e.dataset.status)))], ['answered']);
  await page.screenshot({ path: resultPath('approvals-results.png') });

  const finished = await eventually('all 20 runs complete', async () => {
    const all = await Promise.all(runs.map(async (id) => (await api(server, 'GET', `/runs/${id}`)).json));
    return all.every((r) => r.status === 'completed') && all;
  }, 30_000);
  assert.equal(finished.length, 20);
  const calls = await api(server, 'GET', `/runs/${runs[0]}/tool-calls`);
  assert.equal(calls.json.items[0].decision_comment, 'routine cache clean-up');
  await page.close();
});

test('an approval answered elsewhere first shows "already answered by"; reject sends the reason', async () => {
  const a = await api(server, 'POST', '/runs', { agent, input: 'first', project: 'ci' });
  const b = await api(server, 'POST', '/runs', { agent, input: 'second', project: 'ci' });
  await eventually('2 pending approvals', async () => (await pendingApprovals()).length === 2, 20_000);
  const page = await browser.newPage();
  await signIn(page, server, '/approvals');
  await waitForLive(page);
  await page.getByTestId('approval-select-all').check();
  // Someone else answers one of them while this page still shows it as pending and selected.
  const [first] = await pendingApprovals();
  // Block the event stream's effect by answering through the API; the page keeps its selection.
  await api(server, 'POST', `/questions/${first.id}/answer`, { value: true });
  const item = page.locator(`[data-testid="approval-item"][data-question-id="${first.id}"]`);
  await page.getByTestId('batch-comment').fill('not on a Friday');
  await page.getByTestId('batch-reject').click();
  await page.getByTestId('batch-summary').waitFor();
  const texts = await page.getByTestId('approval-result').allTextContents();
  // Either the page still had it selected (then its result says who was first) or the live update removed it.
  if (await item.count()) {
    assert.match(await item.getByTestId('approval-result').textContent(), /already answered by/);
  } else {
    assert.deepEqual(texts, ['Rejected']);
  }
  assert.ok(texts.includes('Rejected'));
  await eventually('both runs complete', async () => {
    const runs = await Promise.all([a, b].map(async (r) => (await api(server, 'GET', `/runs/${r.json.id}`)).json));
    return runs.every((r) => r.status === 'completed');
  }, 20_000);
  await page.close();
});
