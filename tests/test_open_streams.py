"""The open-streams ledger a recovering worker reads (:mod:`ai_transport.conversation.open_streams`).

* whatever order a stream's views arrive in (live appends, history aggregates, newest page first),
  the ledger answers by the latest version: open while that view's status is ``streaming``;
* a closed stream is kept as its version only (a woken worker's history is mostly closed streams:
  nothing the cyclic GC tracks), and still decides which later view of it is newer.
"""

from __future__ import annotations

import gc
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ai_transport.conversation.open_streams import OpenStreams


def view(serial: str, version: str, status: str, action: str = "message.update") -> dict[str, Any]:
    transport = {"run-id": "r", "stream": "true", "status": status, "role": "assistant"}
    return {
        "name": "ai-output",
        "serial": serial,
        "action": action,
        "version": {"serial": version},
        "extras": {"ai": {"transport": transport, "codec": {"kind": "text"}}},
    }


def opened(streams: OpenStreams) -> list[tuple[str, str]]:
    return [(s.serial, s.version) for s in streams.open_streams("r")]


def test_a_closed_stream_is_kept_as_its_version_and_an_older_open_view_of_it_ignored() -> None:
    streams = OpenStreams()
    streams.note(view("s1", "s1", "streaming", "message.create"))
    streams.note(view("s2", "s2", "complete", "message.create"))
    assert opened(streams) == [("s1", "s1")]
    streams.note(view("s1", "v3", "complete", "message.append"))  # the closing append
    assert opened(streams) == []
    streams.note(view("s1", "v2", "streaming"))  # an older aggregate (a history page read later)
    assert opened(streams) == []
    gc.collect()
    assert not gc.is_tracked(streams._by_run["r"])  # versions only
    streams.note(view("s1", "v4", "streaming"))  # a newer view reopens it
    assert opened(streams) == [("s1", "v4")] and streams.open_streams("r", before="s1") == []


@given(
    statuses=st.lists(st.sampled_from(["streaming", "complete", "cancelled"]), min_size=1, max_size=8),
    order=st.randoms(use_true_random=False),
)
def test_the_latest_version_of_a_stream_decides_whatever_the_arrival_order(statuses: list[str], order: Any) -> None:
    views = [view("s1", f"v{i}", status, "message.append" if i else "message.create") for i, status in enumerate(statuses)]
    shuffled = list(views)
    order.shuffle(shuffled)
    streams = OpenStreams()
    for v in shuffled:
        streams.note(v)
    latest = len(statuses) - 1
    assert opened(streams) == ([("s1", f"v{latest}")] if statuses[-1] == "streaming" else [])
