"""What both sides' runs read off the session's tree (``BaseRun`` of 0.8.0), and the agent run's
conversation helpers.

:class:`BaseRun` gives :class:`~ai_transport.sessions.agent_run.AgentRun` and
:class:`~ai_transport.sessions.client.ClientRun` the live read members of 0.8.0's ``BaseRun``:
``status`` (``active`` until the run is in the tree), ``error`` (the run-end error of an ``error``
run), ``messages`` (this run's own turn: the input it answers, then all of its output across every
suspend / resume, as openai messages) and :meth:`BaseRun.info`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..conversation.nodes import InputNode, RunNode
from ..conversation.run import RunInfo, RunStatus
from ..readers.calls import approved_unexecuted_calls, to_responses_input, unanswered_calls
from .tools import function_call_output

if TYPE_CHECKING:
    from ..conversation.tree import Tree
    from .view import View

__all__ = ["AgentConversation", "BaseRun"]


class BaseRun:
    """Mixin: the run read model (``runId`` / ``status`` / ``error`` / ``messages`` of 0.8.0).

    A subclass provides ``run_id``, ``_session_tree()`` and ``_input_anchor()`` (the codec-message-id
    of the input the run answers, used until the run's start is folded).
    """

    def _rid(self) -> str:
        rid = getattr(self, "run_id", "")
        return rid if isinstance(rid, str) else ""

    def _session_tree(self) -> Tree:
        raise NotImplementedError

    def _input_anchor(self) -> str | None:
        raise NotImplementedError

    @property
    def status(self) -> RunStatus:
        """The run's status as folded from the channel (``active`` before the run is seen)."""
        node = self._session_tree().get_run_node(self._rid()) if self._rid() else None
        return node.status if node is not None else "active"

    @property
    def error(self) -> Any:
        """The :class:`~ai_transport.errors.AITransportError` of a run that ended ``error``, else None."""
        node = self._session_tree().get_run_node(self._rid()) if self._rid() else None
        return node.error if node is not None and node.status == "error" else None

    @property
    def messages(self) -> list[Any]:
        """This run's own turn as openai messages: its input (when the run answers an input message),
        then every output of the run, each message once."""
        tree = self._session_tree()
        run = tree.get_run_node(self._rid()) if self._rid() else None
        anchor = run.parent if run is not None and run.parent is not None else self._input_anchor()
        seen: set[str] = set()
        out: list[Any] = []
        nodes: list[Any] = []
        input_node = tree.get_node_by_codec_message_id(anchor) if anchor is not None else None
        if isinstance(input_node, InputNode):
            nodes.append(input_node)
        if run is not None:
            nodes.append(run)
        for node in nodes:
            for m in tree.messages_of(node):
                if m.codec_message_id not in seen:
                    seen.add(m.codec_message_id)
                    out.append(m.message)
        return out

    def info(self) -> RunInfo | None:
        """:class:`RunInfo` of this run, once it is in the tree."""
        node = self._session_tree().get_run_node(self._rid()) if self._rid() else None
        return node.info() if node is not None else None


class AgentConversation:
    """Mixin of :class:`~ai_transport.sessions.agent_run.AgentRun`: the conversation its ``view``
    shows (the branch the run answers, ancestors included), read for the next model call."""

    view: View

    async def send(self, output: Any) -> str:
        """Publish one discrete output (provided by the run)."""
        raise NotImplementedError

    def _session_tree(self) -> Tree:
        raise NotImplementedError  # (provided by the run: BaseRun)

    def _rid(self) -> str:
        raise NotImplementedError  # (provided by the run: BaseRun)

    def _check_integrity(self, messages: list[Any]) -> None:
        """Raise when the conversation holds tampered agent output (provided by the run);
        ``messages``: the view's (``CodecMessage``), read once for the check and the caller."""

    def branch_messages(self) -> list[Any]:
        """The openai messages (``OpenAIMessage``) of :attr:`view`: the conversation so far.

        Raises 104090 (``TAMPERED_OUTPUT``) when an agent message of this conversation failed its
        integrity check on the way in from history (see :mod:`~ai_transport.conversation.signing`): tampered content is never
        handed to the model, and the approval it held is reported rather than lost."""
        messages = self.view.get_messages()
        self._check_integrity(messages)
        return [m.message for m in messages]

    def input_items(self) -> list[dict[str, Any]]:
        """``to_responses_input`` of the view: the model input for the next turn."""
        return to_responses_input(self.branch_messages())

    def _codec_reader(self, name: str) -> Callable[..., Any] | None:
        """The session codec's own reader ``name`` (e.g. the Vercel codec's), else None (Responses)."""
        codec = getattr(getattr(self, "session", None), "codec", None)
        reader = getattr(codec, name, None)
        return reader if callable(reader) else None

    def unanswered_calls(self) -> list[dict[str, Any]]:
        """Calls still waiting for a client (approval or client-executed result)."""
        return self._unanswered_calls(self.branch_messages())

    def approved_unexecuted_calls(self) -> list[dict[str, Any]]:
        """Approved calls without output: the executions this run owes (model's own items)."""
        return self._approved_unexecuted_calls(self.branch_messages())

    def _unanswered_calls(self, messages: list[Any]) -> list[dict[str, Any]]:
        reader = self._codec_reader("unanswered_calls")
        return (reader or unanswered_calls)(messages)

    def _approved_unexecuted_calls(self, messages: list[Any]) -> list[dict[str, Any]]:
        reader = self._codec_reader("approved_unexecuted_calls")
        calls = (reader or approved_unexecuted_calls)(messages)
        vouch = self._codec_reader("vouched_calls")
        if vouch is None or not calls:
            return calls
        # What the conversation says is owed is a client's word where a fork seed made it: each
        # call runs only as an agent message of a run of the same client holds it (the codec's rule)
        tree = self._session_tree()
        tree.settle()
        runs = [(n.input_client_id, n.projection) for n in tree.nodes() if isinstance(n, RunNode)]
        run = tree.get_run_node(self._rid()) if self._rid() else None
        kept, refused = vouch(calls, runs, run.input_client_id if run is not None else None)
        for call, why in refused:
            self._refuse_call(call, why)
        return kept

    def _refuse_call(self, call: Mapping[str, Any], why: str) -> None:
        """Count and log, once, an owed call the agent will not execute (provided by the run)."""

    async def claim_calls(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The calls of ``calls`` this worker may execute (all of them unless overridden)."""
        return calls

    def owed_calls(self) -> list[dict[str, Any]] | None:
        """The resume decision: None while a call still waits for a client (stay suspended), else the
        approved calls to execute now (possibly empty: every call answered, call the model). The
        conversation is read once for both answers."""
        messages = self.branch_messages()
        if self._unanswered_calls(messages):
            return None
        return self._approved_unexecuted_calls(messages)

    async def run_owed_calls(
        self, execute: Callable[[Mapping[str, Any]], Any | Awaitable[Any]]
    ) -> list[dict[str, Any]] | None:
        """Execute every owed call with ``execute(call)`` and send each output; None when the run
        must stay suspended (see :meth:`owed_calls`). Returns the calls executed. The calls are
        claimed first (:meth:`claim_calls`): however many workers run this for the same run, each
        call is executed once, and a worker that holds none of them yields the run."""
        owed = self.owed_calls()
        if owed is None:
            return None
        owed = await self.claim_calls(owed)
        for call in owed:
            result = execute(call)
            if inspect.isawaitable(result):
                result = await result
            await self.send((self._codec_reader("tool_output") or function_call_output)(call, result))
        return owed
