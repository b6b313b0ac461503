// npm's oidc-provider as the authorization server people sign in to, for the hub's end-to-end tests:
// authorization code + PKCE with its own login and consent pages (devInteractions: any login name, any
// password; the login name is the person's `sub`), dynamic client registration (RFC 7591), RFC 8707
// resource indicators with JWT access tokens (`aud` = the resource), refresh tokens, revocation (RFC 7009)
// and introspection (RFC 7662).
//
//   node oidc_login_provider.mjs CONFIG_JSON
//
// CONFIG_JSON: {"port": N, "resources": {"URL": "SCOPES", ...}, "clients": [CLIENT_METADATA, ...],
// "accounts": {"LOGIN": {CLAIMS}, ...}, "idTokenClaims": false, "cimd": BOOL, "registration": BOOL}: the
// resources tokens may be issued for, each with the scopes it takes (space-separated); the clients registered
// beforehand (the hub, toward a mode = "user" server, or as the admin console's OpenID Connect client); the
// people's claims beyond `sub` (`email`, `name`, `preferred_username`, `groups`, `realm_access`, given for the
// scopes email, profile and groups); with `idTokenClaims`, they are in the ID token too, else in the userinfo
// answer only (oidc-provider's default); whether it takes client ID metadata documents (a client_id that is an
// https URL, whose document it fetches and validates; its fetches may reach loopback, where the tests serve the
// hub, which its SSRF guard refuses by default; the hub's certificate is trusted through NODE_EXTRA_CA_CERTS);
// whether it registers clients dynamically (default true); with "accountsFile", the people's claims are read from
// that JSON file at each use instead (a test edits it: someone leaves a group). The issuer is http://HOST:PORT ("host": "localhost"
// puts it on another site than the hub's 127.0.0.1, as an identity provider is to a browser); it listens on
// 127.0.0.1. Prints "ready" once it listens.
import { generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import Provider, { errors } from "oidc-provider";

const {
  port,
  resources,
  clients = [],
  accounts = {},
  idTokenClaims = false,
  host = "127.0.0.1",
  cimd = false,
  registration = true,
  accountsFile = null,
} = JSON.parse(process.argv[2]);
const issuer = `http://${host}:${port}`;
const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const key = { ...privateKey.export({ format: "jwk" }), kid: "oidc-login-1", use: "sig", alg: "RS256" };
const scopes = new Set(Object.values(resources).flatMap((s) => s.split(" ")));

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: [key] },
  scopes: ["openid", "offline_access", "email", "profile", "groups", ...scopes],
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["name", "preferred_username"],
    groups: ["groups", "realm_access"],
  },
  conformIdTokenClaims: !idTokenClaims,
  findAccount: async (ctx, id) => ({
    accountId: id,
    claims: async () => {
      const current = accountsFile ? JSON.parse(readFileSync(accountsFile, "utf8")) : accounts;
      return { sub: id, ...(current[id] || {}) };
    },
  }),
  pkce: { required: () => true },
  // Outgoing fetches (client ID metadata documents) without the SSRF guard's dispatcher: the hub is on loopback.
  fetch: (url, options) => {
    delete options.dispatcher;
    return globalThis.fetch(url, options);
  },
  // Every client with the refresh_token grant gets a refresh token (not only with offline_access).
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed("refresh_token"),
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: registration },
    clientIdMetadataDocument: { enabled: cimd, ack: "draft-02" },
    revocation: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (!(indicator in resources)) {
          throw new errors.InvalidTarget(`no such resource: ${indicator}`);
        }
        return {
          scope: resources[indicator],
          audience: indicator,
          accessTokenTTL: 300,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "RS256" } },
        };
      },
    },
  },
});

provider.listen(Number(port), "127.0.0.1", () => {
  console.log("ready");
});
