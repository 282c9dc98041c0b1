// `holdpoint demo`, started as a newcomer would (no token, no configuration, a fresh data directory): within 10 s
// the inbox shows every kind of question, asked by scripted agents running through the executor, and answering
// them from the UI lets those agents finish.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchBrowser, api, signIn, resultPath } from './harness.mjs';

/** What the newcomer must see within this long of starting the demo. */
const DEADLINE_MS = 10_000;

/** The questions the demo's agents ask: the kind badge the inbox shows, and a part of the title. */
const EXPECTED = [
  { kind: 'approval', title: 'terraform apply -auto-approve' },
  { kind: 'blocking', title: 'Which persona should the release notes use?' },
  { kind: 'blocking', title: 'Triage SUP-4812' },
  { kind: 'non blocking', title: 'Mention the deprecation of the v1 refunds endpoint' },
  { kind: 'error recovery', title: 'Could not fetch the migration plan for orders-db' },
];

const dataDir = mkdtempSync(join(tmpdir(), 'holdpoint-demo-e2e-'));
let server;
let browser;

/** Starts `holdpoint demo` on a free port; resolves once it has printed both its token and its address. */
async function startDemo() {
  const binary = process.env.HOLDPOINT_BIN;
  if (!binary) throw new Error('HOLDPOINT_BIN is not set: run the browser tests with `cargo xtask test`');
  // A newcomer's environment: none of Holdpoint's settings (but where the built site is), no database URL.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => name !== 'DATABASE_URL' && (!name.startsWith('HOLDPOINT_') || name === 'HOLDPOINT_SITE_ROOT'),
    ),
  );
  const startedAt = Date.now();
  const child = spawn(binary, ['demo', '--addr', '127.0.0.1:0', '--data-dir', dataDir], {
    env: { ...env, RUST_LOG: process.env.RUST_LOG ?? 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const { baseUrl, token } = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the demo did not start within 30 s')), 30_000);
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
      const address = output.match(/listening on (http:\/\/\S+)/);
      const token = output.match(/Demo token \(sign in at \S+\): (hp_\S+)/);
      if (address && token) {
        clearTimeout(timer);
        resolve({ baseUrl: address[1], token: token[1] });
      }
    });
    child.on('exit', (code) => reject(new Error(`the demo exited early with ${code}`)));
  });
  return {
    baseUrl,
    token,
    startedAt,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
    },
  };
}

async function pendingQuestions() {
  const listed = await api(server, 'GET', '/questions?status=pending&limit=200');
  assert.equal(listed.status, 200, JSON.stringify(listed.json));
  return listed.json.items;
}

async function runs() {
  const listed = await api(server, 'GET', '/runs?limit=200');
  assert.equal(listed.status, 200, JSON.stringify(listed.json));
  return listed.json.items;
}

/** Polls `check` (which returns a value or nothing) until it returns something or `ms` have passed. */
async function eventually(what, check, ms = 10_000) {
  const until = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > until) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

before(async () => {
  server = await startDemo();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

test('the demo shows each kind of question in /inbox within 10 s of starting', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/inbox');
  for (const { kind, title } of EXPECTED) {
    const item = page.getByTestId('question-item').filter({ hasText: title });
    const left = Math.max(DEADLINE_MS - (Date.now() - server.startedAt), 1);
    await item.waitFor({ timeout: left });
    assert.equal((await item.locator('.question-meta .kind').textContent()).trim(), kind, `the kind of "${title}"`);
  }
  const elapsed = Date.now() - server.startedAt;
  assert.ok(elapsed <= DEADLINE_MS, `every kind shown after ${elapsed} ms`);
  console.log(`every kind of question in the inbox ${elapsed} ms after starting the demo`);
  await page.screenshot({ path: resultPath('demo-inbox.png'), fullPage: true });
  await page.close();
});

test('the API has them pending, and the error-recovery question comes from the sub-agent', async () => {
  const questions = await eventually('five pending questions', async () => {
    const pending = await pendingQuestions();
    return pending.length >= EXPECTED.length && pending;
  });
  const kinds = new Set(questions.map((q) => q.kind));
  for (const kind of ['approval', 'blocking', 'non_blocking', 'error_recovery']) {
    assert.ok(kinds.has(kind), `a pending ${kind} question`);
  }
  const responseTypes = new Set(questions.filter((q) => q.kind === 'blocking').map((q) => q.response_type));
  assert.ok(responseTypes.has('choice') && responseTypes.has('form'), 'blocking choice and form questions');

  const recovery = questions.find((q) => q.kind === 'error_recovery');
  assert.notEqual(recovery.parent_run_ids.length, 0, 'the error-recovery question has a lineage');
  const all = await runs();
  const coordinator = all.find((r) => r.agent_name === 'coordinator');
  const migrator = all.find((r) => r.agent_name === 'migrator');
  assert.deepEqual(recovery.parent_run_ids, [coordinator.id], 'its parent is the coordinator run');
  assert.equal(recovery.run_id, migrator.id, 'it is asked by the migrator run');
  assert.equal(migrator.parent_run_id, coordinator.id);
  assert.equal(coordinator.status, 'waiting_for_children');
  assert.ok(all.every((r) => r.scripted && r.project === 'demo'), 'demo runs are scripted and in project "demo"');
});

test('answering from the UI lets the agents finish: the sub-agent, its parent, and the approved dry run', async () => {
  const page = await browser.newPage();
  await signIn(page, server, '/inbox');

  await page.getByRole('link', { name: /Could not fetch the migration plan/ }).click();
  await page.getByTestId('option-use_backup').check();
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('resolution').waitFor();

  await page.goto(`${server.baseUrl}/inbox`);
  await page.getByRole('link', { name: /terraform apply -auto-approve/ }).click();
  await page.getByTestId('answer-approve').click();
  await page.getByTestId('resolution').waitFor();
  await page.close();

  const finished = await eventually('the coordinator, the migrator and the release manager complete', async () => {
    const all = await runs();
    const done = ['coordinator', 'migrator', 'release-manager'].map((name) =>
      all.find((r) => r.agent_name === name && r.status === 'completed'),
    );
    return done.every(Boolean) && done;
  });
  const [coordinator, , releaseManager] = finished;
  assert.match(coordinator.result, /Maintenance window report/);
  const calls = await api(server, 'GET', `/runs/${releaseManager.id}/tool-calls`);
  const shell = calls.json.items.find((c) => c.tool_name === 'shell');
  assert.equal(shell.status, 'completed');
  assert.equal(shell.output.dry_run, true, 'the demo never runs the command');
});

test('restarting the demo on the same data does not start the open agents again', async () => {
  const earlier = await runs();
  await server.stop();
  server = await startDemo();
  // The demo starts its runs before it listens: they are all there at once.
  const later = await runs();
  // Only the agents whose runs have finished (the release manager and the coordinator) get a new run; the
  // migrator's new run, if the new coordinator has spawned it already, is not one the demo started.
  const added = later
    .filter((r) => r.parent_run_id === null && !earlier.some((e) => e.id === r.id))
    .map((r) => r.agent_name)
    .sort();
  assert.deepEqual(added, ['coordinator', 'release-manager']);
  const agents = await api(server, 'GET', '/agents');
  assert.deepEqual(agents.json.items.map((a) => a.name).sort(), [
    'coordinator', 'migrator', 'release-manager', 'triage', 'writer',
  ]);
});
