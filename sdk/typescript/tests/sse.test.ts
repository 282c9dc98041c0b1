// The event-stream decoder on its own: the framing rules of the WHATWG spec, with text split anywhere.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SseDecoder, type SseMessage } from 'holdpoint-client';

const STREAM =
  ': keep-alive\n\n' +
  'id: 7\nevent: question_asked\ndata: {"question":{"title":"a"}}\n\n' +
  'id: 8\r\nevent: run_status\r\ndata: {"run_id":"r",\r\ndata: "status":"running"}\r\n\r\n' +
  'id: 9\revent: question_answered\rdata:{"x":1}\r\r' +
  'retry: 3000\nunknown: field\ndata: plain\n\n';

const EXPECTED: SseMessage[] = [
  { type: 'question_asked', data: '{"question":{"title":"a"}}', lastEventId: '7' },
  { type: 'run_status', data: '{"run_id":"r",\n"status":"running"}', lastEventId: '8' },
  { type: 'question_answered', data: '{"x":1}', lastEventId: '9' },
  { type: 'message', data: 'plain', lastEventId: '9' },
];

test('every line ending and field is read as the spec says', () => {
  assert.deepEqual(new SseDecoder().push(STREAM), EXPECTED);
});

test('the same stream split at every position decodes the same', () => {
  for (let cut = 0; cut <= STREAM.length; cut++) {
    const decoder = new SseDecoder();
    const messages = [...decoder.push(STREAM.slice(0, cut)), ...decoder.push(STREAM.slice(cut))];
    assert.deepEqual(messages, EXPECTED, `split at ${cut}: ${JSON.stringify(STREAM.slice(cut - 3, cut + 3))}`);
  }
});

test('the stream fed one character at a time decodes the same', () => {
  const decoder = new SseDecoder();
  const messages = [...STREAM].flatMap((char) => decoder.push(char));
  assert.deepEqual(messages, EXPECTED);
  assert.equal(decoder.lastEventId, '9');
});

test('an event without data is not dispatched, but its id still counts', () => {
  const decoder = new SseDecoder('3');
  assert.deepEqual(decoder.push('id: 4\n\n: comment\n\n'), []);
  assert.equal(decoder.lastEventId, '4');
  assert.deepEqual(decoder.push('data: x\n\n'), [{ type: 'message', data: 'x', lastEventId: '4' }]);
});

test('an id with a NUL is ignored, and an unfinished event waits for its blank line', () => {
  const decoder = new SseDecoder();
  assert.deepEqual(decoder.push('id: 1\0\ndata: y\n'), []);
  assert.deepEqual(decoder.push('\n'), [{ type: 'message', data: 'y', lastEventId: undefined }]);
});
