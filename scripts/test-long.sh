#!/usr/bin/env bash
# The long tier too: scripts/test.sh with GREGOR_LONG_TESTS=1, so the tests marked `long`
# (tests/conftest.py) run as well. Arguments go to pytest, as with scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
GREGOR_LONG_TESTS=1 exec bash scripts/test.sh "$@"
