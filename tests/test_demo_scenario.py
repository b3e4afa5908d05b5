"""The demo's scripted model: well-formed Responses streams that drive a gated tool loop."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport.cli.scenario import GATED_TOOLS, WEATHER_TOOL, get_weather, run_tool, scripted_turn


def user_input(text: str) -> list[dict]:
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]


def outputs_of(events: list[dict]) -> list[dict]:
    return [e["item"] for e in events if e["type"] == "response.output_item.done"]


def check_stream(events: list[dict]) -> None:
    """Invariants of a real Responses stream that the codec relies on."""
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    added: dict[str, dict] = {}
    deltas: dict[tuple, str] = {}
    for e in events:
        if e["type"] == "response.output_item.added":
            added[e["item"]["id"]] = e["item"]
            assert e["output_index"] == len(added) - 1
        elif e["type"].endswith(".delta"):
            assert e["item_id"] in added
            key = (e["item_id"], e.get("content_index"), e.get("summary_index"))
            deltas[key] = deltas.get(key, "") + e["delta"]
        elif e["type"] in ("response.output_text.done", "response.reasoning_summary_text.done"):
            assert deltas[(e["item_id"], e.get("content_index"), e.get("summary_index"))] == e["text"]
        elif e["type"] == "response.function_call_arguments.done":
            assert deltas[(e["item_id"], None, None)] == e["arguments"]
    assert events[-1]["response"]["output"] == outputs_of(events)


def test_events_validate_against_the_openai_sdk_models():
    openai_types = pytest.importorskip("openai.types.responses")
    import typing

    union = typing.get_args(openai_types.ResponseStreamEvent)
    union = typing.get_args(union[0]) if len(union) and typing.get_origin(union[0]) is typing.Union else union
    by_type = {}
    for cls in union:
        for literal in typing.get_args(cls.model_fields["type"].annotation):
            by_type[literal] = cls
    first = scripted_turn({"model": "m", "input": user_input("Weather in Lyon?"), "tools": [WEATHER_TOOL]})
    for e in first:
        by_type[e["type"]].model_validate(e, strict=False)


def test_first_turn_asks_for_the_gated_tool_then_answers_from_its_output():
    first = scripted_turn({"model": "m", "input": user_input("What's the weather in Lyon today?")})
    check_stream(first)
    kinds = [i["type"] for i in outputs_of(first)]
    assert kinds == ["reasoning", "message", "function_call"]
    call = outputs_of(first)[-1]
    assert call["name"] in GATED_TOOLS and json.loads(call["arguments"]) == {"city": "Lyon", "unit": "celsius"}

    history = user_input("What's the weather in Lyon today?") + outputs_of(first)
    output = run_tool(call["name"], call["arguments"])
    second = scripted_turn({"model": "m", "input": history + [
        {"type": "function_call_output", "call_id": call["call_id"], "output": output}]})
    check_stream(second)
    text = outputs_of(second)[-1]["content"][0]["text"]
    weather = get_weather("Lyon")
    assert f"Right now in Lyon it is {weather['temperature']}°C with {weather['conditions']}" in text
    assert [i["type"] for i in outputs_of(second)] == ["reasoning", "message"]


def test_a_denied_call_gets_an_answer_that_says_so():
    first = scripted_turn({"model": "m", "input": user_input("Weather in Paris?")})
    call = outputs_of(first)[-1]
    history = user_input("Weather in Paris?") + outputs_of(first)
    second = scripted_turn({"model": "m", "input": history + [
        {"type": "function_call_output", "call_id": call["call_id"], "output": "not today"}]})
    check_stream(second)
    assert "I did not check the live weather (not today)" in outputs_of(second)[-1]["content"][0]["text"]


@given(city=st.text(min_size=1, max_size=30), unit=st.sampled_from(["celsius", "fahrenheit"]))
def test_the_tool_is_deterministic_and_json(city, unit):
    out = run_tool("get_weather", json.dumps({"city": city, "unit": unit}))
    assert json.loads(out) == get_weather(city, unit) == get_weather(city, unit)


def test_unknown_tool_is_refused():
    with pytest.raises(ValueError, match="unknown tool 'rm'"):
        run_tool("rm", "{}")
    assert WEATHER_TOOL["name"] == "get_weather"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)
_FIELD = st.sampled_from(["model", "input", "tools", "include", "instructions", "type", "role", "call_id",
                          "content", "output", "text", "conditions", "city"])


def _bodies(depth: int = 2) -> st.SearchStrategy:
    leaf = _JSON | st.sampled_from(["message", "user", "function_call", "function_call_output", "c1"])
    if depth == 0:
        return leaf
    child = _bodies(depth - 1)
    return leaf | st.lists(child, max_size=4) | st.dictionaries(_FIELD, child, max_size=5)


@given(body=_bodies())
def test_any_json_body_is_answered_or_refused_as_a_bad_request(body):
    """Whatever JSON a client sends, the scripted model answers a well-formed stream or raises
    BadRequest naming the field (the local server's 400), never a TypeError / KeyError (a 500)."""
    from ai_transport.responses import BadRequest

    try:
        events = scripted_turn(body)
    except BadRequest as e:
        assert e.message
        return
    check_stream(events)


@pytest.mark.parametrize(("body", "param"), [
    (None, None), ([], None), ("x", None),
    ({"input": 5}, "input"), ({"tools": 5, "input": "x"}, "tools"), ({"include": "x"}, "include"),
    ({"input": [{"type": "function_call", "call_id": [1]}]}, "input[0].call_id"),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": 5}]}]}, "input[0].content[0].text"),
    ({"input": ["hi"]}, "input[0]"),
])
def test_a_malformed_body_is_refused_naming_the_field(body, param):
    from ai_transport.responses import BadRequest

    with pytest.raises(BadRequest) as info:
        scripted_turn(body)
    assert info.value.param == param


def test_a_tool_output_that_is_not_the_weather_is_answered_as_a_refusal():
    first = scripted_turn({"model": "m", "input": user_input("Weather in Paris?")})
    call = outputs_of(first)[-1]
    history = user_input("Weather in Paris?") + outputs_of(first)
    second = scripted_turn({"input": history + [
        {"type": "function_call_output", "call_id": call["call_id"], "output": '{"conditions": "sunny"}'}]})
    check_stream(second)
    assert "I did not check the live weather" in outputs_of(second)[-1]["content"][0]["text"]
