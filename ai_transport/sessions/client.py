"""Client side of a session: :class:`ClientSession`, :class:`ClientView`, :class:`ClientRun`.

``createClientSession`` of 0.8.0: the client folds the whole channel into a tree, renders the
selected branch (:class:`ClientView`) and publishes ``ai-input`` messages. The agent is woken out of
band: POST ``run.invocation.to_json()`` (``{inputEventId, sessionName}``) to it — the SDK does no HTTP.

* ``view.send(inputs, run_id=None, parent=None, ...)``: one ``ai-input`` per input, fresh
  ``event-id`` each, the last input is the trigger. A fresh user message folds locally at once
  (optimistic, replaced by the echo); tool results and approvals (inputs with a
  ``codecMessageId``) and regenerates are wire-only. At most one new message per send (40003).
* Answer a gated call with ``create_tool_approval_response(<codec-message-id of the message holding
  the call>, {...})`` sent with ``run_id=<the suspended run>``.
* ``cancel(run_id)`` publishes ``ai-cancel``.
* ``trusted_agent_ids``: when given, the session applies the agent's trust rules
  (:mod:`.admission`): ``ai-output`` and lifecycle messages from other publishers, mutations of agent
  messages by anyone else, and inputs into a run from a client other than the one that started it
  (or ``trusted_client_ids``) are skipped, so the view shows what the agent will act on. Default:
  every publisher is trusted, as 0.8.0. Malformed wires are skipped either way (``skipped``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._shapes import MAPPING
from ..conversation.branch import BranchHandle, NavigableBranch
from ..conversation.core import Change, Folded, RunChanged, RunFailed
from ..conversation.lifecycle import (
    CancelTarget,
    build_cancel_message,
    build_transport_headers,
)
from ..conversation.tree import RunNode, Tree
from ..errors import AITransportError, ErrorCode, InvalidArgumentError
from ..lease import DEFAULT_LEASE
from .base_run import BaseRun
from .invocation import Invocation
from .session import SessionCore
from .steer_client import SteerCoordinator, SteerResult
from .view import DEFAULT_HISTORY_PAGE_SIZE, View

__all__ = ["ClientRun", "ClientSession", "ClientView"]

logger = logging.getLogger("ai_transport.sessions.client")


def _is_wire_only(inp: Mapping[str, Any]) -> bool:
    kind = inp.get("kind")
    return kind != "user-message" and (kind == "regenerate" or inp.get("codecMessageId") is not None)


class ClientRun(BaseRun):
    """What a send started (``ClientRun`` of 0.8.0): the trigger's ids, the run it becomes (``status``,
    ``error``, ``messages`` of :class:`~ai_transport.sessions.base_run.BaseRun`: ``active`` until
    the run is seen), the invocation to POST, ``steer`` and ``cancel``."""

    def __init__(
        self, session: ClientSession, input_codec_message_id: str, input_event_id: str, run_id: str | None
    ):
        self._session = session
        #: codec-message-id of the trigger input.
        self.input_codec_message_id = input_codec_message_id
        #: event-id of the trigger input (the invocation's ``inputEventId``).
        self.input_event_id = input_event_id
        self._known_run_id = run_id
        #: Resolves with the run id when the agent's ``ai-run-start``/``ai-run-resume`` names this input.
        self.started: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    @property
    def run_id(self) -> str:
        """The agent-minted run id ('' until the run starts), or the continued run's id."""
        if self.started.done() and not self.started.cancelled() and self.started.exception() is None:
            return self.started.result()
        return self._known_run_id or ""

    @property
    def invocation(self) -> Invocation:
        """The body to POST to the agent: ``invocation.to_json()``."""
        return Invocation(self.input_event_id, self._session.channel.name)

    def to_invocation(self) -> Invocation:
        """Same as :attr:`invocation` (``toInvocation`` of 0.8.0)."""
        return self.invocation

    def _session_tree(self) -> Tree:
        return self._session.tree

    def _input_anchor(self) -> str | None:
        return self.input_codec_message_id

    def steer(self, input: Mapping[str, Any]) -> SteerResult:
        """Publish ``input`` (e.g. ``codec.create_user_message(...)``) into this run while it runs
        (``ClientRun.steer`` of 0.8.0); returns a :class:`SteerResult` at once (see
        :mod:`ai_transport.sessions.steer_client`). Waits for the run to start first."""
        if not isinstance(input, MAPPING):
            raise InvalidArgumentError("unable to steer; input must be an input object")

        async def run_id() -> str:
            return await asyncio.shield(self.started)

        return self._session._steer.steer(run_id, input)

    async def cancel(self) -> None:
        """Publish ``ai-cancel`` for this run (by input codec-message-id, plus run id when known)."""
        await self._session._publish_cancel(CancelTarget(self._known_run_id, self.input_codec_message_id))


class ClientView(View):
    """A :class:`View` that can also send inputs and navigate branches (``ClientView`` of 0.8.0)."""

    def __init__(self, session: ClientSession) -> None:
        self._session = session
        self._nav = NavigableBranch(session.tree)
        super().__init__(lambda: session.tree, lambda: session.hydrator, self._nav, session.subscribe)

    def _check_open(self, action: str) -> None:
        if self._closed:
            raise AITransportError(f"unable to {action}; view is closed", ErrorCode.SESSION_CLOSED, 400)

    async def send(
        self,
        input: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        run_id: str | None = None,
        parent: str | None = None,
        *,
        fork_of: str | None = None,
        role: str = "user",
        supersedes: str | None = None,
    ) -> ClientRun:
        """Publish ``input`` (one input dict or a list) as ``ai-input`` messages; see the module doc.

        ``run_id`` continues a run (approvals, tool results); ``parent`` defaults to the last
        visible message; ``fork_of`` makes the new prompt a sibling of that one (this view switches
        to it).
        """
        self._check_open("send")
        inputs = [input] if isinstance(input, MAPPING) else list(input)
        last = self.get_messages()
        auto_parent = last[-1].codec_message_id if last and parent is None and not fork_of else None
        run = await self._session._send(inputs, run_id, parent, auto_parent, fork_of, role, supersedes)
        if fork_of:
            self._nav.apply_fork_auto_select(run.input_codec_message_id)
            self._recompute_and_emit()
        return run

    def _parent_of(self, node: Any, codec_message_id: str) -> str | None:
        visible = self.get_messages()
        for i, m in enumerate(visible):
            if m.codec_message_id == codec_message_id:
                return visible[i - 1].codec_message_id if i > 0 else None
        own = self._session.tree.messages_of(node)
        for i, m in enumerate(own):
            if m.codec_message_id == codec_message_id:
                if i > 0:
                    return own[i - 1].codec_message_id
                if node.parent is not None:
                    parent_node = self._session.tree.get_node_by_codec_message_id(node.parent)
                    if parent_node is not None:
                        msgs = self._session.tree.messages_of(parent_node)
                        return msgs[-1].codec_message_id if msgs else None
        return None

    async def regenerate(
        self,
        codec_message_id: str,
        *,
        run_id: str | None = None,
        fork_of: str | None = None,
        role: str = "user",
        supersedes: str | None = None,
    ) -> ClientRun:
        """Ask the agent for a new version of the assistant message ``codec_message_id``.

        Publishes a wire-only ``regenerate`` input (``msg-regenerate`` = the target, ``parent`` = the
        message before it; the keyword options as :meth:`send`). The new run is a sibling of the
        target's run (or, for a message that is not the first of its run, replaces that message and
        the rest of its run); this view switches to it once it arrives.
        """
        self._check_open("regenerate")
        tree = self._session.tree
        node = tree.get_node_by_codec_message_id(codec_message_id)
        if not isinstance(node, RunNode):
            raise InvalidArgumentError(f"unable to regenerate; message not found in tree: {codec_message_id}")
        parent = self._parent_of(node, codec_message_id)
        if parent is None:
            raise InvalidArgumentError(
                f"unable to regenerate; parent user message not found for {codec_message_id}"
            )
        anchor = codec_message_id
        if node.regenerates is not None:
            first = tree.messages_of(node)
            if first and first[0].codec_message_id == codec_message_id:
                anchor = node.regenerates
        run = await self._session._send(
            [self._session.codec.create_regenerate(anchor, parent)], run_id, parent, None, fork_of, role, supersedes
        )
        if self._nav.apply_regenerate_auto_select(run.input_codec_message_id, anchor):
            self._recompute_and_emit(only_if_changed=True)
        return run

    async def edit(
        self,
        codec_message_id: str,
        input: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        run_id: str | None = None,
        role: str = "user",
        supersedes: str | None = None,
    ) -> ClientRun:
        """Replace the user prompt ``codec_message_id`` with ``input`` (a ``fork-of`` sibling; the
        keyword options as :meth:`send`); this view switches to the new prompt."""
        self._check_open("edit")
        node = self._session.tree.get_node_by_codec_message_id(codec_message_id)
        if node is None:
            raise InvalidArgumentError(f"unable to edit; message not found in tree: {codec_message_id}")
        parent = self._parent_of(node, codec_message_id)
        return await self.send(
            input, run_id, parent, fork_of=codec_message_id, role=role, supersedes=supersedes
        )

    def branch_selection(self, codec_message_id: str) -> BranchHandle:
        """The branch point at message ``codec_message_id`` (``branchSelection`` of 0.8.0): its
        alternative messages, the one shown, and ``select(index)`` (see
        :class:`~ai_transport.conversation.branch.BranchHandle`)."""

        def select(index: int) -> None:
            if self._nav.record_selection(codec_message_id, index):
                self._recompute_and_emit()

        return self._nav.branch_selection(codec_message_id, select)

    def select(self, node_key: str) -> None:
        """Show sibling ``node_key`` (run id / input codec-message-id) at its fork (Python-only;
        :meth:`branch_selection` is the message-anchored way)."""
        self._nav.select(node_key)
        self._recompute_and_emit()

    def close(self) -> None:
        """Stop listening and forget this view's selections (the session stops tracking it)."""
        if self._closed:
            return
        self._nav.clear()
        super().close()
        self._session._views.discard(self)


class ClientSession(SessionCore):
    """The client's end of one session (channel).

    Args:
        channel: a :class:`~ai_transport.channels.channel.Channel`.
        codec: the codec (default :class:`~ai_transport.codec.codec.ResponsesCodec`).
        trusted_agent_ids: when given, only these publishers' outputs/lifecycle are folded and the
            agent's input rules apply (see the module docstring).
        trusted_client_ids: with ``trusted_agent_ids``, client ids always accepted for inputs into
            a run.
        history_page_size: history page size (default 100).
        history_retries: retries of a failed history read (then 104011), with
            ``history_backoff * 2**attempt`` seconds between them.
        channel_modes: extra channel modes to attach with, e.g. ``OBJECT_MODES`` (``channelModes``
            of 0.8.0; the base modes are then requested too, :mod:`~ai_transport.channels.modes`).
        reorder_window: seconds a finished run's wire log is kept for late, out-of-order wires
            (``reorderWindowMs`` of 0.8.0; default 120, :mod:`~ai_transport.conversation.retention`).
        lease: the agents' lease in seconds (their ``lease``; default 10): a lease wire of another
            holder counts as a takeover only once the lease lapsed, and a late output of the holder it
            superseded is then refused (:mod:`~ai_transport.conversation.fence`).
    """

    _log = logger

    def __init__(
        self,
        channel: Any,
        codec: Any = None,
        *,
        trusted_agent_ids: Iterable[str | None] | None = None,
        trusted_client_ids: Iterable[str] | None = None,
        history_page_size: int = DEFAULT_HISTORY_PAGE_SIZE,
        history_retries: int = 3,
        history_backoff: float = 0.1,
        channel_modes: Iterable[str] | None = None,
        reorder_window: float | None = None,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        trusted = set(trusted_agent_ids) if trusted_agent_ids is not None else None
        super().__init__(
            channel,
            codec,
            history_page_size,
            history_retries,
            history_backoff,
            trusted_agent_ids=trusted,
            trusted_client_ids=trusted_client_ids or (),
        )
        self._set_options(channel_modes, reorder_window)
        self._lease_ms = float(lease) * 1000
        self.tree.fence.lease_ms = self._lease_ms
        self.trusted_agent_ids = trusted
        #: The trust rules, when ``trusted_agent_ids`` was given.
        self.admission = self.core.admission
        self._encoder = self.codec.create_encoder(channel)
        self._pending: dict[str, ClientRun] = {}
        self._steer = SteerCoordinator(
            lambda inp, cmid, headers: self._encoder.publish_input(inp, cmid, extras={"headers": headers}),
            self._client_id,
            lambda: self._closed,
        )
        self._views: set[ClientView] = set()
        #: The default view (selected branch).
        self.view = ClientView(self)
        self._views.add(self.view)

    def on(self, event: str, handler: Callable[..., Any]) -> Callable[[], None]:
        """Listen to ``error``: an agent's run ended ``error`` (the :class:`AITransportError` from its
        ``ai-run-end``; or channel continuity was lost: 104006, the views are rebuilt from history, see
        :class:`~.session.SessionCore`; or that rebuild could not read history: 104011) or ``skipped`` (``(message, reason)``: a channel message not
        folded, see :attr:`skipped`). Returns an unsubscribe function."""
        return self._emitter.on(event, handler)

    def _on_change(self, change: Change) -> None:
        if isinstance(change, Folded):
            self._steer.observe(change.wire)
        elif isinstance(change, RunChanged):
            if change.event.type in ("start", "resume"):
                key = change.input_codec_message_id
                pending = self._pending.pop(key, None) if key is not None else None
                if pending is not None and not pending.started.done():
                    pending.started.set_result(change.event.run_id)
        elif isinstance(change, RunFailed):
            self._emitter.emit("error", change.error)

    def _before_rebuild(self) -> None:
        self._steer.drain_continuity_lost(
            AITransportError(
                "unable to await steer outcome; channel continuity lost", ErrorCode.CHANNEL_CONTINUITY_LOST, 500
            )
        )

    def _client_id(self) -> str | None:
        cid = self.channel.client_id
        return cid if cid and cid != "*" else None

    async def _send(
        self,
        inputs: list[Mapping[str, Any]],
        run_id: str | None,
        parent: str | None,
        auto_parent: str | None,
        fork_of: str | None,
        role: str,
        supersedes: str | None,
    ) -> ClientRun:
        if self._closed:
            raise AITransportError("unable to send; session is closed", ErrorCode.SESSION_CLOSED, 400)
        self._require_connected("send")
        if not inputs:
            raise InvalidArgumentError("unable to send; inputs array is empty (include at least one input)")
        for i, inp in enumerate(inputs):
            if not isinstance(inp, MAPPING):
                raise InvalidArgumentError(f"unable to send; inputs[{i}] must be an input object")
        if sum(1 for inp in inputs if not _is_wire_only(inp)) > 1:
            raise InvalidArgumentError("unable to send; a send may introduce at most one new message")
        items: list[tuple[Mapping[str, Any], str, str, dict[str, str]]] = []
        optimistic: str | None = None
        for inp in inputs:
            event_id = str(uuid.uuid4())
            cmid = inp.get("codecMessageId") or str(uuid.uuid4())
            p = inp.get("parent") or (auto_parent if parent is None else parent)
            headers = build_transport_headers(
                role=role,
                run_id=run_id,
                codec_message_id=cmid,
                run_client_id=self._client_id(),
                parent=p,
                fork_of=fork_of,
                regenerates=inp.get("target") if inp.get("kind") == "regenerate" else None,
                supersedes=supersedes,
                input_event_id=event_id,
            )
            if not _is_wire_only(inp):
                self.core.send_input(inp, headers, self._client_id())
                self._dispatch()
                optimistic = cmid
            items.append((inp, cmid, event_id, headers))
        trigger = items[-1]
        run = ClientRun(self, trigger[1], trigger[2], run_id)
        self._pending[trigger[1]] = run
        try:
            for inp, cmid, _event_id, headers in items:
                await self._encoder.publish_input(inp, cmid, extras={"headers": headers})
        except Exception as exc:
            self._pending.pop(trigger[1], None)
            if optimistic is not None:
                self.core.withdraw_input(optimistic)
                self._dispatch()
            status = getattr(exc, "status_code", None) or getattr(exc, "statusCode", None)
            if status in (401, 403):
                raise AITransportError(
                    "unable to publish events; missing publish capability on the channel",
                    ErrorCode.INSUFFICIENT_CAPABILITY,
                    401,
                    cause=exc,
                ) from exc
            if isinstance(exc, AITransportError) and exc.code == ErrorCode.INVALID_ARGUMENT:
                raise
            raise AITransportError(
                f"unable to publish events; {exc}", ErrorCode.SESSION_SEND_FAILED, 500, cause=exc
            ) from exc
        return run

    async def cancel(self, run_id: str) -> None:
        """Publish ``ai-cancel`` for ``run_id``."""
        await self._publish_cancel(CancelTarget(run_id=run_id))

    async def _publish_cancel(self, target: CancelTarget) -> None:
        if self._closed:
            return
        self._require_connected("cancel")
        await self.channel.publish(build_cancel_message(target))

    def create_view(self) -> ClientView:
        """Another view over the same tree (own branch selections), closed with the session."""
        if self._closed:
            raise AITransportError("unable to create view; session is closed", ErrorCode.SESSION_CLOSED, 400)
        view = ClientView(self)
        self._views.add(view)
        return view

    async def close(self) -> None:
        """Stop listening, close the encoder and detach."""
        if self._closed:
            return
        self._closed = True
        self._unsubscribe_quietly()
        for pending in self._pending.values():
            if not pending.started.done():
                pending.started.set_exception(
                    AITransportError(
                        "unable to await run-start; session closed", ErrorCode.SESSION_CLOSED, 400
                    )
                )
                pending.started.exception()  # mark retrieved
        self._pending.clear()
        self._steer.drain_closed()
        for view in list(self._views):
            view.close()
        self._views.clear()
        try:
            await self._encoder.close()
        except Exception:
            logger.debug("encoder close failed", exc_info=True)
        await self._detach_quietly()
