"""ResponsesClient over real HTTP on loopback, against LocalResponsesServer (no mocks of httpx)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
import support_responses
from hypothesis import given, settings
from hypothesis import strategies as st
from support_responses import USER_INPUT, chunk_lines, compact, split_by_response

from ai_transport.errors import AITransportError
from ai_transport.readers import drop_reasoning
from ai_transport.responses import (
    E_INVALID_OPENAI_RESPONSES_OPTIONS,
    E_OPENAI_RESPONSES_API_ERROR,
    E_OPENAI_RESPONSES_CONNECTION_ERROR,
    E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED,
    E_OPENAI_RESPONSES_STREAM_ERROR,
    ErrorReply,
    InvalidResponsesOptionsError,
    LocalResponsesServer,
    ReasoningReplayRejectedError,
    ResponsesAPIError,
    ResponsesClient,
    ResponsesStreamError,
    ScriptedFunctionCall,
    ScriptedReasoning,
    ScriptedText,
    StreamReply,
    build_response_events,
    drop_reasoning_items,
    replay_chunks,
    replay_error,
    scripted,
    sequence,
)

# Shared fixtures (a loopback server factory, a fast client).
serve = support_responses.serve
make_client = support_responses.make_client

STREAM_FILES = [
    "azure-text.1.chunks.txt",
    "openai-reasoning-encrypted-content.1.chunks.txt",
    "openai-issue-11239.1.chunks.txt",
    "openai-issue-11239.2.chunks.txt",
]
QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more information "
    "on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
)

# A replayed store:false turn: user, reasoning + call (one response), the call's output, then the
# answer message preceded by its own reasoning item.
REPLAY_INPUT = [
    {"role": "user", "content": "What is the code?"},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-one"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "blue-42"},
    {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA-two"},
    {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "blue-42", "annotations": []}]},
    {"role": "user", "content": "thanks"},
]


def invalid_encrypted_content() -> ErrorReply:
    return ErrorReply.from_error(
        "The encrypted content for item rs_1 could not be verified. Reason: Encrypted content could not be "
        "decrypted or parsed.",
        param=None,
        code="invalid_encrypted_content",
    )


# -- recorded streams -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", STREAM_FILES)
async def test_recorded_streams_come_through_as_the_recorded_events(name, fixtures_dir, serve, make_client):
    path = fixtures_dir / "vercel-ai" / name
    lines = chunk_lines(path)
    server = await serve(replay_chunks(path))
    client = make_client(server)
    received = []
    for _ in split_by_response(lines):
        received += await client.stream(input=USER_INPUT).collect()
    assert received == [json.loads(line) for line in lines]
    # Lossless down to the bytes: each event re-serialises to its recorded line.
    assert [compact(e) for e in received] == lines
    assert len(server.requests) == len(split_by_response(lines))


async def test_multi_response_file_one_response_per_request_ending_at_each_terminal(
    fixtures_dir, serve, make_client
):
    path = fixtures_dir / "vercel-ai" / "openai-reasoning-encrypted-content.1.chunks.txt"
    groups = split_by_response(chunk_lines(path))
    assert len(groups) == 4
    server = await serve(replay_chunks(path))
    client = make_client(server)
    for group in groups:
        stream = client.stream(input=USER_INPUT)
        events = await stream.collect()
        assert events == [json.loads(line) for line in group]
        assert stream.terminal_event == events[-1] and events[-1]["type"] == "response.completed"
        assert stream.response_id == events[-1]["response"]["id"]
        assert [e["sequence_number"] for e in events] == list(range(len(events)))


async def test_whole_multi_response_file_on_one_connection_stops_at_the_first_terminal(
    fixtures_dir, serve, make_client
):
    path = fixtures_dir / "vercel-ai" / "openai-reasoning-encrypted-content.1.chunks.txt"
    groups = split_by_response(chunk_lines(path))
    server = await serve(replay_chunks(path, whole=True))
    events = await make_client(server).stream(input=USER_INPUT).collect()
    assert events == [json.loads(line) for line in groups[0]]


async def test_nested_error_event_raises_stream_error_with_the_quota_message(fixtures_dir, serve, make_client):
    path = fixtures_dir / "vercel-ai" / "openai-error.1.chunks.txt"
    lines = chunk_lines(path)
    server = await serve(replay_chunks(path))
    received = []
    with pytest.raises(ResponsesStreamError) as info:
        async for event in make_client(server).stream(input=USER_INPUT):
            received.append(event)
    err = info.value
    assert err.code == E_OPENAI_RESPONSES_STREAM_ERROR
    assert err.message == QUOTA and str(err) == QUOTA
    assert err.api_code == "insufficient_quota" and err.api_type == "insufficient_quota"
    assert err.event == json.loads(lines[2])
    assert received == [json.loads(line) for line in lines[:2]]
    assert isinstance(err, AITransportError)
    assert len(server.requests) == 1  # a stream-level error is not retried


async def test_flat_error_event_is_accepted_too(serve, make_client):
    events = build_response_events([ScriptedText("partial")], seed=1)[:4]
    events.append({"type": "error", "sequence_number": 4, "code": "server_error", "message": "boom", "param": None})
    server = await serve(lambda request: StreamReply.from_events(events))
    with pytest.raises(ResponsesStreamError) as info:
        await make_client(server).stream(input=USER_INPUT).collect()
    assert info.value.message == "boom" and info.value.api_code == "server_error"


# -- ends and breaks --------------------------------------------------------------------------------


async def test_eof_without_terminal_event_logs_a_warning_and_returns_what_arrived(
    fixtures_dir, serve, make_client, caplog
):
    path = fixtures_dir / "vercel-ai" / "azure-text.1.chunks.txt"
    lines = chunk_lines(path)
    server = await serve(replay_chunks(path, omit_terminal=True))
    caplog.set_level(logging.WARNING, logger="ai_transport.responses")
    stream = make_client(server).stream(input=USER_INPUT)
    events = await stream.collect()
    assert events == [json.loads(line) for line in lines[:-1]]
    assert stream.terminal_event is None
    warnings = [r for r in caplog.records if r.name == "ai_transport.responses" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "without a terminal event" in warnings[0].getMessage()


async def test_connection_dropped_mid_stream_raises_stream_error(fixtures_dir, serve, make_client):
    path = fixtures_dir / "vercel-ai" / "openai-issue-11239.2.chunks.txt"
    lines = chunk_lines(path)
    server = await serve(replay_chunks(path, drop_after=5, cycle=True))
    received = []
    with pytest.raises(ResponsesStreamError) as info:
        async for event in make_client(server).stream(input=USER_INPUT):
            received.append(event)
    assert info.value.code == E_OPENAI_RESPONSES_STREAM_ERROR
    assert received == [json.loads(line) for line in lines[:5]]
    assert len(server.requests) == 1  # events were yielded: no retry


async def test_drop_before_any_event_is_retried(fixtures_dir, serve, make_client):
    path = fixtures_dir / "vercel-ai" / "azure-text.1.chunks.txt"
    broken = StreamReply.from_lines(chunk_lines(path), drop_after=0)
    server = await serve(sequence(broken, replay_chunks(path)))
    events = await make_client(server).stream(input=USER_INPUT).collect()
    assert events[-1]["type"] == "response.completed"
    assert len(server.requests) == 2


async def test_failed_terminal_is_yielded_and_ends_the_stream(serve, make_client):
    events = build_response_events([], status="failed", error={"code": "server_error", "message": "x"}, seed=2)
    without_error_event = [e for e in events if e["type"] != "error"]
    server = await serve(lambda request: StreamReply.from_events(without_error_event))
    stream = make_client(server).stream(input=USER_INPUT)
    got = await stream.collect()
    assert got == without_error_event and stream.terminal_event["type"] == "response.failed"


async def test_incomplete_terminal_ends_the_stream(serve, make_client):
    events = build_response_events([ScriptedText("cut sh")], status="incomplete", seed=3)
    server = await serve(lambda request: events)
    got = await make_client(server).stream(input=USER_INPUT).collect()
    assert got == events and got[-1]["type"] == "response.incomplete"


async def test_unreachable_server_raises_connection_error_after_retries(unused_tcp_port):
    client = ResponsesClient(
        base_url=f"http://127.0.0.1:{unused_tcp_port}/v1", model="m",
        retry={"max_retries": 2, "initial_delay": 0.0, "max_delay": 0.0},
    )
    try:
        with pytest.raises(AITransportError) as info:
            await client.stream(input=USER_INPUT).collect()
    finally:
        await client.aclose()
    assert info.value.code == E_OPENAI_RESPONSES_CONNECTION_ERROR


# -- HTTP errors ------------------------------------------------------------------------------------


async def test_invalid_encrypted_content_retries_once_without_reasoning(fixtures_dir, serve, make_client, caplog):
    answer = fixtures_dir / "vercel-ai" / "openai-issue-11239.2.chunks.txt"
    server = await serve(sequence(invalid_encrypted_content(), replay_chunks(answer)))
    stream = make_client(server).stream(input=REPLAY_INPUT)
    events = await stream.collect()
    assert events == [json.loads(line) for line in chunk_lines(answer)]
    first, second = server.request_bodies()
    assert first["input"] == REPLAY_INPUT
    assert second["input"] == [
        {"role": "user", "content": "What is the code?"},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "blue-42"},
        # id-less assistant message: no status either (readers.drop_reasoning's rule)
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "blue-42", "annotations": []}]},
        {"role": "user", "content": "thanks"},
    ]
    assert {k: v for k, v in second.items() if k != "input"} == {k: v for k, v in first.items() if k != "input"}
    assert stream.dropped_reasoning and stream.requests_sent == 2
    assert REPLAY_INPUT[1]["type"] == "reasoning" and "id" in REPLAY_INPUT[2]  # caller's input untouched


async def test_invalid_encrypted_content_twice_propagates_the_second_error(serve, make_client):
    server = await serve(sequence(invalid_encrypted_content(), invalid_encrypted_content(), invalid_encrypted_content()))
    with pytest.raises(ResponsesAPIError) as info:
        await make_client(server).stream(input=REPLAY_INPUT).collect()
    assert info.value.api_code == "invalid_encrypted_content" and info.value.status_code == 400
    assert info.value.code == E_OPENAI_RESPONSES_API_ERROR
    assert len(server.requests) == 2  # exactly one retry
    assert not any(i.get("type") == "reasoning" for i in server.request_bodies()[1]["input"])


async def test_invalid_encrypted_content_without_reasoning_items_is_not_retried(serve, make_client):
    server = await serve(sequence(invalid_encrypted_content(), invalid_encrypted_content()))
    with pytest.raises(ResponsesAPIError):
        await make_client(server).stream(input=USER_INPUT).collect()
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "message",
    [
        (
            "Item 'rs_017eebd5643f46d6016a4b35df548c819b98c75bcad2f28e4e' of type 'reasoning' was provided "
            "without its required following item."
        ),
        (
            "Item 'fc_017eebd5643f46d6016a4b35e00698819b8e15db8d3200f1b8' of type 'function_call' was provided "
            "without its required 'reasoning' item: 'rs_017eebd5643f46d6016a4b35df548c819b98c75bcad2f28e4e'."
        ),
        "Item 'msg_1' of type 'message' was provided without its required 'reasoning' item: 'rs_1'.",
    ],
)
async def test_pairing_400_raises_reasoning_replay_rejected(message, serve, make_client):
    server = await serve(lambda request: ErrorReply.from_error(message, param="input"))
    with pytest.raises(ReasoningReplayRejectedError) as info:
        await make_client(server).stream(input=REPLAY_INPUT).collect()
    err = info.value
    assert err.code == E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED
    assert err.message == message and err.status_code == 400 and err.param == "input"
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in (Path(__file__).parent / "fixtures" / "openai-responses" / "errors").glob("*.json")),
)
async def test_recorded_error_bodies_raise_errors_carrying_their_exact_message(name, fixtures_dir, serve, make_client):
    path = fixtures_dir / "errors" / name
    recorded = json.loads(path.read_text())["error"]
    server = await serve(replay_error(path))
    with pytest.raises(ResponsesAPIError) as info:
        await make_client(server).stream(input=USER_INPUT).collect()
    err = info.value
    assert err.message == recorded["message"] and str(err) == recorded["message"]
    assert err.api_message == recorded["message"]
    assert (err.api_type, err.param, err.api_code) == (recorded["type"], recorded["param"], recorded["code"])
    assert err.status_code == 400 and err.code == E_OPENAI_RESPONSES_API_ERROR
    assert err.body == path.read_text()
    assert len(server.requests) == 1  # a 400 is not retried


async def test_non_json_error_body_still_carries_status_and_text(serve, make_client):
    server = await serve(lambda r: ErrorReply(403, b"forbidden by proxy", content_type="text/plain"))
    with pytest.raises(ResponsesAPIError) as info:
        await make_client(server).stream(input=USER_INPUT).collect()
    assert info.value.status_code == 403 and info.value.message == "forbidden by proxy"


async def test_500_then_success_is_retried(fixtures_dir, serve, make_client):
    path = fixtures_dir / "vercel-ai" / "azure-text.1.chunks.txt"
    failure = ErrorReply.from_error("The server had an error", type="server_error", status=500)
    server = await serve(sequence(failure, failure, replay_chunks(path)))
    stream = make_client(server, retry={"max_retries": 2}).stream(input=USER_INPUT)
    events = await stream.collect()
    assert events == [json.loads(line) for line in chunk_lines(path)]
    assert stream.requests_sent == 3 and len(server.requests) == 3
    assert server.request_bodies()[0] == server.request_bodies()[2]


async def test_retries_are_bounded_by_max_retries(serve, make_client):
    overloaded = ErrorReply.from_error("Rate limit reached", type="requests", code="rate_limit_exceeded", status=429)
    server = await serve(lambda r: overloaded)
    with pytest.raises(ResponsesAPIError) as info:
        await make_client(server, retry={"max_retries": 1}).stream(input=USER_INPUT).collect()
    assert info.value.status_code == 429 and info.value.api_code == "rate_limit_exceeded"
    assert len(server.requests) == 2


async def test_retry_after_header_is_honoured_within_max_delay(serve, make_client):
    slow = ErrorReply.from_error("busy", status=503, headers={"retry-after-ms": "0"})
    server = await serve(sequence(slow, [*build_response_events([ScriptedText("ok")], seed=4)]))
    events = await make_client(server, retry={"max_retries": 1, "max_delay": 0.0}).stream(input=USER_INPUT).collect()
    assert events[-1]["type"] == "response.completed"


# -- request body and options -----------------------------------------------------------------------


async def test_store_false_stream_true_and_full_input_in_every_request(serve, make_client):
    server = await serve(scripted(lambda body: [ScriptedText("ok")]))
    client = make_client(server, instructions="Be brief.", reasoning={"effort": "low"})
    history = list(USER_INPUT)
    for turn in range(3):
        await client.stream(input=history).collect()
        history = history + [{"role": "user", "content": f"again {turn}"}]
    bodies = server.request_bodies()
    assert [len(b["input"]) for b in bodies] == [1, 2, 3]
    for body in bodies:
        assert body["store"] is False and body["stream"] is True
        assert "previous_response_id" not in body and "background" not in body
        assert body["instructions"] == "Be brief." and body["reasoning"] == {"effort": "low"}
    headers = server.requests[0].headers
    assert headers["authorization"] == "Bearer sk-test" and headers["accept"] == "text/event-stream"


@pytest.mark.parametrize("value", [False, True, None])
async def test_store_cannot_be_set(value, serve, make_client):
    server = await serve(scripted(lambda body: [ScriptedText("ok")]))
    client = make_client(server)
    with pytest.raises(InvalidResponsesOptionsError) as info:
        client.stream(input=USER_INPUT, store=value)
    assert info.value.code == E_INVALID_OPENAI_RESPONSES_OPTIONS and "store" in info.value.message
    with pytest.raises(InvalidResponsesOptionsError):
        client.stream(input=USER_INPUT, extra_body={"store": True})
    with pytest.raises(InvalidResponsesOptionsError):
        ResponsesClient(base_url=server.base_url, store=False)
    assert server.requests == []


async def test_background_refused_before_any_request(serve, make_client):
    server = await serve(scripted(lambda body: [ScriptedText("ok")]))
    client = make_client(server)
    with pytest.raises(InvalidResponsesOptionsError) as info:
        client.stream(input=USER_INPUT, background=True)
    assert info.value.code == E_INVALID_OPENAI_RESPONSES_OPTIONS
    assert info.value.message.startswith("invalid Responses options: background:")
    assert info.value.fields == ["background"]
    with pytest.raises(InvalidResponsesOptionsError):
        client.stream(input=USER_INPUT, iteration_options={"background": True})
    with pytest.raises(InvalidResponsesOptionsError):
        client.with_options(background=True)
    assert server.requests == []  # nothing reached the server
    await client.stream(input=USER_INPUT, background=False).collect()
    assert server.request_bodies()[0]["background"] is False


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"stream": False}, "stream"),
        ({"max_output_tokens": "100"}, "max_output_tokens"),
        ({"temperature": 3}, "temperature"),
        ({"tools": {"type": "function"}}, "tools"),
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        ({"max_tokens": 5}, "max_tokens"),
        ({"headers": {"x-a": 1}}, "headers.x-a"),
        ({"retry": {"max_retries": -1}}, "retry.max_retries"),
        ({"model": None}, "model"),
    ],
)
async def test_invalid_options_refused_before_any_request_naming_the_field(options, field, serve, make_client):
    server = await serve(scripted(lambda body: [ScriptedText("ok")]))
    with pytest.raises(InvalidResponsesOptionsError) as info:
        make_client(server).stream(input=USER_INPUT, **options)
    assert field in info.value.fields and f"{field}:" in info.value.message
    assert isinstance(info.value, ValueError)
    assert server.requests == []


async def test_three_layers_reach_the_wire(serve, make_client):
    server = await serve(scripted(lambda body: [ScriptedText("ok")]))
    client = make_client(
        server, headers={"X-Tenant": "acme", "X-Trace": "default"}, reasoning={"effort": "high", "summary": "auto"},
        max_output_tokens=500, tool_choice="auto",
    )
    run = client.with_options(headers={"x-run": "r1"})
    await run.stream(
        input=USER_INPUT,
        headers={"X-Trace": "call"},
        reasoning={"effort": "low"},
        iteration_options={"headers": {"X-Iteration": "3", "x-tenant": None}, "tool_choice": "none"},
    ).collect()
    request = server.requests[0]
    body = request.json()
    assert body["reasoning"] == {"effort": "low"}  # replaced wholesale, not merged
    assert body["tool_choice"] == "none" and body["max_output_tokens"] == 500
    assert request.headers["x-trace"] == "call" and request.headers["x-run"] == "r1"
    assert request.headers["x-iteration"] == "3" and "x-tenant" not in request.headers


async def test_model_instructions_tools_none_unsets_a_default(serve, make_client):
    server = await serve(scripted(lambda body: [ScriptedText("ok")]))
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}]
    client = make_client(server, instructions="sys", tools=tools)
    await client.stream(input=USER_INPUT).collect()
    await client.stream(input=USER_INPUT, instructions=None, tools=None).collect()
    first, second = server.request_bodies()
    assert first["instructions"] == "sys" and first["tools"] == tools
    assert "instructions" not in second and "tools" not in second


async def test_extra_body_passes_unknown_parameters(serve, make_client):
    server = await serve(scripted(lambda body: [ScriptedText("ok")]))
    await make_client(server).stream(input=USER_INPUT, extra_body={"verbosity_hint": {"x": [1, 2]}}).collect()
    assert server.request_bodies()[0]["verbosity_hint"] == {"x": [1, 2]}


async def test_breaking_out_early_closes_the_stream(fixtures_dir, serve, make_client):
    path = fixtures_dir / "vercel-ai" / "openai-issue-11239.2.chunks.txt"
    server = await serve(replay_chunks(path, cycle=True))
    client = make_client(server)
    async with client.stream(input=USER_INPUT) as stream:
        async for event in stream:
            if event["type"] == "response.output_text.delta":
                break
    events = await client.stream(input=USER_INPUT).collect()  # the client is still usable
    assert events[-1]["type"] == "response.completed"


def test_drop_reasoning_items_keeps_ids_not_produced_by_reasoning():
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "n", "arguments": "{}"},
        {"type": "function_call_output", "id": "fco_1", "call_id": "c", "output": "x"},
        {"type": "function_call", "id": "fc_2", "call_id": "d", "name": "n", "arguments": "{}"},
    ]
    assert drop_reasoning_items(items) == [
        {"type": "message", "role": "assistant", "content": []},
        {"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"},
        {"type": "function_call_output", "id": "fco_1", "call_id": "c", "output": "x"},
        {"type": "function_call", "id": "fc_2", "call_id": "d", "name": "n", "arguments": "{}"},
    ]
    assert drop_reasoning_items(items[1:]) is None
    assert drop_reasoning_items("text input") is None


def test_drop_reasoning_items_is_the_readers_drop_reasoning():
    # one implementation: the client's retry input is readers.drop_reasoning's
    items = [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": []},
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {"type": "shell_call", "id": "sh_1", "call_id": "c", "action": {}},
    ]
    assert drop_reasoning_items(items) == drop_reasoning(items).input == [
        items[0],
        {"type": "message", "role": "assistant", "content": []},
        {"type": "shell_call", "call_id": "c", "action": {}},
    ]
    assert drop_reasoning_items([*items, "not an object"]) is None


async def test_x_should_retry_header_overrides_the_status_rule(serve, make_client):
    no = ErrorReply.from_error("nope", type="server_error", status=500, headers={"x-should-retry": "false"})
    server = await serve(sequence(no, [*build_response_events([ScriptedText("ok")], seed=5)]))
    with pytest.raises(ResponsesAPIError):
        await make_client(server).stream(input=USER_INPUT).collect()
    assert len(server.requests) == 1
    yes = ErrorReply.from_error("conflict", status=400, headers={"x-should-retry": "true"})
    server2 = await serve(sequence(yes, [*build_response_events([ScriptedText("ok")], seed=5)]))
    assert (await make_client(server2).stream(input=USER_INPUT).collect())[-1]["type"] == "response.completed"


async def test_malformed_frames_are_skipped_and_logged(serve, make_client, caplog):
    events = build_response_events([ScriptedText("hello there")], seed=6)
    frames = StreamReply.from_events(events).frames
    frames.insert(3, b"event: junk\ndata: {not json\n\n")
    frames.insert(5, b"data: [1, 2]\n\n")
    frames.insert(6, b": keep-alive comment\n\n")
    server = await serve(lambda request: StreamReply(frames))
    caplog.set_level(logging.WARNING, logger="ai_transport.responses")
    got = await make_client(server).stream(input=USER_INPUT).collect()
    assert got == events
    skipped = [r.getMessage() for r in caplog.records if r.name == "ai_transport.responses"]
    assert len(skipped) == 2 and all("skipping" in m for m in skipped)


async def test_json_body_instead_of_an_event_stream_is_a_stream_error(serve, make_client):
    body = json.dumps({"error": {"message": "proxy said no", "type": "proxy", "param": None, "code": None}})
    server = await serve(lambda request: ErrorReply(200, body.encode()))
    with pytest.raises(ResponsesStreamError) as info:
        await make_client(server).stream(input=USER_INPUT).collect()
    assert "proxy said no" in info.value.message and info.value.api_message == "proxy said no"


async def test_connection_is_reused_across_calls(fixtures_dir, serve, make_client):
    path = fixtures_dir / "vercel-ai" / "openai-reasoning-encrypted-content.1.chunks.txt"
    server = await serve(replay_chunks(path))
    client = make_client(server)
    for _ in range(4):
        await client.stream(input=USER_INPUT).collect()
    assert [r.connection for r in server.requests] == [1, 1, 1, 1]


async def test_terminal_event_is_recorded_even_when_the_consumer_stops_there(fixtures_dir, serve, make_client):
    path = fixtures_dir / "vercel-ai" / "azure-text.1.chunks.txt"
    server = await serve(replay_chunks(path, cycle=True))
    async with make_client(server).stream(input=USER_INPUT) as stream:
        async for event in stream:
            if event["type"] == "response.completed":
                break
    assert stream.terminal_event == json.loads(chunk_lines(path)[-1])


scripted_outputs = st.lists(
    st.one_of(
        st.builds(ScriptedText, st.text(max_size=60)),
        st.builds(ScriptedReasoning, st.lists(st.text(min_size=1, max_size=40), max_size=2)),
        st.builds(ScriptedFunctionCall, st.just("tool"), st.dictionaries(st.text(max_size=6), st.text(max_size=6))),
    ),
    max_size=4,
)


@settings(max_examples=25)
@given(outputs=scripted_outputs, chunk_size=st.integers(1, 300), seed=st.integers(0, 2**16))
def test_any_scripted_stream_arrives_unchanged_whatever_the_transfer_chunking(outputs, chunk_size, seed):
    events = build_response_events(outputs, seed=seed, obfuscation=True)

    async def run():
        server = LocalResponsesServer(lambda r: StreamReply.from_events(events, chunk_size=chunk_size))
        async with server, ResponsesClient(base_url=server.base_url, model="m") as client:
            return await client.stream(input=USER_INPUT).collect()

    assert asyncio.run(run()) == events


async def test_read_timeout_before_any_event_is_retried_then_raised_as_a_stream_error(serve, make_client):
    events = build_response_events([ScriptedText("slow")], seed=8)
    server = await serve(lambda request: StreamReply.from_events(events, delay=0.5))
    client = make_client(server, timeout=0.1, retry={"max_retries": 1})
    with pytest.raises(ResponsesStreamError) as info:
        await client.stream(input=USER_INPUT).collect()
    assert "ReadTimeout" in info.value.message and len(server.requests) == 2
