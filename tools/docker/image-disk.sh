#!/usr/bin/env bash
# How much of the engine's disk a build of each Dockerfile takes, and what its removal leaves:
# the runner image's build on the vfs driver (every layer a whole copy) filled a CI machine once.
# Each file is built on BASE_IMAGE, measured with du on Docker's root, removed, measured again.
#   tools/docker/image-disk.sh local/torch-cpu:2.13.0 Dockerfile [OTHER_DOCKERFILE...]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BASE_IMAGE DOCKERFILE..." >&2; exit 2; }
base=$1
shift
cd "$(dirname "$0")/../.."
root=$(docker info --format '{{.DockerRootDir}}')
used_mib() { du -sxm "$root" | cut -f1; }
echo "driver $(docker info --format '{{.Driver}}'), base $base"
for file in "$@"; do
    tag="regression-guard-disk:$$"
    before=$(used_mib)
    docker build -q -f "$file" --build-arg BASE_IMAGE="$base" --network host -t "$tag" . >/dev/null 2>&1
    built=$(used_mib)
    steps=$(docker history -q "$tag" | wc -l)
    docker rmi "$tag" >/dev/null
    echo "$file: the build added $((built - before)) MiB ($steps history entries); its removal left $(( $(used_mib) - before )) MiB"
done
