"""Invocation: the JSON body a client POSTs to an agent endpoint to wake a run (``Invocation``).

``{"inputEventId": ..., "sessionName": ...}`` — the ``event-id`` of the triggering ``ai-input`` and
the channel (session) name. Run identity, parent and the publisher live on the channel; the agent
reads them off the input it locates, so they are not part of the body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidTypeError, type_name

__all__ = ["Invocation"]


@dataclass(frozen=True)
class Invocation:
    """The wake-up body: ``input_event_id`` (``inputEventId``) and ``session_name`` (``sessionName``)."""

    input_event_id: str
    session_name: str

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
        return cls(values[0], values[1])

    def to_json(self) -> dict[str, str]:
        """The JSON body ``{"inputEventId", "sessionName"}`` (round-trips through :meth:`from_json`)."""
        return {"inputEventId": self.input_event_id, "sessionName": self.session_name}
