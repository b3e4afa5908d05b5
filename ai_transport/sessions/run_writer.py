"""The writer an agent run hands its encoders: the channel, plus what the run must know of its writes.

Every write passes the run's lease fence first (:meth:`~.claims.RunLease.ensure`: nothing leaves
once another worker took the run over). It records the serials the run's writes produced (so :meth:`~.agent_run.AgentRun.drain` waits for
their echo), tags the encoder's recovery updates (0.8.0 calls no hook for them, :mod:`~ai_transport.conversation.signing`), and
tells :mod:`~ai_transport.conversation.own_streams` what the run wrote to each stream, publishing the restoring update when a
stream someone else appended to closes.
"""

from __future__ import annotations

from typing import Any

from ..codec.headers import transport_headers

__all__ = ["RunWriter"]


class RunWriter:
    """The writer an :class:`~.agent_run.AgentRun` hands its encoders (see the module)."""

    def __init__(self, run: Any) -> None:
        self._run = run
        self._channel = run.session.channel
        self._own = run.session.own_streams
        #: The channel's publish budget, so the encoder coalesces under it (None: no budget).
        self.publish_budget = getattr(self._channel, "publish_budget", None)

    async def publish(self, message: Any) -> Any:
        """Publish ``message`` (a stream's create is remembered as the run's own stream)."""
        await self._run.lease.ensure()  # the fence: nothing leaves once another worker took over
        serials = await self._channel.publish(message)
        for serial in serials or ():
            self._run._note(serial)
        if isinstance(message, dict) and serials and transport_headers(message.get("extras")).get("stream") == "true":
            self._own.started(self._run, serials[0], message)
        return serials

    async def append_message(self, message: Any) -> Any:
        """Append; a closing append of a stream someone else wrote into is followed by the restore."""
        await self._run.lease.ensure()
        version = await self._channel.append_message(message)
        self._run._note(version)
        if (restore := self._own.appended(message.get("serial"), message)) is not None:
            await self._run.session.restore_stream(restore)  # someone else wrote into it: undo that
        return version

    async def update_message(self, message: Any) -> Any:
        """The encoder's recovery of a failed stream (its whole text), tagged with a key."""
        self._run.session.integrity.sign_update(message)  # the encoder hook is not called for it (0.8.0)
        await self._run.lease.ensure()
        version = await self._channel.update_message(message)
        self._run._note(version)
        self._own.replaced(message.get("serial"), message)
        return version
