// The rich field types (docs/api.md) answered in every place of the web UI: an agent asks a form with a date, a date
// and time, a slider, a rating, a table and a file; a person fills it in the live modal, in the inbox's split view
// and, without JavaScript, on the question page; the stored answer is read back through the API and must be what
// was entered (the file: its bytes, downloaded, have the SHA-256 the answer names). A value the server refuses is
// shown beside its input, and nothing typed is lost.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { startServer, launchBrowser, api, signIn, waitForHydration, waitForLive, eventually, resultPath } from './harness.mjs';

let server;
let browser;
let agentToken;

/** The person's time zone: a date and time is sent with its offset there (+01:00 on 1 March). */
const TIMEZONE = 'Europe/Berlin';

const RICH_FORM = (title) => ({
  title,
  body: 'Plan the **go-live**.',
  response_type: 'form',
  timeout_seconds: 3600,
  fields: [
    { key: 'when', label: 'Go-live date', response_type: 'date', required: true, description: 'The day it ships.' },
    { key: 'starts', label: 'Window opens', response_type: 'datetime' },
    { key: 'confidence', label: 'Confidence (%)', response_type: 'integer', min: 0, max: 100, step: 5, widget: 'slider' },
    { key: 'rating', label: 'How ready is it?', response_type: 'rating', max: 5 },
    {
      key: 'parts',
      label: 'Parts to order',
      response_type: 'table',
      min_rows: 1,
      max_rows: 4,
      columns: [
        { key: 'item', label: 'Item', response_type: 'text', required: true },
        { key: 'qty', label: 'Qty', response_type: 'integer' },
        { key: 'ok', label: 'In stock', response_type: 'boolean' },
      ],
    },
    { key: 'report', label: 'Test report', response_type: 'file', accept: ['text/plain'], max_bytes: 100_000 },
  ],
});

const REPORT = 'All 412 checks passed.\nNo regressions.\n';
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

before(async () => {
  server = await startServer();
  browser = await launchBrowser();
  const created = await api(server, 'POST', '/tokens', { name: 'planner', role: 'agent' });
  assert.equal(created.status, 201, JSON.stringify(created.json));
  agentToken = created.json.secret;
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

/** The agent asks, with its own token. */
async function agentAsks(body) {
  const response = await fetch(`${server.baseUrl}/api/v1/questions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${agentToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = await response.json();
  assert.equal(response.status, 201, JSON.stringify(json));
  return json.id;
}

/** The question as the agent reads it, once answered. */
async function answered(id) {
  let question;
  await eventually('the question is answered', async () => {
    const response = await fetch(`${server.baseUrl}/api/v1/questions/${id}`, { headers: { authorization: `Bearer ${agentToken}` } });
    question = await response.json();
    return question.status === 'answered';
  });
  return question;
}

/** Checks the stored file against the bytes that were dropped or chosen, through the agent's download. */
async function checkFile(value) {
  assert.equal(value.name, 'report.txt');
  assert.equal(value.size, Buffer.byteLength(REPORT));
  assert.match(value.media_type, /^text\/plain/);
  assert.equal(value.sha256, sha256(REPORT));
  const download = await fetch(`${server.baseUrl}/api/v1/files/${value.file_id}`, { headers: { authorization: `Bearer ${agentToken}` } });
  assert.equal(download.status, 200);
  assert.equal(sha256(Buffer.from(await download.arrayBuffer())), value.sha256);
}

/** A signed-in page whose event stream is open. */
async function livePage(viewport, path = '/inbox') {
  const context = await browser.newContext({ viewport, timezoneId: TIMEZONE, isMobile: viewport.width < 600 });
  const page = await context.newPage();
  await signIn(page, server, path);
  await waitForLive(page);
  return page;
}

/** Drops `report.txt` on a drop zone, as a file dragged from the desktop. */
async function dropReport(page, testid) {
  await page.getByTestId(testid).evaluate((zone, text) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File([text], 'report.txt', { type: 'text/plain' }));
    zone.dispatchEvent(new DragEvent('dragover', { dataTransfer: transfer, bubbles: true, cancelable: true }));
    zone.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
  }, REPORT);
}

/**
 * Fills the rich form of the live widget whose test ids start with `p` (`modal`, `detail`): a date, a date and time,
 * the slider moved by the keyboard, four stars, three table rows of which the second is removed again, and a file
 * dropped. The second row's item is first left out: the server refuses it, the refusal shows at that cell, and
 * what was entered stays.
 */
async function fillLive(page, p) {
  const field = (key) => page.getByTestId(`${p}-field-${key}`);
  await field('when').fill('2026-03-01');
  await field('starts').fill('2026-03-01T09:30');
  // The time is read in the person's zone, and the form says which: Berlin is an hour ahead of UTC on 1 March.
  assert.equal(await page.getByTestId(`${p}-field-starts-zone`).textContent(), 'Time zone: UTC+01:00');
  await field('confidence').focus();
  for (let i = 0; i < 3; i += 1) await page.keyboard.press('ArrowRight');
  assert.equal(await page.getByTestId(`${p}-field-confidence-shown`).textContent(), '15');
  await page.getByTestId(`${p}-field-rating-4`).click();
  assert.equal(await page.getByTestId(`${p}-field-rating`).locator('input:checked').getAttribute('value'), '4');

  await page.getByTestId(`${p}-field-parts-0-item`).fill('disk');
  await page.getByTestId(`${p}-field-parts-0-qty`).fill('2');
  await page.getByTestId(`${p}-field-parts-0-ok`).selectOption('true');
  await page.getByTestId(`${p}-field-parts-add`).click();
  await page.getByTestId(`${p}-field-parts-1-item`).fill('fan');
  await page.getByTestId(`${p}-field-parts-add`).click();
  await page.getByTestId(`${p}-field-parts-2-qty`).fill('1');
  await page.getByTestId(`${p}-field-parts-remove-1`).click();
  assert.equal(await page.getByTestId(`${p}-field-parts`).locator('tbody tr').count(), 2);

  await dropReport(page, `${p}-field-report-drop`);
  const chosen = page.getByTestId(`${p}-field-report-chosen`);
  await chosen.waitFor();
  assert.match(await chosen.textContent(), /report\.txt — 39 bytes/);

  // The row that was third is now the second, without its item: refused by the server, shown at its cell.
  await page.getByTestId(`${p}-submit`).click();
  const problem = page.locator(`[data-testid="field-error"][data-path="value.parts[1].item"]`);
  await problem.waitFor();
  assert.match(await problem.textContent(), /required/);
  // The summary names the cell by its labels, not by the path the server checks it at.
  const summary = await page.getByTestId(`${p}-error`).textContent();
  assert.match(summary, /Parts to order, row 2, Item: .*required/);
  assert.doesNotMatch(summary, /value\./);
  assert.equal(await field('when').inputValue(), '2026-03-01', 'nothing typed is lost');
  assert.equal(await page.getByTestId(`${p}-field-parts-1-qty`).inputValue(), '1');
  await chosen.waitFor();

  await page.getByTestId(`${p}-field-parts-1-item`).fill('cable');
}

const EXPECTED = (starts) => ({
  when: '2026-03-01',
  starts,
  confidence: 15,
  rating: 4,
  parts: [{ item: 'disk', qty: 2, ok: true }, { item: 'cable', qty: 1 }],
});

function checkAnswer(question, starts) {
  const { report, ...rest } = question.response.value;
  assert.deepEqual(rest, EXPECTED(starts));
  return checkFile(report);
}

test('the live modal: every rich input, answered as entered', async () => {
  const page = await livePage({ width: 1280, height: 900 });
  const id = await agentAsks(RICH_FORM('Plan the go-live (modal)'));
  await page.locator(`[data-testid="live-modal"][data-question-id="${id}"]`).waitFor();
  await fillLive(page, 'modal');
  await page.getByTestId('live-modal').screenshot({ path: resultPath('modal-rich-form-desktop-light.png') });
  await page.getByTestId('modal-submit').click();
  await checkAnswer(await answered(id), '2026-03-01T09:30:00+01:00');
  await page.context().close();
});

test('the live modal on a phone shows the table as cards of labelled cells', async () => {
  const page = await livePage({ width: 390, height: 844 });
  const id = await agentAsks(RICH_FORM('Plan the go-live (phone)'));
  await page.locator(`[data-testid="live-modal"][data-question-id="${id}"]`).waitFor();
  await page.getByTestId('modal-field-when').fill('2026-03-01');
  // The optional slider is unanswered until it is moved, and "Clear" takes it back there.
  const shown = page.getByTestId('modal-field-confidence-shown');
  assert.equal(await shown.textContent(), 'No answer');
  await page.getByTestId('modal-field-confidence').focus();
  await page.keyboard.press('ArrowRight');
  assert.equal(await shown.textContent(), '5');
  await page.getByTestId('modal-field-confidence-clear').click();
  assert.equal(await shown.textContent(), 'No answer');
  await page.getByTestId('modal-field-rating-3').click();
  await page.getByTestId('modal-field-parts-0-item').fill('disk');
  await page.getByTestId('modal-field-parts-add').click();
  const cell = await page.getByTestId('modal-field-parts-1-item').boundingBox();
  const dialog = await page.getByTestId('live-modal').boundingBox();
  assert.ok(cell.x + cell.width <= dialog.x + dialog.width + 1, 'a cell fits the phone-wide dialog');
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `the page does not scroll sideways (${width} px)`);
  await page.screenshot({ path: resultPath('modal-rich-form-phone-light.png') });
  await page.getByTestId('modal-field-parts-1-item').fill('fan');
  await page.getByTestId('modal-submit').click();
  const question = await answered(id);
  assert.deepEqual(question.response.value, { when: '2026-03-01', rating: 3, parts: [{ item: 'disk' }, { item: 'fan' }] });
  await page.context().close();
});

test("the inbox's split view: every rich input, answered as entered", async () => {
  const id = await agentAsks(RICH_FORM('Plan the go-live (inbox)'));
  const page = await livePage({ width: 1440, height: 1000 });
  // The modal opens only for questions asked while the page is open; this one is answered from the list.
  await page.locator(`[data-question-id="${id}"] .row-times`).click();
  await page.locator(`[data-testid="detail"][data-question-id="${id}"]`).waitFor();
  await fillLive(page, 'detail');
  await page.getByTestId('detail-submit').click();
  await checkAnswer(await answered(id), '2026-03-01T09:30:00+01:00');
  await page.context().close();
});

test('the question page without JavaScript: the same inputs in a plain form, the file sent with it', async () => {
  const id = await agentAsks(RICH_FORM('Plan the go-live (no script)'));
  const context = await browser.newContext({ javaScriptEnabled: false, timezoneId: TIMEZONE });
  const page = await context.newPage();
  await signIn(page, server, `/questions/${id}`);
  const field = (key) => page.getByTestId(`answer-field-${key}`);
  await field('when').fill('2026-03-01');
  await field('starts').fill('2026-03-01T09:30');
  // A range input always sends a value: without the page's script, the optional slider's "No answer" box is
  // unticked by hand.
  assert.equal(await page.getByTestId('answer-field-confidence-unset').isChecked(), true);
  await field('confidence').focus();
  for (let i = 0; i < 3; i += 1) await page.keyboard.press('ArrowRight');
  assert.equal(await field('confidence').inputValue(), '15');
  await page.getByTestId('answer-field-confidence-unset').uncheck();
  await page.getByTestId('answer-field-rating-4').click();
  assert.equal(await field('parts').locator('tbody tr').count(), 3, 'a fixed number of rows to fill in');
  await page.getByTestId('answer-field-parts-0-item').fill('disk');
  await page.getByTestId('answer-field-parts-0-qty').fill('2');
  await page.getByTestId('answer-field-parts-0-ok').selectOption('true');
  await page.getByTestId('answer-field-parts-1-qty').fill('1');
  await field('report').setInputFiles({ name: 'report.txt', mimeType: 'text/plain', buffer: Buffer.from(REPORT) });
  await page.screenshot({ path: resultPath('question-rich-form-desktop-light.png'), fullPage: true });

  // "Add row" answers nothing: the page comes back with everything typed and one row more, up to `max_rows`.
  await page.getByTestId('answer-field-parts-add-row').click();
  await page.waitForLoadState();
  assert.equal(await field('parts').locator('tbody tr').count(), 4, 'one row more');
  assert.equal(await page.getByTestId('answer-field-parts-add-row').count(), 0, 'its max_rows reached');
  assert.equal(await page.getByTestId('answer-field-parts-0-item').inputValue(), 'disk');
  assert.equal(await page.getByTestId('answer-field-parts-1-qty').inputValue(), '1');
  assert.equal(await field('when').inputValue(), '2026-03-01');
  assert.match(await page.getByTestId('answer-field-report-chosen').textContent(), /report\.txt/, 'the upload is kept');
  const pending = await fetch(`${server.baseUrl}/api/v1/questions/${id}`, { headers: { authorization: `Bearer ${agentToken}` } });
  assert.equal((await pending.json()).status, 'pending', 'nothing was answered');

  // The second row has no item: refused; the page shows it at that cell, with everything sent filled in again.
  await page.getByTestId('answer-submit').click();
  await page.waitForURL(/error=invalid/);
  const problem = page.locator('[data-testid="field-error"][data-path="value.parts[1].item"]');
  await problem.waitFor();
  assert.match(await problem.textContent(), /required/);
  assert.equal(await field('when').inputValue(), '2026-03-01');
  assert.equal(await field('starts').inputValue(), '2026-03-01T09:30');
  assert.equal(await field('confidence').inputValue(), '15');
  assert.equal(await page.getByTestId('answer-field-confidence-unset').isChecked(), false, 'still answered');
  assert.equal(await field('rating').locator('input:checked').getAttribute('value'), '4');
  assert.equal(await page.getByTestId('answer-field-parts-0-qty').inputValue(), '2');
  assert.equal(await page.getByTestId('answer-field-parts-1-qty').inputValue(), '1');
  assert.match(await page.getByTestId('answer-field-report-chosen').textContent(), /report\.txt/, 'the upload is kept');

  await page.getByTestId('answer-field-parts-1-item').fill('cable');
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('resolution').waitFor();
  // The answer reads field by field under the labels, a table row by row, the file by its name: no JSON.
  const resolution = await page.getByTestId('resolution').textContent();
  assert.match(resolution, /Go-live date: 2026-03-01; /);
  assert.match(resolution, /How ready is it\?: 4 of 5; /);
  assert.match(resolution, /Parts to order: \(Item: disk, Qty: 2, In stock: yes\) \(Item: cable, Qty: 1/);
  assert.match(resolution, /Test report: report\.txt/);
  assert.doesNotMatch(resolution, /[{}"]/);
  // Without the page's script the browser's offset is unknown: the time is read as UTC, as the form says.
  await checkAnswer(await answered(id), '2026-03-01T09:30:00Z');
  await context.close();
});

test("the question page with its script: the slider's value, the markdown preview and the browser's offset", async () => {
  const id = await agentAsks({
    title: 'Schedule the window (script)',
    response_type: 'form',
    fields: [
      { key: 'starts', label: 'Window opens', response_type: 'datetime', required: true },
      { key: 'confidence', label: 'Confidence (%)', response_type: 'integer', min: 0, max: 100, step: 5, widget: 'slider' },
      { key: 'notes', label: 'Notes', response_type: 'markdown' },
    ],
  });
  const page = await livePage({ width: 1280, height: 900 }, `/questions/${id}`);
  const field = (key) => page.getByTestId(`answer-field-${key}`);
  await field('starts').fill('2026-03-01T09:30');
  await field('confidence').focus();
  for (let i = 0; i < 3; i += 1) await page.keyboard.press('ArrowRight');
  assert.equal(await page.getByTestId('answer-field-confidence-shown').textContent(), '15', 'the slider shows its value');
  assert.equal(await page.getByTestId('answer-field-confidence-unset').isChecked(), false, 'moved, it is answered');
  await field('notes').fill('Ship **after** the freeze.');
  await page.getByTestId('answer-field-notes').locator('xpath=following-sibling::details[1]/summary').click();
  assert.equal(await page.getByTestId('answer-field-notes-preview').locator('strong').textContent(), 'after');
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('resolution').waitFor();
  // With the script, the date and time carries the browser's offset: 09:30 in Berlin on 1 March is +01:00.
  const value = (await answered(id)).response.value;
  assert.equal(value.starts, '2026-03-01T09:30:00+01:00');
  assert.equal(value.confidence, 15);
  assert.equal(value.notes, 'Ship **after** the freeze.');
  await page.context().close();
});

test("a date and time's default opens in the person's own zone and, sent untouched, is the same moment", async () => {
  const id = await agentAsks({
    title: 'Confirm the window (default)',
    response_type: 'form',
    fields: [{ key: 'starts', label: 'Window opens', response_type: 'datetime', default: '2026-03-01T09:30:00+01:00' }],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'America/New_York' });
  const page = await context.newPage();
  await signIn(page, server, `/questions/${id}`);
  await waitForHydration(page);
  // 09:30 in Paris is 03:30 in New York.
  await eventually('the default is shown in New York time', async () =>
    (await page.getByTestId('answer-field-starts').inputValue()) === '2026-03-01T03:30');
  assert.equal(await page.getByTestId('answer-field-starts-zone').textContent(), 'Time zone: UTC-05:00');
  await page.getByTestId('answer-submit').click();
  await page.getByTestId('resolution').waitFor();
  const value = (await answered(id)).response.value;
  assert.equal(Date.parse(value.starts), Date.parse('2026-03-01T09:30:00+01:00'), value.starts);
  await context.close();
});

test('ten stars stay on one line on a phone, in the modal and on the question page', async () => {
  const page = await livePage({ width: 390, height: 844 });
  const id = await agentAsks({ title: 'Rate the release (ten stars)', response_type: 'rating', max: 10, timeout_seconds: 3600 });
  const oneLine = async (prefix) => {
    // Both read in one frame: the modal slides in, and two reads apart could straddle its motion.
    const [first, last] = await page.evaluate((prefix) => [1, 10].map((n) => {
      const box = document.querySelector(`[data-testid="${prefix}-${n}"]`).getBoundingClientRect();
      return { y: box.y, right: box.right };
    }), prefix);
    assert.equal(Math.round(first.y), Math.round(last.y), `${prefix}: the tenth star is on the first one's line`);
    assert.ok(last.right <= 390, `${prefix}: the tenth star is on the screen`);
  };
  await page.locator(`[data-testid="live-modal"][data-question-id="${id}"]`).waitFor();
  await oneLine('modal-value');
  await page.goto(`${server.baseUrl}/questions/${id}`);
  await oneLine('answer-input');
  await page.context().close();
});

test('the question page on a phone, without JavaScript, fits its width', async () => {
  const id = await agentAsks(RICH_FORM('Plan the go-live (phone, no script)'));
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 390, height: 844 }, isMobile: true });
  const page = await context.newPage();
  await signIn(page, server, `/questions/${id}`);
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `the page does not scroll sideways (${width} px)`);
  await page.getByTestId('answer-field-parts-0-item').fill('disk');
  await page.screenshot({ path: resultPath('question-rich-form-phone-light.png'), fullPage: true });
  await context.close();
});

test("a question that is itself a file: dropped in the inbox's split view, or sent with the question page's form", async () => {
  const ask = (title) => agentAsks({ title, response_type: 'file', accept: ['text/plain'], max_bytes: 100_000, timeout_seconds: 3600 });
  const live = await ask('Attach the test report (inbox)');
  const page = await livePage({ width: 1440, height: 1000 });
  await page.locator(`[data-question-id="${live}"] .row-times`).click();
  await page.locator(`[data-testid="detail"][data-question-id="${live}"]`).waitFor();
  assert.match(await page.getByTestId('detail-value-drop').textContent(), /or drop a file here \(text\/plain, up to 97.6 KiB\)/);
  // A file of a type the question does not take is refused beside its input, and nothing is uploaded.
  await page.getByTestId('detail-value-drop').evaluate((zone) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File(['{}'], 'report.json', { type: 'application/json' }));
    zone.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
  });
  const problem = page.locator('[data-testid="detail"] [data-testid="field-error"][data-path="value"]');
  await eventually('the refusal is shown', async () => /text\/plain/.test((await problem.textContent()) ?? ''));
  await dropReport(page, 'detail-value-drop');
  const chosen = page.getByTestId('detail-value-chosen');
  await chosen.waitFor();
  assert.match(await chosen.textContent(), /report\.txt — 39 bytes/);
  await page.screenshot({ path: resultPath('inbox-file-question-desktop-light.png') });
  await page.getByTestId('detail-submit').click();
  await checkFile((await answered(live)).response.value);
  await page.context().close();

  // The question page's form sends the file with it (multipart), with or without the page's script.
  const plain = await ask('Attach the test report (question page)');
  const context = await browser.newContext({ javaScriptEnabled: false });
  const noScript = await context.newPage();
  await signIn(noScript, server, `/questions/${plain}`);
  assert.equal(await noScript.getByTestId('answer-input').getAttribute('accept'), 'text/plain');
  assert.match(await noScript.locator('.dropzone').textContent(), /text\/plain, up to 97.6 KiB/);
  await noScript.getByTestId('answer-input').setInputFiles({ name: 'report.txt', mimeType: 'text/plain', buffer: Buffer.from(REPORT) });
  await noScript.getByTestId('answer-submit').click();
  await noScript.getByTestId('resolution').waitFor();
  assert.match(await noScript.getByTestId('resolution').textContent(), /report\.txt/);
  await checkFile((await answered(plain)).response.value);
  await context.close();
});
