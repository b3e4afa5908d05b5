"""``useChat`` over Ably, end to end in node (no browser): 0.8.0's ``createChatTransport`` (from
``@ably/ai-transport/vercel``) under the AI SDK's own chat engine (``AbstractChat`` of ``ai``, what
``@ai-sdk/react``'s ``useChat`` wraps), talking over the emulator to the Python agent of
``examples/usechat/chat_agent.py`` (``UIMessageCodec``).

The chat sends a question; the transport publishes it and POSTs the run's invocation; the test wakes a
Python worker process with it, which streams the answer and a gated ``get_weather`` call with a
``tool-approval-request`` and suspends. The chat shows the streamed text and the call awaiting
approval; ``addToolApprovalResponse`` makes ``useChat`` (``sendAutomaticallyWhen``) publish the answer
and POST again; a *fresh* worker process (nothing but the channel) resumes the run, executes the call
and streams the final answer, which the chat shows on the same assistant message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support_emulator import emulator_thread  # noqa: F401  (fixture)

from ai_transport.cli.scenario import get_weather
from ai_transport.emulator.client import connect_info

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "examples" / "usechat" / "chat_agent.py"
QUESTION = "What's the weather in Paris right now? Should I take an umbrella?"

pytestmark = [pytest.mark.timeout(120), pytest.mark.js]


def wake_worker(emulator_url: str, invocation: dict[str, Any]) -> str:
    """One fresh agent worker process for one invocation (as a serverless function); its outcome."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(
        [sys.executable, str(AGENT), "--emulator", emulator_url, "--stream-delay", "0.005", json.dumps(invocation)],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return str(json.loads(r.stdout.strip().splitlines()[-1])["outcome"])


def tool_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for m in messages if m["role"] == "assistant" for p in m["parts"] if p["type"].startswith("tool-")]


def texts(message: dict[str, Any], kind: str = "text") -> list[str]:
    return [p["text"] for p in message["parts"] if p["type"] == kind]


def chat(node: Any, op: str, **args: Any) -> Any:
    return node.call("usechat", op, **args)


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_use_chat_streams_the_python_agent_and_a_fresh_worker_resumes_after_approval(
    node, emulator_thread, decision, request
) -> None:
    channel = f"usechat-{decision}-{os.getpid()}"
    cid = chat(node, "open", options=connect_info(emulator_thread, client_id="alice"), channel=channel)["id"]
    try:
        chat(node, "send", id=cid, text=QUESTION)
        first = chat(node, "nextInvocation", id=cid)
        assert first["sessionName"] == channel and isinstance(first["inputEventId"], str)
        assert wake_worker(emulator_thread.url, first) == "suspended"

        pending = chat(node, "waitFor", id=cid, until="approval")
        assert pending["posts"] == ["/api/chat"] and pending["errors"] == []
        user, assistant = pending["messages"]
        assert user["role"] == "user" and texts(user) == [QUESTION]
        assert texts(assistant, "reasoning")[0].startswith("The user asks about the current weather in Paris.")
        assert texts(assistant) == ["Let me look up the current weather in Paris for you."]
        (part,) = tool_parts(pending["messages"])
        assert part["type"] == "tool-get_weather" and part["state"] == "approval-requested"
        assert part["input"] == {"city": "Paris", "unit": "celsius"}
        # useChat rendered the text as it streamed: many growing lengths, not one final piece.
        growth = sorted(set(pending["shown"]))
        assert len(growth) >= 5 and growth[-1] == sum(len(t) for t in texts(assistant) + texts(assistant, "reasoning"))
        # The session's view (the channel, folded by 0.8.0's codec) agrees with useChat's state.
        assert [m["id"] for m in pending["view"]] == [user["id"], assistant["id"]]

        approved = decision == "approve"
        chat(node, "approve", id=cid, approved=approved, reason=None if approved else "not today")
        second = chat(node, "nextInvocation", id=cid)  # useChat's automatic continuation POST
        assert second["sessionName"] == channel and second["inputEventId"] != first["inputEventId"]
        assert wake_worker(emulator_thread.url, second) == "complete"  # a fresh process, the channel only

        final = chat(node, "waitFor", id=cid, until="answered")
        assert final["errors"] == [] and final["posts"] == ["/api/chat", "/api/chat"]
        assert [m["role"] for m in final["messages"]] == ["user", "assistant"]
        (done,) = tool_parts(final["messages"])
        answer = texts(final["messages"][-1])
        # useChat continues the suspended assistant message in place (a continuation: same id, one
        # bubble); on the channel the resumed pass is its own message of the same run, and the tool
        # call's outcome is folded into the first pass's message.
        assert final["messages"][-1]["id"] == assistant["id"]
        assert [m["role"] for m in final["view"]] == ["user", "assistant", "assistant"]
        assert final["view"][1]["id"] == assistant["id"] != final["view"][2]["id"]
        (on_channel,) = tool_parts(final["view"])
        assert {k: on_channel.get(k) for k in ("toolCallId", "state", "output")} == {
            k: done.get(k) for k in ("toolCallId", "state", "output")
        }
        assert texts(final["view"][2]) == answer[1:]
        if approved:
            weather = get_weather("Paris")
            assert done["state"] == "output-available" and done["output"] == weather
            assert answer[-1].startswith(f"Right now in Paris it is {weather['temperature']}°C with "
                                         f"{weather['conditions']}")
        else:
            assert done["state"] == "output-denied" and done["approval"]["approved"] is False
            # 0.8.0's fold keeps no denial reason (approval {id: '', approved: false}), so neither does
            # the agent's: it answers without one.
            assert answer[-1].startswith("I did not check the live weather (you did not approve the lookup)")
        assert answer[0] == "Let me look up the current weather in Paris for you."
    finally:
        chat(node, "close", id=cid)
