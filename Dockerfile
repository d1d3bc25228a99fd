# The image a self-hosted GPU runner uses to run regression-guard: a CUDA build of
# PyTorch as the base, git, and the guard installed on top. Arms are built inside it as
# venvs that see this image's torch, so pick the base that matches your engine's torch.
#   docker build -t regression-guard --build-arg BASE_IMAGE=pytorch/pytorch:<tag> .
#   docker run --gpus all -v "$PWD:/repo" regression-guard run --repo /repo --base main --head HEAD
ARG BASE_IMAGE=pytorch/pytorch:2.11.0-cuda13.0-cudnn9-runtime
FROM ${BASE_IMAGE}
# on every layer this file makes, so that a runner can find (and prune) them by it
LABEL org.opencontainers.image.title=regression-guard

# git, and git allowed to read the worktrees of a mounted repository, which belong to
# another user; one step, since each step is a whole copy of the image under Docker's vfs driver
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && git config --system --add safe.directory '*'

WORKDIR /opt/regression-guard
COPY pyproject.toml README.md ./
COPY guard ./guard
COPY templates ./templates
# nvidia-ml-py: the driver version and GPU state for the report's Environment section.
RUN python -m pip install --no-cache-dir . nvidia-ml-py \
    && python -c "import guard, torch; print('guard', guard.__version__, 'torch', torch.__version__)"
ENTRYPOINT ["guard"]
CMD ["--help"]
