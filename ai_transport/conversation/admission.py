"""Who may change what: the publisher-trust rules a session applies before folding a wire.

Shared by :class:`~.agent.AgentSession` (always) and :class:`~.client.ClientSession` (when it is
given ``trusted_agent_ids``), so a careful client shows exactly what the agent will act on:

* ``ai-output`` and run / step lifecycle messages count only from ``trusted_agent_ids``; an update /
  append / delete of such a message only when its ``version.clientId`` (the mutator, stamped by Ably
  from the connection's identity) is a trusted agent too, and name-less appends only for a stream
  whose create was accepted.
* Approvals, tool results and any other input into an existing run (an ``ai-input`` carrying
  ``run-id``) count only when ``accept_input(client_id, run)`` says so. Default: the publisher is the
  client that started the run (the ``input-client-id`` the agent stamped on the run's
  ``ai-run-start``) or is listed in ``trusted_client_ids``. A run whose start is not folded yet, or
  that two agent identities claim (its owner, the first in serial order, may still change while
  history is paged newest first), holds the inputs it would refuse (:meth:`Admission.hold`) until a
  start is folded (:meth:`Admission.release`).
* New user prompts (no ``run-id``) are accepted from anyone who may publish; the tree keeps each
  prompt's ``codec-message-id`` to the client that first published it.

See ``docs/SECURITY.md`` for the capabilities that make these rules sound.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from ..channels.channel import action_name
from ..codec.headers import codec_headers, transport_headers
from ..errors import quoted
from ..lease import LEASE_NAME
from .authority import MUTATIONS, author_of, mutator_of
from .held import HeldWires
from .lifecycle import (
    EVENT_AI_INPUT,
    EVENT_AI_OUTPUT,
    EVENT_RUN_END,
    EVENT_RUN_RESUME,
    EVENT_RUN_START,
    EVENT_RUN_SUSPEND,
    EVENT_STEP_END,
    EVENT_STEP_START,
    H_CODEC_MESSAGE_ID,
    H_RUN_ID,
    H_SUPERSEDES,
)
from .nodes import RunNode

__all__ = [
    "AGENT_NAMES",
    "ANSWER_KINDS",
    "MUTATIONS",
    "AcceptInput",
    "Admission",
    "is_untrusted_agent_mutation",
    "mutator_of",
]

#: Message names only an agent publishes: ``ai-output`` and the run / step lifecycle.
AGENT_NAMES: Final = frozenset(
    {
        EVENT_AI_OUTPUT,
        EVENT_RUN_START,
        EVENT_RUN_RESUME,
        EVENT_RUN_SUSPEND,
        EVENT_RUN_END,
        EVENT_STEP_START,
        EVENT_STEP_END,
    }
)

#: Input kinds that answer a call of a run.
ANSWER_KINDS: Final = frozenset({"tool-result", "tool-result-error", "tool-approval-response"})

#: Answers one publisher has held per unknown run (history folds newest first); its older ones are
#: dropped beyond this (another publisher's never are).
HELD_LIMIT: Final = 1000
#: Answers one publisher has held in all (one inventing run ids evicts only its own).
HELD_TOTAL_LIMIT: Final = 10_000

AcceptInput = Callable[[Any, RunNode | None], bool]


def is_untrusted_agent_mutation(message: Mapping[str, Any], trusted_agent_ids: set[Any]) -> bool:
    """True for an update / append / delete of an agent message (named in :data:`AGENT_NAMES`, or
    name-less) whose mutator is not in ``trusted_agent_ids``."""
    action = message.get("action")
    # a str action is its own name (one outside ACTIONS is no mutation either): no call for the usual create
    if (action if type(action) is str else action_name(action)) not in MUTATIONS:
        return False
    name = message.get("name")
    mutator = mutator_of(message)
    return (mutator if isinstance(mutator, str) else None) not in trusted_agent_ids and (
        not name or name in AGENT_NAMES
    )


def _contested(tree: Any, run_id: str) -> bool:
    """Whether two agent identities claim ``run_id`` (:meth:`~.tree.Tree.run_contested`): the run's
    input client may still change with an older wire, so an input it refuses is held, not refused."""
    contested = getattr(tree, "run_contested", None)
    return bool(contested(run_id)) if callable(contested) else False


class Admission:
    """The trust rules of one session (see the module docstring).

    Args:
        trusted_agent_ids: publisher ids whose outputs / lifecycle count.
        trusted_client_ids: client ids always accepted for inputs into a run.
        accept_input: ``(client_id, run_node) -> bool`` replacing the default input rule.
        reject: called with ``(message, why)`` for every wire refused.
    """

    def __init__(
        self,
        trusted_agent_ids: Iterable[str | None],
        trusted_client_ids: Iterable[str],
        accept_input: AcceptInput | None,
        reject: Callable[[Mapping[str, Any], str], None],
    ) -> None:
        self.trusted_agent_ids: set[Any] = set(trusted_agent_ids)
        self.trusted_client_ids: set[Any] = set(trusted_client_ids)
        self.accept_input = accept_input
        self._reject = reject
        self._accepted_streams: set[str] = set()
        #: Answers into runs whose start is not folded yet (see :meth:`hold`).
        self.held = HeldWires(
            HELD_LIMIT,
            HELD_TOTAL_LIMIT,
            reject,
            f"more than {HELD_LIMIT} answers held for a run never started",
            f"more than {HELD_TOTAL_LIMIT} answers held for runs never started",
        )
        #: Inputs into a run refused by its input client, judged again at the run's next start (a
        #: run's owner — the first agent identity in serial order — may change while history is
        #: paged newest first); bounded per publisher as :attr:`held` (overflow is just forgotten).
        self.refused = HeldWires(HELD_LIMIT, HELD_TOTAL_LIMIT, lambda message, why: None, "", "")
        self._arrivals = itertools.count()

    def input_accepted(self, client_id: Any, run: RunNode | None) -> bool:
        """Whether ``client_id`` may put inputs into ``run`` (approvals, tool results, cancels)."""
        if self.accept_input is not None:
            return bool(self.accept_input(client_id, run))
        if client_id is not None and client_id in self.trusted_client_ids:
            return True
        return run is not None and run.input_client_id is not None and client_id == run.input_client_id

    def admit(self, message: Mapping[str, Any], tree: Any, headers: Mapping[str, str] | None = None) -> bool | None:
        """True = fold, False = refused (already reported), None = hold until the run's start.
        ``headers``: the wire's transport tier when the caller read it already (read once per wire)."""
        name = message.get("name")
        client_id = message.get("clientId")
        serial = message.get("serial")
        action = message.get("action")
        # a str action is its own name (one outside ACTIONS is no mutation either): no call for the usual create
        mutation = (action if type(action) is str else action_name(action)) in MUTATIONS
        if mutation:
            if is_untrusted_agent_mutation(message, self.trusted_agent_ids):
                self._reject(
                    message, f"agent message mutated by {mutator_of(message)!r}, not a trusted agent identity"
                )
                return False
            if isinstance(serial, str) and serial in self._accepted_streams:
                mutator = mutator_of(message)
                if (mutator if isinstance(mutator, str) else None) not in self.trusted_agent_ids:
                    # a mutation renaming a trusted output (any name) is still a mutation of that output
                    self._reject(message, f"agent output mutated by {mutator!r}, not a trusted agent identity")
                    return False
        if name == LEASE_NAME and client_id not in self.trusted_agent_ids:
            self._reject(message, f"lease wire from untrusted client {client_id!r}")
            return False
        if name in AGENT_NAMES:
            if client_id not in self.trusted_agent_ids:
                self._reject(message, "not a trusted agent identity")
                return False
            if name == EVENT_AI_OUTPUT and isinstance(serial, str):
                self._accepted_streams.add(serial)
            return True
        if not name:
            if mutation:
                if serial in self._accepted_streams:
                    return True
                if message.get("extras") is not None:
                    self._reject(message, "mutation of a message that is not a trusted agent output")
                return False
            return True
        if name == EVENT_AI_INPUT:
            extras = message.get("extras")
            kind = codec_headers(extras).get("kind")
            h = transport_headers(extras) if headers is None else headers
            run_id = h.get(H_RUN_ID)
            if kind in ANSWER_KINDS or run_id is not None:
                run: RunNode | None = None
                if isinstance(run_id, str):
                    run = tree.get_run_node(run_id)
                else:
                    cmid = h.get(H_CODEC_MESSAGE_ID)
                    node = tree.get_node_by_codec_message_id(cmid) if isinstance(cmid, str) else None
                    run = node if isinstance(node, RunNode) else None
                if self.input_accepted(author_of(message), run):  # the author, never a claimed name
                    return True
                if run_id is None and (run is None or run.input_client_id is None) and kind in ANSWER_KINDS:
                    # a fork's answer: its run not placed yet, or placed by its own later wires
                    # (newest page first) and not started: judged by the run it supersedes
                    return self._admit_fork(message, tree, h, kind)
                if isinstance(run_id, str) and self._judged_later(tree, run_id, run):
                    return None  # judged once the run's start is folded (or its owner settled)
                self._reject(message, f"input {quoted(kind)} from a client this session does not accept")
                if isinstance(run_id, str) and getattr(tree, "judge_runs", False):
                    # judged by the run's current start: an older one still unread (another agent
                    # identity's start folded first) may give the run another input client
                    self.refused.hold(run_id, next(self._arrivals), message)
                return False
        return True

    def _admit_fork(self, message: Mapping[str, Any], tree: Any, h: Mapping[str, str], kind: Any) -> bool | None:
        """A client fork's answer (0.8.0's ``createToolResultFork``, what ``useChat`` publishes for a
        client tool's result: run-less, its run the agent's to start) answers a call of the run it
        ``supersedes``: it counts from that run's input client (or one this session accepts), held
        until that run's start is folded; a fork naming no run is refused."""
        superseded = h.get(H_SUPERSEDES)
        trunk = tree.get_run_node(superseded) if isinstance(superseded, str) else None
        if isinstance(superseded, str):
            if self.input_accepted(author_of(message), trunk):
                return True
            if self._judged_later(tree, superseded, trunk):
                return None  # judged once the superseded run's start is folded
        self._reject(message, f"input {quoted(kind)} from a client this session does not accept")
        return False

    def _judged_later(self, tree: Any, run_id: str, run: RunNode | None) -> bool:
        """Whether an input into ``run_id`` (its node ``run``, if placed) that no accepted client
        sent waits for the run's start (not folded yet, or its owner contested) rather than being
        refused now; never with an ``accept_input`` predicate, which judges at once."""
        return self.accept_input is None and (
            run is None or run.input_client_id is None or _contested(tree, run_id)
        )

    def hold(self, message: Mapping[str, Any]) -> None:
        """Keep an input into a run whose start is not folded yet (at most :data:`HELD_LIMIT` per run
        and :data:`HELD_TOTAL_LIMIT` in all; the oldest held is dropped, reported, beyond that); a
        client fork's answer waits for the start of the run it supersedes."""
        h = transport_headers(message.get("extras"))
        run_id = h.get(H_RUN_ID)
        self.held.hold(str(run_id if run_id is not None else h.get(H_SUPERSEDES)), next(self._arrivals), message)

    def clear_held(self) -> None:
        """Drop every held input (a loss of continuity: the refold from history holds them again)."""
        self.held.clear()
        self.refused.clear()

    def release(self, run_id: str) -> list[Mapping[str, Any]]:
        """The inputs held for ``run_id`` (now started), in arrival order, then those refused by an
        earlier start of it (judged again: the start just folded may have settled another owner)."""
        return [*self.held.release(run_id), *self.refused.release(run_id)]
