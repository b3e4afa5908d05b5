"""Integrations with agent frameworks (optional extras).

* :mod:`ai_transport.integrations.openai_agents` — the OpenAI Agents SDK (``pip install
  'ai-transport[agents]'``): ``Runner.run_streamed`` piped onto an
  :class:`~ai_transport.sessions.agent_run.AgentRun`, tool approvals suspended and resumed over the
  channel.

Importing this package imports no framework; each integration module imports its own.
"""

from __future__ import annotations

__all__: list[str] = []
