#!/usr/bin/env bash
# Makes local base images for building and testing where no registry is reachable, from one
# Debian bookworm debootstrap (minbase):
#   local/python:3.11       Python 3.11 alone: the base of the arm images the docker build
#                           mode's tests build (tests/test_docker_mode.py); small, as the vfs
#                           storage driver copies every layer whole
#   local/torch-cpu:2.13.0  that, plus pip, venv, git and the CPU build of torch from a wheel:
#                           a stand-in for the Dockerfile's CUDA PyTorch base
#                           (tests/test_docker_image.py); made only when TORCH_WHEEL is set
# then, e.g.:
#   docker build --network host --build-arg BASE_IMAGE=local/torch-cpu:2.13.0 -t regression-guard:test .
# Needs root, debootstrap and a running Docker engine.
#   TORCH_WHEEL=path/to/torch-2.13.0+cpu-cp311-*.whl tools/docker/make-test-base.sh
set -euo pipefail
SMALL_TAG=${SMALL_TAG:-local/python:3.11}
TAG=${TAG:-local/torch-cpu:2.13.0}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
ROOT=$(mktemp -d)
chmod 755 "$ROOT"  # the image's / : mktemp's 0700 would lock every user but root out of it
trap 'umount "$ROOT/proc" 2>/dev/null || true; rm -rf "$ROOT"' EXIT
PATH_ENV='ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

debootstrap --variant=minbase --include=python3 bookworm "$ROOT" "$MIRROR"
ln -sf python3 "$ROOT/usr/bin/python"  # the PyTorch images have `python`
tar -C "$ROOT" --exclude=./var/cache/apt/archives --exclude=./var/lib/apt/lists -c . \
    | docker import --change "$PATH_ENV" - "$SMALL_TAG"
echo "made $SMALL_TAG"
[ -n "${TORCH_WHEEL:-}" ] || exit 0

# This machine's CA bundle and resolver, so apt and pip inside reach what the host does.
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
chroot "$ROOT" apt-get update -q
chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    python3-pip python3-venv git ca-certificates
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
cp "$TORCH_WHEEL" "$ROOT/tmp/"
mount --bind /proc "$ROOT/proc"
chroot "$ROOT" env PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    python3 -m pip install -q --break-system-packages --no-cache-dir "/tmp/$(basename "$TORCH_WHEEL")"
umount "$ROOT/proc"
rm -rf "$ROOT/tmp/"*.whl "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/archives/*.deb
# Debian marks its Python externally managed; the PyTorch images' conda Python is not.
tar -C "$ROOT" -c . | docker import \
    --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change "$PATH_ENV" \
    - "$TAG"
echo "made $TAG"
