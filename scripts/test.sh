#!/usr/bin/env bash
# Install everything the tests need (a venv with the package and its test extra; the reference
# JS package is installed from npm by the test setup itself) and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
(cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
