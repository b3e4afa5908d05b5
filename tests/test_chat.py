"""Chat Completions conversation shape: tool-call answers, turn trimming, cache-friendly requests."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support_hygiene import INPUTS, call, fold_done_items, load_chunks, output, reasoning, user

from ai_transport.codec.types import OpenAIMessage
from ai_transport.errors import InvalidArgumentError, InvalidTypeError
from ai_transport.readers.chat import (
    CONTEXT_PREAMBLE,
    answer_unanswered_tool_calls,
    build_request_messages,
    note_message,
    split_turns,
    to_chat_completions_messages,
    trim_turns,
    unanswered_tool_calls,
    with_context,
)

try:  # secondary shape check with the SDK's own types (test extra)
    from openai.types.chat import ChatCompletionMessageParam
    from pydantic import TypeAdapter

    _CHAT = TypeAdapter(list[ChatCompletionMessageParam])
except ImportError:  # pragma: no cover
    _CHAT = None


def u(text="hi"):
    return {"role": "user", "content": text}


def a(text="ok", *call_ids):
    m = {"role": "assistant", "content": text}
    if call_ids:
        m["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "lookup", "arguments": "{}"}} for c in call_ids
        ]
    return m


def t(call_id, content="42"):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def assert_valid_chat(messages):
    """Every tool call answered directly after its assistant message; every tool message answers one."""
    assert unanswered_tool_calls(messages) == []
    for m in messages:
        if m["role"] == "assistant":
            assert m.get("content") is not None or m.get("tool_calls") or m.get("refusal"), m
    for k, m in enumerate(messages):
        if m["role"] == "tool":
            j = k - 1
            while messages[j]["role"] == "tool":
                j -= 1
            assert m["tool_call_id"] in {c["id"] for c in messages[j].get("tool_calls", [])}
    if _CHAT is not None:
        _CHAT.validate_python(messages)


# ---------------------------------------------------------------------------------------------
# unanswered_tool_calls / answer_unanswered_tool_calls


def test_unanswered_tool_calls():
    turn = [u(), a(None, "c1", "c2"), t("c2"), a("done")]
    assert [c["id"] for c in unanswered_tool_calls(turn)] == ["c1"]
    assert unanswered_tool_calls([u(), a(None, "c1"), t("c1")]) == []
    # an answer after a user message is not "directly after"
    assert [c["id"] for c in unanswered_tool_calls([u(), a(None, "c1"), u("wait"), t("c1")])] == ["c1"]
    assert unanswered_tool_calls([]) == []


def test_answer_inserts_after_existing_answers_in_call_order():
    turn = [u(), a(None, "c1", "c2", "c3"), t("c2"), a("done")]
    before = copy.deepcopy(turn)
    fixed = answer_unanswered_tool_calls(turn, {"error": "aborted"})
    assert turn == before
    assert fixed == [
        turn[0],
        turn[1],
        turn[2],
        {"role": "tool", "tool_call_id": "c1", "content": '{"error":"aborted"}'},
        {"role": "tool", "tool_call_id": "c3", "content": '{"error":"aborted"}'},
        turn[3],
    ]
    assert fixed[0] is turn[0] and fixed[2] is turn[2]
    assert_valid_chat(fixed)


def test_answer_content_forms():
    turn = [u(), a(None, "c1")]
    assert answer_unanswered_tool_calls(turn, "cancelled")[2]["content"] == "cancelled"
    assert answer_unanswered_tool_calls(turn, ["é", 1])[2]["content"] == '["é",1]'
    out = answer_unanswered_tool_calls(turn, lambda c: {"call": c["function"]["name"]})
    assert json.loads(out[2]["content"]) == {"call": "lookup"}
    assert json.loads(answer_unanswered_tool_calls(turn)[2]["content"])["error"] == "no_result"


def test_answer_moves_a_misplaced_answer():
    turn = [u(), a(None, "c1"), u("meanwhile"), t("c1", "real result")]
    fixed = answer_unanswered_tool_calls(turn)
    assert fixed == [turn[0], turn[1], turn[3], turn[2]]
    assert_valid_chat(fixed)


def test_answer_bad_input():
    with pytest.raises(InvalidTypeError, match=r"turn\[1\] must be an object"):
        answer_unanswered_tool_calls([u(), "x"])


# ---------------------------------------------------------------------------------------------
# turns


def test_split_and_trim_turns():
    history = [u("1"), a("r1"), u("2"), a(None, "c1"), t("c1"), a("r2"), u("3"), a("r3")]
    assert [len(x) for x in split_turns(history)] == [2, 4, 2]
    kept, dropped = trim_turns(history, 2)
    assert kept == history[2:] and dropped == 1
    assert trim_turns(history, 5) == (history, 0)
    assert trim_turns(history, 0) == ([], 3)
    assert trim_turns([], 3) == ([], 0)


def test_a_user_message_inside_a_call_does_not_start_a_turn():
    history = [u("1"), a(None, "c1"), u("interjection"), t("c1"), a("r"), u("2"), a("r2")]
    assert [len(x) for x in split_turns(history)] == [5, 2]
    kept, dropped = trim_turns(history, 1)
    assert kept == history[5:] and dropped == 1


def test_leading_messages_form_their_own_turn():
    history = [a("welcome"), u("1"), a("r1")]
    assert trim_turns(history, 1) == (history[1:], 1)


def test_trim_bad_max():
    with pytest.raises(InvalidArgumentError, match="max must be >= 0"):
        trim_turns([u()], -1)
    with pytest.raises(InvalidTypeError, match="max must be an integer"):
        trim_turns([u()], 1.5)  # type: ignore[arg-type]


@st.composite
def conversations(draw):
    """Chat histories: turns of user text, assistant replies with tool calls, answers (some late)."""
    msgs = []
    n = 0
    late = []
    for _ in range(draw(st.integers(0, 6))):
        msgs.append(u())
        msgs.extend(late)
        late = []
        for _ in range(draw(st.integers(0, 3))):
            ids = [f"c{n + k}" for k in range(draw(st.integers(0, 3)))]
            n += len(ids)
            msgs.append(a(None if ids else "r", *ids))
            for cid in ids:
                where = draw(st.sampled_from(["now", "now", "late", "never"]))
                if where == "now":
                    msgs.append(t(cid))
                elif where == "late":
                    late.append(t(cid))
    msgs.extend(late)
    if draw(st.booleans()):
        msgs.insert(0, a("hello"))
    return msgs


@given(conversations(), st.integers(0, 8))
def test_trim_turns_keeps_newest_whole_turns(history, max_turns):
    before = copy.deepcopy(history)
    kept, dropped = trim_turns(history, max_turns)
    assert history == before
    turns = split_turns(history)
    assert dropped == max(0, len(turns) - max_turns)
    # newest whole turns: a suffix of the history starting at a turn start
    assert kept == history[len(history) - len(kept) :]
    assert kept == [m for turn in turns[dropped:] for m in turn]
    # never splits a call from its answers
    call_ids_kept = {c["id"] for m in kept for c in m.get("tool_calls", [])}
    call_ids_all = {c["id"] for m in history for c in m.get("tool_calls", [])}
    for m in kept:
        if m["role"] == "tool" and m["tool_call_id"] in call_ids_all:
            assert m["tool_call_id"] in call_ids_kept
    dropped_msgs = history[: len(history) - len(kept)]
    answered_in_kept = {m["tool_call_id"] for m in kept if m["role"] == "tool"}
    for m in dropped_msgs:
        for c in m.get("tool_calls", []):
            assert c["id"] not in answered_in_kept
    # every turn but a leading one starts at a user message
    for k, turn in enumerate(turns):
        assert turn and (k == 0 or turn[0]["role"] == "user")


@given(conversations())
def test_answer_leaves_nothing_unanswered(history):
    before = copy.deepcopy(history)
    fixed = answer_unanswered_tool_calls(history)
    assert history == before
    assert unanswered_tool_calls(fixed) == []
    assert answer_unanswered_tool_calls(fixed) == fixed  # idempotent
    # nothing but tool answers is added, and other messages keep their order and identity
    others = [m for m in fixed if m["role"] != "tool"]
    assert len(others) == len([m for m in history if m["role"] != "tool"])
    assert all(x is y for x, y in zip(others, [m for m in history if m["role"] != "tool"]))
    assert_valid_chat(fixed)


# ---------------------------------------------------------------------------------------------
# cache-friendly requests


def test_build_request_messages_keeps_the_system_prompt_stable():
    history = [u("1"), a("r1")]
    r1 = build_request_messages("You are helpful.", [], "hello", {"page": "/a", "cart": 1})
    r2 = build_request_messages("You are helpful.", history, "next", {"page": "/b", "cart": 2})
    assert r1[0] == r2[0] == {"role": "system", "content": f"You are helpful.\n\n{CONTEXT_PREAMBLE}"}
    assert r2[1:3] == history
    assert r2[-1] == {"role": "user", "content": 'next\n\n<context>\n{"page":"/b","cart":2}\n</context>'}
    assert "cart" not in r2[0]["content"]
    plain = build_request_messages("You are helpful.", history, "next")
    assert plain[0]["content"] == "You are helpful." and plain[-1] == {"role": "user", "content": "next"}
    # requests built turn after turn share their prefix byte for byte
    turn2_history = [*r1[1:], a("r")]
    r3 = build_request_messages("You are helpful.", turn2_history, "more", {"page": "/c"})
    assert r3[: len(r1)] == r1


def test_with_context_and_notes():
    assert with_context("hi") == "hi"
    assert with_context("hi", "raw state") == "hi\n\n<context>\nraw state\n</context>"
    note = note_message("The user switched to the billing page.")
    assert note["role"] == "user" and "billing" in note["content"]
    with pytest.raises(InvalidArgumentError, match=r"history\[1\] is a system message"):
        build_request_messages("s", [u(), {"role": "system", "content": "note"}], "x")
    with pytest.raises(InvalidTypeError, match="user_text"):
        with_context(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Responses items -> Chat Completions


def test_to_chat_completions_messages_recorded_loop(fixtures_dir):
    turn1 = fold_done_items(load_chunks(fixtures_dir / "vercel-ai" / "openai-issue-11239.1.chunks.txt"))
    turn2 = fold_done_items(load_chunks(fixtures_dir / "vercel-ai" / "openai-issue-11239.2.chunks.txt"))
    cid = turn1[1]["call_id"]
    messages = [
        OpenAIMessage("user", [user("code for issue-11239?")]),
        {"role": "assistant", "items": [*turn1, output(cid, '{"code":"blue-42"}')], "toolCallStates": {}},
        {"role": "assistant", "items": turn2},
    ]
    chat = to_chat_completions_messages(messages)
    assert chat == [
        {"role": "user", "content": "code for issue-11239?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "lookupVerificationCode", "arguments": '{"label":"issue-11239"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": cid, "content": '{"code":"blue-42"}'},
        {"role": "assistant", "content": "Verification code for issue-11239 is blue-42."},
    ]
    assert_valid_chat(chat)


def test_to_chat_completions_messages_merging_and_placement():
    commentary = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "phase": "commentary",
        "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
    }
    image_user = {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "what is this?"},
            {"type": "input_image", "image_url": "https://x/y.png", "detail": "low"},
            {"type": "input_image", "file_id": "file_1"},  # no Chat Completions form
        ],
    }
    messages = [
        {"role": "user", "items": [image_user]},
        {"role": "assistant", "items": [reasoning("rs_1"), commentary, call("c1", "fc_1"), call("c2", "fc_2"), output("c2", "two")]},
        {"role": "user", "items": [output("c1", [{"type": "input_text", "text": "one"}]), output("zz", "orphan")]},
        {"role": "assistant", "items": [{"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}]},
    ]
    chat = to_chat_completions_messages(messages)
    assert chat == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":1}'}},
                {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '{"q":1}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "one"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "assistant", "content": None, "refusal": "no"},
    ]
    assert_valid_chat(chat)


def test_to_chat_completions_messages_pending_call_stays_unanswered():
    chat = to_chat_completions_messages([{"role": "user", "items": [user("q")]}, {"role": "assistant", "items": [call("c1")]}])
    assert [c["id"] for c in unanswered_tool_calls(chat)] == ["c1"]
    assert_valid_chat(answer_unanswered_tool_calls(chat, "pending approval"))


def test_to_chat_completions_messages_bad_input():
    with pytest.raises(InvalidTypeError, match=r"messages\[0\].items must be an array"):
        to_chat_completions_messages([{"role": "user"}])
    with pytest.raises(InvalidTypeError, match="messages must be"):
        to_chat_completions_messages("nope")  # type: ignore[arg-type]


@given(st.lists(INPUTS, max_size=3))
def test_to_chat_completions_messages_is_valid_once_pending_calls_are_answered(conversation):
    messages = [
        OpenAIMessage("user" if any(i.get("role") == "user" for i in items) else "assistant", items)
        for items in conversation
    ]
    before = copy.deepcopy(conversation)
    chat = to_chat_completions_messages(messages)
    assert conversation == before
    assert all(m["role"] != "tool" or m["content"] is not None for m in chat)
    assert not any(m["role"] == "assistant" and m.get("tool_calls") == [] for m in chat)
    # calls with a stored output are answered directly after their assistant message
    answered = {
        i["call_id"]
        for items in conversation
        for i in items
        if i.get("type") in ("function_call_output", "custom_tool_call_output")
    }
    first_seen = set()
    for k, m in enumerate(chat):
        for c in m.get("tool_calls", []):
            if c["id"] in first_seen:
                continue  # a repeated call id is answered once, after its first call
            first_seen.add(c["id"])
            run = []
            for later in chat[k + 1 :]:
                if later["role"] != "tool":
                    break
                run.append(later["tool_call_id"])
            assert (c["id"] in run) == (c["id"] in answered)
    assert_valid_chat(answer_unanswered_tool_calls(chat))


def test_to_chat_completions_messages_skips_empty_assistant_output():
    empty = {"type": "message", "role": "assistant", "id": "msg_1", "status": "in_progress", "content": []}
    chat = to_chat_completions_messages([{"role": "user", "items": [user("q")]}, {"role": "assistant", "items": [reasoning(), empty]}])
    assert chat == [{"role": "user", "content": "q"}]


def test_to_chat_completions_messages_developer_content_is_text():
    dev = {
        "type": "message",
        "role": "developer",
        "content": [
            {"type": "input_text", "text": "Be brief."},
            {"type": "input_image", "image_url": "https://x/y.png"},
            {"type": "input_text", "text": "Use metric units."},
        ],
    }
    chat = to_chat_completions_messages([{"role": "user", "items": [dev, user("q")]}])
    assert chat == [{"role": "developer", "content": "Be brief.\nUse metric units."}, {"role": "user", "content": "q"}]
    assert_valid_chat(chat)


def test_trim_turns_accepts_pre_split_turns():
    from ai_transport.readers.chat import trim_turns

    t1 = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    t2 = [{"role": "user", "content": "c"},
          {"role": "assistant", "content": None,
           "tool_calls": [{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
          {"role": "tool", "tool_call_id": "x", "content": "1"}]
    kept, dropped = trim_turns([t1, t2], 1)
    assert kept == [t2] and dropped == 1
    assert trim_turns([t1, t2], 5) == ([t1, t2], 0)
    assert trim_turns([t1, t2], 0) == ([], 2)
    # the flat form of the same conversation gives the same cut, flattened
    assert trim_turns(t1 + t2, 1) == (t2, 1)
