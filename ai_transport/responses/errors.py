"""Errors of the Responses client, each with a string code.

=============================================== ==================================================
Code                                            Raised when
=============================================== ==================================================
``E_INVALID_OPENAI_RESPONSES_OPTIONS``          merged options fail validation (before any request)
``E_OPENAI_RESPONSES_API_ERROR``                the API answered an HTTP error (status + its body)
``E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED`` a 400 about reasoning / output item pairing
``E_OPENAI_RESPONSES_STREAM_ERROR``             an ``error`` event, or the stream broke mid-way
``E_OPENAI_RESPONSES_CONNECTION_ERROR``         no HTTP response at all (after the retries)
=============================================== ==================================================

For API errors ``message`` is the API's own ``error.message``, verbatim.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import AITransportError, InvalidArgumentError

__all__ = [
    "E_INVALID_OPENAI_RESPONSES_OPTIONS",
    "E_OPENAI_RESPONSES_API_ERROR",
    "E_OPENAI_RESPONSES_CONNECTION_ERROR",
    "E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED",
    "E_OPENAI_RESPONSES_STREAM_ERROR",
    "InvalidResponsesOptionsError",
    "ReasoningReplayRejectedError",
    "ResponsesAPIError",
    "ResponsesConnectionError",
    "ResponsesError",
    "ResponsesStreamError",
    "api_error_from_body",
    "is_invalid_encrypted_content",
    "is_reasoning_pairing_message",
]

E_INVALID_OPENAI_RESPONSES_OPTIONS = "E_INVALID_OPENAI_RESPONSES_OPTIONS"
E_OPENAI_RESPONSES_API_ERROR = "E_OPENAI_RESPONSES_API_ERROR"
E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED = "E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED"
E_OPENAI_RESPONSES_STREAM_ERROR = "E_OPENAI_RESPONSES_STREAM_ERROR"
E_OPENAI_RESPONSES_CONNECTION_ERROR = "E_OPENAI_RESPONSES_CONNECTION_ERROR"


class ResponsesError(AITransportError):
    """Base of the Responses client's errors.

    Attributes (``None`` when not known):
        api_message: the API's ``error.message``.
        api_type: the API's ``error.type`` (``"invalid_request_error"``, ``"insufficient_quota"``…).
        param: the API's ``error.param`` (``"input[1].arguments"``).
        api_code: the API's ``error.code`` (``"missing_required_parameter"``…).
    """

    def __init__(
        self,
        message: str,
        code: str,
        status_code: int | None = None,
        *,
        api_message: str | None = None,
        api_type: str | None = None,
        param: str | None = None,
        api_code: str | None = None,
        cause: BaseException | None = None,
        **details: Any,
    ) -> None:
        AITransportError.__init__(self, message, code, status_code, cause, **details)
        self.api_message = api_message
        self.api_type = api_type
        self.param = param
        self.api_code = api_code


class InvalidResponsesOptionsError(ResponsesError, InvalidArgumentError):
    """Options rejected before any request (code ``E_INVALID_OPENAI_RESPONSES_OPTIONS``).

    ``fields`` lists the offending option paths (``["background"]``, ``["retry", "max_retries"]``).
    Also a :class:`ValueError`.
    """

    def __init__(self, message: str, fields: list[str] | None = None) -> None:
        ResponsesError.__init__(self, message, E_INVALID_OPENAI_RESPONSES_OPTIONS, 400)
        self.fields = list(fields or [])


class ResponsesAPIError(ResponsesError):
    """The API answered with an HTTP error status (code ``E_OPENAI_RESPONSES_API_ERROR``).

    ``status_code`` is the HTTP status; ``body`` the raw response body text; ``message`` the API's
    ``error.message`` verbatim (or the body / reason phrase when it is not the usual JSON shape).
    """

    def __init__(
        self,
        message: str,
        status_code: int,
        *,
        body: str = "",
        code: str = E_OPENAI_RESPONSES_API_ERROR,
        **kw: Any,
    ) -> None:
        super().__init__(message, code, status_code, **kw)
        self.body = body


class ReasoningReplayRejectedError(ResponsesAPIError):
    """A 400 about reasoning/output item pairing (code ``E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED``):
    a reasoning item sent without the item it produced right after it, or an output item sent with its
    id but without its reasoning item. Fix the replayed input (keep each reasoning item immediately
    before its output item, or drop it and strip the ids of the items that followed it)."""

    def __init__(self, message: str, status_code: int, **kw: Any) -> None:
        super().__init__(message, status_code, code=E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED, **kw)


class ResponsesStreamError(ResponsesError):
    """The stream failed after it started (code ``E_OPENAI_RESPONSES_STREAM_ERROR``): an ``error`` event
    (``event`` holds it, as sent) or a connection that broke before the stream ended."""

    def __init__(self, message: str, *, event: dict[str, Any] | None = None, **kw: Any) -> None:
        super().__init__(message, E_OPENAI_RESPONSES_STREAM_ERROR, 500, **kw)
        self.event = event


class ResponsesConnectionError(ResponsesError):
    """No HTTP response could be obtained (code ``E_OPENAI_RESPONSES_CONNECTION_ERROR``), after the
    configured retries."""

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(message, E_OPENAI_RESPONSES_CONNECTION_ERROR, 503, cause=cause)


_PAIRING = re.compile(
    r"of type 'reasoning' was provided without its required following item"
    r"|was provided without its required 'reasoning' item"
)


def is_reasoning_pairing_message(message: str | None) -> bool:
    """Whether an API error message is one of the two reasoning/output pairing rejections."""
    return bool(message) and _PAIRING.search(message or "") is not None


def is_invalid_encrypted_content(api_code: str | None, body: str) -> bool:
    """Whether an error body says the replayed ``encrypted_content`` could not be verified."""
    return api_code == "invalid_encrypted_content" or "invalid_encrypted_content" in body


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


def api_error_from_body(status: int, body: str, reason: str = "") -> ResponsesAPIError:
    """Build the error for an HTTP error response: reads ``{"error": {message, type, param, code}}``
    (also a flat ``{message, …}``) and picks :class:`ReasoningReplayRejectedError` for pairing 400s."""
    info: dict[str, Any] = {}
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        inner = parsed.get("error")
        if isinstance(inner, dict):
            info = inner
        elif isinstance(inner, str):
            info = {"message": inner}
        elif "message" in parsed:
            info = parsed
    api_message = _str_or_none(info.get("message"))
    message = api_message or (body.strip() if body.strip() else f"HTTP {status} {reason}".strip())
    kw: dict[str, Any] = {
        "body": body,
        "api_message": api_message,
        "api_type": _str_or_none(info.get("type")),
        "param": _str_or_none(info.get("param")),
        "api_code": _str_or_none(info.get("code")),
    }
    if status == 400 and is_reasoning_pairing_message(api_message):
        return ReasoningReplayRejectedError(message, status, **kw)
    return ResponsesAPIError(message, status, **kw)
