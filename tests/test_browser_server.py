"""The browser example's tiny HTTP server: static files, config, the wake-up endpoint, and refusals."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "browser"


def load_server():
    spec = importlib.util.spec_from_file_location("browser_example_server_routes", EXAMPLE / "server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def http(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, payload


async def test_routes_serve_the_page_config_and_wake_the_agent():
    module = load_server()
    woken: list[dict] = []
    done = asyncio.Event()

    async def on_invoke(invocation: dict) -> None:
        woken.append(invocation)
        done.set()

    server = module.ExampleServer({"channel": "c1", "ably": {"port": 1}}, on_invoke)
    port = await server.start()
    try:
        status, headers, body = await http(port, "GET", "/")
        assert status == 200 and headers["Content-Type"] == "text/html" and b"Approve" not in body
        assert b'<script type="module" src="dist/app.js">' in body
        status, headers, body = await http(port, "GET", "/app.js")
        assert status == 200 and headers["Content-Type"] == "text/javascript"
        status, _, body = await http(port, "GET", "/config.json?x=1")
        assert status == 200 and json.loads(body) == {"channel": "c1", "ably": {"port": 1}}

        inv = {"inputEventId": "ev-1", "sessionName": "c1"}
        status, _, body = await http(port, "POST", "/invoke", json.dumps(inv).encode())
        assert status == 202 and json.loads(body) == {"accepted": True}
        await asyncio.wait_for(done.wait(), 5)
        assert woken == [inv]

        assert (await http(port, "POST", "/invoke", b"{not json"))[0] == 400
        assert (await http(port, "POST", "/invoke", b'{"sessionName": "c1"}'))[0] == 400
        assert (await http(port, "GET", "/invoke"))[0] == 405
        assert (await http(port, "POST", "/"))[0] == 405
        for path in ("/../../pyproject.toml", "/%2e%2e/server.py", "/node_modules/ably/package.json", "/nope"):
            assert (await http(port, "GET", path))[0] == 404, path
    finally:
        await server.close()


async def test_a_failing_agent_is_reported_and_the_server_keeps_serving():
    module = load_server()

    async def on_invoke(invocation: dict) -> None:
        raise RuntimeError("model unreachable")

    server = module.ExampleServer({}, on_invoke)
    port = await server.start()
    try:
        assert (await http(port, "POST", "/invoke", b'{"inputEventId": "e", "sessionName": "s"}'))[0] == 202
        for _ in range(100):
            if server.errors:
                break
            await asyncio.sleep(0.01)
        assert [str(e) for e in server.errors] == ["model unreachable"]
        assert (await http(port, "GET", "/config.json"))[0] == 200
    finally:
        await server.close()


async def test_token_request_route_serves_a_least_privilege_browser_token_request():
    module = load_server()

    async def on_invoke(invocation: dict) -> None:
        return None

    options = module.ably_js_options("http://127.0.0.1:9")
    assert "token" not in options and options["authUrl"] == "/token-request"
    server = module.ExampleServer({}, on_invoke, module.browser_token_request("browser-user", "c1"))
    port = await server.start()
    try:
        status, headers, body = await http(port, "GET", "/token-request?clientId=browser-user")
        request = json.loads(body)
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert request["keyName"] == "local.dev" and request["clientId"] == "browser-user" and request["mac"]
        assert json.loads(request["capability"]) == {"c1": ["subscribe", "publish", "history", "presence"]}
        assert "secret" not in body.decode()
    finally:
        await server.close()
