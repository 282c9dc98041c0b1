/**
 * `holdpoint-client/ag-ui`: an AG-UI run that ends with an interrupt outcome has its interrupts answered by people
 * in Holdpoint, and the next run on the thread carries their answers as its `resume` entries.
 *
 * With `@ag-ui/client`'s `HttpAgent` (or any `AbstractAgent`), the whole loop is one call:
 *
 * ```ts
 * const agent = new HttpAgent({ url: 'http://127.0.0.1:8000/', threadId: 'deploy-api-1' });
 * agent.addMessage({ id: 'user-1', role: 'user', content: 'Deploy the api service.' });
 * const { result } = await runWithInterrupts(hp, agent, { project: 'deploys' });
 * ```
 *
 * How each interrupt becomes a question, by its `reason`:
 * - `tool_call`: an approval of that call (the tool's name and arguments, read from the thread's messages) through
 *   the workspace's approval rules (`POST /decide`); the approver may edit the arguments unless the interrupt's
 *   `responseSchema` leaves `editedArgs` out. The resume payload is `{ approved }`, with `editedArgs` when edited.
 * - `input_required` (and any other reason with an object `responseSchema`): a form whose fields are the schema's
 *   properties in their order, an `integer` a whole number and `minimum`/`maximum` its bounds; the payload is the
 *   answered object, an enum's value as the schema wrote it.
 * - a `responseSchema` of one typed value (an `enum`, a `oneOf` of consts, a `number` or `integer` with its
 *   `minimum`/`maximum`, a `boolean`, an array of an enum): a question of that type; the payload is the value.
 * - `confirmation`: a yes/no question; the payload is the boolean (`{ name: boolean }` for a schema of one boolean
 *   property).
 * - anything else: a text question, whose answer is the payload.
 *
 * `message` is the question's title (and body when long), `expiresAt` its deadline, moved into the question timeouts
 * the server takes (`Holdpoint.timeoutBounds`): an answer that comes after `expiresAt` makes the interrupt
 * `cancelled`. An answered (or defaulted) question resolves its interrupt; one that expired or was cancelled makes it `cancelled`. Each entry's
 * `metadata.holdpoint` says which question answered it, its outcome, who answered and their comment.
 *
 * Each question's `Idempotency-Key` is made of the thread id, the run id and the interrupt id: asking again for the
 * same interrupt (a restarted process, given the saved run through `interrupted`) finds the same question.
 *
 * Only types are imported from `@ag-ui/core`: nothing of AG-UI is loaded at run time by this module.
 */

import type { Interrupt, Message, ResumeEntry, RunFinishedEvent, State } from '@ag-ui/core';

import { type Holdpoint, approvalResult, askResult } from './client.js';
import type {
  ApprovalResult,
  Assignee,
  FormField,
  JsonObject,
  JsonValue,
  NewQuestion,
  Question,
  Urgency,
} from './types.js';

/** The key of a resume entry's `metadata` under which Holdpoint says how its interrupt was answered. */
export const METADATA_KEY = 'holdpoint';

/** A tool call of the thread, as an approval needs it. */
export interface ToolCallInfo {
  name: string;
  arguments: JsonObject;
}

/** A run that ended with interrupts: what it takes to ask about them, and (for a restart) to continue the thread. */
export interface InterruptedRun {
  threadId: string;
  runId: string;
  interrupts: Interrupt[];
  /** The thread's tool calls by id, for the approvals of `tool_call` interrupts. */
  toolCalls: Record<string, ToolCallInfo>;
  /** The thread's messages and state when the run ended: what the next run starts from after a restart. */
  messages?: Message[];
  state?: State;
  /**
   * When the interrupts were first asked about (ISO 8601; default: now). Each deadline is `expiresAt` counted from
   * it, so a process asking again after a restart sends the very request it sent before, and the server answers
   * with the question it made then (an `Idempotency-Key` used again with another request is refused).
   */
  askedAt?: string;
}

/** How the questions are asked: these apply to every interrupt's question. */
export interface InterruptOptions {
  project?: string;
  urgency?: Urgency;
  /** Seconds until the deadline of interrupts without `expiresAt` (with one, the earlier of the two). */
  timeout_seconds?: number;
  assignee?: Assignee;
  /** The name the approval rules' `agents` globs match, for `tool_call` interrupts; default the token's name. */
  agent?: string;
  signal?: AbortSignal;
}

/** One interrupt and what was asked about it; `question` is undefined when the rules decided a tool call without
 * asking, or when the interrupt had expired already. */
export interface AskedInterrupt {
  interrupt: Interrupt;
  question: Question | undefined;
  approval: ApprovalResult | undefined;
}

/** The key a question about one interrupt is asked under. */
export function idempotencyKey(threadId: string, runId: string, interruptId: string): string {
  return `ag-ui:${threadId}:${runId}:${interruptId}`;
}

/** The thread's tool calls by id, from its assistant messages. */
export function toolCallsOf(messages: readonly Message[]): Record<string, ToolCallInfo> {
  const calls: Record<string, ToolCallInfo> = {};
  for (const message of messages) {
    if (message.role !== 'assistant') continue;
    for (const call of message.toolCalls ?? []) {
      calls[call.id] = { name: call.function.name, arguments: parseArguments(call.function.arguments) };
    }
  }
  return calls;
}

/** Asks about each interrupt of the run (once per interrupt, however often it is called), without waiting. */
export async function askInterrupts(
  hp: Holdpoint,
  run: InterruptedRun,
  options: InterruptOptions = {},
): Promise<AskedInterrupt[]> {
  const asked: AskedInterrupt[] = [];
  const reference = run.askedAt === undefined ? Date.now() : Date.parse(run.askedAt);
  for (const interrupt of run.interrupts) asked.push(await askOne(hp, run, interrupt, options, reference));
  return asked;
}

/**
 * Asks (see `askInterrupts`), waits for every outcome and returns the resume entries for the next run, one per
 * interrupt in order; `undefined` while one is still pending (`wait: false`, or `waitTimeoutMs` ended the wait).
 */
export async function resumeInterrupts(
  hp: Holdpoint,
  run: InterruptedRun,
  options: InterruptOptions & { wait?: boolean; waitTimeoutMs?: number } = {},
): Promise<ResumeEntry[] | undefined> {
  const entries: ResumeEntry[] = [];
  for (const item of await askInterrupts(hp, run, options)) {
    let question = item.question;
    if (question !== undefined && question.status === 'pending') {
      if (options.wait === false) {
        question = await hp.getQuestion(question.id);
      } else {
        const waitOptions: { timeoutMs?: number; signal?: AbortSignal } = {};
        if (options.waitTimeoutMs !== undefined) waitOptions.timeoutMs = options.waitTimeoutMs;
        if (options.signal) waitOptions.signal = options.signal;
        question = (await hp.wait(question.id, waitOptions)).question;
      }
      if (question.status === 'pending') return undefined;
    }
    entries.push(resumeEntry({ ...item, question }));
  }
  return entries;
}

/** The resume entry of an interrupt whose question (or the rules' decision) is settled. */
export function resumeEntry(asked: AskedInterrupt): ResumeEntry {
  const { interrupt, question } = asked;
  if (question === undefined && asked.approval === undefined) {
    return { interruptId: interrupt.id, status: 'cancelled', metadata: { [METADATA_KEY]: { outcome: 'expired' } } };
  }
  if (interrupt.reason === 'tool_call' && asked.approval !== undefined) {
    const decided = asked.approval;
    const result = question === undefined ? decided : approvalResult(question, decideOf(decided), decided.arguments);
    const meta: JsonObject = { outcome: result.outcome, question_id: result.question?.id ?? null };
    const late = question !== undefined && tooLate(interrupt, question);
    if (result.outcome === 'expired' || result.outcome === 'cancelled' || late) {
      return { interruptId: interrupt.id, status: 'cancelled', metadata: { [METADATA_KEY]: meta } };
    }
    const payload: JsonObject = { approved: result.approved };
    if (result.approved && result.editedArguments !== undefined) payload['editedArgs'] = result.editedArguments;
    if (result.answeredBy !== undefined) meta['answered_by'] = result.answeredBy;
    const comment = result.comment ?? result.ruleReason;
    if (comment !== undefined) meta['comment'] = comment;
    if (result.rule !== undefined) meta['rule'] = result.rule;
    return { interruptId: interrupt.id, status: 'resolved', payload, metadata: { [METADATA_KEY]: meta } };
  }
  const result = askResult(question as Question);
  const meta: JsonObject = { outcome: result.outcome, question_id: result.question.id };
  if ((result.outcome !== 'answered' && result.outcome !== 'defaulted') || tooLate(interrupt, result.question)) {
    return { interruptId: interrupt.id, status: 'cancelled', metadata: { [METADATA_KEY]: meta } };
  }
  if (result.answeredBy !== undefined) meta['answered_by'] = result.answeredBy;
  if (result.comment !== undefined) meta['comment'] = result.comment;
  return {
    interruptId: interrupt.id,
    status: 'resolved',
    payload: payloadOf(interrupt, result.question, result.value ?? null),
    metadata: { [METADATA_KEY]: meta },
  };
}

// The loop with an @ag-ui/client agent ---------------------------------------------------------------------------

/** What `runWithInterrupts` needs of an `@ag-ui/client` agent (`HttpAgent`, or any `AbstractAgent`). */
export interface InterruptibleAgent {
  threadId: string;
  messages: Message[];
  state: State;
  runAgent(
    parameters?: { runId?: string; resume?: ResumeEntry[] },
    subscriber?: { onRunFinishedEvent?(params: { event: RunFinishedEvent }): void },
  ): Promise<{ result: unknown; newMessages: Message[] }>;
  setMessages(messages: Message[]): void;
  setState(state: State): void;
}

export interface RunWithInterruptsOptions extends InterruptOptions {
  /** A run saved by `onInterrupted` before the process stopped: its interrupts are answered (the same questions)
   * and the thread continued from it, instead of running the agent again. */
  interrupted?: InterruptedRun;
  /** Called with each interrupted run before anybody is asked: keep it to continue after a restart. */
  onInterrupted?: (run: InterruptedRun) => void | Promise<void>;
  /** How long to wait for each question at most; then the call rejects. Default: until its deadline. */
  waitTimeoutMs?: number;
}

/**
 * Runs the agent until a run finishes without interrupts, answering each interrupt outcome through Holdpoint and
 * continuing the thread with the resume entries; returns that last run's result and the entries each interrupted
 * run was resumed with.
 */
export async function runWithInterrupts(
  hp: Holdpoint,
  agent: InterruptibleAgent,
  options: RunWithInterruptsOptions = {},
): Promise<{ result: unknown; resumed: ResumeEntry[][] }> {
  const resumed: ResumeEntry[][] = [];
  let interrupted = options.interrupted;
  let resume: ResumeEntry[] | undefined;
  if (interrupted !== undefined) {
    if (interrupted.messages !== undefined) agent.setMessages(interrupted.messages);
    if (interrupted.state !== undefined) agent.setState(interrupted.state);
    agent.threadId = interrupted.threadId;
  }
  for (;;) {
    if (interrupted !== undefined) {
      resume = await resumeInterrupts(hp, interrupted, options);
      if (resume === undefined) {
        const runId = interrupted.runId;
        throw new Error(`the interrupts of run ${runId} were not all decided within ${options.waitTimeoutMs} ms`);
      }
      resumed.push(resume);
    }
    let finished: RunFinishedEvent | undefined;
    const run = await agent.runAgent(resume === undefined ? {} : { resume }, {
      onRunFinishedEvent: ({ event }) => {
        finished = event;
      },
    });
    if (finished === undefined) throw new Error("the agent's run ended without RUN_FINISHED");
    const outcome = finished.outcome;
    if (outcome?.type !== 'interrupt') return { result: run.result, resumed };
    interrupted = {
      threadId: finished.threadId,
      runId: finished.runId,
      interrupts: outcome.interrupts,
      toolCalls: toolCallsOf(agent.messages),
      messages: agent.messages,
      state: agent.state,
      askedAt: new Date().toISOString(),
    };
    await options.onInterrupted?.(interrupted);
  }
}

// Interrupts to questions, answers to payloads --------------------------------------------------------------------

async function askOne(
  hp: Holdpoint,
  run: InterruptedRun,
  interrupt: Interrupt,
  options: InterruptOptions,
  askedAt: number,
): Promise<AskedInterrupt> {
  let timeout = timeoutOf(interrupt, options.timeout_seconds, askedAt);
  if (timeout !== undefined && timeout <= 0) return { interrupt, question: undefined, approval: undefined };
  if (timeout !== undefined && timeout !== options.timeout_seconds) {
    // A deadline counted from `expiresAt` may be sooner or later than the server takes: the question lives within
    // its bounds, and an answer after `expiresAt` resumes the interrupt as cancelled (see `tooLate`).
    const bounds = await hp.timeoutBounds(signalOf(options));
    timeout = Math.max(bounds.min_seconds, Math.min(bounds.max_seconds, timeout));
  }
  const idempotency = { idempotencyKey: idempotencyKey(run.threadId, run.runId, interrupt.id), ...signalOf(options) };
  const context: JsonObject = { ag_ui: { thread_id: run.threadId, run_id: run.runId, interrupt_id: interrupt.id } };
  const { title, body } = titleAndBody(interrupt);
  const common: Partial<NewQuestion> = { context };
  if (body !== undefined) common.body = body;
  if (options.project !== undefined) common.project = options.project;
  if (options.urgency !== undefined) common.urgency = options.urgency;
  if (options.assignee !== undefined) common.assignee = options.assignee;
  if (timeout !== undefined) common.timeout_seconds = timeout;
  const schema = interrupt.responseSchema as JsonObject | undefined;
  if (interrupt.reason === 'tool_call') {
    const call = run.toolCalls[interrupt.toolCallId ?? ''];
    (context['ag_ui'] as JsonObject)['tool_call_id'] = interrupt.toolCallId ?? null;
    const request: Parameters<Holdpoint['approve']>[0] = {
      ...common,
      tool_name: call?.name ?? 'tool',
      arguments: call?.arguments ?? {},
      allow_edit: allowsEdit(schema),
    };
    if (interrupt.message) request.title = title;
    if (options.agent !== undefined) request.agent = options.agent;
    const approval = await hp.approve(request, { ...idempotency, wait: false });
    return { interrupt, question: approval.question, approval };
  }
  let question: NewQuestion;
  const properties = formProperties(schema);
  const scalar = scalarField(schema);
  if (interrupt.reason === 'confirmation') {
    question = { ...common, title, kind: 'blocking', response_type: 'boolean' };
  } else if (properties.length > 0) {
    const required = new Set(Array.isArray(schema?.['required']) ? (schema['required'] as string[]) : []);
    const fields = properties.map(([key, property]) => field(key, property, required.has(key)));
    question = { ...common, title, kind: 'blocking', response_type: 'form', fields };
  } else if (scalar !== undefined) {
    // One value of a typed schema (an enum, a number, a boolean): asked as that type, not as free text.
    const { response_type, options, min, max } = scalar;
    question = { ...common, title, kind: 'blocking', response_type };
    if (options !== undefined) question.options = options;
    if (min !== undefined) question.min = min;
    if (max !== undefined) question.max = max;
  } else {
    question = { ...common, title, kind: 'blocking', response_type: 'text' };
  }
  return { interrupt, question: await hp.createQuestion(question, idempotency), approval: undefined };
}

function signalOf(options: InterruptOptions): { signal?: AbortSignal } {
  return options.signal ? { signal: options.signal } : {};
}

/** Whole seconds from `askedAt` until the interrupt expires (rounded down, so Holdpoint's deadline is not the
 * later one), or the configured default; the earlier of the two. Zero once it has expired. */
function timeoutOf(interrupt: Interrupt, fallback: number | undefined, askedAt: number): number | undefined {
  const limits = fallback === undefined ? [] : [fallback];
  const expires = expiresOf(interrupt);
  if (expires !== undefined) {
    if (Date.now() >= expires) return 0;
    limits.push(Math.floor((expires - askedAt) / 1000));
  }
  return limits.length === 0 ? undefined : Math.min(...limits);
}

function expiresOf(interrupt: Interrupt): number | undefined {
  const at = interrupt.expiresAt ? Date.parse(interrupt.expiresAt) : Number.NaN;
  return Number.isNaN(at) ? undefined : at;
}

/** Whether the question was settled after the interrupt expired: the agent would refuse that answer as stale (it
 * can happen only when the question was first asked after a restart, with a deadline counted from before). */
function tooLate(interrupt: Interrupt, question: Question): boolean {
  const expires = expiresOf(interrupt);
  return expires !== undefined && question.resolved_at != null && Date.parse(question.resolved_at) > expires;
}

function titleAndBody(interrupt: Interrupt): { title: string; body?: string } {
  const message = (interrupt.message ?? '').trim();
  if (!message) {
    const titles: Record<string, string> = {
      tool_call: 'Allow this tool call?',
      confirmation: 'Confirm?',
      input_required: 'The agent needs input',
    };
    return { title: titles[interrupt.reason] ?? `The agent asks (${interrupt.reason})` };
  }
  const first = message.split('\n')[0] ?? message;
  const title = first.length <= 300 ? first : `${first.slice(0, 299)}…`;
  return title === message ? { title } : { title, body: clipBody(message) };
}

/** Edits are offered unless a response schema leaves `editedArgs` out (AG-UI's signal for approve-with-edits). */
function allowsEdit(schema: JsonObject | undefined): boolean {
  if (schema === undefined) return true;
  const properties = schema['properties'];
  return isObject(properties) && 'editedArgs' in properties;
}

/** The properties of an object schema, in order, when it has 1..=10 of them. */
/** The most fields a Holdpoint form takes: a schema of more properties is asked as JSON text. */
const MAX_FIELDS = 30;

function formProperties(schema: JsonObject | undefined): Array<[string, JsonObject]> {
  if (schema === undefined || (schema['type'] ?? 'object') !== 'object') return [];
  const properties = schema['properties'];
  if (!isObject(properties)) return [];
  const entries = Object.entries(properties).map(
    ([key, value]): [string, JsonObject] => [key, isObject(value) ? value : {}],
  );
  return entries.length >= 1 && entries.length <= MAX_FIELDS ? entries : [];
}

function field(key: string, property: JsonObject, required: boolean): FormField {
  const label = String(property['title'] ?? property['description'] ?? key).slice(0, 200);
  const type = property['type'];
  const enumValues = property['enum'];
  if (Array.isArray(enumValues) && enumValues.length >= 2) {
    return { key, label, response_type: 'choice', options: enumValues.map(String), required };
  }
  const oneOf = property['oneOf'];
  if (Array.isArray(oneOf) && oneOf.length >= 2 && oneOf.every((o) => isObject(o) && 'const' in o)) {
    const options = (oneOf as JsonObject[]).map((o) => ({
      value: String(o['const']),
      label: String(o['title'] ?? o['const']),
    }));
    return { key, label, response_type: 'choice', options, required };
  }
  const items = property['items'];
  if (type === 'array' && isObject(items) && Array.isArray(items['enum'])) {
    return { key, label, response_type: 'multi_choice', options: items['enum'].map(String), required };
  }
  if (type === 'boolean') return { key, label, response_type: 'boolean', required };
  if (type === 'number' || type === 'integer') {
    const number: FormField = { key, label, response_type: type, required };
    if (typeof property['minimum'] === 'number') number.min = property['minimum'];
    if (typeof property['maximum'] === 'number') number.max = property['maximum'];
    return number;
  }
  if (type !== undefined && type !== 'string') {
    return { key, label: `${label} (JSON)`, response_type: 'text', required };
  }
  return { key, label, response_type: 'text', required };
}

/**
 * The one typed value a schema that is no object asks for (an `enum`, a `oneOf` of consts, a number, an integer, a
 * boolean, an array of an enum), as a field; `undefined` for text and for what is asked as JSON text.
 */
function scalarField(schema: JsonObject | undefined): FormField | undefined {
  if (schema === undefined || (schema['type'] ?? ('properties' in schema ? 'object' : undefined)) === 'object') {
    return undefined;
  }
  const one = field('value', schema, true);
  return one.response_type === 'text' ? undefined : one;
}

function payloadOf(interrupt: Interrupt, question: Question, value: JsonValue): JsonValue {
  const schema = interrupt.responseSchema as JsonObject | undefined;
  const properties = formProperties(schema);
  if (question.response_type === 'boolean') {
    const only = properties.length === 1 && properties[0]?.[1]['type'] === 'boolean' ? properties[0][0] : undefined;
    return only === undefined ? value : { [only]: value };
  }
  if (question.response_type === 'form' && typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const byKey = new Map(properties);
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, typed(byKey.get(key) ?? {}, item)]));
  }
  if (schema !== undefined && scalarField(schema) !== undefined) return typed(schema, value);
  return value;
}

/** The values a property's `enum` or `oneOf` of consts offers, as the schema wrote them. */
function choicesOf(property: JsonObject): JsonValue[] {
  const enumValues = property['enum'];
  if (Array.isArray(enumValues)) return enumValues;
  const oneOf = property['oneOf'];
  if (!Array.isArray(oneOf)) return [];
  return oneOf.filter((o): o is JsonObject => isObject(o) && 'const' in o).map((o) => o['const'] as JsonValue);
}

/** `value`, answered as the text of a choice, as the choice itself. */
function asWritten(choices: JsonValue[], value: JsonValue): JsonValue {
  return choices.find((c) => typeof c !== 'string' && String(c) === value) ?? value;
}

/** A form value as the schema wants it: a choice of an enum of numbers or booleans as that value, parsed JSON for
 * objects and arrays answered as text. */
function typed(property: JsonObject, value: JsonValue): JsonValue {
  const type = property['type'];
  const items = property['items'];
  const itemChoices = type === 'array' && isObject(items) ? choicesOf(items) : [];
  if (itemChoices.length > 0 && Array.isArray(value)) return value.map((item) => asWritten(itemChoices, item));
  const choices = choicesOf(property);
  if (choices.length > 0 && typeof value === 'string') return asWritten(choices, value);
  if ((type === 'object' || type === 'array') && typeof value === 'string') {
    try {
      return JSON.parse(value) as JsonValue;
    } catch {
      return value;
    }
  }
  return value;
}

/** The `POST /decide` answer an approval result was read from, to read it again once its question is settled. */
type Decided = { decision: ApprovalResult['decision']; rule: string | null; reason?: string; grant_id?: string };

function decideOf(result: ApprovalResult): Decided {
  const decided: Decided = {
    decision: result.decision,
    rule: result.rule ?? null,
  };
  if (result.ruleReason !== undefined) decided.reason = result.ruleReason;
  if (result.grantId !== undefined) decided.grant_id = result.grantId;
  return decided;
}

/** The longest question body the server takes, in UTF-8 bytes. */
const MAX_BODY_BYTES = 32 * 1024;

/** A message as a question's body: cut to what the server takes (on a character boundary) and marked as cut. */
function clipBody(text: string): string {
  const encoded = new TextEncoder().encode(text);
  if (encoded.length <= MAX_BODY_BYTES) return text;
  return `${new TextDecoder().decode(encoded.slice(0, MAX_BODY_BYTES - 8)).replace(/\uFFFD$/, '')}\n\n[…]`;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseArguments(raw: string): JsonObject {
  if (!raw) return {};
  try {
    const parsed = JSON.parse(raw) as JsonValue;
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : { arguments: parsed };
  } catch {
    return { arguments: raw };
  }
}
