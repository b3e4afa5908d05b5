"""Every user error of the ``ai-transport`` command is one line on stderr and a non-zero exit, never
a traceback (issue 23): each bad input a newcomer may type, run as a subprocess."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support_emulator import emulator_thread  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AIT_EMULATOR_URL", "ABLY_KEY")}
ENV["PYTHONUNBUFFERED"] = "1"


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port bound but not listening while the block runs: a connection to it is refused
    (no other test's server can take it meanwhile)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def run(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
        env=env or ENV, check=False,
    )


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "ai_transport", *args], env=env)


def without(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command in a process where ``module`` cannot be imported (its extra is not installed)."""
    code = (
        f"import sys; sys.modules[{module!r}] = None; from ai_transport.cli import main; "
        f"sys.exit(main({list(args)!r}))"
    )
    return run([sys.executable, "-c", code])


def one_line_error(r: subprocess.CompletedProcess[str], *expected: str, code: int | None = None) -> str:
    assert r.returncode != 0, (r.stdout, r.stderr)
    if code is not None:
        assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    (line,) = lines
    assert line.startswith("ai-transport"), line
    assert ": error: " in line, line
    for text in expected:
        assert text in line, line
    return line


# -- usage errors: refused by the parser, exit 2 ----------------------------------------------------

USAGE = [
    (["demo", "--channel", ""], ["--channel", "non-empty", "40010"]),
    (["demo", "--channel", ":bad"], ["--channel", "namespace is empty", "40010"]),
    (["demo", "--channel", "[meta"], ["--channel", "unclosed"]),
    (["demo", "--delay", "-1"], ["--delay", "0 or more"]),
    (["demo", "--delay", "nan"], ["--delay", "finite"]),
    (["demo", "--delay", "soon"], ["--delay", "number of seconds"]),
    (["demo", "--question", "  "], ["--question", "must not be empty"]),
    (["demo", "--model", ""], ["--model", "must not be empty"]),
    (["demo", "--reasoning", "max"], ["--reasoning", "invalid choice"]),
    (["demo", "--ask", "--deny", "no"], ["--deny", "--ask"]),
    (["demo", "--color", "--no-color"], ["--no-color"]),
    (["demo", "--bogus"], ["unrecognized arguments: --bogus"]),
    (["tail"], ["CHANNEL"]),
    (["tail", ":bad"], ["CHANNEL", "namespace is empty"]),
    (["tail", "x", "--timeout", "0"], ["--timeout", "more than 0"]),
    (["tail", "x", "--timeout", "-5"], ["--timeout"]),
    (["supervise"], ["CHANNEL"]),
    (["supervise", "ok", ":bad"], ["CHANNEL", "namespace is empty", "40010"]),
    (["supervise", "x", "--lease", "nan"], ["--lease", "finite"]),
    (["supervise", "x", "--lease", "inf"], ["--lease", "finite"]),
    (["supervise", "x", "--lease", "0"], ["--lease", "more than 0"]),
    (["supervise", "x", "--poll", "nan"], ["--poll", "finite"]),
    (["supervise", "x", "--poll", "0"], ["--poll", "more than 0"]),
    (["supervise", "x", "--grace", "nan"], ["--grace", "finite"]),
    (["supervise", "x", "--grace", "-1"], ["--grace", "0 or more"]),
    (["supervise", "x", "--timeout", "-1"], ["--timeout", "more than 0"]),
    (["supervise", "x", "--timeout", "0"], ["--timeout", "more than 0"]),
    (["supervise", "x", "--wake-url", "ftp://agent"], ["--wake-url", "http:// or https://"]),
    (["supervise", "x", "--wake-url", "http://[::1"], ["--wake-url", "http:// or https://"]),
    (["supervise", "x", "--client-id", " "], ["--client-id", "must not be empty"]),
    (["frobnicate"], ["invalid choice"]),
]


@pytest.mark.parametrize(("args", "expected"), USAGE, ids=[" ".join(a) or "-" for a, _ in USAGE])
def test_usage_errors_are_one_line(args: list[str], expected: list[str]) -> None:
    line = one_line_error(cli(*args), *expected, code=2)
    assert line.endswith("--help')"), line  # says where to look


# -- errors found while running: exit 1 ---------------------------------------------------------------


def test_demo_temporal_without_its_extra_names_the_extra() -> None:
    one_line_error(without("temporalio", "demo", "--temporal"), "--temporal", "pip install 'ai-transport[temporal]'")


def test_demo_agents_sdk_without_its_extra_names_the_extra() -> None:
    one_line_error(without("agents", "demo", "--agents-sdk"), "--agents-sdk", "pip install 'ai-transport[agents]'")


def test_demo_temporal_without_its_extra_fails_before_starting_anything() -> None:
    r = without("temporalio", "demo", "--temporal")
    assert "emulator: started" not in r.stdout and "model:" not in r.stdout, r.stdout


def test_a_bad_temporal_address_is_one_line() -> None:
    # Four at once: before the CLI ended with os._exit, the Temporal bridge's threads aborted
    # CPython's finalization in about one run of three (a crash dump after the error line, exit -6).
    with refusing_port() as port, ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda _: cli("demo", "--temporal", f"127.0.0.1:{port}", "--delay", "0"), range(4)))
    for r in runs:
        one_line_error(r, f"cannot reach Temporal at 127.0.0.1:{port}", "connection refused", code=1)


def test_ask_with_stdin_closed_is_one_line() -> None:
    one_line_error(cli("demo", "--ask", "--delay", "0"), "--ask", "stdin is closed", code=1)


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://127.0.0.1", "http://127.0.0.1:0", "nohost",
                                 "http://[::1", "http://[zz]:80", "http://:8090"])
def test_a_malformed_emulator_url_is_refused_by_the_parser_in_one_line(url: str) -> None:
    # "http://[::1": urlsplit's "Invalid IPv6 URL" ValueError was a traceback (it ran outside the check)
    for args in (["demo", "--emulator", url], ["tail", "x", "--emulator", url, "--no-follow"],
                 ["supervise", "x", "--emulator", url]):
        line = one_line_error(cli(*args), "argument --emulator", "emulator URL", code=2)
        assert line.endswith("--help')"), line


@pytest.mark.parametrize("url", ["http://[zz", "http://127.0.0.1:99999"])
def test_a_malformed_emulator_url_in_the_environment_is_one_line(url: str) -> None:
    for args in (["tail", "x", "--no-follow"], ["supervise", "x"]):
        one_line_error(cli(*args, env=dict(ENV, AIT_EMULATOR_URL=url)), "emulator URL", code=1)


def test_an_unreachable_emulator_is_one_line() -> None:
    with refusing_port() as port:
        r = cli("tail", "x", "--emulator", f"http://127.0.0.1:{port}")
    one_line_error(r, "cannot reach the emulator", code=1)


def test_tail_needs_somewhere_to_look() -> None:
    one_line_error(cli("tail", "x"), "--emulator URL", "--key KEY", code=1)
    one_line_error(cli("tail", "x", "--key", "not-a-key"), "--key must be an Ably API key", code=1)


def test_supervise_needs_somewhere_to_look() -> None:
    one_line_error(cli("supervise", "x"), "say where the channels live", "--emulator URL", "--key KEY", code=1)
    one_line_error(cli("supervise", "x", "--key", "not-a-key"), "--key must be an Ably API key", code=1)


def test_supervise_with_a_key_the_emulator_rejects_is_one_line(emulator_thread: Any) -> None:
    # supervise exchanged the key for a token without tail's handling: a ~58-line HTTPError traceback
    url = emulator_thread.url
    wrong = emulator_thread.key.partition(":")[0] + ":wrong-secret"
    for key, reason in ((wrong, "Invalid key in request (code 40101)"), ("nokey:x", "No key named 'nokey' (code 40400)")):
        for command in ("supervise", "tail"):
            r = cli(command, "x", "--emulator", url, "--key", key, "--timeout", "5")
            one_line_error(r, f"the emulator at {url} rejected the credentials: {reason}", code=1)


def test_supervise_with_an_unreachable_emulator_is_one_line() -> None:
    with refusing_port() as port:
        r = cli("supervise", "x", "--emulator", f"http://127.0.0.1:{port}", "--key", "a.b:c")
    one_line_error(r, "cannot reach the emulator", code=1)


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers (a hung server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


@contextlib.contextmanager
def not_an_emulator() -> Iterator[int]:
    """A loopback HTTP server answering 404 to everything, a websocket upgrade included."""
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("command", ["tail", "supervise"])
def test_a_connection_that_never_completes_is_one_line(command: str) -> None:
    # A port that accepts and never answers: the SDK's WebSocketTransport.close task died with a bare
    # Exception() after the timeout ("Task exception was never retrieved" and its traceback).
    with silent_port() as port:
        r = cli(command, "x", "--emulator", f"http://127.0.0.1:{port}", "--timeout", "2")
    one_line_error(r, "timed out after 2 s connecting to the emulator", code=1)


@pytest.mark.parametrize("command", ["tail", "supervise"])
def test_the_ably_sdks_retries_while_connecting_are_not_printed(command: str) -> None:
    # Not an emulator (or Ably unreachable): the SDK logs each failed attempt with log.exception,
    # ~30 tracebacks in 3 s; the command's one line says what the SDK saw last instead.
    with not_an_emulator() as port:
        r = cli(command, "x", "--emulator", f"http://127.0.0.1:{port}", "--timeout", "3")
    one_line_error(r, "timed out after 3 s connecting to the emulator", "(the ably SDK: ", code=1)


def test_the_sdk_log_filter_strips_tracebacks_and_holds_records_back_while_connecting() -> None:
    import logging

    from ai_transport.cli.connection import SdkLog

    def record(name: str) -> logging.LogRecord:
        try:
            raise OSError("Name or service not known")
        except OSError:
            return logging.LogRecord(name, logging.ERROR, __file__, 1, "Unable to\nconnect", None, sys.exc_info())

    log = SdkLog()
    sdk, ours = record("ably.realtime.connectionmanager"), record("ai_transport.x")
    assert log.filter(sdk) and sdk.exc_info is None  # one line, no traceback
    assert log.filter(ours) and ours.exc_info is not None  # others' records are theirs
    with log.connecting():
        assert not log.filter(record("ably"))
        assert log.filter(record("ai_transport.x"))
        assert log.seen() == " (the ably SDK: Unable to connect)"
    assert log.filter(record("ably"))


def test_model_without_a_key_is_one_line() -> None:
    one_line_error(cli("demo", "--model", "gpt-5-mini"), "OPENAI_API_KEY", code=1)


def test_an_unreachable_responses_api_is_reported_once() -> None:
    with refusing_port() as port:
        env = dict(ENV, OPENAI_API_KEY="sk-x", OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1")
        r = cli("demo", "--model", "m", env=env)
    one_line_error(r, "could not reach the Responses API", "(code 104008)", code=1)
    assert (r.stdout + r.stderr).count("could not reach the Responses API") == 1, r.stdout + r.stderr


# -- the process's own ends: Ctrl-C, a reader that went away -------------------------------------------


def test_ctrl_c_while_the_parser_is_built_exits_130_quietly(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # build_parser imports the emulator package and aiohttp (the first ~0.5 s of every command):
    # it ran outside the KeyboardInterrupt handler, so an early Ctrl-C was a traceback.
    import ai_transport.cli as cli_module

    def interrupted() -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_module, "build_parser", interrupted)
    try:
        code = cli_module.main(["tail", "x"])
    except KeyboardInterrupt:
        pytest.fail("a Ctrl-C while parsing escaped main(): the process printed its traceback")
    assert code == 130
    assert capsys.readouterr().err == "\n"


def test_ctrl_c_before_the_loop_runs_the_command_leaves_no_never_awaited_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import gc
    import warnings

    import ai_transport.cli as cli_module

    def interrupted(main: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(asyncio, "run", interrupted)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli_module.main(["tail", "x", "--emulator", "http://127.0.0.1:1"]) == 130
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]


@pytest.mark.parametrize("args", [["demo", "--delay", "0"], ["emulator", "--port", "0"]])
def test_a_closed_stdout_exits_quietly(args: list[str]) -> None:
    """`ai-transport demo | head -1`: the reader is gone when the command writes; the Python docs'
    way: no BrokenPipeError traceback (neither from the write nor from the flush at exit), exit 1."""
    read, write = os.pipe()
    os.close(read)  # a reader that already left (`| true`)
    try:
        r = subprocess.run([sys.executable, "-m", "ai_transport", *args], stdin=subprocess.DEVNULL, stdout=write,
                           stderr=subprocess.PIPE, text=True, timeout=60, cwd=ROOT, env=ENV, check=False)
    finally:
        os.close(write)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    assert r.stderr == "" and r.returncode == 1, (r.returncode, r.stderr)
