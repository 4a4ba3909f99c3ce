#!/usr/bin/env bash
# Runs Gregor's checks: ruff, import-linter, mypy, then pytest. Creates .venv if missing.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/unit -x).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh "dev,spark,compression"
# The fault harness (tests/cluster/test_fault_scenarios.py) cuts links with iptables inside a
# network namespace it makes and injects storage faults with strace: install them from Debian
# when missing and we may (root); without them those scenarios skip with the reason.
missing=()
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v strace >/dev/null 2>&1 || missing+=(strace)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]} for the fault harness" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}") >&2 || echo "could not install ${missing[*]}" >&2
fi
echo "== ruff" >&2
ruff check .
echo "== import-linter" >&2
lint-imports --no-cache
echo "== mypy" >&2
mypy client controller broker
echo "== pytest" >&2
export PYSPARK_PYTHON="$VENV/bin/python"
exec python -m pytest "$@"
