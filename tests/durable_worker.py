"""A long-lived agent worker process for the fleet tests (``test_durable_fleet.py``, ``test_durable_leases.py``).

``python tests/durable_worker.py EMULATOR_URL LEASE`` keeps one realtime connection to the
emulator as client ``agent`` and answers JSON-line commands on stdin with one JSON line each:

* ``{"op": "handle", "channel", "invocation", "tool_seconds"}``: one wake-up, like an HTTP request
  (start / resume the run, run the owed calls through claims, call the scripted model, suspend or
  end) -> ``{"run_id", "executed", "yielded", "status"}``.
  ``"tool_log"``: a file the tool appends one line to per execution (counted across processes).
  A worker that takes a run over from a dead one re-attempts the step the dead one left ``failed``.
* ``{"op": "resume_and_die", ...}``: as ``handle`` (a resume: the tool runs), then the final answer
  stops mid-stream; prints ``{"streaming": true, "run_id"}`` and hangs (the test kills it).
* ``{"op": "pause_in_tool", ...}``: as ``handle``; the tool prints ``{"in_tool": true}`` then sleeps
  ``tool_seconds`` (the test SIGSTOPs the process there); the reply adds ``"lost"`` (its lease).
* ``{"op": "claim_and_hang", ...}``: as ``handle`` but the tool never returns; prints
  ``{"claimed": true}`` when it is about to run (the test then kills the process).
* ``{"op": "stream_and_hang", "channel", "invocation"}``: start the run and stream a model answer
  that stops mid-way; prints ``{"streaming": true, "run_id", "invocation_id"}`` (the test kills it).
* ``{"op": "adopt", "channel", "invocation", "run_id", "invocation_id"}``: a recovery worker adopts the
  run (``load`` closes what the dead worker left open), reads the model input (104090 if anything
  folded from history is tampered), re-attempts its step and ends the run -> ``{"run_id", "step_id",
  "tampered"}``.

Any command may carry ``"signing_key"`` (the agent session's ``signing_key``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support_sessions import Worker, model_stream

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.emulator.client import ably_realtime
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.tools import gate_calls


def say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class ToolWorker(Worker):
    def __init__(self, seconds: float, hang: bool = False, log: str | None = None, announce: bool = False) -> None:
        super().__init__()
        self.seconds = seconds
        self.hang = hang
        self.log = log
        self.announce = announce

    async def execute(self, call: Any) -> str:  # type: ignore[override]
        if self.hang:
            say({"claimed": True})
            await asyncio.Event().wait()
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(f"{os.getpid()} {call.get('call_id')}\n")
        if self.announce:
            say({"in_tool": True})
        await asyncio.sleep(self.seconds)
        return super().execute(call)

    async def handle(self, session: AgentSession, body: Any, dying: bool = False) -> Any:  # type: ignore[override]
        """One wake-up (see :meth:`Worker.handle`), re-attempting a step a dead worker left failed."""
        run = await session.create_run(body)
        await run.start()
        await run.view.load_all()
        while True:
            owed = await run.run_owed_calls(self.execute)
            if owed is None:
                await run.suspend()
                return run
            if run.yielded:  # another worker holds the run: publish nothing more
                await run.end("cancelled")
                return run
            items = run.input_items()
            retry = run._last_step_reason == "failed"  # the previous worker died mid-step
            while retry and items and (items[-1].get("role") == "assistant" or items[-1].get("type") == "reasoning"):
                items.pop()  # its partial answer is replaced by this attempt
            last = items[-1] if items else {}
            if not retry and last.get("type") == "message" and last.get("role") == "assistant":
                await run.end("complete")
                return run
            step = run.create_step()
            await step.start()
            events = dying_model(items, run) if dying else self.model(items)
            result = await step.pipe(gate_calls(events, lambda item: item.get("name") in self.gated))
            await step.end()
            if result.reason != "complete":
                await run.end(result.reason, result.error)
                return run


async def dying_model(items: list[dict[str, Any]], run: Any) -> Any:
    """The scripted answer, stopping for good after three text deltas (a worker about to die): once
    they are on the channel, says ``streaming`` and hangs until killed."""
    deltas = 0
    async for event in model_stream(items):
        yield event
        deltas += event.get("type") == "response.output_text.delta"
        if deltas == 3:
            await asyncio.sleep(0.3)
            await run.drain()
            say({"streaming": True, "run_id": run.run_id, "invocation_id": run.invocation_id})
            await asyncio.Event().wait()


async def serve(url: str, lease: float) -> None:
    realtime = ably_realtime(url, client_id="agent")
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    say({"ready": True})
    while True:
        line = await reader.readline()
        if not line:
            break
        cmd = json.loads(line)
        channel = AblyChannel(cmd["channel"], realtime)
        session = AgentSession(channel, lease=lease, signing_key=cmd.get("signing_key"))
        try:
            await session.connect()
            op = cmd["op"]
            if op in ("handle", "claim_and_hang", "pause_in_tool"):
                worker = ToolWorker(
                    float(cmd.get("tool_seconds", 0)),
                    hang=op == "claim_and_hang",
                    log=cmd.get("tool_log"),
                    announce=op == "pause_in_tool",
                )
                run = await worker.handle(session, cmd["invocation"])
                say(
                    {
                        "run_id": run.run_id,
                        "executed": len(worker.executed),
                        "yielded": run.yielded,
                        "lost": run.lease.lost,
                    }
                )
            elif op == "resume_and_die":
                worker = ToolWorker(0.0, log=cmd.get("tool_log"))

                await worker.handle(session, cmd["invocation"], dying=True)
            elif op == "stream_and_hang":
                run = await session.create_run(cmd["invocation"])
                await run.start()
                await run.view.load_all()
                await run.pipe(dying_model(run.input_items(), run))
            elif op == "adopt":
                run = session.adopt_run(cmd["invocation"], cmd["run_id"], cmd["invocation_id"])
                await run.load(timeout=10)
                run.input_items()  # raises 104090 when the conversation is reported tampered
                step = run.create_step()
                await step.start()
                await step.pipe(build_response_events([ScriptedText("Recovered answer.")], seed=9))
                await step.end()
                await run.end("complete")
                say({"run_id": run.run_id, "step_id": step.step_id, "tampered": len(session.tampered)})
        except Exception as exc:  # report, keep serving
            say({"error": f"{type(exc).__name__}: {exc}", "code": getattr(exc, "code", None)})
        finally:
            await session.detach()
            await channel.close()
    await realtime.close()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], float(sys.argv[2])))
