"""Where ``tail`` and ``supervise`` connect: the emulator or Ably, with which credentials, and each
way that can fail as one :class:`~.errors.CliError` line (a wrong key, an unreachable host, a
connection that never completes), never the SDK's or urllib's traceback.

The ably SDK logs its own retries while connecting (``log.exception``: a traceback each);
:data:`SDK_LOG`, a filter on the CLI's log handlers, keeps them to one line each, and holds them
back while a command connects (:meth:`SdkLog.connecting`): the command's own error line then says
what the SDK saw last.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Iterator
from typing import Any

from ..errors import AITransportError
from .args import emulator_address
from .errors import CliError

__all__ = ["SDK_LOG", "SdkLog", "connect_failure", "emulator_token", "realtime_options", "timed_out"]


class SdkLog(logging.Filter):
    """A log filter for the ably SDK's records (logger ``ably`` and below): never a traceback, and
    none at all while :meth:`connecting` (the last one's message is kept in :attr:`last`)."""

    def __init__(self) -> None:
        super().__init__()
        self.held = 0
        #: The message of the last SDK record held back while connecting.
        self.last: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        """Strip an SDK record's traceback; drop it while connecting."""
        if record.name == "ably" or record.name.startswith("ably."):
            record.exc_info = record.exc_text = record.stack_info = None
            if self.held:
                self.last = " ".join(record.getMessage().split())
                return False
        return True

    @contextlib.contextmanager
    def connecting(self) -> Iterator[None]:
        """Hold the SDK's records back while the block runs (the command reports the outcome)."""
        self.held += 1
        self.last = None
        try:
            yield
        finally:
            self.held -= 1

    def seen(self) -> str:
        """`` (the ably SDK: <last message>)`` if one was held back, else ``""``."""
        return f" (the ably SDK: {self.last[:300]})" if self.last else ""


#: The CLI's filter (installed on its log handlers by :func:`ai_transport.cli.main`).
SDK_LOG = SdkLog()


def _target(args: argparse.Namespace, what: str) -> tuple[str | None, str | None]:
    """``(emulator URL, key)`` from ``--emulator`` / ``--key``, else ``$AIT_EMULATOR_URL`` / ``$ABLY_KEY``."""
    emulator = args.emulator or (None if args.key else os.environ.get("AIT_EMULATOR_URL"))
    key = args.key or (None if emulator else os.environ.get("ABLY_KEY"))
    if not emulator and not key:
        raise CliError(f"say where {what}: --emulator URL (a local emulator) or --key KEY (Ably); "
                       "or set AIT_EMULATOR_URL / ABLY_KEY")
    if emulator and emulator != args.emulator:
        try:
            emulator_address(emulator)
        except ValueError as e:
            raise CliError(f"AIT_EMULATOR_URL: {e}") from None
    if key is not None and ":" not in key:
        raise CliError("--key must be an Ably API key of the form 'appId.keyId:secret'")
    return emulator, key


async def realtime_options(args: argparse.Namespace, client_id: str, what: str) -> tuple[dict[str, Any], str]:
    """``AblyRealtime`` keyword options for the command's target as ``client_id``, and where that
    is in words ("the emulator at URL", "Ably"); ``what`` completes "say where …" when neither is
    given ("CHANNEL lives"). An unreachable emulator or a key it rejects is a
    :class:`CliError`."""
    emulator, key = _target(args, what)
    if not emulator:
        return {"key": key, "client_id": client_id}, "Ably"
    from ..emulator.client import client_options
    from .demo_transport import check_reachable

    check_reachable(emulator)
    options = client_options(emulator, client_id=client_id)
    where = f"the emulator at {emulator}"
    if key is not None:
        # The SDK refuses Basic auth over plain HTTP (40103): exchange the key for a token first,
        # which also reports a wrong key at once instead of as endless reconnect attempts.
        options["token"] = await emulator_token(emulator, key, client_id, where)
    return options, where


async def emulator_token(url: str, key: str, client_id: str, where: str) -> str:
    """A token the emulator at ``url`` issues for ``key`` and ``client_id``; a key it rejects, or an
    emulator that does not answer, is one :class:`CliError` line."""
    import urllib.error

    from ..emulator.client import request_token

    try:
        details = await asyncio.to_thread(request_token, url, key=key, client_id=client_id)
    except urllib.error.HTTPError as e:
        try:
            err = json.loads(e.read()).get("error", {})
        except (ValueError, AttributeError, RecursionError):
            err = {}
        if not isinstance(err, dict):
            err = {}
        raise CliError(f"{where} rejected the credentials: {err.get('message', e.reason)} "
                       f"(code {err.get('code', e.code)})") from e
    except (OSError, ValueError) as e:  # unreachable, reset, or an answer that is not a token
        raise CliError(f"cannot reach {where}: {e}") from e
    try:
        return str(details["token"])
    except (KeyError, TypeError) as e:
        raise CliError(f"{where} did not issue a token (its answer has no 'token')") from e


def connect_failure(e: BaseException, where: str) -> CliError:
    """The one line for a connection to ``where`` that failed with ``e`` (ours or the SDK's error)."""
    if isinstance(e, AITransportError):
        code = e.code if isinstance(e.code, int) else 0
        if 40100 <= code < 40200 or code in (40400, 40005) or "key" in e.message.lower():
            return CliError(f"{where} rejected the credentials: {e.message} (code {e.code})")
        return CliError(f"cannot connect to {where}: {e.message} (code {e.code})")
    sdk_code = getattr(e, "code", None)  # the ably SDK raises its own AblyException
    message = getattr(e, "message", None) or str(e) or type(e).__name__
    if isinstance(sdk_code, int) and (40100 <= sdk_code < 40200 or sdk_code == 40400):
        return CliError(f"{where} rejected the credentials: {message} (code {sdk_code})")
    return CliError(f"cannot connect to {where}: {message}")


def timed_out(timeout: float, where: str) -> CliError:
    """The one line for a connection to ``where`` not made within ``timeout`` seconds."""
    return CliError(f"timed out after {timeout:g} s connecting to {where}{SDK_LOG.seen()}")
