"""Agent side of a session: :class:`AgentSession` and its runs (``createAgentSession`` of 0.8.0).

Typical worker (one invocation = one HTTP request woken by a client)::

    session = AgentSession(channel)
    await session.connect()
    run = await session.create_run(Invocation.from_json(body))
    await run.start()                    # ai-run-start, or ai-run-resume for a continuation
    await run.view.load_all()            # fold history: the conversation so far
    for call in run.approved_unexecuted_calls():      # resuming a gated call
        await run.send(function_call_output(call, execute(call)))
    result = await run.pipe(model(run.input_items()))  # one model turn = one message
    await (run.suspend() if run.unanswered_calls() else run.end("complete"))

Wire (``ably-ai-transport-wire.md`` §9-§10): lifecycle messages carry exactly the 0.8.0 transport
headers (:mod:`.lifecycle`); every ``pipe``/``send`` is one codec message with a fresh
``codec-message-id``; ``pipe`` opens its step lazily at the first event and closes it
(``ai-step-end``) when the source ends. Unlike 0.8.0, a pipe that fails or is cancelled marks every
stream it left open ``cancelled`` (§15.3), so no reader waits for a stream that will never end.

**Trust.** The agent reads the channel, and the channel is writable by every client, so what it
folds is filtered by publisher identity (Ably ``clientId``, set by the server from the token):

* ``ai-output`` and run/step lifecycle messages count only from ``trusted_agent_ids`` (default: the
  agent's own ``channel.client_id``); an update / append / delete of such a message counts only when
  its ``version.clientId`` (the mutator) is a trusted agent identity too, and name-less appends only
  for a stream whose create was accepted. Anything else is ignored, logged
  (``ai_transport.transport.agent``) and kept in :attr:`AgentSession.rejected`.
* Approvals, tool results (``tool-approval-response``, ``tool-result``, ``tool-result-error``),
  any other input into an existing run (an ``ai-input`` carrying ``run-id``) and cancels count only
  when ``accept_input(client_id, run)`` says so. Default: the publisher is the client
  that started the run (the ``input-client-id`` the agent stamped on the run's ``ai-run-start``) or
  is listed in ``trusted_client_ids``. A run whose start is not folded yet holds its inputs until it
  is. New user prompts (no ``run-id``) are accepted from anyone who may publish.
* The agent runs only ``function_call`` items of its own (trusted) outputs: an approval carries no
  arguments, and the arguments executed are those of the model's item (``approved_unexecuted_calls``
  returns the folded item itself).
* Identities come from the Ably token. With anonymous clients (no ``clientId``) publishers cannot
  be told apart: give the agent and the users identities, or pass ``accept_input``. The mutation
  rule relies on Ably stamping ``version.clientId`` with the identity that updated/appended (as
  the emulator and the in-process channel do); an agent without a ``clientId`` trusts anonymous
  mutations.

The trigger of a run (the input named by the invocation) is located only among accepted wires, so a
forged or untrusted input cannot wake a run (``start()`` raises 104010 after its timeout).

Differences from 0.8.0: ``start()`` itself pages history until it finds the trigger (0.8.0 needs the
app to ``loadOlder`` first); ``pipe``/``send``/``start``/``suspend``/``end`` return once the channel
has echoed what they published, so :attr:`AgentRun.view` already shows it. Not ported: steering
(``onSteer``, ``hasInput``), ``adoptRun``/``load`` (durable turns), step retry attempts (a step
after a failed one gets a new id; 0.8.0 re-attempts the failed id), and re-materialising after a loss of
channel continuity (the Channel protocol has no resumed/not-resumed signal; the emulator and Ably
replay from the last ``channelSerial``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping
from typing import Any

from ..codec.headers import codec_headers, transport_headers
from ..errors import AITransportError, ErrorCode, InvalidArgumentError
from ..readers.calls import approved_unexecuted_calls, to_responses_input, unanswered_calls
from .channel import action_name
from .invocation import Invocation
from .lifecycle import (
    EVENT_AI_INPUT,
    EVENT_AI_OUTPUT,
    EVENT_CANCEL,
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
    H_STEP_START_SERIAL,
    RunLifecycleEvent,
    build_lifecycle_headers,
    build_lifecycle_message,
    build_step_headers,
    build_transport_headers,
    read_cancel_target,
    step_end_reason_for,
)
from .run import TERMINAL_STATUSES, PipeResult, RunInfo
from .session import AGENT_NAMES, MUTATIONS, SessionCore, is_untrusted_agent_mutation, mutator_of
from .tree import RunNode
from .view import DEFAULT_HISTORY_PAGE_SIZE, LeafBranch, View

__all__ = ["AgentRun", "AgentSession", "RunStep", "function_call_output", "gate_calls"]

logger = logging.getLogger("ai_transport.transport.agent")

_ANSWER_KINDS = frozenset({"tool-result", "tool-result-error", "tool-approval-response"})
#: Answers held per unknown run (history folds newest first); older ones are dropped beyond this.
_HELD_LIMIT = 1000

AcceptInput = Callable[[Any, RunNode | None], bool]


def function_call_output(call: Mapping[str, Any], output: Any) -> dict[str, Any]:
    """The discrete output that answers ``call``: ``{"type": "function_call_output", "item": {...}}``.

    ``output`` that is not a string is JSON-encoded (the Responses API takes a string).
    """
    import json

    text = (
        output if isinstance(output, str) else json.dumps(output, separators=(",", ":"), ensure_ascii=False)
    )
    return {
        "type": "function_call_output",
        "item": {"type": "function_call_output", "call_id": call.get("call_id", ""), "output": text},
    }


async def gate_calls(
    events: AsyncIterable[Any] | Iterable[Any], needs_approval: Callable[[Mapping[str, Any]], bool]
) -> AsyncIterable[Any]:
    """Pass a model turn's events through, then ask approval for its gated calls.

    After the last event, yields one ``{"type": "tool-approval-request", call_id, name, arguments}``
    per ``function_call`` item (from its ``response.output_item.done``) for which
    ``needs_approval(item)`` is true — on the same pipe, so the requests land on the message that
    holds the calls (where a client's approval folds).
    """
    gated: list[Mapping[str, Any]] = []
    async for event in _aiter(events):
        yield event
        etype = event.get("type") if isinstance(event, Mapping) else getattr(event, "type", None)
        if etype == "response.output_item.done":
            item = event.get("item") if isinstance(event, Mapping) else getattr(event, "item", None)
            if item is not None and not isinstance(item, Mapping):
                item = item.model_dump() if hasattr(item, "model_dump") else dict(item)
            if isinstance(item, Mapping) and item.get("type") == "function_call" and needs_approval(item):
                gated.append(item)
    for item in gated:
        yield {
            "type": "tool-approval-request",
            "call_id": item.get("call_id", ""),
            "name": item.get("name", ""),
            "arguments": item.get("arguments", ""),
        }


async def _aiter(source: Any) -> Any:
    if hasattr(source, "__aiter__"):
        async for x in source:
            yield x
    else:
        for x in source:
            yield x


class _RecordingWriter:
    """Writer proxy handed to the encoder: records the serials the run's writes produced."""

    def __init__(self, run: AgentRun) -> None:
        self._run = run
        self._channel = run.session.channel

    async def publish(self, message: Any) -> Any:
        serials = await self._channel.publish(message)
        for serial in serials or ():
            self._run._note(serial)
        return serials

    async def append_message(self, message: Any) -> Any:
        version = await self._channel.append_message(message)
        self._run._note(version)
        return version

    async def update_message(self, message: Any) -> Any:
        version = await self._channel.update_message(message)
        self._run._note(version)
        return version


class AgentSession(SessionCore):
    """The agent's end of one session (channel): folds the channel, opens runs, honours cancels.

    Args:
        channel: a :class:`~ai_transport.transport.channel.Channel` (in-process or Ably).
        codec: the codec (default :class:`~ai_transport.codec.codec.ResponsesCodec`).
        trusted_agent_ids: publisher ids whose ``ai-output``/lifecycle messages are folded
            (default: ``{channel.client_id}``).
        trusted_client_ids: client ids always accepted for approvals / tool results.
        accept_input: ``(client_id, run_node) -> bool`` replacing the default input trust rule.
        history_page_size: history page size (default 100).
        history_retries: retries of a failed history read (then 104011), with
            ``history_backoff * 2**attempt`` seconds between them.
    """

    _log = logger

    def __init__(
        self,
        channel: Any,
        codec: Any = None,
        *,
        trusted_agent_ids: Iterable[str | None] | None = None,
        trusted_client_ids: Iterable[str] | None = None,
        accept_input: AcceptInput | None = None,
        history_page_size: int = DEFAULT_HISTORY_PAGE_SIZE,
        history_retries: int = 3,
        history_backoff: float = 0.1,
    ) -> None:
        super().__init__(channel, codec, history_page_size, history_retries, history_backoff)
        self.trusted_agent_ids = (
            set(trusted_agent_ids) if trusted_agent_ids is not None else {channel.client_id}
        )
        self.trusted_client_ids = set(trusted_client_ids or ())
        self._accept_input = accept_input
        self._runs: dict[str, AgentRun] = {}
        self._run_by_input_cmid: dict[str, str] = {}
        self._deferred_cancels: dict[str, Mapping[str, Any]] = {}
        self._accepted_streams: set[str] = set()
        self._held: dict[str, list[Mapping[str, Any]]] = {}
        self._high_water = ""
        self._seen_waiters: list[tuple[str, asyncio.Future[None]]] = []
        #: Messages ignored by the trust rules (most recent last), for inspection.
        self.rejected: list[Mapping[str, Any]] = []

    def on(self, event: str, handler: Callable[..., Any]) -> Callable[[], None]:
        """Listen to ``error`` (a run's hook or pipe failed and the run has no ``on_error`` hook)."""
        return self._emitter.on(event, handler)

    # -- connection ----------------------------------------------------------------------------

    def _on_live(self, message: Mapping[str, Any]) -> None:
        if self._closed:
            return
        self._on_wire(message)
        version = message.get("version")
        mark = max(
            str(message.get("serial") or ""),
            str(version.get("serial") or "") if isinstance(version, Mapping) else "",
        )
        if mark > self._high_water:
            self._high_water = mark
            if self._seen_waiters:
                waiting = []
                for serial, fut in self._seen_waiters:
                    if serial <= mark:
                        if not fut.done():
                            fut.set_result(None)
                    else:
                        waiting.append((serial, fut))
                self._seen_waiters = waiting
        if message.get("name") == EVENT_CANCEL:
            self._handle_cancel(message)

    async def wait_seen(self, serial: str, timeout: float = 10.0) -> bool:
        """Wait until the live subscription delivered a wire at or after ``serial`` (every earlier
        wire has then been folded: delivery is in channel order). False on timeout."""
        if not serial or self._high_water >= serial:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seen_waiters.append((serial, fut))
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except asyncio.TimeoutError:
            logger.warning("echo of %s not seen within %ss", serial, timeout)
            return False
        finally:
            self._seen_waiters = [(s, f) for s, f in self._seen_waiters if f is not fut]

    # -- trust ---------------------------------------------------------------------------------

    def _input_accepted(self, client_id: Any, run: RunNode | None) -> bool:
        if self._accept_input is not None:
            return bool(self._accept_input(client_id, run))
        if client_id is not None and client_id in self.trusted_client_ids:
            return True
        return run is not None and run.input_client_id is not None and client_id == run.input_client_id

    def _reject(self, message: Mapping[str, Any], why: str) -> None:
        logger.warning(
            "ignored %s from client %r (serial %s): %s",
            message.get("name") or action_name(message.get("action")),
            message.get("clientId"),
            message.get("serial"),
            why,
        )
        self.rejected.append(message)

    def _admit(self, message: Mapping[str, Any]) -> bool | None:
        """True = fold, False = reject, None = hold until the run's start is folded."""
        name = message.get("name")
        client_id = message.get("clientId")
        serial = message.get("serial")
        action = action_name(message.get("action"))
        if is_untrusted_agent_mutation(message, self.trusted_agent_ids):
            self._reject(
                message, f"agent message mutated by {mutator_of(message)!r}, not a trusted agent identity"
            )
            return False
        if name in AGENT_NAMES:
            if client_id not in self.trusted_agent_ids:
                self._reject(message, "not a trusted agent identity")
                return False
            if name == EVENT_AI_OUTPUT and isinstance(serial, str):
                self._accepted_streams.add(serial)
            return True
        if not name:
            if action in MUTATIONS:
                if serial in self._accepted_streams:
                    return True
                if message.get("extras") is not None:
                    self._reject(message, "mutation of a message that is not a trusted agent output")
                return False
            return True
        if name == EVENT_AI_INPUT:
            kind = codec_headers(message.get("extras")).get("kind")
            h = transport_headers(message.get("extras"))
            if kind in _ANSWER_KINDS or h.get(H_RUN_ID) is not None:
                run_id = h.get(H_RUN_ID)
                run: RunNode | None = None
                if isinstance(run_id, str):
                    run = self.tree.get_run_node(run_id)
                else:
                    cmid = h.get(H_CODEC_MESSAGE_ID)
                    node = self.tree.get_node_by_codec_message_id(cmid) if isinstance(cmid, str) else None
                    run = node if isinstance(node, RunNode) else None
                if self._input_accepted(client_id, run):
                    return True
                if (
                    (run is None or run.input_client_id is None)
                    and isinstance(run_id, str)
                    and self._accept_input is None
                ):
                    return None
                self._reject(message, f"{kind} from a client this agent does not accept")
                return False
        return True

    def _on_wire(self, message: Mapping[str, Any]) -> None:
        verdict = self._admit(message)
        if verdict is None:
            run_id = transport_headers(message.get("extras")).get(H_RUN_ID)
            held = self._held.setdefault(str(run_id), [])
            if len(held) >= _HELD_LIMIT:
                self._reject(held.pop(0), f"more than {_HELD_LIMIT} answers held for a run never started")
            held.append(message)
            return
        if not verdict:
            return
        event = self._applier.apply(message)
        self.tree.emit_ably_message(message)
        if isinstance(event, RunLifecycleEvent) and event.type == "start":
            self._release_held(event.run_id)

    def _release_held(self, run_id: str) -> None:
        held = self._held.pop(run_id, None)
        for message in held or ():
            self._on_wire(message)

    # -- cancel --------------------------------------------------------------------------------

    def _handle_cancel(self, message: Mapping[str, Any]) -> None:
        target = read_cancel_target(message)
        if target.run_id is None and target.input_codec_message_id is None:
            logger.warning("ai-cancel without run-id or input-codec-message-id ignored")
            return
        run_id = target.run_id
        if run_id is None and target.input_codec_message_id is not None:
            run_id = self._run_by_input_cmid.get(target.input_codec_message_id)
        run = self._runs.get(run_id) if run_id else None
        if run is None:
            if target.input_codec_message_id is not None:
                self._deferred_cancels[target.input_codec_message_id] = message
            return
        asyncio.ensure_future(run._cancel(message))

    # -- runs ----------------------------------------------------------------------------------

    async def create_run(
        self,
        invocation: Invocation | Mapping[str, Any],
        run_id: str | None = None,
        invocation_id: str | None = None,
        hooks: Mapping[str, Callable[..., Any]] | None = None,
    ) -> AgentRun:
        """Open a run for ``invocation`` (mints run and invocation ids unless given).

        The run locates its trigger (the ``ai-input`` whose ``event-id`` is
        ``invocation.input_event_id``) live or in history when :meth:`AgentRun.start` is awaited.
        ``hooks``: ``on_cancel(message) -> bool`` (veto), ``on_cancelled(write)``, ``on_error(err)``.
        """
        if self._closed:
            raise AITransportError("unable to create run; session is closed", ErrorCode.SESSION_CLOSED, 400)
        for label, value in (("run_id", run_id), ("invocation_id", invocation_id)):
            if value == "":
                raise InvalidArgumentError(
                    f"unable to create run; {label} must not be empty (omit it to have one generated)"
                )
        if not isinstance(invocation, Invocation):
            invocation = Invocation.from_json(invocation)
        run = AgentRun(
            self,
            invocation,
            run_id or str(uuid.uuid4()),
            invocation_id or str(uuid.uuid4()),
            dict(hooks or {}),
        )
        self._runs[run.run_id] = run
        return run

    def _rekey(self, run: AgentRun, old: str) -> None:
        if self._runs.get(old) is run:
            del self._runs[old]
        self._runs[run.run_id] = run

    async def end(self) -> None:
        """End every open run ``cancelled`` and close the session (detach)."""
        if self._closed:
            return
        for run in list(self._runs.values()):
            try:
                if run.is_open and not run.ended:
                    await run.end("cancelled")
            except Exception:
                logger.exception("failed to end run %s on session end", run.run_id)
            run.abort_signal.set()
        await self.close()

    async def close(self) -> None:
        """Stop listening and detach, without publishing anything."""
        if self._closed:
            return
        self._closed = True
        self._unsubscribe_quietly()
        for run in self._runs.values():
            run.abort_signal.set()
        self._runs.clear()
        await self._detach_quietly()


class AgentRun:
    """One run of the agent (``AgentRun`` of 0.8.0); created by :meth:`AgentSession.create_run`."""

    def __init__(
        self,
        session: AgentSession,
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
        #: Set when a client's ``ai-cancel`` (accepted by ``on_cancel``) or the session cancels the run.
        self.abort_signal = asyncio.Event()
        self._branch = LeafBranch(lambda: session.tree)
        #: The run's view: the conversation this run answers (see :class:`LeafBranch`).
        self.view = View(lambda: session.tree, lambda: session.hydrator, self._branch)
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
        self._active_step = False
        self._current_step: RunStep | None = None
        self._last_serial = ""

    def _note(self, serial: Any) -> None:
        if isinstance(serial, str) and serial > self._last_serial:
            self._last_serial = serial

    async def drain(self, timeout: float = 10.0) -> bool:
        """Wait until every message this run published has come back on the subscription and been
        folded, so :attr:`view` shows it (``pipe``/``send``/``start`` call this before returning)."""
        return await self.session.wait_seen(self._last_serial, timeout)

    # -- status --------------------------------------------------------------------------------

    @property
    def status(self) -> str:
        """The run's status as folded from the channel (``active`` before anything is seen)."""
        node = self.session.tree.get_run_node(self.run_id)
        return node.status if node is not None else "active"

    def info(self) -> RunInfo | None:
        """:class:`RunInfo` of this run, once it is in the tree."""
        node = self.session.tree.get_run_node(self.run_id)
        return node.info() if node is not None else None

    # -- trigger -------------------------------------------------------------------------------

    def _match(self) -> Mapping[str, Any] | None:
        return self.session.tree.find_message_by_event_id(self.invocation.input_event_id)

    async def _locate(self, timeout: float) -> None:
        found = self._match()
        if found is None:
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[Mapping[str, Any]] = loop.create_future()

            def on_msg(message: Mapping[str, Any]) -> None:
                if (
                    not fut.done()
                    and transport_headers(message.get("extras")).get(H_EVENT_ID)
                    == self.invocation.input_event_id
                ):
                    fut.set_result(message)

            off = self.session.tree.on("ably-message", on_msg)
            try:
                await self.session.hydrator.fold_until(lambda: fut.done())
                found = self._match()
                if found is None:
                    abort: asyncio.Future[Any] = asyncio.ensure_future(self.abort_signal.wait())
                    try:
                        waitables: set[asyncio.Future[Any]] = {fut, abort}
                        done, _ = await asyncio.wait(
                            waitables, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                        )
                    finally:
                        abort.cancel()
                    if fut in done:
                        found = fut.result()
                    elif self.abort_signal.is_set():
                        raise AITransportError(
                            f"unable to look up input event; run {self.run_id} was cancelled",
                            ErrorCode.OPERATION_CANCELLED,
                            400,
                        )
                    else:
                        raise AITransportError(
                            f"unable to locate input event '{self.invocation.input_event_id}' within {timeout}s",
                            ErrorCode.INPUT_EVENT_NOT_FOUND,
                            504,
                        )
            finally:
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
        if wire_run_id is not None and wire_run_id != self.run_id:
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

    async def _publish(self, message: dict[str, Any], what: str) -> list[str]:
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
        if self.is_open:
            return
        if self.invocation.input_event_id:
            await self._locate(timeout)
        else:
            self._branch.set_pin(None, self.run_id, None)
        if self.input_codec_message_id is not None:
            deferred = self.session._deferred_cancels.pop(self.input_codec_message_id, None)
            if deferred is not None:
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
        await self._publish(build_lifecycle_message(name, headers), name)
        self.is_open = True
        if not self.continuation:
            self.session.tree.apply_run_lifecycle(
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
        headers = build_lifecycle_headers(
            run_id=self.run_id,
            run_client_id=self.run_client_id or "",
            invocation_id=self.invocation_id,
            input_client_id=self.input_client_id,
            input_codec_message_id=self.input_codec_message_id,
            **extra,
        )
        await self._publish(build_lifecycle_message(name, headers), name)
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
        self.view.close()
        s = self.session
        if s._runs.get(self.run_id) is self:
            del s._runs[self.run_id]
        if self.input_codec_message_id is not None:
            s._run_by_input_cmid.pop(self.input_codec_message_id, None)

    async def _cancel(self, message: Mapping[str, Any]) -> None:
        node = self.session.tree.get_run_node(self.run_id)
        if node is None or node.input_client_id is None:
            # not folded yet: judge against the client whose input triggered this invocation
            node = RunNode(self.run_id, None, None, None, "", "", None, input_client_id=self.input_client_id)
        if not self.session._input_accepted(message.get("clientId"), node):
            self.session._reject(message, "cancel from a client this agent does not accept")
            return
        veto = self.hooks.get("on_cancel")
        try:
            if veto is not None:
                allowed = veto(message)
                if inspect.isawaitable(allowed):
                    allowed = await allowed
                if not allowed:
                    return
            self.abort_signal.set()
        except Exception as exc:  # noqa: BLE001 - a hook error is reported as 104002
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
        self, step_id: str, step_start_serial: str | None, step_client_id: str | None = None
    ) -> tuple[Any, str]:
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
            hook = self.hooks.get("on_ably_message")
            if hook is not None:
                hook(message)

        encoder = self.session.codec.create_encoder(
            _RecordingWriter(self), {"headers": headers}, on_ably_message=stamp, message_id=cmid
        )
        return encoder, cmid

    def _step_client_id(self) -> str:
        return self.input_client_id or ""

    async def _open_step(self, step_client_id: str | None = None) -> tuple[str, str | None]:
        step_id = f"{self.invocation_id}-step-{self._step_index}"
        self._step_index += 1
        headers = build_step_headers(
            run_id=self.run_id,
            step_id=step_id,
            invocation_id=self.invocation_id,
            run_client_id=self.run_client_id or "",
            invocation_client_id=self.input_client_id,
            step_client_id=step_client_id if step_client_id is not None else self._step_client_id(),
        )
        serials = await self._publish(build_lifecycle_message(EVENT_STEP_START, headers), EVENT_STEP_START)
        self._active_step = True
        return step_id, (serials[0] if serials else None)

    async def _close_step(
        self, step_id: str, step_start_serial: str | None, reason: str, step_client_id: str | None = None
    ) -> None:
        self._active_step = False
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
        """The pipe loop: ``step()`` gives the step (id, start serial) at the first event."""
        iterator = _aiter(events).__aiter__()
        abort: asyncio.Future[Any] = asyncio.ensure_future(self.abort_signal.wait())
        encoder: Any = None
        reason = "complete"
        error: BaseException | None = None
        try:
            while True:
                nxt: asyncio.Future[Any] = asyncio.ensure_future(iterator.__anext__())
                waitables: set[asyncio.Future[Any]] = {nxt, abort}
                done, _ = await asyncio.wait(waitables, return_when=asyncio.FIRST_COMPLETED)
                if nxt not in done:
                    nxt.cancel()
                    reason = "cancelled"
                    if encoder is not None:
                        hook = self.hooks.get("on_cancelled")
                        if hook is not None:
                            res = hook(encoder.publish_output)
                            if inspect.isawaitable(res):
                                await res
                        await encoder.cancel_streams()
                        await encoder.close()
                    break
                try:
                    value = nxt.result()
                except StopAsyncIteration:
                    if encoder is not None:
                        await encoder.cancel_streams()
                        await encoder.close()
                    break
                if encoder is None:
                    encoder, _ = self._encoder(*(await step()))
                await encoder.publish_output(value)
        except Exception as exc:  # noqa: BLE001 - any source/encoder failure ends the pipe with "error"
            reason, error = "error", exc
            logger.error("pipe for run %s failed: %s", self.run_id, exc)
            if encoder is not None:
                try:
                    await encoder.cancel_streams()
                except Exception:
                    logger.debug("cancel_streams after error failed", exc_info=True)
                try:
                    await encoder.close()
                except Exception:
                    logger.debug("close after error failed", exc_info=True)
            self._report(
                AITransportError(
                    f"unable to pipe response for run {self.run_id}; {exc}",
                    ErrorCode.STREAM_ERROR,
                    500,
                    cause=exc,
                )
            )
        finally:
            abort.cancel()
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:
                    logger.debug("closing the source failed", exc_info=True)
        return PipeResult(reason, error)  # type: ignore[arg-type]

    async def pipe(self, events: AsyncIterable[Any] | Iterable[Any]) -> PipeResult:
        """Publish a stream of Responses events as one message (one implicit step).

        Returns :class:`PipeResult` with ``reason`` ``complete`` (source exhausted), ``cancelled``
        (abort signal; ``on_cancelled(write)`` hook may publish a last output) or ``error`` (the
        source or the encoder raised; the error is in ``result.error``). Open streams are cancelled
        on error and cancel. The step opens at the first event (none for an empty source) and
        closes with the pipe. Does not end the run.
        """
        self._assert_open("pipe stream")
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
        step = self.create_step()
        await step.start()
        try:
            cmid = await step.send(output)
        finally:
            await step.end()
        return cmid

    def create_step(self, step_client_id: str | None = None) -> RunStep:
        """An explicit step (``createStep`` of 0.8.0): ``start()``, then any number of ``pipe`` /
        ``send`` (each its own message), then ``end(reason=None)``."""
        return RunStep(self, step_client_id)

    # -- conversation helpers ------------------------------------------------------------------

    def messages(self) -> list[Any]:
        """The openai messages (``OpenAIMessage``) of :attr:`view`."""
        return [m.message for m in self.view.get_messages()]

    def input_items(self) -> list[dict[str, Any]]:
        """``to_responses_input`` of the view: the model input for the next turn."""
        return to_responses_input(self.messages())

    def unanswered_calls(self) -> list[dict[str, Any]]:
        """Calls still waiting for a client (approval or client-executed result)."""
        return unanswered_calls(self.messages())

    def approved_unexecuted_calls(self) -> list[dict[str, Any]]:
        """Approved calls without output: the executions this run owes (model's own items)."""
        return approved_unexecuted_calls(self.messages())

    def owed_calls(self) -> list[dict[str, Any]] | None:
        """The resume decision: None while a call still waits for a client (stay suspended), else the
        approved calls to execute now (possibly empty: every call answered, call the model)."""
        if self.unanswered_calls():
            return None
        return self.approved_unexecuted_calls()

    async def run_owed_calls(
        self, execute: Callable[[Mapping[str, Any]], Any | Awaitable[Any]]
    ) -> list[dict[str, Any]] | None:
        """Execute every owed call with ``execute(call)`` and send each output; None when the run
        must stay suspended (see :meth:`owed_calls`). Returns the calls executed."""
        owed = self.owed_calls()
        if owed is None:
            return None
        for call in owed:
            result = execute(call)
            if inspect.isawaitable(result):
                result = await result
            await self.send(function_call_output(call, result))
        return owed


class RunStep:
    """An explicit step of a run (``RunStep`` of 0.8.0), from :meth:`AgentRun.create_step`.

    ``await start()`` publishes ``ai-step-start``; ``pipe(events)`` / ``send(output)`` publish
    messages in the step (each its own codec message); ``await end(reason=None)`` publishes
    ``ai-step-end`` — by default ``cancelled`` if the run was cancelled, ``failed`` if a pipe or send
    of the step failed, else ``complete``. ``AgentRun.end`` closes a step left open.
    """

    def __init__(self, run: AgentRun, step_client_id: str | None = None) -> None:
        self.run = run
        self.step_id: str | None = None
        self.step_client_id = step_client_id
        self._serial: str | None = None
        self._state = "initialized"
        self._failed = False
        self._cancelled = False

    @property
    def abort_signal(self) -> asyncio.Event:
        """The run's abort signal."""
        return self.run.abort_signal

    async def start(self) -> None:
        """Publish ``ai-step-start`` (idempotent)."""
        if self._state != "initialized":
            return
        run = self.run
        run._assert_open("start step")
        if run._active_step:
            raise InvalidArgumentError("unable to start step; another step is already active on this run")
        run._active_step = True
        try:
            self.step_id, self._serial = await run._open_step(self.step_client_id)
        except BaseException:
            run._active_step = False
            raise
        self._state = "active"
        run._current_step = self

    def _check_active(self, what: str) -> None:
        if self._state != "active":
            raise InvalidArgumentError(
                f"unable to {what}; the step is not active — call start() first and do not use it after end()"
            )

    async def pipe(self, events: AsyncIterable[Any] | Iterable[Any]) -> PipeResult:
        """Pipe a stream of events as one message of this step (see :meth:`AgentRun.pipe`)."""
        self._check_active("pipe step")
        assert self.step_id is not None
        step = (self.step_id, self._serial)

        async def opened() -> tuple[str, str | None]:
            return step

        result = await self.run._pipe_events(events, opened)
        self._failed |= result.reason == "error"
        self._cancelled |= result.reason == "cancelled"
        await self.run.drain()
        return result

    async def send(self, output: Any) -> str:
        """Publish one discrete output as its own message in this step; returns its codec-message-id."""
        self._check_active("send step")
        assert self.step_id is not None
        encoder, cmid = self.run._encoder(self.step_id, self._serial, self.step_client_id)
        try:
            await encoder.publish_output(output)
        except BaseException:
            self._failed = True
            raise
        finally:
            await encoder.close()
        await self.run.drain()
        return cmid

    async def end(self, reason: str | None = None) -> None:
        """Publish ``ai-step-end`` (idempotent); ``reason`` complete | failed | cancelled."""
        if reason is not None and reason not in ("complete", "failed", "cancelled"):
            raise InvalidArgumentError(
                f"unable to end step; reason must be complete, failed or cancelled, got {reason!r}"
            )
        if self._state != "active":
            self._state = "settled"
            return
        self._state = "settled"
        if reason is None:
            cancelled = self._cancelled or self.run.abort_signal.is_set()
            reason = "cancelled" if cancelled else "failed" if self._failed else "complete"
        run = self.run
        try:
            assert self.step_id is not None
            await run._close_step(self.step_id, self._serial, reason, self.step_client_id)
        finally:
            run._active_step = False
            if run._current_step is self:
                run._current_step = None
        await run.drain()
