"""The emulator's sans-I/O store: mutable-message semantics and the invariants fan-out relies on."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport.emulator.protocol import EmulatorError, ingest_data, render_message
from ai_transport.emulator.store import FLOOR_SERIAL, Store

# An op: ("create", text) | ("append", index, text, extras) | ("update", index, text) | ("delete", index)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.text(max_size=4)),
        st.tuples(
            st.just("append"),
            st.integers(0, 5),
            st.text(max_size=4),
            st.one_of(st.none(), st.dictionaries(st.sampled_from("ab"), st.integers(), max_size=2)),
        ),
        st.tuples(st.just("update"), st.integers(0, 5), st.text(max_size=4)),
        st.tuples(st.just("delete"), st.integers(0, 5)),
    ),
    max_size=30,
)


def run(store: Store, script: list[tuple[Any, ...]]) -> list[str]:
    serials: list[str] = []
    for op in script:
        if op[0] == "create":
            serials += [
                e.serial
                for e in store.apply(
                    "c", [{"name": "n", "data": op[1]}], connection_id="k", client_id=None, id_prefix="p"
                )
            ]
        elif serials:
            target = serials[op[1] % len(serials)]
            msg: dict[str, Any] = {"serial": target}
            if op[0] == "append":
                msg.update(action=5, data=op[2])
                if op[3] is not None:
                    msg["extras"] = op[3]
            elif op[0] == "update":
                msg.update(action=1, data=op[2])
            else:
                msg.update(action=2)
            store.apply("c", [msg], connection_id="k", client_id=None, id_prefix="p")
    return serials


def apply_delivery(view: dict[str, dict[str, Any]], msg: dict[str, Any]) -> None:
    """What a subscriber (AI Transport style) does with a delivery."""
    if msg["action"] == 5:
        cur = view[msg["serial"]]
        base = cur.get("data")  # None after a delete (a deleted message has no data)
        cur["data"] = msg.get("data") if base is None else base + msg.get("data", "")
        cur["extras"] = msg.get("extras")
        cur["version"] = msg["version"]
    else:
        view[msg["serial"]] = {
            "data": msg.get("data"),
            "extras": msg.get("extras"),
            "version": msg["version"],
        }


@given(ops)
def test_serials_increase_in_event_order(script: list[tuple[Any, ...]]) -> None:
    store = Store()
    run(store, script)
    log = store.channels.get("c")
    if log is None:
        return
    event_serials = [e.serial for e in log.events]
    assert event_serials == sorted(event_serials) and len(set(event_serials)) == len(event_serials)
    for e in log.events:
        assert e.live["version"]["serial"] == e.serial
        assert e.live["serial"] == e.message_serial <= e.serial
    assert log.order == sorted(log.order)


@given(ops, st.integers(0, 40))
def test_any_attach_point_converges_to_the_aggregates(script: list[tuple[Any, ...]], cut: int) -> None:
    """A receiver attaching after event ``cut`` (aggregate on first sight, live after) ends in the store's state."""
    store = Store()
    run(store, script)
    log = store.channels.get("c")
    if log is None:
        return
    cut = min(cut, len(log.events))
    view: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for ev in log.events[cut:]:
        apply_delivery(view, ev.live if ev.message_serial in seen else ev.aggregate)
        seen.add(ev.message_serial)
    for serial in seen:
        agg = store.get("c", serial)
        assert view[serial]["data"] == agg.get("data")
        assert view[serial]["extras"] == agg.get("extras")
        assert view[serial]["version"] == agg["version"]
    # history has every message exactly once, in serial order, as its latest aggregate
    hist = store.history("c")
    assert [m["serial"] for m in hist] == log.order
    for m in hist:
        assert m["action"] in (0, 1, 2)
        assert (m["action"] == 0) == (m["version"]["serial"] == m["serial"])


@given(ops, st.integers(0, 40))
def test_events_after_is_the_suffix(script: list[tuple[Any, ...]], k: int) -> None:
    store = Store()
    run(store, script)
    log = store.channel("c")
    assert log.events_after(FLOOR_SERIAL) == log.events
    if log.events:
        k = min(k, len(log.events) - 1)
        assert log.events_after(log.events[k].serial) == log.events[k + 1 :]
        assert log.latest_serial == log.events[-1].serial


def test_append_semantics() -> None:
    store = Store()
    (create,) = store.apply(
        "c",
        [{"name": "out", "data": "a", "extras": {"x": 1}}],
        connection_id="k",
        client_id="me",
        id_prefix="p",
    )
    (app,) = store.apply(
        "c",
        [{"action": 5, "serial": create.serial, "data": "b", "extras": {"y": 2}}],
        connection_id="k",
        client_id="me",
        id_prefix="p",
    )
    assert app.live == {
        "id": "p:0",
        "name": "out",
        "data": "b",
        "extras": {"y": 2},
        "clientId": "me",
        "connectionId": "k",
        "timestamp": create.live["timestamp"],
        "serial": create.serial,
        "action": 5,
        "version": {"serial": app.serial, "timestamp": app.live["version"]["timestamp"], "clientId": "me"},
    }
    assert app.aggregate["data"] == "ab" and app.aggregate["name"] == "out" and app.aggregate["action"] == 1
    assert app.aggregate["extras"] == {"y": 2}
    (upd,) = store.apply(
        "c",
        [{"action": 1, "serial": create.serial, "data": "z"}],
        connection_id="k",
        client_id="me",
        id_prefix="p",
    )
    assert (
        upd.aggregate["data"] == "z"
        and upd.aggregate["extras"] == {"y": 2}
        and upd.aggregate["name"] == "out"
    )
    (dele,) = store.apply(
        "c", [{"action": 2, "serial": create.serial}], connection_id="k", client_id=None, id_prefix="p"
    )
    assert dele.aggregate["action"] == 2 and store.get("c", create.serial)["action"] == 2
    assert [v["action"] for v in store.versions("c", create.serial)] == [0, 1, 1, 2]


def test_binary_appends_and_type_mismatch() -> None:
    store = Store()
    (create,) = store.apply("c", [{"data": b"\x00"}], connection_id=None, client_id=None, id_prefix="p")
    store.apply(
        "c",
        [{"action": 5, "serial": create.serial, "data": b"\x01"}],
        connection_id=None,
        client_id=None,
        id_prefix="p",
    )
    assert store.get("c", create.serial)["data"] == b"\x00\x01"
    with pytest.raises(EmulatorError) as info:
        store.apply(
            "c",
            [{"action": 5, "serial": create.serial, "data": "text"}],
            connection_id=None,
            client_id=None,
            id_prefix="p",
        )
    assert info.value.code == 40003
    # all-or-nothing: a bad message rejects the whole batch
    with pytest.raises(EmulatorError):
        store.apply(
            "c",
            [{"data": "ok"}, {"action": 5, "serial": "missing", "data": "x"}],
            connection_id=None,
            client_id=None,
            id_prefix="p",
        )
    assert len(store.history("c")) == 1


@given(st.binary(max_size=50), st.sampled_from(["", "utf-8", "utf-8/cipher+aes-128-cbc"]))
def test_binary_transcoding_round_trips(payload: bytes, encoding: str) -> None:
    stored = ingest_data({"data": payload, "encoding": encoding}, "msgpack")
    as_json = render_message(stored, "json")
    assert as_json["encoding"] == (f"{encoding}/base64" if encoding else "base64")
    back = ingest_data(dict(as_json), "json")
    assert back["data"] == payload and back.get("encoding", "") == encoding
    assert render_message(back, "msgpack")["data"] == payload
