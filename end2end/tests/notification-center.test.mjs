// The notification center: the bell counts the person's unread notifications live, the list shows each question
// that was for them with what it still asks of them, opening one marks it read, "Mark all read" clears the rest;
// and Settings sets how questions reach the person.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, waitForHydration, eventually } from './harness.mjs';

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

const unreadRows = async (page) => page.locator('[data-testid=notification][data-unread=true]').count();

test('the bell counts unread notifications live, and the list marks them read', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  const bell = page.getByTestId('nav-notifications');
  assert.equal(await bell.getAttribute('aria-label'), 'Notifications, none unread');

  // The test person is an admin: every question is for them.
  const first = (await api(server, 'POST', '/questions', { title: 'Rotate the signing key?', urgency: 'high' })).json.id;
  const second = (await api(server, 'POST', '/questions', { title: 'Name the release?' })).json.id;
  await eventually('the bell counts both', async () => (await page.getByTestId('notifications-unread').textContent().catch(() => '')) === '2');
  assert.equal(await bell.getAttribute('aria-label'), 'Notifications, 2 unread');

  // The live modal is open on the new questions; the bell leads to the list.
  assert.equal(await bell.getAttribute('href'), '/notifications');
  await page.goto(`${server.baseUrl}/notifications`);
  await waitForLive(page);
  const rows = page.getByTestId('notification');
  await eventually('both listed', async () => (await rows.count()) === 2);
  assert.deepEqual(await rows.evaluateAll((items) => items.map((item) => item.dataset.question)), [second, first]);
  assert.equal(await unreadRows(page), 2);

  // Answered elsewhere: the row says so, live.
  assert.equal((await api(server, 'POST', `/questions/${first}/answer`, { value: 'yes, rotate it' })).status, 200);
  await eventually('the resolution shows', async () =>
    (await page.locator(`[data-question="${first}"] [data-testid=notification-resolution]`).textContent().catch(() => ''))
      .includes('answered by'));

  // Opening a question marks its notification read.
  await page.locator(`[data-question="${second}"] [data-testid=notification-title]`).click();
  await page.waitForURL((url) => url.pathname === `/questions/${second}`);
  await page.goto(`${server.baseUrl}/notifications`);
  await waitForHydration(page);
  await eventually('one left unread', async () => (await unreadRows(page)) === 1);
  assert.equal(await page.locator(`[data-question="${second}"]`).getAttribute('data-unread'), 'false');

  // Mark all read: nothing unread, in the list and on the bell; the unread view is empty.
  await page.getByTestId('notifications-read-all').click();
  await eventually('none unread', async () => (await unreadRows(page)) === 0);
  assert.equal(await page.getByTestId('notifications-unread-count').textContent(), '0 unread');
  assert.ok(await page.getByTestId('notifications-read-all').isDisabled());
  await page.getByTestId('notifications-unread-only').click();
  await page.waitForURL((url) => url.search === '?unread=true');
  await page.getByTestId('notifications-empty').waitFor();
  await page.close();
});

test('a person sets their addresses and the urgency each channel starts at', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/settings');
  await waitForHydration(page);
  assert.equal(await page.getByTestId('reach-threshold-email').inputValue(), 'high', 'email starts at high');
  // An admin sees each channel's health in the workspace's settings: this server sends on none of them.
  await page.getByTestId('settings-tab-workspace').click();
  await page.waitForURL((url) => url.pathname === '/settings/workspace');
  // The page's module and data arrive after the URL changes.
  await page.getByTestId('channel-table').locator('tbody tr').first().waitFor();
  const channels = await page.getByTestId('channel-table').locator('tbody tr').evaluateAll((rows) =>
    rows.map((row) => [...row.cells].slice(0, 3).map((cell) => cell.textContent.trim())));
  assert.deepEqual(channels, [['email', 'no', 'never'], ['slack', 'no', 'never'], ['push', 'no', 'never']]);
  await page.getByTestId('settings-tab-you').click();
  await page.waitForURL((url) => url.pathname === '/settings');
  await page.getByTestId('reach-form').waitFor();
  await page.getByTestId('reach-email').fill('riley@example.com');
  await page.getByTestId('reach-slack').fill('U0RILEY42');
  await page.getByTestId('reach-threshold-email').selectOption('normal');
  await page.getByTestId('reach-threshold-web').selectOption('off');
  await page.getByTestId('reach-submit').click();
  await page.getByText('Saved.').waitFor();

  const members = (await api(server, 'GET', '/members')).json.items;
  const me = members.find((member) => member.username === server.username);
  assert.deepEqual([me.email, me.slack_user_id], ['riley@example.com', 'U0RILEY42']);
  await page.reload();
  await waitForHydration(page);
  assert.equal(await page.getByTestId('reach-threshold-email').inputValue(), 'normal');
  assert.equal(await page.getByTestId('reach-threshold-web').inputValue(), 'off');
  assert.equal(await page.getByTestId('reach-email').inputValue(), 'riley@example.com');

  // "Send me a test" says why nothing can be sent here: this server sends no email.
  await page.getByTestId('test-message-email').click();
  await page.getByText('email is not configured on this server').waitFor();

  // With the web list off, a new question is no longer in the person's notifications.
  const quiet = (await api(server, 'POST', '/questions', { title: 'Quiet now?', urgency: 'critical' })).json.id;
  await page.goto(`${server.baseUrl}/notifications`);
  await waitForHydration(page);
  await page.getByTestId('notification-list').waitFor();
  assert.equal(await page.locator(`[data-question="${quiet}"]`).count(), 0);
  await page.close();
});
