"""Command-line options shared by ``python -m ai_transport.emulator`` and ``ai-transport emulator``."""

from __future__ import annotations

import argparse
from dataclasses import replace

from .limits import APPEND_ROLLUP_WINDOWS, DEFAULT_APPEND_ROLLUP_WINDOW, RateLimits

__all__ = ["add_rate_limit_arguments", "rate_limits_from_args"]


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
        type=float,
        metavar="N",
        help="messages/s per connection and per channel instead of 50 (implies --rate-limits)",
    )
    group.add_argument(
        "--append-rollup-window",
        type=int,
        metavar="MS",
        choices=APPEND_ROLLUP_WINDOWS,
        help=(
            "the appendRollupWindow of connections that pass none (implies --rate-limits; "
            f"one of {', '.join(map(str, APPEND_ROLLUP_WINDOWS))}; Ably: {DEFAULT_APPEND_ROLLUP_WINDOW})"
        ),
    )


def rate_limits_from_args(args: argparse.Namespace) -> RateLimits | None:
    """The :class:`RateLimits` the options ask for, or None (the emulator's default: off)."""
    rate = getattr(args, "inbound_rate", None)
    window = getattr(args, "append_rollup_window", None)
    if not getattr(args, "rate_limits", False) and rate is None and window is None:
        return None
    if rate is not None and rate <= 0:
        raise ValueError(f"--inbound-rate must be a positive number of messages/s, got {rate}")
    limits = RateLimits()
    if rate is not None:
        limits = replace(limits, connection_rate=rate, channel_rate=rate)
    if window is not None:
        limits = replace(limits, append_rollup_window=window)
    return limits
