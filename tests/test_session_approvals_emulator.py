"""Approvals for calls the agent never made, over the emulator with the real ``ably`` SDK and
least-privilege tokens (:mod:`ai_transport.conversation.approvals`; in-process: ``test_session_approvals.py``).

A rogue browser (her own user token) publishes an ``ai-output`` declaring a call in alice's
suspended run; alice approves every call her 0.8.0-like view shows, plus a call id from a stale
tab, and wakes a fresh worker: the model's own call runs once, the run completes, the stray
approvals are counted, nothing is reported as an error.
"""

from __future__ import annotations

from typing import Any

import pytest
from support_emulator import emulator_thread, unique_channel
from support_sessions import approval, assistant_with_call, user_message, wait_status
from test_security_e2e import finish, fresh_agent, open_as
from test_session_approvals import approvals_of_every_call, forge_call

from ai_transport.auth import agent_token_params, browser_token_params
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

__all__ = ["emulator_thread"]  # the fixture

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(90)]


async def test_rogue_and_stale_approvals_over_the_sdk_never_brick_the_run(emulator_thread: Any) -> None:
    from support_sessions import Worker

    name = unique_channel("stray")
    alice_ch = await open_as(emulator_thread, name, "alice", browser_token_params)
    mallory_ch = await open_as(emulator_thread, name, "mallory", browser_token_params)
    agent_ch = await open_as(emulator_thread, name, "agent", agent_token_params)
    alice = ClientSession(alice_ch)  # trusts every publisher, as 0.8.0's view does
    await alice.connect()
    agent = AgentSession(agent_ch)
    await agent.connect()
    worker = Worker()
    try:
        sent = await alice.view.send(user_message("Weather in Paris?"))
        run = await worker.handle(agent, sent.invocation.to_json())
        await wait_status(alice.view, run.run_id, "suspended")
        await agent.close()
        await agent_ch.close()

        await forge_call(mallory_ch, run.run_id, "rogue-msg", "call_rogue")
        await alice.view.wait_for(lambda: len(approvals_of_every_call(alice.view)) == 2, 10)
        cmid, _call = assistant_with_call(alice.view.get_messages())
        stale = approval(cmid, {"call_id": "call_from_a_stale_tab"})
        wake = await alice.view.send([stale, *approvals_of_every_call(alice.view)], run_id=run.run_id)

        agent_ch, agent = await fresh_agent(emulator_thread, name)
        skipped: list[str] = []
        agent.on("skipped", lambda _m, why: skipped.append(why))
        errors: list[Any] = []
        resumed = await agent.create_run(wake.invocation.to_json(), hooks={"on_error": errors.append})
        await resumed.start()
        await resumed.view.load_all()
        await finish(worker, resumed)
        await wait_status(alice.view, run.run_id, "complete")
        assert len(worker.executed) == 1 and "Paris" in worker.executed[0][1]
        assert errors == [] and resumed.tampered_approvals == []
        assert any("'call_rogue' the agent never made" in why for why in skipped)
        assert any("'call_from_a_stale_tab' the agent never made" in why for why in skipped)
    finally:
        await agent.end()
        for session in (alice,):
            await session.close()
        for channel in (alice_ch, mallory_ch, agent_ch):
            await channel.close()
