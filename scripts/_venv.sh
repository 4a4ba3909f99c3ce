# Sourced by run.sh and test.sh: make .venv if missing and install Gregor into it.
# Usage: . scripts/_venv.sh EXTRAS   (EXTRAS like "dev,spark,compression" or "")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${GREGOR_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
extras="${1:-}"
spec="$ROOT"
[ -n "$extras" ] && spec="$ROOT[$extras]"
if [ ! -x "$VENV/bin/python" ]; then
    echo "creating $VENV" >&2
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
fi
# Re-install when the build inputs (pyproject.toml, setup.py, the C extensions' sources) changed
# or extras differ since the last install: the editable install compiles every extension of
# setup.py (client/records/*.c, client/protocol/*.c, broker/kafka/*.c).
stamp="$VENV/.gregor-installed"
build_inputs=("$ROOT/pyproject.toml" "$ROOT/setup.py" "$ROOT"/client/records/*.c
    "$ROOT"/client/protocol/*.c "$ROOT"/broker/kafka/*.c)
hash="$(cat "${build_inputs[@]}" | sha256sum | cut -d' ' -f1)"
want="$hash $extras"
# An install of the same inputs with every wanted extra (and maybe more) will do: asking for
# fewer extras must not re-install (in a git worktree whose .venv is a shared one, that
# would point the shared editable install at the worktree).
covered() {
    local line have e
    [ -f "$stamp" ] || return 1
    while read -r line; do
        [ "${line%% *}" = "$hash" ] || continue
        have=",${line#* },"
        [ "$line" = "$hash" ] && have=",,"
        for e in ${extras//,/ }; do
            [[ "$have" == *",$e,"* ]] || continue 2
        done
        return 0
    done < "$stamp"
    return 1
}
if ! covered; then
    echo "installing gregor${extras:+[$extras]} into $VENV" >&2
    "$VENV/bin/python" -m pip install -q -e "$spec" >&2
    echo "$want" >> "$stamp"
fi
# crcmod must have its C extension: the pure-Python fallback is ~100x slower.
"$VENV/bin/python" -c "import client.records.crc as c; c.require_c_extension()"
export PATH="$VENV/bin:$PATH"
