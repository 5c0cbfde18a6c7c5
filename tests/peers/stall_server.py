"""A downstream MCP server in raw JSON-RPC lines that stops reading its stdin on request, for
the gateway's notification bound (crates/gateway/tests/it/bounds.rs).

Tools: `stall {until}` answers at once, then reads nothing more until the file `until` exists;
`received` answers how many notifications other than `notifications/initialized` it has read.
"""

import json
import os
import sys
import time

received = 0


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(value):
    return {"content": [{"type": "text", "text": value}], "isError": False}


TOOLS = [
    {"name": "stall", "description": "Stops reading stdin until the file `until` exists",
     "inputSchema": {"type": "object", "properties": {"until": {"type": "string"}}, "required": ["until"]}},
    {"name": "received", "description": "How many notifications were read",
     "inputSchema": {"type": "object", "properties": {}}},
]

for line in sys.stdin:
    message = json.loads(line)
    method, ident, params = message.get("method"), message.get("id"), message.get("params") or {}
    if ident is None:
        if method is not None and method != "notifications/initialized":
            received += 1
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}}, "serverInfo": {"name": "stall_server", "version": "1"}}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call" and params.get("name") == "stall":
        until = params.get("arguments", {}).get("until", "")
        send({"jsonrpc": "2.0", "id": ident, "result": text("stalling")})
        while not os.path.exists(until):
            time.sleep(0.02)
    elif method == "tools/call" and params.get("name") == "received":
        send({"jsonrpc": "2.0", "id": ident, "result": text(str(received))})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no {method}"}})
