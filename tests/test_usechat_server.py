"""The useChat example's server (aiohttp): the page's files and nothing else (no CDN), config, health,
token requests and ``POST /api/chat`` wake-ups bounded to the example's conversation channels, the
bundle rebuilt only when its sources or pinned packages change, and one-line refusals of bad options."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support_page_server import http, load_example_server

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "usechat"

pytestmark = pytest.mark.asyncio


def load_server() -> Any:
    return load_example_server("usechat", "usechat_example_server_routes")


async def test_routes_serve_the_page_and_wake_the_agent_for_its_own_channels_only() -> None:
    module = load_server()
    woken: list[dict[str, Any]] = []
    done = asyncio.Event()

    async def on_invoke(invocation: dict[str, Any]) -> str:
        woken.append(invocation)
        done.set()
        return "complete"

    signed: list[str] = []

    def token_request(channel: str) -> dict[str, Any]:
        signed.append(channel)
        return {"keyName": "k", "capability": json.dumps({channel: ["subscribe"]})}

    async def down() -> bool:
        return False

    server = module.ChatServer({"namespace": "ns", "ably": {"port": 1}, "clientId": "u"}, on_invoke, token_request,
                               probe=down)
    port = await server.start()
    try:
        status, ctype, body = await http(port, "GET", "/")
        assert status == 200 and ctype.startswith("text/html")
        assert b'src="dist/app.js"' in body and b"https://" not in body  # nothing from a CDN
        status, ctype, _ = await http(port, "GET", "/style.css")
        assert status == 200 and ctype.startswith("text/css")
        for path in ("/server.py", "/chat_agent.py", "/package.json", "/app.jsx", "/node_modules/react/package.json",
                     "/dist/../server.py", "/%2e%2e/README.md"):
            assert (await http(port, "GET", path))[0] == 404, path
        status, _, body = await http(port, "GET", "/config.json")
        assert status == 200 and json.loads(body) == {"namespace": "ns", "ably": {"port": 1}, "clientId": "u"}
        assert json.loads((await http(port, "GET", "/health"))[2]) == {"emulator": "down"}

        status, _, body = await http(port, "GET", "/token-request?channel=ns:abc_1")
        assert status == 200 and json.loads(body)["keyName"] == "k" and signed == ["ns:abc_1"]
        for bad in ("other:abc", "ns:", "ns:a*b", "ns:a:b", "ns"):
            assert (await http(port, "GET", f"/token-request?channel={bad}"))[0] == 400, bad
        assert signed == ["ns:abc_1"]  # nothing signed for another channel

        # What createChatTransport POSTs: useChat's extra body fields beside the invocation.
        # The page may not name the trigger's publisher: the server binds it to the identity its tokens
        # give the page (so the worker never answers a member who copied the event-id).
        invocation = {"inputEventId": "ev-1", "sessionName": "ns:abc_1", "id": "chat", "trigger": "submit",
                      "inputClientId": "mallory"}
        status, _, body = await http(port, "POST", "/api/chat", json.dumps(invocation).encode())
        assert status == 202 and json.loads(body) == {"accepted": True}
        await asyncio.wait_for(done.wait(), 5)
        assert woken == [{**invocation, "inputClientId": "u"}]
        for bad_body in (b"{", b"[]", b'{"sessionName": "ns:abc"}', b'{"inputEventId": "e", "sessionName": "x:abc"}',
                         b'{"inputEventId": 1, "sessionName": "ns:abc"}'):
            assert (await http(port, "POST", "/api/chat", bad_body))[0] == 400, bad_body
        assert (await http(port, "GET", "/api/chat"))[0] == 405
        assert len(woken) == 1
    finally:
        await server.close()


async def test_a_failing_wake_up_is_reported_and_the_server_keeps_serving(capsys) -> None:
    module = load_server()

    async def on_invoke(invocation: dict[str, Any]) -> str:
        raise RuntimeError("model down")

    server = module.ChatServer({"namespace": "ns"}, on_invoke, lambda c: {})
    port = await server.start()
    try:
        body = json.dumps({"inputEventId": "e", "sessionName": "ns:a"}).encode()
        assert (await http(port, "POST", "/api/chat", body))[0] == 202
        await asyncio.gather(*server.tasks)
        assert (await http(port, "GET", "/health"))[0] == 200
    finally:
        await server.close()
    assert "agent error: model down" in capsys.readouterr().err


async def test_the_bundle_is_rebuilt_when_the_pinned_packages_change(tmp_path, monkeypatch) -> None:
    module = load_server()
    monkeypatch.setattr(module, "HERE", tmp_path)
    (tmp_path / "app.jsx").write_text("x")
    lock = {"packages": {"": {"dependencies": {"react": "19.3.1"}}, "node_modules/react": {"version": "19.3.1"}}}
    (tmp_path / "package-lock.json").write_text(json.dumps(lock))
    assert not module.packages_installed()  # nothing installed
    (tmp_path / "node_modules" / "react").mkdir(parents=True)
    (tmp_path / "node_modules" / ".bin").mkdir()
    (tmp_path / "node_modules" / ".bin" / "esbuild").write_text("")
    (tmp_path / "node_modules" / "react" / "package.json").write_text('{"version": "19.3.1"}')
    assert module.packages_installed()
    (tmp_path / "node_modules" / "react" / "package.json").write_text('{"version": "19.2.0"}')
    assert not module.packages_installed()  # the lockfile pins another version: npm ci again


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "--port must be between 0 and 65535, got 70000"),
        (["--emulator", "localhost"], "--emulator must be a URL like http://127.0.0.1:8090, got 'localhost'"),
        (["--namespace", "a:b"], "--namespace must be letters, digits, _ or - (1-64 of them), got 'a:b'"),
        (["--stream-delay", "-1"], "--stream-delay must be 0 or more seconds, got -1.0"),
    ],
)
async def test_bad_options_are_refused_on_one_line(args: list[str], message: str) -> None:
    r = subprocess.run([sys.executable, str(EXAMPLE / "server.py"), *args], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"usechat example: error: {message}\n"
