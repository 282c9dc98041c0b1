// Holdpoint's own agents over AG-UI, consumed by the official client: `@ag-ui/client`'s HttpAgent runs a scripted
// Holdpoint agent through `POST /api/v1/agents/{name}/ag-ui`, verifying every event as it arrives (its verify step
// throws on any protocol violation), gets the run's approval as a `tool_call` interrupt, and runs again on the same
// thread with `resume`: the call runs and the run completes.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { HttpAgent } from '@ag-ui/client';
import type { BaseEvent, Interrupt } from '@ag-ui/core';

import { type TestServer, startServer } from './harness.js';

let server: TestServer;
let target: Server;
let scripts: string;
const deploys: string[] = [];

before(async () => {
  // What the agent's `http_request` reaches once the call is approved.
  target = createServer((request, response) => {
    deploys.push(`${request.method} ${request.url}`);
    response.end('deployed');
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  const address = target.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  scripts = mkdtempSync(join(tmpdir(), 'holdpoint-ag-ui-scripts-'));
  writeFileSync(
    join(scripts, 'deploy.json'),
    JSON.stringify([
      {
        content: 'I will deploy the api service.',
        tool_calls: [
          {
            id: 'call_deploy',
            name: 'http_request',
            arguments: { method: 'POST', url: `http://127.0.0.1:${port}/deploy` },
          },
        ],
      },
      { content: 'Deployed the api service.' },
    ]),
  );
  server = await startServer({
    HOLDPOINT_SCRIPTS_DIR: scripts,
    HOLDPOINT_HTTP_ALLOWED_HOSTS: `127.0.0.1:${port}`,
  });
  const created = await server.api('POST', '/agents', {
    name: 'deployer',
    system_prompt: 'You deploy services.',
    model: 'script:deploy.json',
    tools: ['http_request'],
    approval_policy: { default: 'prompt' },
  });
  assert.equal(created.status, 201, JSON.stringify(created.json));
});

after(async () => {
  await server?.stop();
  await new Promise((resolve) => target?.close(resolve));
  if (scripts) rmSync(scripts, { recursive: true, force: true });
});

test('HttpAgent runs a Holdpoint agent, gets its approval as an interrupt and resumes it to the end', async () => {
  const token = await server.createToken('approver');
  const agent = new HttpAgent({
    url: `${server.url}/api/v1/agents/deployer/ag-ui`,
    headers: { authorization: `Bearer ${token}` },
    threadId: `thread-${randomUUID()}`,
    initialMessages: [{ id: 'user-1', role: 'user', content: 'Deploy the api service.' }],
  });

  const seen: BaseEvent[] = [];
  let interrupts: Interrupt[] = [];
  await agent.runAgent(
    {},
    {
      onEvent: ({ event }) => {
        seen.push(event);
      },
      onRunFinishedEvent: (params) => {
        if (params.outcome === 'interrupt') interrupts = params.interrupts;
      },
    },
  );
  assert.deepEqual(
    seen.map((e) => e.type),
    [
      'RUN_STARTED',
      'STEP_STARTED',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
      'TOOL_CALL_START',
      'TOOL_CALL_ARGS',
      'TOOL_CALL_END',
      'STEP_FINISHED',
      'RUN_FINISHED',
    ],
  );
  assert.equal(interrupts.length, 1);
  const [approval] = interrupts as [Interrupt];
  assert.equal(approval.reason, 'tool_call');
  assert.equal(approval.toolCallId, 'call_deploy');
  assert.ok(approval.expiresAt, 'the question has a deadline');
  assert.deepEqual(agent.pendingInterrupts.map((i) => i.id), [approval.id]);
  // The thread's messages now hold the assistant's turn with its tool call, as the client applied the events.
  const proposed = agent.messages.find((m) => m.role === 'assistant');
  assert.equal(proposed?.role === 'assistant' ? proposed.toolCalls?.[0]?.function.name : undefined, 'http_request');
  assert.deepEqual(deploys, [], 'nothing runs before it is approved');

  // The interrupt is a Holdpoint question: its id is the question's.
  const question = await server.api('GET', `/questions/${approval.id}`);
  assert.equal(question.json.kind, 'approval');
  assert.equal(question.json.status, 'pending');

  seen.length = 0;
  const { result } = await agent.runAgent(
    { resume: [{ interruptId: approval.id, status: 'resolved', payload: { approved: true } }] },
    { onEvent: ({ event }) => void seen.push(event) },
  );
  assert.deepEqual(
    seen.map((e) => e.type),
    [
      'RUN_STARTED',
      'TOOL_CALL_RESULT',
      'STEP_STARTED',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
      'STEP_FINISHED',
      'RUN_FINISHED',
    ],
  );
  assert.equal(result, 'Deployed the api service.');
  assert.deepEqual(deploys, ['POST /deploy'], 'the approved call ran once');
  assert.deepEqual(agent.pendingInterrupts, []);
  const last = agent.messages.at(-1);
  assert.equal(last?.role, 'assistant');
  assert.equal(last?.content, 'Deployed the api service.');
  assert.ok(agent.messages.some((m) => m.role === 'tool' && m.toolCallId === 'call_deploy'));
  const answered = await server.api('GET', `/questions/${approval.id}`);
  assert.equal(answered.json.status, 'answered');
});

test('a cancelled resume rejects the call, and the run still completes', async () => {
  const token = await server.createToken('agent');
  const agent = new HttpAgent({
    url: `${server.url}/api/v1/agents/deployer/ag-ui`,
    headers: { authorization: `Bearer ${token}` },
    threadId: `thread-${randomUUID()}`,
    initialMessages: [{ id: 'user-1', role: 'user', content: 'Deploy the api service.' }],
  });
  await agent.runAgent();
  const [approval] = agent.pendingInterrupts as [Interrupt];
  assert.equal(approval.reason, 'tool_call');
  const before = deploys.length;
  const { result } = await agent.runAgent({ resume: [{ interruptId: approval.id, status: 'cancelled' }] });
  assert.equal(result, 'Deployed the api service.', 'the script goes on whatever the tool said');
  assert.equal(deploys.length, before, 'a cancelled approval never runs its call');
  const cancelled = await server.api('GET', `/questions/${approval.id}`);
  assert.equal(cancelled.json.status, 'cancelled');
});

test('a refused request is an HTTP error before any event, in the one error shape', async () => {
  const token = await server.createToken('viewer');
  const agent = new HttpAgent({
    url: `${server.url}/api/v1/agents/deployer/ag-ui`,
    headers: { authorization: `Bearer ${token}` },
    initialMessages: [{ id: 'user-1', role: 'user', content: 'Deploy.' }],
  });
  const originalError = console.error;
  console.error = () => {};
  try {
    await assert.rejects(agent.runAgent(), (error: Error & { status?: number; payload?: any }) => {
      assert.equal(error.status, 403);
      assert.equal(error.payload?.error?.code, 'forbidden');
      return true;
    });
  } finally {
    console.error = originalError;
  }
});
