#!/usr/bin/env bash
# Build a local Debian bookworm base image with Python 3.11 (what python:3.11-slim gives) for hosts
# that cannot pull from a registry: debootstrap a minimal root file system and `docker import` it.
#
#   docker/make-base-image.sh [IMAGE]        # default kse-base:bookworm; skipped if it exists
#
# Env: DEBIAN_MIRROR (default http://deb.debian.org/debian), KSE_BASE_REBUILD=1 to rebuild.
# Needs root (debootstrap) and a reachable Debian mirror. ~40 s on a 2-core machine.
set -euo pipefail

image="${1:-kse-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

# One build at a time: CI starts this in the background while the tests run, and the docker smoke
# test's `make image` then waits here for it and finds the image made.
exec 9>"${TMPDIR:-/tmp}/kse-base-image.lock"
flock 9

if [[ "${KSE_BASE_REBUILD:-0}" != 1 ]] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "make-base-image: $image exists, reused (KSE_BASE_REBUILD=1 rebuilds it)"
    exit 0
fi
if [[ $EUID -ne 0 ]]; then
    echo "make-base-image: debootstrap needs root; run as root or pass BASE_IMAGE=<an image with python3.11>" >&2
    exit 1
fi
command -v debootstrap >/dev/null || {
    echo "make-base-image: debootstrap is not installed (apt-get install debootstrap)" >&2
    exit 1
}

root="$(mktemp -d "${TMPDIR:-/tmp}/kse-base.XXXXXX")"
trap 'rm -rf "$root"' EXIT
start=$SECONDS
echo "make-base-image: debootstrap bookworm into $root (mirror $mirror)"
# python3-venv brings ensurepip (pip's wheel), which the Dockerfile uses to make the project's venv.
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
    echo "make-base-image: debootstrap failed; last lines of $root.log:" >&2
    tail -n 20 "$root.log" >&2
    exit 1
}
rm -f "$root.log"
# What a slim image leaves out: package caches, documentation, manual pages, locales.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
tar -C "$root" --numeric-owner -c . |
    docker import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$image" >/dev/null
echo "make-base-image: $image built in $((SECONDS - start)) s"
