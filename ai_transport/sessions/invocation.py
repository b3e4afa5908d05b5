"""Invocation: the JSON body a client POSTs to an agent endpoint to wake a run (``Invocation``).

``{"inputEventId": ..., "sessionName": ...}`` — the ``event-id`` of the triggering ``ai-input`` and
the channel (session) name. Run identity, parent and the publisher live on the channel; the agent
reads them off the input it locates, so they are not part of the body.

An ``event-id`` belongs to its first publisher in channel serial order, so a worker paging history
newest first cannot act on the first match it sees (a member may have copied the id into a later
wire of its own): it reads history until no older wire can own the id. ``input_client_id``
(``inputClientId``, optional, not part of 0.8.0's body) binds the trigger to its publisher as well:
an endpoint that knows who invoked it (its own authentication) sets it, and the worker then stops at
the first match by that publisher. ``input_serial`` (``inputSerial``, optional, not part of 0.8.0's
body) binds it to one wire: the worker stops at the wire with that serial carrying the id.

Cost of locating the trigger: bound, the pages down to the trigger (about one when it is the newest
thing on the channel); unbound (what a 0.8.0 client POSTs), once the id is seen, history to its
start (one page per page size of messages on the channel), so a copy some other publisher made of
the id is never answered. A binding names what to answer: bound to mallory (her authenticated id)
or to the serial of a wire of hers, the worker answers only her wire, never alice's. A 0.8.0 agent
ignores both fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidTypeError, type_name

__all__ = ["Invocation"]


@dataclass(frozen=True)
class Invocation:
    """The wake-up body: ``input_event_id`` (``inputEventId``) and ``session_name`` (``sessionName``),
    and optionally ``input_client_id`` (``inputClientId``): the trigger's publisher, and
    ``input_serial`` (``inputSerial``): the trigger wire's channel serial."""

    input_event_id: str
    session_name: str
    input_client_id: str | None = None
    input_serial: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Invocation:
        """Build from the JSON body ``{inputEventId, sessionName}`` (validated, field named on error)."""
        if not isinstance(data, Mapping):
            raise InvalidTypeError(f"invocation must be an object, got {type_name(data)}")
        values = []
        for key in ("inputEventId", "sessionName"):
            value = data.get(key)
            if not isinstance(value, str):
                raise InvalidTypeError(f"invocation.{key} must be a string, got {type_name(value)}")
            values.append(value)
        optional: list[str | None] = []
        for key in ("inputClientId", "inputSerial"):
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise InvalidTypeError(f"invocation.{key} must be a string, got {type_name(value)}")
            optional.append(value)
        return cls(values[0], values[1], optional[0], optional[1])

    def to_json(self) -> dict[str, str]:
        """The JSON body ``{"inputEventId", "sessionName"}`` (and ``inputClientId`` /
        ``inputSerial`` when set; round-trips through :meth:`from_json`)."""
        body = {"inputEventId": self.input_event_id, "sessionName": self.session_name}
        if self.input_client_id is not None:
            body["inputClientId"] = self.input_client_id
        if self.input_serial is not None:
            body["inputSerial"] = self.input_serial
        return body
