# Container recipe for evaluators: the locked environment, the repository, `make all`.
#
#   docker build -t paperlib .
#   docker run --rm -v "$PWD/out/results:/work/paperlib/results" \
#     -v "$PWD/out/figures:/work/paperlib/figures" -v "$PWD/out/book:/work/paperlib/book/_build" paperlib
#   # full mode on an NVIDIA GPU (needs the NVIDIA Container Toolkit on the host):
#   docker run --rm --gpus all ... paperlib make all MODE=full DEVICE=cuda
#
# README, section "Container", has the details. The image is not built by this project's
# CI: no container registry is reachable from its machines.

# Python 3.11.15 on Debian bookworm, by its multi-platform index digest.
FROM python:3.11.15-slim-bookworm@sha256:d29f48a31a8b408ed19272ca1e7b10ebae13b240a27e862d3d4217c528e2e0c3

# make drives everything; chromium is the browser `make test` opens the built book in.
# Debian's versions are not pinned (see .hadolint.yaml): bookworm's security updates replace them.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends make chromium \
    && rm -rf /var/lib/apt/lists/*

# An active virtualenv: the Makefile then uses it instead of creating .venv.
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /work/paperlib

# The lock first, so that the environment layer is rebuilt only when the lock changes.
COPY requirements-lock.txt ./
RUN python -m venv /opt/venv \
    && pip install --no-cache-dir -r requirements-lock.txt

COPY . .
RUN pip install --no-cache-dir --no-deps -e .

CMD ["make", "all"]
