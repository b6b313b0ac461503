// A real OAuth 2.1 / OpenID Connect authorization server for the hub's tests: npm's oidc-provider,
// issuing JWT access tokens through client_credentials, with RFC 8707 resource indicators.
//
//   node oidc_provider.mjs PORT RESOURCE CLIENT_ID CLIENT_SECRET SCOPES
//
// The issuer is http://127.0.0.1:PORT; tokens are issued only for RESOURCE (its `aud`), with at most
// SCOPES (space-separated). Prints "ready" once it listens.
import { generateKeyPairSync } from "node:crypto";
import Provider, { errors } from "oidc-provider";

const [port, resource, clientId, clientSecret, scopes] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const key = { ...privateKey.export({ format: "jwk" }), kid: "oidc-provider-1", use: "sig", alg: "RS256" };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: clientId,
      client_secret: clientSecret,
      grant_types: ["client_credentials"],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  jwks: { keys: [key] },
  scopes: scopes.split(" "),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource) {
          throw new errors.InvalidTarget(`no such resource: ${indicator}`);
        }
        return {
          scope: scopes,
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
