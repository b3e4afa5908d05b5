"""Batch publish (``POST /messages``): one or more specs ``{channels, messages}`` published per channel.

Pure over a ``publish(channel, messages, message_id)`` callable (the REST publish path, which
raises :class:`~.protocol.EmulatorError` for a refused channel). Shapes, as Ably answers them:

* a single spec object → a flat list of per-channel results ``{channel, messageId, serials}`` or
  ``{channel, error}``; HTTP 201 when every channel succeeded, else 400 with error 40020 and the
  list as ``batchResponse``;
* a list of specs → one ``{successCount, failureCount, results}`` per spec; HTTP 201.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from .protocol import EmulatorError

__all__ = ["batch_publish"]

Publish = Callable[[str, list[Any], str], list[str]]


def _spec_results(spec: Any, index: int, publish: Publish) -> list[dict[str, Any]]:
    if not isinstance(spec, dict):
        raise EmulatorError(f"batch spec [{index}] must be an object", 40000, 400)
    channels = spec.get("channels")
    if isinstance(channels, str):
        channels = [channels]
    messages = spec.get("messages")
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(channels, list) or not channels or not all(isinstance(c, str) for c in channels):
        raise EmulatorError(f"batch spec [{index}].channels must be a non-empty list of names", 40000, 400)
    if not isinstance(messages, list) or not messages:
        raise EmulatorError(f"batch spec [{index}].messages must be a message or a list of them", 40000, 400)
    results: list[dict[str, Any]] = []
    for channel in channels:
        message_id = secrets.token_urlsafe(9)
        try:
            serials = publish(channel, _copy(messages), message_id)  # (publish canonicalises in place)
        except EmulatorError as err:
            results.append({"channel": channel, "error": err.to_dict()})
        else:
            results.append({"channel": channel, "messageId": message_id, "serials": serials})
    return results


def batch_publish(body: Any, publish: Publish) -> tuple[int, Any]:
    """Run a batch publish request body; return (HTTP status, response body)."""
    if isinstance(body, dict):
        results = _spec_results(body, 0, publish)
        if any("error" in r for r in results):
            err = EmulatorError("Batched response includes errors", 40020, 400).to_dict()
            return 400, {"error": err, "batchResponse": results}
        return 201, results
    if isinstance(body, list) and body:
        out = []
        for index, spec in enumerate(body):
            results = _spec_results(spec, index, publish)
            failed = sum(1 for r in results if "error" in r)
            out.append({"successCount": len(results) - failed, "failureCount": failed, "results": results})
        return 201, out
    raise EmulatorError("a batch publish body is a spec {channels, messages} or a list of specs", 40000, 400)


def _copy(value: Any) -> Any:
    """A copy of a decoded request value (dicts and lists copied, anything else shared), made
    without recursion: a message nested as deep as a single publish takes (which ``copy.deepcopy``
    failed on past ~480 levels: RecursionError, HTTP 500) is copied too."""
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]  # (container of the copy, its key holding an original)
    while stack:
        holder, key = stack.pop()
        item = holder[key]
        if isinstance(item, dict):
            copied: Any = dict(item)
            stack.extend((copied, k) for k in copied)
        elif isinstance(item, list):
            copied = list(item)
            stack.extend((copied, i) for i in range(len(copied)))
        else:
            continue
        holder[key] = copied
    return root[0]
