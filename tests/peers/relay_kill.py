"""Official Python SDK clients, each on a 2025-11-25 session of a Streamable HTTP gateway,
each calling `ask` (tests/peers/elicit_server.py) once, the calls held in flight by their
elicitations until the test says go: meanwhile the test kills the replica relaying the calls'
streams. Each elicitation is answered with the client's name once the file GO_DIR/go exists;
GO_DIR/asked-NAME is written when NAME is asked. Every call must end within TIMEOUT seconds,
answered or failed; one that does not is "hung". Prints one JSON line:
{"answered": [NAME...], "failed": {NAME: error}, "hung": [NAME...], "asked": {NAME: count}}.

Usage: relay_kill.py URL GO_DIR CLIENTS TIMEOUT   (`Authorization: Bearer $MCP_DRIVE_BEARER`)
"""

import json
import os
import sys
from typing import Any

import anyio
from elicit_client import eliciting_session
from mcp import types


async def client(url: str, me: str, go_dir: str, timeout: float, tally: dict[str, Any]) -> None:
    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        tally["asked"][me] = tally["asked"].get(me, 0) + 1
        with open(os.path.join(go_dir, f"asked-{me}"), "w"):
            pass
        while not os.path.exists(os.path.join(go_dir, "go")):
            await anyio.sleep(0.02)
        return types.ElicitResult(action="accept", content={"name": me})

    async with eliciting_session(url, f"relay-{me}", on_elicit) as s:
        try:
            with anyio.fail_after(timeout):
                result = await s.call_tool("ask", {"tag": me})
            text = result.content[0].text if result.content else ""
            if text == f"call {me} answered by {me}" and not result.is_error:
                tally["answered"].append(me)
            else:
                tally["failed"][me] = f"answered {text!r} (is_error {result.is_error})"
        except TimeoutError:
            tally["hung"].append(me)
        except Exception as e:  # a failed call: reported with its error
            tally["failed"][me] = repr(e)[:300]


async def main() -> None:
    url, go_dir, clients, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    tally: dict[str, Any] = {"answered": [], "failed": {}, "hung": [], "asked": {}}
    with anyio.move_on_after(timeout + 30):
        async with anyio.create_task_group() as tg:
            for n in range(clients):
                tg.start_soon(client, url, f"c{n}", go_dir, timeout, tally)
    print(json.dumps(tally))


if __name__ == "__main__":
    anyio.run(main)
