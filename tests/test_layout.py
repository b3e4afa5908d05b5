"""The package layout states the architecture: layers import only downward, with no cycle anywhere.

Walks every module's imports statically, through the AST. **Every** import counts, wherever it is
written: at module level, inside a function (a lazy import still ties the two modules together;
it only moves the failure to call time) and under ``if TYPE_CHECKING:`` (a type-only import back
up still says the lower module knows the upper one). So there is no exemption to hide a cycle
behind: a lower module that needs something of an upper one names it through a protocol of its own.

A dependency is the module an import names: ``from pkg.sub import x`` depends on ``pkg.sub`` (and
on ``pkg.sub.x`` when that is a module), ``from . import sub`` on ``sub``. Importing ``pkg.sub``
also runs ``pkg/__init__``, so the package is a dependency too, unless it is an ancestor of the
importing module (a package's own modules run while it initialises). The root ``ai_transport``
package is everyone's ancestor; a module that imports it by name depends on it.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "ai_transport"

#: The sans-I/O conversation core: pure state, no event loop (like the codec's reducer).
CORE = "ai_transport.conversation"


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


def _from_target(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of ``from X import ...`` in a module of ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    prefix = ".".join(base[: len(base) - node.level + 1])
    return f"{prefix}.{node.module}" if node.module else prefix


def imports_in(source: str, package: str) -> set[str]:
    """Absolute names imported anywhere in ``source`` (a module of ``package``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _from_target(node, package)
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _package_modules(name: str) -> list[Path]:
    return sorted((PKG / name).rglob("*.py"))


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The module of ours ``name`` is (or is an attribute of): its longest known prefix."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def named_modules(source: str, package: str) -> set[str]:
    """The modules of ours that the imports of ``source`` (a module of ``package``) name."""
    named: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_target(node, package)
            # `from pkg import sub` names the module `pkg.sub`; `from pkg import attr` names `pkg`
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        named.update(m for t in targets if (m := _resolve(t)) is not None)
    return named


def dependencies(module: str, named: set[str]) -> set[str]:
    """What ``module`` depends on: the modules it names and their packages (rules above)."""
    deps = set(named)
    for m in named:
        parts = m.split(".")
        deps.update(".".join(parts[:i]) for i in range(2, len(parts)))
    ancestors = {".".join(module.split(".")[:i]) for i in range(2, module.count(".") + 1)}
    deps -= ancestors - named  # a package's own modules run while it initialises
    deps.discard(module)
    return deps


def _deps_of(module: str, source: str) -> set[str]:
    package = module if _is_package(module) else module.rpartition(".")[0]
    return dependencies(module, named_modules(source, package))


def _is_package(name: str) -> bool:
    return name not in MODULES or MODULES[name].name == "__init__.py"


def import_graph() -> dict[str, set[str]]:
    return {m: _deps_of(m, p.read_text()) for m, p in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


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
    type_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .agent import AgentSession\n"
    assert "ai_transport.sessions.agent" in imports_in(type_only, "ai_transport.sessions")


def test_dependencies_follow_the_documented_rules() -> None:
    # `from . import sub` inside a package depends on the submodule, not on the package itself
    assert _deps_of("ai_transport.codec.codec", "from . import reducer\n") == {"ai_transport.codec.reducer"}
    # a submodule of another package depends on that package's __init__ as well
    assert _deps_of("ai_transport.conversation.tree", "from ..codec.headers import x\n") == {
        "ai_transport.codec.headers",
        "ai_transport.codec",
    }
    # an attribute re-exported by a package is a dependency on the package; lazy imports count
    assert _deps_of("ai_transport.conversation.tree", "def f():\n    from ..channels import Channel\n") == {
        "ai_transport.channels"
    }
    # importing the root package by name counts (its __init__ imports every layer)
    assert _deps_of("ai_transport.cli", "from .. import __version__\n") == {"ai_transport"}
    assert _deps_of("ai_transport.cli.demo", "import ai_transport.sessions.agent\n") == {
        "ai_transport.sessions.agent",
        "ai_transport.sessions",
    }


def test_the_cycle_finder_can_fail() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_anywhere() -> None:
    graph = import_graph()
    assert {m.split(".")[1] for m in graph if m.count(".") >= 1} >= {
        "sessions", "codec", "readers", "channels", "emulator", "responses", "cli"
    }  # every layer is walked, not only sessions/
    found = cycles(graph)
    detail = [
        {m: sorted(d for d in graph[m] if d in set(c)) for m in c} for c in found
    ]
    assert found == [], f"import cycles: {detail}"


def _stdlib_and_ours(path: Path) -> tuple[set[str], set[str]]:
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    source = path.read_text()
    return {n.split(".")[0] for n in imports_in(source, package)}, named_modules(source, package)


def closure_of(package: str) -> dict[str, set[str]]:
    """Every module of ours the modules of ``package`` name, transitively (with what each names
    outside the package tree). A package ``__init__`` that runs only because a submodule of it is
    imported is not followed (the root one would make the check vacuous); one named is followed."""
    todo = [m for m in MODULES if m == package or m.startswith(package + ".")]
    seen: dict[str, set[str]] = {}
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        outside, ours = _stdlib_and_ours(MODULES[m])
        seen[m] = outside
        todo.extend(ours - seen.keys())
    return seen


def test_the_core_imports_no_asyncio_nor_anything_that_does() -> None:
    assert (PKG / "conversation" / "__init__.py").is_file()
    closure = closure_of(CORE)
    assert "ai_transport.conversation.tree" in closure
    assert "ai_transport.codec.headers" in closure  # what the core names is walked too
    offenders = {m: sorted(names & {"asyncio", "anyio", "trio"}) for m, names in closure.items()}
    assert {m: n for m, n in offenders.items() if n} == {}
    # and nothing of the I/O layers above it
    above = {m for m in closure if m.split(".")[1:2] in (["sessions"], ["cli"], ["emulator"], ["temporal"])}
    assert above == set()


def test_the_asyncio_check_can_fail() -> None:
    assert "asyncio" in closure_of("ai_transport.sessions")["ai_transport.sessions.agent"]
    # a core module naming a channel facade would pull the Ably channel (and asyncio) in
    assert named_modules("from ..channels import Channel\n", CORE) == {"ai_transport.channels"}
    assert any("asyncio" in names for names in closure_of("ai_transport.channels").values())


def test_nothing_listens_to_the_tree() -> None:
    """The tree reports into its core's change queue (:mod:`ai_transport.conversation.changes`):
    it has no emitter, and no shell module subscribes to it (they subscribe to the session)."""
    from ai_transport.conversation.tree import Tree

    assert not hasattr(Tree, "on") and "emitter" not in vars(Tree(None))
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((PKG / "sessions").glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "tree.on(" in line or ".emitter.emit(" in line
    ]
    assert offenders == []
