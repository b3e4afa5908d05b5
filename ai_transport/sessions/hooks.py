"""What a run's hooks receive (``RunHooks`` of 0.8.0): :class:`CancelRequest` for ``on_cancel`` and the
external abort ``signal``.

``hooks`` of :meth:`~ai_transport.sessions.agent.AgentSession.create_run`:

* ``signal``: an :class:`asyncio.Event` (the HTTP request's disconnect, a function timeout...):
  setting it cancels the run exactly as an accepted client ``ai-cancel`` does — ``run.abort_signal``
  is set, a ``pipe`` in flight ends ``cancelled``, ``start()`` fails with 40033.
* ``on_cancel(request: CancelRequest) -> bool`` (sync or async): vetoes a client's cancel.
* ``on_cancelled(write)``, ``on_error(err)``, ``on_ably_message(message)``, ``on_steer()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError

__all__ = ["HOOK_NAMES", "CancelRequest", "link_signal", "validate_hooks"]

#: The hooks a run accepts.
HOOK_NAMES = frozenset(
    {"signal", "on_ably_message", "on_cancelled", "on_cancel", "on_error", "on_steer"}
)


@dataclass(frozen=True)
class CancelRequest:
    """What ``on_cancel`` receives (``CancelRequest`` of 0.8.0): the raw ``ai-cancel`` message and the
    id of the run it cancels."""

    message: Mapping[str, Any]
    run_id: str


def validate_hooks(hooks: Mapping[str, Any]) -> dict[str, Any]:
    """``hooks`` as a dict, or a 40003 naming the bad entry."""
    out = dict(hooks)
    for name, value in out.items():
        if name not in HOOK_NAMES:
            raise InvalidArgumentError(
                f"unable to create run; unknown hook hooks[{name!r}] (one of {', '.join(sorted(HOOK_NAMES))})"
            )
        if name == "signal":
            if value is not None and not isinstance(value, asyncio.Event):
                raise InvalidArgumentError("unable to create run; hooks['signal'] must be an asyncio.Event")
        elif value is not None and not callable(value):
            raise InvalidArgumentError(f"unable to create run; hooks[{name!r}] must be callable")
    return out


def link_signal(external: Any, internal: asyncio.Event) -> Callable[[], None]:
    """Set ``internal`` when ``external`` (an :class:`asyncio.Event` or None) is set, now or later;
    returns the function that unlinks."""
    if not isinstance(external, asyncio.Event):
        return lambda: None
    if external.is_set():
        internal.set()
        return lambda: None

    async def follow() -> None:
        await external.wait()
        internal.set()

    task = asyncio.ensure_future(follow())

    def unlink() -> None:
        task.cancel()

    return unlink
