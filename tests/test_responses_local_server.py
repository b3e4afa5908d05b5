"""LocalResponsesServer: the wire it writes (byte for byte) and the scripted event builder's shapes."""

from __future__ import annotations

import json
import typing

import httpx
import pytest
import support_responses
from hypothesis import given, settings
from hypothesis import strategies as st
from support_responses import USER_INPUT, chunk_lines, split_by_response

from ai_transport.responses import (
    ErrorReply,
    ScriptedFunctionCall,
    ScriptedReasoning,
    ScriptedText,
    StreamReply,
    build_response_events,
    replay_chunks,
    replay_error,
    scripted,
    sequence,
)

# Shared fixtures (a loopback server factory, a fast client).
serve = support_responses.serve
make_client = support_responses.make_client


async def raw_post(server, body=None, path="/v1/responses"):
    async with httpx.AsyncClient() as http:
        url = server.base_url.removesuffix("/v1") + path
        async with http.stream("POST", url, json=body or {"model": "m", "input": "hi"}) as resp:
            raw = b"".join([chunk async for chunk in resp.aiter_raw()])
            return resp, raw


@pytest.mark.parametrize(
    "name",
    ["azure-text.1.chunks.txt", "openai-issue-11239.1.chunks.txt", "openai-reasoning-encrypted-content.1.chunks.txt"],
)
async def test_recorded_stream_is_framed_as_the_readme_says(name, fixtures_dir, serve):
    path = fixtures_dir / "vercel-ai" / name
    raw_lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    first = split_by_response([line.decode() for line in raw_lines])[0]
    server = await serve(replay_chunks(path))
    resp, raw = await raw_post(server)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert resp.headers["transfer-encoding"] == "chunked"
    expected = b"".join(
        b"event: " + json.loads(line)["type"].encode() + b"\ndata: " + line + b"\n\n"
        for line in raw_lines[: len(first)]
    )
    assert raw == expected
    assert b"[DONE]" not in raw


async def test_recorded_error_body_is_served_byte_for_byte(fixtures_dir, serve):
    path = fixtures_dir / "errors" / "openai-issue-17402-error.1.json"
    server = await serve(replay_error(path))
    resp, raw = await raw_post(server)
    assert resp.status_code == 400 and resp.headers["content-type"] == "application/json"
    assert raw == path.read_bytes()


async def test_requests_are_recorded_and_unknown_paths_are_404(serve):
    server = await serve(scripted(lambda body: [ScriptedText("hi")]))
    resp, _ = await raw_post(server, {"model": "m", "input": [{"role": "user", "content": "x"}]})
    assert resp.status_code == 200
    resp404, raw404 = await raw_post(server, path="/v1/chat/completions")
    assert resp404.status_code == 404 and "no route" in json.loads(raw404)["error"]["message"]
    assert [r.path for r in server.requests] == ["/v1/responses", "/v1/chat/completions"]
    assert server.requests[0].json() == {"model": "m", "input": [{"role": "user", "content": "x"}]}
    assert server.requests[0].headers["content-type"] == "application/json"


async def test_responder_failure_becomes_a_500(serve):
    def broken(request):
        raise RuntimeError("oops")

    server = await serve(broken)
    resp, raw = await raw_post(server)
    assert resp.status_code == 500 and "oops" in json.loads(raw)["error"]["message"]


async def test_a_bad_request_raised_by_the_responder_is_a_400_naming_the_field(serve):
    from ai_transport.cli.scenario import scripted_turn

    server = await serve(lambda request: StreamReply.from_events(scripted_turn(request.json())))
    for body, param in ((b"x", None), (b"[]", None), (b'{"input":5}', "input"), (b'{"tools":5,"input":"x"}', "tools"),
                        (b'{"input":[{"type":"function_call","call_id":[1]}]}', "input[0].call_id"),
                        (b"[" * 100_000 + b"]" * 100_000, None)):
        async with httpx.AsyncClient() as http:
            resp = await http.post(server.base_url + "/responses", content=body)
        error = resp.json()["error"]
        assert resp.status_code == 400 and error["type"] == "invalid_request_error", body[:40]
        assert error["param"] == param and error["message"]


def test_a_recorded_body_nested_too_deeply_reads_as_none():
    from ai_transport.responses import RecordedRequest

    assert RecordedRequest("POST", "/v1/responses", {}, b"[" * 100_000 + b"]" * 100_000).json() is None


async def test_sequence_and_replay_run_out_with_a_500(fixtures_dir, serve):
    path = fixtures_dir / "vercel-ai" / "azure-text.1.chunks.txt"
    server = await serve(sequence(ErrorReply(418, b"{}"), replay_chunks(path)))
    statuses = [(await raw_post(server))[0].status_code for _ in range(3)]
    assert statuses == [418, 200, 500]
    server.responder = replay_chunks(path)
    assert [(await raw_post(server))[0].status_code for _ in range(2)] == [200, 500]


async def test_chunk_size_splits_frames_across_transfer_chunks(fixtures_dir, serve, make_client):
    path = fixtures_dir / "vercel-ai" / "openai-issue-11239.1.chunks.txt"
    lines = chunk_lines(path)
    server = await serve(lambda request: StreamReply.from_lines(lines, chunk_size=7))
    events = await make_client(server).stream(input=USER_INPUT).collect()
    assert events == [json.loads(line) for line in lines]


async def test_drop_after_cuts_the_body_without_the_terminating_chunk(fixtures_dir, serve):
    path = fixtures_dir / "vercel-ai" / "azure-text.1.chunks.txt"
    server = await serve(replay_chunks(path, drop_after=3))
    with pytest.raises(httpx.RemoteProtocolError):
        await raw_post(server)


# -- scripted events --------------------------------------------------------------------------------

TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]
DEMO = [
    ScriptedReasoning(["**Checking the weather**\n\nI should call the tool."], encrypted_content="gAAAAABdone"),
    ScriptedText("Let me check.", phase="commentary"),
    ScriptedFunctionCall("get_weather", {"city": "Lyon"}, call_id="call_abc"),
]


def fold(events):
    """Rebuild output items from the deltas alone (the way a consumer folds a stream)."""
    items = {}
    for e in events:
        kind, index = e["type"], e.get("output_index")
        if kind == "response.output_item.added":
            items[index] = json.loads(json.dumps(e["item"]))
        elif kind == "response.output_text.delta":
            items[index].setdefault("_text", "")
            items[index]["_text"] += e["delta"]
        elif kind == "response.function_call_arguments.delta":
            items[index]["arguments"] += e["delta"]
        elif kind == "response.reasoning_summary_part.added":
            items[index]["summary"].append({"type": "summary_text", "text": ""})
        elif kind == "response.reasoning_summary_text.delta":
            items[index]["summary"][e["summary_index"]]["text"] += e["delta"]
    return items


def test_scripted_events_have_the_recorded_shape():
    request = {"model": "gpt-local", "input": USER_INPUT, "instructions": "sys", "tools": TOOLS,
               "reasoning": {"effort": "low", "summary": "auto"}}
    events = build_response_events(DEMO, request=request, seed=7)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1]["type"] == "response.completed"
    created, done = events[0]["response"], events[-1]["response"]
    assert created["output"] == [] and created["usage"] is None and created["status"] == "in_progress"
    assert created["store"] is False and created["tools"] == TOOLS and created["instructions"] == "sys"
    assert created["model"] == "gpt-local" and created["reasoning"] == {"effort": "low", "summary": "auto"}
    assert done["id"] == created["id"] and done["id"].startswith("resp_") and done["status"] == "completed"
    items_done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done["output"] == items_done
    assert [i["type"] for i in items_done] == ["reasoning", "message", "function_call"]
    assert [e["output_index"] for e in events if e["type"] == "response.output_item.added"] == [0, 1, 2]
    reasoning, message, call = items_done
    assert reasoning["id"].startswith("rs_") and "status" not in reasoning
    assert reasoning["encrypted_content"] == "gAAAAABdone"
    added_reasoning = next(e["item"] for e in events if e["type"] == "response.output_item.added")
    assert added_reasoning["summary"] == [] and added_reasoning["encrypted_content"] != "gAAAAABdone"
    assert message["phase"] == "commentary" and message["id"].startswith("msg_")
    assert call == {"id": call["id"], "type": "function_call", "status": "completed",
                    "arguments": '{"city":"Lyon"}', "call_id": "call_abc", "name": "get_weather"}
    folded = fold(events)
    assert folded[0]["summary"] == reasoning["summary"]
    assert folded[1]["_text"] == "Let me check." and folded[2]["arguments"] == call["arguments"]
    for e in events[2:-1]:  # every item event carries the item's coordinates
        assert "output_index" in e
        if "item" not in e:
            assert e["item_id"] == items_done[e["output_index"]]["id"]


def test_scripted_reasoning_without_summary_is_added_then_done():
    events = build_response_events([ScriptedReasoning(), ScriptedText("x")], seed=1)
    assert [e["type"] for e in events[2:4]] == ["response.output_item.added", "response.output_item.done"]


def test_scripted_failure_and_incomplete_terminals():
    failed = build_response_events([ScriptedText("x")], status="failed",
                                   error={"code": "insufficient_quota", "message": "quota"}, seed=1)
    assert [e["type"] for e in failed] == ["response.created", "response.in_progress", "error", "response.failed"]
    assert failed[2]["error"]["message"] == "quota" and failed[3]["response"]["error"]["code"] == "insufficient_quota"
    incomplete = build_response_events([ScriptedText("cut")], status="incomplete", seed=1)
    last = incomplete[-1]["response"]
    assert last["incomplete_details"] == {"reason": "max_output_tokens"} and last["output"][0]["status"] == "incomplete"
    with pytest.raises(ValueError):
        build_response_events([], status="queued")


def test_seed_makes_scripted_events_reproducible():
    a = build_response_events(DEMO, seed=3, created_at=1, obfuscation=True)
    assert a == build_response_events(DEMO, seed=3, created_at=1, obfuscation=True)
    assert a != build_response_events(DEMO, seed=4, created_at=1, obfuscation=True)
    assert all("obfuscation" in e for e in a if e["type"].endswith(".delta"))


def _sdk_models():
    types = pytest.importorskip("openai.types.responses")
    union = typing.get_args(types.ResponseStreamEvent)
    if union and typing.get_origin(union[0]) is typing.Union:
        union = typing.get_args(union[0])
    return {literal: cls for cls in union for literal in typing.get_args(cls.model_fields["type"].annotation)}


def test_scripted_events_validate_against_the_openai_sdk_models():
    models = _sdk_models()
    events = build_response_events(DEMO, request={"model": "m", "input": USER_INPUT, "tools": TOOLS},
                                   seed=5, obfuscation=True)
    events += build_response_events([ScriptedText("cut")], status="incomplete", seed=6)
    for event in events:
        models[event["type"]].model_validate(event)


outputs = st.lists(
    st.one_of(
        st.builds(ScriptedText, st.text(max_size=40)),
        st.builds(ScriptedReasoning, st.lists(st.text(min_size=1, max_size=30), max_size=3)),
        st.builds(ScriptedFunctionCall, st.sampled_from(["a", "get_weather"]),
                  st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)),
    ),
    max_size=5,
)


@settings(max_examples=40)
@given(outputs=outputs, seed=st.integers(0, 2**32))
def test_scripted_deltas_always_fold_to_the_done_items(outputs, seed):
    events = build_response_events(outputs, seed=seed)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert events[-1]["response"]["output"] == done and len(done) == len(outputs)
    folded = fold(events)
    for index, item in enumerate(done):
        if item["type"] == "message":
            assert folded[index].get("_text", "") == item["content"][0]["text"]
        elif item["type"] == "function_call":
            assert folded[index]["arguments"] == item["arguments"]
            assert json.loads(item["arguments"]) == outputs[index].arguments
        else:
            assert folded[index]["summary"] == item["summary"]


async def test_chunked_request_bodies_are_read(serve):
    server = await serve(scripted(lambda body: [ScriptedText(body["input"])]))

    async def body():
        yield b'{"model": "m", '
        yield b'"input": "chunked"}'

    async with httpx.AsyncClient() as http:
        resp = await http.post(server.base_url + "/responses", content=body())
    assert resp.status_code == 200 and '"text":"chunked"' in resp.text
    assert server.requests[0].headers["transfer-encoding"] == "chunked"
    assert server.requests[0].json() == {"model": "m", "input": "chunked"}
