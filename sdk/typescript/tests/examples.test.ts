// The examples the docs show are the files in examples/, and they work: each runs as its own node process against
// the real server, a person answering through the REST API; the Vercel AI one against a local OpenAI-compatible
// mock model, and killed while it waits, then started again.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import type { Holdpoint } from 'holdpoint-client';

import { ExampleProcess, type TestServer, eventually, nextPending, personClient, startServer } from './harness.js';

/** The package's directory (the tests run from `dist-test/tests/`). */
const PACKAGE = fileURLToPath(new URL('../../', import.meta.url));
const REPOSITORY = join(PACKAGE, '..', '..');

let server: TestServer;
let person: Holdpoint;

before(async () => {
  server = await startServer();
  person = personClient(server);
});

after(async () => {
  await server?.stop();
});

describe('the docs show the example files as they are', () => {
  const examples = readdirSync(join(PACKAGE, 'examples')).filter((name) => name.endsWith('.ts'));

  function shown(markdown: string): Map<string, string> {
    const blocks = new Map<string, string>();
    for (const match of markdown.matchAll(/<!-- (sdk\/typescript\/examples\/\S+) -->\n```ts\n([\s\S]*?)\n```/g)) {
      blocks.set(match[1] as string, match[2] as string);
    }
    return blocks;
  }

  test('docs/integrations.md shows every TypeScript example', () => {
    const blocks = shown(readFileSync(join(REPOSITORY, 'docs', 'integrations.md'), 'utf8'));
    assert.deepEqual([...blocks.keys()].sort(), examples.map((name) => `sdk/typescript/examples/${name}`).sort());
    for (const [path, code] of blocks) {
      assert.equal(code, readFileSync(join(REPOSITORY, path), 'utf8').trimEnd(), `${path} differs from the page`);
    }
  });

  test("the library's README shows the quickstart", () => {
    const blocks = shown(readFileSync(join(PACKAGE, 'README.md'), 'utf8'));
    const quickstart = 'sdk/typescript/examples/quickstart.ts';
    assert.equal(blocks.get(quickstart), readFileSync(join(REPOSITORY, quickstart), 'utf8').trimEnd());
  });
});

test('the quickstart asks, gates the call on an approval, and prints what people decided', async () => {
  const cwd = mkdtempSync(join(tmpdir(), 'holdpoint-quickstart-'));
  try {
    const example = new ExampleProcess('quickstart', cwd, {
      HOLDPOINT_SERVER: server.url,
      HOLDPOINT_TOKEN: await server.createToken('agent'),
    });
    const region = await nextPending(person, 'quickstart');
    assert.deepEqual(
      region.options.map((o) => o.value),
      ['eu-west', 'us-east'],
    );
    await person.answer(region.id, { value: 'us-east' });
    const approval = await eventually('the approval', async () => {
      const page = await person.listQuestions({ project: 'quickstart', status: 'pending', kind: 'approval' });
      return page.items[0];
    });
    assert.deepEqual(approval.action, { tool_name: 'create_cluster', arguments: { region: 'us-east', nodes: 3 } });
    await person.answer(approval.id, { value: true, edited_arguments: { nodes: 5, region: 'us-east' } });
    assert.equal(await example.finish(), 0, example.output());
    assert.equal(
      example.stdout.join(''),
      'region: us-east (answered)\ncreating the cluster with {"nodes":5,"region":"us-east"}\n',
    );
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
});

/**
 * An OpenAI-compatible Chat Completions endpoint on loopback: asked to deploy, it calls the `deploy` tool; given
 * the tool's result, it reports it.
 */
class MockOpenAI {
  readonly requests: Array<{ messages: Array<{ role: string; content?: unknown }> }> = [];
  #server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.#server = createServer((request, response) => void this.#handle(request, response));
    await new Promise<void>((resolve) => this.#server?.listen(0, '127.0.0.1', resolve));
    const address = this.#server.address();
    this.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/v1`;
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((resolve) => this.#server?.close(resolve));
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    let body = '';
    for await (const chunk of request) body += String(chunk);
    if (request.method !== 'POST' || request.url !== '/v1/chat/completions') {
      response.writeHead(404).end();
      return;
    }
    const parsed = JSON.parse(body) as { messages: Array<{ role: string; content?: unknown }> };
    this.requests.push(parsed);
    const toolResult = parsed.messages.findLast((m) => m.role === 'tool');
    const message = toolResult
      ? { role: 'assistant', content: `Done: ${String(toolResult.content)}` }
      : {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 'call_deploy_1',
              type: 'function',
              function: { name: 'deploy', arguments: JSON.stringify({ service: 'api', environment: 'production' }) },
            },
          ],
        };
    response.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id: `chatcmpl-${this.requests.length}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: 'mock-model',
        choices: [{ index: 0, message, finish_reason: toolResult ? 'stop' : 'tool_calls' }],
        usage: { prompt_tokens: 20, completion_tokens: 10, total_tokens: 30 },
      }),
    );
  }
}

test('the Vercel AI example waits for an approval, survives being killed meanwhile, and goes on with the answer', async () => {
  const model = new MockOpenAI();
  await model.start();
  const cwd = mkdtempSync(join(tmpdir(), 'holdpoint-vercel-ai-'));
  const env = {
    HOLDPOINT_SERVER: server.url,
    HOLDPOINT_TOKEN: await server.createToken('agent'),
    OPENAI_BASE_URL: model.url,
    OPENAI_API_KEY: 'sk-test-not-used',
  };
  const saved = join(cwd, 'deploy-conversation.json');
  try {
    const first = new ExampleProcess('vercel-ai', cwd, env);
    const approval = await nextPending(person, 'deploys');
    assert.deepEqual(approval.action, { tool_name: 'deploy', arguments: { service: 'api', environment: 'production' } });
    assert.ok(existsSync(saved), 'the conversation was kept before anybody was asked');
    await first.kill();

    const second = new ExampleProcess('vercel-ai', cwd, env);
    await person.answer(approval.id, { value: true, comment: 'go' });
    assert.equal(await second.finish(), 0, second.output());
    assert.equal(second.stdout.join(''), 'Done: deployed api to production\n');
    assert.equal(existsSync(saved), false);

    const asked = await person.listQuestions({ project: 'deploys' });
    assert.deepEqual(
      asked.items.map((q) => q.id),
      [approval.id],
      'the restarted process found the same approval instead of asking again',
    );
    assert.deepEqual(
      model.requests.map((r) => r.messages.at(-1)?.role),
      ['user', 'tool'],
      'the model was called once before the approval and once after, not again from the start',
    );
  } finally {
    rmSync(cwd, { recursive: true, force: true });
    await model.stop();
  }
});
