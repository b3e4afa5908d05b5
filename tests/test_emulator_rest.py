"""The emulator's REST side over plain HTTP (httpx): routes, auth, paging, bodies, errors."""


from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import math
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support_emulator import emulator_thread, unique_channel  # noqa: F401

from ai_transport.emulator import EmulatorThread, request_token

pytestmark = pytest.mark.timeout(120)

BASIC = {"Authorization": "Basic " + base64.b64encode(b"local.dev:secret").decode()}
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def http(emulator_thread: EmulatorThread) -> Iterator[httpx.Client]:
    """A keep-alive HTTP client on the session emulator (Basic auth with the dev key)."""
    with httpx.Client(base_url=emulator_thread.url, headers=BASIC, timeout=10) as client:
        yield client


def publish(http: httpx.Client, channel: str, messages: list[dict[str, Any]]) -> list[str]:
    r = http.post(f"/channels/{channel}/messages", json=messages)
    assert r.status_code == 201, r.text
    return r.json()["serials"]


def read_all(http: httpx.Client, url: str, params: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Follow rel=next links; return every item and the number of pages."""
    items: list[dict[str, Any]] = []
    pages = 0
    r = http.get(url, params=params)
    while True:
        assert r.status_code == 200, r.text
        pages += 1
        items += r.json()
        nxt = r.links.get("next")
        if not nxt:
            return items, pages
        r = http.get(str(r.request.url.join(nxt["url"])))


def test_time_needs_no_auth(emulator_thread: EmulatorThread) -> None:
    before = int(time.time() * 1000)
    r = httpx.get(f"{emulator_thread.url}/time")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert before - 5 <= r.json()[0] <= int(time.time() * 1000) + 5


def test_errors_are_ably_shaped(emulator_thread: EmulatorThread, http: httpx.Client) -> None:
    r = httpx.get(f"{emulator_thread.url}/channels/x/messages")
    assert r.status_code == 401
    err = r.json()["error"]
    assert err["code"] == 40101 and err["statusCode"] == 401 and err["message"]
    assert r.headers["x-ably-errorcode"] == "40101"
    r = httpx.get(
        f"{emulator_thread.url}/channels/x/messages",
        headers={"Authorization": "Basic " + base64.b64encode(b"local.dev:bad").decode()},
    )
    assert r.json()["error"]["code"] == 40101
    assert http.get("/nowhere").json()["error"]["code"] == 40400
    assert http.get("/channels/x/messages/00000000000000000000").status_code == 404
    assert http.get("/channels/x/messages", params={"limit": "0"}).json()["error"]["code"] == 40003
    assert http.get("/channels/x/messages", params={"direction": "up"}).json()["error"]["code"] == 40003
    assert http.get("/channels/x/messages", params={"start": "soon"}).json()["error"]["code"] == 40003
    r = http.post("/channels/x/messages", content=b"{nope", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == 40000


def test_publish_json_and_msgpack_bodies_and_responses(http: httpx.Client) -> None:
    ch = unique_channel("rest")
    s1 = publish(http, ch, [{"name": "a", "data": "one"}])
    r = http.post(
        f"/channels/{ch}/messages",
        content=msgpack.packb({"name": "b", "data": b"\x00\x01", "extras": {"k": [1]}}, use_bin_type=True),
        headers={"Content-Type": "application/x-msgpack", "Accept": "application/x-msgpack"},
    )
    assert r.status_code == 201 and r.headers["content-type"] == "application/x-msgpack"
    s2 = msgpack.unpackb(r.content)["serials"]
    assert s1 < s2
    items = http.get(f"/channels/{ch}/messages", params={"direction": "forwards"}).json()
    assert [m["data"] for m in items] == ["one", "AAE="]
    assert items[1]["encoding"] == "base64" and items[1]["extras"] == {"k": [1]}
    packed = http.get(f"/channels/{ch}/messages", headers={"Accept": "application/x-msgpack"})
    assert [m["data"] for m in msgpack.unpackb(packed.content)] == [b"\x00\x01", "one"]


def test_patch_get_and_versions(http: httpx.Client) -> None:
    ch = unique_channel("rest")
    (serial,) = publish(http, ch, [{"name": "n", "data": "a"}])
    versions = []
    for frag in "bcdef":
        r = http.patch(f"/channels/{ch}/messages/{serial}", json={"action": 5, "data": frag})
        assert r.status_code == 200, r.text
        versions.append(r.json()["versionSerial"])
    assert versions == sorted(versions) and versions[0] > serial
    got = http.get(f"/channels/{ch}/messages/{serial}").json()
    assert got["data"] == "abcdef" and got["action"] == 1 and got["version"]["serial"] == versions[-1]
    items, pages = read_all(
        http, f"/channels/{ch}/messages/{serial}/versions", {"limit": 2, "direction": "forwards"}
    )
    assert pages == 3
    assert [v["data"] for v in items] == ["a", "ab", "abc", "abcd", "abcde", "abcdef"]
    assert [v["version"]["serial"] for v in items] == [serial, *versions]
    bad = http.patch(f"/channels/{ch}/messages/{serial}", json={"action": 0, "data": "x"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == 40003
    missing = http.patch(f"/channels/{ch}/messages/nope", json={"action": 1, "data": "x"})
    assert missing.status_code == 404


def test_chunked_request_body(http: httpx.Client) -> None:
    ch = unique_channel("rest")

    def gen() -> Iterator[bytes]:
        yield b'[{"data": "chun'
        yield b'ked"}]'

    r = http.post(f"/channels/{ch}/messages", content=gen(), headers={"Content-Type": "application/json"})
    assert r.status_code == 201
    assert http.get(f"/channels/{ch}/messages").json()[0]["data"] == "chunked"


def test_request_token_signed_and_capability_enforced(emulator_thread: EmulatorThread) -> None:
    ch = unique_channel("cap")
    capability = json.dumps({ch: ["publish"]})
    body = {
        "keyName": "local.dev",
        "ttl": 60000,
        "capability": capability,
        "clientId": "tok",
        "timestamp": int(time.time() * 1000),
        "nonce": "n1",
    }
    text = "\n".join(["local.dev", "60000", capability, "tok", str(body["timestamp"]), "n1", ""])
    body["mac"] = base64.b64encode(hmac.new(b"secret", text.encode(), hashlib.sha256).digest()).decode()
    r = httpx.post(f"{emulator_thread.url}/keys/local.dev/requestToken", json=body)
    assert r.status_code == 200, r.text
    details = r.json()
    assert details["clientId"] == "tok" and json.loads(details["capability"]) == {ch: ["publish"]}
    assert details["expires"] - details["issued"] == 60000
    bearer = {"Authorization": "Bearer " + base64.b64encode(details["token"].encode()).decode()}
    r = httpx.post(f"{emulator_thread.url}/channels/{ch}/messages", json={"data": "x"}, headers=bearer)
    assert r.status_code == 201
    r = httpx.get(f"{emulator_thread.url}/channels/{ch}/messages", headers=bearer)
    assert r.status_code == 401 and r.json()["error"]["code"] == 40160
    r = httpx.post(f"{emulator_thread.url}/channels/other/messages", json={"data": "x"}, headers=bearer)
    assert r.json()["error"]["code"] == 40160
    r = httpx.post(
        f"{emulator_thread.url}/channels/{ch}/messages", json={"data": "x", "clientId": "eve"}, headers=bearer
    )
    assert r.json()["error"]["code"] == 40012
    body["mac"] = base64.b64encode(b"forged").decode()
    r = httpx.post(f"{emulator_thread.url}/keys/local.dev/requestToken", json=body)
    assert r.status_code == 401 and r.json()["error"]["code"] == 40101
    # the helper (Basic-authorised, unsigned) issues tokens too
    issued = request_token(emulator_thread, client_id="helper", capability={"*": ["subscribe"]})
    assert issued["clientId"] == "helper" and issued["token"].startswith("emu.")


def test_history_time_and_serial_bounds(http: httpx.Client) -> None:
    ch = unique_channel("rest")
    serials = []
    for i in range(5):
        serials += publish(http, ch, [{"data": str(i)}])
        time.sleep(0.005)  # distinct millisecond timestamps
    items = http.get(
        f"/channels/{ch}/messages", params={"from_serial": serials[2], "direction": "forwards"}
    ).json()
    assert [m["data"] for m in items] == ["0", "1", "2"]
    stamps = [
        m["timestamp"] for m in http.get(f"/channels/{ch}/messages", params={"direction": "forwards"}).json()
    ]
    assert stamps == sorted(set(stamps))
    items = http.get(f"/channels/{ch}/messages", params={"start": stamps[1], "end": stamps[3]}).json()
    assert [m["data"] for m in items] == ["3", "2", "1"]


@given(
    n=st.integers(min_value=0, max_value=40),
    limit=st.integers(min_value=1, max_value=15),
    forwards=st.booleans(),
    appends=st.lists(st.tuples(st.integers(min_value=0, max_value=39), st.text(max_size=3)), max_size=10),
)
def test_paging_returns_every_message_once_in_order(
    http: httpx.Client, n: int, limit: int, forwards: bool, appends: list[tuple[int, str]]
) -> None:
    ch = unique_channel("page")
    serials = publish(http, ch, [{"data": f"m{i}"} for i in range(n)]) if n else []
    expected = {s: f"m{i}" for i, s in enumerate(serials)}
    for idx, frag in appends:
        if idx < n:
            r = http.patch(f"/channels/{ch}/messages/{serials[idx]}", json={"action": 5, "data": frag})
            assert r.status_code == 200
            expected[serials[idx]] += frag
    direction = "forwards" if forwards else "backwards"
    items, pages = read_all(http, f"/channels/{ch}/messages", {"limit": limit, "direction": direction})
    got = [m["serial"] for m in items]
    assert got == (serials if forwards else serials[::-1])
    assert pages == max(1, -(-n // limit))
    assert [m["data"] for m in items] == [expected[s] for s in got]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_entry_point_serves() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ai_transport.emulator", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"127.0.0.1:{port}" in line
        assert httpx.get(f"http://127.0.0.1:{port}/time").status_code == 200
    finally:
        proc.terminate()
        proc.wait(10)


def test_idempotent_publish_by_message_id(http: httpx.Client) -> None:
    ch = unique_channel("idem")
    first = publish(http, ch, [{"id": "fixed:0", "data": "once"}, {"id": "fixed:1", "data": "twice"}])
    again = publish(http, ch, [{"id": "fixed:0", "data": "once"}, {"id": "fixed:1", "data": "twice"}])
    assert again == first
    items = http.get(f"/channels/{ch}/messages").json()
    assert [m["id"] for m in items] == ["fixed:1", "fixed:0"]


def test_malformed_http_is_rejected_and_server_survives(emulator_thread: EmulatorThread) -> None:
    for raw in (
        b"GARBAGE\r\n\r\n",
        b"POST /channels/x/messages HTTP/1.1\r\nContent-Length: nope\r\n\r\n",
        b"POST /channels/x/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ):
        with socket.create_connection(("127.0.0.1", emulator_thread.port), timeout=5) as s:
            s.sendall(raw)
            # a request line without a version is answered in HTTP/1.0 (aiohttp knows no better)
            assert s.recv(1024).split(b" ", 2)[:2] in ([b"HTTP/1.1", b"400"], [b"HTTP/1.0", b"400"])
    assert httpx.get(f"{emulator_thread.url}/time").status_code == 200


def test_cors_preflight_allows_authorization(emulator_thread: EmulatorThread) -> None:
    r = httpx.options(
        f"{emulator_thread.url}/channels/x/messages",
        headers={
            "Origin": "http://localhost:3000",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization,x-ably-version",
        },
    )
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "http://localhost:3000"  # echoed, not "*"
    # ably-js sends its REST requests (history) withCredentials: the browser needs this to read them
    assert r.headers["access-control-allow-credentials"] == "true"
    assert "authorization" in r.headers["access-control-allow-headers"].lower()
    got = httpx.get(f"{emulator_thread.url}/time", headers={"Origin": "http://localhost:3000"})
    assert got.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert got.headers["access-control-allow-credentials"] == "true"
    assert "Link" in got.headers["access-control-expose-headers"]


MSGPACK = {"Content-Type": "application/x-msgpack"}


def _strict_json(raw: bytes) -> Any:
    """``JSON.parse``: no NaN / Infinity literals."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(raw, parse_constant=refuse)


def _publish_escaped(http: httpx.Client, ch: str, messages: list[dict[str, Any]]) -> list[str]:
    """:func:`publish` with a JSON text of ASCII escapes (a lone surrogate is ``\\ud800``)."""
    r = http.post(f"/channels/{ch}/messages", content=json.dumps(messages), headers={"Content-Type": "application/json"})
    assert r.status_code == 201, r.text
    return r.json()["serials"]


def _json_reads_ok(http: httpx.Client, ch: str, serial: str) -> None:
    """Every JSON read of the channel answers 200 with strict JSON."""
    for url in (f"/channels/{ch}/messages", f"/channels/{ch}/messages/{serial}", f"/channels/{ch}/messages/{serial}/versions"):
        r = http.get(url)
        assert r.status_code == 200, (url, r.text)
        _strict_json(r.content)


def test_msgpack_ext_values_are_refused_and_the_channel_stays_readable(http: httpx.Client) -> None:
    """An ext type (in version.metadata, data, extras) is refused 400 at ingest: stored, it made
    every JSON read of the channel answer 500 (and a JSON rewind attach ERROR 50000)."""
    ch = unique_channel("ext")
    (serial,) = publish(http, ch, [{"name": "n", "data": "hello"}])
    for body in (
        {"action": 1, "data": "upd", "version": {"metadata": msgpack.ExtType(5, b"a")}},
        {"action": 1, "data": msgpack.ExtType(1, b"")},
        {"action": 1, "data": "x", "extras": {"k": [msgpack.ExtType(0, b"z")]}},
    ):
        r = http.patch(f"/channels/{ch}/messages/{serial}", content=msgpack.packb(body, use_bin_type=True), headers=MSGPACK)
        assert r.status_code == 400 and r.json()["error"]["code"] == 40000, r.text
    r = http.post(f"/channels/{ch}/messages", content=msgpack.packb({"data": msgpack.ExtType(3, b"q")}), headers=MSGPACK)
    assert r.status_code == 400 and r.json()["error"]["code"] == 40000
    _json_reads_ok(http, ch, serial)


def test_msgpack_timestamp_is_refused_so_a_lone_surrogate_cannot_poison_history(http: httpx.Client) -> None:
    """A msgpack timestamp decoded to a datetime; with any lone surrogate on the channel JSON history
    went through the stdlib encoder, which cannot write one: 500 for every later JSON read."""
    ch = unique_channel("ts")
    stamp = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    r = http.post(f"/channels/{ch}/messages", content=msgpack.packb({"data": stamp}, datetime=True), headers=MSGPACK)
    assert r.status_code == 400 and r.json()["error"]["code"] == 40000
    (serial,) = _publish_escaped(http, ch, [{"data": "\ud800"}])
    _json_reads_ok(http, ch, serial)
    assert http.get(f"/channels/{ch}/messages").json()[0]["data"] == "\ud800"


def test_msgpack_version_metadata_keys_are_made_strings(http: httpx.Client) -> None:
    """version.metadata from a msgpack peer gets string keys (as data and extras do): a tuple or
    binary key there, stored as sent, broke JSON reads (with a lone surrogate on the channel)."""
    ch = unique_channel("meta")
    (serial,) = _publish_escaped(http, ch, [{"data": "a\ud800"}])
    body = {"action": 1, "data": "b", "version": {"metadata": {(1, 2): "t", b"k": "b", 3: "i"}}}
    r = http.patch(f"/channels/{ch}/messages/{serial}", content=msgpack.packb(body, use_bin_type=True), headers=MSGPACK)
    assert r.status_code == 200, r.text
    _json_reads_ok(http, ch, serial)
    got = http.get(f"/channels/{ch}/messages/{serial}").json()
    assert got["version"]["metadata"] == {"(1, 2)": "t", "k": "b", "3": "i"}


_ext = st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=4)) | st.builds(
    msgpack.Timestamp, st.integers(0, 2**33), st.integers(0, 10**9 - 1)
)
_keys = st.text(max_size=4) | st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=3) | st.booleans() | st.none()
_wire = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=6) | st.binary(max_size=6) | _ext,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_keys | _ext, kids, max_size=3),
    max_leaves=8,
)


@given(data=_wire, extras=_wire, metadata=_wire, surrogate=st.booleans())
def test_any_msgpack_value_is_refused_or_readable_by_json_clients(
    http: httpx.Client, data: Any, extras: Any, metadata: Any, surrogate: bool
) -> None:
    """Whatever a msgpack peer publishes or updates with is refused 4xx, or every JSON client can
    read the channel afterwards (history, the message, its versions: 200, strict JSON)."""
    ch = unique_channel("anymp")
    (serial,) = _publish_escaped(http, ch, [{"data": "\ud800" if surrogate else "x"}])
    for method, url, body in (
        ("POST", f"/channels/{ch}/messages", {"data": data, "extras": {"e": extras}}),
        ("PATCH", f"/channels/{ch}/messages/{serial}", {"action": 1, "data": data, "version": {"metadata": metadata}}),
    ):
        r = http.request(method, url, content=msgpack.packb(body, use_bin_type=True), headers=MSGPACK)
        assert r.status_code < 500, r.text
    _json_reads_ok(http, ch, serial)


def _signed_token_request(**fields: Any) -> dict[str, Any]:
    """A token request for local.dev signed with its secret (the mac over the fields as Ably's SDKs join them)."""
    body = {"keyName": "local.dev", "timestamp": int(time.time() * 1000), "nonce": f"n{time.time_ns()}", **fields}
    text = "\n".join(
        ["local.dev", str(body.get("ttl") or ""), "", "", str(body.get("timestamp") or 0), str(body.get("nonce") or ""), ""]
    )
    body["mac"] = base64.b64encode(hmac.new(b"secret", text.encode(), hashlib.sha256).digest()).decode()
    return body


@pytest.mark.parametrize("ttl", ["NaN", "Infinity", "-Infinity", "1e400", "1.5", '"12x"'])
def test_a_token_ttl_that_is_not_an_integer_is_refused_40003(http: httpx.Client, ttl: str) -> None:
    """``int(nan)`` / ``int(inf)`` in the ttl check raised: HTTP 500."""
    r = http.post("/keys/local.dev/requestToken", content='{"ttl":' + ttl + "}", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == 40003, r.text


@pytest.mark.parametrize("timestamp", [math.nan, math.inf, "²", "9" * 5000])
def test_a_signed_token_request_timestamp_that_is_not_a_finite_number_is_refused(
    emulator_thread: EmulatorThread, timestamp: Any
) -> None:
    """A NaN timestamp passed the window check (NaN compares false) and then ``int(nan)`` raised;
    a str of Unicode digits (``"²".isdigit()``) or past int()'s digit limit raised in ``int()``."""
    body = _signed_token_request(timestamp=timestamp)
    r = httpx.post(
        f"{emulator_thread.url}/keys/local.dev/requestToken",
        content=json.dumps(body),  # (NaN / Infinity literals, as json.dumps writes them)
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == 40003, r.text
    good = _signed_token_request()
    assert httpx.post(f"{emulator_thread.url}/keys/local.dev/requestToken", json=good).status_code == 200


@pytest.mark.parametrize("key", [[1], {"k": 1}, 5, None])
def test_a_connection_key_that_is_not_a_string_is_refused_40006(http: httpx.Client, key: Any) -> None:
    """``connectionKey: [1]`` was put in a set: TypeError, HTTP 500."""
    ch = unique_channel("ckey")
    r = http.post(f"/channels/{ch}/messages", json={"data": "x", "connectionKey": key})
    assert r.status_code == 400 and r.json()["error"]["code"] == 40006, r.text
    r = http.post(f"/channels/{ch}/messages", json=[{"data": "x", "connectionKey": "a!b"}, {"data": "y", "connectionKey": [1]}])
    assert r.status_code == 400 and r.json()["error"]["code"] == 40006
    assert http.get(f"/channels/{ch}/messages").json() == []


@pytest.mark.parametrize("origin", ["http://[::1", "https://[zz]", "http://[127.0.0.1"])
def test_an_origin_that_is_not_a_url_is_refused_40300(emulator_thread: EmulatorThread, origin: str) -> None:
    """``urlsplit("http://[::1")`` raises ValueError: aiohttp's bare 500 for any route, websocket too."""
    r = httpx.get(f"{emulator_thread.url}/channels/x", headers={**BASIC, "Origin": origin})
    assert r.status_code == 403 and r.json()["error"]["code"] == 40300, r.text
    ws = httpx.get(
        f"{emulator_thread.url}/",
        headers={"Origin": origin, "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="},
    )
    assert ws.status_code == 403


@pytest.mark.parametrize("depth", [600, 950])
def test_deeply_nested_data_is_taken_by_batch_as_by_a_single_publish(http: httpx.Client, depth: int) -> None:
    """A batch publish copies each channel its messages: ``copy.deepcopy`` ran out of recursion past
    ~480 levels (HTTP 500) for data a single publish stores and serves."""
    deep = "[" * depth + "1" + "]" * depth
    ch = f"deep-{depth}-{secrets.token_hex(3)}"
    single = http.post(f"/channels/{ch}-single/messages", content='{"data":' + deep + "}", headers=JSON)
    batch = http.post("/messages", content=f'{{"channels":["{ch}"],"messages":[{{"data":{deep}}}]}}', headers=JSON)
    assert (single.status_code, batch.status_code) == (201, 201)
    history = http.get(f"/channels/{ch}/messages")
    assert history.status_code == 200 and history.text.count('"id"') == 1  # (no parse: as deep)


def test_deeply_nested_data_with_a_lone_surrogate_is_refused_not_a_500(http: httpx.Client) -> None:
    """A lone surrogate is rewritten U+FFFD for MessagePack peers, by a recursive walk: past its
    limit the publish was a 500; it is refused 40000, and nothing is stored."""
    deep = "[" * 700 + '"\\ud800"' + "]" * 700
    ch = f"deep-sur-{secrets.token_hex(3)}"
    resp = http.post(f"/channels/{ch}/messages", content='{"data":' + deep + "}", headers=JSON)
    assert resp.status_code == 400 and resp.json()["error"]["code"] == 40000
    assert http.get(f"/channels/{ch}/messages").json() == []
