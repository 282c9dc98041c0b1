// An existing account joins another workspace only when its owner accepts the invitation, in their Settings; an
// email address a person sets for themselves counts only once they open the link mailed to it while signed in.
// The mail arrives at a loopback SMTP sink (../smtp-sink.mjs).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { api, eventually, launchBrowser, resultPath, signIn, startServer, waitForHydration } from './harness.mjs';
import { readableText, startSmtpSink } from '../smtp-sink.mjs';

const DANA = { username: 'dana', password: 'dana passphrase 1' };
let server;
let browser;
let sink;
/** The admin token of workspace "ops", made by the operator on the server's database. */
let ops;

before(async () => {
  sink = await startSmtpSink();
  server = await startServer({
    env: { HOLDPOINT_SMTP_URL: sink.url, HOLDPOINT_EMAIL_FROM: 'Holdpoint <holdpoint@example.com>' },
  });
  const added = await api(server, 'POST', '/members', { ...DANA, display_name: 'Dana Diaz', role: 'responder' });
  assert.equal(added.status, 201, JSON.stringify(added.json));
  ops = await adminOf('ops', 'olga');
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await sink?.stop();
});

/** An admin token named `name` of `workspace` (created if missing), as the operator makes one on the server's
 * database. */
async function adminOf(workspace, name) {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const { stdout, stderr } = await promisify(execFile)(
    process.env.HOLDPOINT_BIN,
    ['token', 'create', '--workspace', workspace, '--role', 'admin', '--name', name],
    { env: { ...inherited, HOLDPOINT_DATA_DIR: server.dataDir } },
  );
  return { baseUrl: server.baseUrl, token: `${stdout}${stderr}`.match(/hp_\w+/)[0] };
}

/** Dana's membership of the workspace `as` (a server or token) administers, if any. */
async function danaIn(as) {
  const members = await api(as, 'GET', '/members');
  assert.equal(members.status, 200, JSON.stringify(members.json));
  return members.json.items.find((member) => member.username === DANA.username);
}

/** The admin `as` invites Dana from the workspace settings' add-member form, with `role`. */
async function invite(as, role) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await signIn(page, as, '/settings/workspace', {});
  await waitForHydration(page);
  const form = page.getByTestId('add-member-form');
  await page.getByTestId('member-username').fill(DANA.username);
  await page.getByTestId('member-new-role').selectOption(role);
  await page.getByTestId('member-add').click();
  await form.getByTestId('settings-ok').waitFor();
  assert.match(
    await form.getByTestId('settings-ok').innerText(),
    new RegExp(`dana has an account already: they are invited as ${role}, and join when they accept`),
  );
  await context.close();
}

test('an invited person accepts in Settings, joins the workspace, and signs in to it', async () => {
  await invite(ops, 'approver');
  assert.equal(await danaIn(ops), undefined, 'an invitation alone makes no member');

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (err) => errors.push(err.message));
  await signIn(page, server, '/settings', DANA);
  await waitForHydration(page);
  const invitation = page.getByTestId('invitation');
  await invitation.waitFor();
  assert.equal(await invitation.count(), 1);
  assert.equal(await invitation.getByTestId('invitation-workspace').innerText(), 'ops');
  assert.match(await invitation.innerText(), /as approver, invited by olga on /);
  await page.screenshot({ path: resultPath('settings-invitation-desktop-light.png'), fullPage: true });

  await invitation.getByTestId('invitation-accept').click();
  const outcome = page.getByTestId('invitations').getByTestId('settings-ok');
  await outcome.waitFor();
  assert.match(await outcome.innerText(), /You joined ops as approver\. .*sign in again choosing ops/);
  await eventually('the invitation leaves the list', async () => (await page.getByTestId('invitation').count()) === 0);
  await page.screenshot({ path: resultPath('settings-invitation-accepted-desktop-light.png'), fullPage: true });
  const member = await danaIn(ops);
  assert.equal(member?.role, 'approver', 'Dana is a member of ops once she accepts');

  // The way to the new workspace: the sign-in page with it chosen.
  await page.getByTestId('invitation-signin').click();
  await page.waitForURL((url) => url.pathname === '/signin' && url.searchParams.get('workspace') === 'ops');
  assert.match(await page.getByTestId('signin-workspace').innerText(), /ops/);
  await page.getByTestId('signin-username').fill(DANA.username);
  await page.getByTestId('signin-password').fill(DANA.password);
  await page.getByTestId('signin-password-submit').click();
  await page.waitForURL((url) => url.pathname === '/inbox');
  await page.goto(`${server.baseUrl}/settings`);
  await waitForHydration(page);
  assert.match(await page.getByTestId('settings-who').innerText(), /approver of workspace ops/);
  assert.deepEqual(errors, []);
  await context.close();
});

test('a declined invitation goes and makes no member', async () => {
  const labs = await adminOf('labs', 'lars');
  await invite(labs, 'viewer');
  const context = await browser.newContext();
  const page = await context.newPage();
  await signIn(page, server, '/settings', DANA);
  await waitForHydration(page);
  await page.getByTestId('invitation-decline').click();
  const outcome = page.getByTestId('invitations').getByTestId('settings-ok');
  await outcome.waitFor();
  assert.match(await outcome.innerText(), /You declined the invitation to labs/);
  // The outcome shows as the server answers; the list follows once it is read again.
  await eventually('the declined invitation leaves the list', async () =>
    (await page.getByTestId('invitation').count()) === 0);
  assert.equal(await page.getByTestId('invitation-signin').count(), 0);
  assert.equal(await danaIn(labs), undefined);
  const mine = await context.request.get(`${server.baseUrl}/api/v1/me/invitations`);
  assert.deepEqual((await mine.json()).items, []);
  await context.close();
});

/** The verification link of the latest message to `to` after the first `already`, once it has arrived. */
async function verificationLink(to, already) {
  return eventually(`a verification link reaches ${to}`, async () => {
    const messages = sink.messages.slice(already).filter((m) => m.to.includes(to));
    const text = messages.length ? readableText(messages[messages.length - 1].data) : '';
    return text.match(/\/verify-email\/[A-Za-z0-9]+/)?.[0];
  });
}

test('an address a person saves shows unconfirmed until they open the link mailed to it', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await signIn(page, server, '/settings', DANA);
  await waitForHydration(page);
  const form = page.getByTestId('reach-form');
  const already = sink.messages.length;
  await page.getByTestId('reach-email').fill('dana@example.com');
  await page.getByTestId('reach-slack').fill('U0DANA123');
  await page.getByTestId('reach-submit').click();
  await form.getByTestId('settings-ok').waitFor();
  assert.match(
    await form.getByTestId('settings-ok').innerText(),
    /We sent a link to dana@example\.com: open it while signed in to confirm it/,
  );
  assert.match(await page.getByTestId('reach-email-status').innerText(), /dana@example\.com is not confirmed yet/);
  assert.match(await page.getByTestId('reach-slack-status').innerText(), /an admin must confirm it, or verify your email/);
  await page.screenshot({ path: resultPath('settings-email-unconfirmed-desktop-light.png'), fullPage: true });
  const saved = await danaIn(server);
  assert.equal(saved.email, 'dana@example.com');
  assert.equal(saved.email_verified, false);
  assert.equal(saved.slack_user_id_proven, false);
  await verificationLink('dana@example.com', already);

  // The link again, on request: a second message.
  const sent = sink.messages.length;
  await page.getByTestId('reach-email-resend').click();
  const link = await verificationLink('dana@example.com', sent);
  await page.goto(`${server.baseUrl}${link}`);
  await page.getByRole('button', { name: 'Confirm' }).click();
  await page.getByRole('heading', { name: 'Address confirmed' }).waitFor();
  assert.equal((await danaIn(server)).email_verified, true);
  await page.goto(`${server.baseUrl}/settings`);
  await waitForHydration(page);
  assert.match(await page.getByTestId('reach-email-status').innerText(), /dana@example\.com is confirmed/);
  assert.equal(await page.getByTestId('reach-email-resend').count(), 0);
  await context.close();
});
