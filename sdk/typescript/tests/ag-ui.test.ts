// `holdpoint-client/ag-ui` with the real AG-UI packages: the example agent (served with `@ag-ui/encoder`) ends its
// run with three interrupts; `@ag-ui/client`'s HttpAgent, through the adapter, has people answer them in Holdpoint
// and the next run acts on the answers — after the adapter's process was killed and started again, and when nobody
// answers before the interrupts expire.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { HttpAgent } from '@ag-ui/client';
import { type Holdpoint, HoldpointError, type JsonObject, type Question } from 'holdpoint-client';
import { askInterrupts, idempotencyKey, resumeInterrupts, runWithInterrupts } from 'holdpoint-client/ag-ui';

import {
  ExampleProcess,
  type TestServer,
  agentClient,
  eventually,
  freshProject,
  personClient,
  startServer,
} from './harness.js';


let server: TestServer;
let person: Holdpoint;

before(async () => {
  server = await startServer();
  person = personClient(server);
});

after(async () => {
  await server?.stop();
});

/** The example agent on a free loopback port; resolves with it and its URL. */
async function startAgent(ttlSeconds: number): Promise<{ agent: ExampleProcess; url: string }> {
  const agent = new ExampleProcess('ag-ui-agent', tmpdir(), { AG_UI_PORT: '0', INTERRUPT_TTL_SECONDS: String(ttlSeconds) });
  const url = await eventually('the agent to listen', () => /listening on (\S+)/.exec(agent.stdout.join(''))?.[1]);
  return { agent, url };
}

/** The questions asked about one AG-UI thread, by interrupt id. */
async function askedFor(project: string, threadId: string): Promise<Question[]> {
  const page = await person.listQuestions({ project, limit: 200 });
  const context = (q: Question): Record<string, string> => (q.context['ag_ui'] ?? {}) as Record<string, string>;
  return page.items
    .filter((q) => context(q)['thread_id'] === threadId)
    .sort((a, b) => (context(a)['interrupt_id'] ?? '').localeCompare(context(b)['interrupt_id'] ?? ''));
}

test('the example asks each interrupt once across a restart, and the next run acts on the answers', async () => {
  const { agent, url } = await startAgent(1800);
  const cwd = mkdtempSync(join(tmpdir(), 'holdpoint-ag-ui-'));
  const threadId = `deploy-${randomUUID().slice(0, 8)}`;
  const env = {
    HOLDPOINT_SERVER: server.url,
    HOLDPOINT_TOKEN: await server.createToken('agent'),
    AG_UI_URL: url,
    THREAD_ID: threadId,
  };
  try {
    const first = new ExampleProcess('ag-ui', cwd, env);
    const questions = await eventually('three questions', async () => {
      const asked = await askedFor('ag-ui-demo', threadId);
      return asked.length === 3 ? asked : undefined;
    }, 30_000);
    await first.kill(); // the adapter dies while people decide
    assert.ok(existsSync(join(cwd, 'ag-ui-run.json')), 'the interrupted run was kept before anybody was asked');

    const [approval, confirmation, notes] = questions as [Question, Question, Question];
    assert.equal(approval.kind, 'approval');
    assert.equal(approval.allow_edit, true);
    assert.equal(approval.title, 'Deploy the api service to production?');
    assert.deepEqual(approval.action, { tool_name: 'deploy', arguments: { service: 'api', environment: 'production' } });
    assert.equal(notes.response_type, 'form');
    assert.deepEqual(
      notes.fields.map((f) => [f.key, f.response_type, f.required]),
      [
        ['summary', 'text', true],
        ['notify', 'boolean', false],
      ],
    );
    assert.equal(confirmation.response_type, 'boolean');
    assert.ok(questions.every((q) => q.timeout_at !== null), "each interrupt's expiresAt is its question's deadline");
    const runId = (approval.context['ag_ui'] as Record<string, string>)['run_id'] as string;

    // A second later, a deadline counted from the restart would differ from the first request's: the adapter must
    // send the same request again for the server to answer with the same questions.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const second = new ExampleProcess('ag-ui', cwd, env);
    await person.answer(approval.id, { value: true, edited_arguments: { service: 'api', environment: 'staging' } });
    await person.answer(notes.id, { value: { summary: 'Faster logins', notify: true } });
    await person.answer(confirmation.id, { value: true });
    assert.equal(await second.finish(), 0, second.output());
    assert.deepEqual(JSON.parse(second.stdout.join('')), {
      deployed: { service: 'api', environment: 'staging' },
      notes: { summary: 'Faster logins', notify: true },
      paged: true,
      cancelled: [],
    });
    assert.equal((await askedFor('ag-ui-demo', threadId)).length, 3, 'the restarted adapter found the same questions');
    assert.equal(existsSync(join(cwd, 'ag-ui-run.json')), false);
    assert.equal(idempotencyKey(threadId, runId, 'approve-deploy'), `ag-ui:${threadId}:${runId}:approve-deploy`);
  } finally {
    await agent.kill();
    rmSync(cwd, { recursive: true, force: true });
  }
});

test('interrupts nobody answers before they expire are resumed as cancelled', async () => {
  const { agent, url } = await startAgent(3);
  const project = freshProject();
  const threadId = `late-${randomUUID().slice(0, 8)}`;
  try {
    const hp = await agentClient(server);
    const client = new HttpAgent({
      url,
      threadId,
      initialMessages: [{ id: 'user-1', role: 'user', content: 'Deploy the api service.' }],
    });
    const { result, resumed } = await runWithInterrupts(hp, client, { project });
    assert.deepEqual(result, {
      deployed: null,
      notes: null,
      paged: null,
      cancelled: ['approve-deploy', 'page-on-call', 'release-notes'],
    });
    assert.deepEqual(
      resumed[0]?.map((entry) => [entry.interruptId, entry.status, entry.payload]),
      [
        ['approve-deploy', 'cancelled', undefined],
        ['release-notes', 'cancelled', undefined],
        ['page-on-call', 'cancelled', undefined],
      ],
    );
    const questions = await askedFor(project, threadId);
    assert.deepEqual(
      questions.map((q) => q.status),
      ['expired', 'expired', 'expired'],
    );
  } finally {
    await agent.kill();
  }
});

test('a response schema becomes a form, and the answer comes back as the schema types it', async () => {
  const hp = await agentClient(server);
  const project = freshProject();
  const run = {
    threadId: `form-${randomUUID().slice(0, 8)}`,
    runId: 'run-1',
    toolCalls: {},
    interrupts: [
      {
        id: 'cluster',
        reason: 'input_required',
        message: 'Shape the new cluster',
        responseSchema: {
          type: 'object',
          properties: {
            region: { type: 'string', enum: ['eu-west', 'us-east'] },
            size: { oneOf: [{ const: 's', title: 'Small' }, { const: 'l', title: 'Large' }] },
            zones: { type: 'array', items: { enum: ['a', 'b', 'c'] } },
            nodes: { type: 'integer', title: 'Nodes' },
            labels: { type: 'object', description: 'Labels' },
          },
          required: ['region', 'nodes'],
        },
      },
    ],
  };
  const [asked] = await askInterrupts(hp, run, { project });
  const question = asked?.question as Question;
  assert.deepEqual(
    question.fields.map((f) => [f.key, f.label, f.response_type, f.required]),
    [
      ['region', 'region', 'choice', true],
      ['size', 'size', 'choice', false],
      ['zones', 'zones', 'multi_choice', false],
      ['nodes', 'Nodes', 'integer', true],
      ['labels', 'Labels (JSON)', 'text', false],
    ],
  );
  await person.answer(question.id, {
    value: { region: 'us-east', size: 'l', zones: ['a', 'c'], nodes: 3, labels: '{"team": "core"}' },
  });
  const entries = await resumeInterrupts(hp, run, { project });
  assert.equal(entries?.length, 1);
  assert.equal(entries?.[0]?.status, 'resolved');
  assert.deepEqual(entries?.[0]?.payload, { region: 'us-east', size: 'l', zones: ['a', 'c'], nodes: 3, labels: { team: 'core' } });
  assert.equal((await askedFor(project, run.threadId)).length, 1, 'asking again for the interrupt found the same question');
});

test("a deadline beyond the server's longest timeout and a schema of many properties are asked as they are", async () => {
  const hp = await agentClient(server);
  const project = freshProject();
  assert.deepEqual(await hp.timeoutBounds(), { min_seconds: 1, max_seconds: 86_400 });
  // Three days ahead is past the server's longest timeout (24 h here): the question is asked with that timeout
  // rather than refused; twelve properties are twelve fields, not one free-text box.
  const keys = Array.from({ length: 12 }, (_, n) => `check_${String(n).padStart(2, '0')}`);
  const run = {
    threadId: `far-${randomUUID().slice(0, 8)}`,
    runId: 'run-1',
    toolCalls: {},
    interrupts: [
      {
        id: 'far',
        reason: 'input_required',
        message: 'Which region?',
        expiresAt: new Date(Date.now() + 3 * 86_400_000).toISOString(),
      },
      {
        id: 'checklist',
        reason: 'input_required',
        message: 'Go through the checklist',
        responseSchema: { type: 'object', properties: Object.fromEntries(keys.map((key) => [key, { type: 'boolean' }])) },
      },
    ],
  };
  const [far, checklist] = await askInterrupts(hp, run, { project });
  const timeoutAt = far?.question?.timeout_at;
  assert.ok(far?.question?.status === 'pending' && timeoutAt, JSON.stringify(far?.question));
  const remaining = (Date.parse(timeoutAt) - Date.now()) / 1000;
  assert.ok(remaining > 86_400 - 120 && remaining <= 86_400, String(remaining));
  assert.equal(checklist?.question?.response_type, 'form');
  assert.deepEqual(checklist?.question?.fields.map((f) => f.key), keys);
});

test('a schema of one typed value is asked as that type and resumed with the value', async () => {
  const hp = await agentClient(server);
  const project = freshProject();
  const run = {
    threadId: `typed-${randomUUID().slice(0, 8)}`,
    runId: 'run-1',
    toolCalls: {},
    interrupts: [
      { id: 'region', reason: 'input_required', message: 'Which region?', responseSchema: { type: 'string', enum: ['eu-west', 'us-east'] } },
      { id: 'replicas', reason: 'input_required', message: 'How many replicas?', responseSchema: { type: 'integer', minimum: 1, maximum: 9 } },
    ],
  };
  const [region, replicas] = (await askInterrupts(hp, run, { project })).map((asked) => asked.question as Question);
  assert.equal(region?.response_type, 'choice');
  assert.deepEqual(region?.options.map((o) => o.value), ['eu-west', 'us-east']);
  assert.equal(replicas?.response_type, 'integer');
  assert.deepEqual([replicas?.min, replicas?.max], [1, 9]);
  await assert.rejects(person.answer(replicas?.id as string, { value: 12 }), (error: unknown) => error instanceof HoldpointError);
  await person.answer(region?.id as string, { value: 'us-east' });
  await person.answer(replicas?.id as string, { value: 3 });
  const entries = await resumeInterrupts(hp, run, { project });
  assert.deepEqual(entries?.map((e) => [e.interruptId, e.status, e.payload]), [
    ['region', 'resolved', 'us-east'],
    ['replicas', 'resolved', 3],
  ]);
});

test("a schema's bounds and whole numbers hold, and its enums come back as written", async () => {
  const hp = await agentClient(server);
  const project = freshProject();
  const run = {
    threadId: `bounds-${randomUUID().slice(0, 8)}`,
    runId: 'run-1',
    toolCalls: {},
    interrupts: [
      {
        id: 'cluster',
        reason: 'input_required',
        message: 'Size the cluster',
        responseSchema: {
          type: 'object',
          properties: {
            nodes: { type: 'integer', minimum: 1, maximum: 5, title: 'Nodes' },
            ratio: { type: 'number', minimum: 0, maximum: 1, title: 'Ratio' },
            tier: { type: 'integer', enum: [1, 2, 3], title: 'Tier' },
            replicas: { type: 'array', items: { enum: [1, 3] }, title: 'Replicas' },
          },
          required: ['nodes'],
        },
      },
    ],
  };
  const [asked] = await askInterrupts(hp, run, { project });
  const question = asked?.question as Question;
  assert.deepEqual(question.fields.map((f) => f.key), ['nodes', 'ratio', 'tier', 'replicas'], 'in their order');
  const refused: JsonObject[] = [{ nodes: 9 }, { nodes: 2.5 }, { nodes: 0 }, { nodes: 2, ratio: 1.5 }];
  for (const value of refused) {
    await assert.rejects(
      person.answer(question.id, { value }),
      (error: unknown) => error instanceof HoldpointError && error.status === 422,
      JSON.stringify(value),
    );
  }
  await person.answer(question.id, { value: { nodes: 2, ratio: 0.5, tier: '3', replicas: ['1', '3'] } });
  const entries = await resumeInterrupts(hp, run, { project });
  assert.equal(entries?.[0]?.status, 'resolved');
  assert.deepEqual(entries?.[0]?.payload, { nodes: 2, ratio: 0.5, tier: 3, replicas: [1, 3] });
});

test('tool_call interrupts the approval rules decide are resumed at once, naming the rule, without a question', async () => {
  const saved = await server.api('PUT', '/rules', {
    default: 'ask',
    rules: [
      { name: 'no-wipes', tools: ['wipe'], decision: 'deny', reason: 'restore from the backups instead' },
      { name: 'reads', tools: ['read'], decision: 'allow' },
    ],
  });
  assert.equal(saved.status, 200, JSON.stringify(saved.json));
  try {
    const hp = await agentClient(server);
    const project = freshProject();
    const entries = await resumeInterrupts(
      hp,
      {
        threadId: 'thread-rules',
        runId: 'run-1',
        interrupts: [
          { id: 'wipe', reason: 'tool_call', toolCallId: 'call-wipe' },
          { id: 'read', reason: 'tool_call', toolCallId: 'call-read' },
        ],
        toolCalls: {
          'call-wipe': { name: 'wipe', arguments: { path: '/srv' } },
          'call-read': { name: 'read', arguments: { path: '/etc/hosts' } },
        },
      },
      { project },
    );
    assert.deepEqual(entries, [
      {
        interruptId: 'wipe',
        status: 'resolved',
        payload: { approved: false },
        metadata: {
          holdpoint: { outcome: 'denied_by_rule', question_id: null, comment: 'restore from the backups instead', rule: 'no-wipes' },
        },
      },
      {
        interruptId: 'read',
        status: 'resolved',
        payload: { approved: true },
        metadata: { holdpoint: { outcome: 'allowed_by_rule', question_id: null, rule: 'reads' } },
      },
    ]);
    assert.deepEqual((await person.listQuestions({ project })).items, [], 'nobody was asked');
  } finally {
    await server.api('PUT', '/rules', { rules: [], default: 'ask' });
  }
});
