// The client against the real server: every response type asked and answered, every outcome, approvals, waiting,
// non-blocking questions, idempotent asking and the caller's AbortSignal.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { type FormField, Holdpoint, type JsonValue, type NewQuestion } from 'holdpoint-client';

import { type TestServer, agentClient, freshProject, nextPending, personClient, startServer } from './harness.js';

let server: TestServer;
let person: Holdpoint;

before(async () => {
  server = await startServer();
  person = personClient(server);
});

after(async () => {
  await server?.stop();
});

const FORM: FormField[] = [
  { key: 'environment', label: 'Environment', response_type: 'choice', options: ['staging', 'production'], required: true },
  { key: 'replicas', label: 'Replicas', response_type: 'number', required: true },
  { key: 'notify', label: 'Tell the team?', response_type: 'boolean' },
];

const CASES: Array<{ name: string; question: Omit<NewQuestion, 'title'>; answer: JsonValue }> = [
  { name: 'text', question: { response_type: 'text' }, answer: 'Ada Lovelace' },
  { name: 'boolean', question: { response_type: 'boolean' }, answer: false },
  {
    name: 'choice',
    question: { response_type: 'choice', options: ['red', { value: 'blue', label: 'Blue', description: 'the calm one' }] },
    answer: 'blue',
  },
  { name: 'multi_choice', question: { response_type: 'multi_choice', options: ['a', 'b', 'c'] }, answer: ['a', 'c'] },
  { name: 'form', question: { response_type: 'form', fields: FORM }, answer: { environment: 'production', replicas: 3, notify: true } },
  {
    name: 'error_recovery with an option',
    question: { kind: 'error_recovery', options: [{ value: 'fallback', label: 'Use the fallback mirror' }] },
    answer: 'fallback',
  },
  { name: 'error_recovery retry', question: { kind: 'error_recovery' }, answer: 'retry' },
];

describe('ask waits for the answer of each response type', () => {
  for (const { name, question, answer } of CASES) {
    test(name, async () => {
      const hp = await agentClient(server);
      const project = freshProject();
      const asking = hp.ask({ title: 'What now?', body: 'Some **Markdown**', context: { step: 3 }, project, ...question });
      const pending = await nextPending(person, project);
      assert.equal(pending.status, 'pending');
      await person.answer(pending.id, { value: answer, comment: 'from the test' });
      const result = await asking;
      assert.equal(result.outcome, 'answered');
      assert.deepEqual(result.value, answer);
      assert.equal(result.comment, 'from the test');
      assert.equal(result.answeredBy, 'bootstrap');
      assert.equal(result.question.id, pending.id);
      assert.equal(result.question.body, 'Some **Markdown**');
      assert.deepEqual(result.question.context, { step: 3 });
      assert.ok(result.question.resolved_at, 'resolved_at is set');
    });
  }

  test('options given as strings reach the server as value and label', async () => {
    const hp = await agentClient(server);
    const question = await hp.createQuestion({ title: 'Colour?', response_type: 'choice', options: ['red', 'green'] });
    assert.deepEqual(question.options, [
      { value: 'red', label: 'red' },
      { value: 'green', label: 'green' },
    ]);
  });
});

test('a question names its callback URL, and one into a private range is refused', async () => {
  const hp = await agentClient(server);
  // A public address, never resolved: the server refuses private ranges unless it is told otherwise.
  const question = await hp.createQuestion({ title: 'Call me back?', callback_url: 'https://93.184.216.34/holdpoint' });
  assert.equal(question.callback_url, 'https://93.184.216.34/holdpoint');
  await assert.rejects(hp.createQuestion({ title: 'Call me here?', callback_url: 'http://127.0.0.1:9/hook' }), (error: unknown) => {
    const details = (error as { details?: { fields?: Record<string, string> } }).details;
    assert.ok(details?.fields?.callback_url, JSON.stringify(details));
    return true;
  });
});

describe('approve', () => {
  test("a person's no is an answer, not an exception, and its comment is the reason", async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const approving = hp.approve({ tool_name: 'deploy', arguments: { service: 'api' }, project });
    const pending = await nextPending(person, project);
    assert.equal(pending.kind, 'approval');
    assert.deepEqual(pending.action, { tool_name: 'deploy', arguments: { service: 'api' } });
    assert.equal(pending.title, 'Allow deploy?');
    await person.answer(pending.id, { value: false, comment: 'not on a Friday' });
    const result = await approving;
    assert.deepEqual([result.outcome, result.approved, result.rejected], ['answered', false, true]);
    assert.equal(result.comment, 'not on a Friday');
    assert.equal(result.reason, 'Rejected by bootstrap: not on a Friday. Do not retry the same call unchanged.');
    assert.deepEqual(result.arguments, { service: 'api' });
  });

  test('an approver may edit the arguments when allowed, and the call runs with theirs', async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const approving = hp.approve({
      tool_name: 'deploy',
      arguments: { service: 'api', environment: 'production' },
      allow_edit: true,
      urgency: 'critical',
      project,
    });
    const pending = await nextPending(person, project);
    assert.equal(pending.allow_edit, true);
    assert.equal(pending.urgency, 'critical');
    await person.answer(pending.id, { value: true, edited_arguments: { service: 'api', environment: 'staging' } });
    const result = await approving;
    assert.equal(result.approved, true);
    assert.deepEqual(result.arguments, { service: 'api', environment: 'staging' });
    assert.deepEqual(result.editedArguments, { service: 'api', environment: 'staging' });
    assert.equal(result.reason, 'Approved by bootstrap.');
  });

  test('an approval nobody decides expires: not approved, and not a rejection either', async () => {
    const hp = await agentClient(server);
    const result = await hp.approve({ tool_name: 'drop_table', arguments: { table: 'users' }, timeout_seconds: 1 });
    assert.deepEqual([result.outcome, result.approved, result.rejected], ['expired', false, false]);
    assert.equal(result.value, undefined);
    assert.match(result.reason, /^Nobody decided/);
  });

  test("an approval's default applies when nobody decides", async () => {
    const hp = await agentClient(server);
    const result = await hp.approve({ tool_name: 'restart', timeout_seconds: 1, default: true });
    assert.deepEqual([result.outcome, result.approved], ['defaulted', true]);
    assert.equal(result.question?.resolution, 'default_on_timeout');
    assert.match(result.reason, /^Approved by default/);
  });
});

describe('outcomes', () => {
  test("defaulted: the deadline passed and the question's default applied", async () => {
    const hp = await agentClient(server);
    const started = Date.now();
    const result = await hp.ask({
      title: 'Which region?',
      response_type: 'choice',
      options: ['eu-west', 'us-east'],
      timeout_seconds: 1,
      default_response: { value: 'eu-west', comment: 'the usual' },
    });
    assert.equal(result.outcome, 'defaulted');
    assert.equal(result.value, 'eu-west');
    assert.equal(result.comment, 'the usual');
    assert.equal(result.answeredBy, undefined);
    assert.equal(result.question?.resolution, 'default_on_timeout');
    assert.ok(Date.now() - started < 10_000, 'resolved within seconds of its deadline');
  });

  test('expired: the deadline passed and nobody answered', async () => {
    const hp = await agentClient(server);
    const result = await hp.ask({ title: 'Anyone there?', timeout_seconds: 1 });
    assert.equal(result.outcome, 'expired');
    assert.equal(result.value, undefined);
    assert.equal(result.question.response, null);
  });

  test('cancelled: the question was withdrawn while the agent waited', async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const asking = hp.ask({ title: 'Merge the branch?', response_type: 'boolean', project });
    const pending = await nextPending(person, project);
    const cancelled = await person.cancel(pending.id, { reason: 'superseded' });
    assert.equal(cancelled.status, 'cancelled');
    const result = await asking;
    assert.equal(result.outcome, 'cancelled');
    assert.equal(result.value, undefined);
    assert.equal(result.comment, 'superseded');
    assert.equal(result.question.resolution, 'cancelled');
  });
});

describe('waiting', () => {
  test('a non-blocking question returns at once, and wait() reads its answer later', async () => {
    const hp = await agentClient(server);
    const asked = await hp.ask({ title: 'Mention the deprecation?', kind: 'non_blocking', response_type: 'boolean' });
    assert.equal(asked.outcome, 'pending');
    assert.equal(asked.value, undefined);
    await person.answer(asked.question.id, { value: true });
    const later = await hp.wait(asked.question.id);
    assert.equal(later.outcome, 'answered');
    assert.equal(later.value, true);
  });

  test('waitTimeoutMs gives up waiting on time and leaves the question pending', async () => {
    const hp = await agentClient(server);
    const started = Date.now();
    // The server's long-poll counts whole seconds; the client's limit is kept to the millisecond all the same.
    const result = await hp.ask({ title: 'Slow question' }, { waitTimeoutMs: 400 });
    const waited = Date.now() - started;
    assert.equal(result.outcome, 'pending');
    assert.equal(result.question.status, 'pending');
    assert.ok(waited >= 400 && waited < 900, `waited ${waited} ms`);
  });

  test('an answer arrives while a long-poll is held, without waiting for the poll to end', async () => {
    const hp = await agentClient(server);
    const question = await hp.createQuestion({ title: 'Now?' });
    const waiting = hp.wait(question.id);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const answeredAt = Date.now();
    await person.answer(question.id, { value: 'now' });
    const result = await waiting;
    assert.equal(result.value, 'now');
    assert.ok(Date.now() - answeredAt < 2_000, 'woken by the answer');
  });

  test('the same idempotency key asks once: a restarted agent gets the first question and its answer', async () => {
    const token = await server.createToken('agent');
    const key = `deploy-approval-${freshProject()}`;
    const first = await new Holdpoint({ url: server.url, token }).createQuestion({ title: 'Ship it?' }, { idempotencyKey: key });
    await person.answer(first.id, { value: 'ship it' });
    // A new client with the same token (keys are each caller's own), as a restarted process would have it.
    const again = await new Holdpoint({ url: server.url, token }).ask({ title: 'Ship it?' }, { idempotencyKey: key });
    assert.equal(again.question.id, first.id);
    assert.equal(again.outcome, 'answered');
    assert.equal(again.value, 'ship it');
  });

  test("the caller's AbortSignal stops the wait; the question stays pending", async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const controller = new AbortController();
    const asking = hp.ask({ title: 'Abort me', project }, { signal: controller.signal });
    const pending = await nextPending(person, project);
    controller.abort();
    await assert.rejects(asking, (error: unknown) => error instanceof Error && error.name === 'AbortError');
    assert.equal((await person.getQuestion(pending.id)).status, 'pending');
  });
});

test('the answer value is typed by the response type', async () => {
  const hp = await agentClient(server);
  const project = freshProject();
  const asking = hp.ask({ title: 'Pick some', response_type: 'multi_choice', options: ['x', 'y', 'z'], project });
  await person.answer((await nextPending(person, project)).id, { value: ['y', 'z'] });
  const result = await asking;
  // A compile-time check as much as a runtime one: `value` is `string[] | undefined` here.
  const picked: string[] = result.value ?? [];
  assert.deepEqual(picked.map((v) => v.toUpperCase()), ['Y', 'Z']);
});

describe('many hands', () => {
  test('an approval that needs two people waits for the second, and a claim keeps others off it', async () => {
    const hp = await agentClient(server);
    // A quorum counts people: each approval comes from a token a person made (the bootstrap token is nobody's).
    const ada = await server.personToken('approver');
    const firstPerson = new Holdpoint({ url: server.url, token: ada.token });
    const second = new Holdpoint({ url: server.url, token: (await server.personToken('approver')).token });
    const responder = new Holdpoint({ url: server.url, token: await server.createToken('responder') });
    const project = freshProject();
    const approving = hp.approve({ tool_name: 'dropdb', arguments: { name: 'staging' }, project, required_approvals: 2 });
    const pending = await nextPending(person, project);
    assert.equal(pending.required_approvals, 2);

    const first = await firstPerson.answer(pending.id, { value: true, comment: 'backed up' });
    assert.equal(first.status, 'pending');
    assert.deepEqual(first.approvals?.map((a) => [a.by, a.comment]), [[`${ada.username}-approver`, 'backed up']]);

    const claimed = await second.claim(pending.id, { ttl_seconds: 600 });
    assert.ok(claimed.claimed_by && claimed.claim_expires_at, JSON.stringify(claimed));
    const text = await hp.createQuestion({ title: 'Which region?', project });
    await second.claim(text.id);
    await assert.rejects(responder.answer(text.id, { value: 'eu' }), (error: unknown) => {
      assert.equal((error as { code?: string }).code, 'conflict');
      assert.equal((error as { details?: { claimed_by?: string } }).details?.claimed_by, claimed.claimed_by);
      return true;
    });
    assert.equal((await second.unclaim(text.id)).claimed_by, undefined);

    await second.answer(pending.id, { value: true });
    const result = await approving;
    assert.equal(result.approved, true);
    assert.deepEqual(result.question?.approvals?.map((a) => a.by), [`${ada.username}-approver`, claimed.claimed_by]);
  });

  test('an approval can make a grant, which approves the next matching call as it is asked, and is revoked', async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const approving = hp.approve({ tool_name: 'shell', arguments: { command: 'npm test' }, project });
    const pending = await nextPending(person, project);
    await person.answer(pending.id, {
      value: true,
      grant: { scope: 'agent', matcher: { command_prefix: 'npm test' }, expires_in_seconds: 3600 },
    });
    assert.equal((await approving).approved, true);
    const live = await person.listGrants();
    const grant = live.items.find((g) => g.question_id === pending.id);
    assert.ok(grant, JSON.stringify(live));
    assert.deepEqual([grant.scope, grant.tool_name, grant.matcher], ['agent', 'shell', { command_prefix: 'npm test' }]);
    // Nobody is asked about this one: the grant lets it through at once.
    const again = await hp.approve({ tool_name: 'shell', arguments: { command: 'npm test -- --coverage' }, project });
    assert.deepEqual([again.outcome, again.approved, again.grantId, again.question], ['allowed_by_grant', true, grant.id, undefined]);
    assert.deepEqual(again.arguments, { command: 'npm test -- --coverage' });
    assert.equal(again.reason, 'Allowed by a grant from an earlier approval, so nobody was asked.');
    const revoked = await person.revokeGrant(grant.id);
    assert.ok(revoked.revoked_at);
    assert.equal((await person.listGrants()).items.some((g) => g.id === grant.id), false);
    assert.equal((await person.listGrants({ all: true })).items.some((g) => g.id === grant.id), true);
  });
});
