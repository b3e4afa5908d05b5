"""The emulator store's compact append columns behave exactly like a straightforward model.

The model keeps every event's live message and aggregate, and every version, as plain dicts (what
the store did before appends became columns); the store must return the same history, message
aggregates, versions, event log and replay suffixes for any sequence of creates, appends (with and
without data / extras / name / encoding / version metadata, in bursts past the columns'
checkpoints), updates, deletes, serial gaps and clock jumps.
"""

from __future__ import annotations

import copy
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from ai_transport.emulator import store as store_mod
from ai_transport.emulator.http_io import _page, page_sorted
from ai_transport.emulator.store import FLOOR_SERIAL, Store


class Model:
    """One channel, stored the plain way."""

    def __init__(self) -> None:
        self.counter = 0
        self.order: list[str] = []
        self.current: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, list[dict[str, Any]]] = {}
        self.events: list[tuple[str, str, int, dict[str, Any], dict[str, Any]]] = []

    def serial(self) -> str:
        self.counter += 1
        return f"{self.counter:020d}"

    def create(self, msg: dict[str, Any], ts: int, conn: str | None, client: str | None, default_id: str) -> None:
        serial = self.serial()
        agg: dict[str, Any] = {"id": msg.get("id") or default_id}
        for key in ("name", "data", "encoding", "extras"):
            if msg.get(key) is not None:
                agg[key] = msg[key]
        cid = msg.get("clientId") or client
        if cid and cid != "*":
            agg["clientId"] = cid
        if conn:
            agg["connectionId"] = conn
        agg.update(timestamp=ts, serial=serial, action=0, version={"serial": serial, "timestamp": ts})
        self.order.append(serial)
        self._record(serial, serial, 0, agg, agg)

    def mutate(self, msg: dict[str, Any], action: int, ts: int, client: str | None) -> None:
        target = msg["serial"]
        cur = self.current[target]
        vserial = self.serial()
        version: dict[str, Any] = {"serial": vserial, "timestamp": ts}
        given_version = msg.get("version") or {}
        for key in ("clientId", "description", "metadata"):
            if given_version.get(key) is not None:
                version[key] = given_version[key]
        op_client = msg.get("clientId") or client
        if client and client != "*":
            version["clientId"] = client
        elif op_client and op_client != "*" and "clientId" not in version:
            version["clientId"] = op_client
        agg = copy.deepcopy(cur)
        agg["version"] = version
        if action != 5:
            agg.pop("data", None)
            agg.pop("encoding", None)
            for key in ("data", "encoding", "name", "extras"):
                if msg.get(key) is not None:
                    agg[key] = msg[key]
            agg["action"] = action
            self._record(vserial, target, action, agg, agg)
            return
        frag = msg.get("data")
        if frag is not None:
            base = cur.get("data")
            agg["data"] = frag if base is None else base + frag
            if base is None and msg.get("encoding"):
                agg["encoding"] = msg["encoding"]
        if msg.get("extras") is not None:
            agg["extras"] = msg["extras"]
        else:
            agg.pop("extras", None)
        if msg.get("name") is not None:
            agg["name"] = msg["name"]
        agg["action"] = 2 if cur["action"] == 2 else 1
        live: dict[str, Any] = {"id": cur["id"]}
        if agg.get("name") is not None:
            live["name"] = agg["name"]
        if frag is not None:
            live["data"] = frag
            if msg.get("encoding"):
                live["encoding"] = msg["encoding"]
        if msg.get("extras") is not None:
            live["extras"] = msg["extras"]
        for key in ("clientId", "connectionId", "timestamp"):
            if cur.get(key) is not None:
                live[key] = cur[key]
        live.update(serial=target, action=5, version=version)
        self._record(vserial, target, 5, live, agg)

    def _record(self, serial: str, target: str, action: int, live: dict[str, Any], agg: dict[str, Any]) -> None:
        self.current[target] = agg
        self.versions.setdefault(target, []).append(copy.deepcopy(agg))
        self.events.append((serial, target, action, copy.deepcopy(live), copy.deepcopy(agg)))


EXTRAS = [{"ai": {"transport": {"stream": "true"}}}, {"ai": {"transport": {"status": "done"}}}, {"x": [1, 2]}]

op = st.one_of(
    st.tuples(
        st.just("create"),
        st.one_of(st.none(), st.text(max_size=3), st.binary(max_size=3)),
        st.sampled_from([None, "n", "m"]),
        st.sampled_from([None, *EXTRAS]),
        st.sampled_from([None, "me", "*"]),
    ),
    st.tuples(
        st.just("append"),
        st.integers(0, 3),
        st.one_of(st.none(), st.text(max_size=4)),
        st.sampled_from([None, *EXTRAS]),
        st.sampled_from([None, None, "n2"]),
        st.sampled_from([None, None, "utf-8"]),
        st.sampled_from([None, None, {"clientId": "v"}, {"description": "d", "metadata": {"k": "v"}}]),
        st.sampled_from([None, "me", "*"]),
        st.sampled_from([1, 1, 1, 70, 140]),
    ),
    st.tuples(st.just("update"), st.integers(0, 3), st.one_of(st.none(), st.text(max_size=3)),
              st.sampled_from([None, "u"]), st.sampled_from([None, *EXTRAS])),
    st.tuples(st.just("delete"), st.integers(0, 3)),
    st.tuples(st.just("skip"), st.sampled_from([1, 300, 70_000])),
)


def _dtype(model: Model, serial: str) -> type | None:
    data = model.current[serial].get("data")
    return type(data) if data is not None else None


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=25), st.lists(st.integers(-3, 70_000), min_size=1, max_size=20), st.data())
def test_compact_store_matches_the_plain_model(script: list[tuple[Any, ...]], steps: list[int], data: Any) -> None:
    clock = {"t": 1_700_000_000_000, "i": 0}

    def now() -> int:
        clock["t"] += steps[clock["i"] % len(steps)]
        clock["i"] += 1
        return clock["t"]

    store, model = Store(), Model()
    with mock.patch.object(store_mod, "now_ms", now):
        for step in script:
            if step[0] == "skip":
                for _ in range(step[1]):
                    store.next_serial()
                model.counter += step[1]
            elif step[0] == "create":
                msg: dict[str, Any] = {k: v for k, v in zip(("data", "name", "extras"), step[1:4]) if v is not None}
                store.apply("c", [copy.deepcopy(msg)], connection_id="k", client_id=step[4], id_prefix="p")
                model.create(msg, clock["t"], "k", step[4], "p:0")
            elif model.order:
                target = model.order[step[1] % len(model.order)]
                if step[0] == "append":
                    _, _, text, extras, name, enc, version, client, count = step
                    for n in range(count):
                        msg = {"action": 5, "serial": target}
                        frag = None if text is None else text + str(n % 3)
                        if frag is not None and _dtype(model, target) is bytes:
                            frag = frag.encode()
                        for key, value in (("data", frag), ("extras", extras), ("name", name),
                                           ("encoding", enc), ("version", version)):
                            if value is not None:
                                msg[key] = value
                        store.apply("c", [copy.deepcopy(msg)], connection_id="k2", client_id=client,
                                            id_prefix="q")
                        model.mutate(msg, 5, clock["t"], client)
                else:
                    msg = {"action": 1 if step[0] == "update" else 2, "serial": target}
                    if step[0] == "update":
                        msg.update({k: v for k, v in zip(("data", "name", "extras"), step[2:5]) if v is not None})
                    store.apply("c", [copy.deepcopy(msg)], connection_id="k2", client_id=None,
                                        id_prefix="q")
                    model.mutate(msg, msg["action"], clock["t"], None)

    assert store.history("c") == [model.current[s] for s in model.order]
    for serial in model.order:
        assert store.get("c", serial) == model.current[serial]
        assert store.versions("c", serial) == model.versions[serial]
    log = store.channel("c")
    got = [(e.serial, e.message_serial, e.action, e.live, e.aggregate) for e in log.events]
    assert got == model.events
    assert log.latest_serial == (model.events[-1][0] if model.events else FLOOR_SERIAL)
    if model.events:
        cut = data.draw(st.integers(0, len(model.events) - 1))
        after = log.events_after(model.events[cut][0])
        assert [(e.serial, e.live, e.aggregate) for e in after] == [(s, lv, ag) for s, _, _, lv, ag in
                                                                    model.events[cut + 1 :]]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(["append", "update", "burst"]), max_size=12),
    st.integers(1, 30),
    st.sampled_from(["forwards", "backwards"]),
    st.integers(-1, 400),
)
def test_versions_pages_are_built_lazily_like_the_list_pages(
    ops: list[str], limit: int, direction: str, cursor_at: int
) -> None:
    """GET .../versions pages the lazy view exactly as the generic pager pages the full list."""
    store = Store()
    (create,) = store.apply("c", [{"data": "a"}], connection_id="k", client_id=None, id_prefix="p")
    for name in ops:
        for _ in range(100 if name == "burst" else 1):
            action = 1 if name == "update" else 5
            store.apply("c", [{"action": action, "serial": create.serial, "data": "b"}], connection_id="k",
                        client_id=None, id_prefix="p")
    view = store.versions_view("c", create.serial)
    full = store.versions("c", create.serial)
    assert len(view) == len(full) and [view.serial(i) for i in range(len(view))] == [
        v["version"]["serial"] for v in full
    ]
    query = {"limit": str(limit), "direction": direction}
    if cursor_at >= 0:
        query["cursor"] = full[cursor_at % len(full)]["version"]["serial"] if cursor_at < 300 else "0" * 19 + "5"
    assert page_sorted(view, view.serial, query, "versions") == _page(full, query, "version", "versions")
