// A real OpenID Connect provider (panva's `oidc-provider` 9.x) on loopback over plain http, in this process or as
// one of its own, for browser tests of Holdpoint's single sign-on.
//
// Interactions: our own minimal handler (NOT oidc-provider's devInteractions),
// because the dev pages pull fonts from the internet and have no test ids.
//   GET  /interaction/:uid  -> login form: input[name=login]
//        (data-testid="oidc-login"), input[name=password] (ignored,
//        data-testid="oidc-password"), button data-testid="oidc-submit".
//   POST /interaction/:uid  -> unknown login: form again with
//        data-testid="oidc-error"; known login: interactionFinished, and the
//        browser is redirected on to redirectUri?code=...&state=...
// Consent never shows: loadExistingGrant grants the requested scopes to the
// one registered (first-party) client, the pattern oidc-provider documents.
//
// Quirks handled here:
// - The issuer is http://127.0.0.1:<port>; oidc-provider accepts http issuers
//   and only marks cookies `secure` when the request is https, so nothing to
//   switch off. The port must be known before `new Provider(issuer)`, hence
//   listen first and attach the handler after.
// - PKCE is required (S256 only, oidc-provider 9 supports no other method),
//   even though the client is confidential: the app under test must send it.
// - conformIdTokenClaims: false, so the id_token of the code flow carries the
//   scope claims (email, email_verified, name, preferred_username) and not
//   only the userinfo endpoint.
// - Signing keys: a fresh RS256 key per start, so no dev-key warning and no
//   key shared between runs.

import { createServer } from 'node:http';
import { spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import Provider from 'oidc-provider';

const html = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function loginPage(uid, error) {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>Sign in (test OIDC provider)</title></head>
<body>
<h1>Sign in</h1>
${error ? `<p role="alert" data-testid="oidc-error">${html(error)}</p>` : ''}
<form method="post" action="/interaction/${html(uid)}" autocomplete="off">
  <label>Login <input name="login" data-testid="oidc-login" required autofocus></label>
  <label>Password <input type="password" name="password" data-testid="oidc-password"></label>
  <button type="submit" data-testid="oidc-submit">Sign in</button>
</form>
</body></html>`;
}

async function readForm(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

export async function startOidcProvider({
  redirectUri,
  clientId = 'holdpoint',
  clientSecret = randomBytes(24).toString('hex'),
  accounts = {},
} = {}) {
  if (!redirectUri) throw new TypeError('startOidcProvider: redirectUri is required');

  let handler = (_req, res) => { res.statusCode = 503; res.end(); };
  const server = createServer((req, res) => handler(req, res));
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const issuer = `http://127.0.0.1:${server.address().port}`;

  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const signingKey = {
    ...privateKey.export({ format: 'jwk' }),
    kid: randomBytes(8).toString('hex'),
    alg: 'RS256',
    use: 'sig',
  };

  const provider = new Provider(issuer, {
    clients: [{
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    jwks: { keys: [signingKey] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    scopes: ['openid', 'email', 'profile'],
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username'],
    },
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    features: { devInteractions: { enabled: false } },
    // Explicit lifetimes only to silence oidc-provider's per-default NOTICE lines.
    ttl: {
      AuthorizationCode: 60, AccessToken: 600, IdToken: 600,
      Interaction: 600, Grant: 3600, Session: 3600,
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(_ctx, id) {
      if (!Object.hasOwn(accounts, id)) return undefined;
      return {
        accountId: id,
        // oidc-provider filters these down to what the granted scopes allow.
        async claims() { return { ...accounts[id], sub: id }; },
      };
    },
    async loadExistingGrant(ctx) {
      const grantId = ctx.oidc.result?.consent?.grantId
        || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (grantId) return ctx.oidc.provider.Grant.find(grantId);
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope('openid email profile');
      grant.addOIDCClaims(['email', 'email_verified', 'name', 'preferred_username']);
      await grant.save();
      return grant;
    },
  });

  const providerCallback = provider.callback();

  async function interaction(req, res) {
    try {
      // interactionDetails checks the interaction cookie against the uid.
      const { uid, prompt } = await provider.interactionDetails(req, res);
      if (prompt.name !== 'login') {
        res.writeHead(501, { 'content-type': 'text/plain' });
        res.end(`test OIDC provider: unexpected prompt ${prompt.name}`);
        return;
      }
      if (req.method === 'POST') {
        const login = ((await readForm(req)).get('login') || '').trim();
        if (Object.hasOwn(accounts, login)) {
          await provider.interactionFinished(req, res, { login: { accountId: login } }, {
            mergeWithLastSubmission: false,
          });
          return;
        }
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
        res.end(loginPage(uid, `Unknown login "${login}"`));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(loginPage(uid));
    } catch (err) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(`test OIDC provider: ${err.message}`);
    }
  }

  handler = (req, res) => {
    if (req.url.startsWith('/interaction/')) interaction(req, res);
    else providerCallback(req, res);
  };

  return {
    issuer,
    clientId,
    clientSecret,
    stop() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        // Chromium keeps connections alive; don't let them hold stop() open.
        server.closeAllConnections();
      });
    },
  };
}

/**
 * The provider as a process of its own (`node oidc-provider.mjs '<options as JSON>'`), as an identity provider runs
 * beside Holdpoint: resolves once it prints its issuer; `stop()` ends the process.
 */
export async function startOidcProviderProcess(options) {
  const clientSecret = options.clientSecret ?? randomBytes(24).toString('hex');
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), JSON.stringify({ ...options, clientSecret })], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // Generous: on a busy machine (a cold CI build beside it) loading oidc-provider and making an RSA key takes long.
  const startTimeoutMs = 90_000;
  const started = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the OpenID provider did not start within ${startTimeoutMs / 1000} s`));
    }, startTimeoutMs);
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
      // Only a whole line: a chunk may end inside the JSON.
      const line = output.split('\n').slice(0, -1).find((l) => l.startsWith('{'));
      if (line) {
        clearTimeout(timer);
        resolve(JSON.parse(line));
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the OpenID provider exited early with ${code}`));
    });
  });
  return {
    ...started,
    stop() {
      child.kill('SIGTERM');
      return new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
    },
  };
}

// Run as a script: start, print the issuer and client as one JSON line, serve until told to stop.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const provider = await startOidcProvider(JSON.parse(process.argv[2] ?? '{}'));
  const { issuer, clientId, clientSecret } = provider;
  process.stdout.write(`${JSON.stringify({ issuer, clientId, clientSecret })}\n`);
  process.on('SIGTERM', () => provider.stop().then(() => process.exit(0)));
}
