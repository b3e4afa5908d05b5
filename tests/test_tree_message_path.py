"""The tree's message path: its fast paths agree with the general ones.

* the wire log appends the next serial without a scan: for any sequence of wires (serials,
  versions, streamed or discrete, a swept log) it answers what the general scan answers, and logs
  the same entries; an entry keeps its events as one flat list (what the cyclic GC tracks of it);
* the applier tests the codec's wire names first: for any name and action it decodes exactly the
  wires the codec carries (``ai-input`` / ``ai-output``, and name-less mutations of them);
* a fold's replay holds the whole wire and is slimmed only when the tree keeps it: a refused
  prompt's pending claim holds no payload of the wire, and still folds when its publisher turns
  out to own the id; the ledger holds ``hold(payload)`` exactly where it holds a payload.
"""

from __future__ import annotations

import copy
import gc
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support_sessions import prompt_wire

from ai_transport.codec import ResponsesCodec
from ai_transport.conversation.nodes import WireLog, _LogEntry, flat_events
from ai_transport.conversation.ownership import KIND_CODEC_MESSAGE_ID, OwnershipLedger
from ai_transport.conversation.tree import Tree, WireApplier
from ai_transport.conversation.tree_owners import Replay, held, slim_wire

# -- the wire log ---------------------------------------------------------------------------------


def _record_by_scan(log: WireLog, serial: str, mid: Any, events: list[Any], version: Any, streamed: bool) -> str:
    """``WireLog.record`` as it was before its tail fast path: always the scan from the end."""
    entries = log.entries
    for i in range(len(entries) - 1, -1, -1):
        entry = entries[i]
        if entry.serial == serial:
            if version is not None and (version <= entry.decoded_through or not streamed):
                return "dropped"
            if not log.swept:
                entry.events.extend(flat_events(events))
            if version is not None:
                entry.decoded_through = version
            return "incremental" if i == len(entries) - 1 or log.swept else "refold"
        if entry.serial < serial:
            kept = [] if log.swept else flat_events(events)
            entries.insert(i + 1, _LogEntry(serial, mid, kept, version or serial, None))
            return "incremental" if i + 1 == len(entries) - 1 or log.swept else "refold"
    entries.insert(0, _LogEntry(serial, mid, [] if log.swept else flat_events(events), version or serial, None))
    return "incremental" if len(entries) == 1 or log.swept else "refold"


wire_steps = st.lists(
    st.tuples(
        st.integers(0, 6),  # serial
        st.one_of(st.none(), st.integers(0, 9)),  # version
        st.booleans(),  # streamed
        st.booleans(),  # sweep before this wire
    ),
    max_size=14,
)


@settings(max_examples=300, deadline=None)
@given(steps=wire_steps)
def test_the_log_tail_fast_path_answers_as_the_scan(steps: list[tuple[int, int | None, bool, bool]]) -> None:
    fast, scan = WireLog(), WireLog()
    for n, (s, v, streamed, sweep) in enumerate(steps):
        if sweep and n == len(steps) // 2:
            fast.sweep()
            scan.sweep()
        serial, version = f"s{s}", (f"s{s}v{v}" if v is not None else None)
        events = [("output", {"n": n})]
        assert fast.record(serial, f"m{s}", events, version, streamed) == _record_by_scan(
            scan, serial, f"m{s}", events, version, streamed
        )
        assert [(e.serial, e.codec_events(), e.decoded_through) for e in fast.entries] == [
            (e.serial, e.codec_events(), e.decoded_through) for e in scan.entries
        ]


def test_a_logged_wire_costs_the_gc_its_entry_and_one_list_of_events() -> None:
    """A woken worker's tree logs every wire of the history: each entry keeps its events as one flat
    list, no ``(direction, event)`` pair per event (a tuple holding a dict is tracked by the cyclic
    GC, and scanned at each collection, for as long as the log keeps it). Replayed as pairs, in order."""
    log = WireLog()
    events = [("output", {"n": n}) for n in range(3)]
    log.record("s1", "m", events, None, False)
    log.record("s2", "m", [("input", {"n": 3})], "s2v1", True)
    kept = log.entries[-1].events
    log.record("s2", "m", [("output", {"n": 4})], "s2v2", True)  # an append: the same entry ...
    assert log.entries[-1].events is kept  # ... extended in place (a copy per append: a long stream quadratic)
    gc.collect()
    tracked = [o for o in gc.get_referents(*log.entries) if gc.is_tracked(o) and not isinstance(o, type)]
    assert all(type(t) is list for t in tracked) and sorted(len(t) for t in tracked) == [4, 6]
    assert [ev for ev, _, _ in log.replay()] == [*events, ("input", {"n": 3}), ("output", {"n": 4})]


# -- the applier's dispatch -----------------------------------------------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.decoded: list[Any] = []

    def decode(self, message: Any) -> Any:
        self.decoded.append(message)
        return None


names = st.one_of(
    st.sampled_from(["ai-input", "ai-output", "ai-cancel", "ai-claim", "ai-run-start", "ai-step-end", "other"]),
    st.sampled_from([None, "", 0, 1, b"ai-output", ["ai-run-start"], {"n": 1}]),
)
actions = st.sampled_from([None, "message.create", "message.update", "message.append", "message.delete", 0, 1, 5, "x"])


@settings(max_examples=300, deadline=None)
@given(name=names, action=actions)
def test_the_applier_decodes_exactly_the_codec_wires(name: Any, action: Any) -> None:
    tree = Tree(ResponsesCodec)
    decoder = _Recorder()
    message: dict[str, Any] = {"serial": "01", "clientId": "agent"}
    if name is not None:
        message["name"] = name
    if action is not None:
        message["action"] = action
    WireApplier(tree, decoder).apply(message, {})
    creates = action in (None, "message.create", 0, "x")  # (an unknown action names no mutation)
    codec_wire = name in ("ai-input", "ai-output") or (not name and not creates)
    assert decoder.decoded == ([message] if codec_wire else [])


def test_the_applier_lifecycle_names_are_the_lifecycle_modules() -> None:
    from ai_transport.conversation import lifecycle
    from ai_transport.conversation import tree as tree_module

    every = {v for k, v in vars(lifecycle).items() if k.startswith("EVENT_") and isinstance(v, str)}
    every |= set(lifecycle.RUN_LIFECYCLE_NAMES) | set(lifecycle.STEP_LIFECYCLE_NAMES)
    assert {n for n in every if lifecycle.is_run_lifecycle_name(n)} == tree_module.RUN_LIFECYCLE_NAMES
    assert {n for n in every if lifecycle.is_step_lifecycle_name(n)} == tree_module.STEP_LIFECYCLE_NAMES


# -- replays: slimmed only when kept --------------------------------------------------------------


def _prompt(cmid: str, serial: str, who: str) -> dict[str, Any]:
    wire = prompt_wire(f"from {who}", f"ev-{serial}", who)
    wire["extras"]["ai"]["transport"]["codec-message-id"] = cmid
    return {**wire, "serial": serial, "clientId": who, "timestamp": 1000 + int(serial)}


def test_a_refused_prompt_is_held_slim_and_folds_when_its_publisher_owns_the_id() -> None:
    refused: list[Any] = []
    tree = Tree(ResponsesCodec, refused=lambda message, why: refused.append(message.get("serial")))
    tree.judge_runs = True
    applier = WireApplier(tree, ResponsesCodec.create_decoder())
    later_bob = _prompt("p-1", "03", "bob")
    original = copy.deepcopy(later_bob)
    applier.apply(_prompt("p-1", "02", "alice"))
    applier.apply(later_bob)
    assert refused == ["03"]
    pending = tree.owners._entries[(KIND_CODEC_MESSAGE_ID, "p-1")].claims["bob"]
    (kept,) = pending.values()
    assert isinstance(kept, Replay) and kept.slim
    assert kept.wire == slim_wire(later_bob) and "extras" not in kept.wire and "data" not in kept.wire
    assert kept.args[-1] is kept.wire
    assert later_bob == original  # the wire itself is never changed
    # an older wire of bob takes the id: the held (slim) replay folds again, as the wire would
    applier.apply(_prompt("p-1", "01", "bob"))
    assert tree.prompt_owner("p-1") == ("bob",)
    node = tree.get_node("p-1")
    assert node is not None and node.serial == "01"
    (message,) = tree.messages_of(node)
    (item,) = message.message.items
    # bob's two wires, both folded (the refused one from its held replay); alice's impostor gone
    assert [part["text"] for part in item["content"]] == ["from bob", "from bob"]


def test_held_slims_a_whole_wire_once() -> None:
    wire = {"serial": "05", "clientId": "c", "name": "ai-input", "extras": {"x": 1}, "data": "big"}
    whole = Replay("apply_message", ([], [], {}, "05", "05", "c", wire), "05", wire, False)
    kept = held(whole)
    assert kept.slim and kept.wire == {"serial": "05", "clientId": "c", "name": "ai-input"}
    assert kept.args[:-1] == whole.args[:-1] and kept.args[-1] is kept.wire
    assert held(kept) is kept


def test_the_ledger_holds_what_hold_makes_of_a_payload() -> None:
    ledger = OwnershipLedger()
    hold = lambda payload: ("held", payload)  # noqa: E731
    ledger.claim("k", "id", "alice", "02", "a2", keep=False, hold=hold)
    assert ledger.first("k", "id").payload is None  # a counted claim the caller keeps itself
    refused = ledger.claim("k", "id", "bob", "03", "b3", keep=False, hold=hold)
    assert not refused.accepted
    ledger.claim("k", "other", "alice", "01", "x1", hold=hold)
    assert ledger.first("k", "other").payload == ("held", "x1")  # keep: held as hold makes it
    taken = ledger.claim("k", "id", "bob", "01", "b1", keep=False, hold=hold)
    assert taken.accepted and [c.payload for c in taken.regained] == [("held", "b3")]
    assert [c.serial for c in taken.lost] == ["02"]


# -- retention: the activity clock -------------------------------------------------------------


class _Millis(int):
    pass


timestamps = st.one_of(
    st.integers(0, 50), st.booleans(), st.floats(0, 50), st.none(), st.text(max_size=2), st.integers(0, 50).map(_Millis)
)


@settings(max_examples=200, deadline=None)
@given(stamps=st.lists(timestamps, max_size=12))
def test_the_activity_clock_counts_int_timestamps_only(stamps: list[Any]) -> None:
    from ai_transport.conversation.nodes import InputNode, _Internal
    from ai_transport.conversation.retention import LogRetention

    retention = LogRetention()
    entry = _Internal(InputNode("p", None, None, None), 0)
    for stamp in stamps:
        retention.record_activity({}, entry, stamp)
    counted = [s for s in stamps if isinstance(s, int) and not isinstance(s, bool)]
    assert retention.clock == max(counted, default=0)
    assert entry.last_activity == max(counted, default=0)


def test_a_prompts_node_holds_no_empty_list_or_set() -> None:
    """A woken worker's tree holds a node per prompt of the history: what only a run fills (its
    step order) is made with the run's first step, not as an empty list per prompt (an empty list
    is an object the cyclic GC tracks and scans; an empty dict is not)."""
    tree = Tree(ResponsesCodec)
    WireApplier(tree, ResponsesCodec.create_decoder()).apply(_prompt("p-1", "01", "alice"))
    entry = tree._nodes["p-1"]
    assert [name for name, v in vars(entry).items() if isinstance(v, (list, set)) and not v] == []
