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
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._shapes import MAPPING
from ..channels.channel import action_name
from ..conversation.admission import AcceptInput, Admission
from ..conversation.approvals import PublishedCalls
from ..conversation.held import HeldWires
from ..conversation.lifecycle import EVENT_AI_OUTPUT, EVENT_CANCEL, RunLifecycleEvent, read_cancel_target
from ..conversation.live_integrity import DROP, FOLD, HOLD, SPLIT, LiveVerifier
from ..conversation.open_streams import OpenStreams
from ..conversation.own_streams import OwnStreams
from ..conversation.signing import HistoryIntegrity
from ..conversation.tree import RunNode
from ..errors import AITransportError, ErrorCode, InvalidArgumentError
from ..lease import DEFAULT_LEASE, LeasePolicy
from .agent_run import AgentRun
from .claims import CLAIM_NAME, ClaimLedger
from .hooks import validate_hooks
from .invocation import Invocation
from .presence import AgentPresence
from .refold import adopt_state
from .session import SessionCore
from .steer import SteerLedger
from .step import RunStep
from .tools import function_call_output, gate_calls
from .view import DEFAULT_HISTORY_PAGE_SIZE

__all__ = [
    "AgentRun",
    "AgentSession",
    "RunStep",
    "function_call_output",
    "gate_calls",
]

logger = logging.getLogger("ai_transport.sessions.agent")

#: Cancels one publisher has held for inputs whose run is not known yet (0.8.0's limit, per
#: publisher here); its oldest is dropped beyond. One per publisher and input: a later one of the
#: same publisher replaces its earlier one, another publisher's never does.
DEFERRED_CANCEL_LIMIT = 200


def _dropped_cancel(message: Mapping[str, Any], why: str) -> None:
    logger.warning("deferred cancel from %r dropped: %s", message.get("clientId"), why)


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
        super().__init__(channel, codec, history_page_size, history_retries, history_backoff)
        self._set_options(channel_modes, reorder_window)
        #: The agent's own presence member (entered on connect, left on close).
        self.agent_presence = AgentPresence(channel, presence_data, enter_presence)
        #: The timing of this session's leases (see :mod:`.claims`).
        self.lease_policy = policy
        #: Seconds a lease holds after its holder's latest renewal (``lease``).
        self.claim_ttl = float(policy.lease)
        #: Every trusted claim folded, by run (see :mod:`.claims`).
        self.claims = ClaimLedger()
        self.tree.fence.lease_ms = policy.lease_ms
        # The default (the agent's own identity) is settled again at connect: a connection still
        # connecting may know no clientId yet (a cold start).
        self._own_identity_trusted = trusted_agent_ids is None
        #: Steers folded by run since the session was made (a run created later seeds them).
        self.steer_ledger = SteerLedger(self.tree)
        self.admission = Admission(
            trusted_agent_ids if trusted_agent_ids is not None else {channel.client_id},
            trusted_client_ids or (),
            accept_input,
            self._reject,
        )
        #: Publisher ids whose outputs / lifecycle messages are folded.
        self.trusted_agent_ids = self.admission.trusted_agent_ids
        #: Client ids always accepted for inputs into a run.
        self.trusted_client_ids = self.admission.trusted_client_ids
        #: Integrity of agent output folded from history (and the signer of this agent's output).
        channel_name = getattr(channel, "name", None)
        self.integrity = HistoryIntegrity(
            signing_key, self.admission.trusted_agent_ids, channel_name if isinstance(channel_name, str) else ""
        )
        #: Call ids the agent's trusted output declared (:mod:`~ai_transport.conversation.approvals`: which approvals are strays).
        self.published_calls = PublishedCalls()
        self._runs: dict[str, AgentRun] = {}
        self._run_by_input_cmid: dict[str, str] = {}
        self._deferred_cancels = HeldWires(
            1,
            DEFERRED_CANCEL_LIMIT,
            _dropped_cancel,
            "a later cancel of the same input by the same publisher",
            f"more than {DEFERRED_CANCEL_LIMIT} cancels held for inputs not yet run",
        )
        self._cancel_arrivals = itertools.count()
        self._high_water = ""
        self._seen_waiters: list[tuple[str, asyncio.Future[None]]] = []
        #: Cancellations in flight (kept referenced until done).
        self._cancelling: set[asyncio.Task[None]] = set()
        #: Messages ignored by the trust rules (most recent last), for inspection.
        self.rejected: list[Mapping[str, Any]] = []
        #: What this agent's live runs wrote to their streams (:mod:`~ai_transport.conversation.own_streams`).
        self.own_streams = OwnStreams()
        self._restoring: set[asyncio.Task[None]] = set()
        #: Every trusted stream folded, by run: what a recovering worker closes (:mod:`.recovery`).
        self.open_streams = OpenStreams()  # with a key, the live verifier knows each stream's text
        #: With a key: checks every live agent output wire's tag (:mod:`~ai_transport.conversation.live_integrity`).
        self.live_verifier = (
            LiveVerifier(self.integrity.key, self._skip, self.integrity.channel) if self.integrity.key else None
        )
        #: Where folds record claims / streams / verified history: the live objects, or twins in a refold.
        self._claims_sink, self._streams_sink = self.claims, self.open_streams
        self._verifier_sink = self.live_verifier
        if self.live_verifier is not None:
            self.integrity.pending = self.live_verifier.pending

    def on(self, event: str, handler: Callable[..., Any]) -> Callable[[], None]:
        """Listen to ``error`` (a run's hook or pipe failed and the run has no ``on_error`` hook; or
        channel continuity was lost: 104006, open runs were aborted and the tree is refolded from
        history, see :class:`~.session.SessionCore`; or that refold could not read history: 104011) or ``skipped`` (``(message, reason)``: a channel
        message not folded, see :attr:`skipped`)."""
        return self._emitter.on(event, handler)

    def _before_rebuild(self) -> None:
        for run in list(self._runs.values()):
            run.abort_signal.set()

    def _shadow_begin(self) -> None:
        # readers keep the pre-loss ledgers; the refold fills fresh twins
        self.admission.clear_held()
        self._claims_sink, self._streams_sink = ClaimLedger(), self.open_streams.twin()
        self._applier.tree.fence.lease_ms = self.lease_policy.lease_ms
        if self.live_verifier is not None:  # what the refold verifies from history replaces it
            self._verifier_sink = self.live_verifier.twin()

    def _shadow_commit(self) -> None:
        adopt_state(self.claims, self._claims_sink)
        adopt_state(self.open_streams, self._streams_sink)
        if self.live_verifier is not None and self._verifier_sink is not None:
            adopt_state(self.live_verifier, self._verifier_sink)
        self._reset_sinks()

    def _shadow_discard(self) -> None:
        if self.live_verifier is not None:  # the gap is unknown: appends wait for a verified aggregate
            self.live_verifier.clear()
        self._reset_sinks()

    def _reset_sinks(self) -> None:
        self._claims_sink, self._streams_sink = self.claims, self.open_streams
        self._verifier_sink = self.live_verifier

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

    def _on_live(self, message: Mapping[str, Any]) -> None:
        if self._closed or not self._well_formed(message):
            return
        self._on_wire(message, checked=True, live=True)
        version = message.get("version")
        mark = max(
            str(message.get("serial") or ""),
            str(version.get("serial") or "") if isinstance(version, MAPPING) else "",
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
        return self.admission.input_accepted(client_id, run)

    def _reject(self, message: Mapping[str, Any], why: str) -> None:
        self._foreign_mutation(message)
        if self._first_skip(message):  # once per wire for the session's life (a refold re-reads it)
            self.rejected.append(message)
            self._count_skip(message, why)

    def _foreign_mutation(self, message: Mapping[str, Any]) -> None:
        """Someone else's refused append / update to a stream of a live run: the run restores the
        stream's text when it ends (:mod:`~ai_transport.conversation.own_streams`)."""
        serial = message.get("serial")
        if serial not in self.own_streams or action_name(message.get("action")) not in ("message.append", "message.update"):
            return
        restore = self.own_streams.foreign(serial)
        if restore is not None:
            task = asyncio.ensure_future(self.restore_stream(restore))
            self._restoring.add(task)
            task.add_done_callback(self._restoring.discard)

    async def restore_stream(self, message: dict[str, Any]) -> None:
        """Publish the update restoring one of this agent's streams to the text it wrote (signed
        with a key); a failure is logged, never raised (:mod:`~ai_transport.conversation.own_streams`)."""
        self.integrity.sign_update(message)
        try:
            await self.channel.update_message(message)
        except Exception:
            logger.exception("could not restore stream %s to the agent's own text", message.get("serial"))
            return
        logger.warning("restored stream %s to the agent's own text (someone else appended to it)", message.get("serial"))

    def _refuse_tampered(self, message: Mapping[str, Any], problem: str) -> None:
        self._foreign_mutation(message)
        if self._first_skip(message):
            self.integrity.record(message, problem)
            self.published_calls.note_tampered(message)
            self.rejected.append(message)
            self._count_skip(message, f"tampered: {problem}")

    @property
    def tampered(self) -> list[Mapping[str, Any]]:
        """Agent messages that failed the integrity check: aggregates from history (:mod:`~ai_transport.conversation.signing`)
        and, with a key, live wires (:mod:`~ai_transport.conversation.live_integrity`); each wire once."""
        return self.integrity.tampered

    def _on_history(self, message: Mapping[str, Any]) -> None:
        if not self._well_formed(message):
            return
        problem = self.integrity.problem(message)
        if problem is not None:
            self._refuse_tampered(message, problem)
            return
        verifier = self._verifier_sink
        if (
            verifier is not None
            and message.get("name") == EVENT_AI_OUTPUT
            and message.get("clientId") in self.trusted_agent_ids
        ):
            verifier.adopt(message)  # verified (problem() checked the tag): live appends go on from it
        self._on_wire(message, checked=True)
        if verifier is not None and verifier is self.live_verifier:
            self._settle(verifier)

    def _settle(self, verifier: LiveVerifier) -> None:
        """Report the pending appends the verifier found foreign; check the ones it released."""
        if not verifier.unsettled:
            return
        for refused, why in verifier.take_refused():
            self._refuse_tampered(refused, why)
        for released in verifier.take_released():
            self._on_wire(released, checked=True, live=True)

    def _on_wire(self, message: Mapping[str, Any], checked: bool = False, live: bool = False) -> None:
        if not checked and not self._well_formed(message):
            return
        if message.get("name") == CLAIM_NAME:
            refused = self._claims_sink.note(message, self.trusted_agent_ids)
            if refused is not None:
                self._reject(message, refused)
            else:
                self._applier.tree.note_lease(message)  # fences a superseded holder's late outputs
            return
        tree = self._applier.tree  # the shadow tree while a refold runs
        verdict = self.admission.admit(message, tree)
        if verdict is None:
            self.admission.hold(message)
            return
        if not verdict:
            return
        verifier = self.live_verifier if live else None
        if verifier is not None:
            outcome = verifier.check(message)
            if outcome == SPLIT:  # a rolled-up delivery: fold the agent's part (the wire is reported)
                message, outcome = verifier.take_substitute(), FOLD
            if outcome != FOLD:
                if outcome != HOLD and outcome != DROP:
                    self._refuse_tampered(message, outcome)
                self._settle(verifier)
                return
        self._streams_sink.note(message)
        if message.get("clientId") in self.trusted_agent_ids:
            self.published_calls.note(message)
        event = self._applier.apply(message)
        tree.emit_ably_message(message)
        if verifier is not None:
            self._settle(verifier)
        if isinstance(event, RunLifecycleEvent) and event.type == "start":
            for held in self.admission.release(event.run_id):
                self._on_wire(held, checked=True)

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
                # held per publisher: another member's cancels never replace or evict this one
                self._deferred_cancels.hold(target.input_codec_message_id, next(self._cancel_arrivals), message)
            return
        task = asyncio.ensure_future(run._cancel(message))
        self._cancelling.add(task)
        task.add_done_callback(self._cancelling.discard)

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

