"""In-process channel specifics: delivery mechanics, roll-up window, identity, errors, isolation."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import pytest
from support_channels import Recorder, all_history, essence, fold, subscribed

from ai_transport.channels import Channel, InProcessHub, Writer
from ai_transport.errors import AITransportError, InvalidArgumentError, InvalidTypeError


async def test_is_a_channel_and_a_writer() -> None:
    ch = InProcessHub().channel("c", client_id="a")
    assert isinstance(ch, Channel) and isinstance(ch, Writer)
    await ch.close()


async def test_clients_and_connections() -> None:
    hub = InProcessHub()
    alice = hub.client("alice")
    assert alice.channel("c") is alice.channel("c")
    other = hub.channel("c", client_id="bob")
    assert other.connection_id != alice.channel("c").connection_id
    rec = await subscribed(other)
    await alice.channel("c").publish([{"name": "x", "data": "1"}, {"name": "x", "data": "2"}])
    await alice.channel("c").publish({"name": "x", "data": "3"})
    got = await rec.wait_count(3)
    cid = alice.connection_id
    assert [m["id"] for m in got] == [f"{cid}:0:0", f"{cid}:0:1", f"{cid}:1:0"]
    assert all(m["connectionId"] == cid and m["clientId"] == "alice" for m in got)
    assert hub.channel_names() == ["c"]
    await alice.close()
    await other.close()


async def test_serials_are_fixed_width_and_sort_numerically() -> None:
    hub = InProcessHub()
    ch = hub.channel("c")
    serials = []
    for i in range(12):
        serials += await ch.publish({"data": str(i)})
    assert len({len(s) for s in serials}) == 1
    assert serials == sorted(serials)
    assert ch.client_id is None
    (m,) = (await ch.history(limit=1)).items
    assert "clientId" not in m


async def test_coroutine_listeners_are_awaited_in_order_and_never_block_publishers() -> None:
    hub = InProcessHub()
    pub = hub.channel("c", client_id="p")
    sub = hub.channel("c", client_id="s")
    calls: list[tuple[str, str]] = []
    release = asyncio.Event()

    async def slow(msg: dict[str, Any]) -> None:
        calls.append(("slow", msg["data"]))
        await release.wait()

    def fast(msg: dict[str, Any]) -> None:
        calls.append(("fast", msg["data"]))

    await sub.subscribe(slow)
    await sub.subscribe(fast)
    other = await subscribed(hub.channel("c", client_id="o"))
    for i in range(5):
        await pub.publish({"data": str(i)})  # returns although the slow listener is stuck
    await other.wait_count(5)  # another attachment is not held up by the slow one
    assert calls == [("slow", "0")]
    release.set()
    for _ in range(50):
        if len(calls) == 10:
            break
        await asyncio.sleep(0.01)
    assert calls == [(who, str(i)) for i in range(5) for who in ("slow", "fast")]
    await sub.close()


async def test_listener_errors_are_logged_and_delivery_continues(caplog: pytest.LogCaptureFixture) -> None:
    hub = InProcessHub()
    ch = hub.channel("c")

    def boom(msg: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    await ch.subscribe(boom)
    rec = await subscribed(ch)
    with caplog.at_level(logging.ERROR, logger="ai_transport.channels.memory"):
        await ch.publish({"data": "1"})
        await ch.publish({"data": "2"})
        await rec.wait_count(2)
    assert [m["data"] for m in rec.messages] == ["1", "2"]
    assert sum("listener raised" in r.message for r in caplog.records) == 2
    await ch.close()


async def test_unsubscribe_one_or_all() -> None:
    ch = InProcessHub().channel("c")
    a, b = Recorder(), Recorder()
    await ch.subscribe(a)
    await ch.subscribe(b)
    await ch.publish({"data": "1"})
    await b.wait_count(1)
    ch.unsubscribe(a)
    await ch.publish({"data": "2"})
    await b.wait_count(2)
    ch.unsubscribe()
    await ch.publish({"data": "3"})
    await asyncio.sleep(0.02)
    assert [m["data"] for m in a.messages] == ["1"]
    assert [m["data"] for m in b.messages] == ["1", "2"]
    await ch.close()


async def test_reattach_sees_mutated_messages_as_aggregates_again() -> None:
    hub = InProcessHub()
    pub = hub.channel("c", client_id="p")
    sub = hub.channel("c", client_id="s")
    rec = await subscribed(sub)
    (s,) = await pub.publish({"name": "n", "data": "a"})
    await pub.append_message({"serial": s, "data": "b"})
    await rec.wait_count(2)
    await sub.detach()
    assert sub.state == "detached"
    await pub.append_message({"serial": s, "data": "c"})
    await sub.attach()
    assert sub.state == "attached" and sub.attach_serial is not None
    await pub.append_message({"serial": s, "data": "d"})
    got = await rec.wait_count(3)
    assert (got[2]["action"], got[2]["data"], got[2]["name"]) == ("message.update", "abcd", "n")
    await sub.close()
    await pub.close()


async def test_append_rollup_window_conflates_live_fragments() -> None:
    hub = InProcessHub(append_rollup_window=0.05)
    pub = hub.channel("c", client_id="p")
    rec = await subscribed(hub.channel("c", client_id="s"))
    (s1,) = await pub.publish({"name": "a", "data": ""})
    for i in range(10):
        await pub.append_message({"serial": s1, "data": str(i), "extras": {"headers": {"i": str(i)}}})
    (s2,) = await pub.publish({"name": "b", "data": "B"})  # forces the held fragment out first
    for i in range(5):
        await pub.append_message({"serial": s1, "data": chr(97 + i)})
    last = await pub.append_message({"serial": s1, "data": "!", "extras": {"headers": {"end": "1"}}})
    await rec.wait_for(lambda ms: any(m["version"]["serial"] == last for m in ms), timeout=2)
    got = rec.messages
    frags = [m for m in got if m["action"] == "message.append"]
    assert len(frags) < 16  # conflated
    assert frags[0]["data"] == "0"  # the first append of a message goes out at once
    assert [m["serial"] for m in got if m["action"] == "message.create"] == [s1, s2]
    # Everything appended before the publish of s2 arrives before s2.
    before_b = "".join(m["data"] for m in got[: got.index(next(m for m in got if m["serial"] == s2))]
                       if m["action"] == "message.append")
    assert before_b == "0123456789"
    assert got[-1]["extras"] == {"headers": {"end": "1"}} and got[-1]["version"]["serial"] == last
    hist = await all_history(pub)
    folded = fold(got)
    assert sorted(essence(m) for m in folded.values()) == sorted(essence(m) for m in hist)
    assert folded[s1]["data"] == "0123456789abcde!"


async def test_rollup_off_by_default_delivers_every_append() -> None:
    hub = InProcessHub()
    assert hub.append_rollup_window == 0
    pub = hub.channel("c")
    rec = await subscribed(pub)
    (s,) = await pub.publish({"data": ""})
    for i in range(20):
        await pub.append_message({"serial": s, "data": str(i % 10)})
    got = await rec.wait_count(21)
    assert [m["data"] for m in got[1:]] == [str(i % 10) for i in range(20)]


async def test_inputs_and_outputs_are_isolated_copies() -> None:
    hub = InProcessHub()
    pub = hub.channel("c")
    a, b = await subscribed(pub), await subscribed(hub.channel("c"))
    extras = {"headers": {"k": "v"}}
    data = {"list": [1, 2]}
    (s,) = await pub.publish({"data": data, "extras": extras})
    extras["headers"]["k"] = "changed"
    data["list"].append(3)
    got_a = (await a.wait_count(1))[0]
    got_a["extras"]["headers"]["k"] = "mutated by a"
    got_b = (await b.wait_count(1))[0]
    assert got_b["extras"] == {"headers": {"k": "v"}} and got_b["data"] == {"list": [1, 2]}
    (h,) = (await pub.history()).items
    h["extras"]["headers"]["k"] = "mutated"
    assert (await pub.get_message(s))["extras"] == {"headers": {"k": "v"}}


async def test_bad_input_raises_coded_errors_naming_the_field() -> None:
    hub = InProcessHub()
    ch = hub.channel("c", client_id="alice")
    (s,) = await ch.publish({"data": "x"})
    cases = [
        (ch.publish("nope"), InvalidTypeError, 40003, "messages"),
        (ch.publish({"name": 3}), InvalidTypeError, 40003, "message.name"),
        (ch.publish({"extras": []}), InvalidTypeError, 40003, "message.extras"),
        (ch.publish({"data": object()}), InvalidTypeError, 40013, "message.data"),
        (ch.publish({"clientId": "mallory"}), AITransportError, 40012, "clientId"),
        (ch.append_message({"data": "x"}), InvalidArgumentError, 40003, "message.serial"),
        (ch.append_message({"serial": "nope", "data": "x"}), AITransportError, 40400, "nope"),
        (ch.update_message({"serial": "", "data": "x"}), InvalidArgumentError, 40003, "message.serial"),
        (ch.append_message({"serial": s, "data": 5}), AITransportError, 40003, "message.data"),
        (ch.history(limit=0), InvalidArgumentError, 40003, "limit"),
        (ch.history(limit=1001), InvalidArgumentError, 40003, "limit"),
        (ch.history(direction="sideways"), InvalidArgumentError, 40003, "direction"),
        (ch.history(until_attach=True), AITransportError, 40000, "until_attach"),
        (ch.subscribe("not callable"), InvalidTypeError, 40003, "listener"),
    ]
    for coro, exc_type, code, needle in cases:
        with pytest.raises(exc_type) as info:
            await coro
        assert info.value.code == code, (needle, info.value)
        assert needle in info.value.message
    # A batch with one bad message is rejected whole: nothing stored, no serial consumed.
    with pytest.raises(InvalidTypeError):
        await ch.publish([{"data": "ok"}, {"data": "ok"}, {"extras": 1}])
    assert [m["serial"] for m in (await ch.history()).items] == [s]
    (s2,) = await ch.publish({"data": "next"})
    assert int(s2) == int(s) + 1
    with pytest.raises(InvalidArgumentError):
        InProcessHub(append_rollup_window=-1)
    await ch.close()
    with pytest.raises(AITransportError, match="closed"):
        await ch.publish({"data": "x"})


async def test_history_empty_and_until_attach_on_empty_channel() -> None:
    ch = InProcessHub().channel("c")
    page = await ch.history()
    assert page.items == [] and not page.has_next() and await page.next() is None
    await ch.attach()
    await ch.publish({"data": "after"})
    assert (await ch.history(until_attach=True)).items == []
    assert [m["data"] for m in (await ch.history()).items] == ["after"]


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["append", "append", "append", "publish", "update"]), st.integers(0, 9),
                  st.text("xy✓", max_size=3), st.sampled_from([0, 0, 0, 0.002, 0.006])),
        min_size=1, max_size=25,
    )
)
def test_property_rollup_preserves_the_fold(ops: list[tuple[str, int, str, float]]) -> None:
    """With conflation on, live fragments still fold to exactly the history aggregates, in order."""

    async def scenario() -> None:
        hub = InProcessHub(append_rollup_window=0.004)
        pub = hub.channel("c", client_id="p")
        rec = await subscribed(hub.channel("c", client_id="s"))
        serials = await pub.publish({"name": "first", "data": ""})
        appends = 0
        for kind, target, text, pause in ops:
            serial = serials[target % len(serials)]
            if kind == "publish":
                serials += await pub.publish({"name": "n", "data": text})
            elif kind == "update":
                await pub.update_message({"serial": serial, "data": text})
            else:
                appends += 1
                await pub.append_message({"serial": serial, "data": text, "extras": {"headers": {"t": text}}})
            if pause:
                await asyncio.sleep(pause)
        (end,) = await pub.publish({"name": "end", "data": ""})
        await rec.wait_for(lambda ms: any(m["serial"] == end for m in ms), timeout=2)
        frags = [m for m in rec.messages if m["action"] == "message.append"]
        assert len(frags) <= appends
        vs = [m["version"]["serial"] for m in rec.messages]
        assert vs == sorted(vs) and len(set(vs)) == len(vs)
        hist = await all_history(pub)
        assert sorted(essence(m) for m in fold(rec.messages).values()) == sorted(essence(m) for m in hist)

    asyncio.run(scenario())


# -- the store's copies: a plan made once per version gives what the checked copy gives ------------

from collections import OrderedDict  # noqa: E402

from ai_transport.channels.memory_store import _copy_message, _Stored  # noqa: E402

_SCALAR = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3) | st.binary(max_size=3)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    | st.builds(OrderedDict, st.dictionaries(st.text(max_size=2), inner, max_size=2))
    | st.tuples(inner),
    max_leaves=6,
)
_TIER = st.dictionaries(st.text(max_size=3), _SCALAR, max_size=4)
_ENVELOPE = st.builds(lambda tiers: {"ai": tiers}, st.dictionaries(st.sampled_from(["transport", "codec"]), _TIER))
_FIELD = _VALUE | _TIER | _ENVELOPE


def _shared_containers(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` share a mutable container anywhere (a copy must share none)."""
    if isinstance(a, (dict, list, bytearray)) and a is b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return any(_shared_containers(v, b[k]) for k, v in a.items() if k in b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return any(_shared_containers(x, y) for x, y in zip(a, b))
    return False


def _typed(value: Any) -> Any:
    """``value`` with every container's type spelled out (equality alone ignores dict subclasses)."""
    if isinstance(value, dict):
        return (type(value).__name__, [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(v) for v in value])
    return (type(value).__name__, value)


@settings(max_examples=200, deadline=None)
@given(fields=st.fixed_dictionaries({}, optional={"extras": _FIELD, "version": _FIELD, "data": _FIELD, "other": _VALUE}))
def test_a_stored_aggregate_copies_as_the_checked_copy_does(fields: dict[str, Any]) -> None:
    aggregate = {"serial": "1", **fields}
    stored = _Stored(aggregate)
    for _ in range(2):  # the plan is reused: every read is a fresh copy
        got, checked = stored.copy(), _copy_message(aggregate)
        assert _typed(got) == _typed(checked)
        for key in ("extras", "version", "data"):  # independent wherever the checked copy is
            if key in aggregate:
                assert _shared_containers(aggregate[key], got[key]) == _shared_containers(aggregate[key], checked[key])
    stored.aggregate["extras"] = {"ai": {"transport": {"run-id": "r"}}}  # a new version ...
    stored.changed()  # ... planned again
    assert stored.copy() == _copy_message(stored.aggregate)


def _scalars_shared(a: Any, b: Any) -> bool:
    """True when every scalar inside the dicts and lists of ``a`` is the very object ``b`` holds there."""
    if type(a) is dict:
        return list(a) == list(b) and all(_scalars_shared(v, b[k]) for k, v in a.items())
    if type(a) is list:
        return all(_scalars_shared(x, y) for x, y in zip(a, b, strict=True))
    return type(a) not in (str, int, float, bool, bytes, type(None)) or a is b


@settings(max_examples=300, deadline=None)
@given(value=_VALUE | _FIELD)
def test_a_json_copy_is_the_value_rebuilt_with_no_container_shared(value: Any) -> None:
    from ai_transport.channels.memory_store import _json_copy

    got = _json_copy(value)
    assert _typed(got) == _typed(value)  # the same entries, in the same order, of the same types
    assert not _shared_containers(value, got)  # every dict, list, bytearray its own
    assert _scalars_shared(value, got)  # scalars are never copied


async def test_history_and_get_message_follow_every_new_version() -> None:
    hub = InProcessHub()
    pub = hub.channel("c", client_id="p")
    (serial,) = await pub.publish({"name": "out", "data": "", "extras": {"ai": {"transport": {"t": "1"}}}})
    await pub.append_message({"serial": serial, "data": "ab", "extras": {"headers": {"h": [1, 2]}}})
    (got,) = (await pub.history()).items
    assert got["data"] == "ab" and got["extras"] == {"headers": {"h": [1, 2]}}
    got["extras"]["headers"]["h"].append(3)  # a reader's copy is its own
    await pub.update_message({"serial": serial, "data": {"item": {"content": []}}})
    for read in ((await pub.history()).items[0], await pub.get_message(serial)):
        assert read["data"] == {"item": {"content": []}} and read["extras"] == {"headers": {"h": [1, 2]}}
        read["data"]["item"]["content"].append("x")
    await pub.delete_message({"serial": serial})
    (gone,) = (await pub.history()).items
    assert gone["action"] == "message.delete" and "data" not in gone


_ENVELOPE_MUTATIONS = {
    "the message": lambda m: m.update(name="changed"),
    "extras": lambda m: m["extras"].update(headers={"h": "v"}),
    "the ai envelope": lambda m: m["extras"]["ai"].update(codec={"kind": "x"}),
    "a tier": lambda m: m["extras"]["ai"]["transport"].update({"run-id": "changed"}),
    "a tier's entry removed": lambda m: m["extras"]["ai"]["transport"].pop("role"),
    "version": lambda m: m["version"].update(serial="changed"),
}


@pytest.mark.parametrize("depth", sorted(_ENVELOPE_MUTATIONS))
async def test_a_history_copy_of_an_ai_envelope_wire_is_its_own_at_every_depth(depth: str) -> None:
    """The commonest wire (the AI envelope in ``extras``, a flat ``version``) is copied by a copier
    of its own: a reader changing its history copy at any depth changes neither the store (the next
    page, ``get_message``) nor another reader's copy, read before or after."""
    hub = InProcessHub()
    pub = hub.channel("c", client_id="p")
    transport = {"role": "assistant", "run-id": "r"}
    (serial,) = await pub.publish({"name": "ai-output", "data": "a", "extras": {"ai": {"transport": transport}}})
    (before,) = (await pub.history()).items
    expected = copy.deepcopy(before)
    (mine,) = (await pub.history()).items
    _ENVELOPE_MUTATIONS[depth](mine)
    assert mine != expected  # (the mutation took)
    (after,) = (await pub.history()).items
    assert before == expected and after == expected and await pub.get_message(serial) == expected
