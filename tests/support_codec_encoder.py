"""Shared helpers for the codec encoder tests: a recording writer and a step runner.

Both mirror tests/js/handlers/codec_encoder.mjs exactly, so a Python wire log can be compared with
the one the real @ably/ai-transport@0.8.0 encoder produces for the same steps.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

from ai_transport.codec import ResponsesCodec
from ai_transport.errors import AITransportError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "openai-responses" / "vercel-ai"


def load_events(name: str) -> list[dict]:
    path = FIXTURES / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def fixture_names() -> list[str]:
    return sorted(p.name for p in FIXTURES.glob("*.chunks.txt"))


def _clone(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False))


class RecordingWriter:
    """Records every writer call; mints serials ``s1, s2, …`` per published message.

    ``fail_appends`` / ``fail_publish``: 0-based call indices that raise; ``fail_updates`` makes every
    update raise; ``no_serial`` returns no serials.
    """

    def __init__(
        self,
        fail_appends: list[int] | None = None,
        fail_updates: bool = False,
        no_serial: bool = False,
        fail_publish: list[int] | None = None,
        delay: float = 0.0,
    ) -> None:
        self.log: list[dict[str, Any]] = []
        self.fail_appends = set(fail_appends or [])
        self.fail_publish = set(fail_publish or [])
        self.fail_updates = fail_updates
        self.no_serial = no_serial
        self.delay = delay
        self._serial = 0
        self._appends = 0
        self._publishes = 0

    async def publish(self, msg: Any) -> list[str]:
        n = self._publishes
        self._publishes += 1
        self.log.append({"op": "publish", "message": _clone(msg)})
        if n in self.fail_publish:
            raise RuntimeError(f"publish {n} failed")
        msgs = msg if isinstance(msg, list) else [msg]
        serials = []
        for _ in msgs:
            self._serial += 1
            serials.append(f"s{self._serial}")
        return [] if self.no_serial else serials

    async def append_message(self, msg: dict) -> dict:
        n = self._appends
        self._appends += 1
        self.log.append({"op": "append", "message": _clone(msg)})
        if self.delay:
            await asyncio.sleep(self.delay)
        if n in self.fail_appends:
            raise RuntimeError(f"append {n} failed")
        return {"versionSerial": f"v{n}"}

    async def update_message(self, msg: dict) -> dict:
        self.log.append({"op": "update", "message": _clone(msg)})
        if self.fail_updates:
            raise RuntimeError("update failed")
        return {"versionSerial": "u"}


def _error_of(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, AITransportError):
        return {"message": exc.message, "code": exc.code, "statusCode": exc.status_code}
    return {"message": str(exc), "code": None, "statusCode": None}


async def run_py(case: dict[str, Any], **encoder_kw: Any) -> dict[str, Any]:
    """Run one case (the JS handler's ``run`` args) through our encoder; same result shape."""
    wcfg = case.get("writer", {})
    writer = RecordingWriter(
        wcfg.get("failAppends"), bool(wcfg.get("failUpdates")), bool(wcfg.get("noSerial")), wcfg.get("failPublish")
    )
    options = case.get("options", {})
    enc = ResponsesCodec.create_encoder(writer, options.get("extras"), **encoder_kw)
    results: list[dict[str, Any]] = []
    for step in case.get("steps", []):
        value = copy.deepcopy(step.get("value"))
        try:
            if step["op"] == "output":
                await enc.publish_output(value, step.get("messageId"), extras=step.get("extras"))
            elif step["op"] == "input":
                await enc.publish_input(value, step.get("messageId"), extras=step.get("extras"))
            elif step["op"] == "cancel":
                await enc.cancel_streams()
            elif step["op"] == "close":
                await enc.close()
            else:
                raise ValueError(step["op"])
            results.append({"ok": True})
        except Exception as exc:
            results.append({"ok": False, "error": _error_of(exc)})
    return {"log": writer.log, "results": results}


def run_py_sync(case: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return asyncio.run(run_py(case, **kw))


def ordered_equal(a: Any, b: Any) -> bool:
    """Deep equality that also requires the same key order in every object (JSON byte identity)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(ordered_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(ordered_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, float) or isinstance(b, float):
        # JS prints a float's shortest digits; Python may read them back as an int (1e16 -> int).
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and float(a) == float(b)
    return a == b


def outputs(events: list[dict], message_id: str | None = "m1", **kw: Any) -> list[dict[str, Any]]:
    return [{"op": "output", "value": e, "messageId": message_id, **kw} for e in events]


def assert_same_as_js(node: Any, case: dict[str, Any], **encoder_kw: Any) -> dict[str, Any]:
    """Run ``case`` in JS and in Python; assert identical logs (key order included) and outcomes."""
    js = node.call("codec_encoder", "run", **case)
    py = run_py_sync(case, **encoder_kw)
    assert py["results"] == js["results"]
    assert len(py["log"]) == len(js["log"]), (py["log"], js["log"])
    for i, (p, j) in enumerate(zip(py["log"], js["log"])):
        assert ordered_equal(p, j), f"wire op {i} differs:\n py {p}\n js {j}"
    return py
