#!/usr/bin/env bash
# Builds a local base image for the Gregor image when none can be pulled (no registry):
# a minimal Debian bookworm (debootstrap --variant=minbase) with python3 (3.11), python3-venv and
# python3-pip, imported with `docker import`. Reuses the image when it already exists.
#
#   scripts/docker/base-image.sh [--rebuild]      prints the tag (default gregor-base:bookworm)
#
# Environment: DOCKER_GREGOR_BASE (image tag), DEBIAN_MIRROR (default http://deb.debian.org/debian).
# Needs root (debootstrap) and a Docker engine; installs debootstrap with apt when missing.
set -euo pipefail
TAG="${DOCKER_GREGOR_BASE:-gregor-base:bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ "${1:-}" != "--rebuild" ] && docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "$TAG"
    exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "installing debootstrap" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2
fi

root="$(mktemp -d /tmp/gregor-base.XXXXXX)"
cleanup() {
    # debootstrap mounts proc/sys inside the tree while it works; never delete through a mount.
    { grep -o " $root/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do
        umount -l "$m" || true
    done
    rm -rf --one-file-system "$root"
}
trap cleanup EXIT

t0=$(date +%s)
echo "debootstrap bookworm (minbase + python3, python3-venv, python3-pip) into $root" >&2
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip \
    bookworm "$root" "$MIRROR" >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
rm -f "$root.log"

# Trim what an image never needs: downloaded packages, package lists, docs, man pages, locales.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin \
    "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/tmp/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/usr/share/locale/* "$root"/usr/share/lintian
# Keep them out of packages installed later too (a user's `apt-get install` in a derived image).
cat >"$root/etc/dpkg/dpkg.cfg.d/01-gregor-nodoc" <<'CFG'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
CFG
: >"$root/etc/hostname"

tar --numeric-owner -C "$root" -c . | docker import \
    -c 'ENV LANG=C.UTF-8' \
    -c 'CMD ["/bin/bash"]' \
    -m "debootstrap --variant=minbase bookworm + python3 python3-venv python3-pip" \
    - "$TAG" >/dev/null
size=$(docker image inspect -f '{{.Size}}' "$TAG")
echo "built $TAG in $(( $(date +%s) - t0 )) s, $(( size / 1000000 )) MB" >&2
echo "$TAG"
