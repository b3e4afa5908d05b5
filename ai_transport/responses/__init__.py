"""Stateless streaming client of the OpenAI Responses API, and a loopback server that speaks its wire.

* :class:`ResponsesClient` — ``client.stream(model=…, input=[…])`` yields the API's events as plain
  dicts (SSE over httpx; ``store: false`` always; the full input every call). See
  :mod:`ai_transport.responses.client`.
* Options and their three layers (client defaults, per call, per iteration):
  :mod:`ai_transport.responses.options`.
* Errors, each with a string code: :mod:`ai_transport.responses.errors`.
* :class:`SSEDecoder` — a sans-I/O server-sent-events decoder: :mod:`ai_transport.responses.sse`.
* :class:`LocalResponsesServer` — an offline "model" on loopback that replays recorded streams and
  error bodies or answers with scripted events: :mod:`ai_transport.responses.local_server`.
"""

from .client import NOT_GIVEN, TERMINAL_EVENT_TYPES, ResponsesClient, ResponsesStream, drop_reasoning_items
from .errors import (
    E_INVALID_OPENAI_RESPONSES_OPTIONS,
    E_OPENAI_RESPONSES_API_ERROR,
    E_OPENAI_RESPONSES_CONNECTION_ERROR,
    E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED,
    E_OPENAI_RESPONSES_STREAM_ERROR,
    InvalidResponsesOptionsError,
    ReasoningReplayRejectedError,
    ResponsesAPIError,
    ResponsesConnectionError,
    ResponsesError,
    ResponsesStreamError,
)
from .local_server import (
    BadRequest,
    ErrorReply,
    LocalResponsesServer,
    RecordedRequest,
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
from .options import ResponsesOptions, RetrySettings, merge_options, resolve_options
from .sse import ServerSentEvent, SSEDecoder, encode_event

__all__ = [
    "E_INVALID_OPENAI_RESPONSES_OPTIONS",
    "E_OPENAI_RESPONSES_API_ERROR",
    "E_OPENAI_RESPONSES_CONNECTION_ERROR",
    "E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED",
    "E_OPENAI_RESPONSES_STREAM_ERROR",
    "NOT_GIVEN",
    "TERMINAL_EVENT_TYPES",
    "BadRequest",
    "ErrorReply",
    "InvalidResponsesOptionsError",
    "LocalResponsesServer",
    "ReasoningReplayRejectedError",
    "RecordedRequest",
    "ResponsesAPIError",
    "ResponsesClient",
    "ResponsesConnectionError",
    "ResponsesError",
    "ResponsesOptions",
    "ResponsesStream",
    "ResponsesStreamError",
    "RetrySettings",
    "SSEDecoder",
    "ScriptedFunctionCall",
    "ScriptedReasoning",
    "ScriptedText",
    "ServerSentEvent",
    "StreamReply",
    "build_response_events",
    "drop_reasoning_items",
    "encode_event",
    "merge_options",
    "replay_chunks",
    "replay_error",
    "resolve_options",
    "scripted",
    "sequence",
]
