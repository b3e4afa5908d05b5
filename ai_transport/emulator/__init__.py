"""A local Ably-compatible server (realtime WebSocket + REST on one port) for tests and development.

The unmodified ably-python 3.1.4 and ably-js 2.x SDKs connect, attach, publish (ACK serials),
subscribe, append / update / delete (Ably mutable messages), get messages and versions, and read
history against it. Start it in-process::

    async with Emulator(port=0) as emu:
        client = ably_realtime(emu.port, client_id="alice")

or in a thread (``with EmulatorThread() as emu: …``), or from the shell with
``ai-transport emulator`` / ``python -m ai_transport.emulator`` (port 8090). :func:`connect_info` gives ably-js options.
"""

from __future__ import annotations

from .auth import DEFAULT_KEY
from .client import ably_realtime, ably_rest, client_options, connect_info, endpoint_for, request_token
from .limits import RateLimits
from .protocol import EmulatorError
from .server import Emulator, EmulatorThread

__all__ = [
    "DEFAULT_KEY",
    "Emulator",
    "EmulatorError",
    "EmulatorThread",
    "RateLimits",
    "ably_realtime",
    "ably_rest",
    "client_options",
    "connect_info",
    "endpoint_for",
    "request_token",
]
