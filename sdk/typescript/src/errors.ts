/**
 * The one error class of the library. A person's "no" is never one of these: it is an answer, with `outcome`
 * `answered` and its value.
 */

import type { JsonValue } from './types.js';

/** The server's stable error codes. */
export type ApiErrorCode =
  | 'bad_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'gone'
  | 'too_large'
  | 'invalid'
  | 'rate_limited'
  | 'internal';

/**
 * Codes of failures that never got an answer from the server: `network` (it could not be reached, or the
 * connection broke), `timeout` (no response within the request's time limit), `invalid_response` (an answer that
 * is not the API's JSON, e.g. from a proxy in between), `configuration` (no token, or a malformed URL).
 */
export type ClientErrorCode = 'network' | 'timeout' | 'invalid_response' | 'configuration';

export type ErrorCode = ApiErrorCode | ClientErrorCode;

const CODE_BY_STATUS: Record<number, ApiErrorCode> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  410: 'gone',
  413: 'too_large',
  422: 'invalid',
  429: 'rate_limited',
  500: 'internal',
};

export interface HoldpointErrorInit {
  code: ErrorCode | (string & {});
  message: string;
  status?: number | undefined;
  details?: JsonValue | undefined;
  retryAfterSeconds?: number | undefined;
  cause?: unknown;
}

/**
 * A refusal from the server (`{"error": {"code", "message", "details"}}`, with `status` and the server's `code`),
 * or a failure on the way to it (`network`, `timeout`, ...). Branch on `code`:
 *
 * ```ts
 * catch (error) {
 *   if (error instanceof HoldpointError && error.code === 'conflict') ...
 * }
 * ```
 */
export class HoldpointError extends Error {
  override readonly name = 'HoldpointError';
  /** The server's code, or one of this library's for failures before an answer. */
  readonly code: ErrorCode | (string & {});
  /** The HTTP status, when the server (or something in between) answered. */
  readonly status: number | undefined;
  /** Structured detail from the server: `{"fields": {...}}` for `invalid`, the question's status for `conflict`. */
  readonly details: JsonValue | undefined;
  /** For `rate_limited` (and `503`): how long the server asked to wait, from `Retry-After`. */
  readonly retryAfterSeconds: number | undefined;

  constructor(init: HoldpointErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.details = init.details;
    this.retryAfterSeconds = init.retryAfterSeconds;
  }

  /** For `invalid`: what is wrong with each field, by the field's name. */
  get fieldErrors(): Record<string, string> {
    const details = this.details;
    if (details === null || typeof details !== 'object' || Array.isArray(details)) return {};
    const fields = details['fields'];
    if (fields === null || typeof fields !== 'object' || Array.isArray(fields) || fields === undefined) return {};
    const out: Record<string, string> = {};
    for (const [name, problem] of Object.entries(fields)) out[name] = String(problem);
    return out;
  }
}

/** `Retry-After` in seconds (the server sends whole seconds; an HTTP date is honoured too). */
export function retryAfterSeconds(headers: Headers): number | undefined {
  const value = headers.get('retry-after');
  if (value === null) return undefined;
  const seconds = Number(value.trim());
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - Date.now()) / 1000);
}

/**
 * The error for a failed response: by the body's `code` when it has the API's error shape, else by the status (a
 * proxy in front of the server answers in its own words).
 */
export function errorFromResponse(status: number, headers: Headers, text: string): HoldpointError {
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  const error =
    parsed !== null && typeof parsed === 'object' && 'error' in parsed ? (parsed as { error: unknown }).error : undefined;
  const retryAfter = retryAfterSeconds(headers);
  if (error !== null && typeof error === 'object' && typeof (error as { code?: unknown }).code === 'string') {
    const { code, message, details } = error as { code: string; message?: unknown; details?: JsonValue };
    return new HoldpointError({
      code,
      message: typeof message === 'string' ? message : `HTTP ${status}`,
      status,
      details: details ?? undefined,
      retryAfterSeconds: retryAfter,
    });
  }
  return new HoldpointError({
    code: CODE_BY_STATUS[status] ?? (status >= 500 ? 'internal' : 'bad_request'),
    message: text.trim().slice(0, 500) || `HTTP ${status}`,
    status,
    retryAfterSeconds: retryAfter,
  });
}
