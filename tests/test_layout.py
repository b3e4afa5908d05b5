"""The package layout states the architecture: channels below sessions, never the reverse.

Walks every module's imports (static, through the AST: lazy imports inside functions count too)
and checks the direction of the dependencies between the layers.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "ai_transport"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports, relative imports resolved."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return imports_in(path.read_text(), package)


def imports_in(source: str, package: str) -> set[str]:
    """Absolute names imported anywhere in ``source`` (a module of ``package``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base)
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _package_modules(name: str) -> list[Path]:
    return sorted((PKG / name).rglob("*.py"))


def test_both_packages_exist_and_transport_is_gone() -> None:
    assert (PKG / "channels" / "__init__.py").is_file()
    assert (PKG / "sessions" / "__init__.py").is_file()
    assert not (PKG / "transport").exists()
    tracked = subprocess.run(
        ["git", "ls-files", "ai_transport/transport"], cwd=ROOT, capture_output=True, text=True
    )
    if tracked.returncode == 0:  # a source tree without git (an sdist) has nothing to ask
        assert tracked.stdout.strip() == ""


@pytest.mark.parametrize("path", _package_modules("channels"), ids=lambda p: p.name)
def test_channels_never_import_sessions(path: Path) -> None:
    bad = {m for m in imports_of(path) if m == "ai_transport.sessions" or m.startswith("ai_transport.sessions.")}
    assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize(
    "layer", ["codec", "readers", "channels"], ids=lambda layer: layer
)
def test_lower_layers_never_import_sessions_or_cli(layer: str) -> None:
    for path in _package_modules(layer):
        bad = {
            m
            for m in imports_of(path)
            if m.split(".")[:2] in (["ai_transport", "sessions"], ["ai_transport", "cli"])
        }
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_walker_sees_relative_and_lazy_imports() -> None:
    # The walker itself must be able to fail: a lazy relative import of sessions is found.
    names = imports_of(PKG / "channels" / "memory_channel.py")
    assert "ai_transport.channels.channel" in names  # `from .channel import ...` resolved
    lazy = "def f():\n    from ..sessions.agent import AgentSession\n"
    assert "ai_transport.sessions.agent" in imports_in(lazy, "ai_transport.channels")
    assert "ai_transport.sessions" in imports_in("import ai_transport.sessions\n", "ai_transport.channels")


def test_modules_stay_small() -> None:
    # One concept per module: no module of the package grows past ~600 lines (add a module instead).
    paths = sorted(PKG.rglob("*.py"))
    assert {p.relative_to(PKG).parts[0] for p in paths if p.parent != PKG} >= {
        "sessions", "codec", "readers", "channels", "emulator", "responses", "cli"
    }  # every layer is walked, not only sessions/
    too_long = {
        str(path.relative_to(ROOT)): lines
        for path in paths
        if (lines := len(path.read_text().splitlines())) > 650
    }
    assert too_long == {}
