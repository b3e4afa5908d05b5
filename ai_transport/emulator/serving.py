"""What every listening server of the emulator shares: ``async with``, and serving until cancelled."""

from __future__ import annotations

import asyncio
from typing import Any

from typing_extensions import Self

__all__ = ["Serving"]


class Serving:
    """Mixin for a server with ``start()`` / ``stop()`` and an ``asyncio`` server in ``_server``."""

    _server: asyncio.base_events.Server | None

    async def start(self) -> Any:
        """Bind and start serving."""
        raise NotImplementedError

    async def stop(self) -> None:
        """Stop serving."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        """Start (if needed) and serve until cancelled."""
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()
