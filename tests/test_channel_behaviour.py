"""One behavioural suite for every channel kind (in-process, AblyChannel on the emulator, raw SDK).

Each case asserts an Ably mutable-message behaviour ai_transport relies on (ably-protocol.md §5-§7).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support_channels import (  # noqa: F401 - channel_kind is a fixture
    all_history,
    channel_kind,
    essence,
    fold,
    subscribed,
    unique_name,
)

EXTRAS = {
    "headers": {
        "stream": "true",
        "status": "streaming",
        "x-ably-ai": '{"kind":"output_text","part":"{\\"type\\":\\"output_text\\"}"}',
        "unicode": "héllo ✓ 🚀 \u2028",
        "empty": "",
    },
    "ai": {"nested": [1, 2, {"k": None, "b": True, "f": False}], "n": -12345678901, "s": "  spaced  "},
}


async def test_publish_returns_increasing_serials_and_echoes(channel_kind: Any) -> None:
    name = unique_name("pub")
    ch = await channel_kind.open(name, client_id="alice")
    rec = await subscribed(ch)
    s1 = await ch.publish({"name": "ai-output", "data": "one"})
    s2 = await ch.publish({"name": "ai-output", "data": "two"})
    assert len(s1) == 1 and len(s2) == 1
    assert isinstance(s1[0], str) and s1[0] < s2[0]
    got = await rec.wait_count(2)
    assert [m["serial"] for m in got] == [s1[0], s2[0]]
    first = got[0]
    assert first["action"] == "message.create"
    assert first["name"] == "ai-output" and first["data"] == "one"
    assert first["clientId"] == "alice"
    assert first["connectionId"] and isinstance(first["connectionId"], str)
    assert first["id"] and first["id"] != got[1]["id"]
    assert isinstance(first["timestamp"], int) and first["timestamp"] > 1_600_000_000_000
    assert first["version"]["serial"] == first["serial"]
    assert ch.client_id == "alice"


async def test_batch_publish_is_atomic_and_ordered(channel_kind: Any) -> None:
    name = unique_name("batch")
    pub = await channel_kind.open(name, client_id="alice")
    sub = await channel_kind.open(name, client_id="bob")
    rec = await subscribed(sub)
    serials = await pub.publish([{"name": "ai-input", "data": f"part {i}"} for i in range(4)])
    assert len(serials) == 4 and serials == sorted(serials) and len(set(serials)) == 4
    got = await rec.wait_count(4)
    assert [m["serial"] for m in got] == serials
    assert [m["data"] for m in got] == [f"part {i}" for i in range(4)]
    assert all(m["clientId"] == "alice" for m in got)
    assert len({m["id"] for m in got}) == 4


async def test_append_fragments_live_in_order_with_the_name(channel_kind: Any) -> None:
    name = unique_name("append")
    pub = await channel_kind.open(name, client_id="agent")
    sub = await channel_kind.open(name, client_id="user")
    rec = await subscribed(sub)
    (serial,) = await pub.publish({"name": "ai-output", "data": "", "extras": {"headers": {"status": "streaming"}}})
    versions = []
    for i, piece in enumerate(["Hel", "lo", ", ", "world"]):
        versions.append(
            await pub.append_message({"serial": serial, "data": piece, "extras": {"headers": {"i": str(i)}}})
        )
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert versions[0] > serial
    got = await rec.wait_count(5)
    assert got[0]["action"] == "message.create" and got[0]["data"] == ""
    frags = got[1:]
    assert [m["action"] for m in frags] == ["message.append"] * 4
    assert [m["data"] for m in frags] == ["Hel", "lo", ", ", "world"]
    assert all(m["name"] == "ai-output" for m in frags)  # Ably carries the message's name on appends
    assert all(m["serial"] == serial for m in frags)
    assert [m["version"]["serial"] for m in frags] == versions
    assert [m["extras"] for m in frags] == [{"headers": {"i": str(i)}} for i in range(4)]


async def test_history_and_late_join_get_the_aggregate_as_update(channel_kind: Any) -> None:
    name = unique_name("agg")
    pub = await channel_kind.open(name, client_id="agent")
    (serial,) = await pub.publish({"name": "ai-output", "data": "", "extras": {"headers": {"status": "streaming"}}})
    await pub.append_message({"serial": serial, "data": "Hello", "extras": {"headers": {"status": "streaming"}}})
    last = await pub.append_message({"serial": serial, "data": "!", "extras": {"headers": {"status": "complete"}}})

    (h,) = await all_history(pub)
    assert h["action"] == "message.update"
    assert h["serial"] == serial and h["version"]["serial"] == last
    assert h["name"] == "ai-output" and h["data"] == "Hello!"
    assert h["extras"] == {"headers": {"status": "complete"}}

    late = await channel_kind.open(name, client_id="late")
    rec = await subscribed(late)
    v = await pub.append_message({"serial": serial, "data": " more", "extras": {"headers": {"status": "x"}}})
    v2 = await pub.append_message({"serial": serial, "data": "+", "extras": {"headers": {"status": "y"}}})
    got = await rec.wait_count(2)
    first, second = got[0], got[1]
    # First sight of a message created before attach: the aggregate, as an update.
    assert first["action"] == "message.update"
    assert first["data"] == "Hello! more" and first["name"] == "ai-output"
    assert first["serial"] == serial and first["version"]["serial"] == v
    assert first["extras"] == {"headers": {"status": "x"}}
    # Then fragments.
    assert second["action"] == "message.append" and second["data"] == "+"
    assert second["version"]["serial"] == v2


async def test_update_replaces_supplied_fields(channel_kind: Any) -> None:
    name = unique_name("update")
    pub = await channel_kind.open(name, client_id="agent")
    rec = await subscribed(pub)
    (serial,) = await pub.publish({"name": "ai-output", "data": "draft", "extras": {"headers": {"a": "1"}}})
    v = await pub.update_message({"serial": serial, "data": "final", "extras": {"headers": {"b": "2"}}})
    assert v > serial
    got = await rec.wait_count(2)
    upd = got[1]
    assert upd["action"] == "message.update" and upd["serial"] == serial
    assert upd["data"] == "final" and upd["name"] == "ai-output"
    assert upd["extras"] == {"headers": {"b": "2"}}
    assert upd["version"]["serial"] == v
    (h,) = await all_history(pub)
    assert (h["action"], h["data"], h["name"], h["extras"]) == (
        "message.update", "final", "ai-output", {"headers": {"b": "2"}}
    )
    v2 = await pub.update_message({"serial": serial, "name": "renamed", "data": "final2"})
    assert v2 > v
    (h,) = await all_history(pub)
    assert h["name"] == "renamed" and h["data"] == "final2" and h["version"]["serial"] == v2
    # An update always replaces data (none supplied -> none); name and extras only when supplied.
    await pub.update_message({"serial": serial})
    (h,) = await all_history(pub)
    assert h["data"] is None and h["name"] == "renamed" and h["extras"] == {"headers": {"b": "2"}}


async def test_append_replaces_extras_wholesale(channel_kind: Any) -> None:
    name = unique_name("wholesale")
    pub = await channel_kind.open(name, client_id="agent")
    (serial,) = await pub.publish({"name": "n", "data": "", "extras": {"headers": {"a": "1", "b": "2"}}})
    await pub.append_message({"serial": serial, "data": "x", "extras": {"headers": {"c": "3"}}})
    (h,) = await all_history(pub)
    assert h["extras"] == {"headers": {"c": "3"}}  # replaced, not merged
    await pub.append_message({"serial": serial, "data": "y", "name": "renamed"})
    (h,) = await all_history(pub)
    assert h["data"] == "xy" and h["name"] == "renamed" and not h.get("extras")


async def test_delete_marks_deleted(channel_kind: Any) -> None:
    name = unique_name("delete")
    pub = await channel_kind.open(name, client_id="agent")
    rec = await subscribed(pub)
    (keep,) = await pub.publish({"name": "n", "data": "keep"})
    (gone,) = await pub.publish({"name": "n", "data": "gone"})
    v = await pub.delete_message({"serial": gone})
    assert v > gone
    got = await rec.wait_count(3)
    assert got[2]["action"] == "message.delete" and got[2]["serial"] == gone
    assert got[2]["version"]["serial"] == v
    assert got[2].get("data") is None and got[2]["name"] == "n"  # Ably: a deleted message has no data
    hist = await all_history(pub)
    assert [(m["serial"], m["action"]) for m in hist] == [(gone, "message.delete"), (keep, "message.create")]
    assert hist[0].get("data") is None and hist[1]["data"] == "keep"


@pytest.mark.parametrize("direction", ["backwards", "forwards"])
async def test_paging_returns_every_message_once(channel_kind: Any, direction: str) -> None:
    name = unique_name("paging")
    pub = await channel_kind.open(name, client_id="agent")
    serials: list[str] = []
    for i in range(7):
        serials += await pub.publish({"name": "n", "data": str(i)})
    serials += await pub.publish([{"name": "n", "data": "7"}, {"name": "n", "data": "8"}])
    page = await pub.history(limit=3, direction=direction)
    sizes, items = [], []
    while True:
        sizes.append(len(page.items))
        items += page.items
        if not page.has_next():
            break
        page = await page.next()
    assert sizes == [3, 3, 3]
    expected = list(reversed(serials)) if direction == "backwards" else serials
    assert [m["serial"] for m in items] == expected
    assert [m["data"] for m in items] == [str(int(m["data"])) for m in items]


async def test_order_is_shared_across_publishers(channel_kind: Any) -> None:
    name = unique_name("order")
    a = await channel_kind.open(name, client_id="a")
    b = await channel_kind.open(name, client_id="b")
    watcher = await channel_kind.open(name, client_id="w")
    recs = [await subscribed(c) for c in (a, b, watcher)]

    async def burst(ch: Any, tag: str) -> list[str]:
        out = []
        for i in range(8):
            out += await ch.publish({"name": "n", "data": f"{tag}{i}"})
        return out

    sa, sb = await asyncio.gather(burst(a, "a"), burst(b, "b"))
    assert sa == sorted(sa) and sb == sorted(sb)
    everything = sorted(sa + sb)
    assert len(set(everything)) == 16
    for rec in recs:
        got = await rec.wait_count(16)
        assert [m["serial"] for m in got] == everything
    hist = await all_history(watcher, limit=5)
    assert [m["serial"] for m in hist] == list(reversed(everything))
    by_serial = {m["serial"]: m["clientId"] for m in hist}
    assert all(by_serial[s] == "a" for s in sa) and all(by_serial[s] == "b" for s in sb)


async def test_extras_kept_exactly(channel_kind: Any) -> None:
    name = unique_name("extras")
    pub = await channel_kind.open(name, client_id="agent")
    sub = await channel_kind.open(name, client_id="user")
    rec = await subscribed(sub)
    (serial,) = await pub.publish({"name": "ai-output", "data": "", "extras": EXTRAS})
    await pub.append_message({"serial": serial, "data": "x", "extras": EXTRAS})
    got = await rec.wait_count(2)
    assert got[0]["extras"] == EXTRAS and got[1]["extras"] == EXTRAS
    (h,) = await all_history(sub)
    assert h["extras"] == EXTRAS
    assert h["extras"]["headers"]["x-ably-ai"] == EXTRAS["headers"]["x-ably-ai"]


async def test_until_attach_stops_at_the_attach_point(channel_kind: Any) -> None:
    name = unique_name("until")
    pub = await channel_kind.open(name, client_id="agent")
    before = []
    for i in range(3):
        before += await pub.publish({"name": "n", "data": f"before {i}"})
    sub = await channel_kind.open(name, client_id="user")
    rec = await subscribed(sub)
    assert sub.attach_serial is not None and sub.attach_serial >= before[-1]
    (after,) = await pub.publish({"name": "n", "data": "after"})
    await rec.wait_count(1)
    page = await sub.history(limit=2, until_attach=True)
    items = list(page.items)
    while page.has_next():
        page = await page.next()
        items += page.items
    assert [m["serial"] for m in items] == list(reversed(before))
    assert next(m["serial"] for m in await all_history(sub)) == after


async def test_data_types_are_kept(channel_kind: Any) -> None:
    name = unique_name("types")
    pub = await channel_kind.open(name, client_id="agent")
    rec = await subscribed(pub)
    (s_text,) = await pub.publish({"name": "t", "data": "text"})
    (s_bin,) = await pub.publish({"name": "b", "data": b"\x00\x01"})
    (s_json,) = await pub.publish({"name": "j", "data": {"a": [1, "x", None]}})
    await pub.append_message({"serial": s_bin, "data": b"\xff"})
    await pub.append_message({"serial": s_text, "data": " more"})
    got = await rec.wait_count(5)
    assert got[0]["data"] == "text"
    assert bytes(got[1]["data"]) == b"\x00\x01" and isinstance(got[1]["data"], (bytes, bytearray))
    assert got[2]["data"] == {"a": [1, "x", None]}
    assert got[3]["action"] == "message.append" and bytes(got[3]["data"]) == b"\xff"
    hist = {m["serial"]: m for m in await all_history(pub)}
    assert hist[s_text]["data"] == "text more"
    assert bytes(hist[s_bin]["data"]) == b"\x00\x01\xff"
    assert hist[s_json]["data"] == {"a": [1, "x", None]}
    with pytest.raises(Exception) as info:
        await pub.append_message({"serial": s_text, "data": b"\x01"})
    assert getattr(info.value, "code", None) in channel_kind.append_type_error_codes
    with pytest.raises(Exception) as info:
        await pub.append_message({"serial": s_bin, "data": "text"})
    assert getattr(info.value, "code", None) in channel_kind.append_type_error_codes
    hist = {m["serial"]: m for m in await all_history(pub)}
    assert hist[s_text]["data"] == "text more"


async def test_detach_stops_delivery(channel_kind: Any) -> None:
    name = unique_name("detach")
    pub = await channel_kind.open(name, client_id="agent")
    sub = await channel_kind.open(name, client_id="user")
    rec = await subscribed(sub)
    await pub.publish({"name": "n", "data": "1"})
    await rec.wait_count(1)
    await sub.detach()
    await pub.publish({"name": "n", "data": "2"})
    probe = await subscribed(pub)  # the publisher's own echo proves the publish was delivered
    await pub.publish({"name": "n", "data": "3"})
    await probe.wait_count(1)
    await rec.settle(0.2)
    assert [m["data"] for m in rec.messages] == ["1"]


async def test_fold_of_live_deliveries_equals_history(channel_kind: Any) -> None:
    name = unique_name("fold")
    a = await channel_kind.open(name, client_id="a")
    b = await channel_kind.open(name, client_id="b")
    rec = await subscribed(b)
    (s1,) = await a.publish({"name": "x", "data": ""})
    (s2,) = await b.publish({"name": "y", "data": "B"})
    await a.append_message({"serial": s1, "data": "A1", "extras": {"headers": {"n": "1"}}})
    await b.append_message({"serial": s2, "data": "B1"})
    await a.update_message({"serial": s2, "data": "over"})
    await a.append_message({"serial": s2, "data": "+"})
    last = await a.append_message({"serial": s1, "data": "A2"})
    await rec.wait_for(lambda ms: any(m["version"]["serial"] == last for m in ms))
    hist = await all_history(a)
    folded = fold(rec.messages)
    assert sorted(essence(m) for m in folded.values()) == sorted(essence(m) for m in hist)
    assert {m["serial"]: m["data"] for m in hist} == {s1: "A1A2", s2: "over+"}


# ---------------------------------------------------------------------------------------------
# Property: random interleavings from several clients; every subscriber's fold == history
# ---------------------------------------------------------------------------------------------


_text = st.text(alphabet="ab✓ \n\"{}", max_size=4)
_op = st.one_of(
    st.tuples(st.just("publish"), st.integers(0, 2), _text),
    st.tuples(st.just("batch"), st.integers(0, 2), st.lists(_text, min_size=1, max_size=3)),
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(0, 50), _text),
    st.tuples(st.just("update"), st.integers(0, 2), st.integers(0, 50), _text),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(_op, min_size=1, max_size=14), late_at=st.integers(0, 14), concurrent=st.booleans())
async def test_property_fold_of_live_equals_history(
    channel_kind: Any, ops: list[tuple], late_at: int, concurrent: bool
) -> None:
    name = unique_name("prop")
    clients = [await channel_kind.open(name, client_id=f"c{i}") for i in range(3)]
    recs = [await subscribed(c) for c in clients]
    own: list[list[str]] = [[] for _ in clients]  # serials each client created
    returned: list[list[str]] = [[] for _ in clients]  # serials/version serials in op order
    late_rec = None

    async def run(i: int, op: tuple) -> None:
        ch = clients[i]
        kind = op[0]
        if kind == "publish":
            s = await ch.publish({"name": f"n{i}", "data": op[2], "extras": {"headers": {"by": f"c{i}"}}})
            own[i] += s
            returned[i] += s
        elif kind == "batch":
            s = await ch.publish([{"name": f"b{i}", "data": t} for t in op[2]])
            assert s == sorted(s) and len(set(s)) == len(op[2])
            own[i] += s
            returned[i] += s
        elif own[i]:
            target = own[i][op[2] % len(own[i])]
            if kind == "append":
                v = await ch.append_message({"serial": target, "data": op[3], "extras": {"headers": {"t": op[3]}}})
            else:
                v = await ch.update_message({"serial": target, "data": op[3]})
            assert v > target
            returned[i].append(v)

    if concurrent:
        per_client: list[list[tuple]] = [[] for _ in clients]
        for op in ops:
            per_client[op[1]].append(op)

        async def client_loop(i: int) -> None:
            for op in per_client[i]:
                await run(i, op)
                await asyncio.sleep(0)

        await asyncio.gather(*(client_loop(i) for i in range(3)))
        late = await channel_kind.open(name, client_id="late")
        late_rec = await subscribed(late)
        # A few more appends after the late attach, so it sees first-sight aggregates.
        for i in range(3):
            for target in own[i][:2]:
                returned[i].append(await clients[i].append_message({"serial": target, "data": "z"}))
    else:
        for idx, op in enumerate(ops):
            if idx == late_at and late_rec is None:
                late = await channel_kind.open(name, client_id="late")
                late_rec = await subscribed(late)
            await run(op[1], op)

    # A sentinel: once every subscriber has it, everything published before has been delivered.
    own[0] += (sentinel := await clients[0].publish({"name": "end", "data": "."}))
    returned[0] += sentinel
    all_recs = recs + ([late_rec] if late_rec is not None else [])
    for rec in all_recs:
        await rec.wait_for(lambda ms: any(m["serial"] == sentinel[0] for m in ms))

    # Per publisher, serials and version serials strictly increase in operation order.
    for seq in returned:
        assert all(a < b for a, b in itertools.pairwise(seq)), seq
    hist = await all_history(clients[0], limit=7)
    assert [m["serial"] for m in hist] == sorted((m["serial"] for m in hist), reverse=True)
    assert sorted(m["serial"] for m in hist) == sorted(s for o in own for s in o)
    by_serial = {m["serial"]: m for m in hist}
    for rec in all_recs:
        vs = [m["version"]["serial"] for m in rec.messages]
        assert all(a < b for a, b in itertools.pairwise(vs)), vs
        folded = fold(rec.messages)
        if rec is late_rec:
            assert set(folded) <= set(by_serial)
        else:
            assert set(folded) == set(by_serial)
        for serial, agg in folded.items():
            assert essence(agg) == essence(by_serial[serial])


async def test_history_helpers_follow_pages(channel_kind: Any) -> None:
    from ai_transport.channels import collect_history, iter_history

    name = unique_name("helpers")
    ch = await channel_kind.open(name, client_id="agent")
    serials: list[str] = []
    for i in range(5):
        serials += await ch.publish({"name": "n", "data": str(i)})
    assert [m["serial"] async for m in iter_history(ch, limit=2)] == list(reversed(serials))
    assert [m["serial"] for m in await collect_history(ch, limit=2, oldest_first=True)] == serials
    assert [m["serial"] for m in await collect_history(ch, limit=2, max_pages=2)] == list(reversed(serials))[:4]
    assert [m["serial"] for m in await collect_history(ch, limit=3, direction="forwards")] == serials
