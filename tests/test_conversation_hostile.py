"""A hostile member changes nothing it does not own (issue 21's property).

A recorded conversation (alice and the agent: a gated call, alice's approval) with a hostile
publisher's wires interleaved anywhere — mallory holds an ordinary token: she sees every id on the
channel and publishes under her own clientId (a rewrite of alice's messages, which needs
``message-update-any``, is tried live) — folded live, and from history in any page size (and,
for the agent's tree, in any page order): the fresh worker's resume decision, its model input, the
calls it owes, the live worker's, and every trusted view equal those of the same conversation
without mallory; nothing raises.

Mallory's wires are attacks, drawn from templates built on what she has seen: a prompt reusing
alice's event-id or codec-message-id, answers and cancels naming alice's run or input, outputs and
lifecycle claiming alice's run, rewrites of alice's messages. No case is filtered
with the code under test: the only thing left out of a client's view is mallory's own new prompts
(a prompt of hers is conversation content), known by the ids the test minted for them.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support_sessions import as_dicts
from support_untrusted import SeededChannel, record, seeded_hub

from ai_transport.channels.memory import InProcessHub
from ai_transport.readers import approved_unexecuted_calls, to_responses_input, unanswered_calls
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession
from ai_transport.sessions.view import TreeBranch

RECORDED = asyncio.run(record())
PENDING = RECORDED["pending"]


def _transport(m: dict[str, Any]) -> dict[str, Any]:
    return ((m.get("extras") or {}).get("ai") or {}).get("transport") or {}


def _kind(m: dict[str, Any]) -> Any:
    return (((m.get("extras") or {}).get("ai") or {}).get("codec") or {}).get("kind")


TEMPLATES = (
    "event-id copy",
    "codec-message-id copy",
    "answer",
    "cancel",
    "output",
    "lifecycle",
    "rewrite",
)


def _seen(wires: list[dict[str, Any]], header: str, by: str | None = None) -> list[str]:
    return sorted(
        {
            v
            for w in wires
            if (by is None or w.get("clientId") == by) and isinstance(v := _transport(w).get(header), str)
        }
    )


def _first(wires: list[dict[str, Any]], pred: Any) -> dict[str, Any] | None:
    return next((w for w in wires if pred(w)), None)


def hostile_wire(template: str, pick: int, seen: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
    """Mallory's wire of ``template`` built from the wires she has ``seen`` (``pick`` chooses among
    candidates); returns it and, for a new prompt of hers, its codec-message-id."""
    prompt = _first(seen, lambda w: w.get("name") == "ai-input" and _kind(w) == "user-message")
    if prompt is None:
        return None, None

    def choose(options: list[str]) -> str | None:
        return options[pick % len(options)] if options else None

    base = copy.deepcopy({k: v for k, v in prompt.items() if k in ("name", "data", "extras")})
    t = base["extras"]["ai"]["transport"]
    t["run-client-id"] = "mallory"
    if template in ("event-id copy", "codec-message-id copy"):
        t["event-id"] = str(uuid.uuid4())
        cmid = str(uuid.uuid4())
        if template == "event-id copy":
            t["event-id"] = choose(_seen(seen, "event-id", by="alice")) or t["event-id"]
            t["codec-message-id"] = cmid
            return base, cmid
        t["codec-message-id"] = choose(_seen(seen, "codec-message-id", by="alice")) or cmid
        return base, (cmid if t["codec-message-id"] == cmid else None)
    run_id = choose(_seen(seen, "run-id"))
    if run_id is None:
        return None, None
    if template == "answer":
        answer = _first(seen, lambda w: _kind(w) == "tool-approval-response")
        call = _first(seen, lambda w: w.get("name") == "ai-output")
        wire = copy.deepcopy(answer) if answer is not None else base
        wire = {k: v for k, v in wire.items() if k in ("name", "data", "extras")}
        wire["extras"]["ai"]["transport"].update(
            {"run-id": run_id, "codec-message-id": str(uuid.uuid4()), "event-id": str(uuid.uuid4())}
        )
        if answer is None and call is not None:
            wire["extras"]["ai"]["codec"] = {"kind": "tool-approval-response"}
        return wire, None
    if template == "cancel":
        target = (
            {"run-id": run_id}
            if pick % 2
            else {"input-codec-message-id": choose(_seen(seen, "codec-message-id", by="alice")) or run_id}
        )
        return {"name": "ai-cancel", "extras": {"ai": {"transport": {"event-id": str(uuid.uuid4()), **target}}}}, None
    if template == "output":
        out = _first(seen, lambda w: w.get("name") == "ai-output")
        if out is None:
            return None, None
        wire = copy.deepcopy({k: v for k, v in out.items() if k in ("name", "data", "extras")})
        wire["extras"]["ai"]["transport"].update({"run-id": run_id, "codec-message-id": str(uuid.uuid4())})
        wire["data"] = "mallory says"
        return wire, None
    if template == "lifecycle":
        names = ["ai-run-end", "ai-run-suspend", "ai-run-start", "ai-step-end"]
        life = _first(seen, lambda w: w.get("name") == names[pick % len(names)]) or _first(
            seen, lambda w: str(w.get("name", "")).startswith("ai-run-")
        )
        if life is None:
            return None, None
        wire = copy.deepcopy({k: v for k, v in life.items() if k in ("name", "data", "extras")})
        wire["extras"]["ai"]["transport"]["run-id"] = run_id
        return wire, None
    # rewrite: an update of one of alice's messages, stamped with mallory as its mutator
    targets = [
        w
        for w in seen
        if w.get("clientId") == "alice" and isinstance(w.get("serial"), str) and w.get("action") in (None, "message.create")
    ]
    if not targets:
        return None, None
    target = targets[pick % len(targets)]
    wire = copy.deepcopy({k: v for k, v in target.items() if k in ("name", "data", "extras", "serial", "clientId")})
    wire["action"] = "message.update"
    wire["data"] = "rewritten by mallory"
    return wire, None


def interleave(
    wires: list[dict[str, Any]], attacks: list[tuple[str, int, int]], live: bool
) -> tuple[list[dict[str, Any]], set[str]]:
    """``wires`` with mallory's attacks inserted (template, position, pick); mallory's new prompts.

    A rewrite is a live delivery only: it needs ``message-update-any`` (an ordinary token cannot
    mutate another's message), and in history it would replace the aggregate itself — content
    only a signature can vouch for (``conversation/signing.py``), not the ownership rules."""
    out = [copy.deepcopy(w) for w in wires]
    prompts: set[str] = set()
    for n, (template, position, pick) in enumerate(sorted(attacks, key=lambda a: a[1])):
        if template == "rewrite" and not live:
            continue
        at = min(position, len(out))
        wire, cmid = hostile_wire(template, pick, out[:at])
        if wire is None:
            continue
        # Ably serials grow with time: a wire published here sorts after every one before it
        prev = max((w["serial"] for w in out[:at] if isinstance(w.get("serial"), str)), default="0")
        fresh = f"{prev}~m{n}"
        if wire.get("action") == "message.update":
            wire["version"] = {"serial": fresh, "timestamp": 2, "clientId": "mallory"}
        else:
            wire.update({"serial": fresh, "action": "message.create", "clientId": "mallory"})
            wire["version"] = {"serial": fresh, "timestamp": 2, "clientId": "mallory"}
        wire["timestamp"] = 2
        if cmid is not None:
            prompts.add(cmid)
        out.insert(at, wire)
    return out, prompts


def _readers(messages: list[Any]) -> Any:
    return json.loads(
        json.dumps(
            [to_responses_input(messages), unanswered_calls(messages), approved_unexecuted_calls(messages)],
            default=str,
        )
    )


def _trusted(messages: list[Any], mallorys: set[str]) -> list[Any]:
    return [m for m in messages if m.codec_message_id not in mallorys]


async def _resume(session: AgentSession) -> Any:
    run = await session.create_run(PENDING["invocation"])
    await run.start(timeout=2)
    await run.view.load_all()
    decision = (run.owed_calls(), _readers(run.branch_messages()), as_dicts(run.view.get_messages()))
    await session.close()
    return json.loads(json.dumps(decision))


async def fresh_worker(history: list[dict[str, Any]], page_size: int) -> Any:
    session = AgentSession(SeededChannel(seeded_hub().client("agent").channel("chat"), history, page_size))
    await session.connect()
    return await _resume(session)


async def live_worker(wires: list[dict[str, Any]]) -> Any:
    session = AgentSession(SeededChannel(seeded_hub().client("agent").channel("chat"), []))
    await session.connect()
    for wire in wires:
        session._on_live(wire)
    return await _resume(session)


async def client_view(history: list[dict[str, Any]], page_size: int, mallorys: set[str]) -> Any:
    session = ClientSession(
        SeededChannel(seeded_hub().client("alice").channel("chat"), history, page_size), trusted_agent_ids={"agent"}
    )
    await session.connect()
    await session.view.load_all()
    messages = _trusted(session.view.get_messages(), mallorys)
    runs = [(r.run_id, r.status) for r in session.view.runs()]
    await session.close()
    return as_dicts(messages), runs


def client_live(wires: list[dict[str, Any]], mallorys: set[str]) -> Any:
    session = ClientSession(InProcessHub().client("alice").channel("chat"), trusted_agent_ids={"agent"})
    for wire in wires:
        session._on_live(wire)
    return as_dicts(_trusted(session.view.get_messages(), mallorys)), [
        (r.run_id, r.status) for r in session.view.runs()
    ]


def agent_tree_from_pages(history: list[dict[str, Any]], page_size: int, order: list[int], mallorys: set[str]) -> Any:
    """The agent's tree folded from history pages taken in ``order`` (each page oldest first)."""
    session = AgentSession(InProcessHub().client("agent").channel("chat"))
    pages = [history[i : i + page_size] for i in range(0, len(history), page_size)]
    for index in sorted(range(len(pages)), key=lambda i: order[i % len(order)] if order else i):
        for wire in pages[index]:
            session._on_history(wire)
    branch = TreeBranch(session.tree)
    messages = _trusted(branch.extract_messages(branch.visible_nodes()), mallorys)
    return as_dicts(messages), _readers([m.message for m in messages])


BASE_HISTORY, BASE_WIRES = PENDING["history"], PENDING["wires"]
BASELINE = {
    "fresh": asyncio.run(fresh_worker(BASE_HISTORY, 7)),
    "live": asyncio.run(live_worker(BASE_WIRES)),
    "client history": asyncio.run(client_view(BASE_HISTORY, 7, set())),
    "client live": client_live(BASE_WIRES, set()),
    "agent tree": agent_tree_from_pages(BASE_HISTORY, len(BASE_HISTORY), [], set()),
}


def test_the_baseline_owes_alices_approved_call() -> None:
    owed = BASELINE["fresh"][0]
    assert [c["name"] for c in owed] == ["get_weather"] and BASELINE["fresh"] == BASELINE["live"]


attacks = st.lists(
    st.tuples(st.sampled_from(TEMPLATES), st.integers(0, 200), st.integers(0, 50)), min_size=1, max_size=4
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    drawn=attacks,
    page_size=st.integers(1, 12),
    order=st.lists(st.integers(0, 100), min_size=1, max_size=20),
)
def test_a_hostile_member_changes_nothing_it_does_not_own(
    drawn: list[tuple[str, int, int]], page_size: int, order: list[int]
) -> None:
    history, mallorys = interleave(BASE_HISTORY, drawn, live=False)
    wires, live_mallorys = interleave(BASE_WIRES, drawn, live=True)
    assert asyncio.run(fresh_worker(history, page_size)) == BASELINE["fresh"], "fresh worker's resume"
    assert asyncio.run(live_worker(wires)) == BASELINE["live"], "live worker's resume"
    assert asyncio.run(client_view(history, page_size, mallorys)) == BASELINE["client history"], "client history"
    assert client_live(wires, live_mallorys) == BASELINE["client live"], "client live view"
    assert agent_tree_from_pages(history, page_size, order, mallorys) == BASELINE["agent tree"], "agent tree"


def test_the_property_sees_an_attack() -> None:
    # the templates do reach alice's ids (else the property would compare a conversation to itself)
    history, mallorys = interleave(BASE_HISTORY, [("event-id copy", len(BASE_HISTORY), 0)], live=False)
    copy_wire = history[-1]
    assert copy_wire["clientId"] == "mallory" and mallorys
    assert _transport(copy_wire)["event-id"] in _seen(BASE_HISTORY, "event-id", by="alice")
