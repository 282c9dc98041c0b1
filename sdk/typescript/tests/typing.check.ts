// Compile-time checks of the public types: this file is type-checked with the suite (`tsc -p tsconfig.test.json`
// fails on any line below that stops holding) and never run. Each `@ts-expect-error` is a mistake the types must
// refuse.

import type { AnswerValue, ApprovalResult, AskResult, HoldpointError, Outcome, UploadedFile } from 'holdpoint-client';
import { Holdpoint } from 'holdpoint-client';
import { holdpointToolApproval, type ToolApprovalMessage } from 'holdpoint-client/ai';
import type { ModelMessage, ToolApprovalConfiguration, ToolSet } from 'ai';
import type * as ai6 from 'ai-v6';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function expectType<T extends true>(): T | undefined {
  return undefined;
}

// The answer's type follows the response type, or the kind's default.
expectType<Equal<AnswerValue<{ title: string }>, string>>();
expectType<Equal<AnswerValue<{ title: string; response_type: 'boolean' }>, boolean>>();
expectType<Equal<AnswerValue<{ title: string; response_type: 'multi_choice' }>, string[]>>();
expectType<Equal<AnswerValue<{ title: string; kind: 'approval' }>, boolean>>();
expectType<Equal<AnswerValue<{ title: string; kind: 'error_recovery' }>, string>>();
expectType<
  Equal<AnswerValue<{ title: string; response_type: 'form' }>, { [key: string]: string | string[] | boolean | number | UploadedFile }>
>();
expectType<Equal<AskResult<number>['value'], number | undefined>>();
expectType<Equal<Outcome, 'pending' | 'answered' | 'defaulted' | 'expired' | 'cancelled'>>();

export async function inference(hp: Holdpoint): Promise<void> {
  const yesNo = await hp.ask({ title: 'Ship?', response_type: 'boolean' });
  expectType<Equal<typeof yesNo.value, boolean | undefined>>();
  const free = await hp.ask({ title: 'Name?' });
  expectType<Equal<typeof free.value, string | undefined>>();
  const approval: ApprovalResult = await hp.approve({ tool_name: 'deploy', arguments: { service: 'api' } });
  expectType<Equal<typeof approval.approved, boolean>>();

  // @ts-expect-error: a response type the API does not have
  await hp.ask({ title: 'x', response_type: 'date' });
  // @ts-expect-error: `title` is required
  await hp.ask({ response_type: 'text' });
  // @ts-expect-error: a default is an answer body, not a bare value
  await hp.ask({ title: 'x', default_response: 'eu-west' });
  // @ts-expect-error: an approval's arguments are a JSON object
  await hp.approve({ tool_name: 'deploy', arguments: 'api' });

  try {
    await hp.getQuestion('id');
  } catch (error) {
    const code: HoldpointError['code'] | undefined = (error as HoldpointError).code;
    expectType<Equal<typeof code extends string | undefined ? true : false, true>>();
  }
}

// The adapter's message appends to the conversation of either AI SDK major, and its approval function is a
// `toolApproval` setting of AI SDK 7.
export function adapterFits(hp: Holdpoint, message: ToolApprovalMessage): void {
  const v7: ModelMessage[] = [];
  v7.push(message);
  const v6: ai6.ModelMessage[] = [];
  v6.push(message);
  const setting: ToolApprovalConfiguration<ToolSet, unknown> = holdpointToolApproval(hp, { tools: ['deploy'] });
  void setting;
}
