"""Headless Chromium for the page tests: Debian's ``/usr/bin/chromium``, driven from node by
``playwright-core`` with ``executablePath`` (no browser download). ``scripts/test.sh`` installs it
up front (an announced ``apt-get install chromium`` step) where it can; a test never installs it.
Also what both page tests need around it: the page built, and its server process stopped."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from support_page_server import ROOT, load_example_server

CHROMIUM = Path("/usr/bin/chromium")


def chromium_missing() -> str | None:
    """Why Chromium cannot be used here (the test skips saying so), or None when it is installed."""
    if CHROMIUM.exists():
        return None
    return (f"Chromium is not installed ({CHROMIUM}); scripts/test.sh installs it with "
            "`apt-get install chromium` where apt-get is available")


def page_built(example: str, what: str, packages: Sequence[str] = ()) -> Path:
    """Skip without Chromium; fail without node and npm; ``npm ci`` in ``examples/<example>`` when one
    of ``packages`` is missing; the page's bundle built by its server's ``ensure_bundle`` (which
    installs and rebuilds only when needed). One build at a time on this machine: pytest-xdist
    workers share the folder."""
    reason = chromium_missing()
    if reason:
        pytest.skip(reason)
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail(f"node and npm are needed for the {what} (they install the page's packages)")
    folder = ROOT / "examples" / example
    with open(Path(tempfile.gettempdir()) / f"ait-{example}-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if any(not (folder / "node_modules" / p).exists() for p in packages):
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder, check=True,
                           timeout=300)
        return Path(load_example_server(example).ensure_bundle())


def stop_server(proc: subprocess.Popen[str]) -> str:
    """Terminate an example server (killed when it does not stop in 10 s); its stderr."""
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err or ""
