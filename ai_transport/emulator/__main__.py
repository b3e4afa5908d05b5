"""``python -m ai_transport.emulator --port N [--host 127.0.0.1]``: run the emulator until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging

from .auth import DEFAULT_KEY
from .options import add_rate_limit_arguments, rate_limits_from_args
from .server import Emulator


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve forever."""
    parser = argparse.ArgumentParser(prog="python -m ai_transport.emulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (0 = any free port; default 8080)")
    parser.add_argument(
        "--key", action="append", help=f"an API key name:secret (repeatable; default {DEFAULT_KEY})"
    )
    parser.add_argument(
        "--strict-tokens", action="store_true", help="refuse tokens the emulator did not issue"
    )
    parser.add_argument(
        "--dev-tokens-on-any-host",
        action="store_true",
        help="allow dev mode (wildcard tokens) on a non-loopback --host (loudly warned)",
    )
    parser.add_argument(
        "--allow-origin", action="append", default=[], help="a browser Origin allowed besides loopback (repeatable)"
    )
    parser.add_argument("--max-message-size", type=int, default=65536)
    parser.add_argument(
        "--max-idle-interval", type=int, default=0, help="ms between server heartbeats x2 (0 = off)"
    )
    parser.add_argument(
        "--echo-before-ack", action="store_true", help="deliver a publish (echo included) before its ACK"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    add_rate_limit_arguments(parser)
    args = parser.parse_args(argv)
    try:
        rate_limits = rate_limits_from_args(args)
    except ValueError as e:
        parser.error(str(e))
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(message)s"
    )

    async def run() -> None:
        emu = Emulator(
            args.host,
            args.port,
            keys=args.key,
            strict_tokens=args.strict_tokens,
            dev_tokens_on_any_host=args.dev_tokens_on_any_host,
            allowed_origins=args.allow_origin,
            max_message_size=args.max_message_size,
            max_idle_interval=args.max_idle_interval,
            echo_before_ack=args.echo_before_ack,
            rate_limits=rate_limits,
        )
        await emu.start()
        print(f"ai_transport emulator on {emu.url} (ws://{emu.host}:{emu.port}) key {emu.key}", flush=True)
        try:
            await emu.serve_forever()
        finally:
            await emu.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
