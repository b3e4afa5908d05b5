"""``python -m ai_transport.emulator [--port 8090] [--host 127.0.0.1] …``: run the emulator until interrupted.

The same options, defaults, help and startup text as ``ai-transport emulator``
(:mod:`.options`, :mod:`.command`); a bad value or a failed bind is one line on stderr and exit
status 2 (a bad option) or 1 (could not start).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys

from .command import LaunchError, serve
from .options import DESCRIPTION, OptionError, add_emulator_arguments, options_from_args

PROG = "python -m ai_transport.emulator"


def build_parser() -> argparse.ArgumentParser:
    """The command's parser (every option from :func:`~.options.add_emulator_arguments`)."""
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    add_emulator_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and serve until interrupted; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        options = options_from_args(args)
    except OptionError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(options))
    except LaunchError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
