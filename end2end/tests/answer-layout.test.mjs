// Where an answer's controls are: the live modal starts on the primary control (Yes for a yes/no question) and keeps
// its actions in view however long the arguments are, which scroll inside their own box; a stray Enter just as the
// modal appears does not answer; the question page puts the answer before the comment and shows editable arguments
// once.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive } from './harness.mjs';

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

async function ask(body) {
  const created = await api(server, 'POST', '/questions', { timeout_seconds: 600, ...body });
  assert.equal(created.status, 201, JSON.stringify(created.json));
  return created.json.id;
}

const stored = async (id) => (await api(server, 'GET', `/questions/${id}`)).json;

async function livePage(viewport) {
  const page = await browser.newPage({ viewport });
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  return page;
}

const modalFor = (page, id) => page.locator(`[data-testid="live-modal"][data-question-id="${id}"]`);

test('a yes/no modal starts on Yes; an Enter at once is held back, a later one answers', async () => {
  const page = await livePage({ width: 1280, height: 860 });
  const id = await ask({ title: 'Ship the hotfix?', response_type: 'boolean', kind: 'non_blocking' });
  await modalFor(page, id).waitFor();
  await page.waitForFunction(() => document.activeElement?.dataset.testid === 'modal-yes');
  // Someone typing elsewhere as the modal came up.
  await page.keyboard.press('Enter');
  await page.waitForTimeout(200);
  assert.equal((await stored(id)).status, 'pending', 'a keystroke in the first moment does not answer');
  await page.waitForTimeout(700);
  await page.keyboard.press('Enter');
  await modalFor(page, id).waitFor({ state: 'detached' });
  assert.equal((await stored(id)).response.value, true);
  await page.close();
});

const LONG_ARGUMENTS = {
  command: `kubectl apply --server-side --force-conflicts -f ${'manifests/very/long/path/'.repeat(12)}deployment.yaml`,
  env: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`SETTING_${i}`, `value-${i}`])),
};

for (const [device, viewport] of [['desktop', { width: 1280, height: 860 }], ['phone', { width: 390, height: 844 }]]) {
  for (const allowEdit of [false, true]) {
    test(`${device}: an approval with long ${allowEdit ? 'editable ' : ''}arguments keeps Approve and Reject in view`, async () => {
      const page = await livePage(viewport);
      const id = await ask({
        title: 'Apply the manifests?', kind: 'approval', allow_edit: allowEdit,
        body: 'The rollout of **2.4.0**.\n\n'.repeat(6),
        action: { tool_name: 'shell', arguments: LONG_ARGUMENTS },
      });
      await modalFor(page, id).waitFor();
      await page.waitForFunction(() => document.activeElement?.dataset.testid === 'modal-approve');
      for (const testid of ['modal-approve', 'modal-reject']) {
        const box = await page.getByTestId(testid).boundingBox();
        assert.ok(box && box.y >= 0 && box.y + box.height <= viewport.height, `${testid} is in view (${JSON.stringify(box)})`);
      }
      const args = page.getByTestId(allowEdit ? 'modal-arguments' : 'modal-arguments-view');
      const fits = await args.evaluate((el) => {
        const modal = el.closest('.modal').getBoundingClientRect();
        const box = el.getBoundingClientRect();
        return { scrolls: el.scrollHeight > el.clientHeight, inside: box.left >= modal.left && box.right <= modal.right };
      });
      assert.ok(fits.scrolls, 'the arguments scroll inside their box');
      assert.ok(fits.inside, 'the arguments box stays inside the modal');
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
      assert.ok(overflow <= 0, `nothing sticks out sideways (${overflow} px)`);
      await page.keyboard.press('Escape');
      await api(server, 'POST', `/questions/${id}/cancel`, null);
      await page.close();
    });
  }
}

test('the question page puts the answer before the comment and shows editable arguments once', async () => {
  const page = await livePage({ width: 1280, height: 860 });
  const choice = await ask({
    title: 'Which database?', response_type: 'choice',
    options: [{ value: 'pg', label: 'PostgreSQL' }, { value: 'sqlite', label: 'SQLite' }],
  });
  await page.goto(`${server.baseUrl}/questions/${choice}`);
  const order = await page.getByTestId('answer-form').evaluate((form) => {
    const at = (selector) => [...form.querySelectorAll('*')].indexOf(form.querySelector(selector));
    return { option: at('[data-testid="option-pg"]'), comment: at('[data-testid="answer-comment"]'), submit: at('[data-testid="answer-submit"]') };
  });
  assert.ok(order.option < order.comment && order.comment < order.submit, JSON.stringify(order));

  const editable = await ask({
    title: 'Restart the workers?', kind: 'approval', allow_edit: true,
    action: { tool_name: 'shell', arguments: { command: 'systemctl restart workers' } },
  });
  await page.goto(`${server.baseUrl}/questions/${editable}`);
  assert.equal(await page.getByTestId('action-arguments').count(), 0);
  assert.equal(await page.locator('pre', { hasText: 'systemctl restart workers' }).count(), 0, 'the arguments show once');
  assert.match(await page.getByTestId('edited-arguments').inputValue(), /systemctl restart workers/);

  const fixed = await ask({
    title: 'Restart the scheduler?', kind: 'approval',
    action: { tool_name: 'shell', arguments: { command: 'systemctl restart scheduler' } },
  });
  await page.goto(`${server.baseUrl}/questions/${fixed}`);
  assert.match(await page.getByTestId('action-arguments').textContent(), /systemctl restart scheduler/);
  assert.equal(await page.getByTestId('edited-arguments').count(), 0);
  await page.close();
});
