// Answering from the inbox list: a yes/no question, a choice and an approval answered from their rows with the mouse
// and with the keyboard; several selected rows answered at once, with a confirmation when one is critical; the keys
// listed by `?`; and the split view, which shows the question under the cursor beside the list on a wide screen and
// gives way to one column on a phone.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, eventually, resultPath } from './harness.mjs';

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

const CHOICES = [
  { value: 'eu', label: 'Europe' },
  { value: 'us', label: 'United States' },
  { value: 'ap', label: 'Asia Pacific' },
];

/** Asks one of each question a row can answer, with `tag` in the titles; returns their ids by kind. */
async function askAll(tag, urgency = 'normal') {
  const ask = async (body) => {
    const created = await api(server, 'POST', '/questions', { urgency, timeout_seconds: 3600, ...body });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    return created.json.id;
  };
  return {
    yesNo: await ask({ title: `${tag}: publish the changelog?`, response_type: 'boolean' }),
    choice: await ask({ title: `${tag}: which region first?`, response_type: 'choice', options: CHOICES }),
    approval: await ask({
      title: `${tag}: run the migration?`,
      kind: 'approval',
      action: { tool_name: 'shell', arguments: { command: 'migrate --apply' } },
    }),
  };
}

const stored = async (id) => (await api(server, 'GET', `/questions/${id}`)).json;

async function answeredWith(id, value) {
  const question = await eventually(`question ${id} answered`, async () => {
    const q = await stored(id);
    return q.status === 'answered' ? q : null;
  });
  assert.deepEqual(question.response.value, value);
  assert.equal(question.answered_by, server.username);
}

const row = (page, id) => page.locator(`[data-testid="question-item"][data-question-id="${id}"]`);

async function openInbox(viewport = { width: 1280, height: 860 }) {
  const page = await browser.newPage({ viewport });
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  return page;
}

/** Presses j or k until the row of `id` is under the cursor. */
async function moveTo(page, id) {
  for (let i = 0; i < 50; i += 1) {
    const { at, target } = await page.getByTestId('question-item').evaluateAll((rows, id) => ({
      at: rows.findIndex((r) => r.getAttribute('aria-current') === 'true'),
      target: rows.findIndex((r) => r.dataset.questionId === id),
    }), id);
    if (at === target) return;
    await page.keyboard.press(at === -1 || at < target ? 'j' : 'k');
  }
  throw new Error(`the cursor never reached ${id}`);
}

test('a yes/no question, a choice and an approval are answered from their rows with the mouse', async () => {
  const ids = await askAll('Mouse');
  const page = await openInbox();
  await row(page, ids.yesNo).getByTestId('row-affirm').click();
  await row(page, ids.yesNo).waitFor({ state: 'detached' });
  await answeredWith(ids.yesNo, true);
  assert.match(await page.getByTestId('row-notice').textContent(), /Mouse: publish the changelog\?.*yes/);

  const choice = row(page, ids.choice);
  assert.deepEqual(
    (await choice.getByTestId(/^row-choice-/).allTextContents()).map((t) => t.trim()),
    ['Europe', 'United States', 'Asia Pacific'],
  );
  await choice.getByTestId('row-choice-2').click();
  await choice.waitFor({ state: 'detached' });
  await answeredWith(ids.choice, 'us');

  const approval = row(page, ids.approval);
  assert.equal((await approval.getByTestId('row-affirm').textContent()).trim(), 'Approve');
  assert.equal((await approval.getByTestId('row-refuse').textContent()).trim(), 'Reject');
  await approval.getByTestId('row-refuse').click();
  await approval.waitFor({ state: 'detached' });
  await answeredWith(ids.approval, false);
  await page.close();
});

test('the same three are answered with the keyboard: a, 3 and r on the row under the cursor', async () => {
  const ids = await askAll('Keys');
  const page = await openInbox();
  await moveTo(page, ids.yesNo);
  await page.keyboard.press('a');
  await row(page, ids.yesNo).waitFor({ state: 'detached' });
  await answeredWith(ids.yesNo, true);

  await moveTo(page, ids.choice);
  await page.keyboard.press('3');
  await row(page, ids.choice).waitFor({ state: 'detached' });
  await answeredWith(ids.choice, 'ap');

  await moveTo(page, ids.approval);
  await page.keyboard.press('a');
  await row(page, ids.approval).waitFor({ state: 'detached' });
  await answeredWith(ids.approval, true);

  // A key a row has no answer for does nothing: a text question stays pending.
  const text = await api(server, 'POST', '/questions', { title: 'Keys: any last words?' });
  await page.reload();
  await waitForLive(page);
  await moveTo(page, text.json.id);
  await page.keyboard.press('a');
  await page.keyboard.press('1');
  await page.waitForTimeout(300);
  assert.equal((await stored(text.json.id)).status, 'pending');
  await api(server, 'POST', `/questions/${text.json.id}/cancel`, null);
  await page.close();
});

test('x selects rows; a answers them all, after a confirmation when one is critical', async () => {
  const routine = await askAll('Batch');
  const critical = await askAll('Critical batch', 'critical');
  const page = await openInbox();
  await moveTo(page, routine.approval);
  await page.keyboard.press('x');
  await moveTo(page, critical.approval);
  await page.keyboard.press('x');
  // The mouse selects too.
  await row(page, routine.yesNo).getByTestId('row-select').check();
  assert.equal((await page.getByTestId('marked-count').textContent()).trim(), '3 selected');
  await page.keyboard.press('a');
  await page.getByTestId('marked-confirm').waitFor();
  assert.equal((await stored(critical.approval)).status, 'pending', 'nothing is sent before the confirmation');
  await page.getByTestId('marked-confirm-yes').click();
  for (const id of [routine.approval, critical.approval, routine.yesNo]) await answeredWith(id, true);
  await page.getByTestId('marked-bar').waitFor({ state: 'detached' });
  assert.match(await page.getByTestId('row-notice').textContent(), /Answered 3 questions/);
  // The choices were not selected and stay.
  assert.equal((await stored(routine.choice)).status, 'pending');
  await page.close();
});

test('? lists the keys; Escape closes the list', async () => {
  const page = await openInbox();
  await page.keyboard.press('?');
  const dialog = page.getByTestId('shortcuts');
  await dialog.waitFor();
  const text = await dialog.textContent();
  for (const key of ['j / ↓', 'x', 'a', 'r', 'o / Enter', '?']) assert.ok(text.includes(key), `${key} is listed`);
  assert.equal(await page.evaluate(() => document.activeElement.dataset.testid), 'shortcuts-close');
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'detached' });
  await page.getByTestId('shortcuts-open').click();
  await dialog.waitFor();
  await page.getByTestId('shortcuts-close').click();
  await dialog.waitFor({ state: 'detached' });
  await page.close();
});

test('a wide screen shows the question under the cursor beside the list, with its answer form', async () => {
  const ids = await askAll('Split');
  const detailed = await api(server, 'POST', '/questions', {
    title: 'Split: roll the canary forward?',
    body: 'The canary has been **green** for an hour.',
    context: { ticket: 'OPS-77' },
    response_type: 'boolean',
    timeout_seconds: 3600,
  });
  const page = await openInbox({ width: 1440, height: 900 });
  const pane = page.getByTestId('detail-pane');
  assert.ok(await pane.isVisible());
  assert.match(await pane.textContent(), /No question selected/);
  const list = await page.getByTestId('question-list').boundingBox();
  const paneBox = await pane.boundingBox();
  assert.ok(paneBox.x >= list.x + list.width, 'the pane is to the right of the list');

  // A click on the row (not on its links or buttons) shows it.
  await row(page, detailed.json.id).locator('.row-times').click();
  await page.locator(`[data-testid="detail"][data-question-id="${detailed.json.id}"]`).waitFor();
  assert.equal((await page.getByTestId('detail-title').textContent()).trim(), 'Split: roll the canary forward?');
  assert.equal(await page.getByTestId('detail-body').locator('strong').textContent(), 'green');
  assert.match(await page.getByTestId('detail-context').textContent(), /OPS-77/);
  await page.screenshot({ path: resultPath('inbox-split.png') });

  // The pane's own form answers, with a comment; the row leaves and the cursor moves to the next one.
  await page.getByTestId('detail-comment').fill('looks healthy');
  await page.getByTestId('detail-yes').click();
  await row(page, detailed.json.id).waitFor({ state: 'detached' });
  const answered = await stored(detailed.json.id);
  assert.deepEqual(answered.response, { value: true, comment: 'looks healthy' });
  await page.waitForFunction((answeredId) => {
    const detail = document.querySelector('[data-testid="detail"]');
    return detail && detail.dataset.questionId !== answeredId;
  }, detailed.json.id);
  assert.equal(
    await page.getByTestId('detail').getAttribute('data-question-id'),
    await page.locator('[data-testid="question-item"][aria-current="true"]').getAttribute('data-question-id'),
    'the pane shows the row the cursor moved on to',
  );

  // j/k move the pane along.
  await moveTo(page, ids.approval);
  await page.locator(`[data-testid="detail"][data-question-id="${ids.approval}"]`).waitFor();
  assert.match(await page.getByTestId('detail-arguments-view').textContent(), /migrate --apply/);

  // A question resolved elsewhere shows its resolution in the pane.
  await api(server, 'POST', `/questions/${ids.approval}/cancel`, null);
  await page.getByTestId('detail-resolution').filter({ hasText: /^Cancelled/ }).waitFor();

  // A phone shows one column: the list, no pane, nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  assert.equal(await pane.isVisible(), false);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
  assert.ok(overflow <= 0, `no sideways scrolling on a phone (${overflow} px too wide)`);
  const actions = await row(page, ids.yesNo).getByTestId('row-affirm').boundingBox();
  assert.ok(actions.height >= 44, `a row's answer button is a touch target (${actions.height} px high)`);
  await page.screenshot({ path: resultPath('inbox-phone.png'), fullPage: true });
  for (const id of [ids.yesNo, ids.choice]) await api(server, 'POST', `/questions/${id}/cancel`, null);
  await page.close();
});
