"""Helpers for the Vercel codec tests: our side of tests/js/handlers/vercel_codec.mjs.

:func:`py_encode` runs the same runs of steps through :class:`UIMessageCodec` over a recording writer
that mints the same serials and records the same publish log and live wire as the JS handler;
:func:`py_decode_fold` decodes a wire and folds it as the handler's ``decodeFold`` does.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from support_codec_encoder import _error_of, ordered_equal

from ai_transport.codec import UIMessageCodec, approved_pending_tool_calls, pending_tool_calls


def _clone(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False))


class VercelRecordingWriter:
    """As the handler's ``recordingWriter``: a publish log and the live wire (serials in order)."""

    def __init__(self, fail_appends: list[int] | None = None) -> None:
        self.log: list[dict[str, Any]] = []
        self.wire: list[dict[str, Any]] = []
        self._n = 0
        self._appends = 0
        self._fail = set(fail_appends or [])

    def _next(self) -> str:
        self._n += 1
        return f"s{self._n:010d}"

    @staticmethod
    def _inbound(action: str, m: dict[str, Any], serial: str, version: str) -> dict[str, Any]:
        msg: dict[str, Any] = {"action": action, "serial": serial, "version": {"serial": version}}
        for key in ("name", "data", "extras"):
            if key in m:
                msg[key] = _clone(m[key])
        return msg

    async def publish(self, msgs: Any) -> list[str]:
        self.log.append({"op": "publish", "message": _clone(msgs)})
        serials = []
        for m in msgs if isinstance(msgs, list) else [msgs]:
            serial = self._next()
            serials.append(serial)
            self.wire.append(self._inbound("message.create", m, serial, serial))
        return serials

    async def append_message(self, m: dict[str, Any]) -> dict[str, Any]:
        i = self._appends
        self._appends += 1
        self.log.append({"op": "append", "message": _clone(m)})
        if i in self._fail:
            raise RuntimeError(f"append {i} failed")
        v = self._next()
        self.wire.append(self._inbound("message.append", m, m["serial"], v))
        return {"versionSerial": v}

    async def update_message(self, m: dict[str, Any]) -> dict[str, Any]:
        self.log.append({"op": "update", "message": _clone(m)})
        v = self._next()
        self.wire.append(self._inbound("message.update", m, m["serial"], v))
        return {"versionSerial": v}


async def _encode(runs: list[dict[str, Any]], writer_cfg: dict[str, Any]) -> dict[str, Any]:
    writer = VercelRecordingWriter(writer_cfg.get("failAppends"))
    results: list[dict[str, Any]] = []
    for run in runs:
        options = run.get("options", {})
        enc = UIMessageCodec.create_encoder(writer, options.get("extras"), message_id=options.get("messageId"))
        for step in run["steps"]:
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
    return {"log": writer.log, "wire": writer.wire, "results": results}


def py_encode(runs: list[dict[str, Any]], writer: dict[str, Any] | None = None) -> dict[str, Any]:
    """The handler's ``encode`` on our side."""
    return asyncio.run(_encode(runs, writer or {}))


def py_decode_fold(wire: list[dict[str, Any]]) -> dict[str, Any]:
    """The handler's ``decodeFold`` on our side (JSON-shaped, as the handler returns it)."""
    decoder = UIMessageCodec.create_decoder()
    state = UIMessageCodec.init()
    decoded = []
    for raw in wire:
        result = decoder.decode(copy.deepcopy(raw))
        decoded.append(result.to_dict())
        transport = raw.get("extras", {}).get("ai", {}).get("transport", {})
        mid = transport.get("codec-message-id")
        for event in result.inputs:
            UIMessageCodec.fold(state, "input", event, mid, raw.get("serial", ""))
        for event in result.outputs:
            UIMessageCodec.fold(state, "output", event, mid, raw.get("serial", ""))
    messages = [m.to_dict() for m in UIMessageCodec.get_messages(state)]
    plain = [m["message"] for m in messages]
    return _clone(
        {
            "decoded": decoded,
            "messages": messages,
            "foldError": None,
            "pending": pending_tool_calls(plain),
            "approved": approved_pending_tool_calls(plain),
        }
    )


def assert_ordered_equal(py: Any, js: Any, what: str) -> None:
    """Equal, key order included (JSON byte identity); a readable diff on failure."""
    if not ordered_equal(py, js):
        raise AssertionError(f"{what} differs:\n py {json.dumps(py)[:3000]}\n js {json.dumps(js)[:3000]}")


def output_steps(chunks: list[dict[str, Any]], message_id: str | None = None) -> list[dict[str, Any]]:
    return [{"op": "output", "value": c, "messageId": message_id} for c in chunks]
