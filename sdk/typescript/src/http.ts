/**
 * The transport under the client: one JSON request with its time limit, the caller's `AbortSignal`, and the retry
 * policy that decides which failures may be tried again without doing anything twice.
 */

import { HoldpointError, errorFromResponse } from './errors.js';

/**
 * How calls are retried: up to `maxRetries` more attempts, `initialDelayMs` doubling up to `maxDelayMs` (with
 * jitter), or as long as the server's `Retry-After` says (at most a minute).
 *
 * A request is retried only when that cannot do something twice: always when it never reached the server (the
 * connection was refused) or the server refused it before doing anything (`429`, `503`); after it may have been
 * received, only reads and creations carrying an `Idempotency-Key` (a repeated key returns the first result).
 */
export interface RetryPolicy {
  maxRetries: number;
  initialDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 3, initialDelayMs: 500, maxDelayMs: 8_000 };

/** The longest a server-asked `Retry-After` is honoured before trying again. */
const MAX_RETRY_AFTER_MS = 60_000;

/** Error codes of connections that were never established: the request cannot have been received. */
const NEVER_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

export function backoffDelayMs(policy: RetryPolicy, attempt: number, error?: HoldpointError): number {
  if (error?.retryAfterSeconds !== undefined) return Math.min(error.retryAfterSeconds * 1000, MAX_RETRY_AFTER_MS);
  const base = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** attempt);
  return base * (0.5 + Math.random() / 2);
}

/** Whether `error` may be retried; `idempotent` says whether repeating the request could do anything twice. */
export function isRetryable(error: HoldpointError, idempotent: boolean): boolean {
  if (error.status === 429 || error.status === 503) return true;
  if (error.code === 'network' && error.cause !== undefined && causeCodes(error.cause).some((c) => NEVER_SENT.has(c))) {
    return true;
  }
  if (!idempotent) return false;
  if (error.status === 502 || error.status === 504 || error.status === 408) return true;
  return error.code === 'network' || error.code === 'timeout';
}

/** The `code`s along an error's `cause` chain (Node's fetch hides the socket error there). */
function causeCodes(error: unknown): string[] {
  const codes: string[] = [];
  const seen = new Set<unknown>();
  const visit = (value: unknown): void => {
    if (value === null || typeof value !== 'object' || seen.has(value)) return;
    seen.add(value);
    const code = (value as { code?: unknown }).code;
    if (typeof code === 'string') codes.push(code);
    const errors = (value as { errors?: unknown }).errors;
    if (Array.isArray(errors)) errors.forEach(visit);
    visit((value as { cause?: unknown }).cause);
  };
  visit(error);
  return codes;
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A signal that aborts when the caller's does (with its reason) or after `timeoutMs` (with a `timeout` error);
 * `release()` drops the timer and the listener, so a long-lived caller signal does not collect one per request.
 */
export function linkedSignal(
  callerSignal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  what: string,
): { signal: AbortSignal; release: () => void } {
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(callerSignal?.reason);
  if (callerSignal?.aborted) controller.abort(callerSignal.reason);
  else callerSignal?.addEventListener('abort', onAbort, { once: true });
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(
          () => controller.abort(new HoldpointError({ code: 'timeout', message: `${what}: no response within ${timeoutMs} ms` })),
          timeoutMs,
        );
  return {
    signal: controller.signal,
    release: () => {
      if (timer !== undefined) clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * What a failed `fetch` (or body read) means: the caller's abort is passed on as it is; the library's own time
 * limit becomes a `timeout` error; anything else is a `network` error keeping the cause.
 */
export function failureOf(error: unknown, signal: AbortSignal, callerSignal: AbortSignal | undefined, what: string): unknown {
  if (callerSignal?.aborted) return callerSignal.reason;
  if (signal.aborted && signal.reason instanceof HoldpointError) return signal.reason;
  if (error instanceof HoldpointError) return error;
  const reason = error instanceof Error ? error.message : String(error);
  const detail = causeCodes(error).join(', ');
  return new HoldpointError({ code: 'network', message: `${what}: ${reason}${detail ? ` (${detail})` : ''}`, cause: error });
}

export interface JsonRequest {
  method: 'GET' | 'POST';
  url: string;
  headers: Record<string, string>;
  body?: unknown;
  /** Sent as it is instead of `body`'s JSON (an upload). */
  rawBody?: Uint8Array | Blob;
  /** Resolve to the response's bytes instead of its JSON (a download). */
  bytes?: boolean;
  signal?: AbortSignal | undefined;
  timeoutMs: number;
  /** Whether sending it twice does nothing twice: reads, and creations with an `Idempotency-Key`. */
  idempotent: boolean;
}

/** Sends one request with retries; resolves to the response's JSON (`undefined` for an empty body). */
export async function requestJson(fetchImpl: typeof fetch, policy: RetryPolicy, request: JsonRequest): Promise<unknown> {
  const what = `${request.method} ${request.url}`;
  for (let attempt = 0; ; attempt++) {
    const linked = linkedSignal(request.signal, request.timeoutMs, what);
    let failure: HoldpointError;
    try {
      const init: RequestInit = { method: request.method, headers: request.headers, signal: linked.signal };
      if (request.rawBody !== undefined) init.body = request.rawBody as BodyInit;
      else if (request.body !== undefined) init.body = JSON.stringify(request.body);
      const response = await fetchImpl(request.url, init);
      if (response.ok && request.bytes === true) return new Uint8Array(await response.arrayBuffer());
      const text = await response.text();
      if (response.ok) return parseJson(text, what);
      failure = errorFromResponse(response.status, response.headers, text);
    } catch (error) {
      const cause = failureOf(error, linked.signal, request.signal, what);
      if (!(cause instanceof HoldpointError)) throw cause;
      failure = cause;
    } finally {
      linked.release();
    }
    if (attempt >= policy.maxRetries || !isRetryable(failure, request.idempotent)) throw failure;
    await sleep(backoffDelayMs(policy, attempt, failure), request.signal);
  }
}

function parseJson(text: string, what: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new HoldpointError({
      code: 'invalid_response',
      message: `${what}: the response is not JSON: ${text.slice(0, 200)}`,
      cause: error,
    });
  }
}
