#!/usr/bin/env bash
# The test command; CI runs exactly this. Each step says what it installs or runs:
#   1. python: .venv (created if missing) with the package and its dev extra (pip install -e '.[dev]');
#   2. node: the reference packages of the conformance tests (npm ci in tests/js) and the browser
#      example's packages (npm ci in examples/browser);
#   3. chromium: Debian's package for the browser example's test, when it is missing and apt-get can
#      install it (root); otherwise that test skips, saying why;
#   4. ruff check and mypy: a finding fails the run before any test starts;
#   5. the suite in parallel (pytest-xdist, one worker per core, --dist loadgroup), with progress.
# Arguments go to pytest: `bash scripts/test.sh tests/test_docs.py`. AIT_TEST_WORKERS=N sets the
# number of workers (0: one process, no xdist).
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n== %s\n' "$*"; }
PY=${PYTHON:-python3}

step "python: .venv with the package and its dev extra (pip install -e '.[dev]')"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'

step "node: npm ci in tests/js (@ably/ai-transport 0.8.0, ably) and examples/browser (the page's packages, esbuild, playwright-core)"
(cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
(cd examples/browser && npm ci --no-audit --no-fund --loglevel=error)

if [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    step "chromium: apt-get install chromium (Debian's package, for the browser example's test; a few minutes)"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; then
      echo "apt-get could not install chromium: the browser example's test will skip"
    fi
  else
    step "chromium: not installed and apt-get cannot install it here: the browser example's test will skip"
  fi
fi

step "lint and types: ruff check, mypy"
.venv/bin/ruff check ai_transport tests examples benchmarks
.venv/bin/mypy

WORKERS=${AIT_TEST_WORKERS:-auto}
step "tests: pytest -n $WORKERS --dist loadgroup"
exec .venv/bin/python -m pytest -p no:cacheprovider -n "$WORKERS" --dist loadgroup "$@"
