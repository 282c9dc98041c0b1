// Single sign-on (spec §14) against a real OpenID provider process on loopback (`oidc-provider`, ../oidc-provider.mjs):
// the authorization code flow with PKCE from the sign-in page, the member matched by verified email, and what must
// be refused — an unverified address, a callback whose state is not this browser's, an ID token with another nonce.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { api, eventually, launchBrowser, resultPath, signIn, startServer, waitForHydration } from './harness.mjs';
import { startOidcProviderProcess } from '../oidc-provider.mjs';

let server;
let provider;
let browser;

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
    },
  });
  server = await startServer({
    env: {
      HOLDPOINT_ADDR: `127.0.0.1:${port}`,
      HOLDPOINT_PUBLIC_URL: publicUrl,
      HOLDPOINT_OIDC_ISSUER: provider.issuer,
      HOLDPOINT_OIDC_CLIENT_ID: provider.clientId,
      HOLDPOINT_OIDC_CLIENT_SECRET: provider.clientSecret,
      HOLDPOINT_OIDC_DISPLAY_NAME: 'Acme ID',
    },
  });
  // Ana is a member with her work address; Eve has one too, but her provider has not verified it.
  for (const [username, email] of [['ana', 'ana.lopez@example.com'], ['eve', 'eve@example.com']]) {
    const added = await api(server, 'POST', '/members', { username, password: `pw-${username}-0123456789`, role: 'approver' });
    assert.equal(added.status, 201, JSON.stringify(added.json));
    const patched = await api(server, 'PATCH', `/members/${added.json.user_id}`, { email });
    assert.equal(patched.status, 200, JSON.stringify(patched.json));
  }
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await provider?.stop();
});

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
