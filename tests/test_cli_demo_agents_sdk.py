"""``ai-transport demo --agents-sdk``: the same transcript as the demo's own agent, with the agent
written with the OpenAI Agents SDK (run as a subprocess on the embedded in-process channel). The deny
path is covered in-process (tests/test_openai_agents.py) to keep the suite lean."""

from __future__ import annotations

import pytest

pytest.importorskip("agents")

from test_cli_demo import check_approved, cli


def test_demo_with_the_agents_sdk_approves():
    r = cli("demo", "--agents-sdk", "--no-color")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(in-process)" in r.stdout and "agent: written with the OpenAI Agents SDK" in r.stdout
    check_approved(r.stdout)
    assert "trace" not in r.stderr  # no trace export attempted without a key

