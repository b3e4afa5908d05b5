"""What :mod:`ai_transport.integrations.openai_agents` needs to resume an Agents SDK run from the
channel alone: the channel's record (tool outputs, approval decisions, the turn a run suspended on),
the agent graph (which agent holds the conversation after handoffs), tool outputs replayed from the
record, and a model that answers with a turn recorded on the channel.

Nothing here publishes; nothing is kept between wake-ups.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, FunctionTool, Handoff
from agents.items import ModelResponse, TResponseStreamEvent
from agents.models.interface import Model
from agents.tool import invoke_function_tool
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses import Response, ResponseCompletedEvent, ResponseFunctionToolCall

from ..codec.reducer import DENIED_TOOL_OUTPUT
from ..readers.calls import resolved_call_ids
from ..readers.hygiene import MODEL_OUTPUT_TYPES

__all__ = [
    "REPLAY_RESPONSE_PREFIX",
    "AgentGraph",
    "ChannelRecord",
    "ReplayModel",
    "execute_call",
    "recorded_outputs",
]

logger = logging.getLogger("ai_transport.integrations.openai_agents")

#: Response ids of replayed turns start with this (the pipe never publishes their events).
REPLAY_RESPONSE_PREFIX = "resp_ait_replay_"

#: Tool outputs the channel already holds, by call id, for the run being handled (None: no run).
recorded_outputs: ContextVar[Mapping[str, str] | None] = ContextVar("ait_recorded_outputs", default=None)

_WRAPPED = "_ait_recorded_outputs"


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return json.dumps(output, separators=(",", ":"), ensure_ascii=False)


def _is_model_output(item: Mapping[str, Any]) -> bool:
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") == "assistant"
    return kind == "reasoning" or kind in MODEL_OUTPUT_TYPES


@dataclass
class ChannelRecord:
    """What one wake-up reads from the run's view (oldest first): the model input before the turn
    the run suspended on, that turn's model items, every recorded tool output and every decision."""

    #: Messages (``OpenAIMessage``) before the suspended turn (all of them when there is none).
    prior: list[Any]
    #: The model's items of the suspended turn (outputs the reducer added removed); empty when none.
    turn: list[dict[str, Any]] = field(default_factory=list)
    #: ``call_id -> output text`` of every ``function_call_output`` on the channel.
    outputs: dict[str, str] = field(default_factory=dict)
    #: ``call_id -> "approved" | "denied" | "pending"`` from the messages' tool call states.
    decisions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, run: Any) -> ChannelRecord:
        """Read ``run``'s view. A continuation whose last model turn belongs to this run and holds
        calls a client decided on is the *suspended turn* (replayed to the SDK, not re-asked)."""
        codec_messages = run.view.get_messages()
        messages = [m.message for m in codec_messages]
        outputs: dict[str, str] = {}
        decisions: dict[str, str] = {}
        for m in messages:
            for item in m.items:
                if item.get("type") == "function_call_output" and isinstance(item.get("call_id"), str):
                    outputs[item["call_id"]] = _output_text(item.get("output", ""))
            for call_id, state in (m.tool_call_states or {}).items():
                approval = state.get("approval") if isinstance(state, Mapping) else None
                if isinstance(approval, str):
                    decisions[call_id] = approval
        turn_at = cls._suspended_turn(run, codec_messages) if run.continuation else None
        if turn_at is None:
            return cls(messages, [], outputs, decisions)
        turn = [dict(i) for i in messages[turn_at].items if i.get("type") != "function_call_output"]
        return cls(messages[:turn_at], turn, outputs, decisions)

    @staticmethod
    def _suspended_turn(run: Any, codec_messages: Sequence[Any]) -> int | None:
        for i in range(len(codec_messages) - 1, -1, -1):
            message = codec_messages[i].message
            if not any(_is_model_output(item) for item in message.items):
                continue  # tool outputs, prompts: not a model turn
            info = run.view.run_of(codec_messages[i].codec_message_id)
            if info is None or info.run_id != run.run_id:
                return None
            states = message.tool_call_states or {}
            decided = any(
                item.get("type") == "function_call"
                and (states.get(item.get("call_id")) or {}).get("approval") in ("approved", "denied")
                for item in message.items
            )
            return i if decided else None
        return None

    def rejection_message(self, call_id: str) -> str:
        """The text the model gets for a denied call: the reason the client gave (as the reducer
        recorded it next to the call), else the default rejection text."""
        return self.outputs.get(call_id, DENIED_TOOL_OUTPUT)


def _wrap_tool(tool: FunctionTool) -> None:
    """Make ``tool`` answer from :data:`recorded_outputs` when the channel already holds its output
    (a replayed turn, an approved call executed before the SDK resumed); otherwise run it."""
    inner = tool.on_invoke_tool
    if getattr(inner, _WRAPPED, False):
        return

    async def on_invoke_tool(ctx: ToolContext[Any], arguments: str) -> Any:
        recorded = recorded_outputs.get()
        call_id = getattr(ctx, "tool_call_id", None)
        if recorded is not None and isinstance(call_id, str) and call_id in recorded:
            return recorded[call_id]
        return await inner(ctx, arguments)

    setattr(on_invoke_tool, _WRAPPED, True)
    tool.on_invoke_tool = on_invoke_tool


class AgentGraph:
    """The agents reachable from ``root`` through handoffs, with their function tools made to
    answer from the channel's record (see :data:`recorded_outputs`; outside a handled run the tools
    behave exactly as before)."""

    def __init__(self, root: Agent[Any]) -> None:
        self.root = root
        self._handoffs: dict[tuple[int, str], Agent[Any]] = {}
        pending: dict[tuple[int, str], str] = {}
        by_name: dict[str, Agent[Any]] = {}
        seen: set[int] = set()
        queue: list[Agent[Any]] = [root]
        while queue:
            agent = queue.pop(0)
            if id(agent) in seen:
                continue
            seen.add(id(agent))
            by_name.setdefault(agent.name, agent)
            for tool in agent.tools:
                if isinstance(tool, FunctionTool):
                    _wrap_tool(tool)
            for h in agent.handoffs:
                target: Any = None
                if isinstance(h, Handoff):
                    ref = getattr(h, "_agent_ref", None)
                    target = ref() if callable(ref) else None
                    name = h.tool_name
                    if target is None:
                        pending[(id(agent), name)] = h.agent_name
                        continue
                else:
                    target, name = h, Handoff.default_tool_name(h)
                self._handoffs[(id(agent), name)] = target
                queue.append(target)
        for key, agent_name in pending.items():
            if agent_name in by_name:
                self._handoffs[key] = by_name[agent_name]

    def current(self, messages: Sequence[Any]) -> Agent[Any]:
        """The agent holding the conversation after ``messages``: ``root``, followed through every
        handoff call that has its output."""
        agent = self.root
        done = resolved_call_ids(messages)
        for message in messages:
            for item in message.items:
                if item.get("type") == "function_call" and item.get("call_id") in done:
                    agent = self._handoffs.get((id(agent), str(item.get("name"))), agent)
        return agent


async def execute_call(agent: Agent[Any], call: Mapping[str, Any], context: Any, run_config: Any) -> str:
    """Run one approved ``function_call`` item with ``agent``'s function tool of that name (the
    SDK's own invocation: argument parsing, timeouts, failure handling); the output text."""
    name = str(call.get("name", ""))
    tool = next((t for t in agent.tools if isinstance(t, FunctionTool) and t.name == name), None)
    if tool is None:
        logger.warning("approved call %s names no function tool of agent %s", name, agent.name)
        return f"error: no tool named {name!r}"
    arguments = str(call.get("arguments") or "{}")
    call_id = str(call.get("call_id", ""))
    raw = ResponseFunctionToolCall(type="function_call", name=name, arguments=arguments, call_id=call_id)
    ctx = ToolContext(
        context=context,
        tool_name=name,
        tool_call_id=call_id,
        tool_arguments=arguments,
        tool_call=raw,
        agent=agent,
        run_config=run_config,
    )
    output = await invoke_function_tool(function_tool=tool, context=ctx, arguments=arguments)
    return _output_text(output)


class ReplayModel(Model):
    """A model whose first answer is a turn recorded on the channel (a single ``response.completed``
    event, id :data:`REPLAY_RESPONSE_PREFIX` …); it is only ever asked once."""

    def __init__(self, turn: Sequence[Mapping[str, Any]], run_id: str) -> None:
        self.turn = [dict(i) for i in turn]
        self.response_id = REPLAY_RESPONSE_PREFIX + run_id
        self._used = False

    def _response(self) -> Response:
        if self._used:
            raise RuntimeError(
                "the replayed turn did not stop for approvals; its calls' decisions no longer apply"
            )
        self._used = True
        return Response.model_validate(
            {
                "id": self.response_id,
                "object": "response",
                "created_at": 0,
                "model": "replay",
                "status": "completed",
                "output": self.turn,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            }
        )

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """The recorded turn as a model response (non-streamed runs)."""
        response = self._response()
        return ModelResponse(output=response.output, usage=Usage(), response_id=response.id)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        """The recorded turn as one ``response.completed`` event (streamed runs)."""
        yield ResponseCompletedEvent(type="response.completed", response=self._response(), sequence_number=0)
