"""Identity and exposure rules of the emulator, as Ably enforces them (pure functions).

* **Operation identity** (:func:`check_operation_identity`): an update / append / delete records who
  did it in ``version.clientId``. Ably's docs (``messages/updates-deletes.mdx``): the operation's
  clientId is "automatically populated if done by an identified client". So for an identified
  connection the emulator stamps the connection's clientId and refuses a different one the client
  sent (40012, as for a mismatched message ``clientId``); an unidentified client with basic (key)
  auth may name any clientId (``auth/identified-clients.mdx``: key auth may assume any identity).
* **Anonymous tokens** (:func:`check_operation_identity`): a token issued without a clientId cannot
  publish a message (or an operation) under a clientId (40012), because only key auth and wildcard
  (``*``) tokens may assume identities (``auth/identified-clients.mdx``).
* **History** (:func:`may_replay`): the ``history`` capability "Can retrieve message and presence
  state history on channels" (``auth/capabilities.mdx``, the capability operations table), and the
  history docs (``storage-history/history.mdx``, "History versus rewind") name the ``rewind`` channel
  option as the other way to "retrieve previously published messages". An ATTACH that asks for
  messages published before it (``rewind``, or a ``channelSerial`` older than the point this
  connection itself attached from) is history retrieval: without ``history`` a rewind is refused
  (40160) and a channelSerial replay is clipped to what the connection could have received live.
* **Exposure** (:func:`check_bind`, :func:`origin_allowed`): dev mode (any unknown token string is a
  wildcard token) is only for a loopback bind; another bind address needs ``strict_tokens`` or the
  explicit ``dev_tokens_on_any_host`` (logged loudly). A browser ``Origin`` that is not loopback and
  not in the configured allowlist is refused on the websocket upgrade and on REST (40300), so a page
  the developer happens to visit cannot read or write the emulator's channels.
"""

from __future__ import annotations

import ipaddress
import logging
import urllib.parse
from collections.abc import Iterable
from typing import Any

from .auth import Principal
from .protocol import EmulatorError

__all__ = ["check_bind", "check_operation_identity", "is_loopback_host", "may_replay", "origin_allowed"]

log = logging.getLogger("ai_transport.emulator")


def is_loopback_host(host: str | None) -> bool:
    """True for ``localhost``, ``127.0.0.0/8`` and ``::1`` (brackets allowed)."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, strict_tokens: bool, dev_tokens_on_any_host: bool) -> None:
    """Refuse dev mode (wildcard tokens) on a non-loopback bind unless explicitly asked for."""
    if strict_tokens or is_loopback_host(host):
        return
    if not dev_tokens_on_any_host:
        raise ValueError(
            f"refusing to bind {host!r} in dev mode: any token string would be a wildcard token (every "
            "capability, any clientId) for everyone who can reach this address. Use strict_tokens "
            "(--strict-tokens) and issue tokens from a key, or pass dev_tokens_on_any_host "
            "(--dev-tokens-on-any-host) if you really mean it"
        )
    log.warning(
        "!!! emulator bound to %s in DEV MODE: any token string is a wildcard token (every capability, "
        "any clientId) for everyone who can reach this address. Use --strict-tokens outside a test box. !!!",
        host,
    )


def origin_allowed(origin: str | None, allowlist: Iterable[str] = ()) -> bool:
    """True when a request's ``Origin`` may talk to the emulator: no Origin (not a browser), a
    loopback origin (``http://localhost:…``, ``http://127.0.0.1:…``, ``http://[::1]:…``), or one listed
    in ``allowlist`` (exact ``scheme://host[:port]``; ``"*"`` allows every origin)."""
    if origin is None:
        return True
    allowed = set(allowlist)
    if "*" in allowed or origin in allowed:
        return True
    try:
        parts = urllib.parse.urlsplit(origin)
    except ValueError:  # ("http://[::1": an invalid IPv6 URL) not an origin: refused
        return False
    return parts.scheme in ("http", "https") and is_loopback_host(parts.hostname)


def _op_client_id(msg: dict[str, Any]) -> Any:
    version = msg.get("version")
    return version.get("clientId") if isinstance(version, dict) else None


def check_operation_identity(principal: Principal, client_id: str | None, msg: dict[str, Any], index: int) -> None:
    """40012 for a clientId this connection / request may not use (see the module docstring)."""
    identified = client_id is not None and client_id != "*"
    anonymous_token = principal.token is not None and principal.client_id is None and not identified
    op_cid = _op_client_id(msg)
    if op_cid is not None and not isinstance(op_cid, str):
        raise EmulatorError(f"messages[{index}].version.clientId must be a string", 40012, 400)
    if identified and op_cid is not None and op_cid != client_id:
        raise EmulatorError(
            f"Mismatched clientId: messages[{index}].version.clientId {op_cid!r} differs from the "
            f"connection's {client_id!r}",
            40012,
            400,
        )
    if anonymous_token and (msg.get("clientId") is not None or op_cid is not None):
        raise EmulatorError(
            f"messages[{index}]: a token issued without a clientId cannot publish under a clientId",
            40012,
            400,
        )


def may_replay(principal: Principal, channel: str) -> bool:
    """Whether an ATTACH may replay messages published before it (the ``history`` capability)."""
    return principal.allows(channel, "history")
