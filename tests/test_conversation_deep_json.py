"""JSON nested deeper than the parser goes, in any field the core parses (a lease wire's body, the
steer stamp header, a function call's codec ``item``): the wire is malformed, skipped or read as
absent, never raised (``json.loads`` raises ``RecursionError`` there, not ``ValueError``)."""

from __future__ import annotations

from typing import Any

import pytest

from ai_transport.codec import ResponsesCodec
from ai_transport.conversation.core import Conversation

DEEP = "[" * 5000 + "]" * 5000


def _wire(serial: int, name: str, **fields: Any) -> dict[str, Any]:
    return {"id": f"conn:{serial}", "name": name, "clientId": "agent", "connectionId": "conn",
            "serial": f"{serial:020d}", "timestamp": serial, "action": "message.create", **fields}


def _output(serial: int, transport: dict[str, Any], codec: dict[str, Any]) -> dict[str, Any]:
    headers = {"run-id": "run-1", "codec-message-id": f"m{serial}", "role": "assistant", "stream": "false"}
    return _wire(serial, "ai-output", data="hello", extras={"ai": {"transport": {**headers, **transport}, "codec": codec}})


CASES = {
    "lease body": _wire(1, "ai-claim", data=DEEP),
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
