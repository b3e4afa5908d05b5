"""Integrations with agent frameworks (optional extras).

* :mod:`ai_transport.integrations.openai_agents` — the OpenAI Agents SDK (``pip install
  'ai-transport[agents]'``): ``Runner.run_streamed`` piped onto an
  :class:`~ai_transport.sessions.agent_run.AgentRun`, tool approvals suspended and resumed over the
  channel.
* :mod:`ai_transport.integrations.pydantic_ai` — pydantic-ai (``pip install
  'ai-transport[pydantic-ai]'``): an agent's UI message chunks (its Vercel AI adapter) streamed
  through the Vercel codec (:class:`~ai_transport.codec.UIMessageCodec`), approval-required tools
  suspended and resumed from the channel.

Importing this package imports no framework; each integration module imports its own.
"""

from __future__ import annotations

__all__: list[str] = []
