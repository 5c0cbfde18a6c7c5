"""The client side elicit_race.py and relay_kill.py share: an official Python SDK session on a
Streamable HTTP gateway (`Authorization: Bearer $MCP_DRIVE_BEARER` when set), named NAME,
answering the elicitations put to it with `on_elicit`, initialized and ready for calls."""

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp import ClientSession, types
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

OnElicit = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


@asynccontextmanager
async def eliciting_session(url: str, name: str, on_elicit: OnElicit) -> AsyncIterator[ClientSession]:
    headers = {}
    if token := os.environ.get("MCP_DRIVE_BEARER"):
        headers["Authorization"] = f"Bearer {token}"
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            info = types.Implementation(name=name, version="1.0")
            async with ClientSession(streams[0], streams[1], elicitation_callback=on_elicit, client_info=info) as s:
                await s.initialize()
                yield s
