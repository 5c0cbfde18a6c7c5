"""Two official Python SDK clients on one Streamable HTTP gateway, both able to answer
elicitations; one calls `provoke_unsolicited`, which makes the downstream ask something
outside any request a moment later. Nobody may be asked. Prints one JSON line:
{"scheduled", "asked": [...]} after WAIT seconds.

Usage: unsolicited.py URL WAIT
"""

import json
import sys

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url, wait = sys.argv[1], float(sys.argv[2])
    asked: list[str] = []
    ready = anyio.Event()
    done = anyio.Event()
    scheduled: list[str] = []

    def answering(me: str):
        async def on_elicit(context, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(f"{me}: {params.message}")
            return types.ElicitResult(action="accept", content={"name": me})

        return on_elicit

    async def bystander() -> None:
        async with streamable_http_client(url) as st:
            async with ClientSession(st[0], st[1], elicitation_callback=answering("bystander")) as s:
                await s.initialize()
                ready.set()
                await done.wait()

    async def caller() -> None:
        async with streamable_http_client(url) as st:
            async with ClientSession(st[0], st[1], elicitation_callback=answering("caller")) as s:
                await s.initialize()
                await ready.wait()
                result = await s.call_tool("provoke_unsolicited", {"delay": 0.3})
                scheduled.append(result.content[0].text if result.content else "")
                await anyio.sleep(wait)
                done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(bystander)
        tg.start_soon(caller)
    print(json.dumps({"scheduled": scheduled, "asked": asked}))


if __name__ == "__main__":
    anyio.run(main)
