// Refusals as one typed error carrying the server's code, and retries that never do anything twice: a creation
// whose response is lost is retried under its Idempotency-Key, an answer whose response is lost is not.

import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';

import { Holdpoint, HoldpointError } from 'holdpoint-client';

import { Proxy } from './proxy.js';
import { QUICK_RETRY, type TestServer, agentClient, freshProject, personClient, startServer } from './harness.js';

let server: TestServer;
let person: Holdpoint;

before(async () => {
  server = await startServer();
  person = personClient(server);
});

after(async () => {
  await server?.stop();
});

/** Asserts that `promise` rejects with a `HoldpointError` of `code` and `status`; returns the error. */
async function refusal(promise: Promise<unknown>, code: string, status?: number): Promise<HoldpointError> {
  const error = await promise.then(
    () => assert.fail(`expected a ${code} error`),
    (e: unknown) => e,
  );
  assert.ok(error instanceof HoldpointError, `a HoldpointError, not ${String(error)}`);
  assert.equal(error.code, code, error.message);
  assert.equal(error.status, status);
  assert.equal(error.name, 'HoldpointError');
  return error;
}

describe('typed errors carry the server code', () => {
  test('unauthorized: a token the server does not know', async () => {
    const hp = new Holdpoint({ url: server.url, token: 'hp_not_a_real_token_0123456789abcdef' });
    const error = await refusal(hp.createQuestion({ title: 'Hello?' }), 'unauthorized', 401);
    assert.ok(error.message.length > 0);
  });

  test('not_found: a question that does not exist', async () => {
    await refusal(person.getQuestion('01a21a18-e5c3-730b-95d3-975969a4da3f'), 'not_found', 404);
  });

  test('forbidden: an agent token may ask but not answer', async () => {
    const hp = await agentClient(server);
    const question = await hp.createQuestion({ title: 'Answer yourself?' });
    await refusal(hp.answer(question.id, { value: 'yes' }), 'forbidden', 403);
  });

  test('conflict: a question answered already, with its status and who answered in the details', async () => {
    const hp = await agentClient(server);
    const question = await hp.createQuestion({ title: 'Twice?' });
    await person.answer(question.id, { value: 'first' });
    const error = await refusal(person.answer(question.id, { value: 'second' }), 'conflict', 409);
    assert.deepEqual(
      { status: (error.details as { status?: unknown }).status, answered_by: (error.details as { answered_by?: unknown }).answered_by },
      { status: 'answered', answered_by: 'bootstrap' },
    );
  });

  test('invalid: a value that does not fit the question, with what is wrong per field', async () => {
    const hp = await agentClient(server);
    const question = await hp.createQuestion({ title: 'Colour?', response_type: 'choice', options: ['red', 'blue'] });
    const error = await refusal(person.answer(question.id, { value: 'green' }), 'invalid', 422);
    assert.deepEqual(error.fieldErrors, { value: '"green" is not one of the options' });
    assert.equal((await person.getQuestion(question.id)).status, 'pending', 'nothing is stored');
  });

  test('invalid: a question that the server refuses to create', async () => {
    const hp = await agentClient(server);
    const error = await refusal(hp.ask({ title: 'Pick one', response_type: 'choice', options: ['only'] }), 'invalid', 422);
    assert.ok(Object.keys(error.fieldErrors).length > 0, JSON.stringify(error.details));
  });

  test('bad_request: a page size out of bounds', async () => {
    await refusal(person.listQuestions({ limit: 500 }), 'bad_request', 400);
  });

  test('rate_limited: a caller over its stream limit, with Retry-After', async () => {
    const token = await server.createToken('agent');
    const streams: AbortController[] = [];
    try {
      // HOLDPOINT_STREAMS_PER_CALLER's default.
      for (let i = 0; i < 32; i++) {
        const controller = new AbortController();
        const response = await fetch(`${server.url}/api/v1/events`, {
          headers: { authorization: `Bearer ${token}` },
          signal: controller.signal,
        });
        assert.equal(response.status, 200);
        streams.push(controller);
      }
      const hp = new Holdpoint({ url: server.url, token });
      const events = hp.events({ maxReconnectAttempts: 0 });
      const error = await refusal(events.next(), 'rate_limited', 429);
      assert.ok(error.retryAfterSeconds !== undefined && error.retryAfterSeconds > 0, `Retry-After ${error.retryAfterSeconds}`);
      assert.equal((error.details as { limit?: unknown }).limit, 'streams_per_caller');
    } finally {
      for (const stream of streams) stream.abort();
    }
  });

  test('configuration: no token', () => {
    const saved = process.env['HOLDPOINT_TOKEN'];
    delete process.env['HOLDPOINT_TOKEN'];
    try {
      assert.throws(() => new Holdpoint({ url: server.url }), (e: unknown) => e instanceof HoldpointError && e.code === 'configuration');
    } finally {
      if (saved !== undefined) process.env['HOLDPOINT_TOKEN'] = saved;
    }
  });
});

describe('retries', () => {
  test('a creation whose response was lost is retried under the same key, and asks once', async () => {
    const proxy = await Proxy.start(server.url);
    try {
      const token = await server.createToken('agent');
      const hp = new Holdpoint({ url: proxy.url, token, retry: QUICK_RETRY });
      const project = freshProject();
      proxy.dropResponses('POST /api/v1/questions ');
      const question = await hp.createQuestion({ title: 'Asked once?', project });
      assert.equal(proxy.requestsStartingWith('POST /api/v1/questions '), 2, 'the first response was lost, then retried');
      const keys = [...proxy.sentText().matchAll(/idempotency-key: (\S+)/gi)].map((m) => m[1]);
      assert.equal(keys.length, 2);
      assert.equal(keys[0], keys[1], "the retry carries the first attempt's key");
      const page = await person.listQuestions({ project });
      assert.deepEqual(
        page.items.map((q) => q.id),
        [question.id],
        'one question, the one the retry returned',
      );
    } finally {
      await proxy.close();
    }
  });

  test('an answer whose response was lost is not retried: answering twice is not safe', async () => {
    const proxy = await Proxy.start(server.url);
    try {
      const hp = await agentClient(server);
      const question = await hp.createQuestion({ title: 'Lost answer' });
      const throughProxy = new Holdpoint({ url: proxy.url, token: server.adminToken, retry: QUICK_RETRY });
      proxy.dropResponses(`POST /api/v1/questions/${question.id}/answer `);
      await refusal(throughProxy.answer(question.id, { value: 'yes' }), 'network');
      assert.equal(proxy.requestsStartingWith(`POST /api/v1/questions/${question.id}/answer `), 1);
      // The server did act: the caller learns it from the question, not from a second answer.
      assert.equal((await person.getQuestion(question.id)).status, 'answered');
    } finally {
      await proxy.close();
    }
  });

  test('a server out of reach is retried, then reported as a network error', async () => {
    const port = await freePort();
    let attempts = 0;
    const counting: typeof fetch = (input, init) => {
      attempts++;
      return fetch(input, init);
    };
    const hp = new Holdpoint({
      url: `http://127.0.0.1:${port}`,
      token: 'hp_unused',
      fetch: counting,
      retry: { maxRetries: 2, initialDelayMs: 10, maxDelayMs: 20 },
    });
    const error = await refusal(hp.answer('01a21a18-e5c3-730b-95d3-975969a4da3f', { value: 'x' }), 'network');
    assert.match(error.message, /ECONNREFUSED/);
    // Refused connections never reached a server: even an answer is retried then.
    assert.equal(attempts, 3);
  });

  test("a request that takes too long ends with a timeout error, and the caller's signal with its own reason", async () => {
    const hp = new Holdpoint({ url: server.url, token: server.adminToken, timeoutMs: 300, retry: { maxRetries: 0 } });
    const question = await (await agentClient(server)).createQuestion({ title: 'Slow' });
    // A long-poll held longer than the client's limit for it.
    const slowFetch: typeof fetch = (input, init) =>
      fetch(String(input).replace(`/questions/${question.id}`, `/questions/${question.id}/wait?timeout_seconds=5&`), init);
    const slow = new Holdpoint({ url: server.url, token: server.adminToken, timeoutMs: 300, retry: { maxRetries: 0 }, fetch: slowFetch });
    await refusal(slow.getQuestion(question.id), 'timeout');
    const controller = new AbortController();
    const reason = new Error('shutting down');
    setTimeout(() => controller.abort(reason), 50);
    await assert.rejects(slow.getQuestion(question.id, { signal: controller.signal }), (e: unknown) => e === reason);
    assert.equal((await hp.getQuestion(question.id)).status, 'pending');
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}
