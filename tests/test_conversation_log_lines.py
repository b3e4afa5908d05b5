"""What a member publishes never forges or breaks a log line: any string of any wire (a name, a
client id, a header, an error message, a codec kind) may hold a newline, an escape sequence, a lone
surrogate or 3,000 characters, and every record the core and the codec log about it is one
printable line, encodable as UTF-8 and bounded. A raw newline lets a member write a fake line into
an operator's log; a lone surrogate makes a UTF-8 file handler fail (``--- Logging error ---`` and
a traceback on stderr) — both from an ordinary token, no capability beyond publish.

The reasons the core reports (:class:`~ai_transport.conversation.core.Skipped`) are one
printable line too: a UI may show them."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support_untrusted import record

from ai_transport.codec import ResponsesCodec
from ai_transport.conversation.core import Conversation, Skipped
from ai_transport.errors import one_line, quoted

EVIL = "\ud800\nFAKE LINE\x1b[31m" + "x" * 3000
LONGEST = 1000  # a skip line: name, client id, serial, mutator (60 each) and a reason (500)


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[dict[str, Any]]]:
    full = asyncio.run(record())["full"]
    history = list(full["history"])
    # a run that ended ``error`` (its message from the wire): a client logs it
    end = copy.deepcopy([w for w in history if w.get("name") == "ai-run-end"][-1])
    end["extras"]["ai"]["transport"].update({"run-reason": "error", "error-code": "104008", "error-message": "boom"})
    end["serial"] = "z" + end["serial"]
    return {"history": history + [end], "live": list(full["wires"]) + [end]}


def _string_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _string_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _string_paths(v, (*path, i))
    elif isinstance(value, str) and path[0] not in ("serial", "id", "connectionId"):  # Ably's own
        yield path


def _set(wire: dict[str, Any], path: tuple[Any, ...], value: str) -> None:
    for step in path[:-1]:
        wire = wire[step]
    wire[path[-1]] = value


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.pathname, record.lineno, record.getMessage()))


def _bad(line: str) -> str | None:
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return "not UTF-8"
    if not line.isprintable():
        return "not one printable line"
    if len(line) > LONGEST:
        return f"{len(line)} characters"
    return None


def _fold(wires: list[dict[str, Any]], agent: bool, trusted: set[str] | None, live: bool) -> list[str]:
    handler = _Lines()
    root = logging.getLogger("ai_transport")
    level, root.level = root.level, logging.DEBUG
    root.addHandler(handler)
    try:
        core = Conversation(ResponsesCodec, agent=agent, trusted_agent_ids=trusted)
        receive = core.receive_live if live else core.receive_history
        for wire in wires:
            receive(copy.deepcopy(wire))
        reasons = [c.why for c in core.changes() if isinstance(c, Skipped)]
    finally:
        root.removeHandler(handler)
        root.level = level
    bad = [f"{path}:{n}: {why}: {line[:120]!r}" for path, n, line in handler.lines if (why := _bad(line))]
    bad += [f"reason: {why}: {r[:120]!r}" for r in reasons if (why := _bad(r))]
    assert bad == []
    return [line for _, _, line in handler.lines]


MODES = [(True, {"agent"}), (False, {"agent"}), (False, None)]  # an agent; a client with, without trust


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), live=st.booleans(), mode=st.sampled_from(MODES), mallory=st.booleans())
@example(data=None, live=True, mode=(False, None), mallory=False)  # the run-end error, raw, logged
def test_any_string_of_any_wire_logs_as_one_printable_bounded_line(
    recorded: dict[str, list[dict[str, Any]]], data: Any, live: bool, mode: Any, mallory: bool
) -> None:
    wires = recorded["live" if live else "history"]
    if data is None:  # the explicit example: the error message and run id of the ``error`` end
        index = len(wires) - 1
        paths = [("extras", "ai", "transport", "error-message"), ("extras", "ai", "transport", "run-id")]
        evil = EVIL
    else:
        index = data.draw(st.integers(0, len(wires) - 1), label="wire")
        candidates = list(_string_paths(wires[index]))
        paths = [data.draw(st.sampled_from(candidates), label="path")]
        evil = data.draw(
            st.sampled_from([EVIL, "\n", "a\x1b[2Jb", "\ud83d", "é\u2028x"]) | st.text(min_size=1), label="text"
        )
    wire = copy.deepcopy(wires[index])
    for path in paths:
        _set(wire, path, evil)
    if mallory and ("clientId",) not in paths:
        wire["clientId"] = "mallory"
    agent, trusted = mode
    lines = _fold([*wires[:index], wire, *wires[index + 1 :]], agent, trusted, live)
    if data is None:  # (the example reaches the line it is for)
        assert any("ended with an agent error" in line and "\\ud800\\nFAKE LINE" in line for line in lines)


def test_a_members_input_kind_is_quoted_in_the_reason(recorded: dict[str, list[dict[str, Any]]]) -> None:
    """The reason a client's refused input is logged with names its codec kind quoted and cut."""
    wires = recorded["history"]
    index = next(i for i, w in enumerate(wires) if w.get("name") == "ai-input" and "run-id" in w["extras"]["ai"]["transport"])
    wire = copy.deepcopy(wires[index])
    wire["clientId"] = "mallory"
    wire["extras"]["ai"]["codec"]["kind"] = EVIL
    lines = _fold([*wires[:index], wire, *wires[index + 1 :]], True, {"agent"}, False)
    refused = [line for line in lines if "does not accept" in line]
    assert refused and all("'\\ud800\\nFAKE LINE" in line for line in refused)


def test_quoted_and_one_line() -> None:
    assert quoted("run-1") == "'run-1'"
    assert quoted("\ud800\n") == "'\\ud800\\n'"
    assert quoted("x" * 100) == "'" + "x" * 56 + "..."
    assert quoted(10**5000) == "number"  # more digits than int prints: its type, never a raise
    assert one_line("plain text") == "plain text"
    assert one_line("a\nb\x1bc\ud800") == "a\\nb\\x1bc\\ud800"
    assert len(one_line("x" * 10_000)) == 500
