// Settings → Gateway in the browser: an admin registers two upstream MCP servers through the form — one a real MCP
// server (the official TypeScript SDK's, on loopback), one whose port nobody listens on — and an agent lists the
// gateway's tools. The page then shows the first answering and the second failing with its error, and a refused name
// keeps what was typed. Removing an upstream takes it off the page and the API. A person who is no admin is told
// that only admins manage upstreams.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { startServer, launchBrowser, api, signIn, waitForHydration, resultPath } from './harness.mjs';

let server;
let browser;
let upstream;

/// A stateless MCP server with one tool, on a loopback port of its own.
async function startUpstream() {
  const http = createServer(async (req, res) => {
    const mcp = new McpServer({ name: 'e2e-upstream', version: '1.0.0' });
    mcp.registerTool('read_file', { description: 'Reads a file', inputSchema: {} }, async () => ({
      content: [{ type: 'text', text: 'contents' }],
    }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      transport.close();
      mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise((resolve) => http.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${http.address().port}/mcp`, close: () => http.close() };
}

/// A loopback port nobody listens on: bound, read, then released.
async function closedPort() {
  const probe = createServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

before(async () => {
  // The upstreams are on loopback, which the outbound guard refuses unless the server allows it.
  server = await startServer({ env: { HOLDPOINT_UPSTREAM_ALLOW_PRIVATE: 'true' } });
  browser = await launchBrowser();
  upstream = await startUpstream();
});

after(async () => {
  await browser?.close();
  await server?.stop();
  upstream?.close();
});

async function gatewayTools(token) {
  const client = new Client({ name: 'holdpoint-e2e-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.baseUrl}/mcp/gateway`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  const { tools } = await client.listTools();
  await client.close();
  return tools.map((tool) => tool.name);
}

test('an admin adds upstreams and sees which answer and which fail; others are told only admins manage them', async () => {
  const page = await browser.newPage({ viewport: { width: 1200, height: 1200 } });
  await signIn(page, server, '/settings/gateway');
  await waitForHydration(page);
  assert.equal(await page.getByTestId('settings-tab-gateway').getAttribute('aria-current'), 'page');
  await page.getByTestId('upstream-empty').waitFor();

  // The browser checks the name as the server does: its pattern compiles as a `v`-mode expression (the mode a
  // `pattern` attribute is compiled in), and refuses what the server refuses.
  const name = page.getByTestId('upstream-name');
  await name.fill('Files Server');
  assert.equal(await name.evaluate((input) => input.validity.patternMismatch), true);
  await name.fill('files-2');
  assert.equal(await name.evaluate((input) => input.validity.valid), true);

  // A name the API refuses: the error shows, nothing is stored, and what was typed stays to be corrected.
  await page.getByTestId('upstream-name').fill('Files Server');
  await page.getByTestId('upstream-url').fill(upstream.url);
  // The browser's own check of the pattern would stop the submit before the server sees it: lift it to reach it.
  await page.getByTestId('upstream-name').evaluate((input) => input.removeAttribute('pattern'));
  await page.getByTestId('upstream-add').click();
  await page.getByTestId('upstream-error').waitFor();
  assert.match(await page.getByTestId('upstream-error').textContent(), /name/);
  assert.equal(await page.getByTestId('upstream-name').inputValue(), 'Files Server');
  assert.deepEqual((await api(server, 'GET', '/upstreams')).json.items, []);

  await page.getByTestId('upstream-name').fill('files');
  await page.getByTestId('upstream-headers').fill('X-Api-Key: s3cret');
  await page.getByTestId('upstream-add').click();
  await page.locator('[data-testid="upstream-row"][data-name="files"]').waitFor();
  assert.match(await page.getByTestId('upstream-ok').textContent(), /files__<tool>/);

  await page.getByTestId('upstream-name').fill('down');
  await page.getByTestId('upstream-url').fill(`http://127.0.0.1:${await closedPort()}/mcp`);
  await page.getByTestId('upstream-add').click();
  await page.locator('[data-testid="upstream-row"][data-name="down"]').waitFor();

  // An agent lists the gateway's tools: the answering upstream's are there, the one that is down hides nothing.
  const agent = await api(server, 'POST', '/tokens', { name: 'gateway agent', role: 'agent' });
  assert.equal(agent.status, 201, JSON.stringify(agent.json));
  assert.deepEqual(await gatewayTools(agent.json.secret), ['files__read_file']);

  // The page read again shows each upstream's health as the gateway found it.
  await page.reload();
  await waitForHydration(page);
  const files = page.locator('[data-testid="upstream-row"][data-name="files"]');
  const down = page.locator('[data-testid="upstream-row"][data-name="down"]');
  assert.equal(await files.getByTestId('upstream-state').textContent(), 'answering');
  assert.notEqual(await files.getByTestId('upstream-last-success').textContent(), 'never');
  assert.equal(await down.getByTestId('upstream-state').textContent(), 'failing');
  assert.match(await down.getByTestId('upstream-last-error').textContent(), /connect|refused|reach/i);
  // The header's name is shown, never its value.
  assert.match(await files.textContent(), /X-Api-Key|x-api-key/);
  assert.doesNotMatch(await page.content(), /s3cret/);
  await page.screenshot({ path: resultPath('settings-gateway.png'), fullPage: true });

  // Remove asks again; Cancel keeps it.
  await down.getByTestId('upstream-remove').click();
  assert.match(await down.getByTestId('upstream-remove-confirm').textContent(), /Remove down\?/);
  await down.getByTestId('upstream-remove-cancel').click();
  assert.equal((await api(server, 'GET', '/upstreams')).json.items.length, 2, 'nothing removed');
  await down.getByTestId('upstream-remove').click();
  await down.getByTestId('upstream-remove-yes').click();
  await down.waitFor({ state: 'detached' });
  assert.deepEqual((await api(server, 'GET', '/upstreams')).json.items.map((u) => u.name), ['files']);
  await page.close();

  // A responder is told that only admins manage upstreams, and sees none of them.
  const person = { username: 'rita', password: 'correct horse battery staple' };
  const member = await api(server, 'POST', '/members', { ...person, role: 'responder' });
  assert.equal(member.status, 201, JSON.stringify(member.json));
  const other = await browser.newPage();
  await signIn(other, server, '/settings/gateway', person);
  await other.getByTestId('gateway-admins-only').waitFor();
  assert.equal(await other.getByTestId('upstream-table').count(), 0);
  await other.close();
});
