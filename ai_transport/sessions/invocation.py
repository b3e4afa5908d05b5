"""Invocation: the JSON body a client POSTs to an agent endpoint to wake a run (``Invocation``).

``{"inputEventId": ..., "sessionName": ...}`` — the ``event-id`` of the triggering ``ai-input`` and
the channel (session) name. Run identity, parent and the publisher live on the channel; the agent
reads them off the input it locates, so they are not part of the body.

An ``event-id`` belongs to its first publisher in channel serial order, so a worker paging history
newest first cannot act on the first match it sees (a member may have copied the id into a later
wire of its own): it reads history until no older wire can own the id. ``input_client_id``
(``inputClientId``, optional, not part of 0.8.0's body) binds the trigger to its publisher as well:
an endpoint that knows who invoked it (its own authentication) sets it, and the worker then stops at
the first match by that publisher.
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
    and optionally ``input_client_id`` (``inputClientId``): the trigger's publisher."""

    input_event_id: str
    session_name: str
    input_client_id: str | None = None

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
        client_id = data.get("inputClientId")
        if client_id is not None and not isinstance(client_id, str):
            raise InvalidTypeError(f"invocation.inputClientId must be a string, got {type_name(client_id)}")
        return cls(values[0], values[1], client_id)

    def to_json(self) -> dict[str, str]:
        """The JSON body ``{"inputEventId", "sessionName"}`` (and ``inputClientId`` when set;
        round-trips through :meth:`from_json`)."""
        body = {"inputEventId": self.input_event_id, "sessionName": self.session_name}
        if self.input_client_id is not None:
            body["inputClientId"] = self.input_client_id
        return body
