"""A stateless, streaming client for ``POST /v1/responses`` (SSE over httpx; no ``openai`` SDK).

>>> client = ResponsesClient(model="gpt-5.1", reasoning={"effort": "low"})     # doctest: +SKIP
>>> async for event in client.stream(input=[{"role": "user", "content": "hi"}]):  # doctest: +SKIP
...     print(event["type"])

Every call sends ``store: false``, ``stream: true`` and the full ``input`` (no
``previous_response_id``). Events come out as plain dicts, exactly the JSON the API sent. The stream
ends after ``response.completed`` / ``response.incomplete`` / ``response.failed`` (yielded first);
there is no ``[DONE]``. If the body ends without a terminal event the client logs a warning and ends
with what arrived. An ``error`` event (nested ``{"type": "error", "error": {…}}`` on the real wire, or
flat) or a connection that breaks mid-stream raises :class:`ResponsesStreamError`.

Recovery, all before the first event is yielded:

* HTTP 408/409/429/5xx and connection failures are retried with backoff (``retry`` option);
* a 400 saying ``invalid_encrypted_content`` (reasoning blobs the server can no longer verify) is
  retried exactly once with every ``reasoning`` item dropped from the input — and the ``id`` of the
  output items that followed each dropped item stripped, since an id-carrying output item requires its
  reasoning item (``ResponsesStream.dropped_reasoning`` tells the caller);
* a 400 about reasoning/output pairing raises :class:`ReasoningReplayRejectedError`; other HTTP
  errors raise :class:`ResponsesAPIError` with the API's ``message``/``type``/``param``/``code``.

Options and their three layers: see :mod:`ai_transport.responses.options`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx

from ..readers.reasoning_sweep import drop_reasoning
from .errors import (
    InvalidResponsesOptionsError,
    ResponsesConnectionError,
    ResponsesStreamError,
    api_error_from_body,
    is_invalid_encrypted_content,
)
from .options import ResponsesOptions, _merge_headers, merge_options, resolve_options
from .sse import ServerSentEvent, SSEDecoder

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "DEFAULT_BASE_URL",
    "NOT_GIVEN",
    "TERMINAL_EVENT_TYPES",
    "ResponsesClient",
    "ResponsesStream",
    "drop_reasoning_items",
]

logger = logging.getLogger("ai_transport.responses")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Event types that end a response stream.
TERMINAL_EVENT_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed"})
_RETRY_STATUSES = frozenset({408, 409, 429})
_DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=60.0)
_USER_AGENT = "ai-transport-python"


class _NotGiven:
    """Sentinel: the argument was not passed (``None`` means "unset this option")."""

    _instance: Any = None

    def __new__(cls) -> Self:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        instance: Self = cls._instance
        return instance

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False


#: Default of the named ``stream()`` arguments: "not passed" (distinct from ``None``).
NOT_GIVEN: Any = _NotGiven()


def drop_reasoning_items(input: Any) -> list[Any] | None:
    """``input`` without its ``reasoning`` items, and without the ``id`` of the output items that
    pointed at a dropped one; ``None`` if there was no reasoning item to drop (or ``input`` is not a
    list of objects). The given list and items are not modified.

    The input :func:`~ai_transport.readers.drop_reasoning` returns (one implementation): every
    output item a dropped reasoning item produced — the one right after it and the rest of its
    response, e.g. parallel calls — loses its ``id`` (an assistant message its ``status`` too), and
    server-side tool items it produced (``web_search_call``, …) are dropped.
    """
    if not isinstance(input, list) or not any(
        isinstance(item, dict) and item.get("type") == "reasoning" for item in input
    ):
        return None
    if not all(isinstance(item, Mapping) for item in input):
        return None
    return drop_reasoning(input).input


def _should_retry(response: httpx.Response) -> bool:
    """408/409/429/5xx are retried; the API's ``x-should-retry: true|false`` header overrides."""
    hint = str(response.headers.get("x-should-retry", "")).lower()
    if hint in ("true", "false"):
        return hint == "true"
    return bool(response.status_code in _RETRY_STATUSES or response.status_code >= 500)


def _retry_after(response: httpx.Response) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = response.headers.get(name)
        if value:
            try:
                return float(value) * scale
            except ValueError:
                continue
    return None


class ResponsesStream:
    """One streamed response: an async iterator of event dicts and an async context manager.

    Attributes:
        request_body: the body of the first request (``store: false``, ``stream: true``, full input).
        last_request_body: the body actually sent last (differs after the reasoning-dropping retry).
        options: the validated merged options of this call.
        requests_sent: HTTP requests made so far (retries included).
        dropped_reasoning: whether the input's reasoning items were dropped after
            ``invalid_encrypted_content``.
        terminal_event: the terminal event, once seen (``None`` after EOF without one).
        response_id: the ``response.id`` announced by ``response.created``, once seen.
    """

    def __init__(self, client: ResponsesClient, options: ResponsesOptions, body: dict[str, Any]) -> None:
        self._client = client
        self.options = options
        self.request_body = body
        self.last_request_body = body
        self.requests_sent = 0
        self.dropped_reasoning = False
        self.terminal_event: dict[str, Any] | None = None
        self.response_id: str | None = None
        self._gen: AsyncIterator[dict[str, Any]] | None = None

    def __aiter__(self) -> ResponsesStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._gen is None:
            self._gen = self._run()
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        """Stop the stream and release the connection (safe to call at any time)."""
        gen = self._gen
        if gen is not None:
            await gen.aclose()  # type: ignore[attr-defined]

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def collect(self) -> list[dict[str, Any]]:
        """Read the whole stream into a list."""
        return [event async for event in self]

    # -- the request loop --------------------------------------------------------------------------

    async def _run(self) -> AsyncIterator[dict[str, Any]]:
        client = self._client
        options = self.options
        retry = options.effective_retry()
        url = f"{client.base_url}/responses"
        headers = client._request_headers(options)
        timeout = httpx.Timeout(options.timeout) if options.timeout else _DEFAULT_TIMEOUT
        http = client._http_client()
        body = self.request_body
        retries = 0
        while True:
            self.requests_sent += 1
            self.last_request_body = body
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            started = False
            yielded = False
            try:
                async with http.stream("POST", url, content=content, headers=headers, timeout=timeout) as resp:
                    if resp.status_code >= 300:
                        text = (await resp.aread()).decode("utf-8", "replace")
                        error = api_error_from_body(resp.status_code, text, resp.reason_phrase)
                        if (
                            resp.status_code == 400
                            and not self.dropped_reasoning
                            and is_invalid_encrypted_content(error.api_code, text)
                        ):
                            stripped = drop_reasoning_items(body.get("input"))
                            if stripped is not None:
                                logger.warning(
                                    "Responses API rejected the replayed reasoning (%s); retrying once "
                                    "without the %d reasoning item(s)",
                                    error.message,
                                    len(body["input"]) - len(stripped),
                                )
                                self.dropped_reasoning = True
                                body = {**body, "input": stripped}
                                continue
                        if _should_retry(resp) and retries < retry.max_retries:
                            delay = retry.delay(retries, _retry_after(resp))
                            retries += 1
                            logger.info(
                                "Responses API answered HTTP %d; retry %d/%d in %.2fs",
                                resp.status_code,
                                retries,
                                retry.max_retries,
                                delay,
                            )
                            await asyncio.sleep(delay)
                            continue
                        if self.dropped_reasoning:
                            error.details["dropped_reasoning"] = True
                        raise error
                    started = True
                    content_type = resp.headers.get("content-type", "")
                    if content_type.startswith("application/json"):
                        text = (await resp.aread()).decode("utf-8", "replace")
                        err = api_error_from_body(resp.status_code, text)
                        raise ResponsesStreamError(
                            f"expected an event stream, got JSON: {err.message}",
                            api_message=err.api_message,
                            api_type=err.api_type,
                            param=err.param,
                            api_code=err.api_code,
                        )
                    decoder = SSEDecoder()
                    chunks = resp.aiter_bytes()
                    async for chunk in chunks:
                        for sse in decoder.feed(chunk):
                            event = _event_dict(sse)
                            if event is None:
                                continue
                            kind = event.get("type")
                            if kind == "error":
                                raise _stream_error(event)
                            yielded = True
                            if kind == "response.created" and isinstance(event.get("response"), dict):
                                self.response_id = event["response"].get("id")
                            terminal = kind in TERMINAL_EVENT_TYPES
                            if terminal:
                                self.terminal_event = event
                            yield event
                            if terminal:
                                await _drain(chunks)
                                return
                    decoder.close()
                    logger.warning(
                        "Responses stream ended without a terminal event (response.completed / "
                        "response.incomplete / response.failed); ending with what arrived"
                    )
                    return
            except httpx.TransportError as exc:
                if not yielded and retries < retry.max_retries:
                    delay = retry.delay(retries)
                    retries += 1
                    logger.info(
                        "Responses request failed (%s: %s); retry %d/%d in %.2fs",
                        type(exc).__name__,
                        exc,
                        retries,
                        retry.max_retries,
                        delay,
                    )
                    await asyncio.sleep(delay)
                    continue
                if started:
                    raise ResponsesStreamError(
                        f"the Responses stream broke before a terminal event: {type(exc).__name__}: {exc}",
                        cause=exc,
                    ) from exc
                raise ResponsesConnectionError(
                    f"could not reach the Responses API at {url}: {type(exc).__name__}: {exc}", cause=exc
                ) from exc


async def _drain(chunks: AsyncIterator[bytes], limit: int = 65536, timeout: float = 1.0) -> None:
    """Read what follows a terminal event (normally just the end of the body), briefly and boundedly,
    so the connection goes back to the pool instead of being closed."""

    async def read() -> None:
        total = 0
        async for chunk in chunks:
            total += len(chunk)
            if total > limit:
                return

    with contextlib.suppress(asyncio.TimeoutError, httpx.HTTPError):
        await asyncio.wait_for(read(), timeout)


def _event_dict(sse: ServerSentEvent) -> dict[str, Any] | None:
    try:
        event = json.loads(sse.data)
    except ValueError:
        logger.warning("skipping an SSE frame whose data is not JSON: %.200r", sse.data)
        return None
    if not isinstance(event, dict):
        logger.warning("skipping an SSE frame whose data is not a JSON object: %.200r", sse.data)
        return None
    return event


def _stream_error(event: dict[str, Any]) -> ResponsesStreamError:
    nested = event.get("error")
    info = nested if isinstance(nested, dict) else event

    def text(key: str) -> str | None:
        value = info.get(key)
        if value is None and info is not event:
            value = event.get(key)
        return None if value is None else (value if isinstance(value, str) else json.dumps(value))

    api_message = text("message")
    api_code = text("code")
    message = api_message or f"the Responses stream sent an error event ({api_code or 'no message'})"
    return ResponsesStreamError(
        message,
        event=event,
        api_message=api_message,
        api_type=text("type") if info is not event else None,
        param=text("param"),
        api_code=api_code,
    )


class ResponsesClient:
    """Stateless streaming client of the OpenAI Responses API.

    Args:
        api_key: bearer token; defaults to ``$OPENAI_API_KEY`` (no ``Authorization`` header if neither).
        base_url: API root; defaults to ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``.
        organization / project: sent as ``OpenAI-Organization`` / ``OpenAI-Project`` when given.
        http_client: an ``httpx.AsyncClient`` to use (not closed by :meth:`aclose`); one is created
            lazily otherwise.
        **defaults: option defaults (layer 1), validated now: any :class:`ResponsesOptions` field.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        organization: str | None = None,
        project: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        **defaults: Any,
    ) -> None:
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.organization = organization
        self.project = project
        self._defaults = merge_options(defaults)
        resolve_options(self._defaults)  # fail at construction on bad defaults
        self._http = http_client
        self._owns_http = http_client is None
        self._parent: ResponsesClient | None = None

    @property
    def defaults(self) -> dict[str, Any]:
        """The client's option defaults (layer 1), as a copy."""
        return dict(self._defaults)

    def with_options(self, **defaults: Any) -> ResponsesClient:
        """A client with ``defaults`` merged over this one's (same rules as the layers); it shares this
        client's connection pool, and closing it closes nothing."""
        merged = merge_options(self._defaults, defaults)
        resolve_options(merged)
        child = ResponsesClient.__new__(ResponsesClient)
        child.api_key = self.api_key
        child.base_url = self.base_url
        child.organization = self.organization
        child.project = self.project
        child._defaults = merged
        child._http = self._http
        child._owns_http = False
        child._parent = self._parent or self
        return child

    def resolve_options(
        self,
        options: Mapping[str, Any] | ResponsesOptions | None = None,
        iteration_options: Mapping[str, Any] | ResponsesOptions | None = None,
    ) -> ResponsesOptions:
        """Merge defaults, per-call ``options`` and ``iteration_options`` and validate the result."""
        return resolve_options(self._defaults, options, iteration_options)

    def stream(
        self,
        model: Any = NOT_GIVEN,
        input: Any = NOT_GIVEN,
        instructions: Any = NOT_GIVEN,
        tools: Any = NOT_GIVEN,
        *,
        iteration_options: Mapping[str, Any] | ResponsesOptions | None = None,
        **options: Any,
    ) -> ResponsesStream:
        """Start streaming one response; iterate the result for the event dicts.

        ``model``, ``instructions``, ``tools`` and ``**options`` form the per-call layer (an argument not
        passed inherits; ``None`` unsets); ``iteration_options`` the per-iteration layer on top. The
        merged options are validated here, before any request:
        :class:`InvalidResponsesOptionsError` (``E_INVALID_OPENAI_RESPONSES_OPTIONS``) names the field.
        ``input`` (a list of input items, or a string) is sent whole every time.
        """
        if input is NOT_GIVEN:
            raise InvalidResponsesOptionsError("input: required (a list of input items or a string)", ["input"])
        if not isinstance(input, (list, str)):
            raise InvalidResponsesOptionsError(
                f"input: expected a list of input items or a string, got {type(input).__name__}", ["input"]
            )
        if isinstance(input, list):
            for index, item in enumerate(input):
                if not isinstance(item, dict):
                    raise InvalidResponsesOptionsError(
                        f"input[{index}]: expected an item object, got {type(item).__name__}", [f"input[{index}]"]
                    )
        call: dict[str, Any] = {}
        for name, value in (("model", model), ("instructions", instructions), ("tools", tools)):
            if value is not NOT_GIVEN:
                call[name] = value
        call.update(options)
        resolved = self.resolve_options(call, iteration_options)
        body = resolved.request_body(list(input) if isinstance(input, list) else input)
        return ResponsesStream(self, resolved, body)

    # -- HTTP --------------------------------------------------------------------------------------

    def _request_headers(self, options: ResponsesOptions) -> dict[str, str]:
        headers: dict[str, Any] = {
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
            "User-Agent": _USER_AGENT,
        }
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if self.organization:
            headers["OpenAI-Organization"] = self.organization
        if self.project:
            headers["OpenAI-Project"] = self.project
        headers = _merge_headers(headers, options.headers or {})
        return {k: v for k, v in headers.items() if v is not None}

    def _http_client(self) -> httpx.AsyncClient:
        owner = self._parent or self
        if owner._http is None:
            owner._http = httpx.AsyncClient(timeout=_DEFAULT_TIMEOUT)
            owner._owns_http = True
        self._http = owner._http
        return owner._http

    async def aclose(self) -> None:
        """Close the connection pool this client created (derived clients close nothing)."""
        if self._parent is None and self._owns_http and self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
