"""The transcript renderer: static blocks from messages, and the append-only live printer."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport.cli.render import LivePrinter, render_transcript, transcript_blocks
from ai_transport.codec.types import CodecMessage, OpenAIMessage


def user(text: str) -> CodecMessage:
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    return CodecMessage("u1", OpenAIMessage("user", [item]))


def assistant(reasoning: str | None, text: str | None, calls=(), states=None, outputs=()) -> CodecMessage:
    items: list[dict] = []
    if reasoning is not None:
        items.append({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": reasoning}]})
    if text is not None:
        items.append(
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress",
             "content": [{"type": "output_text", "text": text, "annotations": []}]}
        )
    for call_id, name, args, status in calls:
        items.append({"type": "function_call", "id": "fc_" + call_id, "call_id": call_id, "name": name,
                      "arguments": args, "status": status})
    for call_id, output in outputs:
        items.append({"type": "function_call_output", "call_id": call_id, "output": output})
    return CodecMessage("a1", OpenAIMessage("assistant", items, dict(states or {})))


def test_static_transcript_shows_every_part_and_call_state():
    msgs = [
        user("Weather in Paris?"),
        assistant(
            "Need the forecast.",
            "Let me check.",
            calls=[("call_1", "get_weather", '{"city":"Paris"}', "completed")],
            states={"call_1": {"approval": "pending", "name": "get_weather", "arguments": '{"city":"Paris"}'}},
        ),
    ]
    text = render_transcript(msgs)
    assert text.splitlines() == [
        "you> Weather in Paris?",
        "thinking> Need the forecast.",
        "assistant> Let me check.",
        '  [tool] get_weather({"city":"Paris"}) -- awaiting approval',
    ]


def test_call_states_follow_approval_and_output():
    call = [("c", "refund", "{}", "completed")]
    assert transcript_blocks([assistant(None, None, call)])[-1].status == "called"
    assert transcript_blocks([assistant(None, None, [("c", "refund", "{", "in_progress")])])[-1].status == "streaming"
    assert transcript_blocks([assistant(None, None, call, {"c": {"approval": "approved"}})])[-1].status == (
        "approved, running"
    )
    done = assistant(None, None, call, {"c": {"approval": "approved"}}, outputs=[("c", {"ok": True})])
    blocks = transcript_blocks([done])
    assert [b.status for b in blocks if b.kind == "call"] == ["done"]
    assert [b.text for b in blocks if b.kind == "result"] == ['refund -> {"ok":true}']
    denied = assistant(None, None, call, {"c": {"approval": "denied", "reason": "too much"}},
                       outputs=[("c", "too much")])
    blocks = transcript_blocks([denied])
    assert [(b.kind, b.status) for b in blocks] == [("call", "denied (too much)")]  # rejection shown on the call
    failed = assistant(None, None, call, {"c": {"result": "failed"}}, outputs=[("c", "boom")])
    assert transcript_blocks([failed])[0].status == "failed"


def test_output_in_a_later_message_resolves_the_call():
    call_msg = assistant(None, "x", [("c", "get_weather", "{}", "completed")], {"c": {"approval": "approved"}})
    later = CodecMessage("a2", OpenAIMessage("assistant", [{"type": "function_call_output", "call_id": "c",
                                                             "output": "sunny"}]))
    blocks = transcript_blocks([call_msg, later])
    assert [b.status for b in blocks if b.kind == "call"] == ["done"]
    assert [b.text for b in blocks if b.kind == "result"] == ["get_weather -> sunny"]


def test_state_without_item_is_still_shown():
    msg = CodecMessage("a", OpenAIMessage("assistant", [], {"c9": {"approval": "pending", "name": "refund",
                                                                    "arguments": '{"amount":5}'}}))
    assert render_transcript([msg]) == '  [tool] refund({"amount":5}) -- awaiting approval\n'


def test_js_shaped_dicts_are_accepted():
    msg = {"codecMessageId": "m", "message": {"role": "assistant", "items": [
        {"type": "message", "id": "i", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}]}}
    assert render_transcript([msg]) == "assistant> hi\n"


def test_live_printer_prints_a_call_once_its_arguments_are_complete_then_each_state_change():
    out = io.StringIO()
    p = LivePrinter(out, color=False)
    for args in ['{"ci', '{"city":"Pa', '{"city":"Paris"}']:
        p.update([assistant(None, None, [("c", "get_weather", args, "in_progress")])])
    calls = [("c", "get_weather", '{"city":"Paris"}', "completed")]
    p.update([assistant(None, None, calls, {"c": {"approval": "pending"}})])
    p.update([assistant(None, None, calls, {"c": {"approval": "pending"}})])  # unchanged: prints nothing
    p.update([assistant(None, None, calls, {"c": {"approval": "approved"}})])
    p.update([assistant(None, None, calls, {"c": {"approval": "approved"}}, outputs=[("c", "18C")])])
    p.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        '  [tool] get_weather({"city":"Paris"}) -- awaiting approval',
        '  [tool] get_weather({"city":"Paris"}) -- approved, running',
        '  [tool] get_weather({"city":"Paris"}) -- done',
        "  [result] get_weather -> 18C",
    ]


def test_live_printer_marks_a_rewritten_text_as_revised():
    out = io.StringIO()
    p = LivePrinter(out, color=False)
    p.update([assistant(None, "Hello wor")])
    p.update([assistant(None, "Goodbye")])
    p.close()
    assert out.getvalue() == "assistant> Hello wor\nassistant (revised)> Goodbye\n"


words = st.text(alphabet="abcdefghij ", min_size=1, max_size=40)


@given(
    question=words,
    reasoning=words,
    answer=words,
    cuts=st.lists(st.tuples(st.sampled_from(["r", "a"]), st.integers(1, 6)), max_size=30),
)
def test_live_output_carries_every_text_exactly_once_in_order(question, reasoning, answer, cuts):
    """Whatever the interleaving of deltas, the segments printed for a block join to its final text."""
    out = io.StringIO()
    p = LivePrinter(out, color=False)
    shown = {"r": 0, "a": 0}
    full = {"r": reasoning, "a": answer}

    def snapshot():
        r = full["r"][: shown["r"]] if shown["r"] else None
        a = full["a"][: shown["a"]] if shown["a"] else None
        return [user(question), assistant(r, a)]

    for which, n in cuts:
        shown[which] = min(len(full[which]), shown[which] + n)
        p.update(snapshot())
        p.update(snapshot())  # a repeated snapshot adds nothing
    shown = {"r": len(reasoning), "a": len(answer)}
    p.update(snapshot())
    p.close()

    segments: dict[str, str] = {"you": "", "thinking": "", "assistant": ""}
    for line in out.getvalue().split("\n")[:-1]:
        m = re.match(r"^(you|thinking|assistant)( \(cont\.\))?> (.*)$", line)
        assert m, line
        segments[m.group(1)] += m.group(3)
    assert segments == {"you": question, "thinking": reasoning, "assistant": answer}
    assert out.getvalue().endswith("\n")


def test_colour_output_uses_rich_and_carries_the_same_text():
    pytest.importorskip("rich")
    snapshots = [
        [user("hi"), assistant("think", "Hel")],
        [user("hi"), assistant("think", "Hello", [("c", "get_weather", "{}", "completed")],
                                {"c": {"approval": "pending"}})],
    ]
    outputs = []
    for color in (False, True):
        out = io.StringIO()
        p = LivePrinter(out, color=color)
        for snap in snapshots:
            p.update(snap)
        p.note("-- run x ended: complete")
        p.close()
        outputs.append(out.getvalue())
    plain, coloured = outputs
    assert "\x1b[" in coloured and "\x1b[" not in plain
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
