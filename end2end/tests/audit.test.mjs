// The audit page: an admin finds it in the top bar, reads who decided what (with the diff of edited arguments),
// filters by the URL, exports the same selection, and reads it all without JavaScript too.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForHydration, eventually, resultPath } from './harness.mjs';

let server;
let browser;

before(async () => {
  server = await startServer();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test('the audit page lists decisions with their actors and diffs, filters by the URL and exports', async () => {
  // An agent asks (whoever asks for an approval may not approve it); the admin token answers.
  const agentToken = await api(server, 'POST', '/tokens', { name: 'migrator', role: 'agent' });
  assert.equal(agentToken.status, 201, JSON.stringify(agentToken.json));
  const asked = await fetch(`${server.baseUrl}/api/v1/questions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${agentToken.json.secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      title: 'Apply the migration?',
      kind: 'approval',
      allow_edit: true,
      action: { tool_name: 'shell', arguments: { command: 'migrate --all' } },
    }),
  });
  const approval = { status: asked.status, json: await asked.json() };
  assert.equal(approval.status, 201, JSON.stringify(approval.json));
  const answered = await api(server, 'POST', `/questions/${approval.json.id}/answer`, {
    value: true,
    edited_arguments: { command: 'migrate --dry-run' },
  });
  assert.equal(answered.status, 200, JSON.stringify(answered.json));
  const other = await api(server, 'POST', '/questions', { title: 'Still needed?' });
  await api(server, 'POST', `/questions/${other.json.id}/cancel`, { reason: 'obsolete' });

  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await signIn(page, server, '/inbox');
  await waitForHydration(page);
  await page.getByTestId('nav-audit').click();
  await page.waitForURL('**/audit');
  await page.getByTestId('audit-table').waitFor();

  const actions = await page.getByTestId('audit-action').allTextContents();
  // Newest first: the sign-in just now, the cancellation, the answer, the agent's token, the test person joining
  // (account, then membership), the bootstrap token.
  assert.deepEqual(actions, [
    'signin', 'question.cancelled', 'question.answered', 'token.created', 'member.added', 'user.created',
    'token.created',
  ]);
  const answer = page.locator('[data-testid="audit-entry"][data-action="question.answered"]');
  assert.equal((await answer.getByTestId('audit-actor').textContent()).trim(), 'bootstrap');
  assert.equal((await answer.getByTestId('audit-actor-kind').textContent()).trim(), 'token');
  assert.match(await answer.getByTestId('audit-diff').textContent(), /replace \/command: "migrate --dry-run"/);
  const signin = page.locator('[data-testid="audit-entry"][data-action="signin"]');
  assert.equal((await signin.getByTestId('audit-actor-kind').textContent()).trim(), 'human');
  await page.screenshot({ path: resultPath('audit.png'), fullPage: true });

  await page.getByTestId('audit-filter-action').selectOption('question.answered');
  await page.getByTestId('audit-filter-apply').click();
  await page.waitForURL(/action=question\.answered/);
  await eventually('the filtered list', async () => (await page.getByTestId('audit-entry').count()) === 1);
  assert.deepEqual(await page.getByTestId('audit-action').allTextContents(), ['question.answered']);

  const href = await page.getByTestId('audit-export-jsonl').getAttribute('href');
  assert.match(href, /^\/api\/v1\/audit\/export\?format=jsonl&action=question\.answered$/);
  const exported = await page.request.get(`${server.baseUrl}${href}`);
  assert.equal(exported.status(), 200);
  assert.match(exported.headers()['content-disposition'], /^attachment; filename="holdpoint-audit-default\.jsonl"$/);
  const lines = (await exported.text()).trim().split('\n').map((line) => JSON.parse(line));
  assert.equal(lines.length, 1);
  assert.deepEqual(lines[0].diff, [{ op: 'replace', path: '/command', value: 'migrate --dry-run' }]);
  const csv = await page.request.get(`${server.baseUrl}${await page.getByTestId('audit-export-csv').getAttribute('href')}`);
  assert.equal(csv.status(), 200);
  assert.equal((await csv.text()).trim().split('\r\n').length, 2, 'a header and the one entry');
  await page.close();

  // Without JavaScript the server renders the page complete, filters included.
  const context = await browser.newContext({ javaScriptEnabled: false });
  const plain = await context.newPage();
  await signIn(plain, server, '/inbox');
  await plain.goto(`${server.baseUrl}/audit?actor_kind=token`);
  const plainActions = await plain.getByTestId('audit-action').allTextContents();
  assert.deepEqual(plainActions, ['question.cancelled', 'question.answered', 'token.created', 'member.added', 'user.created']);
  await context.close();
});
