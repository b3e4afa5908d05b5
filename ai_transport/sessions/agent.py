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
  (``ai_transport.sessions.agent``) and kept in :attr:`AgentSession.rejected`.
* Approvals, tool results (``tool-approval-response``, ``tool-result``, ``tool-result-error``),
  any other input into an existing run (an ``ai-input`` carrying ``run-id``) and cancels count only
  when ``accept_input(client_id, run)`` says so. Default: the publisher is the client
  that started the run (the ``input-client-id`` the agent stamped on the run's ``ai-run-start``) or
  is listed in ``trusted_client_ids``. A run whose start is not folded yet holds its inputs until it
  is. New user prompts (no ``run-id``) are accepted from anyone who may publish.
* The agent runs only ``function_call`` items of its own (trusted) outputs: an approval carries no
  arguments, and the arguments executed are those of the model's item (``approved_unexecuted_calls``
  returns the folded item itself).
  An approval for a call the agent never made is ignored and counted, never fatal; one for a call
  it did publish that is gone from the conversation is reported (104090 to ``on_error``) and the
  run carries on (:mod:`~ai_transport.conversation.approvals`).
* Someone else's append to one of the agent's live streams is undone when the stream ends: one
  update restores the text the agent wrote, so history's aggregate is the agent's own
  (:mod:`~ai_transport.conversation.own_streams`).
* Identities come from the Ably token. With anonymous clients (no ``clientId``) publishers cannot
  be told apart: give the agent and the users identities, or pass ``accept_input``. The mutation
  rule relies on Ably stamping ``version.clientId`` with the identity that updated/appended (as
  the emulator and the in-process channel do); an agent without a ``clientId`` trusts anonymous
  mutations.

The trigger of a run (the input named by the invocation) is located only among accepted wires, so a
forged or untrusted input cannot wake a run (``start()`` raises 104010 after its timeout).

Differences from 0.8.0: ``start()`` itself pages history until it finds the trigger (0.8.0 needs the
app to ``loadOlder`` first); ``pipe``/``send``/``start``/``suspend``/``end`` return once the channel
has echoed what they published, so :attr:`AgentRun.view` already shows it. Steps follow 0.8.0:
``create_step(step_id=...)`` with an explicit id, else a step created after a ``failed`` one
re-attempts its id; only a step's latest attempt is shown. Durable turns (:mod:`.durable`):
``adopt_run`` + ``load``, ``page_until_located``, ``with_agent_session``; streams a dead worker left
open are closed by the next worker (:mod:`.recovery`); each approved call's output is published once
however many workers are woken, with leases its holder renews and a fence before every publish
(:mod:`.claims`, automatic in ``run_owed_calls``; runs whose worker died: :mod:`.supervisor`); a loss of channel
continuity aborts the open runs, emits 104006 and refolds the tree from history
(:class:`~.session.SessionCore`). Steering as 0.8.0 (:mod:`.steer`): ``run.has_input()`` drives the
loop, the ``on_steer`` hook, ``steer-codec-message-ids`` on the pass that answers a steer. Parity
with 0.8.0, row by row: ``docs/PARITY.md``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..conversation.admission import AcceptInput
from ..conversation.core import DEFERRED_CANCEL_LIMIT, CancelRequested, Change, Publish, Seen
from ..conversation.held import HeldWires
from ..conversation.tree import RunNode
from ..errors import AITransportError, ErrorCode, InvalidArgumentError
from ..lease import DEFAULT_LEASE, LeasePolicy
from .agent_run import AgentRun
from .hooks import validate_hooks
from .invocation import Invocation
from .presence import AgentPresence
from .session import SessionCore
from .step import RunStep
from .tools import function_call_output, gate_calls
from .view import DEFAULT_HISTORY_PAGE_SIZE

__all__ = [
    "DEFERRED_CANCEL_LIMIT",
    "AgentRun",
    "AgentSession",
    "RunStep",
    "function_call_output",
    "gate_calls",
]

logger = logging.getLogger("ai_transport.sessions.agent")


class AgentSession(SessionCore):
    """The agent's end of one session (channel): folds the channel, opens runs, honours cancels.

    Args:
        channel: a :class:`~ai_transport.channels.channel.Channel` (in-process or Ably).
        codec: the codec (default :class:`~ai_transport.codec.codec.ResponsesCodec`).
        trusted_agent_ids: publisher ids whose ``ai-output``/lifecycle messages are folded
            (default: ``{channel.client_id}``).
        trusted_client_ids: client ids always accepted for approvals / tool results.
        accept_input: ``(client_id, run_node) -> bool`` replacing the default input trust rule.
        history_page_size: history page size (default 100).
        history_retries: retries of a failed history read (then 104011), with
            ``history_backoff * 2**attempt`` seconds between them.
        channel_modes: extra channel modes to attach with, e.g. ``OBJECT_MODES`` (``channelModes``
            of 0.8.0; the base modes are then requested too, :mod:`~ai_transport.channels.modes`).
        reorder_window: seconds a finished run's wire log is kept for late, out-of-order wires
            (``reorderWindowMs`` of 0.8.0; default 120, :mod:`~ai_transport.conversation.retention`).
        enter_presence: enter the channel's presence set while connected (default True), with
            data ``{"role": "agent", **presence_data}`` (:mod:`~.presence`; Python-only).
        presence_data: extra presence data of the agent's member.
        lease: seconds a claim (a call, the input that woke a run, a run) holds after its holder's
            latest renewal (exactly-once execution and crash recovery, :mod:`.claims`; default 10):
            a worker that stopped renewing is taken over after it, however long a live one works.
        lease_renew_every: seconds between the holder's renewals (default ``lease / 3``).
        claim_ttl: the former name of ``lease`` (used when ``lease`` is not given).
        signing_key: with a key (bytes or str), every output wire this agent publishes carries a
            keyed digest of its content so far (:mod:`~ai_transport.conversation.signing`), and agent messages folded from
            history and every live agent output wire (:mod:`~ai_transport.conversation.live_integrity`) must verify; ones
            that fail are kept in :attr:`tampered` and make the run's model input / owed calls
            raise 104090 instead of reaching the model.
    """

    _log = logger
    _continuity_verb = "continue"

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
        enter_presence: bool = True,
        presence_data: Mapping[str, Any] | None = None,
        lease: float | None = None,
        lease_renew_every: float | None = None,
        claim_ttl: float | None = None,
        signing_key: bytes | str | None = None,
        channel_modes: Iterable[str] | None = None,
        reorder_window: float | None = None,
    ) -> None:
        lease_name = "lease" if lease is not None or claim_ttl is None else "claim_ttl"
        lease_value = lease if lease is not None else claim_ttl if claim_ttl is not None else DEFAULT_LEASE
        policy = LeasePolicy(lease_value, lease_renew_every)
        try:
            policy.check()
        except ValueError as exc:
            field = str(exc).replace("lease must", f"{lease_name} must", 1).replace("renew_every", "lease_renew_every")
            raise InvalidArgumentError(f"unable to create session; {field}") from None
        super().__init__(
            channel,
            codec,
            history_page_size,
            history_retries,
            history_backoff,
            agent=True,
            trusted_agent_ids=trusted_agent_ids if trusted_agent_ids is not None else {channel.client_id},
            trusted_client_ids=trusted_client_ids or (),
            accept_input=accept_input,
            signing_key=signing_key,
        )
        self._set_options(channel_modes, reorder_window)
        core = self.core
        #: The agent's own presence member (entered on connect, left on close).
        self.agent_presence = AgentPresence(channel, presence_data, enter_presence)
        #: The timing of this session's leases (see :mod:`.claims`).
        self.lease_policy = policy
        #: Seconds a lease holds after its holder's latest renewal (``lease``).
        self.claim_ttl = float(policy.lease)
        #: Every trusted claim folded, by run (see :mod:`.claims`).
        self.claims = core.claims
        self.tree.fence.lease_ms = policy.lease_ms
        # The default (the agent's own identity) is settled again at connect: a connection still
        # connecting may know no clientId yet (a cold start).
        self._own_identity_trusted = trusted_agent_ids is None
        #: Steers folded by run since the session was made (a run created later seeds them).
        self.steer_ledger = core.steer_ledger
        assert core.admission is not None
        #: The trust rules (:mod:`~ai_transport.conversation.admission`).
        self.admission = core.admission
        #: Publisher ids whose outputs / lifecycle messages are folded.
        self.trusted_agent_ids = self.admission.trusted_agent_ids
        #: Client ids always accepted for inputs into a run.
        self.trusted_client_ids = self.admission.trusted_client_ids
        #: Integrity of agent output folded from history (and the signer of this agent's output).
        self.integrity = core.integrity
        #: Call ids the agent's trusted output declared (:mod:`~ai_transport.conversation.approvals`: which approvals are strays).
        self.published_calls = core.published_calls
        self._runs: dict[str, AgentRun] = {}
        self._seen_waiters: list[tuple[str, asyncio.Future[None]]] = []
        #: Cancellations in flight (kept referenced until done).
        self._cancelling: set[asyncio.Task[None]] = set()
        #: Messages ignored by the trust rules (most recent last), for inspection.
        self.rejected: list[Mapping[str, Any]] = core.rejected
        #: What this agent's live runs wrote to their streams (:mod:`~ai_transport.conversation.own_streams`).
        self.own_streams = core.own_streams
        self._restoring: set[asyncio.Task[None]] = set()
        #: Every trusted stream folded, by run: what a recovering worker closes (:mod:`.recovery`).
        self.open_streams = core.open_streams  # with a key, the live verifier knows each stream's text
        #: With a key: checks every live agent output wire's tag (:mod:`~ai_transport.conversation.live_integrity`).
        self.live_verifier = core.live_verifier

    @property
    def _run_by_input_cmid(self) -> dict[str, str]:
        return self.core.run_by_input_cmid

    @property
    def _deferred_cancels(self) -> HeldWires:
        return self.core.deferred_cancels

    @property
    def _high_water(self) -> str:
        return self.core.high_water

    def on(self, event: str, handler: Callable[..., Any]) -> Callable[[], None]:
        """Listen to ``error`` (a run's hook or pipe failed and the run has no ``on_error`` hook; or
        channel continuity was lost: 104006, open runs were aborted and the tree is refolded from
        history, see :class:`~.session.SessionCore`; or that refold could not read history: 104011) or ``skipped`` (``(message, reason)``: a channel
        message not folded, see :attr:`skipped`)."""
        return self._emitter.on(event, handler)

    def _before_rebuild(self) -> None:
        for run in list(self._runs.values()):
            run.abort_signal.set()

    # -- connection ----------------------------------------------------------------------------

    async def connect(self) -> None:
        """Subscribe and attach, then enter presence as the agent (best effort, see :mod:`~.presence`)."""
        self._trust_own_identity()
        await super().connect()
        self._trust_own_identity()  # attached: the connection's clientId is known now
        if not self.agent_presence.entered:
            await self.agent_presence.enter()

    def _trust_own_identity(self) -> None:
        """With the default ``trusted_agent_ids``, trust the channel's ``client_id`` as it is now
        (the set is shared with admission and integrity, so it is updated in place)."""
        cid = getattr(self.channel, "client_id", None)
        if self._own_identity_trusted and cid is not None and cid not in self.trusted_agent_ids:
            self.trusted_agent_ids.discard(None)
            self.trusted_agent_ids.add(cid)

    def _on_change(self, change: Change) -> None:
        if isinstance(change, Seen):
            if self._seen_waiters:
                mark, waiting = change.serial, []
                for serial, fut in self._seen_waiters:
                    if serial <= mark:
                        if not fut.done():
                            fut.set_result(None)
                    else:
                        waiting.append((serial, fut))
                self._seen_waiters = waiting
        elif isinstance(change, CancelRequested):
            self._cancel_run(change)
        elif isinstance(change, Publish):
            task = asyncio.ensure_future(self._publish_restore(change.wire))
            self._restoring.add(task)
            task.add_done_callback(self._restoring.discard)

    async def wait_seen(self, serial: str, timeout: float = 10.0) -> bool:
        """Wait until the live subscription delivered a wire at or after ``serial`` (every earlier
        wire has then been folded: delivery is in channel order). False on timeout."""
        if not serial or self.core.high_water >= serial:
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
        return self.admission.input_accepted(client_id, run)

    def _reject(self, message: Mapping[str, Any], why: str) -> None:
        """A wire the trust rules refused: kept in :attr:`rejected`, counted once (a refused append /
        update of one of the agent's live streams is undone, :mod:`~ai_transport.conversation.own_streams`)."""
        self.core.reject(message, why)
        self._dispatch()

    async def restore_stream(self, message: dict[str, Any]) -> None:
        """Publish the update restoring one of this agent's streams to the text it wrote (signed
        with a key); a failure is logged, never raised (:mod:`~ai_transport.conversation.own_streams`)."""
        self.integrity.sign_update(message)
        await self._publish_restore(message)

    async def _publish_restore(self, message: dict[str, Any]) -> None:
        try:
            await self.channel.update_message(message)
        except Exception:
            logger.exception("could not restore stream %s to the agent's own text", message.get("serial"))
            return
        logger.warning("restored stream %s to the agent's own text (someone else appended to it)", message.get("serial"))

    @property
    def tampered(self) -> list[Mapping[str, Any]]:
        """Agent messages that failed the integrity check: aggregates from history (:mod:`~ai_transport.conversation.signing`)
        and, with a key, live wires (:mod:`~ai_transport.conversation.live_integrity`); each wire once."""
        return self.integrity.tampered

    # -- cancel --------------------------------------------------------------------------------

    def _handle_cancel(self, message: Mapping[str, Any]) -> None:
        """Route one ``ai-cancel`` wire (what the live fold does for each)."""
        self.core.route_cancel(message)
        self._dispatch()

    def _cancel_run(self, change: CancelRequested) -> None:
        run = self._runs.get(change.run_id) if change.run_id else None
        if run is None:
            if change.input_codec_message_id is not None:
                self._defer_cancel(change.input_codec_message_id, change.wire)
            return
        task = asyncio.ensure_future(run._cancel(change.wire))
        self._cancelling.add(task)
        task.add_done_callback(self._cancelling.discard)

    def _defer_cancel(self, input_codec_message_id: str, message: Mapping[str, Any]) -> None:
        """Hold a cancel of an input no run has taken yet, per publisher: another member's cancels
        never replace or evict it (:class:`~ai_transport.conversation.held.HeldWires`)."""
        self.core.defer_cancel(message, input_codec_message_id)

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
        ``hooks`` (:mod:`~ai_transport.sessions.hooks`): ``signal`` (an :class:`asyncio.Event` that
        cancels the run), ``on_cancel(CancelRequest) -> bool`` (veto), ``on_cancelled(write)``,
        ``on_error(err)``, ``on_ably_message(message)``, ``on_steer()``.
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
            validate_hooks(hooks or {}),
        )
        self._runs[run.run_id] = run
        return run

    def adopt_run(
        self,
        invocation: Invocation | Mapping[str, Any],
        run_id: str,
        invocation_id: str,
        hooks: Mapping[str, Callable[..., Any]] | None = None,
    ) -> AgentRun:
        """A run another process opened, to continue here (``adoptRun`` of 0.8.0).

        Nothing is published: ``await run.load(timeout=30.0)`` waits until the run is visible,
        rejects a suspended or ended run, closes the streams a dead worker left open, and then
        ``pipe`` / ``send`` / ``create_step`` / ``suspend`` / ``end`` work (see :mod:`.durable`).
        ``run_id`` and ``invocation_id`` are required and authoritative (an explicit, stable
        ``invocation_id`` keeps default step ids stable across attempts). ``hooks`` as
        :meth:`create_run`.
        """
        if self._closed:
            raise AITransportError("unable to adopt run; session is closed", ErrorCode.SESSION_CLOSED, 400)
        for label, value in (("run_id", run_id), ("invocation_id", invocation_id)):
            if not isinstance(value, str) or not value:
                raise InvalidArgumentError(f"unable to adopt run; {label} must be a non-empty string")
        if not isinstance(invocation, Invocation):
            invocation = Invocation.from_json(invocation)
        run = AgentRun(self, invocation, run_id, invocation_id, validate_hooks(hooks or {}))
        run._adopted = True
        self._runs[run.run_id] = run
        return run

    def _forget(self, run: AgentRun) -> None:
        if self._runs.get(run.run_id) is run:
            del self._runs[run.run_id]

    async def detach(self) -> None:
        """Stop listening and detach without publishing anything (``detach`` of 0.8.0): open runs
        stay open on the wire for another worker to adopt. Same as :meth:`close`."""
        await self.close()

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
        for run in self._runs.values():
            await run.lease.hand_off()  # a detached worker hands its open runs to the next one
        self._unsubscribe_quietly()
        for run in self._runs.values():
            run.abort_signal.set()
        self._runs.clear()
        await self.agent_presence.leave()
        await self._detach_quietly()

