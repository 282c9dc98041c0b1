// Notifications: the unread badge counts pending questions live; once allowed, a high-urgency question shows a
// browser notification (a low one does not), and clicking it opens the question.

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

// Headless Chromium has no notification centre: a stand-in records what the page shows, with the same API.
const FAKE_NOTIFICATION = () => {
  window.__notifications = [];
  window.__permission = 'default';
  window.Notification = class {
    static get permission() { return window.__permission; }
    static requestPermission(callback) {
      window.__permission = 'granted';
      callback?.('granted');
      return Promise.resolve('granted');
    }
    constructor(title, options) {
      this.title = title;
      this.options = options;
      window.__notifications.push(this);
    }
    close() {}
  };
};

test('the badge counts pending questions live; high-urgency questions notify once allowed; a click opens it', async () => {
  await api(server, 'POST', '/questions', { title: 'Waiting already' });
  const context = await browser.newContext();
  await context.addInitScript(FAKE_NOTIFICATION);
  const page = await context.newPage();
  await signIn(page, server, '/runs');
  await waitForLive(page);
  await page.getByTestId('unread-count').filter({ hasText: '1' }).waitFor();

  await page.getByTestId('notifications-enable').click();
  await page.getByTestId('notifications-enable').waitFor({ state: 'detached' });

  await api(server, 'POST', '/questions', { title: 'Not urgent', kind: 'non_blocking' });
  const urgent = await api(server, 'POST', '/questions', { title: 'Production is down: roll back?', urgency: 'critical' });
  await page.getByTestId('unread-count').filter({ hasText: '3' }).waitFor({ timeout: 3_000 });
  await page.waitForFunction(() => window.__notifications.length > 0, null, { timeout: 3_000 });
  const shown = await page.evaluate(() => window.__notifications.map((n) => n.title));
  assert.deepEqual(shown, ['Production is down: roll back?'], 'only the high-urgency one notifies');

  await page.evaluate(() => window.__notifications[0].onclick());
  await page.waitForURL(`**/questions/${urgent.json.id}`);
  await context.close();
});
