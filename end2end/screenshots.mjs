// Takes the README's screenshots (docs/screenshots/): the inbox with 30 questions of mixed kinds and urgencies (on a
// desktop, in the split view with an approval under the cursor), a question's page, the live modal for each response
// type, the approval queue, a run page, the notification center and both settings pages (the workspace's with its
// escalation policies),
// at desktop and phone widths, in the light and the dark theme. Also measures the first load of /inbox. Run after
// `cargo xtask test` (or any build of the site and the server):
//
//   HOLDPOINT_BIN=target/debug/holdpoint node end2end/screenshots.mjs

import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, launchBrowser, api, waitForLive, eventually, signIn } from './tests/harness.mjs';

const OUT = join(dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'screenshots');
mkdirSync(OUT, { recursive: true });

const SCRIPT = `
- content: |
    Staging has run 2.4.0 for 24 hours with an error rate of 0.02 %. The production plan adds the
    \`payments-ledger\` queue and resizes the API group from 6 to 8 instances.
  tool_calls:
    - name: shell
      arguments:
        command: terraform apply -auto-approve
        workdir: infra/prod
- content: Applied as you decided.
`;

// The inbox's other 27 questions (the three runs ask the first 3): what a team's agents ask in a busy hour.
const BACKLOG = [
  ['Rotate the staging database password now?', 'boolean', 'high', 'infra'],
  ['Which changelog tone for 2.4.0?', 'choice', 'normal', 'docs'],
  ['Summarise why checkout latency rose on Tuesday', 'text', 'low', 'support'],
  ['Delete 1 204 stale preview environments?', 'approval', 'critical', 'infra'],
  ['Refund order #88412 (duplicate charge, 129.00 EUR)?', 'boolean', 'high', 'billing'],
  ['Which on-call rotation gets the new alerts?', 'choice', 'normal', 'ops'],
  ['Merge the dependency update PR #2291?', 'approval', 'normal', 'web'],
  ['Pause the marketing email campaign for DE?', 'boolean', 'critical', 'growth'],
  ['Name for the new internal metrics service', 'text', 'low', 'platform'],
  ['Scale the search cluster from 6 to 9 nodes?', 'approval', 'high', 'infra'],
  ['Which date for the 2.5 feature freeze?', 'choice', 'normal', 'releases'],
  ['Close 37 support tickets marked solved by the bot?', 'boolean', 'normal', 'support'],
  ['Block the IP range 203.0.113.0/24 at the edge?', 'approval', 'critical', 'security'],
  ['Translate the onboarding emails into Spanish too?', 'boolean', 'low', 'growth'],
  ['How should the importer treat duplicate SKUs?', 'choice', 'high', 'catalog'],
  ['Reply to the enterprise security questionnaire draft', 'text', 'normal', 'sales'],
  ['Re-run the failed nightly export for batch 412?', 'boolean', 'normal', 'data'],
  ['Upgrade PostgreSQL on analytics-db to 16.4?', 'approval', 'high', 'data'],
  ['Which plan for the customer asking for 500 seats?', 'choice', 'normal', 'sales'],
  ['Publish the incident report for INC-311?', 'boolean', 'high', 'ops'],
  ['Archive the legacy v1 API docs?', 'boolean', 'low', 'docs'],
  ['Purge the CDN cache for /assets/*?', 'approval', 'normal', 'web'],
  ['Which region hosts the new EU tenant?', 'choice', 'critical', 'infra'],
  ['Describe the acceptance criteria for SUP-4901', 'text', 'normal', 'support'],
  ['Disable the flaky e2e test checkout-3ds?', 'boolean', 'normal', 'web'],
  ['Revoke the API token of a departed contractor?', 'approval', 'high', 'security'],
  ['Keep the free tier limit at 3 projects?', 'boolean', 'low', 'growth'],
];

const OPTIONS = [
  { value: 'first', label: 'The first' },
  { value: 'second', label: 'The second' },
  { value: 'later', label: 'Decide later' },
];

function backlogQuestion([title, type, urgency, project], i) {
  const body = {
    title, urgency, project, timeout_seconds: [240, 1500, 5400, 20000, 86000][i % 5],
    body: `Asked while working on **${project}**: the details are in the run's timeline.`,
  };
  if (type === 'approval') {
    return { ...body, kind: 'approval', action: { tool_name: 'shell', arguments: { command: `./ops/${project}.sh --apply`, dry_run: false } } };
  }
  if (type === 'choice') return { ...body, response_type: 'choice', options: OPTIONS };
  return { ...body, response_type: type };
}

const VARIANTS = [
  { name: 'desktop-light', viewport: { width: 1280, height: 860 }, colorScheme: 'light' },
  { name: 'desktop-dark', viewport: { width: 1280, height: 860 }, colorScheme: 'dark' },
  { name: 'phone-light', viewport: { width: 390, height: 844 }, colorScheme: 'light', isMobile: true },
  { name: 'phone-dark', viewport: { width: 390, height: 844 }, colorScheme: 'dark', isMobile: true },
];

const MODALS = {
  text: {
    title: 'Which region should the new cluster run in?',
    body: 'We need **one** region for `orders-v2`.\n\n- `eu-west-1` is closest to most customers\n- `us-east-1` is cheapest',
    context: { ticket: 'OPS-1287', requested_by: 'platform-team' },
    project: 'infra',
  },
  boolean: { title: 'Mention the v1 refunds deprecation in the notes?', kind: 'non_blocking', response_type: 'boolean', project: 'docs' },
  choice: {
    title: 'Which persona should the release notes use?', response_type: 'choice', project: 'docs',
    options: [
      { value: 'engineer', label: 'Engineer', description: 'precise, with API details' },
      { value: 'customer', label: 'Customer', description: 'benefits first' },
      { value: 'exec', label: 'Executive', description: 'three bullet points' },
    ],
  },
  multi_choice: {
    title: 'Which regions get the canary?', response_type: 'multi_choice', project: 'infra',
    options: [{ value: 'eu', label: 'Europe' }, { value: 'us', label: 'United States' }, { value: 'ap', label: 'Asia Pacific' }],
  },
  approval: {
    title: 'Allow `kubectl rollout restart` on production?', kind: 'approval', project: 'infra', allow_edit: true,
    body: 'The API pods leak memory since 2.3.9; a restart buys a day.',
    action: { tool_name: 'shell', arguments: { command: 'kubectl rollout restart deploy/api', namespace: 'prod' } },
  },
  error_recovery: {
    title: 'Could not fetch the migration plan for orders-db', kind: 'error_recovery', project: 'data',
    body: '`GET https://plans.internal/orders-db` answered **503 Service Unavailable** three times.',
    options: [{ value: 'use_backup', label: 'Use the backup plan from yesterday' }],
  },
  form: {
    title: 'Triage SUP-4812: checkout fails for some EU cards', response_type: 'form', project: 'support',
    fields: [
      { key: 'severity', label: 'Severity', response_type: 'choice', required: true,
        options: [{ value: 'sev1', label: 'SEV1' }, { value: 'sev2', label: 'SEV2' }, { value: 'sev3', label: 'SEV3' }] },
      { key: 'component', label: 'Component', response_type: 'text', required: true },
      { key: 'customer_impact', label: 'Customer impact', response_type: 'boolean' },
      { key: 'users', label: 'Affected users', response_type: 'number' },
    ],
  },
};

const server = await startServer({ scripts: { 'release.yaml': SCRIPT }, env: { HOLDPOINT_SHELL: 'dry-run' } });
const browser = await launchBrowser();
try {
  const agent = { name: 'release-manager', model: 'script:release.yaml', tools: ['shell'], approval_policy: { tools: { shell: 'prompt' } } };
  const runs = [];
  for (const input of ['Ship release 2.4.0 to production', 'Ship release 2.4.1 to staging', 'Ship hotfix 2.3.9-1']) {
    runs.push((await api(server, 'POST', '/runs', { agent, input, project: 'releases' })).json.id);
  }
  await eventually('3 approvals', async () =>
    (await api(server, 'GET', '/questions?status=pending&kind=approval')).json.items.length === 3, 20_000);
  for (const [i, entry] of BACKLOG.entries()) await api(server, 'POST', '/questions', backlogQuestion(entry, i));
  const pending = (await api(server, 'GET', '/questions?status=pending&limit=100')).json.items;
  if (pending.length !== 30) throw new Error(`the inbox should hold 30 questions, not ${pending.length}`);
  const approval = pending.find((q) => q.title.startsWith('Delete 1 204 stale'));

  // First load of /inbox: a fresh context each time (an empty cache) holding a signed-in session's cookie, from
  // navigation start to hydrated, with the wasm modules fetched by then.
  const signedIn = await browser.newContext();
  await signIn(await signedIn.newPage(), server);
  const cookies = await signedIn.cookies();
  await signedIn.close();
  const timings = [];
  for (let i = 0; i < 5; i += 1) {
    const context = await browser.newContext();
    await context.addCookies(cookies);
    const page = await context.newPage();
    const started = Date.now();
    await page.goto(`${server.baseUrl}/inbox`);
    const loaded = Date.now() - started;
    await page.waitForFunction(() => document.body.dataset.hydrated === 'true');
    const hydrated = Date.now() - started;
    const modules = await page.evaluate(() =>
      performance.getEntriesByType('resource').filter((entry) => entry.name.endsWith('.wasm')).length);
    timings.push({ loaded, hydrated, modules });
    await context.close();
  }
  console.log('first load of /inbox (ms, load event / hydrated; wasm modules by then):', JSON.stringify(timings));
  // Approvals asked from now on (the modals') show their escalation chain; Settings shows the policies.
  await api(server, 'PUT', '/escalation-policies', { items: [
    { kind: 'approval', urgency: 'high', remind_after_seconds: 600, escalate_after_seconds: 1800, escalate_to: { role: 'admin' } },
    { kind: 'blocking', urgency: 'critical', remind_after_seconds: 300 },
  ] });

  for (const variant of VARIANTS) {
    const context = await browser.newContext(variant);
    const page = await context.newPage();
    await signIn(page, server);
    await waitForLive(page);
    const shot = (name) => page.screenshot({ path: join(OUT, `${name}-${variant.name}.png`) });
    if (variant.isMobile) {
      await shot('inbox');
    } else {
      // The split view: the critical approval under the cursor.
      await page.locator(`[data-question-id="${approval.id}"] .row-times`).click();
      await page.getByTestId('detail').waitFor();
      await page.evaluate(() => window.scrollTo(0, 0));
      await shot('inbox');
    }

    await page.goto(`${server.baseUrl}/questions/${approval.id}`);
    await waitForLive(page);
    await shot('question');
    await page.goto(`${server.baseUrl}/inbox`);
    await waitForLive(page);

    for (const [type, body] of Object.entries(MODALS)) {
      const created = await api(server, 'POST', '/questions', body);
      await page.locator(`[data-testid="live-modal"][data-question-id="${created.json.id}"]`).waitFor();
      if (type === 'approval') {
        const args = page.getByTestId('modal-arguments');
        await args.fill(JSON.stringify({ command: 'kubectl rollout restart deploy/api', namespace: 'prod-eu' }, null, 2));
      }
      await page.waitForTimeout(150);
      await shot(`modal-${type}`);
      await page.keyboard.press('Escape');
      await page.getByTestId('live-modal').waitFor({ state: 'detached' });
      await api(server, 'POST', `/questions/${created.json.id}/cancel`, null);
    }

    await page.goto(`${server.baseUrl}/approvals`);
    await waitForLive(page);
    await page.getByTestId('approval-select').first().check();
    await shot('approvals');
    await page.goto(`${server.baseUrl}/runs/${runs[0]}`);
    await waitForLive(page);
    await shot('run');
    await page.goto(`${server.baseUrl}/notifications`);
    await waitForLive(page);
    await shot('notifications');
    await page.goto(`${server.baseUrl}/settings`);
    await waitForLive(page);
    await shot('settings');
    await page.goto(`${server.baseUrl}/settings/workspace`);
    await waitForLive(page);
    await shot('settings-workspace');
    await page.getByTestId('escalation-form').scrollIntoViewIfNeeded();
    await shot('settings-escalation');
    await context.close();
  }
  console.log(`screenshots in ${OUT}`);
} finally {
  await browser.close();
  await server.stop();
}
