// A real OAuth 2.1 authorization server (oidc-provider) for the swarm's client-credentials tests.
// Usage: node server.mjs CONFIG.json. It prints one JSON line {"issuer": ...} once listening.
// CONFIG: {"port": 0, "resource": "http://127.0.0.1:8000/mcp", "scopes": ["mcp:tools"],
//          "ttl": 20, "clients": [oidc-provider client metadata, ...]}
// GET /counts answers {"token": N, "token_refused": M}: the token endpoint's own tally, which the
// tests compare with the swarm's oauth:token row.
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
// ES256: a P-256 key is made at once (an RSA key search can take seconds on a busy machine)
const signing = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
signing.kid = `k-${Date.now().toString(36)}`;
signing.use = 'sig';
signing.alg = 'ES256';

const counts = { token: 0, token_refused: 0 };
const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(config.port ?? 0, '127.0.0.1', resolve);
}).catch((err) => {
  process.stderr.write(`cannot listen on 127.0.0.1:${config.port}: ${err.message}\n`);
  process.exit(2);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: config.clients,
  jwks: { keys: [signing] },
  scopes: config.scopes,
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'private_key_jwt'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => config.resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== config.resource) throw new errors.InvalidTarget();
        return {
          scope: config.scopes.join(' '),
          audience: config.resource,
          accessTokenTTL: config.ttl,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
});
provider.use(async (ctx, next) => {
  if (ctx.path === '/counts' && ctx.method === 'GET') {
    ctx.body = counts;
    return;
  }
  await next();
  if (ctx.path === '/token' && ctx.method === 'POST') {
    counts[ctx.status === 200 ? 'token' : 'token_refused'] += 1;
  }
});
server.on('request', provider.callback());
process.stdout.write(`${JSON.stringify({ issuer })}\n`);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
