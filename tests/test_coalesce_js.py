"""A coalesced stream (fewer, larger appends under a publish budget) renders identically in the
reference JS package: our encoder's wire through a budgeted writer, decoded and folded by
``@ably/ai-transport@0.8.0`` in node, live, from history and for a late join, gives the recorded
final items, as our decoder does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support_codec_decoder import history_view, late_join, messages_of, recorded_runs
from test_codec_roundtrip import STEMS, RecordingWriter

from ai_transport.channels.budget import PublishBudget
from ai_transport.codec.codec import ResponsesCodec


class BudgetedWriter(RecordingWriter):
    """A recording writer on a connection with a small publish budget: appends get merged."""

    def __init__(self) -> None:
        super().__init__()
        self.publish_budget = PublishBudget(400, burst=1)

    async def _mutate(self, action: str, m: dict[str, Any]) -> str:
        await asyncio.sleep(0.001)  # an acknowledgement takes a moment: later deltas pile up
        return await super()._mutate(action, m)


async def _encode(runs: list[dict[str, Any]], writer: RecordingWriter) -> list[dict[str, Any]]:
    for run in runs:
        encoder = ResponsesCodec.create_encoder(writer, {"headers": {"role": "assistant"}})
        for event in run["events"]:
            await encoder.publish_output(event, run["messageId"])
        await encoder.close()
    return writer.wire


@pytest.mark.js
@pytest.mark.parametrize("stem", [s for s in STEMS if not s.startswith("openai-error")])
def test_coalesced_wire_renders_identically_in_the_reference_decoder(node, fixtures_dir, stem):
    runs = recorded_runs(fixtures_dir)[stem]
    exact = asyncio.run(_encode(runs, RecordingWriter()))
    coalesced = asyncio.run(_encode(runs, BudgetedWriter()))
    appends = [sum(1 for m in w if m["action"] == "message.append") for w in (exact, coalesced)]
    assert appends[1] < appends[0]  # fewer, larger appends
    expected = messages_of(exact)
    assert expected
    views = [coalesced, history_view(coalesced), late_join(coalesced, len(coalesced) // 2)]
    results = node.call("codec_decoder", "decodeFoldBatch", wires=views)
    for view, js in zip(views, results):
        assert js["foldError"] is None and js["getMessagesError"] is None
        assert js["messages"] == expected
        assert messages_of(view) == expected
