"""An MCP server on the Python SDK's `MCPServer` (mcp 2.x), over stdio, that asks its client
for input: the downstream of the gateway's routing tests.

Tools:
* `ask(tag)` — elicits a name with a message naming the call (`who answers call TAG?`) and
  returns `call TAG answered by NAME`, so a test sees both who was asked and who answered;
* `provoke_unsolicited(delay)` — returns at once, then after `delay` seconds sends an
  elicitation that belongs to no request (the session outlives the call) and writes how it
  ended, one JSON line, to OUTCOME_FILE.

Usage: elicit_server.py OUTCOME_FILE
"""

import asyncio
import json
import sys

import anyio
from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("fleetgate-elicit")
outcome_file = sys.argv[1]
pending: set[asyncio.Task[None]] = set()


class Answer(BaseModel):
    name: str


@server.tool()
async def ask(tag: str, ctx: Context) -> str:
    """Ask the client who answers this call."""
    result = await ctx.elicit(f"who answers call {tag}?", schema=Answer)
    if result.action != "accept":
        return f"call {tag} was {result.action}"
    return f"call {tag} answered by {result.data.name}"


@server.tool()
async def provoke_unsolicited(delay: float, ctx: Context) -> str:
    """Later, ask the client something outside any request."""
    session = ctx.session

    async def later() -> None:
        await anyio.sleep(delay)
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        try:
            answer = await session.elicit_form("unsolicited: who is there?", schema)
            outcome = {"answered": True, "result": answer.model_dump(mode="json", exclude_none=True)}
        except Exception as e:  # the gateway's refusal arrives as an MCP error
            error = getattr(e, "error", None)
            outcome = {"answered": False, "code": getattr(error, "code", None), "message": str(e)}
        with open(outcome_file, "a", encoding="utf-8") as f:
            f.write(json.dumps(outcome) + "\n")

    # Outlives the call on purpose; kept referenced so it is not collected.
    pending.add(asyncio.get_running_loop().create_task(later()))
    return "scheduled"


if __name__ == "__main__":
    server.run("stdio")
