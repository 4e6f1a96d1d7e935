#!/usr/bin/env bash
# `make image`: the kse image from wheels built on this host.
#
#   1. wheels: the project's into dist/kse/, every dependency's into dist/wheels/ (`pip wheel`, for
#      this host's Python, which must be the image's minor version: 3.11); each must be pure or
#      manylinux, so that it installs on any glibc Linux with that Python;
#   2. the base: $BASE_IMAGE if given; else python:3.11-slim if present or pullable; else a local
#      Debian bookworm base (docker/make-base-image.sh, cached as kse-base:bookworm);
#   3. docker build -t $IMAGE (default kse:latest) with no network inside the build.
#
# Env: PIP (default .venv/bin/pip), IMAGE, BASE_IMAGE, DOCKER_BUILD_ARGS (extra `docker build` args).
set -euo pipefail
cd "$(dirname "$0")/.."

pip="${PIP:-.venv/bin/pip}"
image="${IMAGE:-kse:latest}"
local_base="kse-base:bookworm"
start=$SECONDS

command -v docker >/dev/null || { echo "make image: docker is not installed" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "make image: no Docker engine answers (is dockerd running?)" >&2; exit 1; }

py_version="$("${pip%/pip}/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo "?")"
if [[ "$py_version" != 3.11 ]]; then
    echo "make image: the wheels must be built with Python 3.11 (the image's); $pip runs $py_version" >&2
    exit 1
fi

echo "make image: building wheels (dist/kse, dist/wheels)"
rm -rf dist/kse dist/wheels
"$pip" wheel --quiet --no-deps --wheel-dir dist/kse . 2> >(grep -v "is ignored: it is neither" >&2)
"$pip" wheel --quiet --prefer-binary --wheel-dir dist/wheels dist/kse/kse-*.whl \
    2> >(grep -v "is ignored: it is neither" >&2)
rm -f dist/wheels/kse-*.whl
# Only wheels that install on the image: pure Python or manylinux for this Python (a wheel built
# from an sdist here would be tagged linux_x86_64 and tied to this host's libraries).
bad="$(find dist/wheels -name '*.whl' ! -name '*-none-any.whl' ! -name '*manylinux*' -printf '%f\n')"
if [[ -n "$bad" ]]; then
    echo "make image: these wheels are neither pure nor manylinux, they may not run in the image:" >&2
    echo "$bad" >&2
    exit 1
fi

if [[ -z "${BASE_IMAGE:-}" ]]; then
    if docker image inspect python:3.11-slim >/dev/null 2>&1 \
        || timeout 60 docker pull --quiet python:3.11-slim >/dev/null 2>&1; then
        BASE_IMAGE=python:3.11-slim
    else
        echo "make image: python:3.11-slim cannot be pulled; using a local base ($local_base)"
        docker/make-base-image.sh "$local_base"
        BASE_IMAGE="$local_base"
    fi
fi

echo "make image: docker build -t $image (base $BASE_IMAGE)"
log="$(mktemp "${TMPDIR:-/tmp}/kse-image-build.XXXXXX.log")"
# shellcheck disable=SC2086
if ! docker build --network none --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$image" ${DOCKER_BUILD_ARGS:-} . \
    >"$log" 2>&1; then
    echo "make image: docker build failed; last lines of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
fi
rm -f "$log"
# The builds this one superseded (untagged now); the dependency stage stays cached.
docker image prune -f --filter label=io.kse.image=kse >/dev/null 2>&1 || true
echo "make image: $image ready in $((SECONDS - start)) s"
