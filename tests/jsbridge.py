"""Drive the reference implementation (``@ably/ai-transport@0.8.0``) in node from tests.

``NodeBridge`` keeps one ``node tests/js/bridge.mjs`` process alive and exchanges JSON lines with
it; handler modules live in ``tests/js/handlers/<name>.mjs``. ``ensure_node_modules()`` runs
``npm ci`` (or ``npm install``) in ``tests/js`` once when ``node_modules`` is missing.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

JS_DIR = Path(__file__).resolve().parent / "js"
_install_lock = threading.Lock()


class NodeError(RuntimeError):
    """An error thrown inside node; ``code``/``status_code`` as the JS error carried them."""

    def __init__(self, message: str, code: Any = None, status_code: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status_code = status_code


def node_available() -> bool:
    return shutil.which("node") is not None and shutil.which("npm") is not None


def ensure_node_modules() -> None:
    """Install the reference packages beside the tests (idempotent; one install at a time across
    threads and processes, e.g. pytest-xdist workers: an exclusive lock on ``tests/js/.npm-lock``)."""
    modules = JS_DIR / "node_modules"
    markers = (modules / "@ably" / "ai-transport" / "package.json", modules / "ai" / "package.json")
    if all(marker.exists() for marker in markers):
        return
    with _install_lock, open(JS_DIR / ".npm-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(marker.exists() for marker in markers):  # another worker installed them meanwhile
            return
        cmd = ["npm", "ci"] if (JS_DIR / "package-lock.json").exists() else ["npm", "install"]
        subprocess.run(
            cmd + ["--no-audit", "--no-fund", "--loglevel=error"],
            cwd=JS_DIR,
            check=True,
            timeout=600,
        )


class NodeBridge:
    """A persistent node process answering ``call(handler, op, **args)``."""

    def __init__(self) -> None:
        ensure_node_modules()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            ["node", str(JS_DIR / "bridge.mjs")],
            cwd=JS_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None if os.environ.get("AIT_NODE_STDERR") else subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )

    def call(self, handler: str, op: str, **args: Any) -> Any:
        with self._lock:
            assert self._proc.stdin and self._proc.stdout
            req_id = next(self._ids)
            line = json.dumps({"id": req_id, "handler": handler, "op": op, "args": args}, ensure_ascii=False)
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
            reply = self._proc.stdout.readline()
            if not reply:
                raise RuntimeError(f"node bridge exited (code {self._proc.poll()})")
            msg = json.loads(reply)
            if msg.get("id") != req_id:
                raise RuntimeError(f"node bridge out of sync: {msg!r}")
            if not msg["ok"]:
                err = msg["error"]
                raise NodeError(err.get("message", ""), err.get("code"), err.get("statusCode"))
            return msg["result"]

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
