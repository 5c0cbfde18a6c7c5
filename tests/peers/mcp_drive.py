"""Drive an MCP server through the official Python SDK client, one step at a time.

Usage: mcp_drive.py COMMAND [ARG...]
       mcp_drive.py http://HOST:PORT/mcp

Starts COMMAND as a stdio MCP server with `mcp.client.stdio.stdio_client` (or, given a
URL, connects to it with `mcp.client.streamable_http.streamable_http_client`, sending
`Authorization: Bearer $MCP_DRIVE_BEARER` when that is set, and `clientInfo.name`
`$MCP_DRIVE_CLIENT_NAME` when that is set), runs
`ClientSession.initialize()` (with `MCP_DRIVE_MODE=2026-07-28` and a URL: the SDK's `Client`
adopting that version, no handshake, its version printed instead), prints the result as one
JSON line, then reads one JSON
step per line on stdin and prints one JSON line per step:

    {"op": "list_tools", "cursor": null}
    {"op": "call_tool", "name": "git_status", "arguments": {...}, "progress": false}
    {"op": "list_resources"} {"op": "list_resource_templates"}
    {"op": "read_resource", "uri": "..."}
    {"op": "list_prompts"} {"op": "get_prompt", "name": "...", "arguments": {...}}
    {"op": "complete_prompt", "name": "...", "argument": "...", "value": "..."}
    {"op": "set_logging_level", "level": "debug"}
    {"op": "notifications"}   # what arrived since the last ask: methods and log lines

Each answer is {"ok": true, "result": ...} with the SDK's model dumped as JSON (aliases,
so the wire names), or {"ok": false, "error": {"type", "code", "message"}}. The Rust
integration tests (crates/gateway/tests) assert on these lines; stdin EOF ends the
session (the client closes the server's stdin).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


@contextlib.asynccontextmanager
async def connect(command: str, args: list[str]) -> Any:
    if command.startswith(("http://", "https://")):
        headers = {}
        token = os.environ.get("MCP_DRIVE_BEARER")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(command, http_client=http) as streams:
                yield streams[0], streams[1]
    else:
        server = StdioServerParameters(command=command, args=args)
        async with stdio_client(server) as (read, write):
            yield read, write


def dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return model


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main() -> None:
    command, *args = sys.argv[1:]
    notes: list[dict[str, Any]] = []
    progress: list[dict[str, Any]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        notes.append({"method": "notifications/message", "level": params.level, "data": params.data})

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            notes.append({"method": "exception", "data": repr(message)})
            return
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method is not None:
            notes.append({"method": method})

    name = os.environ.get("MCP_DRIVE_CLIENT_NAME")
    info = types.Implementation(name=name, version="1.0") if name else None
    mode = os.environ.get("MCP_DRIVE_MODE")
    if mode and command.startswith(("http://", "https://")):
        await drive_modern(command, mode, info, notes, progress)
        return
    async with connect(command, args) as (read, write):
        async with ClientSession(
            read, write, logging_callback=on_log, message_handler=on_message, client_info=info
        ) as session:
            init = await session.initialize()
            emit({"ok": True, "result": dump(init)})
            await serve_steps(session, notes, progress)


async def drive_modern(url: str, mode: str, info: Any, notes: list, progress: list) -> None:
    """MCP_DRIVE_MODE=2026-07-28: the SDK's `Client` adopting that version, sessionless — each
    request stands alone, carrying its version and `clientInfo` in `_meta`."""
    from mcp import Client

    headers = {}
    token = os.environ.get("MCP_DRIVE_BEARER")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, client_info=info) as client:
            emit({"ok": True, "result": {"protocolVersion": client.protocol_version}})
            await serve_steps(client.session, notes, progress)


async def serve_steps(session: Any, notes: list, progress: list) -> None:
    """Answer one JSON step per stdin line until EOF."""
    stdin = anyio.wrap_file(sys.stdin)
    async for line in stdin:
        line = line.strip()
        if not line:
            continue
        step = json.loads(line)
        try:
            result = await run_step(session, step, notes, progress)
            emit({"ok": True, "result": result})
        except Exception as e:  # the test asserts on the failure itself
            error = getattr(e, "error", None)
            emit(
                {
                    "ok": False,
                    "error": {
                        "type": type(e).__name__,
                        "code": getattr(error, "code", None),
                        "message": getattr(error, "message", str(e)),
                    },
                }
            )


async def run_step(session: ClientSession, step: dict[str, Any], notes: list, progress: list) -> Any:
    op = step["op"]
    if op == "list_tools":
        params = types.PaginatedRequestParams(cursor=step["cursor"]) if step.get("cursor") else None
        return dump(await session.list_tools(params=params))
    if op == "call_tool":
        callback = None
        if step.get("progress"):

            async def callback(done: float, total: float | None, message: str | None) -> None:
                progress.append({"progress": done, "total": total, "message": message})

        result = await session.call_tool(step["name"], step.get("arguments") or {}, progress_callback=callback)
        return dump(result)
    if op == "list_resources":
        return dump(await session.list_resources())
    if op == "list_resource_templates":
        return dump(await session.list_resource_templates())
    if op == "read_resource":
        return dump(await session.read_resource(step["uri"]))
    if op == "list_prompts":
        return dump(await session.list_prompts())
    if op == "get_prompt":
        return dump(await session.get_prompt(step["name"], step.get("arguments") or {}))
    if op == "complete_prompt":
        ref = types.PromptReference(type="ref/prompt", name=step["name"])
        argument = {"name": step["argument"], "value": step["value"]}
        return dump(await session.complete(ref, argument))
    if op == "set_logging_level":
        return dump(await session.set_logging_level(step["level"]))
    if op == "notifications":
        taken = {"notifications": list(notes), "progress": list(progress)}
        notes.clear()
        progress.clear()
        return taken
    raise ValueError(f"unknown op {op!r}")


if __name__ == "__main__":
    anyio.run(main)
