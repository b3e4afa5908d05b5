"""What the channel implementations (:mod:`.memory`, :mod:`.ably_channel`) share.

* :class:`ListenerDelivery`: one asyncio task per channel takes ``(message, listeners)`` from a
  queue and calls the listeners in order, awaiting each one that returns an awaitable; a listener
  error is logged, never stops delivery.
* :func:`check_message_fields` / :func:`check_message_serial`: the outbound message checks both make.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from ..errors import ErrorCode, InvalidArgumentError, InvalidTypeError, type_name
from .channel import Listener
from .state import ChannelStateChange, StateListener

__all__ = ["ListenerDelivery", "check_message_fields", "check_message_serial"]


def check_message_fields(message: Any, op: str) -> None:
    """Raise :class:`~ai_transport.errors.InvalidTypeError` (40003) unless ``message`` is a dict whose
    ``name`` (if any) is a string and ``extras`` (if any) a dict."""
    if not isinstance(message, dict):
        raise InvalidTypeError(
            f"unable to {op}; message must be a dict, got {type_name(message)}", ErrorCode.INVALID_ARGUMENT
        )
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidTypeError(
            f"unable to {op}; message.name must be a string, got {type_name(name)}",
            ErrorCode.INVALID_ARGUMENT,
        )
    extras = message.get("extras")
    if extras is not None and not isinstance(extras, dict):
        raise InvalidTypeError(
            f"unable to {op}; message.extras must be a dict, got {type_name(extras)}",
            ErrorCode.INVALID_ARGUMENT,
        )


def check_message_serial(message: Mapping[str, Any], op: str) -> None:
    """Raise :class:`~ai_transport.errors.InvalidArgumentError` (40003) unless ``message["serial"]``
    is a non-empty string (the target of an update / append / delete)."""
    serial = message.get("serial")
    if not isinstance(serial, str) or not serial:
        raise InvalidArgumentError(
            f"unable to {op}; message.serial must be a non-empty string", ErrorCode.INVALID_ARGUMENT
        )


class ListenerDelivery:
    """Mixin: the listener list, the delivery queue and task of a channel.

    The channel sets ``name``, ``_listeners = []``, ``_queue = None``, ``_task = None`` and ``_log``
    (its module's logger), and provides ``_check_open(op)`` and ``_deliver_loop()`` (which drains
    ``_queue`` and hands each entry to :meth:`_call_listeners`).
    """

    _log: ClassVar[logging.Logger]
    name: str
    _listeners: list[Listener]
    _queue: asyncio.Queue[Any] | None
    _task: asyncio.Task[None] | None

    def _check_open(self, op: str) -> None:
        raise NotImplementedError

    async def _deliver_loop(self) -> None:
        raise NotImplementedError

    def on_state_change(self, listener: StateListener) -> Callable[[], None]:
        """Call ``listener(change)`` on every :class:`~ai_transport.channels.state.ChannelStateChange`
        (in order with message delivery); returns a function that removes it."""
        if not callable(listener):
            raise InvalidTypeError(
                f"unable to listen to state changes; listener must be callable, got {type_name(listener)}",
                ErrorCode.INVALID_ARGUMENT,
            )
        listeners = self.__dict__.setdefault("_state_listeners", [])
        listeners.append(listener)

        def off() -> None:
            if listener in listeners:
                listeners.remove(listener)

        return off

    def _emit_state(self, change: ChannelStateChange) -> None:
        """Report ``change``: through the delivery queue when one runs (keeps message order), else now."""
        if not self.__dict__.get("_state_listeners"):
            return
        if self._queue is not None and self._task is not None:
            self._queue.put_nowait(change)
        else:
            self._call_state_listeners(change)

    def _call_state_listeners(self, change: ChannelStateChange) -> None:
        for listener in list(self.__dict__.get("_state_listeners", ())):
            try:
                listener(change)
            except Exception:
                self._log.exception("state listener raised on channel %r", self.name)

    def _add_listener(self, listener: Listener) -> None:
        """Validate ``listener``, start the delivery task if needed and register the listener."""
        if not callable(listener):
            raise InvalidTypeError(
                f"unable to subscribe; listener must be callable, got {type_name(listener)}",
                ErrorCode.INVALID_ARGUMENT,
            )
        self._check_open("subscribe")
        if self._task is None:
            self._queue = asyncio.Queue()
            self._task = asyncio.get_running_loop().create_task(self._deliver_loop())
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener | None = None) -> None:
        """Remove one listener (every registration of it), or all listeners."""
        if listener is None:
            self._listeners.clear()
        else:
            self._listeners = [x for x in self._listeners if x is not listener]

    async def _call_listeners(self, listeners: Iterable[Listener], make_message: Callable[[], Any]) -> None:
        """Call each of ``listeners`` still registered with a fresh ``make_message()``, in order."""
        for listener in listeners:
            for registered in self._listeners:
                if registered is listener:
                    break
            else:
                continue  # removed since the message was queued
            try:
                result = listener(make_message())
                if result is not None and inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                self._log.exception("listener raised on channel %r", self.name)

    async def _stop_delivery(self) -> None:
        """Cancel the delivery task and wait for it to finish."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
