"""Headless Chromium for the page tests: Debian's ``/usr/bin/chromium`` (installed with apt-get when
missing and this is root), driven from node by ``playwright-core`` with ``executablePath`` (no browser
download)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")


def install_chromium() -> str | None:
    """Install Debian's chromium if missing; the reason it cannot be had, or None when available."""
    if CHROMIUM.exists():
        return None
    if shutil.which("apt-get") is None:
        return "Chromium is not installed and apt-get is not available to install it"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "Chromium is not installed and installing it with apt-get needs root"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True, timeout=300)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], env=env, check=True, capture_output=True,
                       timeout=600)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        out = getattr(e, "stderr", b"") or b""
        return f"apt-get could not install chromium: {out.decode(errors='replace')[-400:]}"
    return None if CHROMIUM.exists() else "apt-get ran but /usr/bin/chromium is still missing"
