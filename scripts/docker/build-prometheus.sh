#!/usr/bin/env bash
# Builds the Prometheus image of the compose file's `monitoring` profile without a registry: the
# local base image (scripts/docker/base-image.sh, reused when present), the .debs of Debian's
# `prometheus` and of what it needs beyond the base image downloaded on the host, then
# `docker build` with those, so nothing inside a container touches the network. Users with a
# registry run `docker compose --profile cluster --profile monitoring build`.
#
#   scripts/docker/build-prometheus.sh     tags gregor-prometheus:dev (DOCKER_GREGOR_PROMETHEUS_IMAGE)
#
# Needs a Debian bookworm host (its apt lists decide what to download) with a Docker engine.
set -euo pipefail
cd "$(dirname "$0")/../.."
IMAGE="${DOCKER_GREGOR_PROMETHEUS_IMAGE:-gregor-prometheus:dev}"
t0=$(date +%s)
base="$(scripts/docker/base-image.sh)"

debs=.docker-debs
rm -rf "$debs"
mkdir -p "$debs"
# What `apt-get install prometheus` would install in the base image: simulated inside it with the
# host's package lists (read-only, no network), then downloaded on the host.
pkgs="$(docker run --rm --network none -v /var/lib/apt/lists:/var/lib/apt/lists:ro "$base" \
    apt-get -s -qq install --no-install-recommends prometheus | awk '/^Inst /{print $2}')"
[ -n "$pkgs" ] || { echo "build-prometheus.sh: apt found nothing to install" >&2; exit 1; }
echo "downloading $(echo "$pkgs" | wc -w) packages: $(echo $pkgs)" >&2
(cd "$debs" && apt-get download -qq $pkgs) >&2

trap 'rm -rf "$debs"' EXIT
docker build -q --force-rm --build-arg BASE_IMAGE="$base" --build-arg DEBS="$debs" \
    -f config/prometheus/Dockerfile -t "$IMAGE" . >/dev/null
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
echo "built $IMAGE from $base: $(( size / 1000000 )) MB in $(( $(date +%s) - t0 )) s" >&2
echo "$IMAGE"
