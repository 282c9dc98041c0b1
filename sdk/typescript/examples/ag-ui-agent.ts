/**
 * An AG-UI agent that stops to ask: it proposes a deploy tool call and ends the run with three interrupts (approve
 * the call, write the release notes, confirm paging the on-call); the next run acts on the answers. Served over
 * AG-UI's HTTP transport with `@ag-ui/encoder`.
 *
 *     node ag-ui-agent.ts   # serves http://127.0.0.1:8000/ (AG_UI_PORT to change it; 0 picks a free port)
 *
 * No model and no API key: what it does is scripted. Threads live in memory as long as it runs; interrupts expire
 * after INTERRUPT_TTL_SECONDS (default 1800). Needs `npm install @ag-ui/core @ag-ui/encoder`.
 */

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

import {
  type BaseEvent,
  EventType,
  type Interrupt,
  type Message,
  type ResumeEntry,
  type RunAgentInput,
} from '@ag-ui/core';
import { EventEncoder } from '@ag-ui/encoder';

const ttlMs = Number(process.env.INTERRUPT_TTL_SECONDS ?? '1800') * 1000;
type Deploy = { service: string; environment: string };
/** Each thread's open interrupts and the call they are about, until a run resumes them. */
const open = new Map<string, { ids: string[]; callId: string; args: Deploy; expires: number }>();

function text(messageId: string, content: string): BaseEvent[] {
  return [
    { type: EventType.TEXT_MESSAGE_START, messageId, role: 'assistant' },
    { type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta: content },
    { type: EventType.TEXT_MESSAGE_END, messageId },
  ] as BaseEvent[];
}

function propose(input: RunAgentInput): BaseEvent[] {
  const callId = `call-${randomUUID().slice(0, 8)}`;
  const args = { service: 'api', environment: 'production' };
  const replyId = `msg-${randomUUID().slice(0, 8)}`;
  const reply: Message = {
    id: replyId,
    role: 'assistant',
    content: 'I will deploy the api service to production.',
    toolCalls: [{ id: callId, type: 'function', function: { name: 'deploy', arguments: JSON.stringify(args) } }],
  };
  const expires = Date.now() + ttlMs;
  const expiresAt = new Date(expires).toISOString();
  const interrupts: Interrupt[] = [
    {
      id: 'approve-deploy',
      reason: 'tool_call',
      toolCallId: callId,
      message: 'Deploy the api service to production?',
      responseSchema: {
        type: 'object',
        properties: { approved: { type: 'boolean' }, editedArgs: { type: 'object' } },
        required: ['approved'],
      },
      expiresAt,
    },
    {
      id: 'release-notes',
      reason: 'input_required',
      message: 'What should the release notes say?',
      responseSchema: {
        type: 'object',
        properties: {
          summary: { type: 'string', title: 'Release notes' },
          notify: { type: 'boolean', title: 'Email the customers' },
        },
        required: ['summary'],
      },
      expiresAt,
    },
    { id: 'page-on-call', reason: 'confirmation', message: 'Page the on-call engineer?', expiresAt },
  ];
  open.set(input.threadId, { ids: interrupts.map((i) => i.id), callId, args, expires });
  return [
    ...text(replyId, reply.content as string),
    { type: EventType.TOOL_CALL_START, toolCallId: callId, toolCallName: 'deploy', parentMessageId: replyId },
    { type: EventType.TOOL_CALL_ARGS, toolCallId: callId, delta: JSON.stringify(args) },
    { type: EventType.TOOL_CALL_END, toolCallId: callId },
    { type: EventType.MESSAGES_SNAPSHOT, messages: [...input.messages, reply] },
    {
      type: EventType.RUN_FINISHED,
      threadId: input.threadId,
      runId: input.runId,
      outcome: { type: 'interrupt', interrupts },
    },
  ] as BaseEvent[];
}

function run(input: RunAgentInput): BaseEvent[] {
  const started = { type: EventType.RUN_STARTED, threadId: input.threadId, runId: input.runId } as BaseEvent;
  const pending = open.get(input.threadId);
  if (pending === undefined) return [started, ...propose(input)];
  const answers = new Map<string, ResumeEntry>((input.resume ?? []).map((entry) => [entry.interruptId, entry]));
  const missing = pending.ids.filter((id) => !answers.has(id));
  if (missing.length > 0) {
    const message = `the thread has open interrupts: ${missing}`;
    return [started, { type: EventType.RUN_ERROR, message, code: 'RESUME_REQUIRED' } as BaseEvent];
  }
  if (Date.now() > pending.expires && [...answers.values()].some((entry) => entry.status === 'resolved')) {
    const message = 'resumed after the interrupts expired';
    return [started, { type: EventType.RUN_ERROR, message, code: 'EXPIRED' } as BaseEvent];
  }
  open.delete(input.threadId);
  const approval = answers.get('approve-deploy') as ResumeEntry;
  const notes = answers.get('release-notes') as ResumeEntry;
  const page = answers.get('page-on-call') as ResumeEntry;
  let deployed: Deploy | null = null;
  let outcome = 'not deployed: nobody decided in time';
  if (approval.status === 'resolved' && approval.payload?.approved) {
    deployed = approval.payload.editedArgs ?? pending.args;
    outcome = `deployed ${deployed?.service} to ${deployed?.environment}`;
  } else if (approval.status === 'resolved') {
    outcome = 'not deployed: the deploy was rejected';
  }
  const result = {
    deployed,
    notes: notes.status === 'resolved' ? notes.payload : null,
    paged: page.status === 'resolved' ? page.payload : null,
    cancelled: [...answers.values()]
      .filter((entry) => entry.status === 'cancelled')
      .map((entry) => entry.interruptId)
      .sort(),
  };
  return [
    started,
    {
      type: EventType.TOOL_CALL_RESULT,
      messageId: `msg-${randomUUID().slice(0, 8)}`,
      toolCallId: pending.callId,
      content: outcome,
    },
    ...text(`msg-${randomUUID().slice(0, 8)}`, `${outcome}.`),
    {
      type: EventType.RUN_FINISHED,
      threadId: input.threadId,
      runId: input.runId,
      result,
      outcome: { type: 'success' },
    },
  ] as BaseEvent[];
}

const server = createServer(async (request, response) => {
  let body = '';
  for await (const chunk of request) body += String(chunk);
  const encoder = new EventEncoder({ accept: request.headers.accept ?? '' });
  response.writeHead(200, { 'content-type': encoder.getContentType() });
  for (const event of run(JSON.parse(body) as RunAgentInput)) response.write(encoder.encodeBinary(event));
  response.end();
});
server.listen(Number(process.env.AG_UI_PORT ?? '8000'), '127.0.0.1', () => {
  const address = server.address();
  console.log(`listening on http://127.0.0.1:${typeof address === 'object' && address ? address.port : ''}/`);
});
