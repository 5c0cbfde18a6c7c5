// The official TypeScript SDK's client against `fleetgate serve --transport http` with
// [http.oauth], driven without a browser: its OAuth provider holds a pre-issued access token
// (the e2e test mints it from its OpenID provider fixture). Prints one JSON line: what the
// gateway answered, or the SDK's error — with a refused token the SDK follows the 401's
// resource_metadata to the authorization server and stops where a browser would open.
//   node oauth_client.mjs URL TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const seen = { redirected: null };
const authProvider = {
  get redirectUrl() {
    return "http://127.0.0.1:9/callback";
  },
  get clientMetadata() {
    return { client_name: "fleetgate-e2e", redirect_uris: ["http://127.0.0.1:9/callback"] };
  },
  clientInformation: () => ({ client_id: "fleetgate-e2e" }),
  tokens: () => ({ access_token: token, token_type: "Bearer" }),
  saveTokens: () => {},
  redirectToAuthorization: (where) => {
    seen.redirected = String(where);
    throw new Error("no browser here");
  },
  saveCodeVerifier: () => {},
  codeVerifier: () => "unused",
};
const client = new Client({ name: "oauth-sdk-client", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
try {
  await client.connect(transport);
  const listed = await client.listTools();
  const context = await client.callTool({ name: "gitea_get_runtime_context", arguments: {} });
  console.log(JSON.stringify({
    ok: true,
    tools: listed.tools.length,
    principal: context.structuredContent?.worker?.principal ?? null,
  }));
  await client.close();
} catch (error) {
  console.log(JSON.stringify({ ok: false, error: String(error), redirected: seen.redirected }));
}
process.exit(0);
