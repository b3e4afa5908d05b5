"""Token revocation (``POST /keys/{keyName}/revokeTokens``), for keys with revocable tokens.

Body ``{targets: ["clientId:<id>" | "revocationKey:<key>", …], issuedBefore?, allowReauthMargin?}``
(Basic auth with that key). Every token the key issued before ``issuedBefore`` (default now) that
matches a target becomes unusable at ``appliesAt`` (now, or 30 s later with
``allowReauthMargin``): REST calls and connections with it fail 40141. Answer:
``{successCount, failureCount, results: [{target, issuedBefore, appliesAt} | {target, error}]}``.
A key without revocable tokens is refused with 40162.
"""

from __future__ import annotations

from typing import Any

from .auth import Authority, Principal
from .protocol import EmulatorError
from .store import now_ms

__all__ = ["REAUTH_MARGIN_MS", "TARGET_TYPES", "revoke_tokens"]

#: How long ``allowReauthMargin`` delays a revocation (Ably: 30 s).
REAUTH_MARGIN_MS = 30_000

#: Target types the emulator matches tokens by.
TARGET_TYPES = ("clientId", "revocationKey")


def _matches(principal: Principal, kind: str, value: str) -> bool:
    if kind == "clientId":
        return principal.client_id == value
    return principal.revocation_key == value


def revoke_tokens(
    authority: Authority, key_name: str, caller: Principal, body: Any, revocable: set[str]
) -> tuple[dict[str, Any], int]:
    """Revoke the matching tokens; return the response body and when the revocation applies (ms)."""
    if caller.key_name != key_name or caller.token is not None:
        raise EmulatorError("Token revocation needs Basic auth with the key that issued the tokens", 40162, 401)
    if key_name not in revocable:
        raise EmulatorError(f"Revocable tokens are not enabled for key {key_name!r}", 40162, 401)
    if not isinstance(body, dict) or not isinstance(body.get("targets"), list) or not body["targets"]:
        raise EmulatorError("targets must be a non-empty list of '<type>:<value>' strings", 40000, 400)
    now = now_ms()
    issued_before = body.get("issuedBefore")
    if isinstance(issued_before, bool) or not isinstance(issued_before, (int, float)):
        issued_before = now
    applies_at = now + (REAUTH_MARGIN_MS if body.get("allowReauthMargin") is True else 0)
    results: list[dict[str, Any]] = []
    for target in body["targets"]:
        kind, _, value = target.partition(":") if isinstance(target, str) else ("", "", "")
        if kind not in TARGET_TYPES or not value:
            err = EmulatorError(f"Invalid revocation target {target!r}", 40000, 400)
            results.append({"target": target, "error": err.to_dict()})
            continue
        for principal in authority.tokens.values():
            if (
                principal.key_name == key_name
                and (principal.issued or 0) < issued_before
                and _matches(principal, kind, value)
                and (principal.revoked_at is None or principal.revoked_at > applies_at)
            ):
                principal.revoked_at = applies_at
        results.append({"target": target, "issuedBefore": int(issued_before), "appliesAt": applies_at})
    failed = sum(1 for r in results if "error" in r)
    return {"successCount": len(results) - failed, "failureCount": failed, "results": results}, applies_at
