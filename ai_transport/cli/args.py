"""Argument checking for the ``ai-transport`` command: a parser whose errors are one line, and the
value types that refuse what a newcomer may mistype (an invalid channel name, a negative delay, an
empty question), each with a message naming the option."""

from __future__ import annotations

import argparse
import math
from typing import NoReturn
from urllib.parse import urlsplit

from .._channel_names import channel_name_problem

__all__ = [
    "OneLineParser",
    "channel_name",
    "demo_emulator",
    "emulator_address",
    "emulator_url",
    "http_url",
    "non_empty",
    "non_negative_seconds",
    "positive_seconds",
]


class OneLineParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose usage errors are one line on stderr (exit code 2):
    ``ai-transport demo: error: argument --delay: ... (see 'ai-transport demo --help')``."""

    def error(self, message: str) -> NoReturn:
        """Print the one-line error and exit 2."""
        text = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {text} (see '{self.prog} --help')\n")


def channel_name(value: str) -> str:
    """A channel name Ably accepts (the rule the in-process channel and the emulator share)."""
    problem = channel_name_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem} (Ably refuses it: 40010)")
    return value


def emulator_address(url: str) -> tuple[str, int]:
    """``(host, port)`` of an emulator URL (``http://127.0.0.1:8090``, or ``127.0.0.1:8090``), else
    a :class:`ValueError` whose message says what the URL must look like."""
    problem = f"emulator URL {url!r} must look like http://127.0.0.1:8090 (a host and a port 1-65535)"
    try:
        parts = urlsplit(url if "://" in url else "http://" + url)
        port = parts.port
    except ValueError:  # a bad IPv6 literal ("http://[::1"), a port not a number or out of 0-65535
        raise ValueError(problem) from None
    if not parts.hostname or port is None or port == 0:
        raise ValueError(problem)
    return parts.hostname, port


def emulator_url(value: str) -> str:
    """An emulator URL with a host and a port (:func:`emulator_address`)."""
    try:
        emulator_address(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def demo_emulator(value: str) -> str:
    """``demo --emulator``'s value: ``start`` (its bare form: start one) or an emulator URL."""
    return value if value == "start" else emulator_url(value)


def http_url(value: str) -> str:
    """An ``http://`` or ``https://`` URL with a host."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises on a port out of range or not a number)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// URL with a host, got {value!r}")
    return value


def non_empty(value: str) -> str:
    """A string with something in it besides whitespace."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds, got {value!r}")
    return seconds


def non_negative_seconds(value: str) -> float:
    """A finite number of seconds, 0 or more."""
    seconds = _seconds(value)
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {value!r}")
    return seconds


def positive_seconds(value: str) -> float:
    """A finite number of seconds, more than 0."""
    seconds = _seconds(value)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {value!r}")
    return seconds
