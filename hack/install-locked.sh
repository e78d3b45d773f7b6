#!/bin/sh
# The one way gangsched is installed for production: exact versions and sha256 hashes from
# requirements.lock, binary wheels only (no compiler needed), the wheel built with the locked
# build backend (requirements-build.lock). The Dockerfile runs these steps; so does
# tests/unit/test_install.py, outside Docker.
#
#   hack/install-locked.sh deps VENV            new venv (no pip inside) + locked dependencies
#   hack/install-locked.sh wheel OUT_DIR        build gangsched's wheel into OUT_DIR
#   hack/install-locked.sh app VENV WHEEL_DIR   install that wheel into VENV (no dependencies)
#   hack/install-locked.sh all VENV             the three above, wheel in a temporary directory
#
# Run from the repository root (or the Docker build context). PYTHON picks the interpreter
# (default python3); it must have pip. Network: the package index (or PIP_* settings).
set -eu
PYTHON=${PYTHON:-python3}
PIP_FLAGS="--disable-pip-version-check --no-input --require-hashes --only-binary=:all:"

deps() {
  "$PYTHON" -m venv --without-pip "$1"
  # shellcheck disable=SC2086
  "$PYTHON" -m pip --python "$1/bin/python" install $PIP_FLAGS -r requirements.lock
}

wheel() {
  builder=$(mktemp -d)
  "$PYTHON" -m venv --without-pip "$builder"
  # shellcheck disable=SC2086
  "$PYTHON" -m pip --python "$builder/bin/python" install $PIP_FLAGS -r requirements-build.lock
  # The locked backend, not whatever build isolation would download.
  PYTHONPATH=$("$builder/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
    "$PYTHON" -m pip wheel --disable-pip-version-check --no-input --no-build-isolation \
    --no-deps --wheel-dir "$1" .
  rm -rf "$builder"
}

app() {
  set -- "$1" "$2"/gangsched-*.whl
  [ -f "$2" ] || { echo "install-locked.sh: no gangsched wheel found" >&2; exit 1; }
  "$PYTHON" -m pip --python "$1/bin/python" install --disable-pip-version-check --no-input \
    --no-deps --no-index "$2"
}

case "${1:-}" in
  deps) deps "${2:?VENV}" ;;
  wheel) wheel "${2:?OUT_DIR}" ;;
  app) app "${2:?VENV}" "${3:?WHEEL_DIR}" ;;
  all)
    wheels=$(mktemp -d)
    deps "${2:?VENV}" && wheel "$wheels" && app "$2" "$wheels"
    rm -rf "$wheels"
    ;;
  *) echo "usage: $0 deps VENV | wheel OUT_DIR | app VENV WHEEL_DIR | all VENV" >&2; exit 2 ;;
esac
