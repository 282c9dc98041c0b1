/**
 * AG-UI: run an agent with `@ag-ui/client`; when a run ends with interrupts, people answer them in Holdpoint and the
 * next run goes on with their answers.
 *
 *     export HOLDPOINT_SERVER=http://127.0.0.1:3000 HOLDPOINT_TOKEN=hp_...   # an agent token
 *     node ag-ui-agent.ts &   # the agent (or AG_UI_URL: any agent served over AG-UI's HTTP transport)
 *     node ag-ui.ts
 *
 * Stop it while it waits and start it again: it carries on with the same questions (the interrupted run is kept in
 * ag-ui-run.json). Needs `npm install ./sdk/typescript @ag-ui/client`.
 */

import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';

import { HttpAgent } from '@ag-ui/client';

import { Holdpoint } from 'holdpoint-client';
import { type InterruptedRun, runWithInterrupts } from 'holdpoint-client/ag-ui';

const hp = new Holdpoint(); // HOLDPOINT_SERVER and HOLDPOINT_TOKEN
const saved = 'ag-ui-run.json';
const agent = new HttpAgent({
  url: process.env.AG_UI_URL ?? 'http://127.0.0.1:8000/',
  threadId: process.env.THREAD_ID ?? 'deploy-api-1',
  initialMessages: [{ id: 'user-1', role: 'user', content: 'Deploy the api service to production.' }],
});

const { result } = await runWithInterrupts(hp, agent, {
  project: 'ag-ui-demo',
  // A run stopped while people decided: answer its interrupts (the same questions) instead of running again.
  ...(existsSync(saved) ? { interrupted: JSON.parse(readFileSync(saved, 'utf8')) as InterruptedRun } : {}),
  onInterrupted: (run) => writeFileSync(saved, JSON.stringify(run)),
});
rmSync(saved, { force: true });
console.log(JSON.stringify(result));
