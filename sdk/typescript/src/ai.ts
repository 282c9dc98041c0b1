/**
 * `holdpoint-client/ai`: the Vercel AI SDK's tool approvals (AI SDK 6 and 7), decided by people through Holdpoint.
 *
 * A tool that needs approval (AI SDK 7: `toolApproval: { deploy: 'user-approval' }`; AI SDK 6: `needsApproval: true`
 * on the tool) ends `generateText` with a `tool-approval-request` part instead of running. `approveToolCalls` puts
 * each open request of the conversation to the workspace's approval rules (`hp.approve`, `POST /decide`): a call
 * they allow or deny is decided at once, the others become Holdpoint approvals (the tool's name and input as the
 * action). It waits for the decisions and returns the `tool-approval-response` message to append: the next
 * `generateText` runs the approved calls and tells the model why the others were not run (a rule's reason, a
 * rejection's comment, or that nobody decided in time). `runWithApprovals` is that loop in one call.
 *
 * Each approval request is asked once: its `Idempotency-Key` is made of the request's `approvalId`, so a
 * process that stopped while waiting and is started again with the same messages finds the same questions (and
 * their answers) instead of asking again.
 *
 * Nothing here imports `ai`: the functions read and write the message parts the SDK defines, which is what keeps one
 * adapter working with both majors.
 */

import { type AskOptions, type Holdpoint, approvalResult } from './client.js';
import type { ApprovalRequest, ApprovalResult, Assignee, JsonObject, JsonValue, NewQuestion, Urgency } from './types.js';

/** A message of the conversation as the AI SDK keeps it (`ModelMessage`); only the parts below are read. */
export interface MessageLike {
  role: string;
  content: unknown;
}

/** The `tool-approval-response` part the AI SDK reads from a `tool` message. */
export interface ToolApprovalResponsePart {
  type: 'tool-approval-response';
  approvalId: string;
  approved: boolean;
  /** For a denial, what the model reads as the reason in the `execution-denied` tool result. */
  reason?: string;
  /** Set for tools the provider executes, whose approval is sent to the model. */
  providerExecuted?: boolean;
}

/** The message to append to the conversation: the decisions on every open approval request. */
export interface ToolApprovalMessage {
  role: 'tool';
  content: ToolApprovalResponsePart[];
}

/** A tool call awaiting a person's decision, as its question's title and body are made of it. */
export interface ApprovalCall {
  toolCallId: string;
  toolName: string;
  /** The tool's input as the model wrote it. */
  input: unknown;
  /** The approval request's id (none yet while AI SDK 7's `toolApproval` decides). */
  approvalId?: string;
  /** Why the call needs approval, when the approval setting gave a reason (AI SDK 7). */
  reason?: string;
}

/** An approval request of the conversation that has no response yet. */
export interface OpenApproval extends ApprovalCall {
  approvalId: string;
  providerExecuted?: boolean;
}

/** How the approvals are asked; the question fields apply to every approval of the call. */
export interface ToolApprovalOptions {
  project?: string;
  run_id?: string;
  urgency?: Urgency;
  /** Seconds until each approval's deadline; the server's default for approvals is 15 minutes. */
  timeout_seconds?: number;
  /** What applies when nobody decides in time; without it the approval expires and the call is not run. */
  default?: boolean;
  assignee?: Assignee;
  /** Shown to the person, along with the tool call's ids. */
  context?: JsonObject;
  /** The question's title; default "Allow <tool>?". */
  title?: (call: ApprovalCall) => string;
  /** The question's Markdown body; default the tool's input as JSON and the approval's reason. */
  body?: (call: ApprovalCall) => string;
  /** The name the approval rules' `agents` globs match; default the token's name. */
  agent?: string;
  /** Aborts the asking and waiting; the questions stay pending (cancel them with `hp.cancel`). */
  signal?: AbortSignal;
}

export interface ApproveToolCallsOptions extends ToolApprovalOptions {
  /** Whether to wait for the decisions; default yes. Without waiting, `message` is there only once every approval
   * is decided: call again later (another process may) with the same messages. */
  wait?: boolean;
  /** Stop waiting after this long; undecided approvals leave `pending` true and `message` undefined. */
  waitTimeoutMs?: number;
}

/** One approval request and what became of it. */
export interface ToolApprovalDecision {
  approval: OpenApproval;
  /** The Holdpoint approval: `outcome`, `approved`, who decided, the comment. */
  result: ApprovalResult;
  /** The response part for the conversation; undefined while the approval is pending. */
  response: ToolApprovalResponsePart | undefined;
}

export interface ToolApprovals {
  /** The message to append before calling the model again; undefined when nothing was open, or while any
   * approval is pending. */
  message: ToolApprovalMessage | undefined;
  decisions: ToolApprovalDecision[];
  /** Whether some approval is still undecided (only when not waiting, or waiting for less than it took). */
  pending: boolean;
}

const IDEMPOTENCY_PREFIX = 'vercel-ai-approval:';

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function partsOf(message: MessageLike): Record<string, unknown>[] {
  return Array.isArray(message.content) ? message.content.filter(isRecord) : [];
}

/**
 * The approval requests of the conversation that no `tool-approval-response` answers yet, in order. Requests the
 * SDK decided itself (`isAutomatic`) are never open.
 */
export function openApprovals(messages: readonly MessageLike[]): OpenApproval[] {
  const calls = new Map<string, Record<string, unknown>>();
  const answered = new Set<string>();
  const requests: Record<string, unknown>[] = [];
  for (const message of messages) {
    for (const part of partsOf(message)) {
      if (part['type'] === 'tool-call' && typeof part['toolCallId'] === 'string') calls.set(part['toolCallId'], part);
      if (part['type'] === 'tool-approval-response' && typeof part['approvalId'] === 'string') answered.add(part['approvalId']);
      if (part['type'] === 'tool-approval-request' && part['isAutomatic'] !== true) requests.push(part);
    }
  }
  const open: OpenApproval[] = [];
  for (const request of requests) {
    const approvalId = request['approvalId'];
    const toolCallId = request['toolCallId'];
    if (typeof approvalId !== 'string' || typeof toolCallId !== 'string' || answered.has(approvalId)) continue;
    const call = calls.get(toolCallId);
    if (call === undefined || typeof call['toolName'] !== 'string') {
      throw new Error(`the approval request ${approvalId} names the tool call ${toolCallId}, which is not in the messages`);
    }
    const approval: OpenApproval = { approvalId, toolCallId, toolName: call['toolName'], input: call['input'] };
    if (typeof request['reason'] === 'string') approval.reason = request['reason'];
    if (call['providerExecuted'] === true) approval.providerExecuted = true;
    open.push(approval);
  }
  return open;
}

/** The tool input as JSON (what the approver reads, and the action's arguments). */
function jsonOf(value: unknown): JsonValue {
  return value === undefined ? {} : (JSON.parse(JSON.stringify(value)) as JsonValue);
}

function defaultBody(call: ApprovalCall): string {
  const input = JSON.stringify(jsonOf(call.input), null, 2);
  const lines = [`The agent wants to call \`${call.toolName}\` with:`, '', '```json', input, '```'];
  if (call.reason) lines.push('', call.reason);
  return lines.join('\n');
}

/** The Holdpoint approval question for a tool call. */
export function approvalQuestion(call: ApprovalCall, options: ToolApprovalOptions = {}): NewQuestion {
  const context: JsonObject = { ...options.context, source: 'vercel-ai', tool_call_id: call.toolCallId };
  if (call.approvalId !== undefined) context['approval_id'] = call.approvalId;
  const question: NewQuestion = {
    title: options.title?.(call) ?? `Allow ${call.toolName}?`,
    kind: 'approval',
    response_type: 'approval',
    body: options.body?.(call) ?? defaultBody(call),
    action: { tool_name: call.toolName, arguments: jsonOf(call.input) },
    context,
  };
  if (options.project !== undefined) question.project = options.project;
  if (options.run_id !== undefined) question.run_id = options.run_id;
  if (options.urgency !== undefined) question.urgency = options.urgency;
  if (options.timeout_seconds !== undefined) question.timeout_seconds = options.timeout_seconds;
  if (options.assignee !== undefined) question.assignee = options.assignee;
  if (options.default !== undefined) question.default_response = { value: options.default };
  return question;
}

/**
 * The request `approve()` sends for a tool call: the call, and the question `approvalQuestion` describes for a person
 * should the rules ask one. A tool input that is no JSON object is sent as `{"input": ...}`, the rules' `args`.
 */
export function approvalRequest(call: ApprovalCall, options: ToolApprovalOptions = {}): ApprovalRequest {
  const question = approvalQuestion(call, options);
  const input = jsonOf(call.input);
  const request: ApprovalRequest = {
    tool_name: call.toolName,
    arguments: isRecord(input) ? (input as JsonObject) : { input },
    title: question.title,
  };
  // The server describes the call itself: only a body of the caller's own, or the approval's reason, is added.
  const body = options.body?.(call) ?? call.reason;
  if (body !== undefined) request.body = body;
  if (question.context !== undefined) request.context = question.context;
  if (question.project !== undefined) request.project = question.project;
  if (question.run_id !== undefined) request.run_id = question.run_id;
  if (question.urgency !== undefined) request.urgency = question.urgency;
  if (question.timeout_seconds !== undefined) request.timeout_seconds = question.timeout_seconds;
  if (question.assignee !== undefined) request.assignee = question.assignee;
  if (options.default !== undefined) request.default = options.default;
  if (options.agent !== undefined) request.agent = options.agent;
  return request;
}

function responseFor(call: OpenApproval, result: ApprovalResult): ToolApprovalResponsePart | undefined {
  if (result.outcome === 'pending') return undefined;
  const response: ToolApprovalResponsePart = {
    type: 'tool-approval-response',
    approvalId: call.approvalId,
    approved: result.approved,
    reason: result.reason,
  };
  if (call.providerExecuted) response.providerExecuted = true;
  return response;
}

/**
 * Asks Holdpoint about every open approval request of `messages` (all of them first, so a person sees them
 * together), waits for the decisions, and returns the message that carries them. Append it and call the model
 * again: approved calls run, the others come back to the model as denied with the reason.
 */
export async function approveToolCalls(
  hp: Holdpoint,
  messages: readonly MessageLike[],
  options: ApproveToolCallsOptions = {},
): Promise<ToolApprovals> {
  const open = openApprovals(messages);
  const asked: ApprovalResult[] = [];
  for (const call of open) {
    const create: AskOptions = { idempotencyKey: IDEMPOTENCY_PREFIX + call.approvalId, wait: false };
    if (options.signal) create.signal = options.signal;
    asked.push(await hp.approve(approvalRequest(call, options), create));
  }
  const wait = options.wait ?? true;
  const settled = await Promise.all(
    asked.map(async (result) => {
      if (!wait || result.question === undefined || result.question.status !== 'pending') return result;
      const waitOptions: { timeoutMs?: number; signal?: AbortSignal } = {};
      if (options.waitTimeoutMs !== undefined) waitOptions.timeoutMs = options.waitTimeoutMs;
      if (options.signal) waitOptions.signal = options.signal;
      return approvalResult((await hp.wait(result.question.id, waitOptions)).question);
    }),
  );
  const decisions = open.map((approval, index): ToolApprovalDecision => {
    const result = settled[index] as ApprovalResult;
    return { approval, result, response: responseFor(approval, result) };
  });
  const responses = decisions.flatMap((decision) => (decision.response ? [decision.response] : []));
  const pending = responses.length < decisions.length;
  return {
    message: pending || responses.length === 0 ? undefined : { role: 'tool', content: responses },
    decisions,
    pending,
  };
}

/** What `generateText` returns, as far as the loop reads it: the messages the call added to the conversation. */
export type GenerationResult =
  | { readonly responseMessages: readonly MessageLike[] | PromiseLike<readonly MessageLike[]> }
  | { readonly response: { readonly messages: readonly MessageLike[] } | PromiseLike<{ readonly messages: readonly MessageLike[] }> };

export interface RunWithApprovalsOptions<M extends MessageLike, R extends GenerationResult> extends ApproveToolCallsOptions {
  /** The conversation so far (left as it is: the loop works on a copy). */
  messages: readonly M[];
  /** One call of the model: `(messages) => generateText({ model, tools, toolApproval, messages })`. */
  generate: (messages: M[]) => PromiseLike<R>;
  /** How many model calls one run may make at most; default 10. */
  maxGenerations?: number;
  /**
   * Called with the whole conversation each time it grows, before anybody is asked: keep it (a file, a database
   * row), and a process that stops while people decide carries on from it when started again.
   */
  onMessages?: (messages: M[]) => void | PromiseLike<void>;
}

/** How a run ended: finished (the model answered without a call awaiting approval), or waiting for people. */
export type RunWithApprovalsResult<M, R> =
  | { status: 'done'; result: R; messages: M[] }
  | { status: 'pending'; result: R | undefined; messages: M[]; decisions: ToolApprovalDecision[] };

async function responseMessagesOf(result: GenerationResult): Promise<readonly MessageLike[]> {
  if ('responseMessages' in result) return await result.responseMessages;
  return (await result.response).messages;
}

/**
 * Generates, asks Holdpoint about the calls that need approval, appends the decisions and generates again, until
 * the model finishes. Returns the last result and the whole conversation. With `waitTimeoutMs` (or `wait: false`)
 * a run may end `pending`: keep `messages`, and call again with them later, from this process or another one; the
 * open approvals are found again, not asked again, and the run carries on from there.
 */
export async function runWithApprovals<M extends MessageLike, R extends GenerationResult>(
  hp: Holdpoint,
  options: RunWithApprovalsOptions<M, R>,
): Promise<RunWithApprovalsResult<M, R>> {
  const { messages: initial, generate, maxGenerations = 10, onMessages, ...approvalOptions } = options;
  const messages = [...initial];
  let result: R | undefined;
  for (let generations = 0; ; ) {
    const approvals = await approveToolCalls(hp, messages, approvalOptions);
    if (approvals.pending) return { status: 'pending', result, messages, decisions: approvals.decisions };
    if (approvals.message) {
      // A tool message of approval responses is a `ModelMessage` of every AI SDK version this adapter supports.
      messages.push(approvals.message as unknown as M);
      await onMessages?.([...messages]);
    } else if (result !== undefined) {
      return { status: 'done', result, messages };
    }
    if (generations >= maxGenerations) {
      throw new Error(`the model was called ${maxGenerations} times and still asks for approvals (maxGenerations)`);
    }
    result = await generate([...messages]);
    generations++;
    messages.push(...((await responseMessagesOf(result)) as M[]));
    await onMessages?.([...messages]);
  }
}

/** The approval decision AI SDK 7's `toolApproval` takes. */
export type ToolApprovalStatus = { type: 'approved'; reason?: string } | { type: 'denied'; reason?: string } | undefined;

export interface InlineToolApprovalOptions extends ToolApprovalOptions {
  /** The tools that need approval, by name, or a test of each call; default every tool. */
  tools?: readonly string[] | ((call: { toolName: string; input: unknown }) => boolean);
}

/**
 * For AI SDK 7's `toolApproval` setting: asks Holdpoint about each call of the chosen tools while `generateText`
 * waits, and answers with the decision, so the generation goes on in the same call (the SDK records the decision
 * as an automatic approval request and response). Suits a process that can wait for the person; a run that must
 * survive a restart while it waits uses `approveToolCalls` or `runWithApprovals` instead.
 *
 * ```ts
 * await generateText({ model, tools, toolApproval: holdpointToolApproval(hp, { tools: ['deploy'] }), prompt });
 * ```
 */
export function holdpointToolApproval(
  hp: Holdpoint,
  options: InlineToolApprovalOptions = {},
): (decide: { toolCall: { toolCallId: string; toolName: string; input: unknown } }) => Promise<ToolApprovalStatus> {
  const { tools, ...approvalOptions } = options;
  const needsApproval = (call: { toolName: string; input: unknown }): boolean =>
    tools === undefined ? true : typeof tools === 'function' ? tools(call) : tools.includes(call.toolName);
  return async ({ toolCall }) => {
    if (!needsApproval(toolCall)) return undefined;
    // The SDK assigns the approval's id only after this decision: the question knows the tool call's.
    const call = { toolCallId: toolCall.toolCallId, toolName: toolCall.toolName, input: toolCall.input };
    const waitOptions: { signal?: AbortSignal } = {};
    if (approvalOptions.signal) waitOptions.signal = approvalOptions.signal;
    // No idempotency key of the call's own: model call ids repeat across conversations with some providers, and
    // a decision of another conversation must never be taken for this one.
    const result = await hp.approve(approvalRequest(call, approvalOptions), waitOptions);
    return { type: result.approved ? 'approved' : 'denied', reason: result.reason };
  };
}
