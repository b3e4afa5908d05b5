"""pydantic-ai over Ably (``pip install 'ai-transport[pydantic-ai]'``).

:func:`run_pydantic_ai` runs a pydantic-ai agent on one
:class:`~ai_transport.sessions.agent_run.AgentRun` of a session built with
:class:`~ai_transport.codec.UIMessageCodec`: the conversation the run's view shows (``UIMessage``
dicts) is the request, pydantic-ai's Vercel AI adapter (``VercelAIAdapter``, AI SDK 6 chunks) turns
the agent's run into UI message stream chunks, and the run pipes them through the codec onto the
channel, so a ``useChat`` front end (0.8.0's ``createChatTransport``) or a Python
:class:`~ai_transport.sessions.client.ClientSession` sees it stream::

    session = AgentSession(channel, codec=UIMessageCodec)
    outcome = await serve_pydantic_ai(session, invocation_body, agent)   # "suspended" | "complete" | ...

A tool the agent declares ``requires_approval=True`` (the agent's output types including
``DeferredToolRequests``) becomes a ``tool-approval-request``: the run suspends. The user's answer is
folded into the channel; a later worker, knowing nothing but the channel, serves the answer's
invocation: the adapter reads the approval from the conversation (``approval-responded`` parts),
the agent executes (or is told of the denial) and continues; the output folds onto the message that
holds the call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

from ..errors import InvalidArgumentError

__all__ = ["run_pydantic_ai", "serve_pydantic_ai", "ui_chunks"]

#: The AI SDK major whose chunks the adapter writes (6: tool approvals are streamed).
SDK_VERSION: Final = 6


_TOOL_INPUT = frozenset(("tool-input-start", "tool-input-delta", "tool-input-available"))


async def ui_chunks(
    events: AsyncIterator[Any], sdk_version: int = SDK_VERSION, known_calls: frozenset[str] = frozenset()
) -> AsyncIterator[dict[str, Any]]:
    """The adapter's chunk models as the plain UI message chunk dicts its HTTP stream would carry
    (the SSE ``[DONE]`` terminator, which is not a chunk, left out).

    On a resume the adapter streams the approved calls' inputs again before their outputs; the calls
    in ``known_calls`` are already on the channel (their outputs fold onto the message that holds
    them), so their ``tool-input-*`` chunks are left out rather than drawn as a second, dangling part.
    """
    async for chunk in events:
        text = chunk.encode(sdk_version)
        if text == "[DONE]":
            continue
        value = json.loads(text)
        if value.get("type") in _TOOL_INPUT and value.get("toolCallId") in known_calls:
            continue
        yield value


async def run_pydantic_ai(run: Any, agent: Any, *, deps: Any = None, **run_options: Any) -> str:
    """Run ``agent`` on the started ``run`` and settle it; returns how it settled.

    The run's conversation (its view's ``UIMessage`` s) is the adapter's request; the chunks are piped
    through the run's codec. Afterwards the run suspends while a call waits for the user's approval
    (``"suspended"``), else ends ``"complete"``; a cancelled or failed pipe returns its reason
    (``"cancelled"`` / ``"error"``) and leaves the run to the caller. ``run_options`` go to the
    adapter's ``run_stream`` (``model``, ``model_settings``, ``usage_limits`` …).
    """
    from pydantic_ai.ui.vercel_ai import VercelAIAdapter
    from pydantic_ai.ui.vercel_ai.request_types import SubmitMessage

    codec = run.session.codec
    if getattr(codec, "adapter_tag", None) != "vercel-ai-sdk-ui-message":
        raise InvalidArgumentError(
            "unable to run a pydantic-ai agent; the session's codec must be UIMessageCodec", status_code=400
        )
    messages = [dict(m) for m in run.branch_messages()]
    known = frozenset(
        p["toolCallId"]
        for m in messages
        for p in m.get("parts", ())
        if isinstance(p, dict) and isinstance(p.get("toolCallId"), str)
    )
    request = SubmitMessage.model_validate({"id": run.run_id, "messages": messages})
    adapter = VercelAIAdapter(agent=agent, run_input=request, sdk_version=SDK_VERSION)
    result = await run.pipe(ui_chunks(adapter.run_stream(deps=deps, **run_options), SDK_VERSION, known))
    if result.reason != "complete":
        return str(result.reason)
    if run.unanswered_calls():
        await run.suspend()
        return "suspended"
    await run.end("complete")
    return "complete"


async def serve_pydantic_ai(
    session: Any, body: Mapping[str, Any], agent: Any, *, deps: Any = None, **run_options: Any
) -> str:
    """Serve one invocation (what an HTTP handler does with a request body): create and start its run,
    load the conversation from the channel, then :func:`run_pydantic_ai`."""
    run = await session.create_run(body)
    await run.start()
    await run.view.load_all()
    return await run_pydantic_ai(run, agent, deps=deps, **run_options)
