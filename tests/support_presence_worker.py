"""A real agent worker process for presence fault tests.

``python support_presence_worker.py PORT CHANNEL GRACE_MS``: an :class:`AgentSession` over
:class:`AblyChannel` (ably-python) on the emulator at ``PORT``, connected as ``agent`` (so it
enters presence), asking the emulator to keep its members ``GRACE_MS`` after its transport drops.
Prints ``ready <connectionId>`` and then waits to be killed.
"""

from __future__ import annotations

import asyncio
import sys

from ai_transport.channels import AblyChannel
from ai_transport.emulator import ably_realtime
from ai_transport.sessions.agent import AgentSession


async def main(port: int, channel: str, grace_ms: int) -> None:
    """Connect, enter presence, report, then idle forever."""
    realtime = ably_realtime(port, client_id="agent", transport_params={"remainPresentFor": str(grace_ms)})
    session = AgentSession(AblyChannel(channel, realtime), presence_data={"worker": "w1"})
    await session.connect()
    assert session.agent_presence.entered
    print("ready", realtime.connection.connection_manager.connection_id, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
