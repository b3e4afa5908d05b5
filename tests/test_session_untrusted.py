"""Untrusted channel content never breaks, stalls or steers a session.

Any single message another client can put on the channel, with arbitrary JSON-shaped name / extras /
data / action / serial / version, inserted at any position of a recorded conversation, live or in
history, leaves every view, the four readers and a fresh worker's resume decision exactly as without
it; a malformed one is skipped and counted (``session.skipped``). The "one message bricks a
conversation" cases of issue #11 (object / array header values) are pinned first.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support_sessions import as_dicts
from support_untrusted import SeededChannel, record, seeded_hub

from ai_transport.channels.channel import action_name
from ai_transport.channels.memory import InProcessHub
from ai_transport.conversation.wire_check import wire_problem
from ai_transport.readers import (
    approved_unexecuted_calls,
    resolved_call_ids,
    to_responses_input,
    unanswered_calls,
)
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession
from ai_transport.sessions.view import TreeBranch

RECORDED = asyncio.run(record())
FULL, PENDING = RECORDED["full"], RECORDED["pending"]


def _transport(m: dict) -> dict:
    extras = m.get("extras") or {}
    return (extras.get("ai") or {}).get("transport") or {}


_ALL = FULL["wires"] + FULL["history"] + PENDING["wires"] + PENDING["history"]
_IDS = sorted(
    {
        v
        for m in _ALL
        for k, v in _transport(m).items()
        if k in ("codec-message-id", "run-id", "event-id", "input-codec-message-id", "step-id")
    }
)
#: ids that name a node or a message (a prompt reusing one is an impostor, not a new prompt)
_NODE_IDS = frozenset(
    v
    for m in _ALL
    for k, v in _transport(m).items()
    if k in ("codec-message-id", "run-id", "input-codec-message-id")
)
_SERIALS = sorted({m["serial"] for m in _ALL if isinstance(m.get("serial"), str)})
_FUTURE_CANDIDATES = frozenset(_IDS) | frozenset(_SERIALS)
_HEADER_KEYS = sorted({k for m in _ALL for k in _transport(m)})
_CODEC_KEYS = sorted(
    {k for m in _ALL for k in ((m.get("extras") or {}).get("ai") or {}).get("codec") or {}}
)
_NAMES = [
    "ai-input",
    "ai-output",
    "ai-cancel",
    "ai-run-start",
    "ai-run-resume",
    "ai-run-suspend",
    "ai-run-end",
    "ai-step-start",
    "ai-step-end",
]
_WORDS = [*_IDS, *_SERIALS, "user", "assistant", "true", "false", "complete", "error", "cancelled", "alice"]
_KINDS = sorted(
    {
        v
        for m in _ALL
        for k, v in (((m.get("extras") or {}).get("ai") or {}).get("codec") or {}).items()
        if k == "kind"
    }
)

#: Values a JSON or msgpack decoder can hand over that the plain strategies never draw: a lone
#: surrogate (``"\\ud800"`` in JSON, which JS stringifies), NaN and infinities (msgpack), integers
#: past 64 bits and past any float (JSON), a long digit run.
_ODD_VALUES = st.sampled_from(["\ud800", "a\udfffb", float("nan"), float("inf"), -float("inf"), 2**64, 10**400, "9" * 400])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**60) | st.floats(allow_nan=False) | st.text(max_size=6) | _ODD_VALUES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
words = st.sampled_from(_WORDS) | st.text(max_size=6) | st.sampled_from(["\ud800", "x\udc00"])
header_values = words | json_values
header_maps = st.dictionaries(st.sampled_from(_HEADER_KEYS) | st.text(max_size=6), header_values, max_size=6)
codec_maps = st.dictionaries(
    st.sampled_from(_CODEC_KEYS) | st.text(max_size=6),
    st.sampled_from(_KINDS) | header_values,
    max_size=4,
)


@st.composite
def extras(draw: st.DrawFn, base: Any) -> Any:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(json_values)
    if choice == 1:
        ai: dict[str, Any] = {"transport": draw(header_maps)}
        if draw(st.booleans()):
            ai["codec"] = draw(codec_maps)
        return {"ai": ai}
    if choice == 2:
        return {"ai": draw(json_values | st.fixed_dictionaries({"transport": json_values}))}
    # a recorded message's envelope with a few header values replaced
    out = copy.deepcopy(base.get("extras")) if isinstance(base.get("extras"), dict) else {"ai": {}}
    ai = out.setdefault("ai", {})
    for _ in range(draw(st.integers(1, 3))):
        tier = draw(st.sampled_from(["transport", "codec"]))
        headers = ai.setdefault(tier, {}) if isinstance(ai.get(tier, {}), dict) else {}
        keys = _HEADER_KEYS if tier == "transport" else _CODEC_KEYS
        headers[draw(st.sampled_from(keys))] = draw(header_values)
    return out


@st.composite
def untrusted_message(draw: st.DrawFn) -> dict[str, Any]:
    """One message from a client that is not the agent (Mallory, or an anonymous one).

    What the server stamps is modelled: a create gets a fresh serial (only an update / append /
    delete names an existing one), and ``version.clientId`` is the sender's."""
    base = draw(st.sampled_from(_ALL))
    sender = draw(st.sampled_from(["mallory", None]))
    message: dict[str, Any] = {}
    fields = {
        "name": st.sampled_from([None, *_NAMES]) | st.text(max_size=6) | json_values,
        "data": st.just(copy.deepcopy(base.get("data"))) | words | json_values,
        "action": st.sampled_from(
            [None, "message.create", "message.update", "message.append", "message.delete", 0, 1, 2, 5, 9, "x"]
        )
        | json_values,
        "serial": st.sampled_from(["<fresh>", *_SERIALS]) | json_values,
        "version": st.none()
        | st.fixed_dictionaries({"serial": st.just("<fresh>"), "timestamp": st.just(1)})
        | json_values,
        "timestamp": st.just(1) | json_values,
    }
    for key, strategy in fields.items():
        if draw(st.booleans()):
            message[key] = draw(strategy)
        elif key in base:
            message[key] = copy.deepcopy(base[key])
    message["extras"] = draw(extras(base))
    if sender is not None:
        message["clientId"] = sender
    if message.get("action") in (None, "message.create", 0) and message.get("serial") in _SERIALS:
        message["serial"] = "<fresh>"  # Ably assigns a create's serial; only mutations name one
    version = message.get("version")
    if isinstance(version, dict):  # the server stamps who mutated a message
        version.pop("clientId", None)
        if sender is not None:
            version["clientId"] = sender
    return message


_STRING_FIELDS = ("name", "clientId", "serial", "id", "connectionId")


def _flat_strings(headers: Any) -> bool:
    return headers is None or (
        isinstance(headers, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    )


def _number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def well_typed(message: Any) -> bool:
    """The wire types a session requires (``ably-ai-transport-wire.md``: string fields, a known
    action, number timestamps, flat string-to-string header tiers), restated here so the property's
    cases do not depend on :func:`wire_problem`, the function under test."""
    if not isinstance(message, dict):
        return False
    if any(message.get(k) is not None and not isinstance(message.get(k), str) for k in _STRING_FIELDS):
        return False
    if message.get("action") is not None and action_name(message["action"]) is None:
        return False
    if not _number(message.get("timestamp")):
        return False
    version = message.get("version")
    if version is not None and not (
        isinstance(version, dict)
        and all(version.get(k) is None or isinstance(version.get(k), str) for k in ("serial", "clientId"))
        and _number(version.get("timestamp"))
    ):
        return False
    extras = message.get("extras")
    if extras is None:
        return True
    if not isinstance(extras, dict):
        return False
    ai = extras.get("ai")
    if ai is None:
        return True
    return isinstance(ai, dict) and _flat_strings(ai.get("transport")) and _flat_strings(ai.get("codec"))


def _new_prompt(message: dict[str, Any]) -> bool:
    """A well-formed prompt of another user, with its own new id: legitimately shown to clients."""
    if message.get("name") != "ai-input" or not well_typed(message):
        return False
    h = _transport(message)
    return "run-id" not in h and h.get("codec-message-id") not in _NODE_IDS


def _known(wires: list[dict]) -> set[str]:
    """Every id and serial a client could have seen on ``wires``."""
    seen: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            seen.add(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for wire in wires:
        walk(wire)
    return seen


def _forget_future(value: Any, known: set[str]) -> Any:
    """``value`` with every id or serial not yet published replaced by an unknown one: ids are
    random uuids and a client cannot name what it has not seen."""
    if isinstance(value, str):
        return f"unseen-{value}" if value in _FUTURE_CANDIDATES and value not in known else value
    if isinstance(value, dict):
        return {k: _forget_future(v, known) for k, v in value.items()}
    if isinstance(value, list):
        return [_forget_future(v, known) for v in value]
    return value


def _insert(wires: list[dict], at: int, message: dict[str, Any]) -> list[dict]:
    out = [copy.deepcopy(w) for w in wires]
    at = min(at, len(out))
    prev = out[at - 1]["serial"] if at > 0 else "0"
    message = _forget_future(copy.deepcopy(message), _known(out[:at]))
    if message.get("serial") == "<fresh>":
        message["serial"] = prev + "~m"
    version = message.get("version")
    if isinstance(version, dict) and version.get("serial") == "<fresh>":
        version["serial"] = prev + "~v"
    out.insert(at, message)
    return out


def _readers(messages: list[Any]) -> Any:
    return json.loads(
        json.dumps(
            [
                to_responses_input(messages),
                sorted(resolved_call_ids(messages)),
                unanswered_calls(messages),
                approved_unexecuted_calls(messages),
            ],
            default=str,
        )
    )


def _client_view(session: ClientSession) -> Any:
    runs = [(r.run_id, r.status, [s.status for s in r.steps]) for r in session.view.runs()]
    return as_dicts(session.view.get_messages()), runs


async def client_live(wires: list[dict]) -> tuple[Any, int]:
    session = ClientSession(InProcessHub().client("alice").channel("chat"), trusted_agent_ids={"agent"})
    for wire in wires:
        session._on_live(wire)
    view = _client_view(session)
    view[0].append(_readers([m.message for m in session.view.get_messages()]))
    return view, session.skipped


async def agent_live(wires: list[dict]) -> Any:
    session = AgentSession(InProcessHub().client("agent").channel("chat"))
    for wire in wires:
        session._on_live(wire)
    branch = TreeBranch(session.tree)
    messages = branch.extract_messages(branch.visible_nodes())
    await session.close()
    return as_dicts(messages), _readers([m.message for m in messages])


async def client_history(history: list[dict]) -> Any:
    session = ClientSession(SeededChannel(seeded_hub().client("alice").channel("chat"), history), trusted_agent_ids={"agent"})
    await session.connect()
    await session.view.load_all()
    view = _client_view(session)
    await session.close()
    return view


async def _resume(session: AgentSession) -> Any:
    run = await session.create_run(PENDING["invocation"])
    await run.start(timeout=2)
    await run.view.load_all()
    decision = (run.owed_calls(), _readers(run.branch_messages()), as_dicts(run.view.get_messages()))
    await session.close()
    return json.loads(json.dumps(decision))


async def worker_from_history(history: list[dict]) -> Any:
    """A fresh worker woken by the approval: everything it knows comes from history."""
    session = AgentSession(SeededChannel(seeded_hub().client("agent").channel("chat"), history))
    await session.connect()
    return await _resume(session)


async def worker_live(wires: list[dict]) -> Any:
    """A worker that was subscribed while the conversation (and the message) went by."""
    hub = seeded_hub()
    session = AgentSession(SeededChannel(hub.client("agent").channel("chat"), []))
    await session.connect()
    for wire in wires:
        session._on_live(wire)
    return await _resume(session)


async def everything(live: list[dict], history: list[dict], pending_live: list[dict], pending_history: list[dict]) -> Any:
    return (
        (await client_live(live))[0],
        await agent_live(live),
        await client_history(history),
        await worker_from_history(pending_history),
        await worker_live(pending_live),
    )


BASELINE = asyncio.run(everything(FULL["wires"], FULL["history"], PENDING["wires"], PENDING["history"]))


def test_baseline_is_the_conversation() -> None:
    live, _agent, history, from_history, live_worker = BASELINE
    assert live[:2] == history[:2] or live[0][:-1] == history[0]
    owed = from_history[0]
    assert [c["name"] for c in owed] == ["get_weather"] and from_history == live_worker


# -- the reproductions: one message used to brick a conversation -----------------------

_PROMPT = next(m for m in FULL["history"] if m.get("name") == "ai-input")
_BRICKS = [
    ("codec-message-id", {"a": 1}),
    ("codec-message-id", [1, 2]),
    ("run-id", {"a": 1}),
    ("parent", {"a": 1}),
    ("fork-of", ["x"]),
    ("role", 5),
    ("event-id", {"x": None}),
    ("supersedes", [1]),
]


_CODEC_BRICKS = [("kind", {"a": 1}), ("kind", ["user-message"]), ("partType", 7)]


def _brick(key: str, value: Any, tier: str = "transport") -> dict[str, Any]:
    message = copy.deepcopy(_PROMPT)
    message["clientId"] = "mallory"
    message["serial"] = "<fresh>"
    message["extras"]["ai"].setdefault(tier, {})[key] = value
    return message


_CANCEL = {"name": "ai-cancel", "clientId": "mallory", "serial": "<fresh>", "action": "message.create",
           "extras": {"ai": {"transport": {"run-id": {"x": 1}, "input-codec-message-id": [1]}}}}


@pytest.mark.parametrize(("key", "value"), _BRICKS)
async def test_an_object_header_value_is_skipped_live_and_in_history(key: str, value: Any) -> None:
    message = _brick(key, value)
    for at in (1, len(FULL["wires"]) // 2, len(FULL["wires"])):
        view, skipped = await client_live(_insert(FULL["wires"], at, message))
        assert view == BASELINE[0] and skipped >= 1
        assert await agent_live(_insert(FULL["wires"], at, message)) == BASELINE[1]
    assert await client_history(_insert(FULL["history"], 3, message)) == BASELINE[2]
    assert await worker_from_history(_insert(PENDING["history"], 2, message)) == BASELINE[3]


@pytest.mark.parametrize(("key", "value"), _CODEC_BRICKS)
async def test_an_object_codec_header_value_is_skipped_live_and_in_history(key: str, value: Any) -> None:
    # the codec tier is type-checked too: an object ``kind`` reaching the decoder raised TypeError
    message = _brick(key, value, "codec")
    assert not well_typed(message) and wire_problem(message) is not None
    for at in (1, len(FULL["wires"])):
        view, skipped = await client_live(_insert(FULL["wires"], at, message))
        assert view == BASELINE[0] and skipped >= 1
        assert await agent_live(_insert(FULL["wires"], at, message)) == BASELINE[1]
    assert await client_history(_insert(FULL["history"], 3, message)) == BASELINE[2]
    assert await worker_from_history(_insert(PENDING["history"], 2, message)) == BASELINE[3]


@settings(max_examples=300, deadline=None)
@given(message=untrusted_message())
def test_wire_problem_agrees_with_the_wire_types(message: dict[str, Any]) -> None:
    # known-bad and known-good cases by the restated rule, not by the function under test
    assert (wire_problem(message) is None) == well_typed(message)


async def test_a_cancel_with_object_ids_is_skipped() -> None:
    wires = _insert(PENDING["wires"], len(PENDING["wires"]), _CANCEL)
    assert await worker_live(wires) == BASELINE[4]
    assert await worker_from_history(_insert(PENDING["history"], 4, _CANCEL)) == BASELINE[3]


async def test_skipped_messages_are_counted_and_reported() -> None:
    session = ClientSession(InProcessHub().client("alice").channel("chat"))
    seen: list[str] = []
    session.on("skipped", lambda message, why: seen.append(why))
    for wire in _insert(FULL["wires"], 2, _brick("codec-message-id", {"a": 1})):
        session._on_live(wire)
    session._on_live(["not", "an", "object"])  # type: ignore[arg-type]
    assert session.skipped == 2
    assert "extras.ai.transport['codec-message-id'] is object" in seen[0] and "not an object" in seen[1]


# -- the property --------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(message=untrusted_message(), position=st.integers(0, 10**6))
def test_one_untrusted_message_changes_nothing(message: dict[str, Any], position: int) -> None:
    lists = [FULL["wires"], FULL["history"], PENDING["wires"], PENDING["history"]]
    inserted = []
    for wires in lists:
        at = min(position % (len(wires) + 1), len(wires))
        out = _insert(wires, at, message)
        assume(not _new_prompt(out[at]))  # another user's new prompt is content, not an attack
        inserted.append(out)
    got = asyncio.run(everything(*inserted))
    assert got[0] == BASELINE[0], "client live view"
    assert got[1] == BASELINE[1], "agent live fold"
    assert got[2] == BASELINE[2], "client history view"
    assert got[3] == BASELINE[3], "fresh worker's resume decision"
    assert got[4] == BASELINE[4], "live worker's resume decision"


def test_invented_run_ids_cannot_grow_a_session_without_bound() -> None:
    from ai_transport.conversation.admission import HELD_TOTAL_LIMIT

    session = AgentSession(InProcessHub().client("agent").channel("chat"))
    for i in range(HELD_TOTAL_LIMIT + 50):
        session._on_wire(
            {
                "name": "ai-input",
                "clientId": "mallory",
                "serial": f"{i:020d}",
                "action": "message.create",
                "data": "",
                "extras": {"ai": {"transport": {"run-id": f"fake-{i}", "codec-message-id": f"m{i}"},
                                  "codec": {"kind": "tool-approval-response"}}},
            }
        )
    assert len(session.admission.held) == HELD_TOTAL_LIMIT
    assert session.skipped == 50 and len(session.rejected) == 50
