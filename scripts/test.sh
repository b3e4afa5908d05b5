#!/usr/bin/env bash
# The test command; CI runs exactly this. Each step says what it installs or runs:
#   1. python: .venv (created if missing) with the package and its dev extra (pip install -e '.[dev]');
#   2. node: npm ci in tests/js (the reference packages of the conformance tests) and in each
#      example with a package-lock.json (its page's packages, esbuild, playwright-core);
#   3. chromium: Debian's package for the page tests (examples/browser, examples/usechat) when it is
#      missing and apt-get can install it (root); otherwise those tests skip, saying why;
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

for dir in tests/js examples/*/; do
  [ -f "$dir/package-lock.json" ] || continue
  step "node: npm ci in ${dir%/} ($(cd "$dir" && node -e 'const p=require("./package.json");console.log(Object.keys({...p.dependencies,...p.devDependencies}).join(", "))'))"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
done

if [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    step "chromium: apt-get install chromium (Debian's package, for the page tests of examples/browser and examples/usechat; a few minutes)"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; then
      echo "apt-get could not install chromium: the page tests will skip"
    fi
  else
    step "chromium: not installed and apt-get cannot install it here: the page tests will skip"
  fi
fi

step "lint and types: ruff check, mypy"
.venv/bin/ruff check ai_transport tests examples benchmarks
.venv/bin/mypy

WORKERS=${AIT_TEST_WORKERS:-auto}
step "tests: pytest -n $WORKERS --dist loadgroup"
exec .venv/bin/python -m pytest -p no:cacheprovider -n "$WORKERS" --dist loadgroup "$@"
