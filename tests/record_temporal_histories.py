"""Record the workflow histories ``test_temporal_replay.py`` replays (run by hand, not collected).

    .venv/bin/python tests/record_temporal_histories.py

Runs ``WithRunProbe`` (ok / fail / cancel), ``FramingProbe`` (end / suspend_then_fail) and the
demo's ``WeatherTurn`` (a tool round, then a suspension) on a local dev server, with stand-in
activities under the real activity type names, and writes each history as Temporal's JSON to
``tests/fixtures/temporal/``. Re-record only when a change of the workflow side's command sequence
is intended: in-flight workflows of the old sequence would fail to replay after an upgrade.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporal_workflows import FramingProbe, WithRunProbe
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from ai_transport.cli.temporal_agent import WeatherTurn
from ai_transport.temporal.dev_server import DevServer

OUT = Path(__file__).resolve().parent / "fixtures" / "temporal"
INVOCATION = {"inputEventId": "evt-1", "sessionName": "chat-1"}


def stand_ins() -> list[Any]:
    turns: dict[str, int] = {}

    @activity.defn(name="openRun")
    async def open_run(input: dict[str, Any]) -> dict[str, Any]:
        return {"runId": input["invocationId"], "invocationId": input["invocationId"]}

    @activity.defn(name="endRun")
    async def end_run(input: dict[str, Any]) -> None:
        return None

    @activity.defn(name="suspendRun")
    async def suspend_run(input: dict[str, Any]) -> None:
        return None

    @activity.defn(name="cleanupRun")
    async def cleanup_run(input: dict[str, Any]) -> None:
        return None

    @activity.defn(name="boom")
    async def boom(message: str) -> None:
        raise ApplicationError(message, non_retryable=True)

    @activity.defn(name="agentTurn")
    async def agent_turn(input: dict[str, Any]) -> dict[str, Any]:
        n = turns[input["ids"]["runId"]] = turns.get(input["ids"]["runId"], 0) + 1
        if n == 1:
            return {"kind": "tools", "calls": [{"call_id": "c1", "name": "lookup", "arguments": "{}"}]}
        return {"kind": "suspended"}

    @activity.defn(name="runTool")
    async def run_tool(input: dict[str, Any]) -> None:
        return None

    return [open_run, end_run, suspend_run, cleanup_run, boom, agent_turn, run_tool]


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    async with DevServer() as server:
        client = await Client.connect(server.address)
        async with Worker(
            client, task_queue="record", workflows=[WithRunProbe, FramingProbe, WeatherTurn], activities=stand_ins()
        ):
            runs: list[tuple[str, Any, Any]] = [
                ("with_run_ok", WithRunProbe.run, {"invocation": INVOCATION, "mode": "ok"}),
                ("with_run_fail", WithRunProbe.run, {"invocation": INVOCATION, "mode": "fail"}),
                ("framing_end", FramingProbe.run, {"invocation": INVOCATION, "mode": "end"}),
                ("framing_suspend_then_fail", FramingProbe.run, {"invocation": INVOCATION, "mode": "suspend_then_fail"}),
                ("weather_turn", WeatherTurn.run, INVOCATION),
            ]
            for name, run, arg in runs:
                handle = await client.start_workflow(
                    run, arg, id=f"record-{name}", task_queue="record", execution_timeout=timedelta(minutes=5)
                )
                try:
                    await handle.result()
                except Exception as e:
                    print(f"{name}: failed as intended ({type(e).__name__})")
                (OUT / f"{name}.json").write_text((await handle.fetch_history()).to_json())
            handle = await client.start_workflow(
                WithRunProbe.run, {"invocation": INVOCATION, "mode": "wait"}, id="record-with_run_cancel",
                task_queue="record", execution_timeout=timedelta(minutes=5),
            )
            while await handle.query(WithRunProbe.stage) != "body":
                await asyncio.sleep(0.05)
            await handle.cancel()
            try:
                await handle.result()
            except Exception as e:
                print(f"with_run_cancel: failed as intended ({type(e).__name__})")
            (OUT / "with_run_cancel.json").write_text((await handle.fetch_history()).to_json())
    print(f"wrote {sorted(p.name for p in OUT.glob('*.json'))}")


if __name__ == "__main__":
    asyncio.run(main())
