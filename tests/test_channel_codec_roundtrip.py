"""Recorded Responses streams through the codec onto every channel kind and back.

``ResponsesCodec.create_encoder(channel)`` publishes each recorded run; a subscriber attached from
the start, a late joiner (``history(until_attach=True)`` then live, one decoder), and plain history
each decode and fold the wire. All three must equal folding the recorded events directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support_channels import all_history, channel_kind, subscribed, unique_name  # noqa: F401
from support_codec_decoder import decode_fold, fold_events, message_id_of, recorded_runs

from ai_transport.codec import ResponsesCodec, reducer
from ai_transport.codec.decoder import Decoder

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "openai-responses"
STEMS = sorted(recorded_runs(FIXTURES)) if FIXTURES.exists() else []


def _decode_into(decoder: Decoder, state: Any, wire: list[dict[str, Any]]) -> None:
    for raw in wire:
        result = decoder.decode(raw)
        mid = message_id_of(raw)
        for ev in result.inputs:
            reducer.fold(state, "input", ev, mid, raw.get("serial", ""))
        for ev in result.outputs:
            reducer.fold(state, "output", ev, mid, raw.get("serial", ""))


@pytest.mark.parametrize("stem", STEMS)
async def test_recorded_stream_round_trips_through_the_channel(
    channel_kind: Any, fixtures_dir: Path, stem: str
) -> None:
    runs = recorded_runs(fixtures_dir)[stem]
    name = unique_name("codec")
    agent = await channel_kind.open(name, client_id="agent")
    watcher = await channel_kind.open(name, client_id="watcher")
    live = await subscribed(watcher)

    steps: list[dict[str, Any]] = []
    total = sum(len(r["events"]) for r in runs)
    join_at = total // 2
    late = late_rec = None
    seen = 0
    for run in runs:
        encoder = ResponsesCodec.create_encoder(agent)
        for event in run["events"]:
            if seen == join_at and late is None:
                late = await channel_kind.open(name, client_id="late")
                late_rec = await subscribed(late)
            await encoder.publish_output(event, run["messageId"])
            steps.append({"direction": "output", "event": event, "messageId": run["messageId"]})
            seen += 1
        await encoder.close()
    (sentinel,) = await agent.publish({"name": "test-end", "data": "."})
    for rec in (live, late_rec):
        assert rec is not None
        await rec.wait_for(lambda ms: any(m["serial"] == sentinel for m in ms), timeout=10)

    expected = fold_events(steps)
    assert expected or stem.startswith("openai-error")

    # 1. A subscriber attached from the start: creates + append fragments, decoded live.
    assert decode_fold(live.messages)["messages"] == expected
    # 2. Plain history, oldest first: every message once, as its aggregate.
    history = list(reversed(await all_history(watcher, limit=5)))
    assert decode_fold(history)["messages"] == expected
    # 3. A late joiner: history up to its attach point, then what it received live, one decoder.
    assert late is not None and late_rec is not None
    before = list(reversed(await all_history(late, limit=4, until_attach=True)))
    decoder, state = Decoder(), reducer.init()
    _decode_into(decoder, state, before + late_rec.messages)
    assert [m.to_dict() for m in reducer.get_messages(state)] == expected
