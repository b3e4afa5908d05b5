"""Options of the Responses client: validation (pydantic) and the three-layer merge.

Layers, lowest first:

1. **client defaults** — keyword arguments of ``ResponsesClient(...)`` (or ``client.with_options(...)``,
   which derives a client with more defaults);
2. **per-call** — keyword arguments of ``client.stream(...)`` (``model``, ``instructions``, ``tools``
   and any other option): what one agent run passes on every model call;
3. **per-iteration** — ``client.stream(..., iteration_options={...})``: what differs for one
   iteration of the run's tool loop (``tool_choice="none"`` on the last one, a bigger
   ``max_output_tokens`` after an ``incomplete`` answer…).

Merge rule (:func:`merge_options`): ``headers`` and ``retry`` merge key by key (a later layer's key
wins; header names compare case-insensitively; a header set to ``None`` removes it; ``headers=None``
or ``retry=None`` drops everything inherited). Every other option is replaced wholesale by the last
layer that sets it (``reasoning={"effort": "low"}`` replaces the whole ``reasoning`` object; an
explicit ``None`` unsets it). The merged result is validated (:class:`ResponsesOptions`) on every
call, before any request.

Request body: every API option that is not ``None``, then ``extra_body`` (parameters this client does
not model), then ``input``, ``store: false`` and ``stream: true``. ``store``, ``stream=False``,
``background=True``, ``previous_response_id`` and ``conversation`` are refused: the client is
stateless and streams; it resends the full input on every call.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import type_name
from .errors import InvalidResponsesOptionsError

__all__ = [
    "CLIENT_ONLY_OPTIONS",
    "KEY_BY_KEY_OPTIONS",
    "ResponsesOptions",
    "RetrySettings",
    "merge_options",
    "resolve_options",
]

#: Options merged key by key across layers; every other option is replaced wholesale.
KEY_BY_KEY_OPTIONS = ("headers", "retry")
#: Options that configure the client and are never sent in the request body.
CLIENT_ONLY_OPTIONS = ("headers", "retry", "timeout", "extra_body")
_REFUSED_BODY_KEYS = ("store", "stream", "background", "previous_response_id", "conversation", "input")


class RetrySettings(BaseModel):
    """Retries of a request that failed before any event was yielded (HTTP 408/409/429/5xx, or no
    connection). Delay of retry ``n`` (0-based): ``min(max_delay, initial_delay * multiplier**n)``,
    randomised by ``±jitter`` (a fraction), or the server's ``Retry-After`` (capped at ``max_delay``)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    max_retries: int = Field(default=2, ge=0, le=50, description="Retries after the first attempt.")
    initial_delay: float = Field(default=0.5, ge=0, description="Delay before the first retry, seconds.")
    max_delay: float = Field(default=8.0, ge=0, description="Upper bound of any delay, seconds.")
    multiplier: float = Field(default=2.0, ge=1, description="Backoff factor between retries.")
    jitter: float = Field(default=0.2, ge=0, le=1, description="Random spread, as a fraction of the delay.")

    def delay(self, retry: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first retry)."""
        if retry_after is not None and retry_after >= 0:
            return min(self.max_delay, retry_after)
        base = min(self.max_delay, self.initial_delay * (self.multiplier**retry))
        if self.jitter:
            spread = base * self.jitter
            base += (rng or random).uniform(-spread, spread)
        return max(0.0, min(self.max_delay, base))


class ResponsesOptions(BaseModel):
    """Validated options of one ``POST /v1/responses`` call (all optional; ``model`` is required by the
    time a request is built). API parameters keep their API names and are sent as given (nested
    objects such as ``reasoning``, ``text`` or ``tools`` pass through losslessly). Unknown names are
    refused so typos fail early; send parameters this class does not model with ``extra_body``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    # -- API parameters --------------------------------------------------------------------------
    model: str | None = None
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    reasoning: dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    include: list[str] | None = None
    metadata: dict[str, str] | None = None
    prompt: dict[str, Any] | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    stream_options: dict[str, Any] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None
    background: bool | None = None
    stream: bool | None = None
    store: Any = None
    previous_response_id: Any = None
    conversation: Any = None
    # -- client settings (never sent as body fields) -----------------------------------------------
    headers: dict[str, str | None] | None = None
    retry: RetrySettings | None = None
    timeout: float | None = Field(default=None, gt=0, description="Seconds; connect and read timeout.")
    extra_body: dict[str, Any] | None = None

    @field_validator("background")
    @classmethod
    def _no_background(cls, value: bool | None) -> bool | None:
        if value:
            raise ValueError(
                "background mode (true) is not supported: this client streams each answer and resends "
                "the full input; omit background or set it to false"
            )
        return value

    @field_validator("stream")
    @classmethod
    def _always_stream(cls, value: bool | None) -> bool | None:
        if value is False:
            raise ValueError("the client always streams; stream=false is not supported")
        return value

    @field_validator("store")
    @classmethod
    def _no_store(cls, value: Any) -> Any:
        raise ValueError("store is always false (the client is stateless) and cannot be set")

    @field_validator("previous_response_id", "conversation")
    @classmethod
    def _stateless(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("the client is stateless (store: false) and resends the full input; it cannot be set")
        return value

    @field_validator("extra_body")
    @classmethod
    def _extra_body_keys(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value:
            bad = [k for k in value if k in _REFUSED_BODY_KEYS]
            if bad:
                raise ValueError(f"must not set {', '.join(repr(k) for k in bad)} (set by the client)")
        return value

    def request_body(self, input: Any) -> dict[str, Any]:
        """The JSON body of the request for ``input`` (``InvalidResponsesOptionsError`` if no model)."""
        if not self.model:
            raise InvalidResponsesOptionsError("model: required (set it on the client or the call)", ["model"])
        body: dict[str, Any] = {}
        for name in type(self).model_fields:
            if name in CLIENT_ONLY_OPTIONS or name in ("store", "stream", "previous_response_id", "conversation"):
                continue
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.extra_body:
            body.update(self.extra_body)
        body["input"] = input
        body["store"] = False
        body["stream"] = True
        return body

    def effective_headers(self) -> dict[str, str]:
        """Merged headers with removed (``None``) entries dropped."""
        return {k: v for k, v in (self.headers or {}).items() if v is not None}

    def effective_retry(self) -> RetrySettings:
        """The retry settings in force (defaults where unset)."""
        return self.retry or RetrySettings()


def _layer_dict(layer: Mapping[str, Any] | ResponsesOptions | None) -> dict[str, Any]:
    if layer is None:
        return {}
    if isinstance(layer, ResponsesOptions):
        out = {name: getattr(layer, name) for name in layer.model_fields_set}
        if isinstance(out.get("retry"), RetrySettings):
            out["retry"] = {n: getattr(out["retry"], n) for n in out["retry"].model_fields_set}
        return out
    if not isinstance(layer, Mapping):
        raise InvalidResponsesOptionsError(f"options: expected a mapping of options, got {type_name(layer)}")
    return dict(layer)


def _merge_headers(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(key, str):
            for existing in [k for k in out if isinstance(k, str) and k.lower() == key.lower()]:
                del out[existing]
        out[key] = value
    return out


def merge_options(*layers: Mapping[str, Any] | ResponsesOptions | None) -> dict[str, Any]:
    """Merge option layers (lowest first) into one plain dict, without validating values.

    ``headers`` and ``retry`` merge key by key (header names case-insensitively); everything else is
    replaced wholesale. A ``RetrySettings`` value counts only its explicitly set fields.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in _layer_dict(layer).items():
            if key in KEY_BY_KEY_OPTIONS and value is not None:
                if isinstance(value, RetrySettings):
                    value = {n: getattr(value, n) for n in value.model_fields_set}
                if not isinstance(value, Mapping):
                    raise InvalidResponsesOptionsError(
                        f"{key}: expected an object, got {type_name(value)}", [key]
                    )
                base = merged.get(key)
                base = dict(base) if isinstance(base, Mapping) else {}
                merged[key] = _merge_headers(base, value) if key == "headers" else {**base, **value}
            else:
                merged[key] = value
    return merged


_SCHEMA_TAGS = ("str", "int", "float", "bool", "none", "dict[", "list[", "literal[", "function-", "model[")


def _is_schema_tag(part: Any) -> bool:
    return isinstance(part, str) and (part in _SCHEMA_TAGS or part.startswith(_SCHEMA_TAGS[4:]))


def _describe(errors: list[Any]) -> list[tuple[str, str]]:
    """``(field path, message)`` per offending field; union alternatives are folded into one entry."""
    out: dict[str, list[str]] = {}
    for error in errors:
        parts = [str(p) for p in error.get("loc", ()) if not _is_schema_tag(p)]
        loc = ".".join(parts) or "options"
        kind = str(error.get("type", ""))
        msg = str(error.get("msg", "invalid value"))
        if kind == "extra_forbidden":
            msg = (
                "unknown option (send API parameters this client does not model with extra_body)"
                if len(parts) == 1
                else "unknown setting"
            )
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        elif kind.endswith("_type") and "input" in error:
            msg = f"{msg} (got {type_name(error['input'])})"
        msgs = out.setdefault(loc, [])
        if msg not in msgs:
            msgs.append(msg)
    return [(loc, " or ".join(msgs)) for loc, msgs in out.items()]


def resolve_options(*layers: Mapping[str, Any] | ResponsesOptions | None) -> ResponsesOptions:
    """Merge the layers (:func:`merge_options`) and validate the result.

    Raises :class:`InvalidResponsesOptionsError` (``E_INVALID_OPENAI_RESPONSES_OPTIONS``) naming every
    offending field.
    """
    merged = merge_options(*layers)
    try:
        return ResponsesOptions.model_validate(merged)
    except ValidationError as exc:
        described = _describe(list(exc.errors()))
        message = "invalid Responses options: " + "; ".join(f"{loc}: {msg}" for loc, msg in described)
        raise InvalidResponsesOptionsError(message, [loc for loc, _ in described]) from None
