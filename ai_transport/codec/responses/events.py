"""Output events before encoding: plain dicts from SDK objects, and item-id normalisation (pure).

Two things happen to an output event before the encoder maps it to the wire:

1. :func:`event_to_dict` accepts the ``openai`` SDK's typed stream events (pydantic models) as well as
   plain dicts. A model is dumped with ``exclude_unset=True`` and ``mode="json"``, so the dict holds
   exactly the fields the API sent (values equal to the wire JSON; key order follows the SDK model's
   field order, so JSON-valued headers such as ``part`` may order keys differently from the raw
   stream — they parse to the same value).
2. :class:`ItemIdNormaliser` repairs streams from proxies that rotate item ids between the events of
   one item (``output_item.added`` id != delta ``item_id`` != done id). 0.8.0 keys streams by item id
   and fails on such a stream at the first delta (``unable to append to stream; no active stream for
   streamId '…'``). The normaliser keys items by ``output_index`` and rewrites every event's item id
   to the first id seen at that index, so the wire stays 0.8.0-compatible and the item folds as one.
   Events whose ids are already consistent pass through as the *same object*, so their wire is
   byte-identical to 0.8.0's.

   Assumption (true of the Responses API): within one response an ``output_index`` names one item.
   A new response is recognised by ``response.created`` / ``response.queued`` and a new item by its
   ``response.output_item.added``; a hand-made stream that reuses an index for a different item
   without either would be merged — pass ``normalise_item_ids=False`` to the encoder for such input.
"""

from __future__ import annotations

from typing import Any

from ..._shapes import MAPPING
from ...errors import InvalidTypeError, type_name

__all__ = ["ItemIdNormaliser", "event_to_dict"]


def event_to_dict(event: Any, *, what: str = "output event") -> dict[str, Any]:
    """A plain ``dict`` for ``event``: a mapping as is, an ``openai`` SDK model dumped as sent.

    Raises :class:`~ai_transport.errors.InvalidTypeError` (40003) for anything else.
    """
    if isinstance(event, dict):
        return event
    if isinstance(event, MAPPING):
        return dict(event)
    to_dict = getattr(event, "to_dict", None)
    model_dump = getattr(event, "model_dump", None)
    if callable(model_dump):
        # openai's BaseModel.to_dict(mode="json") == model_dump(mode="json", by_alias=True,
        # exclude_unset=True): the fields present in the API JSON, extras included.
        if callable(to_dict):
            try:
                out = to_dict(mode="json")
            except TypeError:
                out = model_dump(mode="json", by_alias=True, exclude_unset=True)
        else:
            out = model_dump(mode="json", by_alias=True, exclude_unset=True)
        if isinstance(out, dict):
            return out
    raise InvalidTypeError(
        f"unable to publish; {what} must be an object (dict or openai model), got {type_name(event)}"
    )


# Event types that begin a new response: output indices restart at 0 after them.
_RESPONSE_STARTS = frozenset({"response.created", "response.queued"})


class ItemIdNormaliser:
    """Rewrite item ids so every event of one output item carries the first id seen for it.

    Keyed by ``output_index`` within one response. ``response.created`` (and ``response.queued``)
    start a new response, forgetting all indices; ``response.output_item.added`` starts a new item at
    its index, recording its id. Any other event carrying an ``output_index`` and an item id
    (``item_id`` on part/delta/done events, ``item.id`` on ``output_item.done``) records the id when the
    index is new and is rewritten to the recorded id otherwise. Events are never mutated: a rewritten
    event is a shallow copy (with a copied ``item`` where that changes); an event needing no rewrite is
    returned unchanged (the same object).
    """

    def __init__(self) -> None:
        self._ids: dict[Any, Any] = {}

    def reset(self) -> None:
        """Forget every recorded id (a new response begins)."""
        self._ids.clear()

    def normalise(self, event: dict[str, Any]) -> dict[str, Any]:
        """The event with its item id rewritten to the first id seen at its ``output_index``."""
        etype = event.get("type")
        if etype in _RESPONSE_STARTS:
            self.reset()
            return event
        index = event.get("output_index")
        if not isinstance(index, int) or isinstance(index, bool):
            return event
        item = event.get("item")
        if item is not None and isinstance(item, MAPPING) and "item_id" not in event:
            current = item.get("id")
            if current is None:
                return event
            if etype == "response.output_item.added" or index not in self._ids:
                self._ids[index] = current
                return event
            first = self._ids[index]
            if first == current:
                return event
            out = dict(event)
            new_item = dict(item)
            new_item["id"] = first
            out["item"] = new_item
            return out
        current = event.get("item_id")
        if current is None:
            return event
        if index not in self._ids:
            self._ids[index] = current
            return event
        first = self._ids[index]
        if first == current:
            return event
        out = dict(event)
        out["item_id"] = first
        return out
