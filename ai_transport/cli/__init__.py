"""The ``ai-transport`` command line (also ``python -m ai_transport``).

Subcommands:

* ``demo`` — a whole agent run with a gated tool call, approval and resume, end to end on this machine
  (no account, no API key): an in-process channel by default, or the local Ably emulator with
  ``--emulator``; a local model server speaking the OpenAI Responses SSE wire (or the real API with
  ``OPENAI_API_KEY`` and ``--model``).
* ``emulator`` — start the local Ably-compatible server and print how to connect to it.
* ``tail CHANNEL`` — follow the runs on a channel as a readable conversation (history, then live).
* ``supervise CHANNEL…`` — end (or re-wake) the runs whose worker died (:mod:`.supervise`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import AITransportError
from .args import (
    OneLineParser,
    channel_name,
    demo_emulator,
    emulator_url,
    non_empty,
    non_negative_seconds,
    positive_seconds,
)
from .errors import CliError

__all__ = ["CliError", "build_parser", "main"]

_EPILOG_DEMO = """\
examples:
  ai-transport demo                      approve the gated call (in-process channel)
  ai-transport demo --deny "not today"   deny it with a reason
  ai-transport demo --emulator           same, over the local Ably emulator and the real ably SDK
  ai-transport demo --agents-sdk         the same agent written with the OpenAI Agents SDK
  ai-transport demo --vercel             the same conversation in Vercel AI SDK UI messages (useChat's)
  ai-transport demo --temporal           same, each wake-up a Temporal workflow (local dev server)
  OPENAI_API_KEY=sk-... ai-transport demo --model gpt-5-mini
                                         talk to the real OpenAI Responses API
"""

_EPILOG_TAIL = """\
examples:
  ai-transport tail demo-chat --emulator http://127.0.0.1:8090
  ai-transport tail my-channel --key "$ABLY_KEY"
  ai-transport tail demo-chat --emulator http://127.0.0.1:8090 --no-follow
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ai-transport`` command."""
    parser = OneLineParser(
        prog="ai-transport",
        description=(
            "Carry OpenAI Responses agent runs over Ably realtime channels "
            "(wire-compatible with @ably/ai-transport 0.8.0)."
        ),
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="run an agent with a gated tool call, an approval and a resumed run, end to end",
        description=(
            "Run the whole product on this machine: a user asks a question, the model answers with "
            "reasoning, text and a tool call that needs approval; the agent streams it over the channel "
            "and suspends; a client approves (or denies); the agent resumes, runs the tool, asks the "
            "model again and streams the final answer. The conversation is printed live as it streams."
        ),
        epilog=_EPILOG_DEMO,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--emulator",
        nargs="?",
        const="start",
        default=None,
        type=demo_emulator,
        metavar="URL",
        help=(
            "use the Ably emulator and the real ably SDK instead of the in-process channel; "
            "without URL a fresh emulator is started on a free port"
        ),
    )
    demo.add_argument(
        "--temporal",
        nargs="?",
        const="start",
        default=None,
        metavar="ADDRESS",
        help=(
            "run every agent wake-up as a Temporal workflow (worker in this process, implies "
            "--emulator); without ADDRESS a local Temporal dev server is started"
        ),
    )
    answer = demo.add_mutually_exclusive_group()
    answer.add_argument(
        "--deny",
        nargs="?",
        const="",
        default=None,
        metavar="REASON",
        help="deny the gated tool call (optionally with a reason) instead of approving it",
    )
    answer.add_argument(
        "--ask",
        action="store_true",
        help="ask on the terminal whether to approve the gated call (default: approve, or --deny)",
    )
    demo.add_argument(
        "--question",
        type=non_empty,
        default="What's the weather in Paris right now? Should I take an umbrella?",
        help="what the user asks (default: %(default)r)",
    )
    demo.add_argument(
        "--model",
        type=non_empty,
        default=None,
        help=(
            "with OPENAI_API_KEY set: talk to the real OpenAI Responses API with this model; "
            "otherwise the local scripted model server is used"
        ),
    )
    demo.add_argument(
        "--reasoning",
        choices=["auto", "off", "minimal", "low", "medium", "high"],
        default="auto",
        help="reasoning effort sent to the model (auto: low on reasoning models, off on others)",
    )
    demo.add_argument(
        "--agents-sdk",
        action="store_true",
        help="run the agent written with the OpenAI Agents SDK (needs the 'agents' extra)",
    )
    demo.add_argument(
        "--vercel",
        action="store_true",
        help="speak Vercel AI SDK UI message chunks (UIMessageCodec, what useChat reads) instead of Responses",
    )
    demo.add_argument(
        "--channel", type=channel_name, default=None, help="channel name (default: a fresh demo-<id>)"
    )
    demo.add_argument("--no-reasoning", action="store_true", help="hide the model's reasoning summary")
    demo.add_argument(
        "--delay", type=non_negative_seconds, default=0.01, help="seconds between scripted deltas (default 0.01)"
    )
    _add_color(demo)

    from ..emulator.options import DESCRIPTION as EMULATOR_DESCRIPTION
    from ..emulator.options import add_emulator_arguments

    emu = sub.add_parser(
        "emulator",
        help="start the local Ably-compatible server (no account needed)",
        description=EMULATOR_DESCRIPTION,
    )
    add_emulator_arguments(emu)

    tail = sub.add_parser(
        "tail",
        help="follow the runs on a channel as a readable conversation",
        description=(
            "Connect to CHANNEL (on the local emulator, or on Ably with a key), print the conversation "
            "already in its history, then follow new runs live until interrupted."
        ),
        epilog=_EPILOG_TAIL,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tail.add_argument("channel", metavar="CHANNEL", type=channel_name, help="the channel name")
    tail.add_argument(
        "--emulator",
        metavar="URL",
        type=emulator_url,
        default=None,
        help="URL of a running emulator, e.g. http://127.0.0.1:8090 (default: $AIT_EMULATOR_URL)",
    )
    tail.add_argument(
        "--key",
        default=None,
        help="an Ably API key 'appId.keyId:secret' (default: $ABLY_KEY); with --emulator, authenticate with it there",
    )
    tail.add_argument("--no-follow", action="store_true", help="print the history and exit")
    tail.add_argument("--no-reasoning", action="store_true", help="hide reasoning summaries")
    tail.add_argument("--timeout", type=positive_seconds, default=10.0, help="seconds to wait for the connection (default 10)")
    _add_color(tail)
    from .supervise import add_parser as add_supervise

    add_supervise(sub)
    return parser


def _add_color(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--color", dest="color", action="store_true", default=None, help="force colour output")
    g.add_argument("--no-color", dest="color", action="store_false", help="plain output")


def _run(coro: Any) -> int:
    async def runner() -> int:
        filter_sdk_close_noise()
        return int(await coro)

    main = runner()
    try:
        from ..channels.ably_channel import filter_sdk_close_noise

        return asyncio.run(main)
    finally:
        # A Ctrl-C before the loop ran them: closed, not "coroutine ... was never awaited" warnings
        main.close()
        coro.close()


def _error(msg: str) -> None:
    print(f"ai-transport: error: {msg}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ai-transport`` console script; returns the process exit code.

    Run as the program (``argv`` None) after the Temporal SDK's native bridge was loaded
    (``demo --temporal``), the process ends here with :func:`os._exit` once its output is flushed:
    the bridge's runtime threads can abort CPython's finalization ("Fatal Python error:
    PyGILState_Release", temporalio/sdk-python#300), which would turn a clean exit, or a one-line
    error, into a crash dump.
    """
    code = _main(argv)
    if argv is None and "temporalio.bridge.temporal_sdk_bridge" in sys.modules:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _main(argv: Sequence[str] | None) -> int:
    try:
        return _command(argv)
    except KeyboardInterrupt:  # Ctrl-C, from parsing on (its imports take a moment): no traceback
        with contextlib.suppress(OSError):
            print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout's reader is gone (`ai-transport demo | head -1`): what the Python docs recommend
        # (signal module, "Note on SIGPIPE"): point stdout at devnull, so that the flush at exit
        # fails no more, and exit 1 without a word.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 1


def _command(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from .. import __version__

        print(f"ai-transport {__version__}")
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="ai-transport: %(name)s: %(message)s")
    from .connection import SDK_LOG

    for handler in logging.getLogger().handlers:  # the ably SDK's retries: one line each, never a traceback
        if SDK_LOG not in handler.filters:
            handler.addFilter(SDK_LOG)
    if getattr(args, "color", None) is None and os.environ.get("NO_COLOR"):
        args.color = False
    try:
        if args.command == "demo":
            from .demo import run_demo_command

            return _run(run_demo_command(args))
        if args.command == "emulator":
            from .emulator_cmd import run_emulator_command

            return _run(run_emulator_command(args))
        if args.command == "supervise":
            from .supervise import run_supervise_command

            return _run(run_supervise_command(args))
        if args.command == "tail":
            from .tail import run_tail_command

            return _run(run_tail_command(args))
    except CliError as e:
        _error(str(e))
        return e.exit_code
    except AITransportError as e:
        _error(f"{e.message} (code {e.code})")
        return 1
    parser.error(f"unknown command {args.command!r}")
    return 2  # pragma: no cover
