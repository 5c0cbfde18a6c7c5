"""An MCP server on the Python SDK's `MCPServer` (mcp 2.x), over stdio, that shows what a
downstream receives. The gateway's e2e tests use it for trace-context propagation and for
the gateway's metrics:

* `meta` (read-only): answers the request's `_meta`, as JSON text;
* `stamp` (no annotations, so gated as mutating): answers `stamped TEXT`.

Usage: meta_server.py
"""

import json

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("fleetgate-meta")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def meta(ctx: Context) -> str:
    """The `_meta` of this request, as the downstream received it."""
    return json.dumps(dict(ctx.request_context.meta or {}), sort_keys=True)


@server.tool()
def stamp(text: str) -> str:
    """Pretend to change something (unannotated: mutating)."""
    return f"stamped {text}"


if __name__ == "__main__":
    server.run("stdio")
