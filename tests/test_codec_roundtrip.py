"""Round trip: recorded Responses stream -> our encoder -> in-memory wire -> our decoder -> fold.

For every recorded response the folded message holds exactly the response's final output items
(the ``item`` of each ``response.output_item.done``, in order): text with its annotations and
logprobs, reasoning with the *done* ``encrypted_content`` and its streamed summaries, function calls
with their streamed arguments and final status. Checked on the live wire, on history (aggregates)
and on late joins — on a recorded in-memory wire and through the in-process channel (Ably's
fragment / first-sight-aggregate delivery, with and without append roll-up).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from support_codec_decoder import history_view, late_join, messages_of, recorded_runs

from ai_transport.codec.codec import ResponsesCodec


class RecordingWriter:
    """A writer that records what a live subscriber would receive (serials minted in order)."""

    def __init__(self) -> None:
        self.wire: list[dict[str, Any]] = []
        self._n = 0

    def _next(self) -> str:
        self._n += 1
        return f"{self._n:010d}"

    async def publish(self, message: Any) -> list[str]:
        serials = []
        for m in message if isinstance(message, list) else [message]:
            serial = self._next()
            serials.append(serial)
            msg = {"action": "message.create", "serial": serial, "version": {"serial": serial}}
            for key in ("name", "data", "extras"):
                if key in m:
                    msg[key] = copy.deepcopy(m[key])
            self.wire.append(msg)
        return serials

    async def _mutate(self, action: str, m: dict[str, Any]) -> str:
        version = self._next()
        msg = {"action": action, "serial": m["serial"], "version": {"serial": version}}
        for key in ("data", "extras"):
            if key in m:
                msg[key] = copy.deepcopy(m[key])
        self.wire.append(msg)
        return version

    async def append_message(self, message: dict[str, Any]) -> str:
        return await self._mutate("message.append", message)

    async def update_message(self, message: dict[str, Any]) -> str:
        return await self._mutate("message.update", message)


async def _encode(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    writer = RecordingWriter()
    for run in runs:
        encoder = ResponsesCodec.create_encoder(writer, {"headers": {"role": "assistant"}})
        for event in run["events"]:
            await encoder.publish_output(event, run["messageId"])
        await encoder.close()
    return writer.wire


def _final_items(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["item"] for e in events if e.get("type") == "response.output_item.done"]


@pytest.fixture(scope="module")
def encoded(fixtures_dir):
    out = {}
    for stem, runs in recorded_runs(fixtures_dir).items():
        out[stem] = (runs, asyncio.run(_encode(runs)))
    return out


STEMS = [
    "azure-text.1",
    "openai-error.1",
    "openai-issue-11239.1",
    "openai-issue-11239.2",
    "openai-reasoning-encrypted-content.1",
]


@pytest.mark.parametrize("stem", STEMS)
def test_round_trip_folds_to_the_final_output_items(encoded, stem):
    runs, wire = encoded[stem]
    expected = [
        {
            "codecMessageId": run["messageId"],
            "message": {"role": "assistant", "items": _final_items(run["events"])},
        }
        for run in runs
        if _final_items(run["events"])
    ]
    assert messages_of(wire) == expected
    assert messages_of(history_view(wire)) == expected
    for k in range(len(wire) + 1):
        assert messages_of(late_join(wire, k)) == expected, k


@pytest.mark.js
@pytest.mark.parametrize("stem", STEMS)
def test_our_wire_through_the_reference_decoder_folds_to_the_final_items(node, encoded, stem):
    """Our encoder's wire, decoded and folded by the real @ably/ai-transport 0.8.0 in node, gives
    the recorded final output items — live, from history, and for a late join half-way."""
    runs, wire = encoded[stem]
    expected = [
        {"codecMessageId": run["messageId"], "message": {"role": "assistant", "items": _final_items(run["events"])}}
        for run in runs
        if _final_items(run["events"])
    ]
    views = [wire, history_view(wire), late_join(wire, len(wire) // 2)]
    results = node.call("codec_decoder", "decodeFoldBatch", wires=views)
    for view, js in zip(views, results):
        assert js["foldError"] is None and js["getMessagesError"] is None
        assert js["messages"] == expected
        assert js["messages"] == messages_of(view)  # and ours agrees on the same view


def test_round_trip_keeps_the_done_encrypted_content_and_summaries(encoded):
    runs, wire = encoded["openai-reasoning-encrypted-content.1"]
    events = runs[0]["events"]
    added = next(
        e["item"]
        for e in events
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "reasoning"
    )
    done = next(
        e["item"]
        for e in events
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"
    )
    assert added["encrypted_content"] != done["encrypted_content"]  # the recorded stream rotates it
    reasoning = messages_of(wire)[0]["message"]["items"][0]
    assert reasoning["encrypted_content"] == done["encrypted_content"]
    summary = "".join(e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta")
    assert reasoning["summary"] == [{"type": "summary_text", "text": summary}]
    calls = [i for m in messages_of(wire) for i in m["message"]["items"] if i["type"] == "function_call"]
    assert len(calls) == 3 and all(
        c["status"] == "completed" and c["arguments"].startswith("{") for c in calls
    )


def test_round_trip_wire_equals_the_reference_encoders_wire(node, encoded):
    """Our encoder's wire decodes to the same events as the reference encoder's wire (both decoded here)."""
    from support_codec_decoder import decode_fold

    for stem, (runs, wire) in encoded.items():
        js_wire = node.call("codec_decoder", "encodeWire", runs=runs)["wire"]
        assert decode_fold(wire) == decode_fold(js_wire), stem


# ---------------------------------------------------------------------------------------------
# Through a real channel implementation (the in-process hub: Ably's delivery semantics)


async def _through_hub(runs: list[dict[str, Any]], attach_at: int, rollup: float):
    from ai_transport.channels.memory import InProcessHub

    hub = InProcessHub(append_rollup_window=rollup)
    publisher = hub.channel("conv", client_id="agent")
    early: list[dict[str, Any]] = []
    early_ch = hub.channel("conv", client_id="early")
    await early_ch.subscribe(early.append)
    late_live: list[dict[str, Any]] = []
    late_history: list[dict[str, Any]] = []
    late_ch = hub.channel("conv", client_id="late")

    async def attach_late() -> None:
        await late_ch.subscribe(late_live.append)
        page = await late_ch.history(until_attach=True, direction="forwards", limit=1000)
        late_history.extend(page.items)

    n = 0
    for run in runs:
        encoder = ResponsesCodec.create_encoder(publisher, {"headers": {"role": "assistant"}})
        for event in run["events"]:
            if n == attach_at:
                await attach_late()
            n += 1
            await encoder.publish_output(event, run["messageId"])
        await encoder.close()
    if not late_ch.attach_serial:
        await attach_late()
    await asyncio.sleep(rollup * 3 + 0.05)  # let deliveries (and roll-up windows) drain
    history = await publisher.history(direction="forwards", limit=1000)
    await hub.client("x").close()
    for ch in (publisher, early_ch, late_ch):
        await ch.close()
    return early, late_history + late_live, history.items


@pytest.mark.parametrize("rollup", [0.0, 0.005])
def test_round_trip_through_the_in_process_channel(fixtures_dir, rollup):
    """Live subscriber, late joiner (history until attach + live, at several points) and history:
    all fold to the final items, with exact and with conflated (rolled-up) append delivery."""
    runs = recorded_runs(fixtures_dir)["openai-reasoning-encrypted-content.1"]
    expected = [
        {
            "codecMessageId": run["messageId"],
            "message": {"role": "assistant", "items": _final_items(run["events"])},
        }
        for run in runs
    ]
    total = sum(len(run["events"]) for run in runs)
    for attach_at in (0, 7, total // 3, total // 2, total - 5, total + 1):
        early, late, history = asyncio.run(_through_hub(runs, attach_at, rollup))
        assert messages_of(early) == expected
        assert messages_of(late) == expected, attach_at
        assert messages_of(history) == expected
        assert any(m["action"] == "message.append" for m in early)
        assert all(m["action"] != "message.append" for m in history)
