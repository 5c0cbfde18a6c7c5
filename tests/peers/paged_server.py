"""An MCP server on the Python SDK's low-level `Server` whose `tools/list` comes in pages
of two (`nextCursor` "1", "2", then none), for the gateway's pagination test.

Tools `t0` … `t5`: even ones read-only, odd ones without annotations; calling one answers
its name.
"""

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(
        name=f"t{i}",
        description=f"tool {i}",
        input_schema={"type": "object"},
        annotations=types.ToolAnnotations(read_only_hint=True) if i % 2 == 0 else None,
    )
    for i in range(6)
]
PAGE = 2


async def list_tools(ctx, params):
    start = int(params.cursor) * PAGE if params is not None and params.cursor else 0
    page = TOOLS[start : start + PAGE]
    more = start + PAGE < len(TOOLS)
    return types.ListToolsResult(tools=page, next_cursor=str(start // PAGE + 1) if more else None)


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {params.name}")])


server = Server("fleetgate-paged", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
