// The Vercel AI SDK adapter with the real `ai` package (AI SDK 7, and AI SDK 6 installed as `ai-v6`) and a mock
// model: a tool that needs approval becomes a Holdpoint approval, a person answers it through the REST API, and
// the generation goes on with the answer: an approval runs the tool, a rejection reaches the model with the
// person's comment as the reason.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { generateText, type ModelMessage, stepCountIs, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import * as ai6 from 'ai-v6';
import { MockLanguageModelV3 } from 'ai-v6/test';
import { z } from 'zod';

import { Holdpoint, type Question } from 'holdpoint-client';
import {
  type GenerationResult,
  type MessageLike,
  approveToolCalls,
  holdpointToolApproval,
  openApprovals,
  runWithApprovals,
} from 'holdpoint-client/ai';

import { type TestServer, agentClient, freshProject, pendingQuestions, personClient, startServer } from './harness.js';

let server: TestServer;
let person: Holdpoint;

before(async () => {
  server = await startServer();
  person = personClient(server);
});

after(async () => {
  await server?.stop();
});

interface Deployment {
  service: string;
  environment: string;
}

/**
 * The model's side of the conversation: asked by the user, it calls `deploy` once per deployment (in one step);
 * given tool results, it says what became of each call, so the test reads what the model was told.
 */
function reply(prompt: ReadonlyArray<{ role: string; content: unknown }>, deployments: Deployment[]) {
  const usage = {
    inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 5, text: 5, reasoning: 0 },
  };
  const last = prompt.at(-1);
  if (last?.role !== 'tool') {
    return {
      content: deployments.map((deployment, index) => ({
        type: 'tool-call' as const,
        toolCallId: `call-${index + 1}`,
        toolName: 'deploy',
        input: JSON.stringify(deployment),
      })),
      finishReason: { unified: 'tool-calls' as const, raw: 'tool_calls' },
      usage,
      warnings: [],
    };
  }
  const told = (last.content as Array<{ type: string; output?: { type: string; value?: unknown; reason?: string } }>)
    .filter((part) => part.type === 'tool-result')
    .map((part) => (part.output?.type === 'execution-denied' ? `not run: ${part.output.reason}` : `ran: ${String(part.output?.value)}`));
  return {
    content: [{ type: 'text' as const, text: told.join(' | ') }],
    finishReason: { unified: 'stop' as const, raw: 'stop' },
    usage,
    warnings: [],
  };
}

const deploymentInput = z.object({ service: z.string(), environment: z.string() });

/** One agent of a given AI SDK major: its `generate` step, and the deployments its tool really ran. */
interface Agent {
  generate: (messages: MessageLike[]) => Promise<GenerationResult & { text: string }>;
  ran: string[];
}

interface Major {
  name: string;
  agent: (deployments: Deployment[]) => Agent;
}

const AI_SDK_7: Major = {
  name: "AI SDK 7, toolApproval: 'user-approval'",
  agent(deployments) {
    const ran: string[] = [];
    const model = new MockLanguageModelV4({
      doGenerate: async (options) => reply(options.prompt, deployments) as Awaited<ReturnType<MockLanguageModelV4['doGenerate']>>,
    });
    const tools = {
      deploy: tool({
        description: 'Deploy a service to an environment',
        inputSchema: deploymentInput,
        execute: async ({ service, environment }) => {
          ran.push(`${service} to ${environment}`);
          return `deployed ${service} to ${environment}`;
        },
      }),
    };
    return {
      ran,
      generate: (messages) =>
        generateText({
          model,
          tools,
          toolApproval: { deploy: 'user-approval' },
          messages: messages as ModelMessage[],
          stopWhen: stepCountIs(5),
        }),
    };
  },
};

const AI_SDK_6: Major = {
  name: 'AI SDK 6, needsApproval on the tool',
  agent(deployments) {
    const ran: string[] = [];
    const model = new MockLanguageModelV3({
      doGenerate: async (options) => reply(options.prompt, deployments) as Awaited<ReturnType<MockLanguageModelV3['doGenerate']>>,
    });
    const tools = {
      deploy: ai6.tool({
        description: 'Deploy a service to an environment',
        inputSchema: deploymentInput,
        needsApproval: true,
        execute: async ({ service, environment }) => {
          ran.push(`${service} to ${environment}`);
          return `deployed ${service} to ${environment}`;
        },
      }),
    };
    return {
      ran,
      generate: (messages) =>
        ai6.generateText({ model, tools, messages: messages as ai6.ModelMessage[], stopWhen: ai6.stepCountIs(5) }),
    };
  },
};

const API_TO_PRODUCTION: Deployment = { service: 'api', environment: 'production' };
const REJECTION = 'Rejected by bootstrap: not on a Friday. Do not retry the same call unchanged.';

/** A person answering the next `answers.length` questions of `project`, oldest first, as they show up. */
async function answerInOrder(project: string, answers: Array<{ value: boolean; comment?: string }>): Promise<Question[]> {
  const questions = await pendingQuestions(person, project, answers.length);
  for (const [index, answer] of answers.entries()) await person.answer((questions[index] as Question).id, answer);
  return questions;
}

function approvalResponses(messages: readonly MessageLike[]): unknown[] {
  return messages.flatMap((m) => (m.role === 'tool' && Array.isArray(m.content) ? m.content : [])).filter(
    (part: { type?: string }) => part.type === 'tool-approval-response',
  );
}

for (const major of [AI_SDK_7, AI_SDK_6]) {
  describe(major.name, () => {
    test('an approved call becomes a Holdpoint approval, then runs, and the generation goes on', async () => {
      const hp = await agentClient(server);
      const project = freshProject();
      const agent = major.agent([API_TO_PRODUCTION]);
      const [run, [asked]] = await Promise.all([
        runWithApprovals(hp, { messages: [{ role: 'user', content: 'Deploy the api to production' }], generate: agent.generate, project }),
        answerInOrder(project, [{ value: true, comment: 'go ahead' }]),
      ]);
      assert.equal(run.status, 'done');
      assert.deepEqual(agent.ran, ['api to production'], 'the tool ran once, after the approval');
      assert.equal(run.result?.text, 'ran: deployed api to production');

      assert.ok(asked);
      assert.equal(asked.kind, 'approval');
      assert.equal(asked.title, 'Allow deploy?');
      assert.deepEqual(asked.action, { tool_name: 'deploy', arguments: { service: 'api', environment: 'production' } });
      assert.equal(asked.context['source'], 'vercel-ai');
      assert.equal(asked.context['tool_call_id'], 'call-1');
      assert.match(asked.body, /"environment": "production"/);
      const [response] = approvalResponses(run.messages) as Array<{ approvalId: string; approved: boolean; reason: string }>;
      assert.equal(response?.approved, true);
      assert.equal(response?.approvalId, asked.context['approval_id']);
      assert.equal(response?.reason, 'Approved by bootstrap: go ahead.');
    });

    test("a rejected call does not run, and the model reads the person's comment as the reason", async () => {
      const hp = await agentClient(server);
      const project = freshProject();
      const agent = major.agent([API_TO_PRODUCTION]);
      const [run] = await Promise.all([
        runWithApprovals(hp, { messages: [{ role: 'user', content: 'Deploy the api to production' }], generate: agent.generate, project }),
        answerInOrder(project, [{ value: false, comment: 'not on a Friday' }]),
      ]);
      assert.equal(run.status, 'done');
      assert.deepEqual(agent.ran, [], 'the tool never ran');
      assert.equal(run.result?.text, `not run: ${REJECTION}`);
    });
  });
}

describe('AI SDK 7, more', () => {
  test('a run waiting for people survives a restart: the same approval is found again, not asked again', async () => {
    const token = await server.createToken('agent');
    const project = freshProject();
    const beforeRestart = major7Agent();
    const first = await runWithApprovals(new Holdpoint({ url: server.url, token }), {
      messages: [{ role: 'user', content: 'Deploy the api to production' }],
      generate: beforeRestart.generate,
      project,
      waitTimeoutMs: 300,
    });
    assert.equal(first.status, 'pending');
    assert.deepEqual(beforeRestart.ran, []);
    const saved = JSON.stringify(first.messages);
    assert.equal(openApprovals(JSON.parse(saved)).length, 1);

    // The process is gone; the person answers meanwhile; a new one carries on from the saved conversation.
    const [asked] = await answerInOrder(project, [{ value: true }]);
    const afterRestart = major7Agent();
    const resumed = await runWithApprovals(new Holdpoint({ url: server.url, token }), {
      messages: JSON.parse(saved) as ModelMessage[],
      generate: afterRestart.generate,
      project,
    });
    assert.equal(resumed.status, 'done');
    assert.deepEqual(afterRestart.ran, ['api to production']);
    assert.equal(resumed.result?.text, 'ran: deployed api to production');
    const all = await person.listQuestions({ project });
    assert.deepEqual(
      all.items.map((q) => q.id),
      [asked?.id],
      'one question for the one approval request',
    );
  });

  test('several calls in one step are asked together and decided each on its own', async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const agent = AI_SDK_7.agent([API_TO_PRODUCTION, { service: 'db', environment: 'production' }]);
    const messages: MessageLike[] = [{ role: 'user', content: 'Deploy the api and the db' }];
    messages.push(...(await addedMessages(await agent.generate(messages))));
    const [approvals, asked] = await Promise.all([
      approveToolCalls(hp, messages, { project, urgency: 'critical', context: { ticket: 'OPS-7' } }),
      answerInOrder(project, [{ value: true }, { value: false, comment: 'the db waits for the migration' }]),
    ]);
    assert.deepEqual(
      asked.map((q) => [q.action?.arguments, q.urgency, q.context['ticket']]),
      [
        [{ service: 'api', environment: 'production' }, 'critical', 'OPS-7'],
        [{ service: 'db', environment: 'production' }, 'critical', 'OPS-7'],
      ],
    );
    assert.equal(approvals.pending, false);
    assert.deepEqual(
      approvals.decisions.map((d) => [d.approval.toolCallId, d.result.outcome, d.result.approved]),
      [
        ['call-1', 'answered', true],
        ['call-2', 'answered', false],
      ],
    );
    assert.ok(approvals.message);
    messages.push(approvals.message);
    const second = await agent.generate(messages);
    assert.deepEqual(agent.ran, ['api to production']);
    assert.equal(
      second.text,
      'ran: deployed api to production | not run: Rejected by bootstrap: the db waits for the migration. Do not retry the same call unchanged.',
    );
    assert.deepEqual(openApprovals(messages), [], 'nothing left open');
  });

  test('an approval nobody decides in time is reported to the model as such, not as a no', async () => {
    const hp = await agentClient(server);
    const agent = major7Agent();
    const run = await runWithApprovals(hp, {
      messages: [{ role: 'user', content: 'Deploy the api to production' }],
      generate: agent.generate,
      timeout_seconds: 1,
    });
    assert.equal(run.status, 'done');
    assert.deepEqual(agent.ran, []);
    assert.equal(run.result?.text, "not run: Nobody decided on this call before the approval's deadline, so it was not run.");
  });

  test('holdpointToolApproval decides inside one generateText call', async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const ran: string[] = [];
    const model = new MockLanguageModelV4({
      doGenerate: async (options) => reply(options.prompt, [API_TO_PRODUCTION]) as Awaited<ReturnType<MockLanguageModelV4['doGenerate']>>,
    });
    const deploy = tool({
      description: 'Deploy a service to an environment',
      inputSchema: deploymentInput,
      execute: async ({ service, environment }) => {
        ran.push(`${service} to ${environment}`);
        return `deployed ${service} to ${environment}`;
      },
    });
    const [result, [asked]] = await Promise.all([
      generateText({
        model,
        tools: { deploy },
        toolApproval: holdpointToolApproval(hp, { tools: ['deploy'], project }),
        prompt: 'Deploy the api to production',
        stopWhen: stepCountIs(5),
      }),
      answerInOrder(project, [{ value: true }]),
    ]);
    assert.deepEqual(ran, ['api to production']);
    assert.equal(result.text, 'ran: deployed api to production');
    assert.deepEqual(asked?.action, { tool_name: 'deploy', arguments: { service: 'api', environment: 'production' } });
    const decided = result.content.filter((part) => part.type === 'tool-approval-response');
    assert.deepEqual(
      decided.map((part) => [part.approved, part.reason]),
      [[true, 'Approved by bootstrap.']],
    );
  });
});

/** The messages a generation added to the conversation, read as the adapter reads them. */
async function addedMessages(result: GenerationResult): Promise<MessageLike[]> {
  return 'responseMessages' in result ? [...(await result.responseMessages)] : [...(await result.response).messages];
}

function major7Agent(): Agent {
  return AI_SDK_7.agent([API_TO_PRODUCTION]);
}
