// Files for `file` form fields and file questions against the real server: a person uploads, answers with the
// upload, and the agent that asked downloads the same bytes; refusals arrive as typed errors.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';

import { type FormField, Holdpoint, HoldpointError } from 'holdpoint-client';

import { type TestServer, agentClient, freshProject, personClient, startServer } from './harness.js';

let server: TestServer;
let person: Holdpoint;

before(async () => {
  server = await startServer();
  person = personClient(server);
});

after(async () => {
  await server?.stop();
});

const REPORT: FormField = {
  key: 'report',
  label: 'The report',
  response_type: 'file',
  accept: ['application/pdf'],
  max_bytes: 1_000_000,
  required: true,
};

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

test('an uploaded file answers a form and the agent that asked downloads it', async () => {
  const hp = await agentClient(server);
  const asked = await hp.createQuestion({ title: 'Send the report', response_type: 'form', fields: [REPORT], project: freshProject() });
  const data = new Uint8Array(10_000).map((_, i) => (i * 31) % 251);
  const uploaded = await person.uploadFile(data, { name: 'report.pdf', mediaType: 'application/pdf' });
  assert.deepEqual(uploaded, {
    file_id: uploaded.file_id,
    name: 'report.pdf',
    size: data.length,
    media_type: 'application/pdf',
    sha256: sha256(data),
  });
  await person.answer(asked.id, { value: { report: { file_id: uploaded.file_id } } });
  const result = await hp.wait(asked.id);
  assert.equal(result.outcome, 'answered');
  assert.deepEqual(result.value, { report: uploaded });
  const downloaded = await hp.downloadFile(uploaded.file_id);
  assert.equal(sha256(downloaded), sha256(data));
});

test('refused uploads and references are typed errors', async () => {
  const hp = await agentClient(server);
  await assert.rejects(hp.uploadFile(new Uint8Array([1]), { name: 'agent.txt' }), (error: unknown) => {
    return error instanceof HoldpointError && error.code === 'forbidden';
  });
  const big = new Uint8Array(10 * 1024 * 1024 + 1);
  await assert.rejects(person.uploadFile(big, { name: 'big.bin' }), (error: unknown) => {
    return error instanceof HoldpointError && error.code === 'too_large';
  });
  const asked = await hp.createQuestion({ title: 'Send the report', response_type: 'form', fields: [REPORT], project: freshProject() });
  const text = await person.uploadFile(new Blob(['not a pdf'], { type: 'text/plain' }), { name: 'notes.txt' });
  assert.equal(text.media_type, 'text/plain');
  await assert.rejects(person.answer(asked.id, { value: { report: { file_id: text.file_id } } }), (error: unknown) => {
    return error instanceof HoldpointError && error.code === 'invalid' && JSON.stringify(error.details).includes('"value.report"');
  });
});

test('a question that is itself a file is answered with one upload', async () => {
  const hp = await agentClient(server);
  const asked = await hp.createQuestion({
    title: 'Scan of the signed form',
    response_type: 'file',
    accept: ['image/*'],
    max_bytes: 100_000,
    project: freshProject(),
  });
  assert.deepEqual([asked.accept, asked.max_bytes], [['image/*'], 100_000]);
  const data = new Uint8Array(2_000).map((_, i) => (i * 7) % 256);
  const scan = await person.uploadFile(data, { name: 'scan.png', mediaType: 'image/png' });
  await person.answer(asked.id, { value: { file_id: scan.file_id } });
  const result = await hp.wait(asked.id);
  assert.equal(result.outcome, 'answered');
  assert.deepEqual(result.value, scan);
  assert.equal(sha256(await hp.downloadFile(scan.file_id)), sha256(data));
});
