"""The page examples' servers (``examples/browser/server.py``, ``examples/usechat/server.py``, both on
``examples/page_server.py``) as modules, and one HTTP request to them with its path sent as is."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent


def load_example_server(example: str, name: str | None = None) -> Any:
    """``examples/<example>/server.py`` as a fresh module (named ``name``)."""
    path = ROOT / "examples" / example / "server.py"
    spec = importlib.util.spec_from_file_location(name or f"{example}_example_server", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def http(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, str, bytes]:
    """One request, the path sent as is (no client-side normalisation of ``..``): status, content
    type, body."""
    async with aiohttp.ClientSession() as client:
        url = aiohttp.client.URL.build(scheme="http", host="127.0.0.1", port=port, path=path, encoded=True)
        async with client.request(method, url, data=body) as r:
            return r.status, r.headers.get("Content-Type", ""), await r.read()
