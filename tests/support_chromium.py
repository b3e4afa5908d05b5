"""Headless Chromium for the page tests: Debian's ``/usr/bin/chromium``, driven from node by
``playwright-core`` with ``executablePath`` (no browser download). ``scripts/test.sh`` installs it
up front (an announced ``apt-get install chromium`` step) where it can; a test never installs it."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")


def chromium_missing() -> str | None:
    """Why Chromium cannot be used here (the test skips saying so), or None when it is installed."""
    if CHROMIUM.exists():
        return None
    return (f"Chromium is not installed ({CHROMIUM}); scripts/test.sh installs it with "
            "`apt-get install chromium` where apt-get is available")
