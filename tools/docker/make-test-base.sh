#!/usr/bin/env bash
# Makes a local stand-in for the Dockerfile's CUDA PyTorch base image, for building and
# testing the image where no registry is reachable: Debian bookworm (debootstrap), Python
# 3.11, git, and the CPU build of torch from a wheel. It is imported as
# local/torch-cpu:2.13.0; then:
#   docker build --network host --build-arg BASE_IMAGE=local/torch-cpu:2.13.0 -t regression-guard:test .
# Needs root, debootstrap and a running Docker engine.
#   TORCH_WHEEL=path/to/torch-2.13.0+cpu-cp311-*.whl tools/docker/make-test-base.sh
set -euo pipefail
: "${TORCH_WHEEL:?set TORCH_WHEEL to a CPU torch wheel for CPython 3.11}"
TAG=${TAG:-local/torch-cpu:2.13.0}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
ROOT=$(mktemp -d)
trap 'umount "$ROOT/proc" 2>/dev/null || true; rm -rf "$ROOT"' EXIT

debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,git,ca-certificates bookworm "$ROOT" "$MIRROR"
# This machine's CA bundle and resolver, so pip inside the image reaches the index the way the host does.
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp "$TORCH_WHEEL" "$ROOT/tmp/"
mount --bind /proc "$ROOT/proc"
chroot "$ROOT" env PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    python3 -m pip install -q --break-system-packages --no-cache-dir "/tmp/$(basename "$TORCH_WHEEL")"
umount "$ROOT/proc"
rm -f "$ROOT/tmp/"*.whl
ln -sf python3 "$ROOT/usr/bin/python"  # the PyTorch images have `python`
# Debian marks its Python externally managed; the PyTorch images' conda Python is not.
tar -C "$ROOT" -c . | docker import \
    --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$TAG"
echo "made $TAG"
