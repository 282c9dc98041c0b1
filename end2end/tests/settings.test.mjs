// A first start as a newcomer sees it: no token configured, so `holdpoint serve` prints a one-time sign-in link.
// Opening it signs the person in as the admin; on Settings they set their password, add a person with a role,
// create a token (shown once) that then works against the API, and revoke it, which stops it at once.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchBrowser, waitForHydration, eventually, resultPath } from './harness.mjs';

const dataDir = mkdtempSync(join(tmpdir(), 'holdpoint-settings-e2e-'));
let server;
let browser;

/** `holdpoint serve` with no token configured; resolves with its address and the link it printed. */
async function startFresh() {
  const binary = process.env.HOLDPOINT_BIN;
  if (!binary) throw new Error('HOLDPOINT_BIN is not set: run the browser tests with `cargo xtask test`');
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => name !== 'DATABASE_URL' && (!name.startsWith('HOLDPOINT_') || name === 'HOLDPOINT_SITE_ROOT'),
    ),
  );
  const child = spawn(binary, ['serve', '--addr', '127.0.0.1:0', '--data-dir', dataDir], {
    env: { ...env, RUST_LOG: process.env.RUST_LOG ?? 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const { baseUrl, link } = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the server did not print a sign-in link within 30 s')), 30_000);
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
      const address = output.match(/listening on (http:\/\/\S+)/);
      const link = output.match(/(http:\/\/\S+\/signin\?code=\w+)/);
      if (address && link) {
        clearTimeout(timer);
        resolve({ baseUrl: address[1], link: link[1] });
      }
    });
    child.on('exit', (code) => reject(new Error(`the server exited early with ${code}`)));
  });
  return {
    baseUrl,
    link,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
    },
  };
}

before(async () => {
  server = await startFresh();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

test('the first start link signs in the admin, who manages their password, people and tokens', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (err) => errors.push(err.message));

  await page.goto(server.link);
  await page.getByTestId('signin-link-submit').click();
  await page.waitForURL((url) => url.pathname === '/inbox');

  await page.goto(`${server.baseUrl}/settings`);
  await waitForHydration(page);
  assert.match(await page.getByTestId('settings-who').textContent(), /admin — admin of workspace default/);

  // The admin has no password yet: none is asked for the first one.
  await page.getByTestId('new-password').fill('the admin passphrase');
  await page.getByTestId('password-submit').click();
  assert.match(await page.getByTestId('settings-ok').first().textContent(), /password is set/);
  await page.screenshot({ path: resultPath('settings-desktop.png'), fullPage: true });

  // People and tokens are the workspace's: the other tab.
  await page.getByTestId('settings-tab-workspace').click();
  await page.waitForURL((url) => url.pathname === '/settings/workspace');
  await page.getByTestId('member-username').fill('alice');
  await page.getByTestId('member-password').fill('alice passphrase 1');
  await page.getByTestId('member-new-role').selectOption('approver');
  await page.getByTestId('member-add').click();
  await page.locator('[data-testid="member-row"]', { hasText: 'alice' }).waitFor();

  // A role chosen in the select, even by an arrow key passing over it, is asked about before it is given.
  const aliceRow = page.locator('[data-testid="member-row"]', { hasText: 'alice' });
  await aliceRow.getByTestId('member-role').focus();
  await page.keyboard.press('ArrowDown');
  await aliceRow.getByTestId('member-role-asking').waitFor();
  await aliceRow.getByTestId('member-role-keep').click();
  await aliceRow.getByTestId('member-role-asking').waitFor({ state: 'detached' });
  await eventually('the select shows the role alice has', async () =>
    (await aliceRow.getByTestId('member-role').inputValue()) === 'approver');
  // Each change reloads the settings, which draws the table again: the next choice waits for that.
  const reloaded = () => page.waitForResponse((response) => response.url().includes('/ui/fn/workspace_settings'));
  await aliceRow.getByTestId('member-role').selectOption('responder');
  assert.match(await aliceRow.getByTestId('member-role-asking').textContent(), /Give alice the role responder\?/);
  let reload = reloaded();
  await aliceRow.getByTestId('member-role-confirm').click();
  await page.getByText('alice now has the role responder.').waitFor();
  await reload;
  await eventually('the table is drawn again', async () =>
    (await aliceRow.getByTestId('member-role').inputValue()) === 'responder');
  reload = reloaded();
  await aliceRow.getByTestId('member-role').selectOption('approver');
  await aliceRow.getByTestId('member-role-confirm').click();
  await page.getByText('alice now has the role approver.').waitFor();
  await reload;

  // Removing someone is asked about too; the focus goes to Cancel, so a second Enter removes nobody.
  await page.getByTestId('member-username').fill('bob');
  await page.getByTestId('member-password').fill('bob passphrase 12');
  await page.getByTestId('member-add').click();
  const bobRow = page.locator('[data-testid="member-row"]', { hasText: 'bob' });
  await bobRow.waitFor();
  await bobRow.getByTestId('member-remove').click();
  assert.match(await bobRow.getByTestId('member-remove-asking').textContent(), /Remove bob from the workspace\?/);
  await eventually('the focus is on Cancel', async () =>
    (await page.evaluate(() => document.activeElement?.getAttribute('data-testid'))) === 'member-remove-keep');
  await page.keyboard.press('Enter');
  await bobRow.getByTestId('member-remove').waitFor();
  await eventually('the focus is back on Remove', async () =>
    (await page.evaluate(() => document.activeElement?.getAttribute('data-testid'))) === 'member-remove');
  await bobRow.getByTestId('member-remove').click();
  await bobRow.getByTestId('member-remove-confirm').click();
  await bobRow.waitFor({ state: 'detached' });

  await page.getByTestId('token-name').fill('ci pipeline');
  await page.getByTestId('token-create').click();
  const secret = (await page.getByTestId('token-secret').textContent()).trim();
  assert.match(secret, /^hp_\w{40}$/);
  await page.screenshot({ path: resultPath('settings-workspace-desktop.png'), fullPage: true });

  const asAgent = await fetch(`${server.baseUrl}/api/v1/me`, { headers: { authorization: `Bearer ${secret}` } });
  assert.equal(asAgent.status, 200);
  assert.deepEqual(
    (({ kind, name, role }) => ({ kind, name, role }))(await asAgent.json()),
    { kind: 'token', name: 'ci pipeline', role: 'agent' },
  );

  const tokenRow = page.locator('[data-testid="token-row"]', { hasText: 'ci pipeline' });
  await tokenRow.getByTestId('token-revoke').click();
  await tokenRow.getByTestId('token-revoke-confirm').click();
  await page.locator('[data-testid="token-row"].revoked', { hasText: 'ci pipeline' }).waitFor();
  const revoked = await fetch(`${server.baseUrl}/api/v1/me`, { headers: { authorization: `Bearer ${secret}` } });
  assert.equal(revoked.status, 401);

  // The link was spent; alice signs in with her password in a fresh browser.
  const other = await browser.newContext();
  const alice = await other.newPage();
  await alice.goto(server.link);
  await alice.getByTestId('signin-link-submit').click();
  await alice.getByTestId('signin-error').waitFor();
  await alice.getByTestId('signin-username').fill('alice');
  await alice.getByTestId('signin-password').fill('alice passphrase 1');
  await alice.getByTestId('signin-password-submit').click();
  await alice.waitForURL((url) => url.pathname === '/inbox');
  await alice.goto(`${server.baseUrl}/settings`);
  assert.match(await alice.getByTestId('settings-who').textContent(), /alice — approver/);
  await alice.goto(`${server.baseUrl}/settings/workspace`);
  await alice.getByTestId('member-table').waitFor();
  assert.equal(await alice.getByTestId('token-table').count(), 0, 'only admins see tokens');
  await other.close();

  assert.deepEqual(errors, []);
  await context.close();
});
