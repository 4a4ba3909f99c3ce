#!/usr/bin/env bash
# Runs Gregor's checks: ruff, import-linter, mypy, then pytest. Creates .venv if missing.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/unit -x).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh "dev,spark,compression"
# The fault tests need tools from Debian: iptables and iproute2 (network faults inside a
# namespace the harness makes), strace (slow and failing fsync/write), libfuse2 (the LazyFS
# power-loss layer, tests/cluster/lazyfs.py, through fusepy) and mkfs.ext4 (the loop-mounted
# full disk, tests/cluster/fault_disks.py), and prometheus (Debian's 2.42, which
# tests/cluster/test_prometheus_scrape.py starts to scrape a cluster), and kcat (tests/compat,
# a Kafka client nobody here wrote). Installed when missing
# and running as root; without them those tests skip with the reason. (Debian's "fuse"
# package is not needed as root, and conflicts with the fuse3 already there.)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    missing=()
    command -v iptables >/dev/null 2>&1 || missing+=(iptables)
    command -v ip >/dev/null 2>&1 || missing+=(iproute2)
    command -v strace >/dev/null 2>&1 || missing+=(strace)
    ldconfig -p 2>/dev/null | grep 'libfuse\.so\.2' >/dev/null || missing+=(libfuse2)
    command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
    command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
    command -v kcat >/dev/null 2>&1 || missing+=(kcat)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "== installing ${missing[*]}" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends "${missing[@]}"; } >&2 \
            || echo "could not install ${missing[*]}: the tests that need them will skip" >&2
    fi
fi
echo "== ruff" >&2
ruff check .
echo "== import-linter" >&2
lint-imports --no-cache
echo "== mypy" >&2
mypy client controller broker
echo "== Any ratchet" >&2
python scripts/any_count.py --check
echo "== pytest" >&2
export PYSPARK_PYTHON="$VENV/bin/python"
# Two pytest-xdist workers (the suite waits on processes and sockets more than it computes: CI's
# 25 minutes); tests/conftest.py groups the tests so that a module stays on one worker and whole
# clusters and JVMs (fault scenarios, containers, Spark) never run two at once. GREGOR_TEST_WORKERS=1: one
# process (for -s, --pdb, or timing one test).
workers="${GREGOR_TEST_WORKERS:-2}"
if [ "$workers" = 1 ]; then
    exec python -m pytest "$@"
fi
exec python -m pytest -n "$workers" --dist loadgroup "$@"
