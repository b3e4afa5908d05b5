"""The emulator's command-line options: one definition behind ``python -m ai_transport.emulator`` and
``ai-transport emulator`` (same flags, defaults and help).

:func:`add_emulator_arguments` adds them to a parser; :func:`options_from_args` checks every value
and returns :class:`EmulatorOptions`, or raises :class:`OptionError` whose message is one line
naming the flag (each command prints it and exits non-zero, never a traceback). Values are parsed
here rather than by argparse ``type=`` so that a bad one is that one line, not a usage dump.
"""

from __future__ import annotations

import argparse
import math
import urllib.parse
from dataclasses import dataclass, field, replace
from typing import Any

from .auth import DEFAULT_KEY
from .limits import APPEND_ROLLUP_WINDOWS, DEFAULT_APPEND_ROLLUP_WINDOW, RateLimits

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DESCRIPTION",
    "EmulatorOptions",
    "OptionError",
    "add_emulator_arguments",
    "add_rate_limit_arguments",
    "options_from_args",
    "rate_limits_from_args",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8090
DEFAULT_MAX_MESSAGE_SIZE = 65536

#: The description both commands show in ``--help``.
DESCRIPTION = (
    "Start the local Ably-compatible emulator (WebSocket + REST on one port, in memory) and print how "
    "to connect ably-python and ably-js to it. Runs until interrupted (Ctrl-C)."
)


class OptionError(ValueError):
    """A bad option value; the message is one line naming the flag."""


@dataclass(frozen=True)
class EmulatorOptions:
    """What the options ask for (checked)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    keys: list[str] | None = None
    strict_tokens: bool = False
    dev_tokens_on_any_host: bool = False
    allowed_origins: list[str] = field(default_factory=list)
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_idle_interval: int = 0
    echo_before_ack: bool = False
    rate_limits: RateLimits | None = None
    sandbox: bool = False
    verbose: bool = False

    def emulator_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~ai_transport.emulator.server.Emulator` (host and port aside)."""
        return {
            "keys": self.keys,
            "strict_tokens": self.strict_tokens,
            "dev_tokens_on_any_host": self.dev_tokens_on_any_host,
            "allowed_origins": self.allowed_origins,
            "max_message_size": self.max_message_size,
            "max_idle_interval": self.max_idle_interval,
            "echo_before_ack": self.echo_before_ack,
            "rate_limits": self.rate_limits,
        }

    def sandbox_kwargs(self) -> dict[str, Any]:
        """The options every app's emulator of a :class:`~ai_transport.emulator.sandbox.Sandbox` gets."""
        return {
            "allowed_origins": self.allowed_origins,
            "max_message_size": self.max_message_size,
            "max_idle_interval": self.max_idle_interval,
            "echo_before_ack": self.echo_before_ack,
        }


def add_emulator_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every emulator option to ``parser`` (values are checked by :func:`options_from_args`)."""
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"interface to bind (default {DEFAULT_HOST})")
    parser.add_argument(
        "--port", default=str(DEFAULT_PORT), metavar="N",
        help=f"port to listen on (default {DEFAULT_PORT}; 0 = any free port)",
    )
    parser.add_argument(
        "--key", action="append", metavar="NAME:SECRET",
        help=f"an API key (repeatable; default {DEFAULT_KEY})",
    )
    parser.add_argument(
        "--strict-tokens", action="store_true", help="refuse tokens the emulator did not issue (no dev mode)"
    )
    parser.add_argument(
        "--dev-tokens-on-any-host",
        action="store_true",
        help="allow dev mode (any token string is a wildcard token) on a non-loopback --host (loudly warned)",
    )
    parser.add_argument(
        "--allow-origin", action="append", default=[], metavar="ORIGIN",
        help="a browser Origin (scheme://host[:port], or *) allowed besides loopback ones (repeatable)",
    )
    parser.add_argument(
        "--max-message-size", default=str(DEFAULT_MAX_MESSAGE_SIZE), metavar="BYTES",
        help=f"the largest publish accepted, in bytes (default {DEFAULT_MAX_MESSAGE_SIZE}; 40009 past it)",
    )
    parser.add_argument(
        "--max-idle-interval", default="0", metavar="MS",
        help="ms between server heartbeats x2, as Ably's maxIdleInterval (default 0 = no heartbeats)",
    )
    parser.add_argument(
        "--echo-before-ack", action="store_true",
        help="deliver a publish (the publisher's echo included) before its ACK (Ably does either)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every connection and refusal")
    add_rate_limit_arguments(parser)
    parser.add_argument(
        "--sandbox",
        action="store_true",
        help=(
            "run a local Ably test sandbox instead: POST /apps provisions an isolated emulator per app "
            "(keys with capabilities, strict tokens), DELETE /apps/<id> removes it "
            "(for ABLY_LOCAL_SANDBOX_URL in ably-js's test suite)"
        ),
    )


def add_rate_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--rate-limits``, ``--inbound-rate`` and ``--append-rollup-window`` to ``parser``."""
    group = parser.add_argument_group(
        "Ably's limits (off by default, so SDK conformance suites see one delivery per append)"
    )
    group.add_argument(
        "--rate-limits",
        action="store_true",
        help=(
            "enforce Ably's inbound limits: 50 messages/s per connection (42911) and per channel "
            "(42913), a connection at 20x closed (42921), appendRollupWindow "
            f"{DEFAULT_APPEND_ROLLUP_WINDOW} ms unless the publisher's transport params say otherwise"
        ),
    )
    group.add_argument(
        "--inbound-rate",
        metavar="N",
        help="messages/s per connection and per channel instead of 50 (implies --rate-limits)",
    )
    group.add_argument(
        "--append-rollup-window",
        metavar="MS",
        help=(
            "the appendRollupWindow of connections that pass none (implies --rate-limits; "
            f"one of {', '.join(map(str, APPEND_ROLLUP_WINDOWS))}; Ably: {DEFAULT_APPEND_ROLLUP_WINDOW})"
        ),
    )


def _whole(flag: str, raw: Any, low: int, high: int | None, what: str) -> int:
    text = str(raw).strip()
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high):
        raise OptionError(f"{flag} must be {what}, got {raw!r}")
    return value


def _positive_rate(flag: str, raw: Any) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise OptionError(f"{flag} must be a positive number of messages/s, got {raw!r}")
    return value


def _key(raw: str) -> str:
    name, _, secret = raw.partition(":")
    if not name or not secret or any(c.isspace() for c in raw):
        raise OptionError(f"--key must be NAME:SECRET (e.g. {DEFAULT_KEY}), got {raw!r}")
    return raw


def _origin(raw: str) -> str:
    if raw == "*":
        return raw
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query:
        raise OptionError(f"--allow-origin must be scheme://host[:port] (e.g. http://localhost:3000) or *, got {raw!r}")
    return raw


def rate_limits_from_args(args: argparse.Namespace) -> RateLimits | None:
    """The :class:`RateLimits` the options ask for, or None (the emulator's default: off)."""
    raw_rate = getattr(args, "inbound_rate", None)
    raw_window = getattr(args, "append_rollup_window", None)
    if not getattr(args, "rate_limits", False) and raw_rate is None and raw_window is None:
        return None
    limits = RateLimits()
    if raw_rate is not None:
        rate = _positive_rate("--inbound-rate", raw_rate)
        limits = replace(limits, connection_rate=rate, channel_rate=rate)
    if raw_window is not None:
        allowed = ", ".join(map(str, APPEND_ROLLUP_WINDOWS))
        window = _whole("--append-rollup-window", raw_window, 0, None, f"one of {allowed} (ms)")
        if window not in APPEND_ROLLUP_WINDOWS:
            raise OptionError(f"--append-rollup-window must be one of {allowed} (ms), got {raw_window!r}")
        limits = replace(limits, append_rollup_window=window)
    return limits


def options_from_args(args: argparse.Namespace) -> EmulatorOptions:
    """Check every option value; raise :class:`OptionError` (one line naming the flag) for a bad one."""
    host = str(getattr(args, "host", DEFAULT_HOST) or "").strip()
    if not host:
        raise OptionError("--host must name an interface to bind (e.g. 127.0.0.1), got ''")
    port = _whole("--port", getattr(args, "port", DEFAULT_PORT), 0, 65535,
                  "a whole number from 0 to 65535 (0 = any free port)")
    keys = [_key(k) for k in args.key] if getattr(args, "key", None) else None
    origins = [_origin(o) for o in getattr(args, "allow_origin", None) or []]
    size = _whole("--max-message-size", getattr(args, "max_message_size", DEFAULT_MAX_MESSAGE_SIZE), 1, None,
                  "a positive number of bytes")
    idle = _whole("--max-idle-interval", getattr(args, "max_idle_interval", 0), 0, None,
                  "a number of milliseconds >= 0 (0 = no heartbeats)")
    rate_limits = rate_limits_from_args(args)
    sandbox = bool(getattr(args, "sandbox", False))
    if sandbox and rate_limits is not None:
        raise OptionError(
            "--sandbox provisions emulators without rate limits; drop --rate-limits / --inbound-rate / "
            "--append-rollup-window"
        )
    if sandbox and keys is not None:
        raise OptionError("--sandbox provisions each app's keys itself (POST /apps); drop --key")
    return EmulatorOptions(
        host=host,
        port=port,
        keys=keys,
        strict_tokens=bool(getattr(args, "strict_tokens", False)),
        dev_tokens_on_any_host=bool(getattr(args, "dev_tokens_on_any_host", False)),
        allowed_origins=origins,
        max_message_size=size,
        max_idle_interval=idle,
        echo_before_ack=bool(getattr(args, "echo_before_ack", False)),
        rate_limits=rate_limits,
        sandbox=sandbox,
        verbose=bool(getattr(args, "verbose", False)),
    )
