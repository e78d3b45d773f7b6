# syntax=docker/dockerfile:1
# gangsched: multi-stage build. The build stage installs the locked dependencies (exact
# versions, sha256 hashes, binary wheels only: no compiler anywhere) and builds gangsched's
# wheel with the locked build backend, exactly as hack/install-locked.sh does outside Docker
# (tests/unit/test_install.py runs the same steps). The final stage is the slim Python base
# plus that virtualenv: no pip, no build tools, runs as an unprivileged numeric user.
#
#   docker build -t gangsched:0.1.0 .
#   docker run --rm gangsched:0.1.0 --version
#
# Behind a TLS-intercepting proxy, give pip its CA as a build secret (mounted into the pip steps
# only, never stored in a layer):
#   docker build --secret id=pip-ca,src=/etc/ssl/certs/ca-certificates.crt -t gangsched:0.1.0 .
# Without Docker: `make image` (hack/image.sh) builds this file with buildah.
#
# For bit-for-bit rebuilds pin the base by digest: --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Dependencies first: this layer is reused until a lock file changes.
COPY requirements.lock requirements-build.lock ./
COPY hack/install-locked.sh hack/install-locked.sh
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && sh hack/install-locked.sh deps /opt/gangsched
COPY pyproject.toml README.md ./
COPY gangsched ./gangsched
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && sh hack/install-locked.sh wheel /tmp/wheels \
 && sh hack/install-locked.sh app /opt/gangsched /tmp/wheels \
 && rm -rf /tmp/wheels \
 && /opt/gangsched/bin/gangsched --version
# What the runtime never loads stays out of the final stage: the dependencies' own test suites
# (numpy's are 17 MB), numpy's build tools (f2py, numpy.distutils, numpy-config) and the
# modules hack/image-prune.txt lists (kubernetes-asyncio's generated client, 47 MB; unused CEL
# extensions), every entry required to match. Then the import paths of `gangsched run` and
# `gangsched explain` are loaded once, so a pruned module they need fails the build.
COPY hack/image-prune.txt hack/image-prune.txt
RUN set -eu; \
    site=$(/opt/gangsched/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))'); \
    find "$site" -depth -type d -name tests -exec rm -rf {} +; \
    rm -rf "$site"/numpy/f2py "$site"/numpy/distutils /opt/gangsched/bin/f2py /opt/gangsched/bin/numpy-config; \
    sed 's/#.*//' hack/image-prune.txt | while read -r entry; do \
      [ -n "$entry" ] || continue; \
      set -- "$site"/$entry; \
      [ -e "$1" ] || { echo "hack/image-prune.txt: $entry matches nothing in $site" >&2; exit 1; }; \
      rm -rf "$@"; \
    done; \
    /opt/gangsched/bin/python -c 'from gangsched.edge import slim_client; assert slim_client.install(); import gangsched.edge.app, gangsched.edge.kopf_host, gangsched.edge.early_lists, gangsched.explain.command, gangsched.core.dra.cel'; \
    /opt/gangsched/bin/gangsched --version

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="gangsched" \
      org.opencontainers.image.description="Gang scheduler for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
# The base's pip, setuptools and wheel (and ensurepip's copies) serve builds only: the runtime
# has no way to install anything. Wherever the base keeps them (the official image under
# /usr/local, a Debian-built one under /usr/lib/python3).
RUN set -eu; \
    for site in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))'); do \
      rm -rf "$site"/pip "$site"/pip-* "$site"/setuptools "$site"/setuptools-* "$site"/wheel \
             "$site"/wheel-* "$site"/pkg_resources "$site"/_distutils_hack "$site"/distutils-precedence.pth; \
    done; \
    rm -f /usr/local/bin/pip /usr/local/bin/pip3* /usr/bin/pip /usr/bin/pip3*; \
    find / -xdev \( -name 'pip-*.whl' -o -name 'setuptools-*.whl' -o -name 'wheel-*.whl' \) -delete; \
    if python3 -m pip --version >/dev/null 2>&1; then echo "pip is still importable" >&2; exit 1; fi
# The venv refers to /usr/local/bin/python3.11, the same in both stages.
COPY --from=build /opt/gangsched /opt/gangsched
ENV PATH=/opt/gangsched/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so Kubernetes can verify runAsNonRoot without a passwd entry.
USER 65532:65532
WORKDIR /tmp
EXPOSE 10259 10258
ENTRYPOINT ["gangsched"]
CMD ["run", "--config", "/etc/gangsched/config.yaml"]
