// Answering every response type from the question page with plain HTML forms: JavaScript disabled, as the spec
// requires the inbox, a question and its answer form to work without it.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, resultPath } from './harness.mjs';

let server;
let browser;
let page;

before(async () => {
  server = await startServer();
  browser = await launchBrowser();
  const context = await browser.newContext({ javaScriptEnabled: false });
  page = await context.newPage();
  await signIn(page, server, '/inbox');
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const options = (...values) => values.map((value) => ({ value, label: value.toUpperCase() }));

async function ask(body) {
  const created = await api(server, 'POST', '/questions', body);
  assert.equal(created.status, 201, JSON.stringify(created.json));
  return created.json.id;
}

async function openFromInbox(title) {
  await page.goto(`${server.baseUrl}/inbox`);
  await page.getByRole('link', { name: title }).click();
  await page.getByTestId('answer-form').waitFor();
}

async function stored(id) {
  return (await api(server, 'GET', `/questions/${id}`)).json;
}

test('text, with a comment', async () => {
  const id = await ask({ title: 'Which region should we deploy to?' });
  await openFromInbox('Which region should we deploy to?');
  await page.getByTestId('answer-text').fill('eu-west-1');
  await page.getByTestId('answer-comment').fill('closest to users');
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('resolution').waitFor();
  const q = await stored(id);
  assert.equal(q.status, 'answered');
  assert.deepEqual(q.response, { value: 'eu-west-1', comment: 'closest to users' });
});

test('boolean', async () => {
  const id = await ask({ title: 'Enable verbose logs?', response_type: 'boolean', kind: 'non_blocking' });
  await openFromInbox('Enable verbose logs?');
  await page.getByTestId('answer-no').click();
  await page.getByTestId('resolution').waitFor();
  assert.equal((await stored(id)).response.value, false);
});

test('choice and multi-choice', async () => {
  const one = await ask({ title: 'Which persona?', response_type: 'choice', options: options('dev', 'ops') });
  await openFromInbox('Which persona?');
  await page.getByTestId('option-ops').check();
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('resolution').waitFor();
  assert.equal((await stored(one)).response.value, 'ops');

  const many = await ask({ title: 'Which checks?', response_type: 'multi_choice', options: options('lint', 'test', 'bench') });
  await openFromInbox('Which checks?');
  await page.getByTestId('option-lint').check();
  await page.getByTestId('option-bench').check();
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('resolution').waitFor();
  assert.deepEqual((await stored(many)).response.value, ['lint', 'bench']);
});

test('approval with edited arguments keeps both versions', async () => {
  const id = await ask({
    title: 'Run terraform apply?', kind: 'approval', allow_edit: true,
    action: { tool_name: 'shell', arguments: { command: 'terraform apply -auto-approve' } },
  });
  await openFromInbox('Run terraform apply?');
  // Not JSON: refused, with the reason beside the field and the edit still in it.
  await page.getByTestId('edited-arguments').fill('{"command": "terraform plan"');
  await page.getByTestId('answer-approve').click();
  await page.locator('[data-testid="field-error"][data-path="edited_arguments"]').waitFor();
  assert.equal(await page.getByTestId('edited-arguments').inputValue(), '{"command": "terraform plan"');
  assert.equal((await stored(id)).status, 'pending');
  await page.getByTestId('edited-arguments').fill('{"command": "terraform plan"}');
  await page.getByTestId('answer-approve').click();
  await page.getByTestId('resolution').waitFor();
  const q = await stored(id);
  assert.equal(q.response.value, true);
  assert.deepEqual(q.response.edited_arguments, { command: 'terraform plan' });
  assert.deepEqual(q.action.arguments, { command: 'terraform apply -auto-approve' });
  // The answered page shows both: what the agent proposed, and what the approver allowed.
  assert.match(await page.getByTestId('action-arguments').textContent(), /terraform apply -auto-approve/);
  assert.match(await page.getByTestId('action-edited-arguments').textContent(), /"command": "terraform plan"/);
});

test('error recovery with guidance', async () => {
  const id = await ask({ title: 'The API returned 503', kind: 'error_recovery', options: options('use_cache') });
  await openFromInbox('The API returned 503');
  await page.getByTestId('option-use_cache').check();
  await page.getByTestId('answer-comment').fill('the cache is fresh enough');
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('resolution').waitFor();
  const q = await stored(id);
  assert.equal(q.response.value, 'use_cache');
  assert.equal(q.response.comment, 'the cache is fresh enough');
});

test('a form of several fields; a wrong value is refused with the reason and nothing stored', async () => {
  const id = await ask({
    title: 'Triage this incident', response_type: 'form', fields: [
      { key: 'severity', label: 'Severity', response_type: 'choice', options: options('sev1', 'sev2'), required: true },
      { key: 'owner', label: 'Owner', response_type: 'text', required: true },
      { key: 'eta_hours', label: 'ETA (hours)', response_type: 'number' },
      { key: 'page', label: 'Page on-call?', response_type: 'boolean' },
      { key: 'areas', label: 'Areas', response_type: 'multi_choice', options: options('db', 'api') },
    ],
  });
  await openFromInbox('Triage this incident');
  await page.screenshot({ path: resultPath('answer-form-nojs.png'), fullPage: true });
  await page.selectOption('#field-severity', 'sev1');
  await page.fill('#field-owner', 'alice');
  await page.fill('#field-eta_hours', '1.5');
  await page.selectOption('#field-page', 'true');
  await page.getByTestId('option-api').check();
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('resolution').waitFor();
  assert.deepEqual((await stored(id)).response.value, { severity: 'sev1', owner: 'alice', eta_hours: 1.5, page: true, areas: ['api'] });

  const invalid = await ask({ title: 'Pick one', response_type: 'choice', options: options('a', 'b') });
  await page.goto(`${server.baseUrl}/questions/${invalid}`);
  // A crafted submission (no option chosen) comes back with the reason.
  const form = await page.request.post(`${server.baseUrl}/ui/answer/${invalid}`, {
    form: { csrf: await page.getByTestId('answer-form').locator('input[name=csrf]').getAttribute('value'), value: 'c' },
    maxRedirects: 0,
  });
  assert.equal(form.status(), 303);
  assert.match(form.headers().location, /\?error=/);
  assert.equal((await stored(invalid)).status, 'pending');
});

test('a form sent untouched answers with its defaults: its choices, its table rows, its moment in its own zone', async () => {
  const id = await ask({
    title: 'Plan the maintenance window', response_type: 'form', fields: [
      { key: 'checks', label: 'Checks', response_type: 'multi_choice', options: options('lint', 'test', 'bench'), default: ['lint', 'bench'] },
      {
        key: 'hosts', label: 'Hosts', response_type: 'table', columns: [
          { key: 'host', label: 'Host', response_type: 'text', required: true },
          { key: 'cpus', label: 'CPUs', response_type: 'integer' },
        ],
        default: [{ host: 'web-1', cpus: 4 }, { host: 'db-1' }],
      },
      { key: 'starts', label: 'Window opens', response_type: 'datetime', default: '2026-03-01T09:30:00+01:00' },
    ],
  });
  await openFromInbox('Plan the maintenance window');
  // Without the script the page cannot know the browser's zone: the default shows in its own, and says which.
  assert.equal(await page.getByTestId('answer-field-starts').inputValue(), '2026-03-01T09:30');
  assert.equal(await page.getByTestId('answer-field-starts-zone').textContent(), 'Time zone: UTC+01:00');
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('resolution').waitFor();
  const value = (await stored(id)).response.value;
  assert.deepEqual(value.checks, ['lint', 'bench']);
  assert.deepEqual(value.hosts, [{ host: 'web-1', cpus: 4 }, { host: 'db-1' }]);
  assert.equal(Date.parse(value.starts), Date.parse('2026-03-01T09:30:00+01:00'), value.starts);
});

test('a second answer is refused: the page says who answered first', async () => {
  const id = await ask({ title: 'Who wins?' });
  await openFromInbox('Who wins?');
  await api(server, 'POST', `/questions/${id}/answer`, { value: 'the API' });
  await page.getByTestId('answer-text').fill('the browser');
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('answer-error').waitFor();
  assert.match(await page.getByTestId('answer-error').textContent(), /already answered/);
  assert.equal((await stored(id)).response.value, 'the API');
});
