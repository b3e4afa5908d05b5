"""The browser example's server (aiohttp): the page's files and nothing else, config, health, token
requests and wake-ups bounded to the example's conversation channels, and one-line refusals of bad
options."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support_page_server import http, load_example_server

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "browser"


def load_server() -> Any:
    return load_example_server("browser", "browser_example_server_routes")


async def test_routes_serve_the_page_config_health_and_wake_the_agent() -> None:
    module = load_server()
    woken: list[dict[str, Any]] = []
    done = asyncio.Event()
    up = [False]

    async def on_invoke(invocation: dict[str, Any]) -> None:
        woken.append(invocation)
        done.set()

    async def probe() -> bool:
        return up[0]

    server = module.ExampleServer({"namespace": "ns", "ably": {"port": 1}}, on_invoke, probe=probe)
    port = await server.start()
    try:
        status, ctype, body = await http(port, "GET", "/")
        assert status == 200 and ctype.startswith("text/html")
        assert b'<script type="module" src="dist/app.js">' in body and b"https://" not in body  # no CDN
        status, ctype, body = await http(port, "GET", "/style.css")
        assert status == 200 and ctype.startswith("text/css") and b"@import" not in body and b"url(http" not in body
        status, _, body = await http(port, "GET", "/config.json?x=1")
        assert status == 200 and json.loads(body) == {"namespace": "ns", "ably": {"port": 1}}
        assert json.loads((await http(port, "GET", "/health"))[2]) == {"emulator": "down"}
        up[0] = True
        assert json.loads((await http(port, "GET", "/health"))[2]) == {"emulator": "up"}

        inv = {"inputEventId": "ev-1", "sessionName": "ns:c1"}
        status, _, body = await http(port, "POST", "/invoke", json.dumps(inv).encode())
        assert status == 202 and json.loads(body) == {"accepted": True}
        await asyncio.wait_for(done.wait(), 5)
        assert woken == [inv]

        assert (await http(port, "POST", "/invoke", b"{not json"))[0] == 400
        status, _, body = await http(port, "POST", "/invoke", b"[" * 100_000 + b"]" * 100_000)
        assert status == 400 and body.startswith(b"invalid JSON")  # not a bare 500 (RecursionError)
        assert (await http(port, "POST", "/invoke", b'{"sessionName": "ns:c1"}'))[0] == 400
        for name in ("other:c1", "ns", "ns:", "ns:a:b", "ns:../x", 7):  # only this example's conversations
            bad = json.dumps({"inputEventId": "e", "sessionName": name}).encode()
            assert (await http(port, "POST", "/invoke", bad))[0] == 400, name
        assert len(woken) == 1
        assert (await http(port, "GET", "/invoke"))[0] == 405
        assert (await http(port, "POST", "/"))[0] == 405
        for path in ("/app.js", "/server.py", "/package.json", "/../../pyproject.toml", "/%2e%2e/server.py",
                     "/dist/../server.py", "/node_modules/ably/package.json", "/nope"):
            assert (await http(port, "GET", path))[0] == 404, path
    finally:
        await server.close()


async def test_a_failing_agent_is_reported_and_the_server_keeps_serving() -> None:
    module = load_server()

    async def on_invoke(invocation: dict[str, Any]) -> None:
        raise RuntimeError("model unreachable")

    server = module.ExampleServer({"namespace": "s"}, on_invoke)
    port = await server.start()
    try:
        assert (await http(port, "POST", "/invoke", b'{"inputEventId": "e", "sessionName": "s:x"}'))[0] == 202
        for _ in range(200):
            if server.errors:
                break
            await asyncio.sleep(0.01)
        assert [str(e) for e in server.errors] == ["model unreachable"]
        assert (await http(port, "GET", "/config.json"))[0] == 200
    finally:
        await server.close()


async def test_token_request_is_least_privilege_on_one_conversation_channel() -> None:
    module = load_server()

    async def on_invoke(invocation: dict[str, Any]) -> None:
        return None

    options = module.ably_js_options("http://127.0.0.1:9")
    assert "token" not in options and options["authUrl"] == "/token-request"
    # the page's /health decides whether the emulator answers, not an XHR ably-js sends it as the
    # socket drops (a console error whenever it lost the race with the page's teardown)
    assert options["disableConnectivityCheck"] is True
    server = module.ExampleServer({"namespace": "ns"}, on_invoke, module.browser_token_request("browser-user"))
    port = await server.start()
    try:
        status, ctype, body = await http(port, "GET", "/token-request?clientId=browser-user&channel=ns%3Ac1")
        request = json.loads(body)
        assert status == 200 and ctype.startswith("application/json")
        assert request["keyName"] == "local.dev" and request["clientId"] == "browser-user" and request["mac"]
        assert json.loads(request["capability"]) == {"ns:c1": ["subscribe", "publish", "history", "presence"]}
        assert "secret" not in body.decode()
        for query in ("", "?channel=other%3Ac1", "?channel=ns%3A*", "?channel=*", "?channel=ns"):
            status, _, body = await http(port, "GET", f"/token-request{query}")
            assert status == 400 and b"ns:<id>" in body, query
    finally:
        await server.close()


async def test_emulator_reachable_says_whether_something_listens() -> None:
    module = load_server()
    with socket.socket() as listener:  # a stand-in emulator: something accepts connections
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert await module.emulator_reachable(f"http://127.0.0.1:{port}") is True
    assert await module.emulator_reachable(f"http://127.0.0.1:{port}", timeout=0.5) is False


def run_server(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLE / "server.py"), *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--port", "99999"], 2, "browser example: error: --port must be between 0 and 65535, got 99999"),
        (["--port", "-1"], 2, "browser example: error: --port must be between 0 and 65535, got -1"),
        (["--port", "eighty"], 2, "browser example: error: argument --port: invalid int value: 'eighty' (see --help)"),
        (["--emulator", "localhost"], 2,
         "browser example: error: --emulator must be a URL like http://127.0.0.1:8090, got 'localhost'"),
        (["--namespace", "a:b"], 2,
         "browser example: error: --namespace must be letters, digits, _ or - (1-64 of them), got 'a:b'"),
        (["--stream-delay", "-1"], 2, "browser example: error: --stream-delay must be 0 or more seconds, got -1.0"),
    ],
)
def test_bad_options_are_one_line_and_a_non_zero_exit(args: list[str], code: int, message: str) -> None:
    r = run_server(*args)
    assert (r.returncode, r.stdout, r.stderr) == (code, "", message + "\n")


def test_a_port_in_use_is_one_line_and_exit_1() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = run_server("--port", str(port), "--emulator", "http://127.0.0.1:9")
    assert r.returncode == 1 and r.stdout == "", r
    assert r.stderr == (f"browser example: error: port {port} on 127.0.0.1 is already in use; pick another with "
                        "--port N (or --port 0 for any free port)\n")


def test_the_sdks_dropped_connection_is_one_line_never_a_traceback() -> None:
    """With the emulator gone, the agent's ably SDK logs each failed reconnect with its traceback:
    the example servers keep its one line (seen in CI: a Traceback on the example's stderr)."""
    import importlib.util
    import io
    import logging

    spec = importlib.util.spec_from_file_location("page_server_for_test", ROOT / "examples" / "page_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(module.sdk_line)
    sdk, ours = logging.getLogger("ably.transport.websockettransport"), logging.getLogger("page-example-test")
    for logger in (sdk, ours):
        logger.addHandler(handler)
        logger.propagate = False
    try:
        try:
            raise EOFError("connection closed while reading HTTP status line")
        except EOFError:
            sdk.exception("Error opening websocket connection")
            ours.exception("ours")
    finally:
        for logger in (sdk, ours):
            logger.removeHandler(handler)
            logger.propagate = True
    lines = out.getvalue().splitlines()
    assert lines[0] == "Error opening websocket connection" and lines[1] == "ours"
    assert "Traceback" in out.getvalue()  # our own loggers keep theirs
    assert out.getvalue().count("Traceback") == 1
