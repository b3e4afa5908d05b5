"""The tree: folding a channel's history in any page size, with re-deliveries, gives the live view.

A real conversation is recorded once on the in-process channel (a gated call approved and answered,
a second question, a regenerate); its history (aggregates, ascending serial) is then re-folded the way
a reader pages it — newest page first, each page oldest-first — for every page size Hypothesis picks,
with random duplicate deliveries, into a fresh :class:`Tree`. Messages, run statuses and steps must
equal the live client's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support_sessions import as_dicts, record_conversation

from ai_transport.codec.codec import ResponsesCodec
from ai_transport.conversation.tree import Tree, WireApplier, WireLog
from ai_transport.sessions.view import TreeBranch

RECORDED = asyncio.run(record_conversation())


def _fold(order: list[dict[str, Any]]) -> dict[str, Any]:
    tree = Tree(ResponsesCodec)
    applier = WireApplier(tree, ResponsesCodec.create_decoder())
    for message in order:
        applier.apply(message)
        tree.emit_ably_message(message)
    branch = TreeBranch(tree)
    nodes = branch.visible_nodes()
    return {
        "messages": as_dicts(branch.extract_messages(nodes)),
        "runs": [(n.run_id, n.status, [s.status for s in n.steps]) for n in nodes if n.kind == "run"],
    }


def test_history_in_order_equals_live() -> None:
    history = RECORDED["history"]
    assert len(history) > 30
    assert _fold(history) == RECORDED["live"]
    assert (
        len(RECORDED["live"]["messages"]) == 6
    )  # prompt, call turn, output, answer, prompt 2, regenerated answer


@settings(deadline=None)
@given(
    page_size=st.integers(min_value=1, max_value=80),
    dup=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), max_size=8),
)
def test_paged_history_with_redeliveries_equals_live(page_size: int, dup: list[tuple[int, int]]) -> None:
    history = RECORDED["history"]
    newest_first = list(reversed(history))
    order: list[dict[str, Any]] = []
    for start in range(0, len(newest_first), page_size):
        order.extend(reversed(newest_first[start : start + page_size]))
    for src, at in dup:  # a wire delivered again, later
        order.insert(at % (len(order) + 1), order[src % len(order)])
    assert _fold(order) == RECORDED["live"]


@given(
    wires=st.lists(st.tuples(st.integers(1, 12), st.integers(0, 3), st.booleans()), min_size=1, max_size=30)
)
def test_wire_log_keeps_serial_order_and_drops_redeliveries(wires: list[tuple[int, int, bool]]) -> None:
    log = WireLog()
    expected: dict[str, list[str]] = {}
    last_version: dict[str, str] = {}
    streamed_of: dict[str, bool] = {}
    for n, v, streamed in wires:
        serial = f"{n:04d}"
        streamed = streamed_of.setdefault(serial, streamed)
        version = f"{n:04d}.{v}"
        outcome = log.record(serial, None, [("output", {"v": version})], version, streamed)
        prev = last_version.get(serial)
        if prev is not None and (version <= prev or not streamed):
            assert outcome == "dropped"
            continue
        assert outcome != "dropped"
        last_version[serial] = version
        expected.setdefault(serial, []).append(version)
    replayed = [(s, e["v"]) for (_, e), s, _ in log.replay()]
    assert [s for s, _ in replayed] == sorted(s for s, _ in replayed)
    assert replayed == [(s, v) for s in sorted(expected) for v in expected[s]]


def test_run_less_tool_result_fork_is_rekeyed_by_the_run_start() -> None:
    """0.8.0's client tool-result fork: a run-less input with a non-user role folds into a run keyed
    by its codec-message-id until the agent's ai-run-start (input-codec-message-id) names the run."""
    from ai_transport.conversation.lifecycle import parse_run_lifecycle

    tree = Tree(ResponsesCodec)
    result = ResponsesCodec.create_tool_result("fork-1", {"call_id": "c1", "output": "42"})
    tree.apply_message(
        [result], [], {"role": "assistant", "codec-message-id": "fork-1", "supersedes": "old-run"}, "05"
    )
    node = tree.get_node("fork-1")
    assert node is not None and node.kind == "run"
    start = parse_run_lifecycle(
        "ai-run-start",
        {"run-id": "R", "run-client-id": "alice", "input-codec-message-id": "fork-1", "parent": "p"},
        "06",
    )
    tree.apply_run_lifecycle(start)
    assert tree.get_node("fork-1") is None
    run = tree.get_run_node("R")
    assert run is node and run.parent == "p" and run.start_serial == "05"
    assert tree.get_node_by_codec_message_id("fork-1") is run
    messages = tree.messages_of(run)
    assert messages[0].message.items == [{"type": "function_call_output", "call_id": "c1", "output": "42"}]
    assert "old-run" not in [n.key for n in tree.visible_nodes()]
