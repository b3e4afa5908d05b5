"""Errors raised by ai_transport.

Every error carries a ``code`` (the numeric Ably / @ably/ai-transport code where one exists, e.g.
``40003``, or a string code such as ``"E_OPENAI_RESPONSES_STREAM_ERROR"`` for the Responses client),
a ``status_code`` (HTTP-like) and a human ``message`` that names the offending field or event.

Bad arguments raise subclasses that are *also* the matching builtin (:class:`InvalidArgumentError`
is a :class:`ValueError`, :class:`InvalidTypeError` is a :class:`TypeError`), so plain
``except ValueError`` keeps working.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ErrorCode(IntEnum):
    """Numeric error codes shared with ``@ably/ai-transport@0.8.0`` (``ErrorCode`` there)."""

    BAD_REQUEST = 40000
    INVALID_ARGUMENT = 40003
    OPERATION_CANCELLED = 40033
    INSUFFICIENT_CAPABILITY = 40160
    INTERNAL_ERROR = 50000
    ENCODER_RECOVERY_FAILED = 104000
    SESSION_SUBSCRIPTION_ERROR = 104001
    CANCEL_LISTENER_ERROR = 104002
    RUN_LIFECYCLE_ERROR = 104003
    SESSION_CLOSED = 104004
    SESSION_SEND_FAILED = 104005
    CHANNEL_CONTINUITY_LOST = 104006
    CHANNEL_NOT_READY = 104007
    STREAM_ERROR = 104008
    INPUT_EVENT_NOT_FOUND = 104010
    HISTORY_FETCH_FAILED = 104011
    #: ai_transport's own (not in 0.8.0): an agent message folded from history failed its integrity
    #: check (untrusted last mutator, or a missing / wrong ``signing_key`` tag).
    #: ai_transport's own: a worker's lease on a claim lapsed and another worker took over; the worker
    #: publishes nothing more for that call or run (fencing).
    LEASE_LOST = 104020
    #: ai_transport's own: the supervisor ended an active run whose worker's lease lapsed or whose
    #: connection left presence.
    WORKER_LOST = 104021
    TAMPERED_OUTPUT = 104090


def status_for_code(code: int | str) -> int:
    """HTTP-like status for an error code: ``code // 100`` for 5-digit codes, else 500 (as 0.8.0)."""
    if isinstance(code, int) and 10000 <= code <= 99999:
        return code // 100
    return 500


class AITransportError(Exception):
    """Base class of every error this library raises.

    Attributes:
        code: numeric Ably-style code (``40003``) or a string code (``"E_…"``).
        status_code: HTTP-like status (``400`` for ``40003``).
        message: the human-readable message (also ``str(err)``).
        cause: the underlying exception, if any.
    """

    def __init__(
        self,
        message: str,
        code: int | str = ErrorCode.INTERNAL_ERROR,
        status_code: int | None = None,
        cause: BaseException | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code: int | str = int(code) if isinstance(code, IntEnum) else code
        self.status_code = status_code if status_code is not None else status_for_code(self.code)
        self.cause = cause
        self.details = details
        if cause is not None:
            self.__cause__ = cause

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status_code={self.status_code}, message={self.message!r})"

    def to_dict(self) -> dict[str, Any]:
        """The Ably ``ErrorInfo`` JSON shape: ``{"code", "statusCode", "message"}``."""
        return {"code": self.code, "statusCode": self.status_code, "message": self.message}


class InvalidArgumentError(AITransportError, ValueError):
    """A value is wrong (code 40003 by default). Also a :class:`ValueError`."""

    def __init__(self, message: str, code: int | str = ErrorCode.INVALID_ARGUMENT, **kw: Any) -> None:
        super().__init__(message, code, **kw)


class InvalidTypeError(AITransportError, TypeError):
    """A value has the wrong type or shape (code 40003 by default). Also a :class:`TypeError`."""

    def __init__(self, message: str, code: int | str = ErrorCode.INVALID_ARGUMENT, **kw: Any) -> None:
        super().__init__(message, code, **kw)


def type_name(value: object) -> str:
    """Short JSON-ish name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def quoted(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an untrusted value in a log line or a
    reason (never raises: an integer of more digits than ``int`` prints shows as its type). A
    ``repr`` escapes newlines, control characters and lone surrogates, so what a member publishes
    can neither forge a log line nor fail a handler that encodes UTF-8."""
    try:
        text = repr(value)
    except Exception:
        return type_name(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(text: str, limit: int = 500) -> str:
    """``text`` as one printable line of at most ``limit`` characters: a text built from untrusted
    parts (a reason quoting a wire's values, an error message a wire carries) escaped the way
    ``repr`` escapes (``\\n``, ``\\x1b``, ``\\ud800``), and cut. Printable text passes unchanged."""
    if not text.isprintable():
        text = repr(text)[1:-1]
    return text if len(text) <= limit else text[: limit - 3] + "..."
