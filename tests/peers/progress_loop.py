"""Call a tool that sends a burst of progress notifications, CALLS times, through the official
Python SDK client, and check each call's progress arrived whole and in order before its answer.
Prints one JSON line: {"calls", "complete", "short": [...], "out_of_order": [...], "errors": [...]}.

Usage: progress_loop.py CALLS COUNT COMMAND [ARG...]   (COMMAND: a stdio MCP server)
"""

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    calls, count = int(sys.argv[1]), int(sys.argv[2])
    server = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:])
    tally = {"calls": calls, "complete": 0, "short": [], "out_of_order": [], "errors": []}
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for i in range(calls):
                seen: list[float] = []

                async def on_progress(done: float, total: float | None, message: str | None) -> None:
                    seen.append(done)

                result = await session.call_tool("burst_progress", {"count": count}, progress_callback=on_progress)
                if result.is_error:
                    tally["errors"].append({"call": i, "content": result.model_dump(mode="json")["content"]})
                elif len(seen) != count:
                    tally["short"].append({"call": i, "got": len(seen)})
                elif seen != sorted(seen):
                    tally["out_of_order"].append({"call": i, "got": seen})
                else:
                    tally["complete"] += 1
    print(json.dumps(tally))


if __name__ == "__main__":
    anyio.run(main)
