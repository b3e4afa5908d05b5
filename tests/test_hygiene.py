"""Replay hygiene: the reasoning pairing sweep, replay fingerprints and sanitize_input."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support_hygiene import (
    ANY_ITEM,
    INPUTS,
    assistant,
    call,
    fold_done_items,
    load_chunks,
    output,
    reasoning,
    response_model,
    user,
)

from ai_transport.codec.types import OpenAIMessage
from ai_transport.errors import InvalidArgumentError, InvalidTypeError
from ai_transport.readers.calls import to_responses_input
from ai_transport.readers.hygiene import (
    ABORTED_OUTPUT,
    ReplayFingerprint,
    drop_reasoning,
    is_output_item,
    is_paired,
    normalize_tools,
    reasoning_links,
    replay_fingerprint,
    sanitize_input,
    sweep_reasoning,
)
from ai_transport.readers.preflight import preflight

TOOLS = [
    {
        "type": "function",
        "name": "lookupVerificationCode",
        "parameters": {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]},
    }
]

# ---------------------------------------------------------------------------------------------
# The sweep


def test_sweep_keeps_paired_reasoning_untouched():
    items = [user(), reasoning("rs_1"), call("call_1", "fc_1"), output("call_1"), reasoning("rs_2"), assistant("a", "msg_2")]
    result = sweep_reasoning(items)
    assert result.input == items and all(a is b for a, b in zip(result.input, items))
    assert result.covered_length == len(items)
    assert result.dropped == [] and result.changes == []


def test_sweep_drops_unpaired_reasoning():
    rs_end = reasoning("rs_end")
    rs_before_user = reasoning("rs_u")
    rs_before_rs = reasoning("rs_r")
    items = [user(), rs_before_user, user(), rs_before_rs, reasoning("rs_ok"), assistant("a", "msg_1"), output("c"), rs_end]
    result = sweep_reasoning(items)
    assert [i.get("id") for i in result.input] == [None, None, "rs_ok", "msg_1", None]
    assert result.dropped == [rs_before_user, rs_before_rs, rs_end]
    assert [c.reason for c in result.changes] == ["reasoning_unpaired"] * 3
    assert [c.index for c in result.changes] == [1, 3, 7]


def test_sweep_strips_the_id_after_a_dropped_reasoning_item():
    fc = call("call_1", "fc_1", status="completed")
    msg = assistant("a", "msg_1", "completed", phase="final_answer")
    items = [user(), reasoning("rs_1"), fc, output("call_1"), reasoning("rs_2"), msg]
    result = sweep_reasoning(items, should_drop=lambda item, _out: "test" if item["id"] == "rs_1" else None)
    assert result.input[1] == {k: v for k, v in fc.items() if k != "id"}  # call keeps its status
    assert result.input[4] is msg  # rs_2 kept: its message keeps its id
    result = sweep_reasoning(items, should_drop=lambda item, _out: "test")
    # a message loses its id and the status that only the id-carrying form has; phase is kept
    assert result.input[3] == {"type": "message", "role": "assistant", "content": msg["content"], "phase": "final_answer"}
    assert [c.action for c in result.changes] == ["dropped_item", "stripped_id", "dropped_item", "stripped_id"]
    assert "id" in fc and "id" in msg  # caller's items untouched


def test_sweep_reasoning_without_id_is_dropped():
    result = sweep_reasoning([user(), reasoning(None), assistant("a", "msg_1")])
    assert [c.reason for c in result.changes] == ["reasoning_without_id", "reasoning_dropped"]
    assert "id" not in result.input[1]


def test_sweep_links_pair_only_with_the_producing_reasoning():
    links = {"fc_1": "rs_1", "fc_2": "rs_2"}
    items = [user(), reasoning("rs_1"), call("call_2", "fc_2"), output("call_2")]
    result = sweep_reasoning(items, links=links)
    assert [c.reason for c in result.changes] == ["reasoning_unpaired", "reasoning_dropped"]
    # an item whose linked reasoning is absent from the input loses its id
    result = sweep_reasoning([user(), call("call_1", "fc_1"), output("call_1")], links=links)
    assert [c.reason for c in result.changes] == ["reasoning_missing"]
    assert "id" not in result.input[1]


def test_sweep_trailing_block_is_outside_the_covered_region():
    context = {"role": "user", "content": "<context>{}</context>"}
    items = [user(), reasoning("rs_1"), assistant("a", "msg_1")]
    result = sweep_reasoning(items, trailing=[context])
    assert result.covered_length == 3 and result.input[3] is context
    # trailing items are not swept (a trailing reasoning item is the caller's business)
    result = sweep_reasoning([user(), reasoning("rs_1")], trailing=[assistant()])
    assert result.covered_length == 1 and len(result.input) == 2


def test_paired_predicates():
    assert is_output_item({"role": "assistant", "content": "x"})
    assert is_output_item({"type": "web_search_call", "id": "ws"})
    assert not is_output_item(user()) and not is_output_item(output()) and not is_output_item(reasoning())
    assert not is_output_item({"type": "item_reference", "id": "msg_1"})
    assert not is_paired(reasoning("rs_1"), None)
    assert is_paired(reasoning("rs_1"), call("c", "fc_1"), {"fc_1": "rs_1"})
    assert not is_paired(reasoning("rs_1"), call("c", "fc_1"), {"fc_1": "rs_0"})


def test_reasoning_links_from_a_response_output():
    out = [reasoning("rs_1"), assistant("c", "msg_1"), call("call_1", "fc_1"), reasoning("rs_2"), call("call_2", "fc_2")]
    assert reasoning_links(out) == {"msg_1": "rs_1", "fc_1": "rs_1", "fc_2": "rs_2"}
    assert reasoning_links([call("call_1", "fc_1")]) == {}


def test_sweep_bad_input():
    with pytest.raises(InvalidTypeError, match=r"input\[1\] must be an object"):
        sweep_reasoning([user(), None])
    with pytest.raises(InvalidTypeError, match=r"trailing\[0\]"):
        sweep_reasoning([], trailing=["x"])


def _subsequence_positions(result_items, tagged):
    pos = []
    for item in result_items:
        if "x_tag" in item:
            pos.append(item["x_tag"])
        else:
            pos.extend(n for n, orig in enumerate(tagged) if orig is item)
    return pos


@given(st.lists(ANY_ITEM, max_size=14) | INPUTS, st.lists(ANY_ITEM, max_size=2))
def test_sweep_never_leaves_reasoning_unpaired_and_never_reorders(items, trailing):
    tagged = [{**item, "x_tag": n} for n, item in enumerate(items)]
    before = copy.deepcopy(tagged)
    result = sweep_reasoning(tagged, trailing=trailing)
    assert tagged == before
    covered = result.input[: result.covered_length]
    assert result.input[result.covered_length :] == trailing
    for k, item in enumerate(covered):
        if item.get("type") == "reasoning":
            assert is_paired(item, covered[k + 1] if k + 1 < len(covered) else None)
    positions = _subsequence_positions(covered, tagged)
    assert positions == sorted(set(positions)) and len(positions) == len(covered)
    # only reasoning is dropped, and server-side tool items that lose their reasoning
    dropped = set(range(len(tagged))) - set(positions)
    assert all(tagged[n].get("type") in ("reasoning", "web_search_call") for n in dropped)
    assert [tagged[n] for n in sorted(dropped)] == result.dropped


# ---------------------------------------------------------------------------------------------
# Fingerprints


def test_tools_none_and_empty_are_the_same():
    assert normalize_tools(None) is None and normalize_tools([]) is None and normalize_tools(()) is None
    assert normalize_tools(TOOLS) == TOOLS
    a = replay_fingerprint(model="m", tools=None, prefix=[user()])
    b = replay_fingerprint(model="m", tools=[], prefix=[user()])
    assert a == b and a.tools is None
    assert a.matches(model="m", tools=[], instructions=None, input=[user()])
    assert b.matches(model="m", tools=None, instructions="", input=[user(), assistant()])
    with pytest.raises(InvalidTypeError, match="tools must be an array"):
        normalize_tools({"type": "function"})


def test_fingerprint_detects_each_difference():
    prefix = [user("q")]
    fp = replay_fingerprint(model="gpt-5.2", tools=TOOLS, instructions="be brief", prefix=prefix)
    assert fp.prefix_length == 1
    ok = {"model": "gpt-5.2", "tools": TOOLS, "instructions": "be brief"}
    assert fp.matches(**ok, input=[user("q"), reasoning()])
    assert not fp.matches(**{**ok, "model": "gpt-5.1"}, input=prefix)
    assert not fp.matches(**{**ok, "tools": None}, input=prefix)
    assert not fp.matches(**{**ok, "instructions": "be long"}, input=prefix)
    assert not fp.matches(**ok, input=[user("q2")])
    assert not fp.matches(**ok, input=[])
    # key order does not matter (canonical JSON)
    reordered = [{"content": prefix[0]["content"], "role": "user", "type": "message"}]
    assert fp.matches(**ok, input=reordered)


def test_fingerprint_round_trips_as_json():
    fp = replay_fingerprint(model="m", tools=TOOLS, prefix=[user()])
    again = ReplayFingerprint.from_dict(json.loads(json.dumps(fp.to_dict())))
    assert again == fp
    with pytest.raises(InvalidTypeError, match=r"fingerprint\.prefixLength"):
        ReplayFingerprint.from_dict({**fp.to_dict(), "prefixLength": -1})
    with pytest.raises(InvalidArgumentError, match="model"):
        replay_fingerprint(model="")


# ---------------------------------------------------------------------------------------------
# sanitize_input, on the recorded store:false loop (openai-issue-11239.1 / .2)


@pytest.fixture()
def recorded(fixtures_dir):
    events1 = load_chunks(fixtures_dir / "vercel-ai" / "openai-issue-11239.1.chunks.txt")
    events2 = load_chunks(fixtures_dir / "vercel-ai" / "openai-issue-11239.2.chunks.txt")
    return response_model(events1), fold_done_items(events1), fold_done_items(events2)


def _produce_turn1(model, turn1, context):
    """Request 1 as the agent builds it, and the fingerprint recorded for its reasoning."""
    history = [user("What is the verification code for issue-11239?")]
    sent = sanitize_input(history, trailing=[context])
    fp = sent.fingerprint(model=model, tools=TOOLS)
    assert fp.for_reasoning(turn1) == {turn1[0]["id"]: fp}
    return history, fp.for_reasoning(turn1)


def test_fingerprinted_reasoning_replays_under_the_same_context(recorded):
    model, turn1, turn2 = recorded
    history, fps = _produce_turn1(model, turn1, user("<context>t=1</context>"))
    answer = output(turn1[1]["call_id"], '{"code":"blue-42"}')
    history += [*turn1, answer]
    # request 2: a different context block each time; the reasoning still replays
    sent = sanitize_input(history, fingerprints=fps, model=model, tools=TOOLS, trailing=[user("<context>t=2</context>")])
    assert sent.report == []
    assert sent.input[:4] == history and sent.covered_length == 4
    assert preflight(sent.input) == []
    # the same holds for the fingerprint's JSON form, and for tools=[] vs None on both sides
    fps_json = {k: v.to_dict() for k, v in fps.items()}
    assert sanitize_input(history, fingerprints=fps_json, model=model, tools=TOOLS).report == []
    fp_empty = sanitize_input([user("What is the verification code for issue-11239?")]).fingerprint(model=model, tools=[])
    fp_none = sanitize_input([user("What is the verification code for issue-11239?")]).fingerprint(model=model, tools=None)
    assert fp_empty == fp_none
    assert sanitize_input(history, fingerprints={turn1[0]["id"]: fp_none}, model=model, tools=[]).report == []
    # request 3 (after the recorded answer)
    history += turn2
    sent = sanitize_input([*history, user("thanks")], fingerprints=fps, model=model, tools=TOOLS)
    assert sent.report == [] and preflight(sent.input) == []


@pytest.mark.parametrize(
    "change",
    [
        {"model": "gpt-5.1-codex-max"},
        {"tools": None},
        {"instructions": "You are terse."},
        {"prefix": True},
    ],
)
def test_fingerprint_mismatch_drops_reasoning_and_strips_the_call_id(recorded, change):
    model, turn1, _ = recorded
    _, fps = _produce_turn1(model, turn1, user("<context/>"))
    first_question = user("What is the verification code for issue-11239?")
    if change.get("prefix"):
        first_question = user("What is the verification code for issue-42?")  # history edited
    answer = output(turn1[1]["call_id"], "blue-42")
    history = [first_question, *turn1, answer]
    kw = {"model": model, "tools": TOOLS, "instructions": None}
    kw.update({k: v for k, v in change.items() if k != "prefix"})
    sent = sanitize_input(history, fingerprints=fps, **kw)
    assert [c.reason for c in sent.report] == ["reasoning_fingerprint_mismatch", "reasoning_dropped"]
    fc = {k: v for k, v in turn1[1].items() if k != "id"}
    assert sent.input == [first_question, fc, answer]
    assert preflight(sent.input, links=reasoning_links(turn1)) == []


def test_unfingerprinted_reasoning_policy(recorded):
    model, turn1, _ = recorded
    history = [user("q"), *turn1, output(turn1[1]["call_id"], "x")]
    assert sanitize_input(history, fingerprints={"rs_other": replay_fingerprint(model=model)}, model=model).report == []
    sent = sanitize_input(
        history, fingerprints={"rs_other": replay_fingerprint(model=model)}, model=model, unfingerprinted="drop"
    )
    assert [c.reason for c in sent.report] == ["reasoning_unfingerprinted", "reasoning_dropped"]
    with pytest.raises(InvalidArgumentError, match="model is required"):
        sanitize_input(history, fingerprints={"rs": replay_fingerprint(model=model)})


def test_sanitize_from_run_messages(recorded):
    """to_responses_input over run messages (as the reducer stores them) -> an accepted input."""
    _, turn1, turn2 = recorded
    rs_streaming = {**turn1[0], "obfuscation": "pad"}  # a stream-only field leaked into storage
    messages = [
        OpenAIMessage("user", [user("q")]),
        OpenAIMessage("assistant", [rs_streaming, turn1[1], output(turn1[1]["call_id"], "blue-42")]),
        {"role": "assistant", "items": turn2},
    ]
    items = to_responses_input(messages)
    assert preflight(items)[0].message == "Unknown parameter: 'input[1].obfuscation'."
    sent = sanitize_input(items)
    assert preflight(sent.input) == []
    assert sent.input[1] == turn1[0]
    assert [c.reason for c in sent.report] == ["stream_only_field"]


# ---------------------------------------------------------------------------------------------
# sanitize_input rules, hand-written


def test_sanitize_reasoning_status_summary_and_store_false():
    items = [
        user(),
        reasoning("rs_1", summary=None, status="completed"),
        assistant("a", "msg_1", "completed"),
        user(),
        reasoning("rs_2", enc=None),
        call("call_1", "fc_1"),
        output("call_1"),
    ]
    sent = sanitize_input(items, store=False)
    assert sent.input[1] == {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA-blob", "summary": []}
    assert [i.get("id") for i in sent.input] == [None, "rs_1", "msg_1", None, None, None]
    assert [c.reason for c in sent.report] == [
        "reasoning_status",
        "missing_summary",
        "reasoning_without_encrypted_content",
        "reasoning_dropped",
    ]
    # under store: true the bare reasoning item is replayed (the server has it)
    assert [i.get("id") for i in sanitize_input(items, store=True).input] == [None, "rs_1", "msg_1", None, "rs_2", "fc_1", None]


def test_sanitize_interrupted_turn():
    items = [
        user(),
        reasoning("rs_1", enc=None),  # reasoning never finished: no blob
        assistant("partial ans", "msg_1", "in_progress"),
        call("call_1", "fc_1", args='{"q":', status="in_progress"),
        assistant("", "msg_2", "in_progress"),
        call("call_2", "fc_2", status="in_progress"),
        output("call_2"),
    ]
    sent = sanitize_input(items)
    assert [(i.get("type"), i.get("status"), i.get("id")) for i in sent.input] == [
        ("message", None, None),
        ("message", None, None),  # kept text; id (and status) stripped: its reasoning was dropped
        ("function_call", "in_progress", None),  # has its output: kept; same response as rs_1: no id
        ("function_call_output", None, None),
    ]
    assert [c.reason for c in sent.report] == [
        "in_progress",
        "in_progress",
        "in_progress",
        "reasoning_without_encrypted_content",
        "reasoning_dropped",
        "reasoning_missing",
    ]
    kept = sanitize_input(items, in_progress="keep")
    assert any(i.get("call_id") == "call_1" for i in kept.input)  # answered with an aborted output
    assert kept.input[3] == {"type": "function_call_output", "call_id": "call_1", "output": ABORTED_OUTPUT}


def test_sanitize_marks_interrupted_message_incomplete():
    msg = assistant("half an ans", "msg_1", "in_progress")
    sent = sanitize_input([user(), reasoning("rs_1"), msg])
    assert sent.input[2] == {**msg, "status": "incomplete"} and msg["status"] == "in_progress"


def test_sanitize_unanswered_call_options():
    items = [user(), call("call_1", "fc_1"), assistant("x")]
    assert [i.get("type") for i in sanitize_input(items).input] == ["message", "function_call", "function_call_output", "message"]
    custom = [user(), {"type": "custom_tool_call", "call_id": "c", "name": "sh", "input": "ls"}]
    assert sanitize_input(custom).input[2] == {"type": "custom_tool_call_output", "call_id": "c", "output": ABORTED_OUTPUT}
    assert sanitize_input(items, unanswered="drop", aborted_output="x").input == [items[0], items[2]]
    assert sanitize_input(items, aborted_output="cancelled by user").input[2]["output"] == "cancelled by user"
    with pytest.raises(InvalidArgumentError, match="unanswered"):
        sanitize_input(items, unanswered="ignore")  # type: ignore[arg-type]


def test_sanitize_dedupes_by_id_and_against_previous_items():
    a = call("call_1", "fc_1")
    items = [user(), a, output("call_1", id="fco_1"), dict(a), output("call_1", id="fco_1")]
    sent = sanitize_input(items)
    assert sent.input == items[:3]
    sent = sanitize_input(items[2:3], previous_items=[a, items[2]])
    assert sent.input == [] and [c.reason for c in sent.report] == ["held_by_previous_response"]


@given(INPUTS, st.booleans(), st.sampled_from(["drop", "keep"]))
def test_sanitize_output_passes_preflight(items, store, in_progress):
    before = copy.deepcopy(items)
    sent = sanitize_input(items, store, in_progress=in_progress)
    assert items == before
    assert preflight(sent.input, store) == []
    # sanitizing again changes nothing
    assert sanitize_input(sent.input, store, in_progress=in_progress).report == []


def test_after_a_dropped_reasoning_each_item_kind_is_handled_by_its_id_rules():
    ws = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}}
    msg = assistant("found it", "msg_1", "completed")
    sent = sanitize_input([user(), reasoning("rs_1", enc=None), ws, msg])
    # a server-side tool item needs its id: it goes, and the message after it loses its id instead
    assert sent.input == [sent.input[0], {"type": "message", "role": "assistant", "content": msg["content"]}]
    assert [(c.action, c.reason) for c in sent.report] == [
        ("dropped_item", "reasoning_without_encrypted_content"),
        ("dropped_item", "reasoning_dropped"),
        ("stripped_id", "reasoning_dropped"),
    ]
    # a client-answered call whose id is required stays as it is (nothing valid to do)
    cc = {"type": "computer_call", "id": "cu_1", "call_id": "c1", "status": "completed", "action": {"type": "screenshot"}}
    cc_out = {"type": "computer_call_output", "call_id": "c1", "output": {"type": "computer_screenshot", "image_url": "data:,"}}
    sent = sanitize_input([user(), reasoning("rs_1", enc=None), cc, cc_out])
    assert sent.input[1] is cc and sent.input[2] is cc_out


def test_duplicate_references_are_dropped_not_stripped():
    items = [{"id": "rs_1"}, {"type": "item_reference", "id": "rs_1"}]
    fixed = sanitize_input(items, store=True)
    assert fixed.input == [items[0]] and [c.reason for c in fixed.report] == ["duplicate_id"]


def test_drop_reasoning_for_an_encrypted_content_retry(fixtures_dir):
    turn1 = fold_done_items(load_chunks(fixtures_dir / "vercel-ai" / "openai-issue-11239.1.chunks.txt"))
    answer = output(turn1[1]["call_id"], "blue-42")
    items = [user("q"), *turn1, answer]
    retry = drop_reasoning(items, reason="invalid_encrypted_content")
    assert retry.input == [items[0], {k: v for k, v in turn1[1].items() if k != "id"}, answer]
    assert retry.dropped == [turn1[0]]
    assert [c.reason for c in retry.changes] == ["invalid_encrypted_content", "reasoning_dropped"]
    assert preflight(retry.input, links=reasoning_links(turn1)) == []


# ---------------------------------------------------------------------------------------------
# A simulated stateless agent loop: fingerprints stay valid turn after turn


@st.composite
def agent_steps(draw):
    """Per step: (reasoning?, [output kinds]) the model produces, and whether the model changes."""
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        kinds = draw(st.lists(st.sampled_from(["call", "message"]), min_size=1, max_size=3))
        steps.append((draw(st.booleans()), kinds, draw(st.integers(0, 5)) == 0))
    return steps


@given(agent_steps())
def test_agent_loop_replays_reasoning_until_the_model_changes(steps):
    model = "gpt-5.2"
    history = [user("start")]
    fingerprints = {}
    produced_under = {}  # rs id -> model
    for n, (with_reasoning, kinds, switch_model) in enumerate(steps):
        if switch_model:
            model = "gpt-5.1" if model == "gpt-5.2" else "gpt-5.2"
        sent = sanitize_input(
            history, fingerprints=fingerprints, model=model, tools=TOOLS, trailing=[user(f"<context>{n}</context>")]
        )
        assert preflight(sent.input) == []
        kept = {i.get("id") for i in sent.input if i.get("type") == "reasoning"}
        current = {rs for rs, m in produced_under.items() if m == model}
        # never replayed under another model; always replayed while nothing before it changed
        assert kept <= current
        assert _unchanged_prefix(produced_under, model, history) <= kept
        # the model answers: reasoning, then its items (calls answered by the agent)
        fp = sent.fingerprint(model=model, tools=TOOLS)
        out = []
        if with_reasoning:
            rs_id = f"rs_{n}"
            out.append(reasoning(rs_id, enc=f"blob{n}"))
            fingerprints[rs_id] = fp
            produced_under[rs_id] = model
        for k, kind in enumerate(kinds):
            out.append(call(f"call_{n}_{k}", f"fc_{n}_{k}") if kind == "call" else assistant("a", f"msg_{n}_{k}", "completed"))
        history += out + [output(f"call_{n}_{k}") for k, kind in enumerate(kinds) if kind == "call"]


def _unchanged_prefix(produced_under, model, history):
    """Reasoning items before which every reasoning item was also made by ``model`` (their prefix is intact)."""
    out = set()
    for rs in [i["id"] for i in history if i.get("type") == "reasoning"]:
        if produced_under[rs] != model:
            break
        out.add(rs)
    return out


def test_dropping_reasoning_strips_every_item_of_its_response():
    # parallel calls: both carry ids produced by rs_1; dropping rs_1 must strip both
    items = [user(), reasoning("rs_1", enc=None), call("call_1", "fc_1"), call("call_2", "fc_2"), output("call_1"), output("call_2"), assistant("a", "msg_1", "completed")]
    sent = sanitize_input(items)
    assert [i.get("id") for i in sent.input] == [None, None, None, None, None, "msg_1"]
    assert [c.reason for c in sent.report] == ["reasoning_without_encrypted_content", "reasoning_dropped", "reasoning_missing"]
    # what the API would have said about the second call had only the first lost its id
    half = [items[0], {k: v for k, v in items[2].items() if k != "id"}, *items[3:]]
    assert preflight(half, links=reasoning_links(items))[0].message == (
        "Item 'fc_2' of type 'function_call' was provided without its required 'reasoning' item: 'rs_1'."
    )
    assert reasoning_links(items) == {"fc_1": "rs_1", "fc_2": "rs_1"}  # msg_1 came in a later response


def test_drop_reasoning_strips_parallel_calls():
    items = [user(), reasoning("rs_1"), call("call_1", "fc_1"), call("call_2", "fc_2"), output("call_1"), output("call_2")]
    retry = drop_reasoning(items)
    assert [i.get("id") for i in retry.input] == [None] * 5
    assert preflight(retry.input, links=reasoning_links(items)) == []
