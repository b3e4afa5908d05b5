"""Shared pieces of the session tests: the scripted model, a standard agent worker, helpers.

The model is the demo scenario's scripted model (:func:`ai_transport.cli.scenario.scripted_turn`):
turn one streams a reasoning summary, a text and a ``get_weather`` function call; once the call has
an output (the weather, or a denial's rejection text) it streams the final answer. Events are fed
with an ``await asyncio.sleep(0)`` between them, like a network stream.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from ai_transport.channels.memory import InProcessHub
from ai_transport.cli.scenario import run_tool, scripted_turn
from ai_transport.codec.codec import ResponsesCodec
from ai_transport.errors import AITransportError
from ai_transport.responses.local_server import ScriptedFunctionCall, ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentRun, AgentSession, gate_calls
from ai_transport.sessions.client import ClientSession

C = ResponsesCodec


def user_message(text: str) -> dict[str, Any]:
    """A ``user-message`` input with one ``input_text`` part."""
    return C.create_user_message(
        {
            "role": "user",
            "items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}],
        }
    )


def _with_encrypted_reasoning(event: dict[str, Any]) -> dict[str, Any]:
    """Give reasoning items an ``encrypted_content`` (as with ``include: ["reasoning.encrypted_content"]``
    and ``store: false``; the ``added`` blob differs from the final one, as on the real wire)."""
    item = event.get("item")
    if (
        event.get("type") in ("response.output_item.added", "response.output_item.done")
        and isinstance(item, dict)
        and item.get("type") == "reasoning"
    ):
        tag = "added" if event["type"].endswith("added") else "done"
        digest = hashlib.sha256(f"{item.get('id')}:{tag}".encode()).hexdigest()
        event = dict(event, item=dict(item, encrypted_content="gAAAAB" + digest * 4))
    return event


async def model_stream(items: list[dict[str, Any]], delay: float = 0.0) -> AsyncIterator[dict[str, Any]]:
    """The scripted model's answer to ``items`` as an async stream of Responses events."""
    for event in scripted_turn({"input": items, "model": "scripted-model"}):
        await asyncio.sleep(delay)
        yield _with_encrypted_reasoning(event)


def prompt_wire(text: str, event_id: str, client_id: str) -> dict[str, Any]:
    """A user prompt as a client publishes it (raw wire, fresh codec-message-id) carrying ``event_id``."""
    return {
        "name": "ai-input",
        "data": text,
        "extras": {
            "ai": {
                "transport": {
                    "role": "user",
                    "codec-message-id": str(uuid.uuid4()),
                    "run-client-id": client_id,
                    "event-id": event_id,
                    "stream": "false",
                    "discrete": "true",
                },
                "codec": {"kind": "user-message", "partType": "input_text"},
            }
        },
    }


async def open_session(
    agent_id: str = "agent", client_id: str = "alice", **agent_options: Any
) -> tuple[InProcessHub, ClientSession, AgentSession]:
    """A fresh in-process hub with a connected client and agent on channel ``chat``
    (``agent_options`` go to :class:`AgentSession`)."""
    hub = InProcessHub()
    client = ClientSession(hub.client(client_id).channel("chat"))
    await client.connect()
    agent = AgentSession(hub.client(agent_id).channel("chat"), **agent_options)
    await agent.connect()
    return hub, client, agent


def text_opening(item_id: str = "msg_1") -> list[dict[str, Any]]:
    """The first events of an assistant text answer: its ``message`` item and ``output_text`` part."""
    return [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {
                "id": item_id,
                "type": "message",
                "status": "in_progress",
                "content": [],
                "role": "assistant",
            },
        },
        {
            "type": "response.content_part.added",
            "item_id": item_id,
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "annotations": [], "text": ""},
        },
    ]


def text_delta(delta: str, item_id: str = "msg_1") -> dict[str, Any]:
    """One ``response.output_text.delta`` of the text opened by :func:`text_opening`."""
    return {
        "type": "response.output_text.delta",
        "item_id": item_id,
        "output_index": 0,
        "content_index": 0,
        "delta": delta,
    }


def approval(cmid: str, call: Mapping[str, Any], approved: bool = True, **response: Any) -> dict[str, Any]:
    """The ``tool-approval-response`` input for ``call`` (in message ``cmid``); ``response``: more
    fields, e.g. ``reason``."""
    return C.create_tool_approval_response(
        cmid, {"call_id": call["call_id"], "approved": approved, **response}
    )


async def approve_call(
    view: Any, run_id: str, approved: bool = True, **response: Any
) -> tuple[Any, dict[str, Any]]:
    """Answer the last ``function_call`` in ``view`` with an :func:`approval` on ``run_id``;
    returns (the send's run, the call item)."""
    cmid, call = assistant_with_call(view.get_messages())
    sent = await view.send(approval(cmid, call, approved, **response), run_id=run_id)
    return sent, call


async def failed_run(client: ClientSession, agent: AgentSession, seed: int) -> AgentRun:
    """The user asks "Weather in Rome?"; the agent streams "Checking." and a gated ``get_weather``
    call, then the run ends ``error`` (50000 "model crashed"), leaving the call dangling. Returns
    once the client's view shows the run failed."""
    first = await client.view.send(user_message("Weather in Rome?"))
    run = await agent.create_run(first.invocation.to_json())
    await run.start()
    events = build_response_events(
        [ScriptedText("Checking."), ScriptedFunctionCall("get_weather", {"city": "Rome"})], seed=seed
    )
    await run.pipe(gate_calls(events, lambda item: True))
    await run.end("error", AITransportError("model crashed", 50000))
    await wait_status(client.view, run.run_id, "error")
    return run


class Worker:
    """A standard agent worker: what an HTTP handler does with one invocation body.

    ``gated``: tools that need approval (the agent runs them after approval). ``client_tools``: tools
    the client executes (the agent suspends until their result arrives). Records every tool call the
    agent executed in :attr:`executed` (name, arguments).
    """

    def __init__(
        self,
        gated: Iterable[str] = ("get_weather",),
        client_tools: Iterable[str] = (),
        model: Callable[[list[dict[str, Any]]], Any] = model_stream,
    ) -> None:
        self.gated = set(gated)
        self.client_tools = set(client_tools)
        self.model = model
        self.executed: list[tuple[str, str]] = []
        self.results: list[Any] = []

    def execute(self, call: Mapping[str, Any]) -> str:
        self.executed.append((str(call.get("name")), str(call.get("arguments"))))
        return run_tool(str(call.get("name")), str(call.get("arguments")))

    async def handle(self, session: AgentSession, body: Mapping[str, Any]) -> AgentRun:
        """Run one invocation to suspension or completion; returns the run."""
        run = await session.create_run(body)
        await run.start()
        await run.view.load_all()
        while True:
            owed = await run.run_owed_calls(self.execute)
            if owed is None:
                await run.suspend()
                return run
            items = run.input_items()
            last = items[-1] if items else {}
            if last.get("type") == "message" and last.get("role") == "assistant":
                await run.end("complete")
                return run
            result = await run.pipe(
                gate_calls(self.model(items), lambda item: item.get("name") in self.gated)
            )
            self.results.append(result)
            if result.reason != "complete":
                await run.end(result.reason, result.error)
                return run


def assistant_with_call(messages: list[Any]) -> tuple[str, dict[str, Any]]:
    """(codec_message_id, function_call item) of the message holding the (last) call."""
    for m in reversed(messages):
        for item in m.message.items:
            if item.get("type") == "function_call":
                return m.codec_message_id, item
    raise AssertionError("no function_call in the view")


def shapes(messages: list[Any]) -> list[tuple[str, list[str]]]:
    """(role, [item types]) of each message: a compact picture of a conversation."""
    return [(m.message.role, [i.get("type") for i in m.message.items]) for m in messages]


def as_dicts(messages: list[Any]) -> list[dict[str, Any]]:
    """JS JSON shape of each message (``CodecMessage.to_dict``), deep-copied through JSON."""
    return json.loads(json.dumps([m.to_dict() for m in messages]))


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``predicate`` until true (raises AssertionError after ``timeout`` seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


async def wait_status(view: Any, run_id: str, status: str, timeout: float = 10.0) -> None:
    """Wait until ``view.run(run_id).status == status``."""

    def ok() -> bool:
        info = view.run(run_id)
        return info is not None and info.status == status

    await view.wait_for(ok, timeout)


async def second_question_and_regenerate(client: ClientSession, agent: AgentSession) -> None:
    """The user asks "Thanks! And tomorrow?", the agent answers, the client regenerates that answer
    and the agent answers again (every run complete)."""
    second = await client.view.send(user_message("Thanks! And tomorrow?"))
    r2 = await agent.create_run(second.invocation.to_json())
    await r2.start()
    await r2.pipe(build_response_events([ScriptedText("No forecast for tomorrow, sorry.")], seed=3))
    await r2.end("complete")
    await wait_status(client.view, r2.run_id, "complete")
    regen = await client.view.regenerate(client.view.get_messages()[-1].codec_message_id)
    r3 = await agent.create_run(regen.invocation.to_json())
    await r3.start()
    await r3.pipe(build_response_events([ScriptedText("Tomorrow looks dry.")], seed=4))
    await r3.end("complete")
    await wait_status(client.view, r3.run_id, "complete")


async def record_conversation() -> dict[str, Any]:
    """Run a real conversation on the in-process channel and return its ``history`` (aggregates,
    ascending serial) and the live client's view (``live``: messages and runs).

    A gated call approved and answered, a second question, then a regenerate of its answer.
    """
    hub, client, agent = await open_session()
    worker = Worker()
    sent = await client.view.send(user_message("Weather in Paris?"))
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(client.view, run.run_id, "suspended")
    answer, _call = await approve_call(client.view, run.run_id)
    await worker.handle(agent, answer.invocation.to_json())
    await wait_status(client.view, run.run_id, "complete")
    await second_question_and_regenerate(client, agent)
    page = await hub.client("reader").channel("chat").history(limit=1000, direction="forwards")
    history = list(page.items)
    live = {
        "messages": as_dicts(client.view.get_messages()),
        "runs": [(r.run_id, r.status, [s.status for s in r.steps]) for r in client.view.runs()],
    }
    await client.close()
    await agent.end()
    return {"history": history, "live": live}


async def channel_history(hub: InProcessHub, channel: str = "chat") -> list[dict[str, Any]]:
    """Every message on ``channel`` of ``hub``, oldest first, as history returns them (aggregates)."""
    page = await hub.client("reader").channel(channel).history(limit=1000, direction="forwards")
    return [dict(m) for m in page.items]


def text_stream_of(wires: list[dict[str, Any]]) -> dict[str, Any]:
    """The first agent text stream (an ``ai-output`` whose codec kind is ``output_text``) among ``wires``."""
    return next(
        m for m in wires
        if m.get("name") == "ai-output" and m["extras"]["ai"].get("codec", {}).get("kind") == "output_text"
    )


async def open_text_stream(
    run: AgentRun, item_id: str, text: str, events: Iterable[dict[str, Any]] | None = None
) -> tuple[Any, Any]:
    """Start a step of ``run`` and stream ``text`` as the first delta of message ``item_id`` (or
    ``events`` instead), leaving the stream open (what a worker killed mid-stream leaves); returns
    ``(step, encoder)``."""
    step = run.create_step()
    await step.start()
    assert step.step_id is not None
    encoder, _ = run._encoder(step.step_id, step._serial)
    for event in events if events is not None else [*text_opening(item_id), text_delta(text, item_id)]:
        await encoder.publish_output(event)
    await run.drain()
    return step, encoder
