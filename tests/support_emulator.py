"""Shared pytest fixtures and helpers for tests that need the local Ably emulator.

Import what you need in a test module::

    from support_emulator import emulator, emulator_thread, realtime_client, Inbox, unique_channel

Fixtures:

* ``emulator`` — an in-loop :class:`~ai_transport.emulator.Emulator` on a free port, per test
  (async tests; the SDK clients share the test's loop).
* ``emulator_thread`` — one :class:`~ai_transport.emulator.EmulatorThread` per session (sync
  tests, node clients, or async tests that want a server outside their loop). Use
  :func:`unique_channel` names: the store is shared by every test of the session.

Helpers: :func:`realtime_client` (connected ``AblyRealtime``, closed on exit), :class:`Inbox`
(ordered subscription recorder), :class:`RawClient` (a bare websocket speaking the protocol).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import msgpack
import pytest

from ai_transport.emulator import Emulator, EmulatorThread, ably_realtime, ably_rest

__all__ = [
    "Inbox",
    "RawClient",
    "emulator",
    "emulator_thread",
    "realtime_client",
    "rest_client",
    "unique_channel",
    "wait_connected",
]

_counter = itertools.count(1)


def unique_channel(prefix: str = "test") -> str:
    """A channel name no other test uses (``<prefix>-<pid>-<n>``)."""
    return f"{prefix}-{os.getpid()}-{next(_counter)}"


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    """A fresh emulator on a free loopback port, in the test's event loop."""
    async with Emulator(port=0) as emu:
        yield emu


@pytest.fixture(scope="session")
def emulator_thread() -> Iterator[EmulatorThread]:
    """One emulator per session, in its own thread and loop (free loopback port)."""
    with EmulatorThread(port=0) as emu:
        yield emu


async def wait_connected(client: Any, timeout: float = 10) -> None:
    """Wait until ``client.connection.state`` is ``connected`` (raises on failure / timeout)."""

    async def loop() -> None:
        while getattr(client.connection.state, "value", client.connection.state) != "connected":
            state = getattr(client.connection.state, "value", client.connection.state)
            if state in ("failed", "closed"):
                raise AssertionError(f"connection {state}: {client.connection.error_reason}")
            await asyncio.sleep(0.01)

    await asyncio.wait_for(loop(), timeout)


@asynccontextmanager
async def realtime_client(target: Any, **options: Any) -> AsyncIterator[Any]:
    """A connected ``AblyRealtime`` on the emulator ``target`` (port / Emulator / EmulatorThread)."""
    client = ably_realtime(target, **options)
    try:
        await wait_connected(client)
        yield client
    finally:
        await client.close()


@asynccontextmanager
async def rest_client(target: Any, **options: Any) -> AsyncIterator[Any]:
    """An ``AblyRest`` on the emulator, closed on exit."""
    client = ably_rest(target, **options)
    try:
        yield client
    finally:
        await client.close()


class Inbox:
    """Records messages in delivery order; subscribe with ``channel.subscribe(inbox.push)``.

    (ably-python only accepts functions / bound methods as listeners, not callable objects.)
    """

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self._queue: asyncio.Queue[Any] = asyncio.Queue()

    def push(self, message: Any) -> None:
        """The listener: record ``message``."""
        self.messages.append(message)
        self._queue.put_nowait(message)

    async def next(self, timeout: float = 5) -> Any:
        """The next message not yet taken with :meth:`next`."""
        return await asyncio.wait_for(self._queue.get(), timeout)

    async def take(self, n: int, timeout: float = 10) -> list[Any]:
        """The next ``n`` messages."""
        return [await self.next(timeout) for _ in range(n)]

    async def quiet(self, seconds: float = 0.2) -> None:
        """Assert nothing more arrives within ``seconds``."""
        try:
            extra = await asyncio.wait_for(self._queue.get(), seconds)
        except asyncio.TimeoutError:
            return
        raise AssertionError(f"unexpected extra delivery: {extra!r}")


class RawClient:
    """A bare websocket on the emulator speaking ProtocolMessages (JSON or msgpack)."""

    def __init__(self, ws: Any, fmt: str) -> None:
        self.ws = ws
        self.fmt = fmt

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, port: int, *, fmt: str = "json", query: str = "accessToken=raw&v=6", connected: bool = True
    ) -> AsyncIterator[RawClient]:
        """Open ``ws://127.0.0.1:port/?…`` (and consume CONNECTED unless ``connected=False``)."""
        from websockets.asyncio.client import connect

        q = query + ("&format=msgpack" if fmt == "msgpack" else "")
        async with connect(f"ws://127.0.0.1:{port}/?{q}", max_size=None) as ws:
            client = cls(ws, fmt)
            if connected:
                first = await client.recv()
                assert first["action"] == 4, first
                client.connected = first
            yield client

    connected: dict[str, Any]

    async def send(self, frame: Any) -> None:
        """Encode ``frame`` in this client's format and send it."""
        if self.fmt == "msgpack":
            await self.ws.send(msgpack.packb(frame, use_bin_type=True))
        else:
            await self.ws.send(json.dumps(frame))

    async def send_raw(self, payload: str | bytes) -> None:
        """Send a frame as is."""
        await self.ws.send(payload)

    async def recv(self, timeout: float = 5) -> dict[str, Any]:
        """The next frame, decoded."""
        raw = await asyncio.wait_for(self.ws.recv(), timeout)
        if isinstance(raw, bytes):
            return msgpack.unpackb(raw, raw=False)
        return json.loads(raw)

    async def recv_action(self, action: int, timeout: float = 5) -> dict[str, Any]:
        """Skip frames until one with ``action`` arrives."""
        while True:
            frame = await self.recv(timeout)
            if frame.get("action") == action:
                return frame
