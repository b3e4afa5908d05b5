"""``ai-transport emulator``: run the local Ably-compatible server and say how to connect to it.

The options, their checks, the startup text and the serving are the emulator's own
(:mod:`ai_transport.emulator.options`, :mod:`ai_transport.emulator.command`), shared with
``python -m ai_transport.emulator``; this module turns their errors into :class:`~.CliError`.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from .errors import CliError


async def run_emulator_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Start the emulator as ``args`` say, print how to connect, serve until cancelled."""
    from ..emulator.command import LaunchError, serve
    from ..emulator.options import OptionError, options_from_args

    try:
        options = options_from_args(args)
    except OptionError as e:
        raise CliError(str(e), exit_code=2) from None
    try:
        await serve(options, out)
    except LaunchError as e:
        raise CliError(str(e)) from None
    return 0
