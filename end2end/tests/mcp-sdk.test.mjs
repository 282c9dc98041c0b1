// Holdpoint's `/mcp` through the official MCP TypeScript SDK, at its defaults but for a short request timeout that
// resets on progress: a wait longer than the session's idle time and than the client's timeout gets its answer,
// progress arrives all along, a cancelled call cancels its question, and a refusal is a tool result with isError.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startServer, api } from './harness.mjs';

let server;

before(async () => {
  // Sessions idle out after 3 s without a request, and waiting calls report progress every second.
  server = await startServer({
    env: { HOLDPOINT_MCP_SESSION_IDLE_SECONDS: '3', HOLDPOINT_MCP_PROGRESS_SECONDS: '1' },
  });
});

after(async () => {
  await server?.stop();
});

async function connect(token) {
  const client = new Client({ name: 'holdpoint-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.baseUrl}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

async function createToken(role) {
  const created = await api(server, 'POST', '/tokens', { name: `mcp ${role} ${Date.now()}`, role });
  assert.equal(created.status, 201, JSON.stringify(created.json));
  return created.json.secret ?? created.json.token?.secret;
}

async function pendingQuestion(title) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const page = await api(server, 'GET', '/questions?status=pending');
    const found = page.json.items.find((q) => q.title === title);
    if (found) return found;
    assert.ok(Date.now() < deadline, `the question "${title}" is never asked`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test('a wait longer than the idle time and the client timeout gets its answer, with progress all along', async () => {
  const client = await connect(server.token);
  assert.equal(client.getServerVersion().name, 'holdpoint');
  const progress = [];
  const asking = client.callTool(
    { name: 'ask_user', arguments: { title: 'Ship the release tonight?' } },
    undefined,
    { timeout: 4_000, resetTimeoutOnProgress: true, onprogress: (p) => progress.push({ at: Date.now(), ...p }) },
  );
  const question = await pendingQuestion('Ship the release tonight?');
  // Twice the session's idle time and more than the client's request timeout.
  await new Promise((resolve) => setTimeout(resolve, 6_000));
  const answered = await api(server, 'POST', `/questions/${question.id}/answer`, { value: 'yes, after the tests' });
  assert.equal(answered.status, 200, JSON.stringify(answered.json));
  const result = await asking;
  assert.notEqual(result.isError, true, JSON.stringify(result));
  assert.equal(result.structuredContent.outcome, 'answered');
  assert.equal(result.structuredContent.value, 'yes, after the tests');
  assert.ok(progress.length >= 4, `progress while waiting: ${JSON.stringify(progress)}`);
  assert.match(progress[0].message, new RegExp(`${question.id} is pending`));
  for (let i = 1; i < progress.length; i++) {
    assert.ok(progress[i].at - progress[i - 1].at < 3_000, `progress every few seconds: ${JSON.stringify(progress)}`);
  }
  await client.close();
});

test("a client's cancellation cancels the question", async () => {
  const client = await connect(server.token);
  const abort = new AbortController();
  const asking = client.callTool({ name: 'ask_user', arguments: { title: 'Rotate the keys?' } }, undefined, {
    signal: abort.signal,
  });
  const question = await pendingQuestion('Rotate the keys?');
  abort.abort('the user pressed Esc');
  await assert.rejects(asking);
  const deadline = Date.now() + 10_000;
  let status;
  do {
    await new Promise((resolve) => setTimeout(resolve, 100));
    status = (await api(server, 'GET', `/questions/${question.id}`)).json.status;
  } while (status === 'pending' && Date.now() < deadline);
  assert.equal(status, 'cancelled');
  await client.close();
});

test('a refusal is a tool result with isError, carrying the API error', async () => {
  const client = await connect(await createToken('viewer'));
  const result = await client.callTool({ name: 'ask_user', arguments: { title: 'May I?' } });
  assert.equal(result.isError, true);
  const error = JSON.parse(result.content[0].text).error;
  assert.equal(error.code, 'forbidden');
  await client.close();
});
