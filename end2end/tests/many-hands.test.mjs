// Many hands in the browser (docs/api.md): an approval that needs two people shows its progress ("1 of 2") in the live
// modal, the inbox, the approval queue and on its page; a person claims it from the modal and everyone sees who holds
// it; the second approval, given elsewhere, answers it. Approving a tool call in the modal offers a grant ("always
// allow"): made for a command prefix, it lets the run's next matching call through, is listed in Settings and is
// revoked there. The Claim button is offered only to whom the question allows.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, launchBrowser, api, signIn, waitForLive, waitForHydration, eventually, resultPath } from './harness.mjs';

let server;
let browser;

const SCRIPT = `
- tool_calls:
    - name: shell
      arguments:
        command: git status
- tool_calls:
    - name: shell
      arguments:
        command: git status --short
- tool_calls:
    - name: shell
      arguments:
        command: git push
- content: Pushed.
`;

before(async () => {
  server = await startServer({ scripts: { 'git.yaml': SCRIPT }, env: { HOLDPOINT_SHELL: 'dry-run' } });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

/** A token of its own name, made with the operator's token: a service identity, which stands for no person. */
async function approverToken(name) {
  const created = await api(server, 'POST', '/tokens', { name, role: 'approver' });
  assert.equal(created.status, 201);
  return created.json.secret;
}

async function answerAs(secret, id, body) {
  const response = await fetch(`${server.baseUrl}/api/v1/questions/${id}/answer`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: await response.json() };
}

test('a two-person approval shows its progress everywhere, is claimed from the modal and answered by the second', async () => {
  const second = await approverToken('on-call lead');
  const page = await browser.newPage();
  await signIn(page, server, '/inbox');
  await waitForLive(page);

  const asked = await api(server, 'POST', '/questions', {
    kind: 'approval', title: 'Rotate the production database credentials?', required_approvals: 2,
    action: { tool_name: 'shell', arguments: { command: 'vault write -force database/rotate-root/prod' } },
  });
  assert.equal(asked.status, 201);
  const id = asked.json.id;

  // The modal: "0 of 2", nobody on it; claiming it names the person at once.
  const modal = page.getByTestId('live-modal');
  await modal.waitFor();
  assert.match(await modal.getByTestId('modal-quorum').textContent(), /Approvals: 0 of 2/);
  assert.match(await modal.getByTestId('modal-claim').textContent(), /Nobody is on it/);
  await modal.getByTestId('modal-claim-button').click();
  await modal.getByTestId('modal-claimed-by').waitFor();
  assert.equal(await modal.getByTestId('modal-claimed-by').textContent(), `Claimed by ${server.username}`);
  assert.equal((await api(server, 'GET', `/questions/${id}`)).json.claimed_by, server.username);

  // Another approver cannot answer while the claim holds.
  const refused = await answerAs(second, id, { value: true });
  assert.equal(refused.status, 409);
  assert.equal(refused.json.error.details.claimed_by, server.username);

  // The first approval leaves it pending: the modal says so.
  await modal.getByTestId('modal-approve').click();
  await page.getByTestId('modal-notice').filter({ hasText: 'Approval recorded' }).waitFor();
  assert.match(await page.getByTestId('modal-notice').textContent(), /1 of 2/);

  // The inbox row and the approval queue show the progress and who holds it.
  await page.reload();
  await waitForHydration(page);
  const row = page.locator(`[data-testid="question-item"][data-question-id="${id}"]`);
  assert.equal(await row.getByTestId('row-quorum').textContent(), '1 of 2 approvals');
  assert.equal(await row.getByTestId('row-claimed-by').textContent(), `claimed by ${server.username}`);
  await page.goto(`${server.baseUrl}/approvals`);
  await waitForHydration(page);
  const item = page.locator(`[data-testid="approval-item"][data-question-id="${id}"]`);
  assert.equal(await item.getByTestId('approval-quorum').textContent(), '1 of 2 approvals');

  // Its page: who approved, and the claim, which the person lets go.
  await page.goto(`${server.baseUrl}/questions/${id}`);
  await waitForHydration(page);
  assert.equal(await page.getByTestId('question-quorum').textContent(), `Approvals: 1 of 2 (${server.username})`);
  await page.screenshot({ path: resultPath('many-hands-question.png'), fullPage: true });

  // Someone else sees who holds the claim, and is offered neither to release it nor to claim it over them.
  const lead = { username: 'lead', password: 'pw-lead-0123456789' };
  assert.equal((await api(server, 'POST', '/members', { ...lead, role: 'approver' })).status, 201);
  const elsewhere = await browser.newPage();
  await signIn(elsewhere, server, `/questions/${id}`, lead);
  await waitForHydration(elsewhere);
  await elsewhere.locator('[data-testid="question-claim"][data-viewer="lead"]').waitFor();
  assert.equal(await elsewhere.getByTestId('question-claimed-by').textContent(), `Claimed by ${server.username}`);
  assert.equal(await elsewhere.getByTestId('question-unclaim').count(), 0);
  assert.equal(await elsewhere.getByTestId('question-claim-button').count(), 0);

  // Its holder lets it go; the other page offers the claim at once.
  await page.getByTestId('question-unclaim').click();
  await page.getByTestId('question-claim-button').waitFor();
  assert.equal((await api(server, 'GET', `/questions/${id}`)).json.claimed_by, undefined);
  await elsewhere.getByTestId('question-claim-button').waitFor({ timeout: 5_000 });

  // A quorum counts people: the operator's token may not give the second approval; another person, elsewhere, does.
  const byService = await answerAs(second, id, { value: true });
  assert.equal(byService.status, 403);
  await page.getByTestId('answer-comment').fill('was about to approve too');
  await elsewhere.getByTestId('answer-approve').click();
  await eventually('the second approval answers it', async () =>
    (await api(server, 'GET', `/questions/${id}`)).json.status === 'answered');
  // The first page, still open, says so at once and sends nothing more; what was typed there stays.
  const meanwhile = page.getByTestId('resolution-meanwhile');
  await meanwhile.waitFor({ timeout: 5_000 });
  assert.match(await meanwhile.textContent(), /While this page was open, this question was .*lead/);
  assert.equal(await page.getByTestId('question-page').locator('.badge.status').textContent(), 'answered');
  assert.equal(await page.getByTestId('answer-approve').isDisabled(), true);
  assert.equal(await page.getByTestId('answer-comment').inputValue(), 'was about to approve too');
  assert.equal(await page.getByTestId('question-claim').count(), 0, 'nothing left to claim');
  const done = (await api(server, 'GET', `/questions/${id}`)).json;
  assert.deepEqual(done.approvals.map((a) => a.by), [server.username, 'lead']);
  await elsewhere.close();
  await eventually('the page shows the answer', async () => {
    await page.reload();
    return (await page.getByTestId('resolution').count()) === 1;
  });
  assert.match(await page.getByTestId('resolution').textContent(), /lead/);
  await page.close();
});

test('approving a shell call in the modal with "always allow" lets the next matching call through; Settings revokes it', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  const agent = { name: 'committer', model: 'script:git.yaml', tools: ['shell'], approval_policy: { tools: { shell: 'prompt' } } };
  const run = await api(server, 'POST', '/runs', { agent, input: 'Push the branch' });
  assert.equal(run.status, 201, JSON.stringify(run.json));

  // The modal offers the grant, closed: the person opts in, shortens nothing (the prefix is the command) and approves.
  const modal = page.getByTestId('live-modal');
  await modal.waitFor();
  const offer = modal.getByTestId('modal-grant-offer');
  assert.equal(await offer.getByTestId('modal-grant-chosen').isChecked(), false);
  await offer.getByTestId('modal-grant-chosen').check();
  assert.equal(await offer.getByTestId('modal-grant-prefix').inputValue(), 'git status');
  assert.equal(await offer.getByTestId('modal-grant-scope').inputValue(), 'run');
  await page.screenshot({ path: resultPath('grant-offer-modal.png') });
  await modal.getByTestId('modal-approve').click();

  // `git status --short` runs without a question; `git push` asks (the modal shows it).
  await eventually('the push is asked about', async () => {
    const title = await page.getByTestId('modal-title').textContent().catch(() => '');
    return title.includes('git push');
  }, 20_000);
  const calls = (await api(server, 'GET', `/runs/${run.json.id}/tool-calls`)).json.items;
  assert.deepEqual(calls.map((c) => [c.input.command, c.decided_by]),
    [['git status', 'reviewer'], ['git status --short', 'grant'], ['git push', null]]);

  // The workspace's settings list the grant with its use, and revoke it.
  await page.goto(`${server.baseUrl}/settings/workspace`);
  await waitForHydration(page);
  const row = page.getByTestId('grant-row');
  await row.waitFor();
  assert.match(await row.textContent(), /commands starting with “git status”/);
  assert.equal(await row.getByTestId('grant-uses').textContent(), '1');
  await row.getByTestId('grant-revoke').click();
  await row.getByTestId('grant-revoke-confirm').click();
  await page.getByTestId('grant-empty').waitFor();
  const grants = (await api(server, 'GET', '/grants?all=true')).json.items;
  assert.equal(grants.length, 1);
  assert.ok(grants[0].revoked_at, 'revoked');
  assert.equal(grants[0].revoked_by, server.username);
  await page.close();
});

/** Brings up the question titled `title` in the live modal, putting off the others still pending from earlier tests. */
function showInModal(page, title) {
  return eventually(`the modal shows ${title}`, async () => {
    if (!(await page.getByTestId('live-modal').isVisible())) return false;
    if ((await page.getByTestId('modal-title').textContent()) === title) return true;
    await page.getByTestId('modal-defer').click();
    return false;
  });
}

test('an approval an agent asks over REST that a grant covers is approved as it is asked, and no one is shown it', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  const ask = (command) => api(server, 'POST', '/questions', {
    kind: 'approval',
    title: `Run ${command}?`,
    action: { tool_name: 'shell', arguments: { command } },
  });
  const modal = page.getByTestId('live-modal');
  const shown = (title) => showInModal(page, title);

  // The reviewer approves `make lint` and lets the agent's calls starting with it through.
  const first = await ask('make lint');
  assert.equal(first.status, 201, JSON.stringify(first.json));
  await shown('Run make lint?');
  await modal.getByTestId('modal-grant-chosen').check();
  assert.equal(await modal.getByTestId('modal-grant-scope').inputValue(), 'agent');
  // An admin may also let it through for the whole workspace.
  const scopes = () => modal.getByTestId('modal-grant-scope').locator('option').evaluateAll((options) => options.map((o) => o.value));
  await eventually('the workspace scope is offered to an admin', async () => (await scopes()).includes('workspace'));
  await modal.getByTestId('modal-approve').click();
  await eventually('the approval is stored', async () => (await api(server, 'GET', `/questions/${first.json.id}`)).json.status === 'answered');

  // Every title the modal shows from now on.
  await page.evaluate(() => {
    window.modalTitles = [];
    new MutationObserver(() => {
      const title = document.querySelector('[data-testid="modal-title"]');
      if (title) window.modalTitles.push(title.textContent);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  const granted = await ask('make lint --fix');
  assert.equal(granted.status, 201, JSON.stringify(granted.json));
  assert.equal(granted.json.status, 'answered');
  assert.equal(granted.json.answered_by, 'grant');
  // A call the grant does not cover is asked; by the time the modal shows it, the page has had the granted one's
  // events.
  const deploy = await ask('make deploy');
  await shown('Run make deploy?');
  assert.deepEqual(await page.evaluate(() => window.modalTitles.filter((title) => title.includes('--fix'))), []);
  await page.getByTestId('modal-defer').click();

  // Its page says what answered it, and why.
  await page.goto(`${server.baseUrl}/questions/${granted.json.id}`);
  await waitForHydration(page);
  assert.equal(await page.getByTestId('resolution').locator('p').textContent(), 'Answered by a grant, without asking anyone: yes');
  assert.match(await page.getByTestId('resolution-comment').textContent(), /^Covered by a grant from .+, so nobody was asked\.$/);
  await page.screenshot({ path: resultPath('granted-question.png') });

  await api(server, 'POST', `/questions/${deploy.json.id}/cancel`, null);
  const grant = (await api(server, 'GET', '/grants')).json.items.find((g) => g.question_id === first.json.id);
  assert.equal((await api(server, 'POST', `/grants/${grant.id}/revoke`, {})).status, 200);
  await page.close();
});

test('an approver who is not an admin is not offered a grant for the whole workspace', async () => {
  const gil = { username: 'gil', password: 'pw-gil-0123456789' };
  const added = await api(server, 'POST', '/members', { ...gil, role: 'approver' });
  assert.equal(added.status, 201, JSON.stringify(added.json));
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  await signIn(page, server, '/inbox', gil);
  await waitForLive(page);
  const asked = await api(server, 'POST', '/questions', {
    kind: 'approval',
    title: 'Rotate the staging keys?',
    action: { tool_name: 'shell', arguments: { command: 'vault rotate staging' } },
    assignee: { user: 'gil' },
  });
  assert.equal(asked.status, 201, JSON.stringify(asked.json));
  const modal = page.getByTestId('live-modal');
  await showInModal(page, 'Rotate the staging keys?');
  // The page has long known who it is by then (a local call); the offer still names only the agent.
  await page.waitForTimeout(1000);
  const scopes = await modal.getByTestId('modal-grant-scope').locator('option').evaluateAll((options) => options.map((o) => o.value));
  assert.deepEqual(scopes, ['agent']);
  await api(server, 'POST', `/questions/${asked.json.id}/cancel`, null);
  await context.close();
});

/** The reviewer is an admin, so the live modal brings up every question, whoever it is assigned to: later, each. */
async function deferAll(page) {
  for (let shown = 0; shown < 5 && (await page.getByTestId('modal-defer').isVisible()); shown += 1) {
    await page.getByTestId('modal-defer').click();
  }
}

test('away in Settings: the questions assigned to you go to the colleague you choose until you are back', async () => {
  const added = await api(server, 'POST', '/members', { username: 'dana', password: 'pw-dana-0123456789', role: 'admin', display_name: 'Dana Deputy' });
  assert.equal(added.status, 201, JSON.stringify(added.json));
  const ask = (title) => api(server, 'POST', '/questions', {
    kind: 'approval',
    title,
    action: { tool_name: 'shell', arguments: { command: 'deploy --prod' } },
    assignee: { user: server.username },
  });
  const before = await ask('Deploy before the holiday?');
  assert.equal(before.json.assignee.user, server.username);

  const context = await browser.newContext({ viewport: { width: 1280, height: 1400 } });
  const page = await context.newPage();
  await signIn(page, server, '/settings');
  await waitForHydration(page);
  // Back in three days, at noon of the browser's own time zone.
  const back = new Date(Date.now() + 3 * 86_400_000);
  const local = `${back.getFullYear()}-${String(back.getMonth() + 1).padStart(2, '0')}-${String(back.getDate()).padStart(2, '0')}T12:00`;
  await page.getByTestId('away-until').fill(local);
  await page.getByTestId('away-delegate').selectOption('dana');
  await page.getByTestId('away-submit').click();
  await page.getByTestId('away-status').waitFor();
  await deferAll(page);
  assert.match(await page.getByTestId('away-status').innerText(), /dana takes your questions/);
  await page.getByTestId('away-form').scrollIntoViewIfNeeded();
  await page.screenshot({ path: resultPath('away-settings-desktop-light.png') });

  // What was pending went to Dana, and what is asked meanwhile does too.
  const handed = await api(server, 'GET', `/questions/${before.json.id}`);
  assert.equal(handed.json.assignee.user, 'dana');
  const during = await ask('Deploy during the holiday?');
  assert.equal(during.json.assignee.user, 'dana');
  const delegated = await api(server, 'GET', '/audit?action=question.delegated');
  assert.equal(delegated.json.items.length, 2);

  await deferAll(page);
  // Back: questions come to the reviewer again.
  await page.getByTestId('away-end').click();
  await eventually('the absence ends', async () => (await page.getByTestId('away-status').count()) === 0);
  const after = await ask('Deploy after the holiday?');
  assert.equal(after.json.assignee.user, server.username);
  await context.close();
});

test('an admin sets a colleague away in the workspace settings, and ends the absence', async () => {
  for (const [username, role] of [['eli', 'approver'], ['fay', 'approver']]) {
    const added = await api(server, 'POST', '/members', { username, password: `pw-${username}-0123456789`, role });
    assert.equal(added.status, 201, JSON.stringify(added.json));
  }
  const asked = await api(server, 'POST', '/questions', {
    kind: 'approval',
    title: 'Renew the TLS certificate of the API?',
    action: { tool_name: 'shell', arguments: { command: 'certbot renew' } },
    assignee: { user: 'eli' },
  });
  assert.equal(asked.status, 201, JSON.stringify(asked.json));

  const context = await browser.newContext({ viewport: { width: 1280, height: 1400 } });
  const page = await context.newPage();
  await signIn(page, server, '/settings/workspace');
  await waitForHydration(page);
  const row = page.getByTestId('member-row').filter({ hasText: 'eli' });
  const toggle = row.getByTestId('member-absence-toggle');
  assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
  await toggle.click();
  await eventually('the row opens', async () => (await toggle.getAttribute('aria-expanded')) === 'true');
  // The form comes with the deferred module, which this page may still be fetching.
  const form = page.getByTestId('member-absence');
  await form.getByText("Who takes eli's questions").waitFor();
  const back = new Date(Date.now() + 2 * 86_400_000);
  const local = `${back.getFullYear()}-${String(back.getMonth() + 1).padStart(2, '0')}-${String(back.getDate()).padStart(2, '0')}T09:00`;
  await form.getByTestId('away-until').fill(local);
  await form.getByTestId('away-delegate').selectOption('fay');
  await form.scrollIntoViewIfNeeded();
  await page.screenshot({ path: resultPath('member-absence-desktop-light.png') });
  await form.getByTestId('away-submit').click();
  await deferAll(page);

  // The table says so, the pending question is Fay's now, and the page confirms.
  await eventually('eli shown away', async () => (await row.getByTestId('member-away').count()) === 1);
  assert.match(await row.getByTestId('member-away').innerText(), /away until .* fay stands in/);
  assert.match(await page.getByTestId('settings-ok').innerText(), /fay takes eli's questions until they are back/);
  assert.equal((await api(server, 'GET', `/questions/${asked.json.id}`)).json.assignee.user, 'fay');
  const changed = (await api(server, 'GET', '/audit?action=absence.changed')).json.items[0];
  assert.equal(changed.after.username, 'eli');
  assert.equal(changed.after.delegate, 'fay');

  // Ended from the same row, once the question handed over (which the live modal brings up again) is withdrawn.
  await api(server, 'POST', `/questions/${asked.json.id}/cancel`, null);
  await eventually('the modal closes', async () => !(await page.getByTestId('live-modal').isVisible()));
  await row.getByTestId('member-absence-toggle').click();
  await page.getByTestId('member-absence').getByTestId('away-end').click();
  await deferAll(page);
  await eventually('the absence ends', async () => (await row.getByTestId('member-away').count()) === 0);
  assert.match(await page.getByTestId('settings-ok').innerText(), /eli is back/);
  await context.close();
});

test('after five approvals of the same call the offer says so, and letting calls through stays a choice', async () => {
  const ask = () => api(server, 'POST', '/questions', {
    kind: 'approval',
    title: 'Run make test?',
    action: { tool_name: 'shell', arguments: { command: 'make test' } },
  });
  const approver = await approverToken('make-test approver');
  for (let n = 0; n < 5; n += 1) {
    const asked = await ask();
    assert.equal(asked.status, 201, JSON.stringify(asked.json));
    assert.equal((await answerAs(approver, asked.json.id, { value: true })).status, 200);
  }
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  const sixth = await ask();
  await showInModal(page, 'Run make test?');
  const modal = page.getByTestId('live-modal');
  const suggestion = modal.getByTestId('modal-grant-suggestion');
  await suggestion.waitFor();
  assert.match(await suggestion.innerText(), /approved by hand 5 times/);
  assert.equal(await modal.getByTestId('modal-grant-chosen').isChecked(), false, 'the offer is not taken for the person');
  await modal.getByTestId('modal-approve').click();
  await eventually('the approval is stored', async () => (await api(server, 'GET', `/questions/${sixth.json.id}`)).json.status === 'answered');
  const grants = (await api(server, 'GET', '/grants')).json.items.filter((g) => g.revoked_at === null || g.revoked_at === undefined);
  assert.ok(grants.every((g) => !JSON.stringify(g).includes('make test')), JSON.stringify(grants));
  await page.close();
});

test('a question not yours to decide says why in place of its form and offers no Claim; its assignee or named approvers get both', async () => {
  const nadia = { username: 'nadia', password: 'pw-nadia-0123456789' };
  const erin = { username: 'erin', password: 'pw-erin-0123456789' };
  for (const person of [nadia, erin]) {
    assert.equal((await api(server, 'POST', '/members', { ...person, role: 'approver' })).status, 201);
  }
  const assigned = await api(server, 'POST', '/questions', { title: 'Nadia, which region first?', assignee: { user: 'nadia' } });
  assert.equal(assigned.status, 201, JSON.stringify(assigned.json));
  const reserved = await api(server, 'POST', '/questions', {
    kind: 'approval', title: 'Ship the hotfix to every region?', required_approvals: 2,
    action: { tool_name: 'shell', arguments: { command: 'deploy --all-regions hotfix-42' } },
    eligible: { users: ['nadia', server.username] },
  });
  assert.equal(reserved.status, 201, JSON.stringify(reserved.json));

  const context = await browser.newContext();
  const asErin = await context.newPage();
  const asNadia = await (await browser.newContext()).newPage();
  await signIn(asErin, server, '/inbox', erin);
  await signIn(asNadia, server, '/inbox', nadia);
  const refusals = [/^This question is assigned to nadia\.$/, new RegExp(`^Only nadia, ${server.username} may decide this approval\\.$`)];
  for (const [i, id] of [assigned.json.id, reserved.json.id].entries()) {
    // Erin is an approver, but neither question is hers to decide: the page says why in place of the answer form,
    // and she sees who holds it but no button to claim it.
    await asErin.goto(`${server.baseUrl}/questions/${id}`);
    await waitForHydration(asErin);
    assert.match(await asErin.getByTestId('answer-refused').textContent(), refusals[i]);
    assert.equal(await asErin.getByTestId('answer-submit').count(), 0);
    await asErin.locator('[data-testid="question-claim"][data-viewer="erin"]').waitFor();
    assert.match(await asErin.getByTestId('question-claim').textContent(), /Nobody is on it/);
    assert.equal(await asErin.getByTestId('question-claim-button').count(), 0, `erin is offered to claim ${id}`);
    // The server agrees.
    const csrf = await asErin.locator('input[name=csrf]').first().inputValue();
    const refused = await context.request.post(`${server.baseUrl}/api/v1/questions/${id}/claim`, {
      data: {}, headers: { 'x-csrf-token': csrf },
    });
    assert.equal(refused.status(), 403);

    // Nadia may decide both: she claims it from its page.
    await asNadia.goto(`${server.baseUrl}/questions/${id}`);
    await waitForHydration(asNadia);
    await asNadia.getByTestId('question-claim-button').click();
    await asNadia.getByTestId('question-claimed-by').waitFor();
    assert.equal(await asNadia.getByTestId('answer-refused').count(), 0, 'her page has the answer form');
    assert.equal((await api(server, 'GET', `/questions/${id}`)).json.claimed_by, 'nadia');
  }
  await asErin.screenshot({ path: resultPath('claim-not-offered.png'), fullPage: true });
  await context.close();
  await asNadia.context().close();
});


test('a question comes up, and is answered from a list, only for whom it allows; the others read why', async () => {
  const oskar = { username: 'oskar', password: 'pw-oskar-0123456789' };
  const pia = { username: 'pia', password: 'pw-pia-0123456789' };
  for (const person of [oskar, pia]) {
    assert.equal((await api(server, 'POST', '/members', { ...person, role: 'approver' })).status, 201);
  }
  const asOskar = await (await browser.newContext()).newPage();
  const asPia = await (await browser.newContext()).newPage();
  await signIn(asOskar, server, '/inbox', oskar);
  await signIn(asPia, server, '/inbox', pia);
  await waitForLive(asOskar);
  await waitForLive(asPia);

  const asked = await api(server, 'POST', '/questions', {
    kind: 'approval', title: 'Rotate the signing key tonight?', urgency: 'high',
    action: { tool_name: 'shell', arguments: { command: 'keys rotate --now' } },
    eligible: { users: ['pia'] },
  });
  assert.equal(asked.status, 201, JSON.stringify(asked.json));
  const id = asked.json.id;

  // Pia may decide it: it comes up in her live modal.
  await asPia.getByTestId('live-modal').waitFor();
  assert.match(await asPia.getByTestId('live-modal').textContent(), /Rotate the signing key tonight\?/);

  // Oskar may not: no modal, and its row in his inbox says why in place of Approve and Reject.
  const row = asOskar.locator(`[data-testid="question-item"][data-question-id="${id}"]`);
  await row.waitFor();
  const refused = row.getByTestId('row-refused');
  assert.equal((await refused.textContent()).trim(), 'Not yours to decide: Only pia may decide this approval.');
  assert.equal(await refused.getAttribute('title'), 'Only pia may decide this approval.', 'the reason on hover');
  assert.equal(await row.getByTestId('row-affirm').count(), 0);
  assert.equal(await row.getByTestId('row-refuse').count(), 0);
  await asOskar.waitForTimeout(500);
  assert.equal(await asOskar.getByTestId('live-modal').count(), 0, 'the modal came up for oskar');
  // The keyboard does not answer it either: the cursor on its row, `y` sends nothing.
  await row.getByTestId('row-urgency').click();
  await asOskar.keyboard.press('y');
  // The split view shows it with the reason in place of its form.
  const detail = asOskar.getByTestId('detail');
  await detail.waitFor();
  assert.equal((await asOskar.getByTestId('detail-refused').textContent()).trim(), 'Only pia may decide this approval.');
  assert.equal(await detail.getByRole('button', { name: 'Approve' }).count(), 0);
  await asOskar.screenshot({ path: resultPath('row-not-yours.png') });
  assert.equal((await api(server, 'GET', `/questions/${id}`)).json.status, 'pending', 'oskar answered it');

  // The approval queue lists it for him without a box to select it, and says why.
  await asOskar.goto(`${server.baseUrl}/approvals`);
  await waitForHydration(asOskar);
  const item = asOskar.locator(`[data-testid="approval-item"][data-question-id="${id}"]`);
  assert.equal((await item.getByTestId('approval-refused').textContent()).trim(), 'Only pia may decide this approval.');
  assert.equal(await item.getByTestId('approval-select').count(), 0);

  // Pia approves it from her modal.
  await asPia.getByTestId('modal-approve').click();
  await eventually('the approval is answered', async () => (await api(server, 'GET', `/questions/${id}`)).json.status === 'answered');
  assert.equal((await api(server, 'GET', `/questions/${id}`)).json.answered_by, 'pia');
  await asOskar.context().close();
  await asPia.context().close();
});

test('a row keeps the focus while its question changes: a claim taken elsewhere leaves the focused Approve focused', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  await signIn(page, server, '/inbox');
  await waitForLive(page);
  const asked = await api(server, 'POST', '/questions', {
    kind: 'approval', title: 'Drop the staging replica?',
    action: { tool_name: 'shell', arguments: { command: 'db replica drop staging-2' } },
  });
  assert.equal(asked.status, 201, JSON.stringify(asked.json));
  const id = asked.json.id;
  const row = page.locator(`[data-testid="question-item"][data-question-id="${id}"]`);
  await row.getByTestId('row-affirm').focus();
  const focused = () => page.evaluate(() => {
    const active = document.activeElement;
    return `${active?.closest('[data-question-id]')?.dataset.questionId}/${active?.dataset.testid}`;
  });
  assert.equal(await focused(), `${id}/row-affirm`);

  // Someone else claims it: the row says so, and the focus stays on its Approve, where the keyboard was.
  const claimed = await fetch(`${server.baseUrl}/api/v1/questions/${id}/claim`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await approverToken('claimer')}`, 'content-type': 'application/json' },
    body: '{}',
  });
  assert.equal(claimed.status, 200, await claimed.text());
  await eventually('the row shows the claim', async () => /claimed by claimer/i.test(await row.textContent()));
  assert.equal(await focused(), `${id}/row-affirm`, 'the focus left the row');
  // An admin may answer over a claim: Enter on the focused Approve does.
  await page.keyboard.press('Enter');
  await eventually('the approval is answered', async () => (await api(server, 'GET', `/questions/${id}`)).json.status === 'answered');
  assert.equal((await api(server, 'GET', `/questions/${id}`)).json.answered_by, server.username);
  await page.close();
});
