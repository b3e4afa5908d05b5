"""An agent's run (``AgentRun`` of 0.8.0): start / resume, pipe and send outputs, suspend, end.

Created by :meth:`~ai_transport.sessions.agent.AgentSession.create_run`; see
:mod:`ai_transport.sessions.agent` for the worker loop and the trust rules.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import uuid
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping
from typing import Any

from ..codec.headers import transport_headers
from ..conversation.approvals import StrayApproval, settle_stray_approvals
from ..conversation.authority import author_of
from ..conversation.changes import WireFolded
from ..conversation.lifecycle import (
    EVENT_RUN_END,
    EVENT_RUN_RESUME,
    EVENT_RUN_START,
    EVENT_RUN_SUSPEND,
    EVENT_STEP_END,
    EVENT_STEP_START,
    H_CODEC_MESSAGE_ID,
    H_EVENT_ID,
    H_FORK_OF,
    H_MSG_REGENERATE,
    H_PARENT,
    H_RUN_CLIENT_ID,
    H_RUN_ID,
    H_STEER_CODEC_MESSAGE_IDS,
    H_STEP_START_SERIAL,
    RunLifecycleEvent,
    build_lifecycle_headers,
    build_lifecycle_message,
    build_step_headers,
    build_transport_headers,
    read_cancel_target,
    step_end_reason_for,
)
from ..conversation.run import TERMINAL_STATUSES, PipeResult
from ..conversation.tree import RunNode, Tree
from ..errors import AITransportError, ErrorCode, InvalidArgumentError
from .base_run import AgentConversation, BaseRun
from .claims import CLAIM_NAME, RunLease
from .hooks import CancelRequest, link_signal
from .invocation import Invocation
from .pipe_loop import pipe_events
from .run_durable import DurableRun
from .run_host import AgentSessionHost
from .run_writer import RunWriter
from .steer import RunSteering
from .step import RunStep
from .view import LeafBranch, View

__all__ = ["AgentRun"]

logger = logging.getLogger("ai_transport.sessions.agent")


class AgentRun(DurableRun, BaseRun, AgentConversation):
    """One run of the agent (``AgentRun`` of 0.8.0); created by :meth:`AgentSession.create_run`."""

    def __init__(
        self,
        session: AgentSessionHost,
        invocation: Invocation,
        run_id: str,
        invocation_id: str,
        hooks: dict[str, Callable[..., Any]],
    ) -> None:
        self.session = session
        self.invocation = invocation
        self.run_id = run_id
        self.invocation_id = invocation_id
        self.hooks = hooks
        #: Set when a client's ``ai-cancel`` (accepted by ``on_cancel``), the ``signal`` hook or the
        #: session cancels the run.
        self.abort_signal = asyncio.Event()
        self._unlink_signal = link_signal(hooks.get("signal"), self.abort_signal)
        self._branch = LeafBranch(lambda: session.tree)
        #: The run's view: the conversation this run answers (see :class:`LeafBranch`).
        self.view = View(lambda: session.tree, lambda: session.hydrator, self._branch, session.subscribe)
        self.is_open = False
        self.ended = False
        self.continuation = False
        self.trigger: Mapping[str, Any] | None = None
        self.run_client_id: str | None = None
        self.input_client_id: str | None = None
        self.input_codec_message_id: str | None = None
        self._parent: str | None = None
        self._fork_of: str | None = None
        self._regenerates: str | None = None
        self._parent_fallback: str | None = None
        self._run_parent: str | None = None
        self._step_index = 0
        #: The previous step's id and end reason (a step created after a ``failed`` one reuses its id).
        self._last_step_id: str | None = None
        self._last_step_reason: str | None = None
        self._active_step = False
        self._current_step: RunStep | None = None
        #: The client of the current / previous step (sticky across steps, as 0.8.0).
        self._step_client: str | None = None
        self._last_serial = ""
        #: Identifies this run object's claims (see :mod:`.claims`).
        self.claimant = str(uuid.uuid4())
        #: True once another worker holds calls this run claimed: it then publishes nothing more.
        self.yielded = False
        #: The leases this run holds: claims, renewals, the fence before each publish (:mod:`.claims`).
        self.lease = RunLease(self)
        #: Opened by ``load()`` (from ``adopt_run``), not ``start()``.
        self._adopted = False
        self._opening = False
        self._steering = RunSteering(self, hooks.get("on_steer"))
        #: Approved calls whose agent-made ``function_call`` was removed or rewritten (reported, 104090).
        self.tampered_approvals: list[StrayApproval] = []
        self.strays_seen: set[str] = set()  # each stray approval handled once
        self._branch.is_unresponded_steer = lambda _run_id, cmid: self._steering.is_unresponded(cmid)

    def _check_integrity(self, messages: list[Any]) -> None:
        chain = {n.key for n in self._branch._chain() if isinstance(n, RunNode)}
        self.session.integrity.check_runs(chain | {self.run_id}, self.run_id)
        settle_stray_approvals(self, messages)  # ignored / reported, never raised

    def _refuse_call(self, call: Mapping[str, Any], why: str) -> None:
        call_id = call.get("toolCallId")
        if not isinstance(call_id, str) or call_id in self.strays_seen:
            return
        self.strays_seen.add(call_id)
        wire = {"name": "ai-input", "extras": {"ai": {"transport": {"run-id": self.run_id}}}}
        self.session._skip(wire, f"owed call {call_id!r} not executed in run {self.run_id}: {why} (ignored)")

    def _note(self, serial: Any) -> None:
        if isinstance(serial, str) and serial > self._last_serial:
            self._last_serial = serial

    async def drain(self, timeout: float = 10.0) -> bool:
        """Wait until every message this run published has come back on the subscription and been
        folded, so :attr:`view` shows it (``pipe``/``send``/``start`` call this before returning)."""
        return await self.session.wait_seen(self._last_serial, timeout)

    # -- BaseRun ---------------------------------------------------------------------------------

    def _session_tree(self) -> Tree:
        return self.session.tree

    def _input_anchor(self) -> str | None:
        return self._parent_fallback

    # -- trigger -------------------------------------------------------------------------------

    def _match(self) -> Mapping[str, Any] | None:
        """The trigger, once it is settled: the wire that owns the invocation's ``event-id`` (the
        first in serial order, :meth:`~ai_transport.conversation.tree.Tree.find_message_by_event_id`)
        when no older wire can still take it from the one found — the invocation names its
        publisher (``input_client_id``) and / or its serial (``input_serial``) and the match is
        that wire, or history has been read to its start. A match a member copied the id into is
        never acted on while history is unread. An adopted run whose ``ai-run-start`` is folded is
        bound by it: a trusted agent stamped who started the run (``input-client-id``), so a match
        whose author may put inputs into the run settles it without reading the rest of history."""
        core, eid = self.session.core, self.invocation.input_event_id
        found = core.trigger(
            eid,
            self.invocation.input_client_id,
            not self.session.hydrator.has_next(),
            serial=self.invocation.input_serial,
        )
        if found is not None or not self._adopted or self.invocation.input_client_id is not None:
            return found
        node = self.session.tree.get_run_node(self.run_id)
        candidate = self.session.tree.find_message_by_event_id(eid)
        if node is None or node.input_client_id is None or candidate is None:
            return None
        author = author_of(candidate)
        if self.invocation.input_serial is None and self.session._input_accepted(author, node):
            return core.trigger(eid, author, False)  # the run's own input client (or a trusted one)
        return None

    async def _locate(self, timeout: float) -> None:
        found = self._match()
        if found is None:
            eid = self.invocation.input_event_id
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            claimed = asyncio.Event()

            def on_msg(change: WireFolded) -> None:
                if transport_headers(change.wire.get("extras")).get(H_EVENT_ID) == eid:
                    claimed.set()

            off: Callable[[], None] | None = None
            try:
                await self.session.hydrator.fold_until(lambda: self._match() is not None)
                found = self._match()
                if found is None:  # only a wire arriving from now on can wake the wait below (it
                    # clears the flag first), so history folds without this listener on every wire
                    off = self.session.subscribe(WireFolded, on_msg)
                while found is None:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        raise AITransportError(
                            f"unable to locate input event '{eid}' within {timeout}s",
                            ErrorCode.INPUT_EVENT_NOT_FOUND,
                            504,
                        )
                    claimed.clear()
                    abort: asyncio.Future[Any] = asyncio.ensure_future(self.abort_signal.wait())
                    claim: asyncio.Future[Any] = asyncio.ensure_future(claimed.wait())
                    try:
                        await asyncio.wait({abort, claim}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        abort.cancel()
                        claim.cancel()
                    if self.abort_signal.is_set():
                        raise AITransportError(
                            f"unable to look up input event; run {self.run_id} was cancelled",
                            ErrorCode.OPERATION_CANCELLED,
                            400,
                        )
                    found = self._match()
            finally:
                if off is not None:
                    off()
        self._resolve_trigger(found)

    def _resolve_trigger(self, message: Mapping[str, Any]) -> None:
        self.trigger = message
        h = transport_headers(message.get("extras"))
        client_id = message.get("clientId")
        self.input_client_id = client_id if isinstance(client_id, str) else None
        self.run_client_id = h.get(H_RUN_CLIENT_ID)
        self._parent = h.get(H_PARENT)
        self._fork_of = h.get(H_FORK_OF)
        self._regenerates = h.get(H_MSG_REGENERATE)
        self.input_codec_message_id = h.get(H_CODEC_MESSAGE_ID)
        wire_run_id = h.get(H_RUN_ID)
        self.continuation = wire_run_id is not None
        if wire_run_id is not None and wire_run_id != self.run_id and not self._adopted:
            old, self.run_id = self.run_id, wire_run_id
            self.session._rekey(self, old)
        tree = self.session.tree
        trigger_node = (
            tree.get_node_by_codec_message_id(self.input_codec_message_id)
            if self.input_codec_message_id is not None
            else None
        )
        self._parent_fallback = self._parent if trigger_node is None else self.input_codec_message_id
        self._run_parent = self._parent if isinstance(trigger_node, RunNode) else self._parent_fallback
        self._branch.set_pin(self._parent_fallback, self.run_id, self._regenerates)
        if self.input_codec_message_id is not None:
            self.session._run_by_input_cmid[self.input_codec_message_id] = self.run_id

    # -- lifecycle -----------------------------------------------------------------------------

    async def _publish(
        self, message: dict[str, Any] | list[dict[str, Any]], what: str, *, fenced: bool = False
    ) -> list[str]:
        for wire in message if isinstance(message, list) else [message]:
            if wire.get("name") != CLAIM_NAME:  # a lease wire goes untagged (:mod:`.claims`)
                self.session.integrity.sign_lifecycle(wire)  # bound to the channel and the run (:mod:`~ai_transport.conversation.signing`)
        if not fenced:
            await self.lease.ensure()  # the fence (raises LeaseLost once another worker took over)
        try:
            serials = list(await self.session.channel.publish(message) or [])
            for serial in serials:
                self._note(serial)
            return serials
        except Exception as exc:
            raise AITransportError(
                f"unable to publish {what} for run {self.run_id}; {exc}",
                ErrorCode.RUN_LIFECYCLE_ERROR,
                500,
                cause=exc,
            ) from exc

    async def start(self, timeout: float = 30.0) -> None:
        """Locate the trigger (live or history), then publish ``ai-run-start`` (or ``ai-run-resume``).

        Raises 104010 when the trigger is not found within ``timeout`` seconds, 40033 when the run
        was cancelled first.
        """
        if self.abort_signal.is_set():
            raise AITransportError(
                f"unable to start run; run {self.run_id} was cancelled before start()",
                ErrorCode.OPERATION_CANCELLED,
                400,
            )
        if self._adopted:
            raise InvalidArgumentError(
                f"unable to start run; run {self.run_id} was adopted (call load())"
            )
        if self.is_open:
            return
        self.session._require_connected("start")
        if self.invocation.input_event_id:
            await self._locate(timeout)
        else:
            self._branch.set_pin(None, self.run_id, None)
        if self._regenerates is not None and not self.continuation:
            await self._check_regenerate()
        if self.continuation:
            await self._recover_before_resume()
        if self.input_codec_message_id is not None:
            for deferred in self.session._deferred_cancels.release(self.input_codec_message_id):
                if not self._cancel_accepted(deferred):
                    # refused here (counted once), held again for another run of the same input
                    # its author may cancel: this run never consumes another member's cancel
                    self.session._reject(deferred, "cancel from a client this agent does not accept")
                    self.session._defer_cancel(self.input_codec_message_id, deferred)
                elif not self.abort_signal.is_set():
                    await self._cancel(deferred)
        headers = build_lifecycle_headers(
            run_id=self.run_id,
            run_client_id=self.run_client_id or "",
            parent=None if self.continuation else self._run_parent,
            fork_of=None if self.continuation else self._fork_of,
            regenerates=None if self.continuation else self._regenerates,
            invocation_id=self.invocation_id,
            input_client_id=self.input_client_id,
            input_codec_message_id=self.input_codec_message_id,
        )
        name = EVENT_RUN_RESUME if self.continuation else EVENT_RUN_START
        lifecycle = build_lifecycle_message(name, headers)
        if self.continuation:  # the input that woke it is claimed with the calls (run_owed_calls)
            await self._publish(lifecycle, name)
        else:  # a fresh run holds run:<id>; its claim goes out in the same (atomic) publish
            await self.lease.open_with(lifecycle, lambda messages: self._publish(messages, name))
        self.is_open = True
        if not self.continuation:
            self.session._apply_local_lifecycle(
                RunLifecycleEvent(
                    "start",
                    self.run_id,
                    client_id=self.run_client_id or "",
                    invocation_id=self.invocation_id,
                    parent=self._run_parent,
                    fork_of=self._fork_of,
                    regenerates=self._regenerates,
                    input_codec_message_id=self.input_codec_message_id,
                    input_client_id=self.input_client_id,
                )
            )
        await self.drain()
        self._steering.seed()

    def has_input(self) -> bool:
        """Loop driver (``hasInput()`` of 0.8.0): True until the run produced output, then once per
        batch of steers folded in since; False once cancelled (:mod:`~ai_transport.sessions.steer`)."""
        return self._steering.has_input()

    async def _check_regenerate(self) -> None:
        """A regenerate replaces the reply another run gave: only that run's client (or a trusted
        one) may ask for it, else 40160 (another user cannot steer the owner's conversation)."""
        tree, target = self.session.tree, self._regenerates
        await self.session.hydrator.fold_until(lambda: tree.get_node_by_codec_message_id(target or "") is not None)
        node = tree.get_node_by_codec_message_id(target or "")
        if (
            isinstance(node, RunNode)
            and node.input_client_id is not None
            and not self.session._input_accepted(self.input_client_id, node)
        ):
            raise AITransportError(
                f"unable to start run; client {self.input_client_id!r} may not regenerate a reply to "
                f"client {node.input_client_id!r} (message {target})",
                ErrorCode.INSUFFICIENT_CAPABILITY,
                401,
            )

    def _assert_open(self, action: str) -> None:
        if not self.is_open:
            raise InvalidArgumentError(
                f"unable to {action}; start() must be called first (run {self.run_id})"
            )
        if self.ended or self.status in TERMINAL_STATUSES:
            raise InvalidArgumentError(f"unable to {action}; run {self.run_id} has already ended")

    async def suspend(self) -> None:
        """Publish ``ai-run-suspend`` (waiting for approvals / client tool results)."""
        if not self.is_open:
            raise InvalidArgumentError(
                f"unable to suspend run; start() must be called first (run {self.run_id})"
            )
        if self.ended:
            return
        if self._active_step:
            raise InvalidArgumentError(
                f"unable to suspend run; end the active step first (run {self.run_id})"
            )
        self.ended = True
        try:
            if self.status not in TERMINAL_STATUSES:
                await self._publish_terminal(EVENT_RUN_SUSPEND)
        finally:
            self._deregister()

    async def end(self, reason: str = "complete", error: BaseException | None = None) -> None:
        """Publish ``ai-run-end`` with ``reason`` complete | cancelled | error (+ error code/message)."""
        if reason not in ("complete", "cancelled", "error"):
            raise InvalidArgumentError(
                f"unable to end run; reason must be complete, cancelled or error, got {reason!r}"
            )
        if not self.is_open:
            raise InvalidArgumentError(f"unable to end run; start() must be called first (run {self.run_id})")
        if self.ended:
            return
        self.ended = True
        if self._current_step is not None:
            try:
                await self._current_step.end(step_end_reason_for(reason))
            except Exception:
                logger.exception("failed to close the active step of run %s", self.run_id)
        try:
            if self.status not in TERMINAL_STATUSES:
                code = msg = None
                if reason == "error" and error is not None:
                    code = getattr(error, "code", None)
                    code = code if isinstance(code, int) else int(ErrorCode.STREAM_ERROR)
                    msg = getattr(error, "message", None) or str(error)
                await self._publish_terminal(EVENT_RUN_END, reason=reason, error_code=code, error_message=msg)
        finally:
            self._deregister()

    async def _publish_terminal(self, name: str, **extra: Any) -> None:
        if self.yielded:
            await self.lease.stop()
            return  # another worker holds the run's calls and carries it on
        headers = build_lifecycle_headers(
            run_id=self.run_id,
            run_client_id=self.run_client_id or "",
            invocation_id=self.invocation_id,
            input_client_id=self.input_client_id,
            input_codec_message_id=self.input_codec_message_id,
            **extra,
        )
        # the release of the run's leases goes out with its lifecycle message (one atomic publish)
        await self.lease.close_with(
            build_lifecycle_message(name, headers),
            lambda messages: self._publish(messages, name, fenced=True),
            ending=name == EVENT_RUN_END,
        )
        await self.drain()

    def _report(self, err: AITransportError) -> None:
        """Hand an error to the run's ``on_error`` hook, else to the session's ``error`` listeners."""
        on_error = self.hooks.get("on_error")
        if on_error is not None:
            on_error(err)
        else:
            self.session._emitter.emit("error", err)

    def _deregister(self) -> None:
        # the view keeps answering get_messages()/runs() but stops listening to the session
        self.lease.cancel()
        self.view.close()
        self._steering.close()
        self._unlink_signal()
        s = self.session
        s.own_streams.forget(self)
        s._forget(self)
        cmid = self.input_codec_message_id
        if cmid is not None and s._run_by_input_cmid.get(cmid) == self.run_id:
            del s._run_by_input_cmid[cmid]  # only its own mapping (another run may hold the input's)

    def _cancel_accepted(self, message: Mapping[str, Any]) -> bool:
        """Whether ``message`` (an ``ai-cancel``, by run id or by input codec-message-id) may cancel
        this run: its author (who Ably says published it) is a trusted agent identity, or is
        accepted for inputs into the run — by default the run's input client (the publisher of the
        prompt that triggered it) or one of ``trusted_client_ids``."""
        author = author_of(message)
        if author is not None and author in self.session.trusted_agent_ids:
            return True
        node = self.session.tree.get_run_node(self.run_id)
        if node is None or node.input_client_id is None:
            # not folded yet: judge against the client whose input triggered this invocation
            node = RunNode(self.run_id, None, None, None, "", "", None, input_client_id=self.input_client_id)
        return self.session._input_accepted(author, node)

    async def _cancel(self, message: Mapping[str, Any]) -> None:
        if not self._cancel_accepted(message):
            self.session._reject(message, "cancel from a client this agent does not accept")
            target = read_cancel_target(message)
            if target.run_id is None and target.input_codec_message_id is not None:
                # by input: held for another run of that input its author may cancel (a member's
                # run on a copy of the prompt, opened first, never takes the owner's cancel)
                self.session._defer_cancel(target.input_codec_message_id, message)
            return
        veto = self.hooks.get("on_cancel")
        try:
            if veto is not None:
                allowed = veto(CancelRequest(message, self.run_id))
                if inspect.isawaitable(allowed):
                    allowed = await allowed
                if not allowed:
                    return
            self.abort_signal.set()
        except Exception as exc:
            err = AITransportError(
                f"unable to process cancel for run {self.run_id}; on_cancel handler threw: {exc}",
                ErrorCode.CANCEL_LISTENER_ERROR,
                500,
                cause=exc,
            )
            logger.error("%s", err.message)
            self._report(err)

    # -- output --------------------------------------------------------------------------------

    def _encoder(
        self,
        step_id: str,
        step_start_serial: str | None,
        step_client_id: str | None = None,
        steer_ids: list[str] | None = None,
    ) -> tuple[Any, str]:
        if steer_ids is None:  # a send: one pass of its own
            steer_ids = self._steering.begin_pass()
        stamp_steers = json.dumps(steer_ids, separators=(",", ":")) if steer_ids else None
        cmid = str(uuid.uuid4())
        headers = build_transport_headers(
            role="assistant",
            run_id=self.run_id,
            codec_message_id=cmid,
            run_client_id=self.run_client_id or "",
            parent=self._parent_fallback,
            fork_of=self._fork_of,
            regenerates=self._regenerates,
            invocation_id=self.invocation_id,
            input_client_id=self.input_client_id,
            input_codec_message_id=self.input_codec_message_id,
            step_id=step_id,
            step_client_id=step_client_id if step_client_id is not None else self._step_client_id(),
        )

        def stamp(message: dict[str, Any]) -> None:
            if step_start_serial is not None:
                message["extras"]["ai"]["transport"][H_STEP_START_SERIAL] = step_start_serial
            if stamp_steers is not None:
                message["extras"]["ai"]["transport"][H_STEER_CODEC_MESSAGE_IDS] = stamp_steers
            hook = self.hooks.get("on_ably_message")
            if hook is not None:
                hook(message)
            signer = self.session.integrity.signer
            if signer is not None:  # last: the tag covers everything published
                signer.on_message(message)

        encoder = self.session.codec.create_encoder(
            RunWriter(self), {"headers": headers}, on_ably_message=stamp, message_id=cmid
        )
        return encoder, cmid

    def _step_client_id(self) -> str:  # resolved when the step opened (_open_step)
        return self._step_client if self._step_client is not None else self.input_client_id or ""

    def _resolve_step_client(self, explicit: str | None) -> str:
        # 0.8.0: explicit, else the previous step's (sticky; the channel's for a fresh worker), else input's
        if explicit is None and self._step_client is None:
            node = self.session.tree.get_run_node(self.run_id)
            known = [s.step_client_id for s in (node.steps if node is not None else ()) if s.step_client_id]
            explicit = known[-1] if known else None
        resolved = explicit if explicit is not None else self._step_client or self.input_client_id or ""
        self._step_client = resolved
        return resolved

    def _mint_step_id(self) -> str:
        step_id = f"{self.invocation_id}-step-{self._step_index}"
        self._step_index += 1
        return step_id

    def _resolve_step_id(self, step_id: str | None) -> str:
        """0.8.0's rule: an explicit id wins; else reuse the previous step's id when it ended
        ``failed`` (a retry supersedes the failed attempt); else the next ``{invocation}-step-N``."""
        if step_id is not None:
            return step_id
        if self._last_step_reason == "failed" and self._last_step_id is not None:
            return self._last_step_id
        return self._mint_step_id()

    async def _open_step(
        self, step_client_id: str | None = None, step_id: str | None = None
    ) -> tuple[str, str | None]:
        if step_id is None:
            step_id = self._mint_step_id()
        step_client_id = self._resolve_step_client(step_client_id)
        headers = build_step_headers(
            run_id=self.run_id,
            step_id=step_id,
            invocation_id=self.invocation_id,
            run_client_id=self.run_client_id or "",
            invocation_client_id=self.input_client_id,
            step_client_id=step_client_id,
        )
        serials = await self._publish(build_lifecycle_message(EVENT_STEP_START, headers), EVENT_STEP_START)
        self._active_step = True
        return step_id, (serials[0] if serials else None)

    async def _close_step(
        self, step_id: str, step_start_serial: str | None, reason: str, step_client_id: str | None = None
    ) -> None:
        self._active_step = False
        self._last_step_id, self._last_step_reason = step_id, reason
        if step_start_serial is None:
            logger.warning("no step-start-serial for step %s; step-end skipped", step_id)
            return
        headers = build_step_headers(
            run_id=self.run_id,
            step_id=step_id,
            step_start_serial=step_start_serial,
            invocation_id=self.invocation_id,
            run_client_id=self.run_client_id or "",
            invocation_client_id=self.input_client_id,
            step_client_id=step_client_id if step_client_id is not None else self._step_client_id(),
            reason=reason,
        )
        await self._publish(build_lifecycle_message(EVENT_STEP_END, headers), EVENT_STEP_END)

    async def _pipe_events(
        self,
        events: AsyncIterable[Any] | Iterable[Any],
        step: Callable[[], Awaitable[tuple[str, str | None]]],
    ) -> PipeResult:
        """The pipe loop (:func:`.pipe_loop.pipe_events`); a :attr:`yielded` run (another worker
        holds it) reads nothing and publishes nothing (``cancelled``)."""
        if self.yielded:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
            return PipeResult("cancelled")
        return await pipe_events(self, events, step)

    async def pipe(self, events: AsyncIterable[Any] | Iterable[Any]) -> PipeResult:
        """Publish a stream of Responses events as one message (one implicit step).

        Returns :class:`PipeResult` with ``reason`` ``complete`` (source exhausted), ``cancelled``
        (abort signal; ``on_cancelled(write)`` hook may publish a last output) or ``error`` (the
        source or the encoder raised; the error is in ``result.error``). Open streams are cancelled
        on error and cancel. The step opens at the first event (none for an empty source) and
        closes with the pipe. Does not end the run. A :attr:`yielded` run returns ``cancelled`` at
        once without reading ``events`` (no model request is made).
        """
        self._assert_open("pipe stream")
        if self.yielded:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
            return PipeResult("cancelled")
        if self._active_step:
            raise InvalidArgumentError("unable to pipe; a step is already active on this run (end it first)")
        self._active_step = True
        opened: list[tuple[str, str | None]] = []

        async def open_step() -> tuple[str, str | None]:
            opened.append(await self._open_step())
            return opened[0]

        result = PipeResult("error")
        try:
            result = await self._pipe_events(events, open_step)
        finally:
            if opened:
                try:
                    await self._close_step(opened[0][0], opened[0][1], step_end_reason_for(result.reason))
                except Exception:
                    logger.exception("failed to close step %s", opened[0][0])
            self._active_step = False
        await self.drain()
        return result

    async def send(self, output: Any) -> str:
        """Publish one discrete output (e.g. a ``function_call_output``) as its own message, in its
        own step; returns the message's codec-message-id."""
        self._assert_open("send output")
        if self._active_step:
            raise InvalidArgumentError("unable to send; a step is already active on this run (end it first)")
        step = RunStep(self, None, self._mint_step_id())
        await step.start()
        try:
            cmid = await step.send(output)
        finally:
            await step.end()
        return cmid

    def create_step(self, step_id: str | None = None, step_client_id: str | None = None) -> RunStep:
        """An explicit step (``createStep`` of 0.8.0): ``start()``, then any number of ``pipe`` /
        ``send`` (each its own message), then ``end(reason=None)``.

        ``step_id``: a stable id makes this step an *attempt* of that step: the attempt whose
        ``ai-step-start`` is latest on the channel is canonical and every view (this library's and
        0.8.0's) shows only its output, so a retry replaces the failed attempt. Without it, a step
        created right after one that ended ``failed`` reuses that step's id (0.8.0's in-process retry
        rule), otherwise it gets the next ``{invocation_id}-step-N``. Resolved here, synchronously
        (:attr:`RunStep.step_id`). Use an explicit id to coalesce attempts across processes (a
        durable retry in another worker). ``step_client_id``: the participant the step is
        attributed to (default: the triggering input's publisher).
        """
        if step_id is not None and (not isinstance(step_id, str) or not step_id):
            raise InvalidArgumentError("unable to create step; step_id must be a non-empty string")
        if step_client_id is not None and not isinstance(step_client_id, str):
            raise InvalidArgumentError("unable to create step; step_client_id must be a string")
        return RunStep(self, step_client_id, self._resolve_step_id(step_id))
