"""What a woken worker keeps of each turn of its history that the cyclic GC tracks (issue 21).

A worker's wake-up folds the whole history into a fresh tree; everything the tree, its ledgers and
its fence keep per wire stays alive for the session, and every object the cyclic GC tracks is scanned
at each collection that wake-up runs (a 10k-message wake-up ran ~110 young collections and 9 middle
ones). So the usual turn (a prompt, a run of one step, one streamed answer, a lease claim and its
release) keeps its small records as values the GC does not track: each stream closed as its
version, a step's single attempt as itself, a run's single lease connection as itself, a prompt's
node without an empty list. Structural checks on a real wake-up (timings: ``benchmarks/``).
"""

from __future__ import annotations

import gc
from typing import Any

from support_sessions import open_session, user_message

from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession


async def test_a_woken_workers_usual_turn_keeps_its_small_records_untracked() -> None:
    hub, client, agent = await open_session()
    runs = []
    for i in range(3):
        sent = await client.view.send(user_message(f"question {i}"))
        run = await agent.create_run(sent.invocation.to_json())
        await run.start()
        await run.pipe(build_response_events([ScriptedText(f"Answer {i}.")], seed=i))
        await run.end("complete")
        runs.append(run.run_id)
    trigger = await client.view.send(user_message("And now?"))
    woken = AgentSession(hub.client("agent").channel("chat"))  # a fresh worker: the history folded
    await woken.connect()
    current = await woken.create_run(trigger.invocation.to_json())
    await current.view.load_all()
    tree: Any = woken.tree
    gc.collect()
    assert {r for r in runs if r in tree._nodes} == set(runs)
    for run_id in runs:
        entry = tree._nodes[run_id]
        assert entry.output_attempts and not gc.is_tracked(entry.output_attempts)  # one attempt per step
        assert entry.step_order  # made with the run's first step
        streams = woken.open_streams._by_run[run_id]
        assert streams and not gc.is_tracked(streams)  # closed streams: versions only
        assert not gc.is_tracked(tree.fence._connections[run_id])  # one lease connection
    prompts = [e for e in tree._nodes.values() if e.node.kind == "input"]
    assert len(prompts) == 4
    assert all(not isinstance(v, (list, set)) or v for e in prompts for v in vars(e).values())
    for session in (client, agent, woken):
        await session.close()
