"""Binding an aiohttp application on ``host:port``: the one way every server of the project listens.

:func:`listen` is what the emulator (:mod:`ai_transport.emulator.serving`), the local Responses server
and the page examples share: an :class:`~aiohttp.web.AppRunner` without signal handlers or access log,
a :class:`~aiohttp.web.TCPSite` in the caller's event loop (port 0 picks a free port), and nothing left
behind when the bind fails.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

__all__ = ["listen"]


async def listen(app: web.Application, host: str, port: int, **runner_options: Any) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port``; return the runner (``await runner.cleanup()`` stops it) and the
    bound port. Raises what the bind raises (``OSError`` for a port in use) after cleaning up."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None, **runner_options)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, int(runner.addresses[0][1])
