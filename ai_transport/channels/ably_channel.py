"""``AblyChannel``: the :class:`~ai_transport.channels.channel.Channel` protocol over the real ``ably`` SDK.

Works unchanged against Ably's cloud (API key or token) and against the local emulator. It wraps an
``ably.AblyRealtime`` channel and works around the SDK 3.1.4 gotchas (``ably-protocol.md`` §11):

* the SDK's own listener is synchronous and only pushes into an :class:`asyncio.Queue`; one task per
  channel drains it and calls our listeners in order (the SDK would run coroutine listeners as
  separate, unordered tasks); we subscribe without a name filter so name-less append fragments
  arrive;
* appends / updates / deletes are awaited (an un-awaited SDK append coroutine sends nothing) and
  take :class:`ably.types.message.Message` objects;
* ``history(until_attach=True)`` (absent from the SDK) is a REST ``GET /channels/{name}/messages``
  with ``from_serial`` = the serial of the latest ATTACHED, exactly what ably-js sends; paging
  follows the ``Link: rel="next"`` headers;
* inbound SDK ``Message`` objects become plain dicts of :class:`InboundMessage` shape: ably-js action
  names, ``version`` dict, ``extras`` as received, ``data`` decoded (binary as ``bytes``);
* a message the SDK cannot decode (another member's ``encoding: "vcdiff"``, bad JSON, a non-string
  ``name``) is kept undecoded, live and in history, instead of failing its frame or history page
  (:mod:`.sdk_decoding`, applied to the SDK for the process on import).

REST calls (history) use the realtime client's own HTTP unless a separate ``rest`` client is given
(useful where the realtime and REST endpoints differ, e.g. a loopback emulator on a custom port).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote_plus, urlencode

from ..errors import AITransportError, ErrorCode, InvalidArgumentError, InvalidTypeError, type_name
from .budget import PublishBudget, budget_for
from .channel import InboundMessage, Listener, OutboundMessage, action_name
from .channel_base import ListenerDelivery, check_message_fields, check_message_serial
from .history import check_history_args
from .modes import MODE_FLAGS
from .presence_ably import AblyPresence
from .sdk_decoding import tolerate_sdk_decoding
from .state import ChannelStateChange

__all__ = [
    "AblyChannel",
    "AblyHistoryPage",
    "filter_sdk_close_noise",
    "from_ably_message",
    "to_ably_message",
    "wait_connected",
]


def _sdk_transport_close(context: dict[str, Any], exc: BaseException) -> bool:
    """The SDK's ``WebSocketTransport.close()`` task failing with its bare ``Exception()``: it sends
    a CLOSE on a transport whose websocket never opened (a connection given up while connecting)."""
    if type(exc) is not Exception or exc.args:
        return False
    task = context.get("future")
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    code = getattr(coro, "cr_code", None)
    return (getattr(coro, "__qualname__", None) == "WebSocketTransport.close"
            and "ably" in str(getattr(code, "co_filename", "")))


def _sdk_close_noise(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    exc = context.get("exception")
    if exc is not None and (type(exc).__module__.startswith("websockets") or _sdk_transport_close(context, exc)):
        logging.getLogger("ai_transport.channels.ably").debug(
            "ably SDK task ended on a closed websocket: %r", exc
        )
        return
    loop.default_exception_handler(context)


def filter_sdk_close_noise(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Keep the ably SDK's unretrieved task errors on a websocket the server closed (a
    ``ConnectionClosed`` traceback printed by asyncio when the emulator or Ably goes away), or that
    never opened (``WebSocketTransport.close()``'s bare ``Exception()`` when a connection is given
    up while connecting), out of the program's stderr; every other unhandled error still reaches
    asyncio's default handler.

    :meth:`AblyChannel.connect` installs it on the running loop when the loop has no exception
    handler of its own (an application's handler is never replaced).
    """
    target = loop or asyncio.get_running_loop()
    if target.get_exception_handler() is None:
        target.set_exception_handler(_sdk_close_noise)

logger = logging.getLogger("ai_transport.channels.ably_channel")


def _import_ably() -> Any:
    try:
        import ably
    except ImportError as exc:  # pragma: no cover - ably is a hard dependency
        raise AITransportError("the 'ably' package is required for AblyChannel", ErrorCode.INTERNAL_ERROR) from exc
    return ably


def _wrap_error(exc: BaseException, op: str) -> AITransportError:
    """An :class:`AITransportError` carrying an ``AblyException``'s code and status."""
    if isinstance(exc, AITransportError):
        return exc
    from ably.util.exceptions import AblyException

    # Only an AblyException's code is Ably's: other errors (a websockets ConnectionClosed, whose
    # ``code`` is a deprecated close code) become an internal error carrying their text.
    ably_error = isinstance(exc, AblyException)
    code = getattr(exc, "code", None) if ably_error else None
    status = getattr(exc, "status_code", None) if ably_error else None
    message = (getattr(exc, "message", None) if ably_error else None) or str(exc)
    if not isinstance(code, int):
        code = ErrorCode.INTERNAL_ERROR
    if not isinstance(status, int):
        status = None
    return AITransportError(f"unable to {op}; {message}", code, status, cause=exc)


def to_ably_message(message: OutboundMessage, *, op: str = "publish", need_serial: bool = False) -> Any:
    """Our outbound dict as an ``ably.types.message.Message``."""
    from ably.types.message import Message

    check_message_fields(message, op)
    if need_serial:
        check_message_serial(message, op)
    data = message.get("data")
    if isinstance(data, bytes):
        data = bytearray(data)
    return Message(
        name=message.get("name"),
        data=data,
        extras=message.get("extras"),
        serial=message.get("serial") if need_serial else None,
        client_id=message.get("clientId"),
        id=message.get("id"),
    )


def from_ably_message(msg: Any) -> InboundMessage:
    """An SDK ``Message`` (decoded) as our inbound dict."""
    out: dict[str, Any] = {}
    if msg.id is not None:
        out["id"] = msg.id
    if msg.name is not None:
        out["name"] = msg.name
    data = msg.data
    if isinstance(data, bytearray):
        data = bytes(data)
    out["data"] = data
    encoding = getattr(msg, "encoding", "")
    if encoding:
        out["encoding"] = encoding
    if msg.extras is not None:
        out["extras"] = msg.extras
    action = action_name(msg.action) if msg.action is not None else "message.create"
    out["action"] = action or "message.create"
    if msg.serial is not None:
        out["serial"] = msg.serial
    version = msg.version
    if version is not None:
        vd = version.as_dict() if hasattr(version, "as_dict") else dict(version)
        if "serial" not in vd and msg.serial is not None:
            vd["serial"] = msg.serial
        if "timestamp" not in vd and msg.timestamp is not None:
            vd["timestamp"] = msg.timestamp
        out["version"] = vd
    elif msg.serial is not None:
        out["version"] = {"serial": msg.serial, "timestamp": msg.timestamp}
    if msg.timestamp is not None:
        out["timestamp"] = msg.timestamp
    if msg.client_id is not None:
        out["clientId"] = msg.client_id
    if msg.connection_id is not None:
        out["connectionId"] = msg.connection_id
    return out  # type: ignore[return-value]


tolerate_sdk_decoding()  # (see the module docstring)


def _history_items(response: Any) -> list[Any]:
    """The messages of a history response, each decoded on its own (:mod:`.sdk_decoding` keeps
    one the SDK cannot decode); an item that is no message at all is left out and logged,
    never failing the page."""
    from ably.types.message import Message

    items = response.to_native()
    if not isinstance(items, list):
        return list(Message.from_encoded_array(items))  # (what the SDK makes of it, errors and all)
    out: list[Any] = []
    for item in items:
        try:
            out.append(Message.from_encoded(item))
        except Exception as exc:
            logger.warning("history item %r left out: %s", item if not isinstance(item, dict) else item.get("id"), exc)
    return out


class AblyHistoryPage:
    """One page of Ably history, items converted to inbound dicts."""

    def __init__(self, result: Any) -> None:
        self._result = result
        self.items: list[InboundMessage] = [from_ably_message(m) for m in result.items]

    def has_next(self) -> bool:
        """True when another page exists (Ably sent a ``rel="next"`` link)."""
        return bool(self._result.has_next())

    def is_last(self) -> bool:
        """True on the last page."""
        return not self.has_next()

    async def next(self) -> AblyHistoryPage | None:
        """The next page, or None."""
        if not self.has_next():
            return None
        try:
            result = await self._result.next()
        except Exception as exc:
            raise _wrap_error(exc, "get history") from exc
        return AblyHistoryPage(result) if result is not None else None


class _ModeFlag(int):
    """A channel mode bit as ably-python encodes modes (``mode.value``); covers the modes its
    ``ChannelMode`` enum lacks (LiveObjects)."""

    @property
    def value(self) -> int:
        """The flag bit."""
        return int(self)


class AblyChannel(ListenerDelivery):
    """A :class:`~ai_transport.channels.channel.Channel` on a real ``ably.AblyRealtime`` channel.

    Args:
        channel_name: the Ably channel name.
        realtime: a connected (or connecting) ``ably.AblyRealtime`` client.
        rest: optional ``ably.AblyRest`` used for REST calls (history); defaults to ``realtime``.
        owns_client: close ``realtime`` (and ``rest``) in :meth:`close`.
        publish_budget: the connection's :class:`~ai_transport.channels.budget.PublishBudget`
            (operations/s shared by every stream the encoder writes through any channel of
            ``realtime``). ``None`` (default): one budget per ``realtime`` client at 40/s; a number:
            that rate (``0`` = off) for this channel's own budget; or a budget object to share.
        channel_options: keyword arguments for ``realtime.channels.get`` (e.g. ``params``).
    """

    _log = logger

    def __init__(
        self,
        channel_name: str,
        realtime: Any,
        *,
        rest: Any = None,
        owns_client: bool = False,
        publish_budget: PublishBudget | float | None = None,
        **channel_options: Any,
    ) -> None:
        if not isinstance(channel_name, str) or not channel_name:
            raise InvalidArgumentError(
                "unable to create channel; channel_name must be a non-empty string", ErrorCode.INVALID_ARGUMENT
            )
        self.name = channel_name
        self.realtime = realtime
        self.rest = rest
        self._owns_client = owns_client
        self._channel_options = dict(channel_options)
        if publish_budget is None:
            publish_budget = budget_for(realtime)
        elif not isinstance(publish_budget, PublishBudget):
            publish_budget = PublishBudget(publish_budget)
        #: Operations/s this channel's connection may publish (read by the codec encoder).
        self.publish_budget: PublishBudget = publish_budget
        self.raw = realtime.channels.get(channel_name, **channel_options)
        self._listeners: list[Listener] = []
        self._queue: asyncio.Queue[Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._sdk_subscribed = False
        self._closed = False
        self.raw.on(self._on_sdk_state)
        self._presence: AblyPresence | None = None

    async def configure_session(self, modes: list[str] | None, agent: str | None) -> None:
        """Set what a session asks for when it attaches (before it subscribes): the ``agent``
        channel param and, when given, the channel ``modes`` (:mod:`~ai_transport.channels.modes`);
        on a channel already attached they apply at its next attach."""
        from ably.types.channeloptions import ChannelOptions

        params = dict(self._channel_options.get("params") or {})
        if agent:
            params["agent"] = agent
        flags = [_ModeFlag(MODE_FLAGS[m]) for m in modes or () if m in MODE_FLAGS]
        options = ChannelOptions(
            cipher=self._channel_options.get("cipher"),
            params=params or None,
            modes=flags or self._channel_options.get("modes"),
        )
        # Applied at the next ATTACH (a session configures before it attaches; a channel already
        # attached keeps its attachment: ably-python's re-attach of an attached channel can wait
        # for a state change that never comes).
        self.raw.set_options_without_reattach(options)

    @property
    def presence(self) -> AblyPresence:
        """This channel's presence set (the SDK's realtime presence; :mod:`~ai_transport.channels.presence`)."""
        if self._presence is None:
            self._presence = AblyPresence(self.raw, self.name, _wrap_error, self.publish_budget.pace)
        return self._presence

    @classmethod
    async def connect(
        cls,
        channel_name: str,
        *,
        key: str | None = None,
        token: str | None = None,
        client_id: str | None = None,
        rest_options: dict[str, Any] | None = None,
        channel_options: dict[str, Any] | None = None,
        publish_budget: PublishBudget | float | None = None,
        **client_options: Any,
    ) -> AblyChannel:
        """Open a new ``AblyRealtime`` connection (owned by the channel) and wrap ``channel_name``.

        ``key`` or ``token`` (or ``auth_url`` / ``auth_callback`` in ``client_options``)
        authenticate; ``client_id`` sets the identity. ``rest_options`` (if given) create a separate
        ``AblyRest`` for history with the same credentials plus those options. ``publish_budget``
        as for the constructor. Waits until connected.
        """
        ably = _import_ably()
        filter_sdk_close_noise()
        opts = dict(client_options)
        if token is not None:
            opts["token"] = token
        if client_id is not None:
            opts["client_id"] = client_id
        realtime = ably.AblyRealtime(key, **opts) if key is not None else ably.AblyRealtime(**opts)
        rest = None
        if rest_options is not None:
            ropts = {k: v for k, v in opts.items() if k in ("token", "client_id", "use_token_auth")}
            ropts.update(rest_options)
            rest = ably.AblyRest(key, **ropts) if key is not None else ably.AblyRest(**ropts)
        try:
            await wait_connected(realtime)
        except BaseException:
            await realtime.close()
            if rest is not None:
                await rest.close()
            raise
        return cls(
            channel_name,
            realtime,
            rest=rest,
            owns_client=True,
            publish_budget=publish_budget,
            **(channel_options or {}),
        )

    # -- identity / state -------------------------------------------------------------------

    @property
    def client_id(self) -> str | None:
        """The ``clientId`` of the connection: the one Ably confirmed, or (while the connection is
        still connecting, when ably-python knows none yet) the one the client was configured with
        (``client_id`` option, or its token details), which the server checks when it connects."""
        auth = self.realtime.auth
        cid = getattr(auth, "client_id", None)
        if not cid:
            options = getattr(auth, "auth_options", None)
            token = getattr(options, "token_details", None)
            cid = getattr(options, "client_id", None) or getattr(token, "client_id", None)
        return cid if isinstance(cid, str) and cid and cid != "*" else None

    @property
    def connection_id(self) -> str | None:
        """The Ably connection id (None until connected)."""
        return getattr(self.realtime.connection.connection_manager, "connection_id", None)

    @property
    def attach_serial(self) -> str | None:
        """The ``channelSerial`` of the latest ATTACHED (None before the first attach)."""
        return getattr(self.raw, "_RealtimeChannel__attach_serial", None)

    @property
    def state(self) -> str:
        """The SDK channel state as a string (``"attached"``, ``"detached"`` …)."""
        st = self.raw.state
        return str(getattr(st, "value", st))

    # -- attach / subscribe -----------------------------------------------------------------

    async def attach(self) -> None:
        """Attach (idempotent)."""
        self._check_open("attach")
        try:
            await self.raw.attach()
        except Exception as exc:
            raise _wrap_error(exc, "attach") from exc

    async def detach(self) -> None:
        """Detach: the SDK stops delivering; queued deliveries are dropped."""
        try:
            await self.raw.detach()
        except Exception as exc:
            raise _wrap_error(exc, "detach") from exc
        if self._queue is not None:
            while not self._queue.empty():
                self._queue.get_nowait()

    def _on_sdk_state(self, change: Any = None, *_: Any) -> None:
        # Every SDK channel event (state changes and ``update``: an ATTACHED while attached).
        if change is None or self._closed:
            return
        try:
            current = getattr(change, "current", None)
            previous = getattr(change, "previous", None)
            state = ChannelStateChange(
                str(getattr(current, "value", current)),
                str(getattr(previous, "value", previous)),
                bool(getattr(change, "resumed", False)),
                getattr(change, "reason", None),
            )
        except Exception:
            logger.debug("unreadable channel state change %r", change, exc_info=True)
            return
        self._emit_state(state)

    def _on_sdk_message(self, message: Any) -> None:
        # Synchronous on purpose: the SDK calls it in frame order; the queue keeps that order.
        if self._queue is not None and self._listeners:
            self._queue.put_nowait((message, tuple(self._listeners)))

    async def _deliver_loop(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            item = await queue.get()
            if isinstance(item, ChannelStateChange):
                self._call_state_listeners(item)
                continue
            message, listeners = item
            try:
                inbound = from_ably_message(message)
            except Exception:
                logger.exception("skipping an undecodable message on channel %r", self.name)
                continue
            await self._call_listeners(listeners, functools.partial(dict, inbound))

    async def subscribe(self, listener: Listener) -> None:
        """Attach if needed and deliver every message, in order, to ``listener``."""
        self._add_listener(listener)
        if not self._sdk_subscribed:
            self._sdk_subscribed = True
            try:
                await self.raw.subscribe(self._on_sdk_message)
            except Exception as exc:
                self._sdk_subscribed = False
                raise _wrap_error(exc, "subscribe") from exc
        else:
            await self.attach()

    # -- operations -------------------------------------------------------------------------

    def _check_open(self, op: str) -> None:
        if self._closed:
            raise AITransportError(f"unable to {op}; channel '{self.name}' is closed", 90001, 400)

    async def publish(self, messages: OutboundMessage | Sequence[OutboundMessage]) -> list[str]:
        """Publish one message or a list (one ProtocolMessage, atomic); return the serials."""
        self._check_open("publish")
        if isinstance(messages, dict):
            batch = [messages]
        elif isinstance(messages, (list, tuple)):
            batch = list(messages)
        else:
            raise InvalidTypeError(
                f"unable to publish; messages must be a dict or a list of dicts, got {type_name(messages)}",
                ErrorCode.INVALID_ARGUMENT,
            )
        sdk_messages = [to_ably_message(m) for m in batch]
        await self.publish_budget.pace(len(sdk_messages))  # Ably counts each message of a batch
        try:
            result = await self.raw.publish(sdk_messages)
        except Exception as exc:
            raise _wrap_error(exc, "publish") from exc
        serials = list(getattr(result, "serials", None) or [])
        return list(serials)

    async def _mutate(self, message: OutboundMessage, op: str, method: str) -> str:
        self._check_open(op)
        sdk_message = to_ably_message(message, op=op, need_serial=True)
        await self.publish_budget.pace()
        try:
            result = await getattr(self.raw, method)(sdk_message)
        except Exception as exc:
            raise _wrap_error(exc, op) from exc
        version_serial = getattr(result, "version_serial", None)
        if not version_serial:
            raise AITransportError(
                f"unable to {op}; no version serial returned for serial '{message['serial']}'",
                ErrorCode.INTERNAL_ERROR,
            )
        return version_serial

    async def append_message(self, message: OutboundMessage) -> str:
        """Append ``data`` to the message at ``message["serial"]``; return the new version serial."""
        return await self._mutate(message, "append message", "append_message")

    async def update_message(self, message: OutboundMessage) -> str:
        """Replace the message at ``message["serial"]``; return the new version serial."""
        return await self._mutate(message, "update message", "update_message")

    async def delete_message(self, message: OutboundMessage) -> str:
        """Delete the message at ``message["serial"]``; return the new version serial."""
        return await self._mutate(message, "delete message", "delete_message")

    async def get_message(self, serial: str) -> InboundMessage:
        """The aggregate (latest version) of the message at ``serial`` (REST)."""
        try:
            msg = await self.raw.get_message(serial)
        except Exception as exc:
            raise _wrap_error(exc, "get message") from exc
        return from_ably_message(msg)

    async def history(
        self, *, limit: int = 100, direction: str = "backwards", until_attach: bool = False
    ) -> AblyHistoryPage:
        """Stored aggregates (REST), newest-first by default, paged by ``limit`` (1..1000).

        ``until_attach`` restricts to messages at or before the attach point (the channel must be
        attached), as ably-js ``history({untilAttach: true})`` does.
        """
        from ably.http.paginatedresult import PaginatedResult

        check_history_args(limit, direction)
        params: dict[str, str] = {"direction": direction, "limit": str(limit)}
        if until_attach:
            serial = self.attach_serial
            if self.state != "attached" or not serial:
                raise AITransportError(
                    "unable to get history; until_attach was specified but the channel is not attached "
                    "(or no attach serial is known)",
                    ErrorCode.BAD_REQUEST,
                    400,
                )
            params["from_serial"] = serial
        client = self.rest if self.rest is not None else self.realtime
        path = f"/channels/{quote_plus(self.name, safe=':')}/messages?{urlencode(params)}"
        try:
            result = await PaginatedResult.paginated_query_with_request(
                client.http, _history_request(client, path), _history_items
            )
        except Exception as exc:
            raise _wrap_error(exc, "get history") from exc
        return AblyHistoryPage(result)

    async def close(self) -> None:
        """Stop delivery; close the client too when this channel owns it."""
        if self._closed:
            return
        self._closed = True
        self._listeners.clear()
        try:
            self.raw.off(self._on_sdk_state)
        except Exception:
            logger.debug("state listener removal failed", exc_info=True)
        if self._sdk_subscribed:
            try:
                self.raw.unsubscribe(self._on_sdk_message)
            except Exception:
                logger.debug("unsubscribe failed", exc_info=True)
        await self._stop_delivery()
        if self._presence is not None:
            await self._presence._stop()
        if self._owns_client:
            await self.realtime.close()
            if self.rest is not None:
                await self.rest.close()

    def __repr__(self) -> str:
        return f"AblyChannel(name={self.name!r}, client_id={self.client_id!r}, state={self.state!r})"


def _history_request(client: Any, path: str) -> Any:
    """The REST request of a history page. ably-python authorizes every REST request of a realtime
    client that uses tokens anew, and sends each new authorization to the realtime connection
    (``AUTH``: the server answers ``CONNECTED``, and the SDK then re-attaches every channel of the
    connection and re-enters their presence members, none of it under the publish budget). With a
    token the client already holds and that is still valid, the request carries it itself."""
    from ably.http.http import Request

    auth: Any = getattr(client, "auth", None)
    token = getattr(auth, "token_details", None) if auth is not None else None
    if (
        token is not None
        and getattr(auth, "auth_mechanism", None) == "TOKEN"
        and not auth.token_details_has_expired()
        and isinstance(getattr(auth, "token_credentials", None), str)
    ):
        headers = {"Authorization": f"Bearer {auth.token_credentials}"}
        return Request("GET", path, headers=headers, skip_auth=True)
    return Request("GET", path, headers={}, skip_auth=False)


async def wait_connected(realtime: Any, timeout: float = 30.0) -> None:
    """Wait until the ``ably.AblyRealtime`` ``realtime`` is connected (an :class:`AITransportError`
    if its connection fails, is closed or suspended, or after ``timeout`` seconds)."""
    conn = realtime.connection

    def _state() -> str:
        st = conn.state
        return str(getattr(st, "value", st))

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while _state() != "connected":
        if _state() in ("failed", "closed", "suspended"):
            reason = getattr(conn, "error_reason", None)
            raise _wrap_error(reason or AITransportError(f"connection {_state()}", 80000, 400), "connect")
        if loop.time() > deadline:
            raise AITransportError("unable to connect; timed out", 80003, 408)
        await asyncio.sleep(0.01)
