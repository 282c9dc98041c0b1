// Single sign-on (docs/security.md) against a real OpenID provider process on loopback (`oidc-provider`,
// ../oidc-provider.mjs): the authorization code flow with PKCE from the sign-in page, the member matched by an address
// both the provider and the account verified (the account's link arrives at a loopback SMTP sink, ../smtp-sink.mjs),
// and what must be refused — an unverified address, an address an admin typed (issue 51: an admin of another workspace
// taking over an account), a callback whose state is not this browser's, an ID token with another nonce.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { api, eventually, launchBrowser, resultPath, signIn, startServer, waitForHydration } from './harness.mjs';
import { startOidcProviderProcess } from '../oidc-provider.mjs';
import { readableText, startSmtpSink } from '../smtp-sink.mjs';

let server;
let provider;
let browser;
let sink;
const PASSWORDS = { ana: 'pw-ana-0123456789', eve: 'pw-eve-0123456789', vic: 'pw-vic-0123456789' };

/** A loopback port free right now: the provider must know Holdpoint's redirect URI before Holdpoint starts. */
async function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

before(async () => {
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  provider = await startOidcProviderProcess({
    redirectUri: `${publicUrl}/auth/oidc/callback`,
    accounts: {
      ana: { email: 'Ana.Lopez@example.com', email_verified: true, name: 'Ana Lopez', preferred_username: 'ana' },
      eve: { email: 'eve@example.com', email_verified: false, name: 'Eve', preferred_username: 'eve' },
      vic: { email: 'vic@example.com', email_verified: true, name: 'Vic', preferred_username: 'vic' },
      mallory: { email: 'mallory@evil.test', email_verified: true, name: 'Mallory', preferred_username: 'mallory' },
    },
  });
  sink = await startSmtpSink();
  server = await startServer({
    env: {
      HOLDPOINT_ADDR: `127.0.0.1:${port}`,
      HOLDPOINT_PUBLIC_URL: publicUrl,
      HOLDPOINT_OIDC_ISSUER: provider.issuer,
      HOLDPOINT_OIDC_CLIENT_ID: provider.clientId,
      HOLDPOINT_OIDC_CLIENT_SECRET: provider.clientSecret,
      HOLDPOINT_OIDC_DISPLAY_NAME: 'Acme ID',
      HOLDPOINT_SMTP_URL: sink.url,
      HOLDPOINT_EMAIL_FROM: 'Holdpoint <holdpoint@example.com>',
    },
  });
  // Ana, Eve and Vic are members; an admin typed Ana's and Eve's work addresses (Eve's provider has not verified
  // hers). Typed addresses sign nobody in: each person verifies their own.
  for (const [username, email] of [['ana', 'ana.lopez@example.com'], ['eve', 'eve@example.com'], ['vic', null]]) {
    const added = await api(server, 'POST', '/members', { username, password: PASSWORDS[username], role: 'approver' });
    assert.equal(added.status, 201, JSON.stringify(added.json));
    if (email) {
      const patched = await api(server, 'PATCH', `/members/${added.json.user_id}`, { email });
      assert.equal(patched.status, 200, JSON.stringify(patched.json));
    }
  }
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await provider?.stop();
  await sink?.stop();
});

/** The verification link of the latest message to `to`, once it has arrived. */
async function verificationLink(to, already) {
  return eventually(`a verification link reaches ${to}`, async () => {
    const messages = sink.messages.slice(already).filter((m) => m.to.includes(to));
    const text = messages.length ? readableText(messages[messages.length - 1].data) : '';
    return text.match(/https?:\/\/[^\s"<>]*\/verify-email\/[A-Za-z0-9]+/)?.[0];
  });
}

/** Signs `username` in with their password, names `email` as their own (`PATCH /api/v1/me` from the signed-in
 * browser, with the session's CSRF token as the page carries it), and confirms the link mailed there in the same
 * browser: the address is then the account's. */
async function verifyOwnEmail(username, email) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signIn(page, server, '/inbox', { username, password: PASSWORDS[username] });
  const csrf = await page.locator('input[name=csrf]').first().inputValue();
  const already = sink.messages.length;
  const set = await context.request.patch(`${server.baseUrl}/api/v1/me`, {
    data: { email },
    headers: { 'x-csrf-token': csrf },
  });
  assert.equal(set.status(), 200, await set.text());
  assert.equal((await set.json()).email_verified, false);
  const link = await verificationLink(email, already).catch((error) => {
    const seen = sink.messages.map((m) => `${m.to.join(',')}: ${m.data.slice(0, 2000)}`).join('\n---\n');
    throw new Error(`${error.message}; the sink has ${sink.messages.length} message(s):\n${seen}`);
  });
  await page.goto(link);
  await page.getByRole('button', { name: 'Confirm' }).click();
  await page.getByRole('heading', { name: 'Address confirmed' }).waitFor();
  await context.close();
}

/** From the sign-in page (reached through `next`) to the provider's login form, signing in there as `login`. */
async function throughTheProvider(page, login, next = '/approvals') {
  await page.goto(`${server.baseUrl}${next}`);
  await page.waitForURL(/\/signin/);
  await waitForHydration(page);
  await page.getByTestId('signin-sso').click();
  await page.waitForURL((url) => url.href.startsWith(provider.issuer));
  await page.getByTestId('oidc-login').fill(login);
  await page.getByTestId('oidc-submit').click();
}

async function lastSignIn() {
  const page = await api(server, 'GET', '/audit?action=signin&limit=1');
  return page.json.items[0];
}

test('a member signs in with the provider and is matched by verified email', async () => {
  // The address an admin typed is not Ana's own yet: the provider's word alone signs nobody in.
  const early = await browser.newContext();
  const refused = await early.newPage();
  await throughTheProvider(refused, 'ana', '/inbox');
  await refused.waitForURL(/\/signin\?error=sso_no_member/);
  await early.close();
  await verifyOwnEmail('ana', 'ana.lopez@example.com');

  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  await page.goto(`${server.baseUrl}/signin`);
  await waitForHydration(page);
  assert.equal(await page.getByTestId('signin-sso').innerText(), 'Sign in with Acme ID');
  await page.screenshot({ path: resultPath('sso-signin-desktop-light.png') });

  await throughTheProvider(page, 'ana', '/approvals');
  await page.waitForURL((url) => url.href === `${server.baseUrl}/approvals`);
  await waitForHydration(page);
  const entry = await eventually('the sign-in is audited', async () => {
    const latest = await lastSignIn();
    return latest?.actor === 'ana' ? latest : null;
  });
  assert.equal(entry.after.method, 'oidc');
  assert.equal(entry.after.role, 'approver');
  // The session is Holdpoint's own: the page loads with it, and the pending sign-in's cookie is gone.
  const cookies = await context.cookies(server.baseUrl);
  assert.ok(cookies.some((c) => c.name === 'hp_session' && c.httpOnly), JSON.stringify(cookies));
  assert.ok(!cookies.some((c) => c.name === 'holdpoint_oidc'), JSON.stringify(cookies));
  await context.close();
});

test('an email address the provider has not verified is refused', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await throughTheProvider(page, 'eve', '/inbox');
  await page.waitForURL(/\/signin\?error=sso_unverified/);
  assert.match(await page.getByTestId('signin-error').innerText(), /has not verified your email address/);
  assert.ok(!(await context.cookies(server.baseUrl)).some((c) => c.name === 'hp_session'));
  await context.close();
});

test('an admin of another workspace cannot take over an account through the provider', async () => {
  // Mallory administers workspace "b" (a token the operator made for it, on the server's own database).
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const { stdout, stderr } = await promisify(execFile)(
    process.env.HOLDPOINT_BIN,
    ['token', 'create', '--workspace', 'b', '--role', 'admin', '--name', 'mallory'],
    { env: { ...inherited, HOLDPOINT_DATA_DIR: server.dataDir } },
  );
  const mallory = { ...server, token: `${stdout}${stderr}`.match(/hp_\w+/)[0] };
  // Naming Vic's account only invites it: no membership in "b", so nothing of Vic's to put an address on.
  const invited = await api(mallory, 'POST', '/members', { username: 'vic', role: 'viewer' });
  assert.equal(invited.status, 202, JSON.stringify(invited.json));
  const vicId = (await api(server, 'GET', '/members')).json.items.find((m) => m.username === 'vic').user_id;
  const patched = await api(mallory, 'PATCH', `/members/${vicId}`, { email: 'mallory@evil.test' });
  assert.equal(patched.status, 404, JSON.stringify(patched.json));
  // Even an address typed onto Vic's membership by an admin where Vic is a member signs in as nobody.
  const typed = await api(server, 'PATCH', `/members/${vicId}`, { email: 'mallory@evil.test' });
  assert.equal(typed.status, 200, JSON.stringify(typed.json));
  const attempt = await browser.newContext();
  const page = await attempt.newPage();
  await throughTheProvider(page, 'mallory', '/inbox');
  await page.waitForURL(/\/signin\?error=sso_no_member/);
  assert.ok(!(await attempt.cookies(server.baseUrl)).some((c) => c.name === 'hp_session'));
  await attempt.close();

  // Vic verifies their own address, and then the provider signs Vic in.
  await verifyOwnEmail('vic', 'vic@example.com');
  const context = await browser.newContext();
  const signedIn = await context.newPage();
  await throughTheProvider(signedIn, 'vic', '/inbox');
  await signedIn.waitForURL((url) => url.href === `${server.baseUrl}/inbox`);
  const entry = await eventually('the sign-in is audited', async () => {
    const latest = await lastSignIn();
    return latest?.actor === 'vic' ? latest : null;
  });
  assert.equal(entry.after.method, 'oidc');
  await context.close();
});

/**
 * Starts a sign-in in `context` without following its redirect (the start's cookie lands in the context), changes
 * one parameter of the authorization request with `spoil`, and signs in at the provider as `login`. The provider
 * echoes what it was sent, so the callback carries the spoiled value.
 */
async function spoiledSignIn(context, login, spoil) {
  const started = await context.request.get(`${server.baseUrl}/auth/oidc/start?next=%2Finbox`, { maxRedirects: 0 });
  assert.equal(started.status(), 303);
  const authorize = new URL(started.headers().location);
  assert.ok(authorize.href.startsWith(provider.issuer), authorize.href);
  assert.ok((await context.cookies(server.baseUrl + '/auth/oidc')).some((c) => c.name === 'holdpoint_oidc'));
  spoil(authorize.searchParams);
  const page = await context.newPage();
  await page.goto(authorize.href);
  await page.getByTestId('oidc-login').fill(login);
  await page.getByTestId('oidc-submit').click();
  return page;
}

test('a callback whose state is not the one this browser started is refused, and the sign-in is spent', async () => {
  const context = await browser.newContext();
  const page = await spoiledSignIn(context, 'ana', (params) => params.set('state', `${params.get('state')}x`));
  await page.waitForURL(/\/signin\?error=sso_failed/);
  assert.match(await page.getByTestId('signin-error').innerText(), /did not complete/);
  const cookies = await context.cookies(server.baseUrl + '/auth/oidc');
  assert.ok(!cookies.some((c) => c.name === 'hp_session' || c.name === 'holdpoint_oidc'), JSON.stringify(cookies));
  await context.close();
});

test('an ID token issued for another nonce is refused', async () => {
  const context = await browser.newContext();
  // State and PKCE stay right, so only the ID token's nonce tells.
  const page = await spoiledSignIn(context, 'ana', (params) => params.set('nonce', 'a-nonce-of-another-sign-in'));
  await page.waitForURL(/\/signin\?error=sso_failed/);
  assert.ok(!(await context.cookies(server.baseUrl)).some((c) => c.name === 'hp_session'));
  await context.close();
});

test('passwords and tokens keep working beside single sign-on', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signIn(page, server, '/inbox');
  const entry = await lastSignIn();
  assert.equal(entry.actor, server.username);
  assert.equal(entry.after.method, 'password');
  // Every API call of this file is made with a token.
  assert.equal((await api(server, 'GET', '/members')).status, 200);
  await context.close();
});
