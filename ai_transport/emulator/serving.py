"""What every listening server of the emulator shares: an aiohttp application on one TCP port.

:class:`Serving` binds ``host:port`` (0 = any free port) with aiohttp's :class:`~aiohttp.web.AppRunner`
and :class:`~aiohttp.web.TCPSite`, in the caller's event loop; ``async with``, ``serve_forever`` and a
graceful ``stop`` (listening stops, open keep-alive connections close, handlers still running get
:data:`SHUTDOWN_TIMEOUT` seconds). aiohttp parses HTTP/1.1 (keep-alive, ``Content-Length`` and
chunked bodies, header limits) and serves websockets on the same port.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from typing_extensions import Self

from .._serving import listen

__all__ = ["MAX_BODY", "MAX_HEAD", "SHUTDOWN_TIMEOUT", "Serving"]

#: The longest request line or header line accepted (431 / 400 past it).
MAX_HEAD = 64 * 1024
#: The largest request body accepted (413 past it).
MAX_BODY = 16 * 1024 * 1024
#: Seconds ``stop()`` lets running handlers finish before they are cancelled.
SHUTDOWN_TIMEOUT = 2.0


class Serving:
    """Mixin for a server on one aiohttp application: subclasses build it in :meth:`make_app`."""

    host: str
    port: int
    _requested_port: int
    _runner: web.AppRunner | None = None

    def make_app(self) -> web.Application:
        """The aiohttp application to serve."""
        raise NotImplementedError

    async def start(self) -> Any:
        """Bind and start serving."""
        await self._listen()
        return self

    async def stop(self) -> None:
        """Stop serving."""
        await self._close()

    async def _listen(self) -> None:
        """Bind ``host:_requested_port`` and set :attr:`port` (raises OSError / ValueError as bind does)."""
        self._runner, self.port = await listen(
            self.make_app(),
            self.host,
            self._requested_port,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
            max_line_size=MAX_HEAD,
            max_field_size=MAX_HEAD,
        )

    async def _close(self) -> None:
        """Stop listening, close idle connections, give running handlers their shutdown time."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        """Start (if needed) and serve until cancelled."""
        if self._runner is None:
            await self.start()
        await asyncio.Event().wait()
