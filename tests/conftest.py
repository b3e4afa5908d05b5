"""Shared fixtures (the node bridge to the reference implementation, fixture paths) and the suite's
parallel run (pytest-xdist: ``scripts/test.sh`` runs ``-n auto --dist loadgroup``).

Every test must be safe to run beside any other in another process: ports from the OS (port 0),
files under ``tmp_path``, servers per test or per session (a session is per xdist worker), no
module-level state shared across tests. What cannot be, because it writes a shared place outside
the test's own (the browser example's npm install and bundle, beside the example), is listed in
:data:`XDIST_GROUPS` and runs on one worker (so does a module whose module fixture is costly);
a module may also mark itself
``pytest.mark.xdist_group(name)``. Slow tests are scheduled first, so the last worker to finish is
not the one that drew the slowest test late.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from jsbridge import NodeBridge, node_available

ROOT = Path(__file__).resolve().parent.parent


#: Test modules kept on one xdist worker under ``--dist loadgroup`` (group name -> modules): those
#: that write a shared place outside their own temp dirs, and those whose module fixture is costly
#: enough that computing it once beats spreading the module's tests.
XDIST_GROUPS: dict[str, tuple[str, ...]] = {
    # the module fixture installs examples/browser/node_modules and builds examples/browser/dist
    "browser-bundle": ("test_browser_example.py",),
    # the module fixture imports every doc fragment's imports (temporalio, the Agents SDK) in one
    # subprocess: ~3 s of CPU, once rather than once per worker
    "docs-imports": ("test_docs.py",),
}
_GROUP_OF = {module: group for group, modules in XDIST_GROUPS.items() for module in modules}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the :data:`XDIST_GROUPS` modules' tests, and move ``slow`` tests first (stable)."""
    for item in items:
        group = _GROUP_OF.get(item.path.name)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _fixtures_dir() -> Path:
    env = os.environ.get("AIT_FIXTURES")
    if env:
        return Path(env)
    # A copy of shared/fixtures/openai-responses lives in the repo (attribution in its README).
    return Path(__file__).resolve().parent / "fixtures" / "openai-responses"


FIXTURES = _fixtures_dir()

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def node() -> Iterator[NodeBridge]:
    """The reference implementation in node (skips where node is missing, fails if npm install fails)."""
    if not node_available():
        pytest.skip("node/npm not installed")
    bridge = NodeBridge()
    yield bridge
    bridge.close()


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``shared/fixtures/openai-responses`` (override with ``AIT_FIXTURES``)."""
    if not FIXTURES.exists():
        pytest.skip(f"recorded fixtures not found at {FIXTURES}")
    return FIXTURES


def load_chunks(path: Path) -> list[dict]:
    """Events of a recorded ``*.chunks.txt`` file (one JSON object per non-empty line)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
