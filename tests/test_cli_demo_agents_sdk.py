"""``ai-transport demo --agents-sdk``: the same transcript as the demo's own agent, with the agent
written with the OpenAI Agents SDK (run as a subprocess on the embedded in-process channel)."""

from __future__ import annotations

import pytest

pytest.importorskip("agents")

from test_cli_demo import check_approved, check_denied, cli


def test_demo_with_the_agents_sdk_approves():
    r = cli("demo", "--agents-sdk", "--no-color")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(in-process)" in r.stdout and "agent: written with the OpenAI Agents SDK" in r.stdout
    check_approved(r.stdout)
    assert "trace" not in r.stderr  # no trace export attempted without a key


def test_demo_with_the_agents_sdk_denies_with_a_reason():
    r = cli("demo", "--agents-sdk", "--no-color", "--deny", "keep my location private")
    assert r.returncode == 0, r.stdout + r.stderr
    check_denied(r.stdout, "keep my location private")
