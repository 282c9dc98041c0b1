// An accessibility audit with axe-core: every page, the live modal and the inbox's split view and shortcut list, in
// the light and the dark theme, at a desktop and a phone width. A serious or critical violation fails the test,
// named with the elements it was found on (axe's own rules, WCAG 2.1 A and AA and its best practices).
// Each urgency is drawn in its own colours (a critical row is tinted, a high one outlined), so every list holds
// questions of every urgency, of every kind and with every deadline colour, and each question page, split view and
// modal is audited once per urgency: a contrast that fails only on a critical approval's row is found.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import { startServer, launchBrowser, api, signIn, waitForLive, waitForHydration, eventually } from './harness.mjs';

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const SCRIPT = `
- content: Cleaning up before the release.
  tool_calls:
    - name: shell
      arguments:
        command: rm -rf build/ && make release VERSION=2.4.0 CHANNEL=stable SIGN=true NOTARIZE=true UPLOAD=s3://releases/desktop
- content: Done.
`;

const URGENCIES = ['low', 'normal', 'high', 'critical'];

let server;
let browser;
let runId;
/** The pending approval of each urgency, by urgency. */
const approvalIds = {};
/** The pending yes/no question of each urgency, by urgency. */
const booleanIds = {};
/** A pending form with every rich field type (docs/api.md): dates, a slider, a rating, markdown, a table, a file. */
let richId;

before(async () => {
  server = await startServer({ scripts: { 'release.yaml': SCRIPT }, env: { HOLDPOINT_SHELL: 'dry-run' } });
  browser = await launchBrowser();
  const agent = { name: 'release-bot', model: 'script:release.yaml', tools: ['shell'], approval_policy: { tools: { shell: 'prompt' } } };
  runId = (await api(server, 'POST', '/runs', { agent, input: 'Cut release 2.4.0', project: 'desktop' })).json.id;
  await eventually('the run waits for approval', async () =>
    (await api(server, 'GET', `/runs/${runId}`)).json.status === 'waiting_for_approval', 20_000);
  const kinds = [
    ['boolean', { response_type: 'boolean' }],
    ['choice', { response_type: 'choice', options: [{ value: 'a', label: 'Alpha' }, { value: 'b', label: 'Beta' }] }],
    ['text', { response_type: 'text' }],
    ['approval', { kind: 'approval', allow_edit: true, action: { tool_name: 'deploy', arguments: { env: 'prod', version: '2.4.0' } } }],
  ];
  // Deadlines in under five minutes (red), under an hour (amber) and further off (plain), on rows of each urgency.
  const timeouts = [120, 1800, 7200, 86_400];
  for (const [u, urgency] of URGENCIES.entries()) {
    // The approval queue lists approvals only: one per deadline colour there; the other kinds take turns.
    const asked = [...kinds.slice(0, 3).map(([name, kind], k) => [name, kind, timeouts[(u + k) % 4]]),
      ...timeouts.map((timeout) => ['approval', kinds[3][1], timeout])];
    for (const [name, kind, timeout] of asked) {
      const created = await api(server, 'POST', '/questions', {
        title: `Audit ${urgency} ${name}`,
        body: 'Some **context** for the question, with `code`.',
        urgency,
        timeout_seconds: timeout,
        project: 'audit',
        ...kind,
      });
      assert.equal(created.status, 201, JSON.stringify(created.json));
      if (name === 'approval') approvalIds[urgency] ??= created.json.id;
      if (name === 'boolean') booleanIds[urgency] = created.json.id;
    }
    // An answered question of each urgency, for the inbox's answered view.
    const created = await api(server, 'POST', '/questions', {
      title: `Answered ${urgency} yes/no`, response_type: 'boolean', urgency, project: 'audit',
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const answer = await api(server, 'POST', `/questions/${created.json.id}/answer`, { value: true });
    assert.equal(answer.status, 200, JSON.stringify(answer.json));
  }
  const rich = await api(server, 'POST', '/questions', {
    title: 'Audit rich form',
    response_type: 'form',
    project: 'audit',
    fields: [
      { key: 'when', label: 'Date', response_type: 'date', required: true, description: 'The day it ships.' },
      { key: 'starts', label: 'Window opens', response_type: 'datetime' },
      { key: 'at', label: 'Time', response_type: 'time' },
      { key: 'confidence', label: 'Confidence', response_type: 'integer', min: 0, max: 100, step: 5, widget: 'slider' },
      { key: 'count', label: 'Count', response_type: 'number', min: 0, placeholder: '0' },
      { key: 'rating', label: 'Rating', response_type: 'rating', max: 5 },
      { key: 'mail', label: 'Email', response_type: 'email' },
      { key: 'link', label: 'Link', response_type: 'url' },
      { key: 'notes', label: 'Notes', response_type: 'markdown', default: 'Some *notes*' },
      { key: 'parts', label: 'Parts', response_type: 'table', min_rows: 1, max_rows: 3, columns: [
        { key: 'item', label: 'Item', response_type: 'text', required: true },
        { key: 'qty', label: 'Qty', response_type: 'integer' },
        { key: 'ok', label: 'In stock', response_type: 'boolean' },
        { key: 'due', label: 'Due', response_type: 'date' },
        { key: 'size', label: 'Size', response_type: 'choice', options: [{ value: 's', label: 'S' }, { value: 'l', label: 'L' }] },
      ] },
      { key: 'report', label: 'Report', response_type: 'file', accept: ['text/plain'] },
    ],
  });
  assert.equal(rich.status, 201, JSON.stringify(rich.json));
  richId = rich.json.id;
  // Settings with all it can show: an invitation to another workspace, and an address not yet confirmed.
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const { stdout, stderr } = await promisify(execFile)(
    process.env.HOLDPOINT_BIN,
    ['token', 'create', '--workspace', 'partners', '--role', 'admin', '--name', 'pat'],
    { env: { ...inherited, HOLDPOINT_DATA_DIR: server.dataDir } },
  );
  const partners = { ...server, token: `${stdout}${stderr}`.match(/hp_\w+/)[0] };
  const invited = await api(partners, 'POST', '/members', { username: server.username, role: 'viewer' });
  assert.equal(invited.status, 202, JSON.stringify(invited.json));
  const me = (await api(server, 'GET', '/members')).json.items.find((m) => m.username === server.username);
  const typed = await api(server, 'PATCH', `/members/${me.user_id}`, { email: 'riley@example.com', slack_user_id: 'U0RILEY1' });
  assert.equal(typed.status, 200, JSON.stringify(typed.json));
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

/** Runs axe on the page as it is; returns its serious and critical violations, one line each. */
async function audit(page, where) {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.addScriptTag({ content: AXE_SOURCE });
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => `${n.target.join(' ')}${n.failureSummary ? ` (${n.failureSummary.split('\n').slice(1).join(' ').trim()})` : ''}`),
    }));
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${where}: ${v.id} (${v.impact}): ${v.help}\n    ${v.nodes.join('\n    ')}`);
}

const PAGES = () => [
  '/inbox',
  '/inbox?status=answered',
  ...URGENCIES.flatMap((u) => [`/questions/${approvalIds[u]}`, `/questions/${booleanIds[u]}`]),
  `/questions/${richId}`,
  '/approvals',
  '/runs',
  '/runs?status=cancelled',
  `/runs/${runId}`,
  '/settings',
  '/settings/workspace',
  '/settings/rules',
  '/settings/gateway',
  '/audit',
  '/notifications',
  '/no-such-page',
];

for (const colorScheme of ['light', 'dark']) {
  for (const [device, viewport] of [['desktop', { width: 1280, height: 860 }], ['phone', { width: 390, height: 844 }]]) {
    test(`no serious or critical violation on any page, ${device}, ${colorScheme} theme`, async () => {
      // The pages' Content-Security-Policy allows only their own scripts; axe is injected past it.
      const context = await browser.newContext({ viewport, colorScheme, isMobile: device === 'phone', bypassCSP: true });
      const page = await context.newPage();
      const found = [];
      await page.goto(`${server.baseUrl}/signin`);
      await waitForHydration(page);
      found.push(...(await audit(page, '/signin')));
      await signIn(page, server, '/inbox');
      for (const path of PAGES()) {
        await page.goto(`${server.baseUrl}${path}`);
        await waitForHydration(page);
        // The invitations are read once the page runs.
        if (path === '/settings') await page.getByTestId('invitation').waitFor();
        found.push(...(await audit(page, path)));
      }

      await page.goto(`${server.baseUrl}/inbox`);
      await waitForLive(page);
      if (device === 'desktop') {
        // The split view, with an approval of each urgency in it, and the list of keys.
        for (const urgency of URGENCIES) {
          await page.locator(`[data-question-id="${approvalIds[urgency]}"] .row-times`).click();
          await page.locator(`[data-testid="detail"][data-question-id="${approvalIds[urgency]}"]`).waitFor();
          found.push(...(await audit(page, `/inbox split view, ${urgency} approval`)));
        }
        // The live inputs of every rich field type.
        await page.locator(`[data-question-id="${richId}"] .row-times`).click();
        await page.locator(`[data-testid="detail"][data-question-id="${richId}"]`).waitFor();
        await page.getByTestId('detail-field-parts-add').click();
        found.push(...(await audit(page, '/inbox split view, rich form')));
        await page.evaluate(() => document.activeElement?.blur());
        await page.keyboard.press('?');
        await page.getByTestId('shortcuts').waitFor();
        found.push(...(await audit(page, '/inbox shortcuts')));
        await page.keyboard.press('Escape');
      } else {
        await page.getByTestId('menu-toggle').click();
        await page.getByTestId('nav-runs').waitFor();
        found.push(...(await audit(page, '/inbox menu open')));
        await page.getByTestId('menu-toggle').click();
      }

      // The live modal, for an approval with editable arguments (the tallest) and a yes/no question, of each urgency.
      for (const urgency of URGENCIES) {
        for (const body of [
          { title: `Modal ${urgency} approval`, kind: 'approval', allow_edit: true, urgency, body: 'Check the **plan**.',
            timeout_seconds: 120,
            action: { tool_name: 'terraform', arguments: { command: 'apply', workspace: 'prod', targets: ['a', 'b'] } } },
          { title: `Modal ${urgency} yes/no`, response_type: 'boolean', urgency, context: { ticket: 'OPS-1' } },
        ]) {
          const created = await api(server, 'POST', '/questions', body);
          await page.locator(`[data-testid="live-modal"][data-question-id="${created.json.id}"]`).waitFor();
          found.push(...(await audit(page, `modal: ${body.title}`)));
          await page.keyboard.press('Escape');
          await page.getByTestId('live-modal').waitFor({ state: 'detached' });
          await api(server, 'POST', `/questions/${created.json.id}/cancel`, null);
        }
      }
      await context.close();
      assert.deepEqual(found, [], `axe found:\n${found.join('\n')}`);
    });
  }
}
