"""The browser example's reload while a resumed run streams, with the page's own packages in node.

The page (``examples/browser/app.js``: ably-js + @ably/ai-transport 0.8.0) reloads while the run the
user approved streams its final answer; a live wire of that run reaches the page's session before
its history answer does (forced here: ``tests/js/handlers/browser_reload.mjs`` hands the history
answer over only once that wire was delivered; in the Chromium test a loaded machine did it about
once in six runs). The 0.8.0 tree then places the run by that wire's ``parent`` header, which for a
resumed run's output names the assistant message the approval answered (a message of the same
run, on every agent's wire, the JS agent's here as ours), so the run hangs under itself and the
page shows the user's question alone, for good. The page therefore holds the live messages until
the history is folded (``examples/browser/live_hold.js``); the run, the answer so far and then the
rest of it show as they should. Both agent invocations are the reference JS agent. Without the
hold the reference tree hides the run (pinned, so a release that fixes it says the hold can go); our
own tree, fed the same wires in the same order, places the run by its ``ai-run-start``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from support_emulator import emulator_thread  # noqa: F401  (fixture)

from ai_transport.channels.channel import action_name
from ai_transport.cli.scenario import run_tool, scripted_turn
from ai_transport.codec import ResponsesCodec
from ai_transport.conversation.tree import Tree, WireApplier
from ai_transport.emulator import EmulatorThread
from ai_transport.emulator.client import connect_info

pytestmark = pytest.mark.js

QUESTION = "What's the weather in Paris right now? Should I take an umbrella?"


def _reload_while_the_resumed_run_streams(emulator_thread: EmulatorThread, node: Any, *, hold: bool,
                                          tag: str) -> dict[str, Any]:
    channel = f"browser-reload-{tag}-{os.getpid()}"
    page_opts = connect_info(emulator_thread, client_id="browser-user")
    agent_opts = connect_info(emulator_thread, client_id="agent")

    def js(op: str, **kw: Any) -> Any:
        return node.call("session", op, **kw)

    user = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": QUESTION}]}]
    first = scripted_turn({"input": user})
    call = next(e["item"] for e in first
                if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call")
    output = run_tool("get_weather", call["arguments"])
    second = scripted_turn({"input": [*user, call, {"type": "function_call_output", "call_id": call["call_id"],
                                                   "output": output}]})
    asker = js("clientOpen", options=page_opts, channel=channel)
    try:
        sent = js("clientSend", id=asker["id"], text=QUESTION)
        r1 = js("agentHandle", options=agent_opts, channel=channel, invocation=sent["invocation"],
                gated=["get_weather"], turns=[first])
        assert r1["outcome"] == "suspended"
        js("clientWait", id=asker["id"], runId=r1["runId"], status="suspended")
        answer = js("clientApprove", id=asker["id"], approved=True)
    finally:
        js("clientClose", id=asker["id"])
    result: dict[str, Any] = node.call(
        "browser_reload", "reloadWhileResumedRunStreams", clientOptions=page_opts, agentOptions=agent_opts,
        channel=channel, invocation=answer["invocation"], turn=second, toolOutputs={"get_weather": output},
        hold=hold)
    assert result["runId"] == r1["runId"]  # one run, resumed
    result["weather"] = json.loads(output)
    return result


def test_the_reloaded_page_shows_the_resumed_run_and_its_answer_to_the_end(emulator_thread, node):
    got = _reload_while_the_resumed_run_streams(emulator_thread, node, hold=True, tag="held")
    run = got["runId"]
    after = got["afterLoad"]
    assert after["runs"] == [{"runId": run, "status": "active"}], after
    roles = [m["role"] for m in after["messages"]]
    assert roles[0] == "user" and after["messages"][0]["text"] == QUESTION
    assert roles[1:] and set(roles[1:]) == {"assistant"}, after
    assert after["messages"][1]["text"] == "Let me look up the current weather in Paris for you."
    assert "function_call" in after["messages"][1]["items"]
    assert any("function_call_output" in m["items"] for m in after["messages"]), after
    answer_so_far = after["messages"][-1]["text"]
    assert answer_so_far and "Right now in Paris it is".startswith(answer_so_far.strip()), after  # so far

    final = got["final"]
    assert final["runs"] == [{"runId": run, "status": "complete"}], final
    weather = got["weather"]
    assert final["messages"][-1]["text"].startswith(
        f"Right now in Paris it is {weather['temperature']}°C with {weather['conditions']}")
    assert final["messages"][-1]["text"].startswith(answer_so_far) and final["messages"][-1]["text"] != answer_so_far
    assert [m["role"] for m in final["messages"]] == roles  # the same conversation, the answer grown


def test_without_the_hold_the_reference_tree_hides_the_resumed_run(emulator_thread, node):
    """Why the page holds live messages: the same reload with the 0.8.0 session as it comes shows the
    question alone, before and after the run ends (if a later release fixes this, the hold in
    ``live_hold.js`` can go)."""
    got = _reload_while_the_resumed_run_streams(emulator_thread, node, hold=False, tag="bare")
    for seen in (got["afterLoad"], got["final"]):
        assert seen["runs"] == [], seen
        assert [(m["role"], m["text"]) for m in seen["messages"]] == [("user", QUESTION)], seen



def _inbound(aggregate: dict[str, Any]) -> dict[str, Any]:
    """A stored message as a subscriber of ours receives it (decoded data, the action's name)."""
    out = {k: v for k, v in aggregate.items() if k not in ("data", "encoding", "action")}
    data = aggregate.get("data")
    out["data"] = json.loads(data) if aggregate.get("encoding") == "json" else data
    out["action"] = action_name(aggregate.get("action")) or "message.create"
    return out


def test_our_tree_places_the_resumed_run_by_its_run_start_whichever_wire_comes_first(emulator_thread, node):
    """The Python port meets the same wires in the failing order (the resumed run's answer first, as
    the reloaded page met it live, then the history oldest first) and shows the run (PARITY I12)."""
    got = _reload_while_the_resumed_run_streams(emulator_thread, node, hold=True, tag="ours")
    log = next(v for k, v in emulator_thread.emulator.store.channels.items()
               if k.startswith("browser-reload-ours-"))
    wires = [_inbound(log.entries[serial].aggregate) for serial in log.order]
    answer = next(w for w in reversed(wires) if w.get("name") == "ai-output"
                  and w["extras"]["ai"]["transport"].get("stream") == "true")
    parent = answer["extras"]["ai"]["transport"]["parent"]
    tree = Tree(ResponsesCodec)
    applier = WireApplier(tree, ResponsesCodec.create_decoder())
    for wire in [answer, *wires]:
        applier.apply(wire)
        tree.emit_ably_message(wire)
    run = tree.get_run_node(got["runId"])
    assert run is not None and tree.get_node_by_codec_message_id(parent) is run  # its parent is its own
    assert run.parent != parent and run.status == "complete"
    assert [getattr(n, "run_id", None) for n in tree.visible_nodes()][-1] == got["runId"]
