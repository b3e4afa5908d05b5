"""preflight / check / repair: the API's 400s predicted offline, with its exact texts."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support_hygiene import (
    INPUTS,
    assistant,
    call,
    fold_done_items,
    load_chunks,
    output,
    reasoning,
    user,
)

from ai_transport.errors import AITransportError, InvalidTypeError
from ai_transport.readers.hygiene import reasoning_links
from ai_transport.readers.preflight import (
    PREFLIGHT_ERROR_CODE,
    REASONING_REPLAY_KINDS,
    PreflightError,
    Problem,
    check,
    parse_api_error,
    preflight,
    repair,
)

NOT_FOUND = (
    "Item with id '{}' not found. Items are not persisted when `store` is set to false. "
    "Try again with `store` set to true, or remove this item from your input."
)


def first(items, store=False, **kw) -> Problem:
    problems = preflight(items, store, **kw)
    assert problems, "expected a problem"
    return problems[0]


# ---------------------------------------------------------------------------------------------
# Each rule, hand-written


def test_valid_replay_has_no_problems():
    items = [user(), reasoning("rs_1"), call("call_1", "fc_1"), output("call_1"), assistant("done", "msg_1", "completed")]
    assert preflight(items) == []
    assert preflight(items, store=True) == []
    assert preflight("just a string") == []
    check(items)  # does not raise


def test_call_without_output():
    p = first([user(), call("call_uK3eDRSXx9p45csFRjvXDNPq")])
    assert (p.message, p.param, p.code, p.index) == (
        "No tool output found for function call call_uK3eDRSXx9p45csFRjvXDNPq.",
        "input",
        None,
        1,
    )
    assert p.recorded


def test_output_without_call():
    p = first([user(), output("call_dYQhZV1goGU4Rkny0QJvcxUJ")])
    assert p.message == "No tool call found for function call output with call_id call_dYQhZV1goGU4Rkny0QJvcxUJ."
    assert (p.param, p.code, p.kind) == ("input", None, "orphan_output")


def test_pairing_is_per_call_family():
    # a function_call_output does not answer a shell_call with the same call_id
    problems = preflight([{"type": "shell_call", "call_id": "c", "action": {"commands": []}}, output("c")])
    assert [p.message for p in problems] == [
        "No tool output found for shell call c.",
        "No tool call found for function call output with call_id c.",
    ]
    assert [p.recorded for p in problems] == [False, True]


def test_reasoning_without_following_item():
    for nxt in ([], [user()], [output("call_1")], [reasoning("rs_2")]):
        items = [user(), reasoning("rs_abc"), *nxt]
        messages = [p.message for p in preflight(items, store=True)]
        assert "Item 'rs_abc' of type 'reasoning' was provided without its required following item." in messages


def test_reasoning_followed_by_each_output_kind_is_paired():
    for follower in (
        call("call_1"),
        assistant("x"),
        {"role": "assistant", "content": "x"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
    ):
        problems = preflight([user(), reasoning("rs_1"), follower, output("call_1")], store=True)
        assert not [p for p in problems if p.kind == "reasoning_unpaired"], follower


def test_output_item_without_its_reasoning_needs_links():
    items = [user(), call("call_1", "fc_1"), output("call_1")]
    assert preflight(items) == []  # offline, nothing says fc_1 had reasoning
    p = first(items, links={"fc_1": "rs_9"})
    assert p.message == "Item 'fc_1' of type 'function_call' was provided without its required 'reasoning' item: 'rs_9'."
    assert (p.param, p.code) == ("input", None)
    p = first([user(), assistant("a", "msg_1", "completed")], links={"msg_1": "rs_9"})
    assert p.message == "Item 'msg_1' of type 'message' was provided without its required 'reasoning' item: 'rs_9'."


def test_links_reject_a_follower_from_another_reasoning():
    items = [user(), reasoning("rs_1"), call("call_1", "fc_2"), output("call_1")]
    kinds = [p.kind for p in preflight(items, links={"fc_2": "rs_2"})]
    assert kinds == ["reasoning_unpaired", "reasoning_missing"]


def test_duplicate_ids():
    p = first([user(), reasoning("rs_1"), assistant("a", "msg_1"), reasoning("rs_1"), assistant("b", "msg_2")])
    assert p.message == "Duplicate item found with id rs_1. Remove duplicate items from your input and try again."
    assert (p.param, p.code, p.index) == ("input", None, 3)


def test_duplicate_of_what_previous_response_holds():
    held = {"type": "mcp_approval_response", "id": "mcpr_1", "approval_request_id": "mcpr_0", "approve": True}
    p = first([dict(held), user()], previous_items=[held])
    assert p.message.startswith("Duplicate item found with id mcpr_1.")
    # a call held by the previous response answers its output here
    assert preflight([output("call_1")], previous_items=[call("call_1", "fc_1")]) == []


def test_missing_summary():
    p = first([user(), reasoning("rs_1", summary=None), assistant()])
    assert (p.message, p.param, p.code) == (
        "Missing required parameter: 'input[1].summary'.",
        "input[1].summary",
        "missing_required_parameter",
    )


def test_missing_arguments():
    p = first([user(), call("call_1", args=None), output("call_1")])
    assert (p.message, p.param, p.code) == (
        "Missing required parameter: 'input[1].arguments'.",
        "input[1].arguments",
        "missing_required_parameter",
    )


def test_status_on_reasoning():
    p = first([user(), assistant(), user(), reasoning("rs_1", status="completed"), assistant()])
    assert (p.message, p.param, p.code) == ("Unknown parameter: 'input[3].status'.", "input[3].status", "unknown_parameter")


def test_stream_only_fields_are_unknown_parameters():
    item = assistant()
    item["sequence_number"] = 7
    item["content"][0]["obfuscation"] = "pad"
    assert [p.message for p in preflight([user(), item])] == [
        "Unknown parameter: 'input[1].sequence_number'.",
        "Unknown parameter: 'input[1].content[0].obfuscation'.",
    ]


def test_assistant_input_text():
    item = {"type": "message", "role": "assistant", "content": [{"type": "input_text", "text": "hi"}]}
    p = first([user(), item])
    assert (p.message, p.param, p.code) == (
        "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.",
        "input[1].content[0]",
        "invalid_value",
    )
    # user input_text is fine
    assert preflight([user()]) == []


def test_ids_under_store_false():
    for ref in ({"type": "item_reference", "id": "rs_1"}, {"id": "rs_1"}):
        p = first([user(), ref], store=False)
        assert p.message == NOT_FOUND.format("rs_1")
        assert (p.param, p.code) == ("input", None)
        assert preflight([user(), ref], store=True) == []
    # a bare reasoning item (no encrypted_content) cannot be found either
    bare = [user(), reasoning("rs_2", enc=None), assistant()]
    assert first(bare).message == NOT_FOUND.format("rs_2")
    assert preflight(bare, store=True) == []
    # ids on calls and messages are fine under store: false (known-good replay)
    assert preflight([user(), reasoning("rs_1"), call("call_1", "fc_1"), output("call_1")]) == []


def test_order_is_shape_then_duplicates_then_ids_then_reasoning_then_calls():
    items = [
        output("call_orphan"),  # pairing (phase 5)
        reasoning("rs_1"),  # unpaired (phase 4)
        {"type": "item_reference", "id": "x"},  # not found (phase 3)
        assistant("a", "msg_1"),
        assistant("b", "msg_1"),  # duplicate (phase 2)
        reasoning("rs_2", status="completed"),  # shape (phase 1)
        assistant("c"),
    ]
    kinds = [p.kind for p in preflight(items)]
    assert kinds == ["reasoning_status", "duplicate_id", "not_persisted", "reasoning_unpaired", "orphan_output"]


def test_check_raises_the_first_problem():
    items = [user(), call("call_1")]
    with pytest.raises(PreflightError) as info:
        check(items)
    err = info.value
    assert isinstance(err, AITransportError) and isinstance(err, ValueError)
    assert err.message == str(err) == "No tool output found for function call call_1."
    assert err.code == PREFLIGHT_ERROR_CODE and err.status_code == 400
    assert err.param == "input" and err.api_code is None
    assert err.problems == preflight(items)


def test_bad_input_type_names_the_field():
    with pytest.raises(InvalidTypeError, match=r"input\[1\] must be an object, got string"):
        preflight([user(), "nope"])
    with pytest.raises(InvalidTypeError, match="input must be"):
        preflight({"type": "message"})
    with pytest.raises(InvalidTypeError, match=r"input\[0\]"):
        repair([42])


# ---------------------------------------------------------------------------------------------
# Agreement with the recorded real error bodies


def _error_inputs():
    # Each recorded 400 body, with the input the file documents (see the fixtures README).
    return {
        "openai-issue-18537-error.1.json": {
            "input": [user("look it up"), output("call_dYQhZV1goGU4Rkny0QJvcxUJ", "42")], "store": False
        },
        "issue-18134-shell-store-false-error.json": {
            "input": [
                user("list files"),
                {
                    "type": "shell_call_output",
                    "call_id": "call_4cVBpSn5zU6TzK3scWYjsDVW",
                    "output": [{"stdout": "a\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
                },
            ],
            "store": False,
        },
        "openai-mcp-approval-previous-response-duplicate-error.json": {
            "input": [
                {
                    "type": "mcp_approval_response",
                    "id": "mcpr_022444f7f0878ab8006a766d20b08881a290edfa9c9943f2ae",
                    "approval_request_id": "mcpr_0",
                    "approve": True,
                }
            ],
            "store": True,
            "previous_items": [
                {
                    "type": "mcp_approval_response",
                    "id": "mcpr_022444f7f0878ab8006a766d20b08881a290edfa9c9943f2ae",
                    "approval_request_id": "mcpr_0",
                    "approve": True,
                }
            ],
        },
        "openai-tool-search-duplicate-item-error.1.json": {
            "input": [
                user("find a tool"),
                {"type": "tool_search_call", "id": "tsc_07dac4bac56245e1006a606d9ef06481a1afbe9ba9f5b6cff2", "arguments": {}},
                user("again"),
                {"type": "tool_search_call", "id": "tsc_07dac4bac56245e1006a606d9ef06481a1afbe9ba9f5b6cff2", "arguments": {}},
            ],
            "store": True,
        },
        "openai-issue-17402-error.1.json": {
            "input": [user("weather?"), {"type": "function_call", "call_id": "call_1", "name": "weather"}, output("call_1")],
            "store": False,
        },
    }


@pytest.mark.parametrize("name", sorted(_error_inputs()))
def test_preflight_agrees_with_recorded_error_body(fixtures_dir, name):
    body = json.loads((fixtures_dir / "errors" / name).read_text(encoding="utf-8"))
    case = _error_inputs()[name]
    problems = preflight(case["input"], case["store"], previous_items=case.get("previous_items"))
    assert problems, name
    assert problems[0].to_error_body() == body
    assert problems[0].recorded
    fixed = repair(case["input"], case["store"], previous_items=case.get("previous_items"))
    assert preflight(fixed.input, case["store"], previous_items=case.get("previous_items")) == []
    assert fixed.changes


@pytest.mark.parametrize("name", sorted(_error_inputs()))
def test_recorded_error_bodies_parse_to_the_problem_preflight_predicts(fixtures_dir, name):
    body = json.loads((fixtures_dir / "errors" / name).read_text(encoding="utf-8"))
    case = _error_inputs()[name]
    predicted = preflight(case["input"], case["store"], previous_items=case.get("previous_items"))[0]
    parsed = parse_api_error(body)
    assert parsed is not None
    assert (parsed.kind, parsed.message, parsed.param, parsed.code) == (
        predicted.kind,
        predicted.message,
        predicted.param,
        predicted.code,
    )
    assert parse_api_error(body["error"]) == parsed


def test_parse_api_error_other_texts():
    enc = {
        "error": {
            "message": "The encrypted content gAAA...DQ== could not be verified.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_encrypted_content",
        }
    }
    assert parse_api_error(enc).kind == "invalid_encrypted_content"
    newer = "The encrypted content for item rs_1 could not be verified. Reason: Encrypted content could not be decrypted or parsed."
    assert parse_api_error({"error": {"message": newer, "param": None, "code": "invalid_encrypted_content"}}).kind == (
        "invalid_encrypted_content"
    )
    pairing = parse_api_error(
        {"error": {"message": "Item 'rs_1' of type 'reasoning' was provided without its required following item.", "param": "input"}}
    )
    assert pairing.kind in REASONING_REPLAY_KINDS
    assert parse_api_error({"error": {"message": "You exceeded your current quota.", "code": "insufficient_quota"}}) is None
    assert parse_api_error({"error": None}) is None


def test_every_recorded_error_body_is_covered(fixtures_dir):
    assert sorted(p.name for p in (fixtures_dir / "errors").glob("*.json")) == sorted(_error_inputs())


# ---------------------------------------------------------------------------------------------
# A real two-turn store:false loop (openai-issue-11239.1 / .2)


@pytest.fixture()
def loop(fixtures_dir):
    turn1 = fold_done_items(load_chunks(fixtures_dir / "vercel-ai" / "openai-issue-11239.1.chunks.txt"))
    turn2 = fold_done_items(load_chunks(fixtures_dir / "vercel-ai" / "openai-issue-11239.2.chunks.txt"))
    assert [i["type"] for i in turn1] == ["reasoning", "function_call"]
    assert [i["type"] for i in turn2] == ["message"]
    question = user("What is the verification code for issue-11239? Use the tool.")
    answer = output(turn1[1]["call_id"], '{"code":"blue-42"}')
    return question, turn1, answer, turn2


def test_recorded_loop_replays_cleanly(loop):
    question, turn1, answer, turn2 = loop
    links = reasoning_links(turn1)
    assert links == {turn1[1]["id"]: turn1[0]["id"]}
    second_request = [question, *turn1, answer]
    third_request = [*second_request, *turn2, user("thanks; and for issue-1?")]
    for items in (second_request, third_request):
        assert preflight(items, store=False, links=links) == []
        assert repair(items, store=False, links=links).changes == []


def test_recorded_loop_broken_variants(loop):
    question, turn1, answer, _turn2 = loop
    rs, fc = turn1
    links = reasoning_links(turn1)
    rs_id, fc_id, cid = rs["id"], fc["id"], fc["call_id"]
    cases = {
        "tool output forgotten": ([question, rs, fc], f"No tool output found for function call {cid}."),
        "reasoning replayed with status": (
            [question, {**rs, "status": "completed"}, fc, answer],
            "Unknown parameter: 'input[1].status'.",
        ),
        "summary dropped": (
            [question, {k: v for k, v in rs.items() if k != "summary"}, fc, answer],
            "Missing required parameter: 'input[1].summary'.",
        ),
        "encrypted content not stored": (
            [question, {k: v for k, v in rs.items() if k != "encrypted_content"}, fc, answer],
            NOT_FOUND.format(rs_id),
        ),
        "reasoning dropped, call kept with its id": (
            [question, fc, answer],
            f"Item '{fc_id}' of type 'function_call' was provided without its required 'reasoning' item: '{rs_id}'.",
        ),
        "call dropped, reasoning kept": (
            [question, rs, answer],
            f"Item '{rs_id}' of type 'reasoning' was provided without its required following item.",
        ),
        "turn replayed twice": (
            [question, rs, fc, answer, rs, fc, answer],
            f"Duplicate item found with id {rs_id}. Remove duplicate items from your input and try again.",
        ),
        "stream event replayed as the item": (
            [question, rs, {**fc, "sequence_number": 14}, answer],
            "Unknown parameter: 'input[2].sequence_number'.",
        ),
    }
    for name, (items, message) in cases.items():
        problems = preflight(items, store=False, links=links)
        assert problems and problems[0].message == message, name
        fixed = repair(items, store=False, links=links)
        assert preflight(fixed.input, store=False, links=links) == [], name
        # the call that has its output survives every repair
        if any(i.get("type") == "function_call" for i in items):
            assert any(i.get("call_id") == cid and i["type"] == "function_call" for i in fixed.input), name


def test_repair_of_recorded_variants_is_minimal(loop):
    question, turn1, answer, _ = loop
    rs, fc = turn1
    fixed = repair([question, {**rs, "status": "completed"}, fc, answer])
    assert [c.reason for c in fixed.changes] == ["reasoning_status"]
    assert fixed.input[1] == rs
    assert fixed.input[0] is question and fixed.input[2] is fc and fixed.input[3] is answer
    # reasoning without its blob: dropped, and the call loses the id that points at it
    fixed = repair([question, {k: v for k, v in rs.items() if k != "encrypted_content"}, fc, answer])
    assert [c.reason for c in fixed.changes] == ["reasoning_without_encrypted_content", "reasoning_dropped"]
    assert fixed.input == [question, {k: v for k, v in fc.items() if k != "id"}, answer]


# ---------------------------------------------------------------------------------------------
# repair, hand-written


def test_repair_synthesises_aborted_output_after_the_step():
    items = [user(), reasoning("rs_1"), call("call_1", "fc_1"), call("call_2", "fc_2"), output("call_1"), assistant("x")]
    fixed = repair(items)
    assert [i.get("call_id") for i in fixed.input] == [None, None, "call_1", "call_2", "call_1", "call_2", None]
    assert fixed.input[5]["type"] == "function_call_output"
    assert json.loads(fixed.input[5]["output"])["error"] == "aborted"
    assert [c.reason for c in fixed.changes] == ["unanswered_call"]
    dropped = repair(items, unanswered="drop")
    assert [i.get("call_id") for i in dropped.input] == [None, None, "call_1", "call_1", None]


def test_repair_duplicates():
    a = assistant("a", "msg_1", "completed")
    items = [user(), a, dict(a), assistant("b", "msg_1", "completed")]
    fixed = repair(items, store=True)
    assert [c.reason for c in fixed.changes] == ["duplicate_id", "duplicate_id"]
    assert fixed.input[:2] == [items[0], a]
    # the differing duplicate keeps its content, without the id (and the status that goes with it)
    assert fixed.input[2] == {"type": "message", "role": "assistant", "content": items[3]["content"]}


def test_repair_assistant_parts():
    item = {
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "input_text", "text": "hi"},
            {"type": "input_image", "image_url": "https://x"},
            {"type": "refusal", "refusal": "no"},
        ],
    }
    fixed = repair([user(), item])
    assert fixed.input[1]["content"] == [
        {"type": "output_text", "text": "hi", "annotations": []},
        {"type": "refusal", "refusal": "no"},
    ]
    assert item["content"][0]["type"] == "input_text"  # caller's item untouched


def test_repair_changes_render_as_text():
    fixed = repair([user(), call("call_1", args=None)])
    texts = [str(c) for c in fixed.changes]
    assert texts == [
        "added 'arguments': '{}' to function_call 'call_1'",
        "added an aborted function_call_output for unanswered function_call 'call_1'",
    ]
    assert fixed.changes[0].to_dict()["call_id"] == "call_1"


# ---------------------------------------------------------------------------------------------
# Properties


def _calls_with_outputs(items, previous=()):
    outs = {
        (i["type"].removesuffix("_output"), i["call_id"])
        for i in [*previous, *items]
        if i.get("type", "").endswith("_output") and isinstance(i.get("call_id"), str)
    }
    return {(i["type"], i["call_id"]) for i in items if (i.get("type"), i.get("call_id")) in outs}


@given(INPUTS, st.booleans())
def test_repair_always_passes_preflight_and_is_idempotent(items, store):
    before = copy.deepcopy(items)
    fixed = repair(items, store)
    assert items == before  # never mutates
    assert preflight(fixed.input, store) == []
    assert repair(fixed.input, store).changes == []
    if not preflight(items, store):
        assert fixed.changes == [] and fixed.input == items


@given(INPUTS, st.booleans())
def test_repair_never_drops_a_call_that_has_its_output(items, store):
    fixed = repair(items, store)
    kept = {(i.get("type"), i.get("call_id")) for i in fixed.input}
    assert _calls_with_outputs(items) <= kept


@given(INPUTS, st.booleans())
def test_repair_never_reorders(items, store):
    tagged = [{**item, "x_tag": n} if "type" in item and len(item) > 2 else item for n, item in enumerate(items)]
    fixed = repair(tagged, store)
    positions = []
    for item in fixed.input:
        if "x_tag" in item:
            positions.append(item["x_tag"])
        else:
            match = [n for n, orig in enumerate(tagged) if orig is item]
            positions.extend(match)  # synthesised outputs match nothing
    assert positions == sorted(positions)


@given(INPUTS, st.booleans())
def test_first_problem_is_what_check_raises(items, store):
    problems = preflight(items, store)
    if problems:
        with pytest.raises(PreflightError) as info:
            check(items, store)
        assert info.value.message == problems[0].message
    else:
        check(items, store)


@given(INPUTS, st.booleans())
def test_every_predicted_text_parses_back_to_its_problem(items, store):
    for problem in preflight(items, store):
        parsed = parse_api_error(problem.to_error_body())
        assert parsed is not None, problem.message
        assert (parsed.kind, parsed.message, parsed.param, parsed.code) == (
            problem.kind,
            problem.message,
            problem.param,
            problem.code,
        )
        if problem.param != "input":
            assert parsed.index == problem.index
