// The inbox's rows: dense (a screen of 1280×860 holds many), each with its urgency mark, response type, a one-line
// preview of the body, a relative time with the exact one on hover, a deadline countdown coloured as it nears, and
// its assignee.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, resultPath } from './harness.mjs';

let server;
let browser;

before(async () => {
  server = await startServer();
  browser = await launchBrowser();
  const urgencies = ['low', 'normal', 'high', 'critical'];
  const types = [
    { response_type: 'text' },
    { response_type: 'boolean' },
    { response_type: 'choice', options: [{ value: 'a', label: 'A' }, { value: 'b', label: 'B' }] },
    { kind: 'approval', action: { tool_name: 'shell', arguments: { command: 'terraform apply' } } },
  ];
  for (let i = 0; i < 24; i += 1) {
    const created = await api(server, 'POST', '/questions', {
      title: `Question ${i}: should the nightly job ${i % 2 ? 'skip' : 'retry'} the export?`,
      body: `> The **export** of batch ${i} failed twice with \`timeout\`; the third try starts at 02:00.\n\n## Log\n\nsee the run`,
      urgency: urgencies[i % 4],
      timeout_seconds: i === 23 ? 240 : 600 + i * 300,
      ...types[i % 4],
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
  }
  const assigned = await api(server, 'POST', '/questions', {
    title: 'Riley, which region first?', assignee: { user: 'reviewer' }, urgency: 'critical', timeout_seconds: 2400,
  });
  assert.equal(assigned.status, 201, JSON.stringify(assigned.json));
  const threeChoices = await api(server, 'POST', '/questions', {
    title: 'Which region hosts the new EU tenant?', response_type: 'choice',
    options: [{ value: 'fra', label: 'Frankfurt' }, { value: 'par', label: 'Paris' }, { value: 'later', label: 'Decide later' }],
  });
  assert.equal(threeChoices.status, 201, JSON.stringify(threeChoices.json));
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test('rows are dense and show type, preview, relative time, countdown, urgency and assignee', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  const rows = page.getByTestId('question-item');
  assert.equal(await rows.count(), 26);
  // As many rows as a mail client shows: at least 15 whole rows on the first screen beside the split view's detail
  // pane, each with its title's letters whole (not clipped by a line height too small for them).
  await page.getByTestId('detail-pane').waitFor();
  const shown = await rows.evaluateAll((items) => items
    .filter((i) => { const r = i.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; })
    .map((i) => {
      const title = i.querySelector('[data-testid="question-link"]');
      const box = title.getBoundingClientRect();
      const row = i.getBoundingClientRect();
      return { whole: title.scrollHeight <= title.clientHeight && box.top >= row.top && box.bottom <= row.bottom, text: title.textContent };
    }));
  assert.ok(shown.length >= 15, `${shown.length} whole rows on the first screen`);
  assert.deepEqual(shown.filter((t) => !t.whole).map((t) => t.text), [], 'titles cut vertically');

  const assigned = rows.filter({ hasText: 'Riley, which region first?' });
  assert.equal((await assigned.getByTestId('row-assignee').textContent()).trim(), '→ reviewer');
  assert.match(await assigned.getByTestId('countdown').getAttribute('class'), /\bnear\b/, 'under an hour: amber');

  // A row's actions do not crowd out its title: three choices beside the split view leave a short title whole.
  const choices = rows.filter({ hasText: 'Which region hosts the new EU tenant?' });
  assert.equal(await choices.getByRole('button').count(), 3);
  const title = await choices.getByTestId('question-link').evaluate((t) => ({ shown: t.clientWidth, needed: t.scrollWidth }));
  assert.ok(title.needed <= title.shown, `the title is cut: ${title.shown} of its ${title.needed} px shown`);

  const row = rows.filter({ hasText: 'Question 13:' });
  assert.equal((await row.getByTestId('row-response-type').textContent()).trim(), 'boolean');
  assert.equal(
    (await row.getByTestId('row-preview').textContent()).trim(),
    'The export of batch 13 failed twice with timeout; the third try starts at 02:00.',
    'the first line of text, without Markdown marks',
  );
  const ago = row.locator('time.ago');
  assert.equal((await ago.textContent()).trim(), 'just now');
  assert.match(await ago.getAttribute('title'), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/, 'the exact time on hover');
  assert.doesNotMatch(await row.getByTestId('countdown').getAttribute('class'), /near|soon/, 'far off: plain');
  const soon = rows.filter({ hasText: 'Question 23:' });
  assert.match(await soon.getByTestId('countdown').getAttribute('class'), /\bsoon\b/, 'under five minutes: red');

  // Critical and high look different: the mark's colours and words differ.
  const mark = async (title) => rows.filter({ hasText: title }).getByTestId('row-urgency').evaluate((m) => {
    const style = getComputedStyle(m);
    return { text: m.textContent, background: style.backgroundColor, color: style.color };
  });
  const critical = await mark('Question 3:');
  const high = await mark('Question 2:');
  assert.notEqual(critical.background, high.background);
  assert.notEqual(critical.color, high.color);
  assert.notEqual(critical.text.toLowerCase(), high.text.toLowerCase());
  await page.screenshot({ path: resultPath('inbox-rows.png') });

  await page.setViewportSize({ width: 390, height: 844 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
  assert.ok(overflow <= 0, `no sideways scrolling on a phone (${overflow} px too wide)`);
  await page.screenshot({ path: resultPath('inbox-rows-phone.png') });
  await page.close();
});
