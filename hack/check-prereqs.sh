#!/usr/bin/env bash
# What the README's two commands need from the machine before they can install the rest
# themselves (the Python side into .venv/, the control plane and Prometheus from Go modules):
# Python 3.11+ with venv, Go 1.26, openssl (the control plane's certificates), curl, flock.
# Every machine of this project's kind has them; elsewhere this names what is missing and how
# to get it, instead of a failure halfway through a build.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
missing=()
for tool in openssl curl flock go; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ! "$PYTHON" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  missing+=("$PYTHON 3.11+ with venv")
fi
if command -v go >/dev/null 2>&1; then
  go_version=$(GOTOOLCHAIN=local go env GOVERSION)
  [[ "$go_version" =~ ^go1\.(2[6-9]|[3-9][0-9]) ]] || missing+=("Go >= 1.26 (found $go_version)")
fi
if ((${#missing[@]})); then
  echo "missing on this machine: ${missing[*]}" >&2
  echo "on Debian: apt-get install -y openssl curl util-linux python3-venv, and Go 1.26 from go.dev" >&2
  exit 1
fi
