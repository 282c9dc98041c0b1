// Escalation in the browser: an admin sets a policy in Settings (a wrong one is refused with the reason and changes
// nothing), and a question asked under it shows its chain — in the live modal and on its page — each step done or
// when it is due, the next one marked, as the policy reminds and then escalates it.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForHydration, eventually } from './harness.mjs';

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

const steps = async (page, testid) =>
  page.getByTestId(testid).locator('li').evaluateAll((items) =>
    items.map((item) => [item.dataset.state, item.querySelector('.step-label').textContent.trim()]));

test('an admin sets a policy in Settings and a question shows its chain as it is reminded and escalated', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/settings/workspace');
  await waitForHydration(page);
  const form = page.getByTestId('escalation-form');
  assert.equal(await form.getByTestId('escalation-row').count(), 0, 'no policy yet');

  // Escalating before reminding is refused, with the API's reason, and nothing is stored.
  await form.getByTestId('escalation-add').click();
  const row = form.getByTestId('escalation-row').first();
  await row.getByTestId('escalation-remind').fill('0.2');
  await row.getByTestId('escalation-escalate').fill('0.1');
  await row.getByTestId('escalation-to').selectOption('role:admin');
  await form.getByTestId('escalation-save').click();
  await form.getByTestId('settings-error').waitFor();
  assert.match(await form.getByTestId('settings-error').textContent(), /must come after the reminder/);
  assert.deepEqual((await api(server, 'GET', '/escalation-policies')).json, { items: [] });

  // Remind after 3 s, escalate to the admins after 6 s.
  await row.getByTestId('escalation-remind').fill('0.05');
  await row.getByTestId('escalation-escalate').fill('0.1');
  await form.getByTestId('escalation-save').click();
  await form.getByTestId('settings-ok').waitFor();
  assert.deepEqual((await api(server, 'GET', '/escalation-policies')).json, {
    items: [{ kind: 'approval', urgency: 'high', remind_after_seconds: 3, escalate_after_seconds: 6,
              escalate_to: { role: 'admin' } }],
  });

  // The modal shows the chain of a question asked now: the reminder next, then the escalation, then the deadline.
  const asked = await api(server, 'POST', '/questions', { kind: 'approval', title: 'Restart the payment service?',
    timeout_seconds: 600, action: { tool_name: 'shell', arguments: { command: 'systemctl restart payments' } } });
  assert.equal(asked.status, 201);
  await page.getByTestId('live-modal').waitFor();
  assert.deepEqual(await steps(page, 'modal-escalation'),
    [['next', 'Reminder'], ['later', 'Escalate to any admin'], ['deadline', 'Deadline']]);
  assert.match(await page.getByTestId('modal-escalation').textContent(), /in \d s/);

  // On the question's page, each step shows done as the policy takes it.
  await page.goto(`${server.baseUrl}/questions/${asked.json.id}`);
  await waitForHydration(page);
  await eventually('reminded', async () => {
    await page.reload();
    return JSON.stringify(await steps(page, 'question-escalation')) ===
      JSON.stringify([['done', 'Reminder'], ['next', 'Escalate to any admin'], ['deadline', 'Deadline']]);
  }, 15_000);
  await eventually('escalated', async () => {
    await page.reload();
    return JSON.stringify(await steps(page, 'question-escalation')) ===
      JSON.stringify([['done', 'Reminder'], ['done', 'Escalate to any admin'], ['deadline', 'Deadline']]);
  }, 15_000);
  const question = (await api(server, 'GET', `/questions/${asked.json.id}`)).json;
  assert.deepEqual(question.assignee, { role: 'admin' });
  await page.close();
});
