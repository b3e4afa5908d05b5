"""Values past what a parser, a float or ``repr`` takes, wherever the core reads them: JSON nested
deeper than the parser goes in a field the core parses (a lease wire's body, the steer stamp
header, a function call's codec ``item``: ``json.loads`` raises ``RecursionError`` there, not
``ValueError``), a lone surrogate in a header (msgspec cannot encode it), a lease timestamp past
any float, an action of more digits than ``int`` prints. The wire is malformed, skipped or read
as absent, never raised."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ai_transport.codec import ResponsesCodec
from ai_transport.conversation.core import Conversation
from ai_transport.lease import lease_body

DEEP = "[" * 5000 + "]" * 5000


def _wire(serial: int, name: str, **fields: Any) -> dict[str, Any]:
    return {"id": f"conn:{serial}", "name": name, "clientId": "agent", "connectionId": "conn",
            "serial": f"{serial:020d}", "timestamp": serial, "action": "message.create", **fields}


def _output(serial: int, transport: dict[str, Any], codec: dict[str, Any]) -> dict[str, Any]:
    headers = {"run-id": "run-1", "codec-message-id": f"m{serial}", "role": "assistant", "stream": "false"}
    return _wire(serial, "ai-output", data="hello", extras={"ai": {"transport": {**headers, **transport}, "codec": codec}})


CASES = {
    "lease body": _wire(1, "ai-claim", data=DEEP),
    "lease timestamp past any float": {
        **_wire(1, "ai-claim", data=json.dumps(lease_body("run-1", ["run:run-1"], "claimant", "i"))),
        "timestamp": 10**400,
    },
    "action of 5,000 digits": {**_wire(1, "ai-output", data="x"), "action": 10**5000},
    "lone surrogate header": _output(1, {"parent": "\ud800"}, {"kind": "message"}),
    "steer stamp": _output(1, {"steer-codec-message-ids": DEEP}, {"kind": "message"}),
    "function call item": _output(1, {}, {"kind": "function_call_arguments", "item": DEEP}),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("agent", [False, True])
@pytest.mark.parametrize("live", [False, True])
def test_json_nested_too_deep_is_malformed_never_raised(case: str, agent: bool, live: bool) -> None:
    core = Conversation(ResponsesCodec, agent=agent, trusted_agent_ids={"agent"})
    receive = core.receive_live if live else core.receive_history
    receive(_wire(0, "ai-run-start", extras={"ai": {"transport": {"run-id": "run-1", "invocation-id": "i"}}}))
    receive(dict(CASES[case]))  # must not raise
    receive(_wire(2, "ai-run-start", extras={"ai": {"transport": {"run-id": "run-2", "invocation-id": "i"}}}))
    assert core.tree.get_run_node("run-2") is not None  # the core goes on folding
