#!/usr/bin/env bash
# Runs Gregor's checks: ruff, import-linter, mypy, then pytest. Creates .venv if missing.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/unit -x).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh "dev,spark,compression"
echo "== ruff" >&2
ruff check .
echo "== import-linter" >&2
lint-imports --no-cache
echo "== mypy" >&2
mypy client controller broker
echo "== pytest" >&2
export PYSPARK_PYTHON="$VENV/bin/python"
exec python -m pytest "$@"
