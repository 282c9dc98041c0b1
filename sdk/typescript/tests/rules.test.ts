// `approve()` and the Vercel AI adapter ask through the workspace's approval rules (`POST /decide`) of a real
// server: a call a rule allows comes back at once without a question, one a rule denies is refused naming the rule,
// and one a rule asks about waits for a person, whose edited arguments come back.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { generateText, stepCountIs, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';

import { Holdpoint } from 'holdpoint-client';
import { approveToolCalls, holdpointToolApproval } from 'holdpoint-client/ai';

import { type TestServer, agentClient, freshProject, nextPending, startServer } from './harness.js';

let server: TestServer;
let approver: Holdpoint;

before(async () => {
  server = await startServer();
  approver = new Holdpoint({ url: server.url, token: await server.createToken('approver') });
  const saved = await server.api('PUT', '/rules', {
    default: 'ask',
    rules: [
      { name: 'no-wipes', tools: ['wipe'], decision: 'deny', reason: 'restore from the backups instead' },
      { name: 'reads', tools: ['read_file'], decision: 'allow' },
      {
        name: 'large-payments',
        tools: ['pay'],
        when: 'args.amount > 1000',
        decision: 'ask',
        reason: 'payments over 1000 need a person',
        ask: { urgency: 'high' },
      },
      { name: 'small-payments', tools: ['pay'], when: 'args.amount <= 1000', decision: 'allow' },
      { name: 'no-prod-deploys', tools: ['deploy'], when: "args.environment == 'production'", decision: 'deny', reason: 'production is frozen' },
    ],
  });
  assert.equal(saved.status, 200, JSON.stringify(saved.json));
});

after(async () => {
  await server?.stop();
});

async function asked(project: string): Promise<number> {
  return (await approver.listQuestions({ project })).items.length;
}

describe('approve() through the approval rules', () => {
  test('a call a rule allows comes back at once, without a question', async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const started = Date.now();
    const read = await hp.approve({ tool_name: 'read_file', arguments: { path: '/etc/hosts' }, project });
    assert.deepEqual([read.outcome, read.approved, read.decision, read.rule], ['allowed_by_rule', true, 'allow', 'reads']);
    assert.deepEqual([read.question, read.arguments], [undefined, { path: '/etc/hosts' }]);
    const small = await hp.approve({ tool_name: 'pay', arguments: { amount: 250 }, project });
    assert.deepEqual([small.outcome, small.rule], ['allowed_by_rule', 'small-payments']);
    assert.ok(Date.now() - started < 5_000, 'nobody was waited for');
    assert.equal(await asked(project), 0, 'nobody was asked');
  });

  test('a call a rule denies is refused, naming the rule and its reason', async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const wipe = await hp.approve({ tool_name: 'wipe', arguments: { path: '/srv' }, project });
    assert.deepEqual([wipe.outcome, wipe.approved, wipe.rejected, wipe.deniedByRule], ['denied_by_rule', false, false, true]);
    assert.deepEqual([wipe.rule, wipe.ruleReason, wipe.question], ['no-wipes', 'restore from the backups instead', undefined]);
    assert.equal(
      wipe.reason,
      'Denied by the approval rule no-wipes: restore from the backups instead. Do not retry the same call unchanged.',
    );
    assert.equal(await asked(project), 0);
  });

  test("a call a rule asks about waits for a person, and the approver's edit comes back", async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const approving = hp.approve({ tool_name: 'pay', arguments: { amount: 2000 }, project, allow_edit: true, urgency: 'low' });
    const pending = await nextPending(approver, project);
    assert.equal(pending.urgency, 'high', "the rule's own ask wins over the caller's");
    assert.equal(pending.allow_edit, true, "where the rule is silent, the caller's wish counts");
    assert.deepEqual(pending.action, { tool_name: 'pay', arguments: { amount: 2000 } });
    await approver.answer(pending.id, { value: true, comment: 'half now', edited_arguments: { amount: 1000 } });
    const result = await approving;
    assert.deepEqual([result.outcome, result.approved, result.decision], ['answered', true, 'allow']);
    assert.deepEqual(result.arguments, { amount: 1000 });
    assert.equal(result.comment, 'half now');
    assert.equal(result.question?.id, pending.id);
    assert.ok(result.answeredBy);
  });
});

describe('the Vercel AI adapter through the approval rules', () => {
  const usage = {
    inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 5, text: 5, reasoning: 0 },
  };
  /** Calls `deploy` to production once; given the tool's result, says what it was told. */
  function deployer(): MockLanguageModelV4 {
    return new MockLanguageModelV4({
      doGenerate: async (options) => {
        const last = options.prompt.at(-1);
        if (last?.role !== 'tool') {
          return {
            content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'deploy', input: '{"environment":"production"}' }],
            finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
            usage,
            warnings: [],
          } as Awaited<ReturnType<MockLanguageModelV4['doGenerate']>>;
        }
        const told = (last.content as Array<{ type: string; output?: { type: string; value?: unknown; reason?: string } }>)
          .filter((part) => part.type === 'tool-result')
          .map((part) => (part.output?.type === 'execution-denied' ? `not run: ${part.output.reason}` : `ran: ${String(part.output?.value)}`));
        return {
          content: [{ type: 'text', text: told.join(' | ') }],
          finishReason: { unified: 'stop', raw: 'stop' },
          usage,
          warnings: [],
        } as Awaited<ReturnType<MockLanguageModelV4['doGenerate']>>;
      },
    });
  }

  test('holdpointToolApproval obeys a deny: the tool never runs and the model reads the rule', async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const ran: string[] = [];
    const deploy = tool({
      description: 'Deploy to an environment',
      inputSchema: z.object({ environment: z.string() }),
      execute: async ({ environment }) => {
        ran.push(environment);
        return `deployed to ${environment}`;
      },
    });
    const result = await generateText({
      model: deployer(),
      tools: { deploy },
      toolApproval: holdpointToolApproval(hp, { tools: ['deploy'], project }),
      prompt: 'Deploy to production',
      stopWhen: stepCountIs(5),
    });
    assert.deepEqual(ran, []);
    assert.equal(
      result.text,
      'not run: Denied by the approval rule no-prod-deploys: production is frozen. Do not retry the same call unchanged.',
    );
    assert.equal(await asked(project), 0, 'nobody was asked');
  });

  test('approveToolCalls decides a denied request at once, without a question', async () => {
    const hp = await agentClient(server);
    const project = freshProject();
    const messages = [
      { role: 'user', content: 'Deploy to production' },
      {
        role: 'assistant',
        content: [
          { type: 'tool-call', toolCallId: 'call-1', toolName: 'deploy', input: { environment: 'production' } },
          { type: 'tool-approval-request', approvalId: 'approval-1', toolCallId: 'call-1' },
        ],
      },
    ];
    const approvals = await approveToolCalls(hp, messages, { project });
    assert.equal(approvals.pending, false);
    assert.deepEqual(
      approvals.decisions.map((d) => [d.result.outcome, d.result.rule, d.response?.approved]),
      [['denied_by_rule', 'no-prod-deploys', false]],
    );
    assert.equal(await asked(project), 0);
  });
});
