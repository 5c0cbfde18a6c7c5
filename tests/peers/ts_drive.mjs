// The official TypeScript SDK as a client of a Streamable HTTP endpoint, one step at a time —
// the same line protocol as mcp_drive.py, so the Rust tests drive either SDK alike.
//   node ts_drive.mjs URL v1|v2
// v1: `@modelcontextprotocol/sdk` (1.x), the 2025-11-25 handshake and its session.
// v2: `@modelcontextprotocol/client` (2.x) pinned to 2026-07-28: no handshake, no session, each
//     request carrying its version and clientInfo.
// `Authorization: Bearer $MCP_DRIVE_BEARER` when set; clientInfo.name `$MCP_DRIVE_CLIENT_NAME`.
// Prints the connection's protocol version as one JSON line, then answers one JSON step per
// stdin line: {"op": "list_tools"} or {"op": "call_tool", "name": ..., "arguments": {...}}.
import { createInterface } from "node:readline";

const [url, generation] = process.argv.slice(2);
const headers = process.env.MCP_DRIVE_BEARER ? { Authorization: `Bearer ${process.env.MCP_DRIVE_BEARER}` } : {};
const info = { name: process.env.MCP_DRIVE_CLIENT_NAME || "ts-drive", version: "1.0.0" };
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

let client;
if (generation === "v2") {
  const sdk = await import("@modelcontextprotocol/client");
  client = new sdk.Client(info, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await client.connect(new sdk.StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
} else {
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  client = new Client(info);
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
}
const version = client.getNegotiatedProtocolVersion?.() ?? client.transport?.protocolVersion ?? null;
emit({ ok: true, result: { protocolVersion: version, sessionId: client.transport?.sessionId ?? null } });

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const step = JSON.parse(line);
  try {
    if (step.op === "list_tools") emit({ ok: true, result: await client.listTools() });
    else if (step.op === "call_tool") emit({ ok: true, result: await client.callTool({ name: step.name, arguments: step.arguments ?? {} }) });
    else throw new Error(`unknown op ${step.op}`);
  } catch (e) {
    emit({ ok: false, error: { type: e?.constructor?.name ?? "Error", code: e?.code ?? null, message: String(e?.message ?? e) } });
  }
}
await client.close();
