// The real `holdpoint serve` for a test file: a free loopback port, a fresh SQLite database in a temporary
// directory, the bootstrap admin token (the person who answers) and, per test, an `agent` token (the agent that
// asks). The binary comes from HOLDPOINT_BIN (`cargo xtask test` sets it to target/debug/holdpoint).

import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Holdpoint, type Question, type RetryPolicy } from 'holdpoint-client';

const STARTUP_MS = 30_000;
/** The examples, compiled beside the tests. */
const COMPILED_EXAMPLES = fileURLToPath(new URL('../examples/', import.meta.url));

export interface TestServer {
  url: string;
  /** The bootstrap admin token: a person's client answers with it. */
  adminToken: string;
  /** What the server printed, for a failing test's message. */
  log: string[];
  /** A token the bootstrap token makes: a service identity, never one of a quorum's people. */
  createToken(role: 'agent' | 'viewer' | 'responder' | 'approver' | 'admin'): Promise<string>;
  /**
   * A new person (an admin account) and a token they made themselves with `role`: it counts as them, as a quorum
   * of people needs. Made as a person makes one: signed in, through the API with the session's CSRF token.
   */
  personToken(role: 'viewer' | 'responder' | 'approver' | 'admin'): Promise<{ username: string; token: string }>;
  /** A raw API call, as a tool outside the library makes it. */
  api(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; json: any }>;
  stop(): Promise<void>;
}

/** Starts `holdpoint serve`; resolves once it prints the address it listens on. */
export async function startServer(env: Record<string, string> = {}): Promise<TestServer> {
  const binary = process.env['HOLDPOINT_BIN'];
  if (!binary) throw new Error('HOLDPOINT_BIN is not set: run the suite with `cargo xtask test`, or point it at a holdpoint build');
  const dataDir = mkdtempSync(join(tmpdir(), 'holdpoint-sdk-ts-'));
  const adminToken = `hp_sdk_ts_${randomBytes(16).toString('hex')}`;
  // The test's own SQLite file, whatever DATABASE_URL the surrounding shell has.
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const child = spawn(binary, ['serve'], {
    env: {
      ...inherited,
      HOLDPOINT_ADDR: '127.0.0.1:0',
      HOLDPOINT_DATA_DIR: dataDir,
      HOLDPOINT_BOOTSTRAP_TOKEN: adminToken,
      // Lets tests ask questions that expire or default within a second.
      HOLDPOINT_MIN_TIMEOUT_SECONDS: '1',
      RUST_LOG: process.env['RUST_LOG'] ?? 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // A test process that dies never leaves its server behind.
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const log: string[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`holdpoint did not start within ${STARTUP_MS} ms:\n${log.join('')}`)), STARTUP_MS);
    let output = '';
    const read = (chunk: Buffer): void => {
      const text = chunk.toString();
      log.push(text);
      output += text;
      const match = output.match(/listening on (http:\/\/\S+)/);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    // Read both to the end, so a chatty server never blocks on a full pipe.
    child.stdout?.on('data', read);
    child.stderr?.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`holdpoint exited early with ${code}:\n${log.join('')}`));
    });
  });

  const api: TestServer['api'] = async (method, path, body, token) => {
    const init: RequestInit = { method, headers: { authorization: `Bearer ${token ?? adminToken}`, 'content-type': 'application/json' } };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await fetch(`${url}/api/v1${path}`, init);
    const text = await response.text();
    return { status: response.status, json: text ? JSON.parse(text) : null };
  };

  return {
    url,
    adminToken,
    log,
    api,
    async createToken(role) {
      const created = await api('POST', '/tokens', { name: `${role}-${randomUUID().slice(0, 8)}`, role });
      if (created.status !== 201) throw new Error(`creating a ${role} token failed: ${created.status} ${JSON.stringify(created.json)}`);
      return created.json.secret as string;
    },
    async personToken(role) {
      const username = `p${randomUUID().replaceAll('-', '').slice(0, 10)}`;
      const password = randomBytes(16).toString('hex');
      const added = await api('POST', '/members', { username, password, role: 'admin' });
      if (added.status !== 201) throw new Error(`adding ${username} failed: ${added.status} ${JSON.stringify(added.json)}`);
      const signedIn = await fetch(`${url}/auth/signin`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
        body: new URLSearchParams({ username, password }).toString(),
      });
      const cookie = signedIn.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
      if (!cookie) throw new Error(`signing in as ${username} set no cookie: ${signedIn.status}`);
      const page = await (await fetch(`${url}/settings`, { headers: { cookie } })).text();
      const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
      if (!csrf) throw new Error("the signed-in page carries no CSRF token");
      const made = await fetch(`${url}/api/v1/tokens`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', cookie, 'x-csrf-token': csrf },
        body: JSON.stringify({ name: `${username}-${role}`, role }),
      });
      const body = (await made.json()) as { secret?: string };
      if (made.status !== 201 || !body.secret) throw new Error(`${username} could not make a token: ${made.status}`);
      return { username, token: body.secret };
    },
    async stop() {
      process.removeListener('exit', killOnExit);
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(killer);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Quick retries, so tests of reconnection and retry do not wait for the production backoff. */
export const QUICK_RETRY: RetryPolicy = { maxRetries: 5, initialDelayMs: 20, maxDelayMs: 200 };

/** The agent's client (asks, never answers), with a token of its own. */
export async function agentClient(server: TestServer, retry: Partial<RetryPolicy> = QUICK_RETRY): Promise<Holdpoint> {
  return new Holdpoint({ url: server.url, token: await server.createToken('agent'), retry });
}

/** A person's client (the admin token): answers, approves, cancels. */
export function personClient(server: TestServer): Holdpoint {
  return new Holdpoint({ url: server.url, token: server.adminToken, retry: QUICK_RETRY });
}

/** A project of the test's own, so lists and event streams see only that test's questions. */
export function freshProject(): string {
  return `sdk-ts-${randomUUID().slice(0, 12)}`;
}

/** Polls `check` until it returns something, or fails after `ms`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined> | T | undefined, ms = 15_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > until) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The next pending question of `project`, as a person's inbox shows it. */
export async function nextPending(person: Holdpoint, project: string): Promise<Question> {
  return eventually(`a pending question in ${project}`, async () => {
    const page = await person.listQuestions({ project, status: 'pending', sort: 'created_desc' });
    return page.items.at(-1);
  });
}

/** Every pending question of `project` once there are `count` of them, oldest first. */
export async function pendingQuestions(person: Holdpoint, project: string, count: number): Promise<Question[]> {
  return eventually(`${count} pending questions in ${project}`, async () => {
    const page = await person.listQuestions({ project, status: 'pending' });
    return page.items.length >= count ? page.items.reverse() : undefined;
  });
}

/** An example running as a node process of its own, as an agent would be run. */
export class ExampleProcess {
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<number | null>;
  readonly #child: ChildProcess;

  constructor(name: string, cwd: string, env: Record<string, string>) {
    this.#child = spawn(process.execPath, [join(COMPILED_EXAMPLES, `${name}.js`)], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child.stdout?.on('data', (chunk: Buffer) => this.stdout.push(chunk.toString()));
    this.#child.stderr?.on('data', (chunk: Buffer) => this.stderr.push(chunk.toString()));
    this.exited = new Promise((resolve) => this.#child.once('exit', (code) => resolve(code)));
  }

  /** Resolves with the exit code, or fails after `ms` (and kills the process). */
  async finish(ms = 60_000): Promise<number | null> {
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), ms);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }

  kill(): Promise<number | null> {
    this.#child.kill('SIGKILL');
    return this.exited;
  }

  output(): string {
    return `stdout:\n${this.stdout.join('')}\nstderr:\n${this.stderr.join('')}`;
  }
}
