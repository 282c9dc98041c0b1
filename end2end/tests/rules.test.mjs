// Settings → Rules in the browser: an admin writes a rule whose CEL condition is broken — "Check" and "Save" show the
// fault next to its field path and nothing is stored, and the text typed stays — then fixes it and saves version 1,
// and tests a call, which the rule decides. A person who is no admin sees the same document read-only.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForHydration, resultPath } from './harness.mjs';

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

const rulesYaml = (condition) => `default: ask
rules:
  # Reading is harmless.
  - name: http-reads
    tools: ["http_request"]
    when: args.method == "GET"
    decision: allow
  - name: big-payments
    tools: ["payments_*"]
    when: ${condition}
    decision: deny
    reason: Payments over 1000 go through finance.
`;

test('an admin fixes a broken condition, saves version 1 and tests a call; others read the rules', async () => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 1400 } });
  await signIn(page, server, '/settings/rules');
  await waitForHydration(page);
  assert.match(await page.getByTestId('rules-version').textContent(), /Version 0/);
  assert.equal(await page.getByTestId('settings-tab-rules').getAttribute('aria-current'), 'page');

  // A condition CEL cannot parse: "Check" names the field and the position, and stores nothing.
  const broken = rulesYaml('args.amount > > 1000');
  const editor = page.getByTestId('rules-yaml');
  await editor.fill(broken);
  await page.getByTestId('rules-check').click();
  await page.getByTestId('rules-fault').first().waitFor();
  assert.deepEqual(await page.getByTestId('rules-fault-field').allTextContents(), ['rules[1].when']);
  assert.match(await page.getByTestId('rules-fault-message').first().textContent(), /at 1:\d+/);

  // "Save" is refused the same way: nothing stored, and the text as typed is still there to fix.
  await page.getByTestId('rules-save').click();
  await page.getByTestId('rules-fault').first().waitFor();
  assert.deepEqual(await page.getByTestId('rules-fault-field').allTextContents(), ['rules[1].when']);
  const stored = await api(server, 'GET', '/rules');
  assert.equal(stored.json.version, 0);
  assert.deepEqual(stored.json.rules, []);
  assert.equal(await editor.inputValue(), broken);

  // Fixed, it checks and saves as version 1, which the page shows with who saved it.
  await editor.fill(rulesYaml('args.amount > 1000'));
  await page.getByTestId('rules-check').click();
  await page.getByText('Valid: 2 rules would be saved').waitFor();
  await page.getByTestId('rules-save').click();
  await page.getByText('Saved as version 1').waitFor();
  assert.match(await page.getByTestId('rules-version').textContent(), /Version 1, saved by reviewer at/);
  const saved = await api(server, 'GET', '/rules');
  assert.equal(saved.json.version, 1);
  assert.deepEqual(saved.json.rules.map((rule) => [rule.name, rule.when, rule.decision]), [
    ['http-reads', 'args.method == "GET"', 'allow'],
    ['big-payments', 'args.amount > 1000', 'deny'],
  ]);
  assert.match(await editor.inputValue(), /big-payments/);

  // A call of 5000 is denied by the rule; one of 20 by nothing (the default asks).
  await page.getByTestId('rules-test-tool').fill('payments_transfer');
  await page.getByTestId('rules-test-arguments').fill('{"amount": 5000, "to": "ACME"}');
  await page.getByTestId('rules-test-agent').fill('billing-bot');
  await page.getByTestId('rules-test-submit').click();
  await page.getByTestId('rules-test-result').waitFor();
  assert.equal(await page.getByTestId('rules-test-decision').textContent(), 'deny');
  assert.equal(await page.getByTestId('rules-test-rule').getAttribute('data-rule'), 'big-payments');
  assert.equal(await page.getByTestId('rules-test-matched').textContent(), 'big-payments');
  await page.screenshot({ path: resultPath('settings-rules.png'), fullPage: true });

  await page.getByTestId('rules-test-arguments').fill('{"amount": 20}');
  await page.getByTestId('rules-test-submit').click();
  await page.waitForFunction(() =>
    document.querySelector('[data-testid="rules-test-decision"]')?.textContent === 'ask');
  assert.equal(await page.getByTestId('rules-test-rule').getAttribute('data-rule'), '');
  assert.equal(await page.getByTestId('rules-test-matched').textContent(), 'none');

  // Arguments that are no JSON are a fault of the field `arguments`.
  await page.getByTestId('rules-test-arguments').fill('{amount: 20');
  await page.getByTestId('rules-test-submit').click();
  await page.getByTestId('rules-fault').first().waitFor();
  assert.deepEqual(await page.getByTestId('rules-fault-field').allTextContents(), ['arguments']);
  // A test saves nothing, so its refusal says what it did not do.
  assert.match(await page.getByTestId('rules-error').last().textContent(), /^Not valid, the call was not tested: 1 fault\./);
  await page.close();

  // An approver reads the same document but cannot change it: no Check, no Save, the editor read-only.
  const approver = { username: 'avery', password: 'avery passphrase 1' };
  const created = await api(server, 'POST', '/members', { ...approver, role: 'approver' });
  assert.equal(created.status, 201);
  const context = await browser.newContext();
  const other = await context.newPage();
  await signIn(other, server, '/settings/rules', approver);
  await waitForHydration(other);
  await other.getByTestId('rules-read-only').waitFor();
  assert.equal(await other.getByTestId('rules-yaml').getAttribute('readonly'), '');
  assert.match(await other.getByTestId('rules-yaml').inputValue(), /big-payments/);
  assert.match(await other.getByTestId('rules-version').textContent(), /Version 1/);
  assert.equal(await other.getByTestId('rules-save').count(), 0);
  assert.equal(await other.getByTestId('rules-check').count(), 0);
  // Testing a call is for anyone.
  await other.getByTestId('rules-test-tool').fill('http_request');
  await other.getByTestId('rules-test-arguments').fill('{"method": "GET", "url": "https://example.org"}');
  await other.getByTestId('rules-test-submit').click();
  await other.getByTestId('rules-test-result').waitFor();
  assert.equal(await other.getByTestId('rules-test-decision').textContent(), 'allow');
  await other.screenshot({ path: resultPath('settings-rules-read-only.png'), fullPage: true });
  await context.close();
});
