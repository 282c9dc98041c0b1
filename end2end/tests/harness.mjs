// Shared set-up for the browser tests: a Holdpoint server of its own (fresh SQLite file, free port) and Debian's
// Chromium driven by playwright-core. The server binary comes from HOLDPOINT_BIN (set by `cargo xtask test`).

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { chromium } from 'playwright-core';

const CHROMIUM_FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/**
 * Starts `holdpoint serve` on a free loopback port; resolves once it prints its address. `scripts` (file name →
 * content) go into the data directory's `scripts/`, for agents whose model is `script:<file>`; `env` adds settings.
 */
export async function startServer({ scripts = {}, env = {} } = {}) {
  const binary = process.env.HOLDPOINT_BIN;
  if (!binary) throw new Error('HOLDPOINT_BIN is not set: run the browser tests with `cargo xtask test`');
  const dataDir = mkdtempSync(join(tmpdir(), 'holdpoint-e2e-'));
  mkdirSync(join(dataDir, 'scripts'), { recursive: true });
  for (const [name, content] of Object.entries(scripts)) writeFileSync(join(dataDir, 'scripts', name), content);
  const token = `hp_e2e_${randomBytes(16).toString('hex')}`;
  // The test's own SQLite file, whatever DATABASE_URL the surrounding shell has.
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const child = spawn(binary, ['serve'], {
    env: {
      ...inherited,
      HOLDPOINT_ADDR: '127.0.0.1:0',
      HOLDPOINT_DATA_DIR: dataDir,
      HOLDPOINT_BOOTSTRAP_TOKEN: token,
      HOLDPOINT_MIN_TIMEOUT_SECONDS: '1',
      RUST_LOG: process.env.RUST_LOG ?? 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const baseUrl = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the server did not start within 30 s')), 30_000);
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
      const match = output.match(/listening on (http:\/\/\S+)/);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.on('exit', (code) => reject(new Error(`the server exited early with ${code}`)));
  });
  // The browser signs in as a person, not with the token that asks the questions: with separation of duties (on by
  // default) whoever requested an approval may not approve it.
  const username = 'reviewer';
  const password = `pw-${randomBytes(12).toString('hex')}`;
  const member = await fetch(`${baseUrl}/api/v1/members`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username, password, role: 'admin', display_name: 'Riley Reviewer' }),
  });
  if (member.status !== 201) throw new Error(`creating the test person failed: ${member.status} ${await member.text()}`);
  return {
    baseUrl,
    token,
    username,
    password,
    // For `holdpoint` commands on the same database (HOLDPOINT_DATA_DIR), as an operator runs them.
    dataDir,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Chromium, watched for panics of the wasm module: a test file fails when any of its pages panicked (a hydration
 * mismatch panics and leaves the page dead, which a test would otherwise see only as a timeout, if at all). */
export async function launchBrowser() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_FLAGS,
  });
  const panics = [];
  const watch = (context) => {
    context.on('console', (message) => {
      const text = message.text();
      if (text.includes('panicked at')) panics.push(`${message.page()?.url()}: ${text.split('\n').slice(0, 2).join(' ')}`);
    });
    return context;
  };
  // `browser.newPage()` opens its context through `newContext` too.
  const newContext = browser.newContext.bind(browser);
  browser.newContext = async (...args) => watch(await newContext(...args));
  // Failing through the exit code rather than a throw lets the file's `after` hook stop its server as usual.
  const close = browser.close.bind(browser);
  browser.close = async () => {
    await close();
    if (panics.length > 0) {
      console.error(`the wasm module panicked:\n${panics.join('\n')}`);
      process.exitCode = 1;
    }
  };
  return browser;
}

/** Calls the REST API with the server's admin token. */
export async function api(server, method, path, body) {
  const response = await fetch(`${server.baseUrl}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : null };
}

/** Signs a fresh page in through the sign-in form, as a person would (with a token when the server has no test
 * person, like the demo), and lands on `next`. `person` ({username, password}) is the server's test person unless
 * given. */
export async function signIn(page, server, next = '/inbox', person = server) {
  await page.goto(`${server.baseUrl}${next}`);
  await page.waitForURL(/\/signin/);
  if (person.username) {
    await page.getByTestId('signin-username').fill(person.username);
    await page.getByTestId('signin-password').fill(person.password);
    await page.getByTestId('signin-password-submit').click();
  } else {
    await page.getByTestId('signin-token-toggle').click();
    await page.getByTestId('signin-token').fill(server.token);
    await page.getByTestId('signin-submit').click();
  }
  await page.waitForURL((url) => url.pathname === next.split('?')[0]);
}

/** Resolves once Leptos has hydrated the page (the wasm module sets this marker after `hydrate()`). */
export async function waitForHydration(page) {
  await page.waitForFunction(() => document.body.dataset.hydrated === 'true', null, { timeout: 15_000 });
}

/** Where screenshots and other artefacts go: end2end/test-results/, whatever the working directory. */
export function resultPath(name) {
  const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'test-results');
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}

/** Resolves once the page's event stream is open: from then on, every event reaches it. */
export async function waitForLive(page) {
  await waitForHydration(page);
  await page.waitForFunction(() => document.body.dataset.live === 'open', null, { timeout: 10_000 });
}

/** Polls `check` (which returns a value or nothing) until it returns something or `ms` have passed. */
export async function eventually(what, check, ms = 10_000) {
  const until = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > until) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
