"""Shared fixtures: the node bridge to the reference implementation, and fixture paths."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from jsbridge import NodeBridge, node_available

ROOT = Path(__file__).resolve().parent.parent


def _fixtures_dir() -> Path:
    env = os.environ.get("AIT_FIXTURES")
    if env:
        return Path(env)
    # A copy of shared/fixtures/openai-responses lives in the repo (attribution in its README).
    return Path(__file__).resolve().parent / "fixtures" / "openai-responses"


FIXTURES = _fixtures_dir()

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def node() -> Iterator[NodeBridge]:
    """The reference implementation in node (skips where node is missing, fails if npm install fails)."""
    if not node_available():
        pytest.skip("node/npm not installed")
    bridge = NodeBridge()
    yield bridge
    bridge.close()


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``shared/fixtures/openai-responses`` (override with ``AIT_FIXTURES``)."""
    if not FIXTURES.exists():
        pytest.skip(f"recorded fixtures not found at {FIXTURES}")
    return FIXTURES


def load_chunks(path: Path) -> list[dict]:
    """Events of a recorded ``*.chunks.txt`` file (one JSON object per non-empty line)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
