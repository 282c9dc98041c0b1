/**
 * `holdpoint-client`: agents ask a person through Holdpoint and carry on with the answer.
 *
 * ```ts
 * import { Holdpoint } from 'holdpoint-client';
 *
 * const hp = new Holdpoint({ url: 'http://127.0.0.1:3000', token: process.env.HOLDPOINT_TOKEN });
 * const region = await hp.ask({ title: 'Which region?', response_type: 'choice', options: ['eu-west', 'us-east'] });
 * if (region.outcome === 'answered') console.log(region.value);
 * ```
 *
 * The Vercel AI SDK adapter is `holdpoint-client/ai`.
 */

export { Holdpoint, VERSION, approvalResult, askResult } from './client.js';
export type { AskOptions, CallOptions, CreateOptions, EventsOptions, HoldpointOptions, WaitOptions } from './client.js';
export { HoldpointError } from './errors.js';
export type { ApiErrorCode, ClientErrorCode, ErrorCode } from './errors.js';
export { DEFAULT_RETRY } from './http.js';
export type { RetryPolicy } from './http.js';
export { SseDecoder } from './sse.js';
export type { SseMessage } from './sse.js';
export type * from './types.js';
