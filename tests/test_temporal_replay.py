"""Replay recorded workflow histories against the current workflow side (no server needed).

The workflow half (``with_run`` / ``open_run`` / ``RunHandle``) runs inside users' workflows, so an
upgrade of this package changes code in workflows already in flight: if its command sequence
changes, their replay fails. The histories in ``tests/fixtures/temporal/`` were recorded by
``tests/record_temporal_histories.py`` (see there before re-recording).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from temporal_workflows import FramingProbe, SkipsCleanupProbe, WithRunProbe
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from ai_transport.cli.temporal_agent import WeatherTurn
from ai_transport.temporal import AblyTransportPlugin

HISTORIES = sorted((Path(__file__).resolve().parent / "fixtures" / "temporal").glob("*.json"))


def history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(f"replay-{path.stem}", json.loads(path.read_text()))


def test_the_recorded_histories_cover_every_path():
    assert [p.stem for p in HISTORIES] == [
        "framing_end", "framing_suspend_then_fail", "weather_turn",
        "with_run_cancel", "with_run_fail", "with_run_ok",
    ]


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays_deterministically(path):
    replayer = Replayer(
        workflows=[WithRunProbe, FramingProbe, WeatherTurn], plugins=[AblyTransportPlugin(lambda name: None)]
    )
    result = await replayer.replay_workflow(history(path), raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


async def test_a_changed_command_sequence_fails_replay():
    """The control: a workflow that drops the cleanup does not replay the recorded failure."""
    path = next(p for p in HISTORIES if p.stem == "with_run_fail")
    replayer = Replayer(workflows=[SkipsCleanupProbe], plugins=[AblyTransportPlugin(lambda name: None)])
    result = await replayer.replay_workflow(history(path), raise_on_replay_failure=False)
    assert "Nondeterminism" in str(result.replay_failure)
