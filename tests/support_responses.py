"""Shared helpers of the Responses client tests: a loopback server factory and a fast client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from ai_transport.responses import LocalResponsesServer, ResponsesClient

#: Retry settings that never sleep (tests assert behaviour, not timing).
NO_WAIT_RETRY = {"initial_delay": 0.0, "max_delay": 0.0, "jitter": 0.0}


def chunk_lines(path: Path) -> list[str]:
    """Non-empty lines of a recorded ``*.chunks.txt`` file, as text."""
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def split_by_response(lines: list[str]) -> list[list[str]]:
    """Lines grouped per response (each starts at ``response.created``)."""
    groups: list[list[str]] = []
    for line in lines:
        if json.loads(line)["type"] == "response.created" or not groups:
            groups.append([])
        groups[-1].append(line)
    return groups


def compact(event: dict[str, Any]) -> str:
    """Compact JSON of an event (how the recordings are written)."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Any]]:
    """``server = await serve(responder)``: a started loopback server, closed after the test."""
    servers: list[LocalResponsesServer] = []

    async def start(responder: Any) -> LocalResponsesServer:
        server = await LocalResponsesServer(responder).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def make_client() -> AsyncIterator[Callable[..., ResponsesClient]]:
    """``client = make_client(server, **defaults)``: a client on the server (model ``"m"``, no-wait retries)."""
    clients: list[ResponsesClient] = []

    def make(server: LocalResponsesServer, **defaults: Any) -> ResponsesClient:
        defaults.setdefault("model", "m")
        defaults.setdefault("retry", NO_WAIT_RETRY)
        client = ResponsesClient(api_key="sk-test", base_url=server.base_url, **defaults)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


USER_INPUT = [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
