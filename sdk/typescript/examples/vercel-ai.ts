/**
 * Vercel AI SDK: a tool that needs approval asks Holdpoint, and the generation goes on with the decision.
 *
 *     export HOLDPOINT_SERVER=http://127.0.0.1:3000 HOLDPOINT_TOKEN=hp_...   # an agent token
 *     export OPENAI_API_KEY=...   # and OPENAI_BASE_URL for any other OpenAI-compatible server (Ollama, vLLM, ...)
 *     node vercel-ai.ts
 *
 * Stop it while it waits and start it again: it carries on with the same approval (the conversation is kept in
 * deploy-conversation.json). Needs `npm install ./sdk/typescript ai @ai-sdk/openai zod`.
 */

import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';

import { createOpenAI } from '@ai-sdk/openai';
import { type ModelMessage, generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';

import { Holdpoint } from 'holdpoint-client';
import { runWithApprovals } from 'holdpoint-client/ai';

const hp = new Holdpoint(); // HOLDPOINT_SERVER and HOLDPOINT_TOKEN
const model = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL }).chat(process.env.MODEL ?? 'gpt-4o-mini');

const deploy = tool({
  description: 'Deploy a service to an environment',
  inputSchema: z.object({ service: z.string(), environment: z.enum(['staging', 'production']) }),
  execute: async ({ service, environment }) => `deployed ${service} to ${environment}`,
});

const saved = 'deploy-conversation.json';
const messages: ModelMessage[] = existsSync(saved)
  ? JSON.parse(readFileSync(saved, 'utf8'))
  : [{ role: 'user', content: 'Deploy the api service to production.' }];

const run = await runWithApprovals(hp, {
  messages,
  generate: (messages) =>
    generateText({
      model,
      system: 'You deploy services with the deploy tool. When a call is not approved, do not retry it unchanged.',
      tools: { deploy },
      toolApproval: { deploy: 'user-approval' }, // AI SDK 6: `needsApproval: true` on the tool
      messages,
      stopWhen: stepCountIs(5),
    }),
  project: 'deploys',
  onMessages: (conversation) => writeFileSync(saved, JSON.stringify(conversation)),
});
if (run.status === 'done') {
  console.log(run.result.text);
  rmSync(saved);
}
