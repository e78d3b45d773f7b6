#!/usr/bin/env bash
# Build and inspect gangsched's container image without a Docker engine: Debian's buildah
# (daemonless, vfs storage, chroot isolation) builds the real Dockerfile.
#
#   hack/image.sh build           tools + base + image; prints the image name and size (`make image`)
#   hack/image.sh base            the stand-in base image (see below); prints its name
#   hack/image.sh tools           installs buildah and mmdebstrap from Debian when missing (root)
#   hack/image.sh buildah ARGS    buildah on this project's image storage (the tests use it)
#   hack/image.sh name            prints the image name `build` produces
#
# The stand-in base. Image registries cannot be reached here, so python:3.11-slim-bookworm
# (the Dockerfile's default PYTHON_IMAGE) cannot be pulled. We make an image with the same
# shape from Debian bookworm's own packages with mmdebstrap (python3 is 3.11 in bookworm, with
# venv and pip, ca-certificates) and the official image's interpreter paths (/usr/local/bin/
# python3.11, python3, python), then build the unchanged Dockerfile on it with
# `--build-arg PYTHON_IMAGE=<stand-in> --pull=never`. A user with Docker builds the same file on
# the official base.
#
# The package index is reached through a TLS proxy whose CA this machine trusts (PIP_CERT or
# SSL_CERT_FILE). The build gets that CA the way a build behind a corporate proxy should: as
# the build secret `pip-ca`, mounted only into the pip steps' RUN, never stored in a layer
# (tests/image/ checks every layer for it).
#
# Caching: the base is rebuilt only when its recipe (this file's make_rootfs and the values
# below) changes; the image is rebuilt only when the Dockerfile, the build context it copies
# or the base change (a label records the inputs' hash); buildah's layer cache reuses the
# dependency layer while the lock files are unchanged.
#
# Env: GANGSCHED_IMAGE_CACHE   image storage and stamps (default ~/.cache/gangsched/image)
#      IMAGE                   image name (default localhost/gangsched:<version>)
#      PIP_CA                  the CA file to pass as the pip-ca secret (default: $PIP_CERT,
#                              else $SSL_CERT_FILE; none when neither is set)
#      IMAGE_FORCE=1           rebuild the image even if its inputs are unchanged
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

CACHE=${GANGSCHED_IMAGE_CACHE:-${HOME:?HOME is not set}/.cache/gangsched/image}
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)
IMAGE=${IMAGE:-localhost/gangsched:$VERSION}
BASE_IMAGE=localhost/gangsched-python-standin:3.11-slim-bookworm
BASE_SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,python3-pip,ca-certificates
BASE_SOURCES=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)

log() { echo "image: $*" >&2; }
die() { echo "image: ERROR: $*" >&2; exit 1; }

bah() { # buildah on our own storage: the vfs driver works everywhere (no overlay mounts needed)
  buildah --root "$CACHE/storage" --runroot "$CACHE/run" --storage-driver vfs "$@"
}

tools() {
  local missing=()
  command -v buildah >/dev/null 2>&1 || missing+=(buildah)
  command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
  ((${#missing[@]})) || return 0
  ((EUID == 0)) || die "missing ${missing[*]}: run as root, or apt-get install ${missing[*]}"
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# The stand-in's root filesystem, written into the (empty) directory $1.
make_rootfs() {
  local sources=() line
  for line in "${BASE_SOURCES[@]}"; do sources+=("$line"); done
  # minbase: Essential + required + apt, like debian:bookworm-slim; no Recommends (python3-pip
  # would pull in a compiler); documentation dropped as the slim images do. The merged-usr hook
  # lays out /bin -> usr/bin as debian:bookworm does, with the tiny usr-is-merged package:
  # without it mmdebstrap installs usrmerge, which brings the whole of perl (47 MB).
  mmdebstrap --quiet --mode=root --variant=minbase \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --include="$BASE_PACKAGES" \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='for name in python3.11 python3 python; do ln -s /usr/bin/python3.11 "$1/usr/local/bin/$name"; done' \
    --customize-hook='for name in pip3.11 pip3 pip; do ln -s /usr/bin/pip3 "$1/usr/local/bin/$name"; done' \
    "$BASE_SUITE" "$1" "${sources[@]}"
  # What a container runtime provides at run time must not be baked in: device nodes, the
  # build host's resolver configuration and host name.
  rm -rf "${1:?}"/dev/* "$1/etc/resolv.conf" "$1/etc/hostname"
}

base_recipe_hash() {
  { declare -f make_rootfs; echo "$BASE_SUITE $BASE_PACKAGES ${BASE_SOURCES[*]}"; } \
    | sha256sum | cut -c1-16
}

image_label() { # image label-name -> value ("" when the image or label is missing)
  bah inspect --type image --format "{{ index .ImageAnnotations \"$2\" }}{{ index .OCIv1.Config.Labels \"$2\" }}" \
    "$1" 2>/dev/null | sed 's/<no value>//g' || true
}

base() {
  local recipe ctr mnt py_version started=$SECONDS
  recipe=$(base_recipe_hash)
  if [[ "$(image_label "$BASE_IMAGE" gangsched.base-recipe)" == "$recipe" ]]; then
    log "base up to date: $BASE_IMAGE (recipe $recipe)"
    echo "$BASE_IMAGE"
    return
  fi
  log "building the stand-in base $BASE_IMAGE from Debian $BASE_SUITE (mmdebstrap)..."
  ctr=$(bah from --pull=never scratch)
  # shellcheck disable=SC2064
  trap "bah umount '$ctr' >/dev/null 2>&1 || true; bah rm '$ctr' >/dev/null 2>&1 || true" EXIT
  mnt=$(bah mount "$ctr")
  make_rootfs "$mnt"
  [[ -x "$mnt/usr/local/bin/python3.11" ]] || die "the stand-in has no /usr/local/bin/python3.11"
  py_version=$(chroot "$mnt" /usr/local/bin/python3.11 -c 'import platform; print(platform.python_version())')
  bah umount "$ctr" >/dev/null
  # The official image's configuration (docker.io/library/python:3.11-slim-bookworm).
  bah config \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 \
    --env PYTHON_VERSION="$py_version" \
    --cmd '["python3"]' \
    --label gangsched.base-recipe="$recipe" \
    --label org.opencontainers.image.description="Stand-in for python:3.11-slim-bookworm built by hack/image.sh from Debian $BASE_SUITE packages" \
    "$ctr"
  bah commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
  trap - EXIT
  log "base built in $((SECONDS - started))s: $BASE_IMAGE"
  echo "$BASE_IMAGE"
}

# The files the build context lets in (.dockerignore is an allow-list), hashed with the
# Dockerfile and the base's id: equal hash, equal image.
context_hash() {
  local base_id=$1
  {
    echo "$base_id"
    sha256sum Dockerfile .dockerignore
    git ls-files -z --cached --others --exclude-standard -- \
      pyproject.toml README.md requirements.lock requirements-build.lock hack/install-locked.sh \
      hack/image-prune.txt gangsched \
      | grep -zv -e '__pycache__' -e '\.pyc$' | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}

pip_ca() {
  local ca=${PIP_CA-${PIP_CERT:-${SSL_CERT_FILE:-}}}
  [[ -z "$ca" || -s "$ca" ]] || die "the CA file $ca (PIP_CA, PIP_CERT or SSL_CERT_FILE) does not exist"
  echo "$ca"
}

build() {
  tools
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.image.lock"
  flock -w 3600 9 || die "timed out waiting for another hack/image.sh (lock $CACHE/.image.lock)"
  local base_image base_id inputs ca secret=() started=$SECONDS size
  base_image=$(base)
  base_id=$(bah inspect --type image --format '{{.FromImageID}}' "$base_image")
  inputs=$(context_hash "$base_id")
  if [[ "${IMAGE_FORCE:-0}" != 1 && "$(image_label "$IMAGE" gangsched.inputs)" == "$inputs" ]]; then
    log "image up to date: $IMAGE (inputs $inputs)"
  else
    ca=$(pip_ca)
    [[ -n "$ca" ]] && secret=(--secret "id=pip-ca,src=$ca")
    log "building $IMAGE from Dockerfile on $base_image (buildah bud, vfs, chroot isolation)..."
    BUILDAH_ISOLATION=chroot bah bud --quiet --layers --pull=never --network host \
      --build-arg PYTHON_IMAGE="$base_image" "${secret[@]}" \
      --label gangsched.inputs="$inputs" -t "$IMAGE" -f Dockerfile . >/dev/null
    log "image built in $((SECONDS - started))s"
  fi
  size=$(bah images --noheading --format '{{.Size}}' "$IMAGE")
  echo "$IMAGE size $size"
}

case "${1:-}" in
  build) build ;;
  base) tools; mkdir -p "$CACHE"; base ;;
  tools) tools ;;
  name) echo "$IMAGE" ;;
  buildah) shift; exec buildah --root "$CACHE/storage" --runroot "$CACHE/run" --storage-driver vfs "$@" ;;
  *) echo "usage: $0 build | base | tools | name | buildah ARGS..." >&2; exit 2 ;;
esac
