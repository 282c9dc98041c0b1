// The foundation's live page: the inbox is rendered on the server, hydrated in Chromium, and shows a question
// created through the API without a reload.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, resultPath } from './harness.mjs';

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

test('pages need a session: /inbox sends a stranger to sign in, a wrong token is refused', async () => {
  const page = await browser.newPage();
  await page.goto(`${server.baseUrl}/inbox`);
  await page.waitForURL(/\/signin\?next=/);
  await page.getByTestId('signin-token-toggle').click();
  await page.getByTestId('signin-token').fill('hp_wrong');
  await page.getByTestId('signin-submit').click();
  await page.getByTestId('signin-error').waitFor();
  const events = await fetch(`${server.baseUrl}/api/v1/events`);
  assert.equal(events.status, 401);
  await page.close();
});

test('a question created through the API appears on the open inbox within 2 s, without a reload', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (err) => errors.push(err.message));
  page.on('console', (msg) => msg.type() === 'error' && errors.push(msg.text()));
  // Every Content-Security-Policy violation of the page (Playwright's init scripts are not subject to the policy).
  await page.addInitScript(() => {
    window.__cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) =>
      window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const policies = [];
  page.on('response', (response) => {
    if (response.request().resourceType() === 'document') policies.push(response.headers()['content-security-policy']);
  });

  await api(server, 'POST', '/questions', { title: 'Already waiting', project: 'infra' });
  await signIn(page, server, '/inbox');
  await page.getByTestId('question-item').filter({ hasText: 'Already waiting' }).waitFor();
  await waitForLive(page);
  // The inbox hydrated (and went live) under a nonce-based policy, with nothing refused.
  const policy = policies.at(-1) ?? '';
  assert.match(policy, /script-src 'self' 'nonce-[A-Za-z0-9]+' 'wasm-unsafe-eval'/, `the inbox's policy: ${policy}`);
  assert.deepEqual(await page.evaluate(() => window.__cspViolations), [], 'no CSP violations');
  const navigations = [];
  page.on('framenavigated', (frame) => frame === page.mainFrame() && navigations.push(frame.url()));

  const started = Date.now();
  const created = await api(server, 'POST', '/questions', { title: 'Rotate the prod database password?' });
  assert.equal(created.status, 201);
  await page.getByTestId('question-item').filter({ hasText: 'Rotate the prod database password?' }).waitFor({ timeout: 2_000 });
  const elapsed = Date.now() - started;

  assert.deepEqual(navigations, [], 'the page did not reload');
  assert.equal(await page.getByTestId('question-item').count(), 2);
  const first = page.getByTestId('question-item').first();
  assert.equal(await first.getAttribute('data-question-id'), created.json.id, 'the newest question is on top');
  assert.deepEqual(errors, [], 'no errors in the browser console');
  console.log(`question visible after ${elapsed} ms`);
  await page.screenshot({ path: resultPath('inbox.png'), fullPage: true });
  await page.close();
});
