#!/usr/bin/env bash
# Starts a Docker engine for the tests where none runs, and makes the local base images
# (tools/docker/make-test-base.sh) where they are missing. Root only, with dockerd and
# debootstrap installed; a failure here leaves the Docker tests to skip, with the reason
# on stderr.
#   tools/ci/start-docker.sh PYTHON
set -euo pipefail
PYTHON=${1:-python3}
[ "$(id -u)" = 0 ] || { echo "start-docker: not root" >&2; exit 1; }
for tool in dockerd debootstrap; do
    command -v "$tool" >/dev/null || { echo "start-docker: no $tool (Debian: apt-get install docker.io debootstrap)" >&2; exit 1; }
done
if ! docker info >/dev/null 2>&1; then
    # overlay2 where the kernel mounts overlayfs on Docker's disk: a layer or a container is then
    # a mount, not a copy (the runner image's test: docs/measurements/test-suite.md); vfs where it
    # cannot (no overlay module, or a disk that is itself an overlay), which copies every layer.
    # No bridge or iptables: the tests' containers have no network.
    for driver in ${DOCKER_STORAGE_DRIVERS:-overlay2 vfs}; do
        nohup dockerd --storage-driver="$driver" --iptables=false --bridge=none >/tmp/ci-dockerd.log 2>&1 &
        pid=$!
        for _ in $(seq 60); do
            docker info >/dev/null 2>&1 && break
            kill -0 "$pid" 2>/dev/null || break  # refused the driver: exited
            sleep 1
        done
        docker info >/dev/null 2>&1 && break
        echo "start-docker: the $driver storage driver did not start: $(tail -1 /tmp/ci-dockerd.log)" >&2
        kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    done
    docker info >/dev/null 2>&1 || { tail -5 /tmp/ci-dockerd.log >&2; exit 1; }
fi
echo "start-docker: storage driver $(docker info --format '{{.Driver}}')"
# What earlier runs left and nothing names (the tests remove what they build, a run that was
# killed may not): under the vfs driver every image is a whole copy of its base, and a few
# runs' worth filled this machine's disk once. Then say how much room the engine has.
# Only the guard's: its containers and arm images carry its labels, the runner image's layers the title.
docker container prune --force --filter label=regression-guard.container >/dev/null
for label in regression-guard.sha org.opencontainers.image.title=regression-guard; do
    docker image prune --force --filter "label=$label" | tail -n 1 | sed "s/^/start-docker: dangling images ($label) removed: /"
done
root=$(docker info --format '{{.DockerRootDir}}')
echo "start-docker: $(df -h --output=avail "$root" | tail -n 1 | tr -d ' ') free under $root"
if docker image inspect local/python:3.11 >/dev/null 2>&1 && docker image inspect local/torch-cpu:2.13.0 >/dev/null 2>&1; then
    exit 0
fi
WHEEL=$(find /opt/wheels -maxdepth 1 -name 'torch-2.13.0+cpu-cp311-*.whl' 2>/dev/null | head -n 1)
if [ -z "$WHEEL" ]; then
    # the index pip is configured with (the Makefile's torch comes from the same)
    WHEELS=$(mktemp -d)
    "$PYTHON" -m venv "$WHEELS/venv"
    "$WHEELS/venv/bin/python" -m pip download -q --no-deps --only-binary=:all: -d "$WHEELS" torch==2.13.0
    WHEEL=$(find "$WHEELS" -name 'torch-*.whl' | head -n 1)
fi
started=$(date +%s)
TORCH_WHEEL=$WHEEL tools/docker/make-test-base.sh >/tmp/ci-docker-base.log 2>&1 || { tail -20 /tmp/ci-docker-base.log >&2; exit 1; }
echo "start-docker: base images made in $(( $(date +%s) - started )) s"
