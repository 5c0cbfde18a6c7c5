"""Two official Python SDK clients on one Streamable HTTP gateway, each answering the
elicitations put to it with its own name, both calling `ask` at the same moment, ROUNDS
times: every question must reach the client whose call asked it, every answer come back to
that call — or, on a downstream the gateway shares between sessions, be refused back to the
server when both calls are in flight (counted in "refused", never put to the wrong client).
Prints one JSON line: {"rounds", "answered", "refused", "cross_talk", "errors", "asked"}.

Usage: elicit_race.py URL ROUNDS   (sends `Authorization: Bearer $MCP_DRIVE_BEARER` when set)
"""

import json
import sys
from typing import Any

import anyio
from elicit_client import eliciting_session
from mcp import types


async def client(url: str, me: str, rounds: int, start: list[anyio.Event], tally: dict[str, Any]) -> None:
    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        # The question names the call that asked it: it must be one of mine.
        tally["asked"] += 1
        if f"call {me}-" not in params.message:
            tally["cross_talk"].append({"asked": me, "question": params.message})
        return types.ElicitResult(action="accept", content={"name": me})

    async with eliciting_session(url, f"race-{me}", on_elicit) as s:
        for i in range(rounds):
            await start[i].wait()
            tag = f"{me}-{i}"
            try:
                result = await s.call_tool("ask", {"tag": tag})
                text = result.content[0].text if result.content else ""
                if text == f"call {tag} answered by {me}":
                    tally["answered"] += 1
                else:
                    tally["cross_talk"].append({"call": tag, "result": text, "is_error": result.is_error})
            except Exception as e:  # reported, the run goes on
                if "cannot be told to belong to one of them" in repr(e):
                    tally["refused"] += 1  # the server's question, refused back to it
                else:
                    tally["errors"].append({"call": tag, "error": repr(e)[:300]})


async def main() -> None:
    url, rounds = sys.argv[1], int(sys.argv[2])
    tally: dict[str, Any] = {"rounds": rounds, "answered": 0, "refused": 0, "asked": 0, "cross_talk": [], "errors": []}
    start = [anyio.Event() for _ in range(rounds)]
    async with anyio.create_task_group() as tg:
        tg.start_soon(client, url, "alice", rounds, start, tally)
        tg.start_soon(client, url, "bob", rounds, start, tally)
        await anyio.sleep(0.5)
        for event in start:
            # Both calls of a round start together; the next round starts once both answered.
            def done() -> int:
                return tally["answered"] + tally["refused"] + len(tally["cross_talk"]) + len(tally["errors"])

            before = done()
            event.set()
            with anyio.fail_after(60):
                while done() < before + 2:
                    await anyio.sleep(0.005)
    print(json.dumps(tally))


if __name__ == "__main__":
    anyio.run(main)
