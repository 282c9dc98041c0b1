// Web push in Chromium: the Settings page offers to turn push on; a question pushed by the server to a subscription
// (a push endpoint on loopback stands in for the browser's push service, which Chromium cannot reach from here) is
// decrypted with the npm http_ece package, handed to Holdpoint's service worker as a synthetic push, shown with its
// Approve and Reject actions, and a click on Approve answers the question as the signed-in person.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import crypto from 'node:crypto';
import ece from 'http_ece';
import { startServer, launchBrowser, api, signIn, waitForHydration, eventually } from './harness.mjs';

let server;
let browser;
let pushService;
const pushed = [];

before(async () => {
  pushService = http.createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      pushed.push({ headers: request.headers, body: Buffer.concat(chunks) });
      response.writeHead(201).end();
    });
  });
  await new Promise((resolve) => pushService.listen(0, '127.0.0.1', resolve));
  server = await startServer({
    env: {
      HOLDPOINT_VAPID_SUBJECT: 'mailto:ops@example.com',
      HOLDPOINT_PUSH_ALLOW_HTTP: 'true',
      HOLDPOINT_PUSH_ALLOW_PRIVATE: 'true',
    },
  });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  pushService?.close();
});

test('a pushed approval shows its actions in the service worker, and Approve answers it', async () => {
  const context = await browser.newContext();
  await context.grantPermissions(['notifications'], { origin: server.baseUrl });
  const page = await context.newPage();
  const registered = context.waitForEvent('serviceworker');
  await signIn(page, server, '/settings');
  await waitForHydration(page);
  const worker = await registered;
  assert.equal(new URL(worker.url()).pathname, '/service-worker.js');

  // The Settings page offers push; this browser's own push service is out of reach, and the page says so.
  const subscribe = page.getByTestId('push-subscribe');
  await subscribe.click();
  await eventually('the subscription outcome', async () => (await page.getByTestId('push-status').textContent()).includes('could not subscribe'));

  // A subscription as a browser makes it, stored through the API with the page's session.
  const keys = crypto.createECDH('prime256v1');
  keys.generateKeys();
  const auth = crypto.randomBytes(16);
  const endpoint = `http://127.0.0.1:${pushService.address().port}/push/chromium`;
  const stored = await page.evaluate(async (subscription) => {
    const csrf = document.querySelector('[data-push-subscribe]').dataset.csrf;
    const response = await fetch('/api/v1/me/push-subscriptions', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
      body: JSON.stringify(subscription),
    });
    return response.status;
  }, { endpoint, expirationTime: null, keys: { p256dh: keys.getPublicKey('base64url'), auth: auth.toString('base64url') } });
  assert.equal(stored, 201);

  const asked = await api(server, 'POST', '/questions', {
    kind: 'approval',
    title: 'Drop the staging database?',
    urgency: 'critical',
    action: { tool_name: 'sql', arguments: { query: 'DROP DATABASE staging' } },
  });
  assert.equal(asked.status, 201);
  const id = asked.json.id;
  const push = await eventually('the push', () => pushed[0]);
  assert.equal(push.headers['content-encoding'], 'aes128gcm');
  const message = JSON.parse(ece.decrypt(push.body, { version: 'aes128gcm', privateKey: keys, authSecret: auth }));
  assert.equal(message.tag, id);

  // The service worker shows it with its answers as actions.
  await worker.evaluate((pushedMessage) => self.showPushed(pushedMessage), message);
  const shown = await worker.evaluate(async (tag) => (await self.registration.getNotifications({ tag })).map((n) => ({
    title: n.title, actions: n.actions.map((a) => a.title), requireInteraction: n.requireInteraction,
  })), id);
  assert.deepEqual(shown, [{ title: 'Drop the staging database?', actions: ['Approve', 'Reject'], requireInteraction: true }]);

  // A click on Approve answers as the person the push was for, through push, and replaces the notification.
  await worker.evaluate(async (tag) => {
    const [notification] = await self.registration.getNotifications({ tag });
    await self.onNotificationClick(notification, 'answer:0');
  }, id);
  const question = (await api(server, 'GET', `/questions/${id}`)).json;
  assert.equal(question.status, 'answered');
  assert.equal(question.answered_by, server.username);
  assert.equal(question.response.value, true);
  const audit = (await api(server, 'GET', '/audit?action=question.answered')).json;
  assert.equal(audit.items.find((entry) => entry.subject_id === id).after.channel, 'push');
  const replaced = await worker.evaluate(async (tag) => (await self.registration.getNotifications({ tag })).map((n) => n.title), id);
  assert.deepEqual(replaced, ['Approve: recorded']);

  // The server's own replacement push says who answered, under the same tag.
  const second = await eventually('the replacing push', () => pushed[1]);
  const resolved = JSON.parse(ece.decrypt(second.body, { version: 'aes128gcm', privateKey: keys, authSecret: auth }));
  assert.deepEqual([resolved.type, resolved.tag, resolved.body], ['resolved', id, `Answered by ${server.username}`]);
  await context.close();
});
