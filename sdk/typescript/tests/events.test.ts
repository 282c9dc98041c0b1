// events(): the event stream parsed by the library, resumed with Last-Event-ID after the connection drops, losing
// nothing and repeating nothing.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Holdpoint, type HoldpointEvent } from 'holdpoint-client';

import { Proxy } from './proxy.js';
import { QUICK_RETRY, type TestServer, agentClient, eventually, freshProject, personClient, startServer } from './harness.js';

let server: TestServer;
let person: Holdpoint;

before(async () => {
  server = await startServer();
  person = personClient(server);
});

after(async () => {
  await server?.stop();
});

/** Reads a stream in the background and keeps every event, until stopped. */
class Collector {
  readonly events: HoldpointEvent[] = [];
  error: unknown;
  readonly #controller = new AbortController();
  readonly #done: Promise<void>;

  constructor(client: Holdpoint, options: { project: string; lastEventId?: number }) {
    const stream = client.events({ ...options, signal: this.#controller.signal });
    this.#done = (async () => {
      try {
        for await (const event of stream) this.events.push(event);
      } catch (error) {
        if (!this.#controller.signal.aborted) this.error = error;
      }
    })();
  }

  titles(type: string): string[] {
    return this.events.filter((e) => e.type === type).map((e) => e.question?.title ?? '?');
  }

  async stop(): Promise<void> {
    this.#controller.abort();
    await this.#done;
  }
}

test('a dropped stream resumes with Last-Event-ID and loses nothing', async () => {
  const proxy = await Proxy.start(server.url);
  const project = freshProject();
  const hp = await agentClient(server);
  const watcher = new Holdpoint({ url: proxy.url, token: server.adminToken, retry: QUICK_RETRY });
  const collector = new Collector(watcher, { project, lastEventId: 0 });
  try {
    const first = await hp.createQuestion({ title: 'first', project });
    await eventually('the first event', () => collector.titles('question_asked').length === 1);
    const lastSeen = collector.events.at(-1)?.id;
    assert.ok(lastSeen !== undefined && lastSeen > 0);

    proxy.unreachable = true;
    proxy.cut();
    await hp.createQuestion({ title: 'second', project });
    await hp.createQuestion({ title: 'third', project });
    await person.answer(first.id, { value: 'done' });
    // Long enough for several reconnection attempts to fail against the unreachable server.
    await new Promise((resolve) => setTimeout(resolve, 300));
    proxy.unreachable = false;

    await eventually('the missed events', () => collector.events.length === 4);
    assert.deepEqual(collector.titles('question_asked'), ['first', 'second', 'third']);
    assert.deepEqual(collector.titles('question_answered'), ['first']);
    const ids = collector.events.map((e) => e.id);
    assert.deepEqual(ids, [...new Set(ids)].sort((a, b) => a - b), 'in order, without duplicates');
    assert.match(proxy.sentText(), new RegExp(`last-event-id: ${lastSeen}\\r\\n`, 'i'));

    const answered = collector.events.at(-1)?.question;
    assert.equal(answered?.status, 'answered');
    assert.equal(answered?.response?.value, 'done');
    assert.equal(collector.error, undefined);
  } finally {
    await collector.stop();
    await proxy.close();
  }
});

test('a stream dropped before its first event resumes where it started', async () => {
  const proxy = await Proxy.start(server.url);
  const project = freshProject();
  const hp = await agentClient(server);
  const watcher = new Holdpoint({ url: proxy.url, token: server.adminToken, retry: QUICK_RETRY });
  const collector = new Collector(watcher, { project });
  try {
    // The server tells a stream without a last event id where it starts: an `id:` without data.
    const position = () => /\nid: (\d+)\n\n/.exec(proxy.receivedText())?.[1];
    await eventually("the stream's position", () => position() !== undefined);
    const start = position();
    proxy.unreachable = true;
    proxy.cut();
    await hp.createQuestion({ title: 'asked while the stream was down', project });
    await new Promise((resolve) => setTimeout(resolve, 300));
    proxy.unreachable = false;

    await eventually('the missed event', () => collector.events.length === 1);
    assert.deepEqual(collector.titles('question_asked'), ['asked while the stream was down']);
    assert.match(proxy.sentText(), new RegExp(`last-event-id: ${start}\\r\\n`, 'i'));
    assert.equal(collector.error, undefined);
  } finally {
    await collector.stop();
    await proxy.close();
  }
});

test('a stream started after a known event replays only what came after it', async () => {
  const project = freshProject();
  const hp = await agentClient(server);
  await hp.createQuestion({ title: 'before', project });
  await hp.createQuestion({ title: 'after', project });
  const everything = person.events({ project, lastEventId: 0 });
  const before = (await everything.next()).value;
  const afterIt = (await everything.next()).value;
  await everything.return();
  assert.ok(before && afterIt);
  assert.deepEqual([before.question?.title, afterIt.question?.title], ['before', 'after']);
  const resumed = person.events({ project, lastEventId: before.id });
  const replayed = (await resumed.next()).value;
  await resumed.return();
  assert.equal(replayed?.id, afterIt.id);
  assert.equal(replayed?.type, 'question_asked');
});

/** Resolves once `collector`'s stream is open: nothing says so but an event arriving, so markers are asked until
 * one does. */
async function untilOpen(collector: Collector, hp: Holdpoint, project: string): Promise<void> {
  for (let marker = 0; collector.events.length === 0; marker++) {
    assert.ok(marker < 100, 'the stream never opened');
    await hp.createQuestion({ title: `marker ${marker}`, project });
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test('without a last event id the stream starts with what happens from now on, and filters by project', async () => {
  const project = freshProject();
  const hp = await agentClient(server);
  // The server fans events out a moment after they are stored: once an open stream has 'old news', every stream
  // opened later starts after it.
  const earlier = new Collector(person, { project });
  try {
    await untilOpen(earlier, hp, project);
    await hp.createQuestion({ title: 'old news', project });
    await eventually('old news, on the stream opened before it', () => earlier.titles('question_asked').includes('old news'));
    const later = new Collector(person, { project });
    try {
      await untilOpen(later, hp, project);
      await hp.createQuestion({ title: 'elsewhere', project: freshProject() });
      await hp.createQuestion({ title: 'fresh', project });
      await eventually('the fresh question', () => later.titles('question_asked').includes('fresh'));
      const titles = later.titles('question_asked');
      assert.ok(!titles.includes('old news'), `no replay without a last event id: ${titles}`);
      assert.ok(!titles.includes('elsewhere'), `another project's question: ${titles}`);
      assert.ok(titles.every((title) => title.startsWith('marker ') || title === 'fresh'), `${titles}`);
    } finally {
      await later.stop();
    }
  } finally {
    await earlier.stop();
  }
});

test('an agent token sees the events of its own questions only', async () => {
  const project = freshProject();
  const mine = await agentClient(server);
  const theirs = await agentClient(server);
  const collector = new Collector(mine, { project, lastEventId: 0 });
  try {
    await theirs.createQuestion({ title: 'not mine', project });
    await mine.createQuestion({ title: 'mine', project });
    await eventually('my question', () => collector.events.length >= 1);
    // Replayed in the log's order: had the other agent's question come through, it would have come first.
    assert.deepEqual(collector.titles('question_asked'), ['mine']);
  } finally {
    await collector.stop();
  }
});

test("the caller's AbortSignal ends the iteration with its reason", async () => {
  const controller = new AbortController();
  const reason = new Error('done watching');
  const stream = person.events({ signal: controller.signal });
  setTimeout(() => controller.abort(reason), 100);
  await assert.rejects(
    (async () => {
      for await (const _ of stream) {
        // Nothing happens in this stream's time.
      }
    })(),
    (error: unknown) => error === reason,
  );
});
