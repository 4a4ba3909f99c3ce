#!/usr/bin/env bash
# Runs Gregor. Creates .venv if missing and installs it. With no arguments it starts a
# single-node server with embedded defaults (data in ./gregor-data, 127.0.0.1:9092);
# any arguments go to the `gregor` command instead (e.g. scripts/run.sh topics list).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh "compression"
if [ $# -eq 0 ]; then
    exec gregor server
fi
exec gregor "$@"
