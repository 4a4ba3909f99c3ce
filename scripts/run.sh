#!/usr/bin/env bash
# Runs Gregor. Creates .venv if missing and installs it. With no arguments it starts a
# single-node server with embedded defaults (data in ./gregor-data, 127.0.0.1:9092);
# any arguments go to the `gregor` command instead (e.g. scripts/run.sh topics list).
#
# `--with spark` first (scripts/run.sh --with spark [ARGS]) also installs the Spark
# connector's extra into .venv (pyspark, pyarrow, pandas; Spark needs Java 17+), then does
# the same with ARGS (none: start the server). Equivalent to `pip install -e '.[spark]'`.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="compression"
while [ $# -gt 0 ] && [ "$1" = "--with" ]; do
    case "${2:-}" in
        spark) extras="$extras,spark" ;;
        *)
            echo "scripts/run.sh: --with takes 'spark' (got '${2:-}')" >&2
            exit 2
            ;;
    esac
    shift 2
done
. scripts/_venv.sh "$extras"
if [ $# -eq 0 ]; then
    exec gregor server
fi
exec gregor "$@"
