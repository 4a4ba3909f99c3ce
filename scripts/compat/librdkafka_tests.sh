#!/usr/bin/env bash
# librdkafka's own test suite (Debian's librdkafka 2.0.2 source package, tests/0000-...) against
# a 3-broker Gregor cluster with a KAFKA listener (docs/kafka-compat.md).
#
#   scripts/compat/librdkafka_tests.sh              build if needed, run every test, print JSON
#   scripts/compat/librdkafka_tests.sh --build-only  fetch and build the test runner, nothing else
#   TESTS=0001,0012 scripts/compat/librdkafka_tests.sh   only these tests
#
# On a fresh Debian machine (as root) it adds a deb-src entry for the machine's suite when none
# is there, installs the build dependencies, `apt-get source librdkafka`, builds the library and
# tests/test-runner from that source (the tests use the library's internal headers), all cached
# under .compat-cache/librdkafka/ (gitignored; nothing of the source is committed); a second run
# reuses the build. Then scripts/compat/librdkafka_run.py starts the cluster, writes the
# runner's tests/test.conf, runs each test in its own runner process and prints
# {"passed", "failed", "excluded", ...} as JSON on stdout (progress on stderr). Excluded tests
# and why: scripts/compat/librdkafka_exclude.txt. Exit status 1 when a test failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${GREGOR_COMPAT_CACHE:-$ROOT/.compat-cache}/librdkafka"
RDK_VERSION="${LIBRDKAFKA_VERSION:-2.0.2}"
SRC="$CACHE/librdkafka-$RDK_VERSION"
RUNNER="$SRC/tests/test-runner"
say() { echo "== $*" >&2; }

# The build dependencies; a change to this list (rapidjson-dev, added later, enables the tests
# built only WITH_RAPIDJSON: 0053's sub-tests, 0098, 0101, 0110) reconfigures and rebuilds.
BUILD_DEPS="dpkg-dev build-essential python3 libssl-dev libsasl2-dev zlib1g-dev libzstd-dev
liblz4-dev rapidjson-dev"
STAMP="$SRC/.gregor-build-deps"

if [ ! -x "$RUNNER" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$BUILD_DEPS" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "building librdkafka's tests needs root (apt-get) once; run as root" >&2
        exit 2
    fi
    . /etc/os-release
    suite="${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
    if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        say "adding a deb-src entry for Debian $suite"
        cat > /etc/apt/sources.list.d/gregor-deb-src.sources <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
    say "installing build dependencies"
    # shellcheck disable=SC2086  # one word per package
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends $BUILD_DEPS; } >&2
    mkdir -p "$CACHE"
    if [ ! -d "$SRC" ]; then
        say "fetching Debian's librdkafka $RDK_VERSION source"
        rm -rf "$CACHE/download" && mkdir -p "$CACHE/download"
        (cd "$CACHE/download" && apt-get source -qq --download-only librdkafka >&2)
        dsc="$(ls "$CACHE/download"/librdkafka_"$RDK_VERSION"-*.dsc 2>/dev/null | head -1)"
        if [ -z "$dsc" ]; then
            echo "Debian $suite has no librdkafka $RDK_VERSION source:" \
                "$(ls "$CACHE/download"/*.dsc); set LIBRDKAFKA_VERSION" >&2
            exit 1
        fi
        rm -rf "$SRC.tmp" && dpkg-source -x "$dsc" "$SRC.tmp" >&2
        mv "$SRC.tmp" "$SRC"
    fi
    say "building librdkafka $RDK_VERSION and its test runner (a few minutes)"
    if [ -f "$SRC/Makefile.config" ] && [ "$(cat "$STAMP" 2>/dev/null)" != "$BUILD_DEPS" ]; then
        # configured with other dependencies: configure again, rebuild the tests (their
        # WITH_* switches come from config.h)
        rm -f "$SRC/Makefile.config" "$SRC"/tests/*.o "$RUNNER"
    fi
    (cd "$SRC" && { [ -f Makefile.config ] || ./configure --disable-gssapi; } >&2 \
        && nice make -j"$(nproc)" libs >&2 && nice make -j"$(nproc)" -C tests test-runner >&2)
    [ -x "$RUNNER" ] && echo "$BUILD_DEPS" > "$STAMP"
fi
[ -x "$RUNNER" ] || { echo "no $RUNNER after the build" >&2; exit 1; }
[ "${1:-}" = "--build-only" ] && { echo "$RUNNER"; exit 0; }

. "$ROOT/scripts/_venv.sh" "dev,compression" >&2
exec "$ROOT/.venv/bin/python" "$ROOT/scripts/compat/librdkafka_run.py" \
    --tests-dir "$SRC/tests" --exclude "$ROOT/scripts/compat/librdkafka_exclude.txt" \
    ${TESTS:+--only "$TESTS"} "$@"
