#!/usr/bin/env bash
# Install everything the tests need (a venv with the package and its dev extra; the reference
# JS package is installed from npm by the test setup itself), lint and type-check, and run the
# whole suite. A ruff finding or a mypy error fails the run before any test starts.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
(cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
.venv/bin/ruff check ai_transport tests examples benchmarks
.venv/bin/mypy
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
