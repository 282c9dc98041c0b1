/**
 * Plain TypeScript: ask a person, then gate a risky call on their approval.
 *
 *     export HOLDPOINT_SERVER=http://127.0.0.1:3000 HOLDPOINT_TOKEN=hp_...   # an agent token
 *     node quickstart.ts   # Node 22.18 or newer runs TypeScript as it is; on Node 20: npx tsx quickstart.ts
 *
 * Answer the questions at http://127.0.0.1:3000/inbox as they arrive.
 */

import { Holdpoint } from 'holdpoint-client';

const hp = new Holdpoint(); // HOLDPOINT_SERVER and HOLDPOINT_TOKEN

const region = await hp.ask({
  title: 'Which region should the new cluster go to?',
  response_type: 'choice',
  options: ['eu-west', 'us-east'],
  project: 'quickstart',
  timeout_seconds: 600,
  default_response: { value: 'eu-west' },
});
console.log(`region: ${region.value} (${region.outcome})`); // answered, or defaulted after 10 minutes

const approval = await hp.approve({
  tool_name: 'create_cluster',
  arguments: { region: region.value ?? 'eu-west', nodes: 3 },
  allow_edit: true, // the approver may change the arguments
  project: 'quickstart',
});
if (approval.approved) {
  console.log(`creating the cluster with ${JSON.stringify(approval.arguments)}`);
} else {
  console.log(`not creating it: ${approval.reason}`); // a person's "no", or nobody deciding in time
}
