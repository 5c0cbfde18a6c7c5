"""A minimal MCP server on the Python SDK's high-level `MCPServer` (mcp 2.x), over stdio.

One tool, `stamp`, deliberately declared without annotations: the gateway's tests use it as
the tool a policy must treat as mutating by default. `scripts/bench-gateway` times its
start-up as the baseline of a minimal Python MCP server.

Usage: minimal_server.py [FILE]   (`stamp` appends its text to FILE when one is given)
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("fleetgate-minimal")
target = sys.argv[1] if len(sys.argv) > 1 else None


@server.tool()
def stamp(text: str) -> str:
    """Append `text` to the server's file (a change of state, so: mutating)."""
    if target is not None:
        with open(target, "a", encoding="utf-8") as f:
            f.write(text + "\n")
    return f"stamped {text}"


if __name__ == "__main__":
    server.run("stdio")
