"""The docs are true to the code: every link resolves inside the repository, and every Python
snippet of the README, docs/ and examples/ compiles, imports what it names, and runs when whole.

A ```python block runs as pasted (a subprocess, the repository on the path) unless an HTML comment
right above its fence says otherwise:

* ``<!-- snippet: fragment (assumes NAME, NAME) -->`` — an excerpt: compiled as the body of an
  ``async def`` (top-level ``await`` and ``return`` allowed), its imports executed, and every name it
  uses that it neither defines nor imports must be one it says it assumes (no more, no fewer);
* ``<!-- snippet: needs WHAT -->`` — whole (it defines or imports every name it uses) but needs a
  service the test does not start (a running emulator, Temporal, an API key): compiled, its
  imports executed, not run.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import subprocess
import symtable
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILTINS = frozenset(dir(builtins))


def tracked(pattern: str) -> list[Path]:
    """Files git tracks matching ``pattern`` (a work tree without git: everything on disk)."""
    out = subprocess.run(["git", "ls-files", "-z", pattern], cwd=ROOT, capture_output=True, check=False)
    if out.returncode == 0 and out.stdout:
        return sorted(ROOT / p for p in out.stdout.decode().split("\0") if p)
    return sorted(p for p in ROOT.glob(f"**/{pattern}") if "node_modules" not in p.parts and ".venv" not in p.parts)


MARKDOWN = [p for p in tracked("*.md") if "node_modules" not in p.parts]
SNIPPET_DOCS = [p for p in MARKDOWN if p.parent == ROOT or p.parts[len(ROOT.parts)] in ("docs", "examples")]

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]+`")
LINK = re.compile(r"!?\[(?:[^\]\n]|\](?=[^(]))*\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s*\[[^\]]+\]:\s*<?(?P<target>\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HTML_REF = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["'](?P<target>[^"']+)["']""", re.I)
MARKER = re.compile(r"<!--\s*snippet:\s*(?P<kind>fragment|needs)\b(?P<rest>.*?)-->\s*$", re.S)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def prose(text: str) -> str:
    """``text`` without fenced blocks and code spans (a link inside code is not a link)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def link_targets(text: str) -> list[str]:
    plain = prose(text)
    found = [m["target"] for m in LINK.finditer(plain)]
    found += [m["target"] for m in REF_DEF.finditer(plain)]
    found += [m["target"] for m in HTML_REF.finditer(plain)]
    return found


def is_external(target: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)) or target.startswith("#")


@pytest.mark.parametrize("doc", MARKDOWN, ids=rel)
def test_every_link_resolves_inside_the_repository(doc: Path) -> None:
    bad = []
    for target in link_targets(doc.read_text(encoding="utf-8")):
        if is_external(target):
            continue
        path = target.split("#", 1)[0].split("?", 1)[0]
        resolved = (ROOT / path.lstrip("/")) if path.startswith("/") else (doc.parent / path)
        resolved = resolved.resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            bad.append(target)
    assert bad == [], f"{rel(doc)} links to what is not in the repository: {bad}"


OUTSIDE = re.compile(r"(?<![\w./-])(?:shared/(?:reference|fixtures)/|/work/|/tmp/|/root/|/home/|~/)\S*")


@pytest.mark.parametrize("doc", MARKDOWN, ids=rel)
def test_no_doc_points_outside_the_repository(doc: Path) -> None:
    """Nor in a code span: a path into the steering repository's ``shared/``, an absolute path on
    someone's machine, or a relative path climbing out of the repository."""
    text = doc.read_text(encoding="utf-8")
    bad = [m.group(0) for m in OUTSIDE.finditer(FENCE.sub("", text))]
    for span in CODE_SPAN.findall(FENCE.sub("", text)):
        token = span.strip("`")
        if token.startswith("../") and not (doc.parent / token).resolve().is_relative_to(ROOT):
            bad.append(token)
    assert bad == [], f"{rel(doc)} points outside the repository: {bad}"


def test_the_link_checker_can_fail(tmp_path: Path) -> None:
    text = (
        "[ok](README.md) [gone](docs/NOPE.md) [out](../../etc/passwd) `[not](a-link.md)` "
        "[web](https://example.com) [anchor](#x)\n\n[ref]: docs/ALSO-GONE.md\n<a href=\"missing.html\">x</a>"
    )
    assert link_targets(text) == [
        "README.md", "docs/NOPE.md", "../../etc/passwd", "https://example.com", "#x", "docs/ALSO-GONE.md",
        "missing.html",
    ]
    assert OUTSIDE.search("see shared/reference/ably-protocol.md") and not OUTSIDE.search("ai_transport/shared/x")


# -- Python snippets ---------------------------------------------------------------------------------


@dataclass
class Snippet:
    doc: Path
    line: int
    source: str
    kind: str  # "run", "fragment" or "needs"
    assumes: frozenset[str]

    @property
    def id(self) -> str:
        return f"{rel(self.doc)}:{self.line}"


def snippets_of(doc: Path) -> list[Snippet]:
    return snippets_in(doc.read_text(encoding="utf-8"), doc)


def snippets_in(text: str, doc: Path) -> list[Snippet]:
    out = []
    for m in FENCE.finditer(text):
        if m["lang"] != "python":
            continue
        line = text.count("\n", 0, m.start()) + 1
        source = textwrap.dedent(m["body"])
        before = text[: m.start()].rstrip().rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        kind, assumes = "run", frozenset[str]()
        if marker:
            kind = marker["kind"]
            if kind == "fragment":
                names = re.search(r"\(assumes\s+([^)]*)\)", marker["rest"])
                assumes = frozenset(n.strip() for n in names[1].split(",") if n.strip()) if names else frozenset()
        out.append(Snippet(doc, line, source, kind, assumes))
    return out


SNIPPETS = [s for doc in SNIPPET_DOCS for s in snippets_of(doc)]


def as_function(source: str) -> str:
    return "async def __snippet__():\n" + textwrap.indent(source, "    ") + "\n    pass\n"


def free_names(source: str) -> set[str]:
    """Names the snippet uses without defining or importing them (builtins aside)."""
    table = symtable.symtable(as_function(source), "<snippet>", "exec")
    free: set[str] = set()

    def walk(t: symtable.SymbolTable) -> None:
        for sym in t.get_symbols():
            if sym.is_referenced() and sym.is_global() and not sym.is_assigned() and not sym.is_imported():
                free.add(sym.get_name())
        for child in t.get_children():
            walk(child)

    for child in table.get_children():
        walk(child)
    module_level = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    return free - BUILTINS - module_level - {"__snippet__"}


def imports_of(source: str) -> list[str]:
    tree = ast.parse(as_function(source))
    return [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def test_there_are_snippets_and_runnable_ones() -> None:
    docs = {s.doc.name for s in SNIPPETS}
    assert {"README.md", "TOUR.md"} <= docs
    assert sum(s.kind == "run" for s in SNIPPETS) >= 2


@pytest.fixture(scope="module")
def import_errors() -> dict[str, str | None]:
    """Each not-run snippet's imports executed, all in one subprocess (importing temporalio or the
    Agents SDK once, not once per snippet): snippet id -> the error, or None."""
    blocks = {s.id: "\n".join(imports_of(s.source)) for s in SNIPPETS if s.kind != "run"}
    driver = (
        "import json, sys, traceback\n"
        f"blocks = {blocks!r}\n"
        "out = {}\n"
        "for where, code in blocks.items():\n"
        "    try:\n"
        "        exec(compile(code, where, 'exec'), {})\n"
        "        out[where] = None\n"
        "    except BaseException:\n"
        "        out[where] = traceback.format_exc(limit=2)\n"
        "print(json.dumps(out))\n"
    )
    r = python(driver)
    assert r.returncode == 0, r.stderr
    result: dict[str, str | None] = json.loads(r.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.id)
def test_python_snippet(snippet: Snippet, import_errors: dict[str, str | None]) -> None:
    where = snippet.id
    if snippet.kind == "run":
        compile(snippet.source, where, "exec")  # whole, as pasted into a file
    else:
        compile(as_function(snippet.source), where, "exec")
    free = free_names(snippet.source)
    if snippet.kind == "fragment":
        assert free == snippet.assumes, (
            f"{where}: the fragment uses {sorted(free)} undefined; its marker assumes {sorted(snippet.assumes)}"
        )
    else:
        assert free == set(), f"{where}: uses {sorted(free)} without defining or importing them"
    if snippet.kind == "run":
        r = python(snippet.source)
        assert r.returncode == 0, f"{where} failed:\n{r.stdout}\n{r.stderr}"
        assert "Traceback" not in r.stderr, r.stderr
    else:
        assert import_errors[where] is None, f"{where}: its imports fail:\n{import_errors[where]}"


def test_the_snippet_checker_can_fail() -> None:
    assert free_names("x = 1\nprint(x, y)\nasync def f():\n    return z\n") == {"y", "z"}
    assert free_names("import os\nfrom a import b\nfor i in range(3):\n    os.path(b, i)\n") == set()
    assert free_names("await run.start()\nreturn await with_run(invocation, body)\n") == {
        "run", "with_run", "invocation", "body"}
    text = "<!-- snippet: fragment (assumes a, b) -->\n```python\nprint(a)\n```\n\n  ```python\n  x = 1\n  ```\n"
    first, second = snippets_in(text, ROOT / "x.md")
    assert (first.kind, first.assumes, first.line) == ("fragment", frozenset({"a", "b"}), 2)
    assert (second.kind, second.source) == ("run", "x = 1\n")
