// An accessibility audit with axe-core: every page, the live modal and the inbox's split view and shortcut list, in
// the light and the dark theme, at a desktop and a phone width. A serious or critical violation fails the test,
// named with the elements it was found on (axe's own rules, WCAG 2.1 A and AA and its best practices).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
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

let server;
let browser;
let runId;
let approvalId;

before(async () => {
  server = await startServer({ scripts: { 'release.yaml': SCRIPT }, env: { HOLDPOINT_SHELL: 'dry-run' } });
  browser = await launchBrowser();
  const agent = { name: 'release-bot', model: 'script:release.yaml', tools: ['shell'], approval_policy: { tools: { shell: 'prompt' } } };
  runId = (await api(server, 'POST', '/runs', { agent, input: 'Cut release 2.4.0', project: 'desktop' })).json.id;
  await eventually('the run waits for approval', async () =>
    (await api(server, 'GET', `/runs/${runId}`)).json.status === 'waiting_for_approval', 20_000);
  const urgencies = ['critical', 'high', 'normal', 'low'];
  const kinds = [
    { response_type: 'boolean' },
    { response_type: 'choice', options: [{ value: 'a', label: 'Alpha' }, { value: 'b', label: 'Beta' }] },
    { response_type: 'text' },
    { kind: 'approval', allow_edit: true, action: { tool_name: 'deploy', arguments: { env: 'prod', version: '2.4.0' } } },
  ];
  for (let i = 0; i < 8; i += 1) {
    const created = await api(server, 'POST', '/questions', {
      title: `Audit question ${i}`,
      body: 'Some **context** for the question, with `code`.',
      urgency: urgencies[i % 4],
      timeout_seconds: i === 0 ? 120 : 1800 + i * 600,
      project: 'audit',
      ...kinds[i % 4],
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    if (i === 3) approvalId = created.json.id;
  }
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
  `/questions/${approvalId}`,
  '/approvals',
  '/runs',
  '/runs?status=cancelled',
  `/runs/${runId}`,
  '/settings',
  '/settings/workspace',
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
        found.push(...(await audit(page, path)));
      }

      await page.goto(`${server.baseUrl}/inbox`);
      await waitForLive(page);
      if (device === 'desktop') {
        // The split view, with an approval in it, and the list of keys.
        await page.locator(`[data-question-id="${approvalId}"] .row-times`).click();
        await page.getByTestId('detail').waitFor();
        found.push(...(await audit(page, '/inbox split view')));
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

      // The live modal, for an approval with editable arguments (the tallest) and a yes/no question.
      for (const body of [
        { title: 'Modal approval', kind: 'approval', allow_edit: true, urgency: 'critical', body: 'Check the **plan**.',
          action: { tool_name: 'terraform', arguments: { command: 'apply', workspace: 'prod', targets: ['a', 'b'] } } },
        { title: 'Modal yes/no', response_type: 'boolean', context: { ticket: 'OPS-1' } },
      ]) {
        const created = await api(server, 'POST', '/questions', body);
        await page.locator(`[data-testid="live-modal"][data-question-id="${created.json.id}"]`).waitFor();
        found.push(...(await audit(page, `modal: ${body.title}`)));
        await page.keyboard.press('Escape');
        await page.getByTestId('live-modal').waitFor({ state: 'detached' });
        await api(server, 'POST', `/questions/${created.json.id}/cancel`, null);
      }
      await context.close();
      assert.deepEqual(found, [], `axe found:\n${found.join('\n')}`);
    });
  }
}
