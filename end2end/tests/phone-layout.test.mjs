// A phone's layout: the top bar is one row with a menu, touch targets are at least 44 px, argument blocks wrap
// instead of hiding the end of a command sideways; and the runs page says what to do when there is no run yet.

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

const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true };

test('the runs page has an empty state, with and without filters', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/runs');
  const empty = page.getByTestId('runs-empty');
  assert.match(await empty.textContent(), /No runs yet/);
  assert.match(await empty.textContent(), /holdpoint run/);
  await page.goto(`${server.baseUrl}/runs?status=failed`);
  assert.match(await page.getByTestId('runs-empty').textContent(), /No run matches these filters/);
  await page.close();
});

test('on a phone the top bar is one row; its menu opens with links big enough to tap', async () => {
  const context = await browser.newContext(PHONE);
  const page = await context.newPage();
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  // Nothing wider than the screen: a phone would zoom the whole page out to fit it.
  const widths = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, screen: innerWidth }));
  assert.deepEqual(widths, { page: 390, screen: 390 });
  const bar = await page.locator('.topbar').boundingBox();
  assert.ok(bar.height <= 64, `the top bar is one row (${bar.height} px)`);
  assert.equal(await page.getByTestId('nav-runs').isVisible(), false, 'the links wait behind the menu');
  const toggle = page.getByTestId('menu-toggle');
  assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
  await toggle.click();
  assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
  for (const testid of ['nav-inbox', 'nav-approvals', 'nav-runs', 'nav-settings', 'signout']) {
    const box = await page.getByTestId(testid).boundingBox();
    assert.ok(box.height >= 44, `${testid} is ${box.height} px high`);
  }
  await page.getByTestId('nav-approvals').click();
  await page.waitForURL('**/approvals');
  assert.equal(await page.getByTestId('nav-runs').isVisible(), false, 'following a link closes the menu');
  await context.close();
});

test('on a tablet the top bar’s items wrap whole, never inside their words', async () => {
  // A pending question puts its count beside the inbox link and the bell, as on a working day.
  const asked = await api(server, 'POST', '/questions', { title: 'Ship the tablet layout?', response_type: 'boolean' });
  const context = await browser.newContext({ viewport: { width: 900, height: 700 } });
  const page = await context.newPage();
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  const items = ['nav-inbox', 'nav-approvals', 'nav-settings', 'signed-in-as', 'signout'].map((id) => page.getByTestId(id));
  items.push(page.getByRole('button', { name: 'Enable notifications' }));
  for (const item of items) {
    // A text broken over lines has a rectangle per line.
    const lines = await item.evaluate((element) => {
      const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
      let most = 0;
      for (let text = walker.nextNode(); text; text = walker.nextNode()) {
        if (!text.textContent.trim()) continue;
        const range = document.createRange();
        range.selectNodeContents(text);
        most = Math.max(most, range.getClientRects().length);
      }
      return most;
    });
    assert.equal(lines, 1, `“${await item.textContent()}” is broken over ${lines} lines`);
  }
  await context.close();
  await api(server, 'POST', `/questions/${asked.json.id}/cancel`, null);
});

test('on a phone an approval’s long command wraps rather than running off the screen', async () => {
  const command = 'terraform apply -auto-approve -var-file=environments/production/eu-central-1.tfvars -target=module.payments_ledger';
  const created = await api(server, 'POST', '/questions', {
    title: 'Apply the payments ledger?', kind: 'approval', timeout_seconds: 600,
    action: { tool_name: 'shell', arguments: { command } },
  });
  const context = await browser.newContext(PHONE);
  const page = await context.newPage();
  await signIn(page, server, `/questions/${created.json.id}`);
  const args = page.getByTestId('action-arguments');
  const box = await args.evaluate((el) => ({ scrollWidth: el.scrollWidth, clientWidth: el.clientWidth, right: el.getBoundingClientRect().right }));
  assert.ok(box.scrollWidth <= box.clientWidth, `the arguments wrap (${box.scrollWidth} > ${box.clientWidth})`);
  assert.ok(box.right <= 390, 'the box ends on the screen');
  for (const testid of ['answer-approve', 'answer-reject']) {
    const button = await page.getByTestId(testid).boundingBox();
    assert.ok(button.height >= 44, `${testid} is ${button.height} px high`);
  }
  await page.goto(`${server.baseUrl}/approvals`);
  await page.getByTestId('approval-select').first().waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
  assert.ok(overflow <= 0, `the approval queue fits the screen (${overflow} px too wide)`);
  await api(server, 'POST', `/questions/${created.json.id}/cancel`, null);
  await context.close();
});
