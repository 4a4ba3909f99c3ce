#!/usr/bin/env bash
# Builds the Gregor image without a registry: the local base image (scripts/docker/base-image.sh,
# reused when present), the wheels of Gregor (with its C extensions) and of its dependencies built
# on the host with `pip wheel`, then `docker build` with those, so nothing inside a container
# touches the network. Users with a registry run `docker compose build` (python:3.11-slim).
#
#   scripts/docker/build.sh            tags gregor:dev (DOCKER_GREGOR_IMAGE overrides)
#
# Environment: DOCKER_GREGOR_IMAGE, DOCKER_GREGOR_BASE (base image tag), PYTHON (a Python 3.11 with pip and
# a C compiler available; default python3.11, else python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
IMAGE="${DOCKER_GREGOR_IMAGE:-gregor:dev}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' || {
    echo "build.sh: the wheels must be built with Python 3.11 (the image's); set PYTHON" >&2
    exit 2
}

t0=$(date +%s)
base="$(scripts/docker/base-image.sh)"
t1=$(date +%s)

wheels=.docker-wheels
rm -rf "$wheels"
echo "pip wheel gregor[compression] into $wheels" >&2
"$PY" -m pip wheel -q --disable-pip-version-check --wheel-dir "$wheels" ".[compression]" >&2
# The C extensions are optional at install time; a wheel without them must not reach the image.
"$PY" - "$wheels" <<'PY'
import glob, sys, zipfile
(whl,) = glob.glob(f"{sys.argv[1]}/gregor-*.whl")
names = zipfile.ZipFile(whl).namelist()
# (every extension setup.py declares: module "a.b._c" is a/b/_c*.so in the wheel)
import re
declared = re.findall(r'Extension\(\s*"([\w.]+)"', open("setup.py").read())
missing = [m for m in (d.replace(".", "/") for d in declared)
           if not any(n.startswith(m) and n.endswith(".so") for n in names)]
sys.exit(f"{whl} lacks the C extensions {missing}: is a C compiler installed?" if missing else 0)
PY
t2=$(date +%s)

# The classic builder leaves the build stage behind as an untagged image (and, when a step
# fails, the steps before it): remove ours, whatever the outcome.
trap 'docker image prune -f --filter label=org.gregor.stage=build >/dev/null' EXIT
docker build -q --force-rm --build-arg BASE_IMAGE="$base" --build-arg WHEELHOUSE="$wheels" \
    -t "$IMAGE" . >/dev/null
t3=$(date +%s)
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
echo "built $IMAGE from $base: $(( size / 1000000 )) MB; base image $((t1 - t0)) s," \
    "wheels $((t2 - t1)) s, docker build $((t3 - t2)) s" >&2
echo "$IMAGE"
