#!/usr/bin/env bash
# Waits until a Gregor server accepts connections, for the quick start's `scripts/run.sh &`
# (whose first run installs .venv before the server starts: a minute or so).
# Usage: scripts/wait-ready.sh [HOST:PORT] [TIMEOUT_SECONDS]   (defaults 127.0.0.1:9092, 300)
# Exits 0 once HOST:PORT answers (and says so), 1 with a message when TIMEOUT passes.
set -uo pipefail
addr="${1:-127.0.0.1:9092}"
timeout="${2:-300}"
host="${addr%:*}"
port="${addr##*:}"
deadline=$((SECONDS + timeout))
while ((SECONDS < deadline)); do
    if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
        echo "gregor is up on $host:$port" >&2
        exit 0
    fi
    sleep 0.5
done
echo "nothing answered on $host:$port within ${timeout}s (is scripts/run.sh running? see its output)" >&2
exit 1
