// The downloads of `cargo xtask dist`, as `cargo xtask test` packs its own build (HOLDPOINT_DIST_TARBALL,
// HOLDPOINT_DIST_DEB): the tarball unpacked into an empty directory runs with nothing beside it and its pages hydrate
// from the site built into the binary; the Debian package holds the binary, the unit and the configuration, and its
// unit passes systemd's checks.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchBrowser, waitForHydration } from './harness.mjs';

const tarball = process.env.HOLDPOINT_DIST_TARBALL;
const deb = process.env.HOLDPOINT_DIST_DEB;
const skipped = (variable) => (process.env[variable] ? false : `${variable} is not set: \`cargo xtask test\` packs them`);

/** `holdpoint serve` from `directory`, in another empty working directory, without HOLDPOINT_SITE_ROOT; resolves
 * with its address and the one-time sign-in link it prints on a first start. */
async function serveUnpacked(binary) {
  const workdir = mkdtempSync(join(tmpdir(), 'holdpoint-dist-cwd-'));
  const { HOLDPOINT_SITE_ROOT: _site, DATABASE_URL: _database, HOLDPOINT_BOOTSTRAP_TOKEN: _token, ...env } = process.env;
  // As the README says to: `./holdpoint serve`, its data in ./data of the working directory.
  const child = spawn(binary, ['serve', '--addr', '127.0.0.1:0'], {
    cwd: workdir,
    env: { ...env, RUST_LOG: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const started = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server printed no sign-in link within 30 s:\n${stderr}`)), 30_000);
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
      const link = output.match(/(http:\/\/\S+\/signin\?code=\S+)/);
      if (link) {
        clearTimeout(timer);
        resolve({ baseUrl: output.match(/listening on (http:\/\/\S+)/)[1], link: link[1] });
      }
    });
    child.on('exit', (code) => reject(new Error(`the server exited early with ${code}:\n${stderr}`)));
  });
  return {
    ...started,
    workdir,
    stderr: () => stderr,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
      rmSync(workdir, { recursive: true, force: true });
    },
  };
}

describe('the tarball', { skip: skipped('HOLDPOINT_DIST_TARBALL') }, () => {
  let unpacked;
  let server;
  let browser;

  before(async () => {
    unpacked = mkdtempSync(join(tmpdir(), 'holdpoint-dist-'));
    execFileSync('tar', ['--extract', '--file', tarball, '--directory', unpacked]);
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    if (unpacked) rmSync(unpacked, { recursive: true, force: true });
  });

  test('holds one directory named after the version and target, with the binary and what goes with it', () => {
    const entries = readdirSync(unpacked);
    assert.equal(entries.length, 1, `one top directory, not ${entries}`);
    assert.match(entries[0], /^holdpoint-\d+\.\d+\.\d+\S*-(x86_64|aarch64|i686|armv7|riscv64gc)-\S+$/);
    assert.equal(`${entries[0]}.tar.gz`, tarball.split('/').pop());
    const files = readdirSync(join(unpacked, entries[0])).sort();
    assert.deepEqual(files, ['LICENSE', 'README.md', 'holdpoint', 'holdpoint.service', 'holdpoint.toml.example']);
    assert.match(readFileSync(join(unpacked, entries[0], 'LICENSE'), 'utf8'), /Apache License\s+Version 2\.0/);
  });

  test('the binary names its version and commit', () => {
    const [top] = readdirSync(unpacked);
    const version = execFileSync(join(unpacked, top, 'holdpoint'), ['--version'], { encoding: 'utf8' }).trim();
    const expected = top.match(/^holdpoint-(\d+\.\d+\.\d+\S*?)-(x86_64|aarch64|i686|armv7|riscv64gc)-/)[1];
    // `holdpoint 0.1.0 (abc1234)`; a build outside a git checkout has no commit to name.
    assert.match(version, new RegExp(`^holdpoint ${expected.replaceAll('.', '\\.')}( \\([0-9a-f]{7,}\\))?$`));
    const inCheckout = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' });
    if (inCheckout.status === 0) assert.ok(version.includes('('), `${version} names no commit`);
  });

  test('every key of the example configuration is a flag of `holdpoint serve`', () => {
    const [top] = readdirSync(unpacked);
    const help = execFileSync(join(unpacked, top, 'holdpoint'), ['serve', '--help'], { encoding: 'utf8' });
    const whole = readFileSync(join(unpacked, top, 'holdpoint.toml.example'), 'utf8');
    // The gateway's process upstreams are a table of their own, whose keys are no flags: the rest of the file is.
    const [example, upstreams = ''] = whole.split(/^# ?\[\[gateway\.upstreams\]\]$/m);
    const keys = [...example.matchAll(/^#? ?([a-z_]+) = /gm)].map((match) => match[1]);
    assert.ok(keys.length >= 5, `the example shows settings: ${keys}`);
    const upstreamKeys = [...upstreams.matchAll(/^#? ?([a-z_]+) = /gm)].map((match) => match[1]);
    for (const key of upstreamKeys) {
      assert.ok(['workspace', 'name', 'command', 'args', 'env', 'cwd'].includes(key), `${key} is no upstream key`);
    }
    for (const key of keys) {
      const flag = new RegExp(`--${key.replaceAll('_', '-')}(\\s|$)`, 'm');
      assert.match(help, flag, `${key} is no flag of \`holdpoint serve\``);
    }
  });

  test('run from an empty directory, it serves pages that hydrate from the site built into it', async () => {
    const [top] = readdirSync(unpacked);
    server = await serveUnpacked(join(unpacked, top, 'holdpoint'));
    assert.doesNotMatch(server.stderr(), /built site is missing/);
    browser = await launchBrowser();
    const page = await browser.newPage();
    const site = [];
    page.on('response', (response) => {
      if (new URL(response.url()).pathname.startsWith('/pkg/')) site.push(response);
    });
    // The README's first steps: open the printed link, sign in as the admin, land in the inbox.
    await page.goto(server.link);
    await page.getByTestId('signin-link-submit').click();
    await page.waitForURL((url) => url.pathname === '/inbox');
    await waitForHydration(page);

    const wasm = site.find((response) => response.url().endsWith('/pkg/holdpoint_bg.wasm'));
    assert.ok(wasm, `the main wasm module was fetched: ${site.map((r) => r.url())}`);
    assert.equal(wasm.status(), 200);
    const headers = await wasm.allHeaders();
    assert.equal(headers['content-type'], 'application/wasm');
    assert.equal(headers['content-encoding'], 'gzip');
    assert.equal(headers['cache-control'], 'no-cache', 'the site is kept but revalidated; pages are no-store');
    assert.ok(headers.etag, 'embedded files carry an ETag');
    const script = site.find((response) => response.url().endsWith('/pkg/holdpoint.js'));
    assert.match((await script.allHeaders())['content-type'], /javascript/);
    // The inbox's own code is a lazy module of the split site, served from the binary too.
    const lazy = site.find((response) => /\/pkg\/split___inbox_route_view_[^/]*\.wasm$/.test(response.url()));
    assert.ok(lazy, `the inbox's lazy module was fetched: ${site.map((r) => r.url())}`);
    assert.equal(lazy.status(), 200);
    assert.ok(existsSync(join(server.workdir, 'data', 'holdpoint.db')), 'the data went to ./data');
  });
});

describe('the Debian package', { skip: skipped('HOLDPOINT_DIST_DEB') }, () => {
  let root;

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'holdpoint-deb-'));
    execFileSync('dpkg-deb', ['--extract', deb, root]);
  });

  after(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });

  test('is named after the version and architecture', () => {
    const arch = execFileSync('dpkg-deb', ['--field', deb, 'Architecture'], { encoding: 'utf8' }).trim();
    const version = execFileSync('dpkg-deb', ['--field', deb, 'Version'], { encoding: 'utf8' }).trim();
    assert.match(version, /^\d+\.\d+\.\d+\S*-1$/);
    assert.equal(deb.split('/').pop(), `holdpoint_${version}_${arch}.deb`);
  });

  test('holds the binary, the unit and the configuration, which is a conffile', () => {
    const contents = execFileSync('dpkg-deb', ['--contents', deb], { encoding: 'utf8' });
    const entry = (path) => contents.split('\n').find((line) => line.endsWith(` .${path}`));
    assert.match(entry('/usr/bin/holdpoint') ?? '', /^-rwxr-xr-x root\/root /);
    assert.match(entry('/usr/lib/systemd/system/holdpoint.service') ?? '', /^-rw-r--r-- root\/root /);
    assert.match(entry('/etc/holdpoint/holdpoint.toml') ?? '', /^-rw-r--r-- root\/root /);
    assert.ok(entry('/usr/share/doc/holdpoint/copyright'), contents);
    const conffiles = spawnSync('dpkg-deb', ['--info', deb, 'conffiles'], { encoding: 'utf8' });
    assert.equal(conffiles.stdout.trim(), '/etc/holdpoint/holdpoint.toml');
    const info = execFileSync('dpkg-deb', ['--info', deb], { encoding: 'utf8' });
    for (const script of ['postinst', 'prerm', 'postrm']) assert.match(info, new RegExp(`\\d+ bytes,\\s+\\d+ lines\\s+\\*\\s+${script}`));
    assert.match(info, /Depends: .*adduser/);
  });

  test('its unit runs `holdpoint serve` as the user holdpoint in /var/lib/holdpoint, hardened', () => {
    const unit = readFileSync(join(root, 'usr/lib/systemd/system/holdpoint.service'), 'utf8');
    for (const line of [
      'ExecStart=/usr/bin/holdpoint serve',
      'User=holdpoint',
      'StateDirectory=holdpoint',
      'Environment=HOLDPOINT_DATA_DIR=/var/lib/holdpoint',
      'NoNewPrivileges=yes',
      'ProtectSystem=strict',
      'ProtectHome=yes',
      'PrivateTmp=yes',
      'PrivateDevices=yes',
      'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX',
    ]) {
      assert.ok(unit.split('\n').includes(line), `the unit has ${line}`);
    }
    // The gateway's configured upstreams are the unit's child processes, often Node.js, whose JIT needs memory both
    // writable and executable.
    assert.doesNotMatch(unit, /^MemoryDenyWriteExecute=yes/m);
  });

  test("an administrator's commands find the database the service uses", () => {
    // The unit's environment names the data directory for the service; the settings file must name the same one,
    // or `holdpoint backup` run by hand would look in ./data.
    const unit = readFileSync(join(root, 'usr/lib/systemd/system/holdpoint.service'), 'utf8');
    assert.match(unit, /^Environment=HOLDPOINT_DATA_DIR=\/var\/lib\/holdpoint$/m);
    const binary = join(root, 'usr/bin/holdpoint');
    const settings = join(root, 'etc/holdpoint/holdpoint.toml');
    const scratch = mkdtempSync(join(tmpdir(), 'holdpoint-admin-'));
    try {
      const check = spawnSync(binary, ['config', 'check', '--config', settings], { encoding: 'utf8', cwd: scratch });
      assert.match(check.stdout, /^data_dir = "\/var\/lib\/holdpoint"  # file$/m, check.stdout + check.stderr);
      const backup = spawnSync(binary, ['backup', '--to', join(scratch, 'copy.db'), '--config', settings], {
        encoding: 'utf8',
        cwd: scratch,
      });
      assert.match(backup.stderr, /\/var\/lib\/holdpoint\/holdpoint\.db/, backup.stderr);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  test('its unit passes `systemd-analyze verify`', (t) => {
    const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
    if (analyze.status !== 0) {
      t.skip('systemd-analyze is not installed here');
      return;
    }
    // The unit as installed, its ExecStart pointed at the unpacked binary (verify checks that it is executable).
    const dir = mkdtempSync(join(tmpdir(), 'holdpoint-unit-'));
    try {
      const unit = readFileSync(join(root, 'usr/lib/systemd/system/holdpoint.service'), 'utf8');
      writeFileSync(join(dir, 'holdpoint.service'), unit.replace('/usr/bin/holdpoint', join(root, 'usr/bin/holdpoint')));
      const verify = spawnSync('systemd-analyze', ['verify', '--man=no', join(dir, 'holdpoint.service')], {
        encoding: 'utf8',
        env: { ...process.env, SYSTEMD_LOG_LEVEL: 'warning' },
      });
      const output = `${verify.stdout}${verify.stderr}`;
      assert.equal(verify.status, 0, output);
      assert.doesNotMatch(output, /holdpoint\.service/, 'no warning about the unit');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('its binary runs from where the package puts it', () => {
    const version = execFileSync(join(root, 'usr/bin/holdpoint'), ['--version'], { encoding: 'utf8' }).trim();
    assert.match(version, /^holdpoint \d+\.\d+\.\d+\S*( \([0-9a-f]{7,}\))?$/);
  });
});
