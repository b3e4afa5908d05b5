"""The demo's agent written with the OpenAI Agents SDK (``ai-transport demo --agents-sdk``).

The same weather scenario as :class:`~ai_transport.cli.agent.ToolAgent` — a ``get_weather`` tool that
needs the user's approval — as an Agents SDK ``Agent`` with a ``function_tool(needs_approval=True)``,
run over the channel by :func:`ai_transport.integrations.openai_agents.run_agent`. Each
:meth:`AgentsSdkAgent.handle_invocation` is one stateless wake-up. Needs the ``agents`` extra.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from agents import (
    Agent,
    ModelResponse,
    ModelSettings,
    OpenAIResponsesModel,
    RunConfig,
    RunHooks,
    function_tool,
)
from agents.model_settings import Reasoning
from openai import AsyncOpenAI

from ..integrations.agents_replay import REPLAY_RESPONSE_PREFIX
from ..integrations.openai_agents import run_agent
from ..sessions.agent import AgentSession
from .scenario import INSTRUCTIONS, get_weather

__all__ = ["AgentsSdkAgent", "weather_agent"]


def weather_agent(
    model: str, client: AsyncOpenAI, reasoning: Mapping[str, Any] | None = None
) -> Agent[Any]:
    """The demo's weather assistant as an Agents SDK agent: ``get_weather`` needs approval; stateless
    model settings (``store: false``, encrypted reasoning returned for replay when ``reasoning``)."""

    @function_tool(needs_approval=True)
    def get_weather_tool(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather for a city. Needs the user's approval (it reveals their location).

        Args:
            city: City name, e.g. Paris.
            unit: celsius or fahrenheit.
        """
        return json.dumps(get_weather(city, unit))

    get_weather_tool.name = "get_weather"
    settings = ModelSettings(store=False)
    if reasoning:
        settings = ModelSettings(
            store=False,
            reasoning=Reasoning(**dict(reasoning)),
            response_include=["reasoning.encrypted_content"],
        )
    return Agent(
        name="weather",
        instructions=INSTRUCTIONS,
        tools=[get_weather_tool],
        model=OpenAIResponsesModel(model=model, openai_client=client),
        model_settings=settings,
    )


class _CountModelCalls(RunHooks[Any]):
    """Counts the model's answers (a turn replayed from the channel is not a model call)."""

    def __init__(self) -> None:
        self.calls = 0

    async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
        """Count one model answer."""
        if not str(response.response_id or "").startswith(REPLAY_RESPONSE_PREFIX):
            self.calls += 1


class AgentsSdkAgent:
    """The demo's worker on the Agents SDK: one :meth:`handle_invocation` per wake-up.

    Args:
        channel_factory: ``async () -> Channel``, a fresh connection per wake-up (closed after it).
        responses: the demo's :class:`~ai_transport.responses.ResponsesClient`; its ``base_url`` and
            ``api_key`` point the SDK's ``AsyncOpenAI`` client at the same endpoint.
        model / reasoning: as for :class:`~ai_transport.cli.agent.ToolAgent`.
    """

    def __init__(
        self,
        channel_factory: Callable[[], Awaitable[Any]],
        responses: Any,
        model: str,
        *,
        reasoning: Mapping[str, Any] | None = None,
    ) -> None:
        self.channel_factory = channel_factory
        self.client = AsyncOpenAI(base_url=responses.base_url, api_key=responses.api_key or "local")
        self.agent = weather_agent(model, self.client, reasoning)
        self._hooks = _CountModelCalls()
        # The SDK exports traces to OpenAI: only with a key (the local scripted model has none).
        self._config = RunConfig(tracing_disabled=not os.environ.get("OPENAI_API_KEY"))

    async def handle_invocation(self, invocation: Mapping[str, Any]) -> str:
        """One wake-up; returns ``suspended`` or how the run ended."""
        channel = await self.channel_factory()
        session = AgentSession(channel)
        try:
            await session.connect()
            run = await session.create_run(invocation)
            await run.start()
            await run.view.load_all()
            return await run_agent(run, self.agent, hooks=self._hooks, run_config=self._config)
        finally:
            await session.close()
            await channel.close()

    @property
    def model_calls(self) -> int:
        """Model answers so far (the demo's summary line)."""
        return self._hooks.calls

    async def aclose(self) -> None:
        """Close the SDK's HTTP client."""
        await self.client.close()
