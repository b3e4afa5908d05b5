"""Shared fixtures and helpers for the channel tests.

``channel_kind`` is parametrised over every channel implementation the behavioural suite runs on.
A *kind* opens channel objects (``await kind.open(channel_name, client_id=...)``) that all speak the
:class:`ai_transport.channels.channel.Channel` surface and deliver inbound messages as plain dicts:

* ``inprocess``: :class:`~ai_transport.channels.memory.InProcessHub` channels;
* ``ably-emulator``: :class:`~ai_transport.channels.ably_channel.AblyChannel` over the unmodified
  ably-python SDK, against the loopback emulator (one per test);
* ``sdk-emulator``: :class:`SdkDriver`, the same operations done with direct SDK calls (a
  reference for what the SDK itself gives), against the emulator.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

import pytest
from support_emulator import wait_connected

from ai_transport.channels.memory import InProcessHub

KIND_NAMES = ["inprocess", "ably-emulator", "sdk-emulator"]


class InProcessKind:
    """Channels on one :class:`InProcessHub`."""

    name = "inprocess"
    #: Error codes the kind may raise for an append whose data type differs from the message's.
    append_type_error_codes: ClassVar[set[int]] = {40003}

    def __init__(self) -> None:
        self.hub = InProcessHub()
        self._opened: list[Any] = []

    async def open(self, channel_name: str, *, client_id: str | None = None) -> Any:
        ch = self.hub.channel(channel_name, client_id=client_id)
        self._opened.append(ch)
        return ch

    async def aclose(self) -> None:
        for ch in self._opened:
            await ch.close()


class _Connection:
    def __init__(self, realtime: Any) -> None:
        self.realtime = realtime
        self.channel_names: set[str] = set()


class AblyEmulatorKind:
    """:class:`AblyChannel` objects on a loopback emulator.

    Connections are reused per ``client_id`` (one connection, many channels, as in an app); a
    second channel object for the same name and client gets a new connection.
    """

    name = "ably-emulator"
    append_type_error_codes: ClassVar[set[int]] = {40003}

    def __init__(self, port: int) -> None:
        self.port = port
        self._opened: list[Any] = []
        self._connections: dict[str | None, list[_Connection]] = {}

    async def _connection(self, channel_name: str, client_id: str | None) -> _Connection:
        from ai_transport.emulator import ably_realtime

        for conn in self._connections.get(client_id, []):
            if channel_name not in conn.channel_names:
                break
        else:
            realtime = ably_realtime(self.port, client_id=client_id)
            conn = _Connection(realtime)
            self._connections.setdefault(client_id, []).append(conn)
            await wait_connected(realtime)
        conn.channel_names.add(channel_name)
        return conn

    async def open(self, channel_name: str, *, client_id: str | None = None) -> Any:
        from ai_transport.channels.ably_channel import AblyChannel

        conn = await self._connection(channel_name, client_id)
        ch = AblyChannel(channel_name, conn.realtime)
        self._opened.append(ch)
        return ch

    async def aclose(self) -> None:
        for ch in self._opened:
            await ch.close()
        for conns in self._connections.values():
            for conn in conns:
                await conn.realtime.close()


class SdkEmulatorKind(AblyEmulatorKind):
    """The raw ably-python SDK (:class:`SdkDriver`) on a loopback emulator."""

    name = "sdk-emulator"

    async def open(self, channel_name: str, *, client_id: str | None = None) -> Any:
        conn = await self._connection(channel_name, client_id)
        drv = SdkDriver(channel_name, conn.realtime)
        self._opened.append(drv)
        return drv


def _sdk_to_dict(msg: Any) -> dict[str, Any]:
    """Test-local conversion of an SDK ``Message`` (independent of ai_transport's converter)."""
    actions = ["message.create", "message.update", "message.delete", "meta", "message.summary", "message.append"]
    out: dict[str, Any] = {
        "id": msg.id,
        "data": bytes(msg.data) if isinstance(msg.data, bytearray) else msg.data,
        "action": actions[int(msg.action)] if msg.action is not None else "message.create",
        "serial": msg.serial,
        "version": msg.version.as_dict(),
        "timestamp": msg.timestamp,
        "clientId": msg.client_id,
        "connectionId": msg.connection_id,
    }
    if msg.name is not None:
        out["name"] = msg.name
    if msg.extras is not None:
        out["extras"] = msg.extras
    return out


class _SdkPage:
    def __init__(self, result: Any, decode: Callable[[Any], dict[str, Any]]) -> None:
        self._result = result
        self._decode = decode
        self.items = [decode(m) for m in result.items]

    def has_next(self) -> bool:
        return self._result.has_next()

    async def next(self) -> _SdkPage | None:
        nxt = await self._result.next()
        return _SdkPage(nxt, self._decode) if nxt is not None else None


class SdkDriver:
    """The channel operations done with direct ably-python SDK calls (test-only driver)."""

    def __init__(self, name: str, realtime: Any) -> None:
        self.name = name
        self.realtime = realtime
        self.raw = realtime.channels.get(name)
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._listeners: list[Any] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def client_id(self) -> str | None:
        return self.realtime.auth.client_id

    @property
    def attach_serial(self) -> str | None:
        return self.raw._RealtimeChannel__attach_serial

    async def publish(self, messages: Any) -> list[str]:
        from ably.types.message import Message

        batch = messages if isinstance(messages, list) else [messages]
        result = await self.raw.publish([Message(**_sdk_kwargs(m)) for m in batch])
        return list(result.serials)

    async def _op(self, method: str, message: dict) -> str:
        from ably.types.message import Message

        result = await getattr(self.raw, method)(Message(**_sdk_kwargs(message)))
        return result.version_serial

    async def append_message(self, message: dict) -> str:
        return await self._op("append_message", message)

    async def update_message(self, message: dict) -> str:
        return await self._op("update_message", message)

    async def delete_message(self, message: dict) -> str:
        return await self._op("delete_message", message)

    async def subscribe(self, listener: Any) -> None:
        self._listeners.append(listener)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._pump())
            await self.raw.subscribe(self._queue.put_nowait)  # sync listener keeps frame order

    async def _pump(self) -> None:
        while True:
            msg = await self._queue.get()
            for listener in list(self._listeners):
                listener(_sdk_to_dict(msg))

    async def detach(self) -> None:
        await self.raw.detach()

    async def history(self, *, limit: int = 100, direction: str = "backwards", until_attach: bool = False) -> Any:
        import ably
        from ably.types.message import Message

        if not until_attach:
            return _SdkPage(await self.raw.history(direction=direction, limit=limit), _sdk_to_dict)
        # The SDK has no until_attach: the REST request ably-js makes (ably-protocol.md §11).
        from urllib.parse import quote_plus

        path = f"/channels/{quote_plus(self.name, safe=':')}/messages"
        params = {"limit": limit, "direction": direction, "from_serial": self.attach_serial}
        result = await self.realtime.request("GET", path, ably.api_version, params=params)
        return _SdkPage(result, lambda raw: _sdk_to_dict(Message.from_encoded(raw)))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self.raw.unsubscribe(self._queue.put_nowait)


def _sdk_kwargs(m: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ours, theirs in (("name", "name"), ("data", "data"), ("extras", "extras"), ("serial", "serial")):
        if m.get(ours) is not None:
            out[theirs] = bytearray(m[ours]) if isinstance(m[ours], bytes) else m[ours]
    return out


def unique_name(prefix: str = "test") -> str:
    """A channel name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=KIND_NAMES)
async def channel_kind(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """One channel implementation (see ``KIND_NAMES``)."""
    kind: Any
    if request.param == "inprocess":
        kind = InProcessKind()
        try:
            yield kind
        finally:
            await kind.aclose()
        return
    from ai_transport.emulator import Emulator

    async with Emulator(port=0) as emu:
        kind = AblyEmulatorKind(emu.port) if request.param == "ably-emulator" else SdkEmulatorKind(emu.port)
        try:
            yield kind
        finally:
            await kind.aclose()


class Recorder:
    """Subscribes to a channel and records every delivery in order."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    def __call__(self, msg: dict[str, Any]) -> None:
        self.messages.append(msg)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate(messages)`` holds (fails the test after ``timeout`` seconds)."""

        async def _wait() -> None:
            while not predicate(self.messages):
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(_wait(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"timed out; recorded {len(self.messages)}: {self.messages!r}") from None

    async def wait_count(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait for at least ``n`` deliveries; return them all."""
        await self.wait_for(lambda ms: len(ms) >= n, timeout)
        return self.messages

    async def settle(self, quiet: float = 0.1) -> None:
        """Wait until nothing new arrived for ``quiet`` seconds."""
        while True:
            count = len(self.messages)
            await asyncio.sleep(quiet)
            if len(self.messages) == count:
                return


async def subscribed(channel: Any) -> Recorder:
    """A :class:`Recorder` subscribed to ``channel``."""
    rec = Recorder()
    await channel.subscribe(rec)
    return rec


async def all_history(channel: Any, *, limit: int = 100, direction: str = "backwards", **kw: Any) -> list[dict]:
    """Every history item, following pages."""
    page = await channel.history(limit=limit, direction=direction, **kw)
    items = list(page.items)
    while page.has_next():
        page = await page.next()
        assert page is not None
        items.extend(page.items)
    return items


def fold(deliveries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Fold live deliveries (creates, fragments, updates, deletes) into aggregates keyed by serial.

    Drops re-deliveries whose version is not newer than the one applied (as AI Transport does).
    """
    out: dict[str, dict[str, Any]] = {}
    for m in deliveries:
        serial = m["serial"]
        vs = (m.get("version") or {}).get("serial", serial)
        cur = out.get(serial)
        if cur is not None and vs <= cur["version"]["serial"]:
            continue
        if m["action"] == "message.append":
            assert cur is not None, f"fragment before its message: {m!r}"
            cur = dict(cur)
            cur["data"] = (cur.get("data") or type(m["data"])()) + m["data"]
            if "extras" in m:  # an append replaces extras wholesale
                cur["extras"] = m["extras"]
            else:
                cur.pop("extras", None)
            cur["version"] = m["version"]
            out[serial] = cur
        else:
            out[serial] = dict(m)
    return out


def essence(m: dict[str, Any]) -> tuple:
    """The parts of an aggregate a fold must reproduce."""
    return (m["serial"], m.get("name"), m.get("data"), m.get("extras"), m["version"]["serial"])
