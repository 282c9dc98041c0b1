/**
 * `Holdpoint`: the client. Every call maps to one endpoint of `/api/v1` except `ask` and `approve`, which wait for
 * the outcome through the server's long-poll (`GET /questions/{id}/wait`, woken by the resolution itself, so an
 * answer arrives at once and a wait holds no more than one request at a time). `approve` asks through the
 * workspace's approval rules (`POST /decide`), which may allow or deny the call without asking anyone.
 */

import { HoldpointError, errorFromResponse } from './errors.js';
import {
  DEFAULT_RETRY,
  type RetryPolicy,
  backoffDelayMs,
  failureOf,
  isRetryable,
  linkedSignal,
  requestJson,
  sleep,
} from './http.js';
import { SseDecoder } from './sse.js';
import type {
  AnswerRequest,
  AnswerValue,
  ApprovalOutcome,
  ApprovalRequest,
  ApprovalResult,
  AskResult,
  DecideResponse,
  FormField,
  Grant,
  HoldpointEvent,
  JsonObject,
  JsonValue,
  NewQuestion,
  Page,
  Question,
  QuestionFilter,
  QuestionOption,
  TimeoutBounds,
  UploadedFile,
} from './types.js';

export const VERSION = '0.1.0';

const API_PREFIX = '/api/v1';
const DEFAULT_URL = 'http://127.0.0.1:3000';
/** The longest one long-poll may hold a request (the server's bound). */
const MAX_WAIT_SECONDS = 60;
/** Beyond a long-poll's own duration: what the request may take before it counts as lost. */
const LONG_POLL_GRACE_MS = 15_000;
/** The server sends a keep-alive comment every 10 s: a stream silent for this long is dead and is reopened. */
const STREAM_IDLE_MS = 45_000;
/** The event the server sends before ending a stream on purpose (stopping, or the client fell behind). */
const RECONNECT_EVENT = 'reconnect';

export interface HoldpointOptions {
  /** The server, e.g. `http://127.0.0.1:3000`; default `HOLDPOINT_SERVER`, else that address. */
  url?: string;
  /** A bearer token; default `HOLDPOINT_TOKEN`. */
  token?: string;
  /** Another `fetch` (a proxy agent, instrumentation); default the global one. */
  fetch?: typeof fetch;
  /** How failed calls are retried; see `RetryPolicy`. */
  retry?: Partial<RetryPolicy>;
  /** Each request's time limit (long-polls and streams have their own); default 30 s. */
  timeoutMs?: number;
}

/** What every call takes besides its body. */
export interface CallOptions {
  /** Aborts the call (and its retries and waits); it rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface CreateOptions extends CallOptions {
  /**
   * The question is created once per key, however often the call is made: a restarted agent passing the same key
   * gets the first question back, answered or not. Without one, each call makes a key of its own, so that retries
   * after a lost response never ask twice.
   */
  idempotencyKey?: string;
}

export interface WaitOptions extends CallOptions {
  /** Stop waiting after this long and return the question as it is (`outcome: 'pending'`); default: until it is
   * resolved, which its deadline bounds. */
  timeoutMs?: number;
}

export interface AskOptions extends CreateOptions {
  /**
   * Whether to wait for the outcome; default yes, except for `non_blocking` questions, which an agent asks and goes
   * on from (read the answer later with `wait` or `getQuestion`).
   */
  wait?: boolean;
  /** How long to wait at most; see `WaitOptions.timeoutMs`. */
  waitTimeoutMs?: number;
}

export interface EventsOptions extends CallOptions {
  /** Only the events of this project. */
  project?: string;
  /** Only the events of this run. */
  run_id?: string;
  /**
   * Start after this event (`0`: from the beginning of the log); without it the stream starts with what happens
   * from now on.
   */
  lastEventId?: number;
  /** How many reconnections in a row may fail before the iteration throws; default: keep trying. */
  maxReconnectAttempts?: number;
}

/** A client of one Holdpoint server with one token. */
export class Holdpoint {
  /** The server's base URL, without `/api/v1`. */
  readonly url: string;
  readonly #token: string;
  readonly #fetch: typeof fetch;
  readonly #retry: RetryPolicy;
  readonly #timeoutMs: number;
  #timeoutBounds: Promise<TimeoutBounds> | undefined;

  constructor(options: HoldpointOptions = {}) {
    const env = environment();
    let url = (options.url ?? env['HOLDPOINT_SERVER'] ?? DEFAULT_URL).replace(/\/+$/, '');
    if (url.endsWith(API_PREFIX)) url = url.slice(0, -API_PREFIX.length);
    try {
      new URL(url);
    } catch {
      throw new HoldpointError({ code: 'configuration', message: `not a URL: ${JSON.stringify(url)}` });
    }
    const token = options.token ?? env['HOLDPOINT_TOKEN'];
    if (!token) {
      throw new HoldpointError({ code: 'configuration', message: 'no token: pass { token } or set HOLDPOINT_TOKEN' });
    }
    this.url = url;
    this.#token = token;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#retry = { ...DEFAULT_RETRY, ...options.retry };
    this.#timeoutMs = options.timeoutMs ?? 30_000;
  }

  // Questions ---------------------------------------------------------------------------------------------------

  /**
   * Asks a person and waits for the outcome: `answered` (the person's value, which may be a "no"), `defaulted`,
   * `expired` or `cancelled`; none of them is an exception. Takes every field of `POST /questions`; the result's
   * `value` is typed by the question's `response_type`.
   */
  async ask<const Q extends NewQuestion>(question: Q, options: AskOptions = {}): Promise<AskResult<AnswerValue<Q>>> {
    const created = await this.createQuestion(question, options);
    const wait = options.wait ?? created.kind !== 'non_blocking';
    if (!wait || created.status !== 'pending') return askResult(created);
    const waitOptions: WaitOptions = {};
    if (options.signal) waitOptions.signal = options.signal;
    if (options.waitTimeoutMs !== undefined) waitOptions.timeoutMs = options.waitTimeoutMs;
    return this.wait<AnswerValue<Q>>(created.id, waitOptions);
  }

  /**
   * Asks the workspace's approval rules for permission to make one tool call (`POST /decide`) and waits for the
   * decision. A call the rules allow comes back at once (`outcome: 'allowed_by_rule'`, or `'allowed_by_grant'`), one
   * they deny too (`'denied_by_rule'`, with `rule` and `ruleReason`); neither asks anyone. Otherwise a person is
   * asked, the request's other fields shaping the question wherever the deciding rule's `ask` is silent. `approved`
   * says whether to run the call, with `arguments` (the approver's edit when `allow_edit` let them make one);
   * `reason` is what to tell a model that may not. Without a `default`, an approval nobody decides expires: not
   * approved, and `outcome: 'expired'` rather than a person's "no". The same `idempotencyKey` asks once.
   */
  async approve(request: ApprovalRequest, options: AskOptions = {}): Promise<ApprovalResult> {
    const { tool_name, arguments: args, title, default: fallback, agent, run_id, ...rest } = request;
    const wishes: Record<string, unknown> = { ...rest, title: title ?? approvalTitle(tool_name) };
    if (fallback !== undefined) wishes['default_response'] = { value: fallback };
    const wait = options.wait ?? true;
    const deadline = options.waitTimeoutMs === undefined ? undefined : Date.now() + options.waitTimeoutMs;
    // The server holds one request for at most its long-poll bound: a shorter limit is kept by `wait` instead.
    const holds = wait && (options.waitTimeoutMs === undefined || options.waitTimeoutMs >= MAX_WAIT_SECONDS * 1000);
    const asked: JsonObject = args ?? {};
    const body: Record<string, unknown> = { tool: tool_name, arguments: asked, wait: holds, question: wishes };
    if (agent !== undefined) body['agent'] = agent;
    if (run_id !== undefined) body['run_id'] = run_id;
    const call: { body: unknown; idempotencyKey: string; signal?: AbortSignal; timeoutMs?: number } = {
      body,
      idempotencyKey: options.idempotencyKey ?? `hp-ts-${globalThis.crypto.randomUUID()}`,
    };
    if (options.signal) call.signal = options.signal;
    if (holds) call.timeoutMs = MAX_WAIT_SECONDS * 1000 + LONG_POLL_GRACE_MS;
    const decided = (await this.#call('POST', '/decide', call)) as DecideResponse;
    const question = decided.question;
    if (!wait || question === undefined || question.status !== 'pending') return approvalResult(question, decided, asked);
    const waitOptions: WaitOptions = {};
    if (options.signal) waitOptions.signal = options.signal;
    if (deadline !== undefined) waitOptions.timeoutMs = Math.max(0, deadline - Date.now());
    return approvalResult((await this.wait<boolean>(question.id, waitOptions)).question, decided, asked);
  }

  /** `POST /questions` without waiting; retried safely under an `Idempotency-Key` (see `CreateOptions`). */
  async createQuestion(question: NewQuestion, options: CreateOptions = {}): Promise<Question> {
    const key = options.idempotencyKey ?? `hp-ts-${globalThis.crypto.randomUUID()}`;
    return (await this.#call('POST', '/questions', {
      body: questionBody(question),
      idempotencyKey: key,
      signal: options.signal,
    })) as Question;
  }

  /**
   * Waits until the question is no longer pending (or for at most `timeoutMs`). Each round trip is one long-poll,
   * returned by the server the moment the question is resolved.
   */
  async wait<V = JsonValue>(questionId: string, options: WaitOptions = {}): Promise<AskResult<V>> {
    const deadline = options.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs;
    const path = `/questions/${encodeURIComponent(questionId)}/wait`;
    for (;;) {
      const remainingMs = deadline === undefined ? undefined : deadline - Date.now();
      if (remainingMs !== undefined && remainingMs <= 0) {
        return askResult<V>(await this.getQuestion(questionId, options));
      }
      const seconds =
        remainingMs === undefined ? MAX_WAIT_SECONDS : Math.max(1, Math.min(MAX_WAIT_SECONDS, Math.ceil(remainingMs / 1000)));
      // The server waits whole seconds: the caller's limit cuts the last poll short, so it holds to the millisecond.
      const poll = linkedSignal(options.signal, remainingMs, `waiting for ${questionId}`);
      let question: Question;
      try {
        question = (await this.#call('GET', path, {
          query: { timeout_seconds: String(seconds) },
          signal: poll.signal,
          timeoutMs: seconds * 1000 + LONG_POLL_GRACE_MS,
        })) as Question;
      } catch (error) {
        if (poll.signal.aborted && !options.signal?.aborted) continue;
        throw error;
      } finally {
        poll.release();
      }
      if (question.status !== 'pending') return askResult<V>(question);
    }
  }

  async getQuestion(questionId: string, options: CallOptions = {}): Promise<Question> {
    return (await this.#call('GET', `/questions/${encodeURIComponent(questionId)}`, { signal: options.signal })) as Question;
  }

  /**
   * The question timeouts the server takes (`timeout_seconds`), as its OpenAPI document publishes them; read once
   * per client.
   */
  timeoutBounds(options: CallOptions = {}): Promise<TimeoutBounds> {
    this.#timeoutBounds ??= this.#call('GET', '/openapi.json', { signal: options.signal }).then(timeoutBoundsOf);
    // A failed read is not kept: the next call asks again.
    this.#timeoutBounds.catch(() => (this.#timeoutBounds = undefined));
    return this.#timeoutBounds;
  }

  /** One page of the workspace's questions (an `agent` token sees those it asked). */
  async listQuestions(filter: QuestionFilter = {}, options: CallOptions = {}): Promise<Page<Question>> {
    const query: Record<string, string> = {};
    for (const [name, value] of Object.entries(filter)) if (value !== undefined) query[name] = String(value);
    return (await this.#call('GET', '/questions', { query, signal: options.signal })) as Page<Question>;
  }

  /**
   * Answers a question as this token's person (`responder` and up; approvals need `approver`). A question that is
   * no longer pending is refused with `conflict`, whose `details` say its status and who answered. An approval of a
   * question that needs several returns it still pending with one approval more; `grant` makes an approval of a
   * tool call an "always allow" rule.
   */
  async answer(questionId: string, answer: AnswerRequest, options: CallOptions = {}): Promise<Question> {
    return (await this.#call('POST', `/questions/${encodeURIComponent(questionId)}/answer`, {
      body: answer,
      signal: options.signal,
    })) as Question;
  }

  /**
   * Uploads a file to answer a form's `file` field with (`responder` and up; at most the server's limit, 10 MiB by
   * default, else `too_large`). Answer with `{ [key]: { file_id: uploaded.file_id } }`; an upload no answer
   * references is removed after a day. From a path in Node: `uploadFile(await readFile(path), { name })`.
   */
  async uploadFile(
    data: Uint8Array | ArrayBuffer | Blob,
    file: { name: string; mediaType?: string },
    options: CallOptions = {},
  ): Promise<UploadedFile> {
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    const mediaType = file.mediaType ?? (data instanceof Blob && data.type !== '' ? data.type : 'application/octet-stream');
    return (await this.#call('POST', '/files', {
      query: { name: file.name },
      rawBody: { data: bytes, mediaType },
      signal: options.signal,
    })) as UploadedFile;
  }

  /**
   * The bytes of an uploaded file: for whoever sees the question whose answer references it (the agent that asked
   * included), or its uploader before an answer does.
   */
  async downloadFile(fileId: string, options: CallOptions = {}): Promise<Uint8Array> {
    return (await this.#call('GET', `/files/${encodeURIComponent(fileId)}`, { bytes: true, signal: options.signal })) as Uint8Array;
  }

  /**
   * Claims a pending question for this token's person: while the claim lasts (`ttl_seconds`, at most the server's
   * longest, 30 minutes by default) only they or an admin may answer; anyone else gets `conflict` naming them.
   */
  async claim(questionId: string, body: { ttl_seconds?: number } = {}, options: CallOptions = {}): Promise<Question> {
    return (await this.#call('POST', `/questions/${encodeURIComponent(questionId)}/claim`, {
      body,
      signal: options.signal,
    })) as Question;
  }

  /** Lets this person's claim of a question go (an admin may end anyone's). */
  async unclaim(questionId: string, options: CallOptions = {}): Promise<Question> {
    return (await this.#call('POST', `/questions/${encodeURIComponent(questionId)}/unclaim`, {
      body: {},
      signal: options.signal,
    })) as Question;
  }

  /** One page of the workspace's grants, newest first: the live ones, or with `all` the revoked and expired too. */
  async listGrants(filter: { all?: boolean; limit?: number; cursor?: string } = {}, options: CallOptions = {}): Promise<Page<Grant>> {
    const query: Record<string, string> = {};
    for (const [name, value] of Object.entries(filter)) if (value !== undefined) query[name] = String(value);
    return (await this.#call('GET', '/grants', { query, signal: options.signal })) as Page<Grant>;
  }

  /** Ends a grant at once (its maker or an admin). */
  async revokeGrant(grantId: string, options: CallOptions = {}): Promise<Grant> {
    return (await this.#call('POST', `/grants/${encodeURIComponent(grantId)}/revoke`, {
      body: {},
      signal: options.signal,
    })) as Grant;
  }

  /** Withdraws a pending question; whoever waits on it gets `outcome: 'cancelled'`. */
  async cancel(questionId: string, body: { reason?: string } = {}, options: CallOptions = {}): Promise<Question> {
    return (await this.#call('POST', `/questions/${encodeURIComponent(questionId)}/cancel`, {
      body,
      signal: options.signal,
    })) as Question;
  }

  // Events ------------------------------------------------------------------------------------------------------

  /**
   * The event stream, for as long as the caller iterates it. A dropped connection (network, a server restart, a
   * proxy's idle timeout, a stream silent for 45 s) is reopened with `Last-Event-ID` set to the last event
   * received, and the server replays what was missed: nothing is lost or repeated. Refusals (`unauthorized`,
   * `forbidden`, ...) end the iteration with a `HoldpointError`; leaving the loop closes the connection.
   */
  async *events(options: EventsOptions = {}): AsyncGenerator<HoldpointEvent, void, undefined> {
    const { signal } = options;
    const query: Record<string, string> = {};
    if (options.project !== undefined) query['project'] = options.project;
    if (options.run_id !== undefined) query['run_id'] = options.run_id;
    const url = this.#url('/events', query);
    const maxFailures = options.maxReconnectAttempts ?? Number.POSITIVE_INFINITY;
    let lastEventId = options.lastEventId;
    let failures = 0;
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const connection = new AbortController();
      const onAbort = (): void => connection.abort(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      let idle: ReturnType<typeof setTimeout> | undefined;
      const stillAlive = (): void => {
        clearTimeout(idle);
        idle = setTimeout(
          () => connection.abort(new HoldpointError({ code: 'timeout', message: `GET ${url}: silent for ${STREAM_IDLE_MS} ms` })),
          STREAM_IDLE_MS,
        );
      };
      try {
        stillAlive();
        const headers: Record<string, string> = {
          ...this.#headers(),
          accept: 'text/event-stream',
          'cache-control': 'no-cache',
        };
        if (lastEventId !== undefined) headers['last-event-id'] = String(lastEventId);
        const response = await this.#fetch(url, { headers, signal: connection.signal });
        if (!response.ok) throw errorFromResponse(response.status, response.headers, await response.text());
        if (!response.body) throw new HoldpointError({ code: 'invalid_response', message: `GET ${url}: no body` });
        failures = 0;
        const reader = response.body.getReader();
        const text = new TextDecoder();
        const decoder = new SseDecoder(lastEventId === undefined ? undefined : String(lastEventId));
        let reconnect = false;
        while (!reconnect) {
          const chunk = await reader.read();
          if (chunk.done) break;
          stillAlive();
          for (const message of decoder.push(text.decode(chunk.value, { stream: true }))) {
            if (message.type === RECONNECT_EVENT) {
              // The server's own position includes events this stream filtered out: resuming there skips them.
              const position = parseObject(message.data)['last_event_id'];
              if (typeof position === 'number' && (lastEventId === undefined || position > lastEventId)) {
                lastEventId = position;
              }
              reconnect = true;
              break;
            }
            const event = toEvent(message.type, message.data, message.lastEventId, lastEventId);
            lastEventId = event.id;
            yield event;
          }
          // An `id:` without data dispatches nothing but moves the position: the server starts a stream that
          // names no last event with one, so a stream dropped before its first event resumes where it started.
          const position = Number(decoder.lastEventId);
          if (!reconnect && decoder.lastEventId !== undefined && Number.isSafeInteger(position)) {
            if (lastEventId === undefined || position > lastEventId) lastEventId = position;
          }
        }
      } catch (error) {
        const failure = failureOf(error, connection.signal, signal, `GET ${url}`);
        if (!(failure instanceof HoldpointError)) throw failure;
        if (!isRetryable(failure, true)) throw failure;
        failures++;
        if (failures > maxFailures) throw failure;
        await sleep(backoffDelayMs(this.#retry, failures - 1, failure), signal);
        continue;
      } finally {
        clearTimeout(idle);
        signal?.removeEventListener('abort', onAbort);
        // Closes the response body, if the loop is left with the connection still open.
        connection.abort();
      }
      // The server ended the stream on purpose: a moment (so a stopping server is not hammered), then resume.
      await sleep(backoffDelayMs(this.#retry, 0), signal);
    }
  }

  // Plumbing ----------------------------------------------------------------------------------------------------

  #headers(): Record<string, string> {
    return { authorization: `Bearer ${this.#token}`, 'user-agent': `holdpoint-typescript/${VERSION}` };
  }

  #url(path: string, query?: Record<string, string>): string {
    const search = query && Object.keys(query).length > 0 ? `?${new URLSearchParams(query).toString()}` : '';
    return `${this.url}${API_PREFIX}${path}${search}`;
  }

  async #call(
    method: 'GET' | 'POST',
    path: string,
    options: {
      query?: Record<string, string>;
      body?: unknown;
      rawBody?: { data: Uint8Array | Blob; mediaType: string };
      bytes?: boolean;
      idempotencyKey?: string;
      signal?: AbortSignal | undefined;
      timeoutMs?: number;
    },
  ): Promise<unknown> {
    const headers: Record<string, string> = { ...this.#headers(), accept: options.bytes ? '*/*' : 'application/json' };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (options.rawBody !== undefined) headers['content-type'] = options.rawBody.mediaType;
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    return requestJson(this.#fetch, this.#retry, {
      method,
      url: this.#url(path, options.query),
      headers,
      body: options.body,
      ...(options.rawBody !== undefined ? { rawBody: options.rawBody.data } : {}),
      ...(options.bytes === true ? { bytes: true } : {}),
      signal: options.signal,
      timeoutMs: options.timeoutMs ?? this.#timeoutMs,
      idempotent: method === 'GET' || options.idempotencyKey !== undefined,
    });
  }

  toString(): string {
    return `Holdpoint(${this.url})`;
  }
}

function environment(): Record<string, string | undefined> {
  const holder = globalThis as { process?: { env?: Record<string, string | undefined> } };
  return holder.process?.env ?? {};
}

function option(value: QuestionOption | string): QuestionOption {
  return typeof value === 'string' ? { value, label: value } : value;
}

/** The JSON of `POST /questions`: options given as plain strings become `{value, label}`. */
function questionBody(question: NewQuestion): NewQuestion {
  const body: NewQuestion = { ...question };
  if (question.options) body.options = question.options.map(option);
  if (question.fields) {
    body.fields = question.fields.map((field: FormField) =>
      field.options ? { ...field, options: field.options.map(option) } : field,
    );
  }
  return body;
}

function approvalTitle(toolName: string): string {
  const title = `Allow ${toolName}?`;
  return title.length <= 300 ? title : `${title.slice(0, 299)}…`;
}

/** The result of an `ask`, read off the question as the server returned it. */
export function askResult<V = JsonValue>(question: Question): AskResult<V> {
  const response = question.response;
  return {
    outcome: question.status,
    // A cancellation's response carries only its reason, as the comment, with a null value.
    value: response === null || response.value === null ? undefined : (response.value as V),
    comment: response?.comment ?? undefined,
    editedArguments: response?.edited_arguments ?? undefined,
    answeredBy: question.answered_by ?? undefined,
    question,
  };
}

/**
 * The result of an approval: read off the approval question when a person was asked (its outcome decides), else off
 * the rules' decision (`POST /decide`) and the arguments asked about.
 */
export function approvalResult(question: Question | undefined, decided?: DecideResponse, asked?: JsonValue): ApprovalResult {
  const rule = decided?.rule ?? undefined;
  const ruleReason = decided?.reason;
  const grantId = decided?.grant_id;
  if (question === undefined) {
    const allowed = decided?.decision === 'allow';
    const outcome = allowed ? (grantId === undefined ? 'allowed_by_rule' : 'allowed_by_grant') : 'denied_by_rule';
    return {
      outcome,
      decision: allowed ? 'allow' : 'deny',
      rule,
      ruleReason,
      grantId,
      value: undefined,
      comment: undefined,
      editedArguments: undefined,
      answeredBy: undefined,
      question: undefined,
      approved: allowed,
      rejected: false,
      deniedByRule: !allowed,
      arguments: decided?.arguments ?? asked ?? {},
      reason: ruledReason(outcome, rule, ruleReason),
    };
  }
  const result = askResult<boolean>(question);
  const decidedByPerson = result.outcome === 'answered' || result.outcome === 'defaulted';
  const approved = decidedByPerson && result.value === true;
  const rejected = decidedByPerson && result.value === false;
  return {
    ...result,
    decision: result.outcome === 'pending' ? 'ask' : approved ? 'allow' : 'deny',
    rule,
    ruleReason,
    grantId,
    approved,
    rejected,
    deniedByRule: false,
    arguments: result.editedArguments ?? question.action?.arguments ?? asked ?? {},
    reason: approvalReason(result, approved, rejected),
  };
}

function ruledReason(outcome: ApprovalOutcome, rule: string | undefined, reason: string | undefined): string {
  const because = reason ? `: ${sentence(reason)}` : '.';
  switch (outcome) {
    case 'allowed_by_grant':
      return 'Allowed by a grant from an earlier approval, so nobody was asked.';
    case 'allowed_by_rule':
      return rule ? `Allowed by the approval rule ${rule}${because}` : `Allowed by the approval rules' default${because}`;
    default: {
      const by = rule ? `Denied by the approval rule ${rule}` : "Denied by the approval rules' default";
      return `${by}${reason ? because : ' without a reason.'} Do not retry the same call unchanged.`;
    }
  }
}

function sentence(text: string): string {
  const trimmed = text.trim();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}

function approvalReason(result: AskResult<boolean>, approved: boolean, rejected: boolean): string {
  const by = result.outcome === 'defaulted' ? 'by default, as nobody decided before the deadline' : `by ${result.answeredBy ?? 'a person'}`;
  if (approved) return result.comment ? `Approved ${by}: ${sentence(result.comment)}` : `Approved ${by}.`;
  if (rejected) {
    const why = result.comment ? `: ${sentence(result.comment)}` : ' without a reason.';
    return `Rejected ${by}${why} Do not retry the same call unchanged.`;
  }
  switch (result.outcome) {
    case 'expired':
      return "Nobody decided on this call before the approval's deadline, so it was not run.";
    case 'cancelled':
      return 'The approval request for this call was cancelled, so it was not run.';
    default:
      return 'The approval is still pending; the call has not run.';
  }
}

function parseObject(data: string): JsonObject {
  try {
    const parsed: unknown = JSON.parse(data);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as JsonObject;
    return { value: parsed as JsonValue };
  } catch {
    return { text: data };
  }
}

function toEvent(type: string, data: string, id: string | undefined, previous: number | undefined): HoldpointEvent {
  const parsed = parseObject(data);
  const numeric = id === undefined ? Number.NaN : Number(id);
  const question = parsed['question'];
  return {
    id: Number.isSafeInteger(numeric) ? numeric : (previous ?? -1),
    type,
    data: parsed,
    question:
      question !== null && typeof question === 'object' && !Array.isArray(question) ? (question as unknown as Question) : undefined,
  };
}

/** The bounds a server's OpenAPI document gives a new question's `timeout_seconds`. */
function timeoutBoundsOf(document: unknown): TimeoutBounds {
  type Part = { properties?: { timeout_seconds?: { minimum?: unknown; maximum?: unknown } } };
  const schema = (document as { components?: { schemas?: { NewQuestion?: Part & { allOf?: Part[] } } } })?.components
    ?.schemas?.NewQuestion;
  // The schema is an `allOf` of its parts (a flattened part): the property is in one of them.
  const timeout = [schema, ...(schema?.allOf ?? [])].map((part) => part?.properties?.timeout_seconds).find(Boolean);
  const [min, max] = [timeout?.minimum, timeout?.maximum];
  if (typeof min !== 'number' || typeof max !== 'number') {
    throw new HoldpointError({ code: 'invalid_response', message: "the server's OpenAPI document gives no timeout bounds" });
  }
  return { min_seconds: min, max_seconds: max };
}
