"""A hostile review of the conversation core (issue 21), as a member with an ordinary token would try it.

Each test is one attack: what a hostile publisher sends, and what must still hold for everyone else.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from support_untrusted import record

from ai_transport.codec.codec import ResponsesCodec
from ai_transport.conversation import core as core_module
from ai_transport.conversation.core import Conversation, Skipped
from ai_transport.lease import ledger as ledger_module

RECORDED = asyncio.run(record())
FULL = RECORDED["full"]
AGENT = "agent"


def _as(wire: dict[str, Any], client_id: str, serial: str) -> dict[str, Any]:
    out = copy.deepcopy(wire)
    out["clientId"] = client_id
    out["serial"] = serial
    out.pop("version", None)
    return out


@pytest.mark.parametrize("agent", [False, True])
def test_live_wires_held_during_a_refold_are_bounded_per_publisher(monkeypatch: pytest.MonkeyPatch, agent: bool) -> None:
    """While a refold runs the core holds live wires; mallory flooding it fills only her own share:
    beyond the bound her wires are skipped (counted), and every wire of the legitimate publishers
    is still folded after the refold, in arrival order."""
    monkeypatch.setattr(core_module, "HELD_LIVE_LIMIT", 200)
    core = Conversation(ResponsesCodec, agent=agent, trusted_agent_ids={AGENT})
    legit = FULL["wires"]
    prompt = next(w for w in legit if w.get("name") == "ai-input")
    core.begin_refold()
    flood = [_as(prompt, "mallory", f"9{i:08d}") for i in range(600)]
    for i, wire in enumerate(legit):
        core.receive_live(wire)
        for junk in flood[i * 600 // len(legit) : (i + 1) * 600 // len(legit)]:
            core.receive_live(junk)
    held = core.take_live()
    mine = [w for w in held if w.get("clientId") == "mallory"]
    assert len(mine) == 200
    assert [w for w in held if w.get("clientId") != "mallory"] == legit
    skipped = [c for c in core.changes() if isinstance(c, Skipped)]
    assert len(skipped) == 400 and all(c.wire["clientId"] == "mallory" for c in skipped)
    # the bound is per refold: the next refold holds a fresh share
    core.begin_refold()
    core.receive_live(_as(prompt, "mallory", "999999999"))
    assert len(core.take_live()) == 1


def _claim_flood_steps(n: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many holder-rule steps a client view trusting every publisher (0.8.0's) takes to fold the
    recorded conversation, then ``n`` claims by mallory on alice's run (each a fresh claimant and key)."""
    steps = 0
    real = ledger_module._step

    def counted(*args: Any) -> Any:
        nonlocal steps
        steps += 1
        return real(*args)

    monkeypatch.setattr(ledger_module, "_step", counted)
    core = Conversation(ResponsesCodec)
    for wire in FULL["wires"]:
        core.receive_live(wire)
    claim = next(w for w in FULL["wires"] if w.get("name") == "ai-claim")
    body = json.loads(claim["data"])
    before = steps
    for i in range(n):
        wire = _as(claim, "mallory", f"9{i:08d}")
        wire["connectionId"] = "mallory-conn"
        wire["data"] = json.dumps({**body, "claimant": f"m{i}", "callIds": [f"call_m{i}"]})
        core.receive_live(wire)
    core.changes()
    return steps - before


def test_a_claim_flood_costs_each_view_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of mallory's claims costs a constant number of holder-rule steps, whatever she sent before."""
    small, large = _claim_flood_steps(60, monkeypatch), _claim_flood_steps(120, monkeypatch)
    assert large <= 2.5 * small, (small, large)
