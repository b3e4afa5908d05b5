"""Real worker processes (``tests/durable_worker.py``) over the emulator, driven by JSON lines, for
the lease and fleet tests: each holds a ``LEASE`` s lease; ``fleet`` is three of them per module."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support_emulator import unique_channel
from support_sessions import approve_call, user_message, wait_status

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.sessions.client import ClientSession

WORKER = Path(__file__).resolve().parent / "durable_worker.py"
LEASE = 1.0  # the workers' lease (seconds)


class Proc:
    """One worker process, driven by JSON lines (started by :func:`spawn`, which waits for it)."""

    def __init__(self, url: str) -> None:
        self.p = subprocess.Popen(
            [sys.executable, str(WORKER), url, str(LEASE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )

    def read(self) -> dict[str, Any]:
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"worker exited ({self.p.poll()})")
        return dict(json.loads(line))

    def send(self, cmd: dict[str, Any]) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()

    async def call(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.send(cmd)
        reply = await asyncio.to_thread(self.read)
        assert "error" not in reply, reply
        return reply

    def kill(self) -> None:
        self.p.kill()
        self.p.wait(10)

    def stop(self) -> None:
        """End it (resumed first if a test left it SIGSTOPped); killed after 10 s."""
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGCONT)
            assert self.p.stdin is not None
            self.p.stdin.close()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def spawn(url: str, n: int) -> list[Proc]:
    """``n`` workers started together, each ready."""
    procs = [Proc(url) for _ in range(n)]
    for p in procs:
        assert p.read() == {"ready": True}
    return procs


@pytest.fixture(scope="module")
def fleet(emulator_thread: Any) -> Iterator[list[Proc]]:
    """Three long-lived workers for the module."""
    procs = spawn(emulator_thread.url, 3)
    yield procs
    for p in procs:
        p.stop()


async def suspended(realtime: Any, fleet: list[Proc], prefix: str) -> tuple[ClientSession, AblyChannel, str, Any]:
    """A fresh channel where worker 0 suspended a run on a gated call and the client approved it:
    the client, its channel, the run id and the approval's send."""
    name = unique_channel(prefix)
    channel = AblyChannel(name, realtime)
    client = ClientSession(channel)
    await client.connect()
    sent = await client.view.send(user_message("Weather in Paris?"))
    first = await fleet[0].call({"op": "handle", "channel": name, "invocation": sent.invocation.to_json()})
    await wait_status(client.view, first["run_id"], "suspended")
    answer, _ = await approve_call(client.view, first["run_id"])
    return client, channel, first["run_id"], answer


def tool_outputs(messages: list[Any]) -> int:
    """How many tool outputs the messages carry."""
    return sum(1 for m in messages for i in m.message.items if i.get("type") == "function_call_output")
