"""``python -m ai_transport.emulator`` and ``ai-transport emulator``: one definition of the options.

Same flags, defaults, help and startup text; every bad value (and a port in use) is one line on
stderr and a non-zero exit, never a traceback. Real subprocesses, loopback only.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ai_transport.cli import build_parser
from ai_transport.emulator.__main__ import build_parser as module_parser
from ai_transport.emulator.options import DEFAULT_PORT, options_from_args

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))

COMMANDS = {
    "module": [sys.executable, "-m", "ai_transport.emulator"],
    "cli": [sys.executable, "-m", "ai_transport", "emulator"],
}
PREFIX = {"module": "python -m ai_transport.emulator: error: ", "cli": "ai-transport: error: "}

BAD = {
    # what a newcomer types -> (exit status, what the one line must say)
    "dev-mode-on-any-interface": (["--host", "0.0.0.0"], 1, "refusing to bind '0.0.0.0' in dev mode"),
    "port-too-big": (["--port", "99999"], 2, "--port must be a whole number from 0 to 65535"),
    "port-negative": (["--port", "-1"], 2, "--port must be a whole number from 0 to 65535"),
    "port-not-a-number": (["--port", "eighty"], 2, "--port must be a whole number"),
    "empty-host": (["--host", ""], 2, "--host must name an interface"),
    "rate-negative": (["--inbound-rate", "-5"], 2, "--inbound-rate must be a positive number"),
    "rate-zero": (["--inbound-rate", "0"], 2, "--inbound-rate must be a positive number"),
    "rate-not-a-number": (["--inbound-rate", "fast"], 2, "--inbound-rate must be a positive number"),
    "rate-infinite": (["--inbound-rate", "inf"], 2, "--inbound-rate must be a positive number"),
    "rollup-window-undocumented": (["--append-rollup-window", "33"], 2, "--append-rollup-window must be one of"),
    "message-size-zero": (["--max-message-size", "0"], 2, "--max-message-size must be a positive number"),
    "idle-interval-negative": (["--max-idle-interval", "-1"], 2, "--max-idle-interval must be"),
    "key-without-secret": (["--key", "local.dev"], 2, "--key must be NAME:SECRET"),
    "origin-without-scheme": (["--allow-origin", "localhost:3000"], 2, "--allow-origin must be scheme://"),
    "sandbox-with-rate-limits": (["--sandbox", "--rate-limits"], 2, "--sandbox provisions emulators without"),
    "sandbox-with-a-key": (["--sandbox", "--key", "a.b:c"], 2, "--sandbox provisions each app's keys"),
}


def run_both(*args: str) -> dict[str, subprocess.CompletedProcess[str]]:
    """Both commands with ``args``, run side by side."""
    procs = {
        command: subprocess.Popen(
            [*argv, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV,
            stdin=subprocess.DEVNULL,
        )
        for command, argv in COMMANDS.items()
    }
    done = {}
    for command, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        done[command] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def assert_one_line(r: subprocess.CompletedProcess[str], command: str, status: int, says: str) -> None:
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(PREFIX[command]) and says in lines[0], lines[0]
    assert r.returncode == status, (r.returncode, r.stderr)
    assert r.stdout == ""


@pytest.mark.parametrize("case", BAD)
def test_a_bad_value_is_one_line_and_a_non_zero_exit(case: str) -> None:
    args, status, says = BAD[case]
    for command, r in run_both(*args).items():
        assert_one_line(r, command, status, says)


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        results = run_both("--port", str(port))
    for command, r in results.items():
        assert_one_line(r, command, 1, f"port {port} on 127.0.0.1 is already in use")


def test_both_commands_have_the_same_defaults() -> None:
    from_module = options_from_args(module_parser().parse_args([]))
    from_cli = options_from_args(build_parser().parse_args(["emulator"]))
    assert from_module == from_cli
    assert from_module.port == DEFAULT_PORT == 8090 and from_module.host == "127.0.0.1"
    argv = ["--key", "a.b:c", "-v", "--rate-limits", "--inbound-rate", "7", "--allow-origin", "http://x.test:1"]
    assert options_from_args(module_parser().parse_args(argv)) == options_from_args(
        build_parser().parse_args(["emulator", *argv])
    )


def _after_usage(text: str) -> str:
    """The help below its usage lines (which wrap around the program name)."""
    return text.split("\n\n", 1)[1]


def test_both_commands_have_the_same_help() -> None:
    helps = run_both("--help")
    module, cli = helps["module"], helps["cli"]
    assert module.returncode == cli.returncode == 0
    assert _after_usage(module.stdout) == _after_usage(cli.stdout)
    for flag in ("--host", "--port", "--key", "--sandbox", "--inbound-rate", "--verbose", "--max-idle-interval"):
        assert flag in module.stdout


def _startup_text(command: str, *args: str) -> str:
    proc = subprocess.Popen(
        [*COMMANDS[command], "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=ROOT, env=ENV, stdin=subprocess.DEVNULL,
    )
    try:
        head: list[str] = []
        while not head or not head[-1].startswith("Rate limits:"):
            line = proc.stdout.readline() if proc.stdout else ""
            assert line, "".join(head) + (proc.stderr.read() if proc.stderr else "")
            head.append(line)
        return re.sub(r"127\.0\.0\.1:\d+|\"port\": \d+|port=\d+", "PORT", "".join(head))
    finally:
        proc.terminate()
        proc.wait(10)


def test_both_commands_print_the_same_startup_text() -> None:
    module = _startup_text("module", "--key", "app.key:s3cret")
    assert module == _startup_text("cli", "--key", "app.key:s3cret")
    assert module.startswith("Ably emulator listening on http://PORT")
    assert "API key:  app.key:s3cret" in module and "ai-transport tail CHANNEL --emulator" in module
