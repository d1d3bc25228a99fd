# The image a self-hosted GPU runner uses to run regression-guard: a CUDA build of
# PyTorch as the base, git, and the guard installed on top. Arms are built inside it as
# venvs that see this image's torch, so pick the base that matches your engine's torch.
#   docker build -t regression-guard --build-arg BASE_IMAGE=pytorch/pytorch:<tag> .
#   docker run --gpus all -v "$PWD:/repo" regression-guard run --repo /repo --base main --head HEAD
ARG BASE_IMAGE=pytorch/pytorch:2.11.0-cuda13.0-cudnn9-runtime
FROM ${BASE_IMAGE}
# on every layer this file makes, so that a runner can find (and prune) them by it
LABEL org.opencontainers.image.title=regression-guard
# Few steps: under Docker's vfs storage driver (and its classic builder) every step is a whole
# copy of the image. What .dockerignore lets through: pyproject.toml, README.md, guard/, templates/.
COPY . /opt/regression-guard/
# git where the base lacks it, and git allowed to read the worktrees of a mounted repository,
# which belong to another user; nvidia-ml-py: the driver version and GPU state for the
# report's Environment section. Then the import check.
RUN (command -v git >/dev/null || (apt-get update \
        && apt-get install -y --no-install-recommends git \
        && rm -rf /var/lib/apt/lists/*)) \
    && git config --system --add safe.directory '*' \
    && python -m pip install --no-cache-dir /opt/regression-guard nvidia-ml-py \
    && python -c "import guard, torch; print('guard', guard.__version__, 'torch', torch.__version__)"
# `docker run IMAGE` alone prints guard's usage
ENTRYPOINT ["guard"]
