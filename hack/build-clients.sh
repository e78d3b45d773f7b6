#!/usr/bin/env bash
# Build the real clients gangsched is tested under (Kueue, LeaderWorkerSet, JobSet, Kubeflow
# Trainer, scheduler-plugins) from their Go modules, pinned with their hashes in
# hack/clients/versions.env. `go install M@V` cannot be used: the module proxy here refuses the
# version list its deprecation check asks for (and scheduler-plugins has replace directives
# go install rejects), so each module is fetched with `go mod download -json M@V`, its hash
# checked against the pin, copied out of the read-only module cache and built with `go build`
# inside, on the module's own go.mod/go.sum.
#
# Output per client, beside the control plane's cache:
#   ${GANGSCHED_K8S_CACHE:-$HOME/.cache/gangsched}/clients/<name>-<version>/bin/<binary>
#   .../<name>-<version>/src/   the module's source (config/, manifests/, charts/: CRDs, RBAC,
#                               webhooks, sample configurations the e2e harness installs)
#   .../<name>-<version>/BUILT  "<module>@<version> <hash>" (written last: a half build is redone)
# Idempotent: a client whose BUILT stamp matches its pin is left alone.
# The LAST line on stdout is the clients cache root (progress goes to stderr).
#
# Usage: hack/build-clients.sh [name ...]      (default: every client in versions.env)
#        hack/build-clients.sh --list          names, one per line
# Env:   GO (default go on PATH), BUILD_CLIENTS_FORCE=1 rebuilds, BUILD_CLIENTS_PARALLEL (2)
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=clients/versions.env
source "$HACK_DIR/clients/versions.env"
# shellcheck source=gomod-lib.sh
source "$HACK_DIR/gomod-lib.sh"
GO="${GO:-go}"
CACHE_ROOT="${GANGSCHED_K8S_CACHE:-${HOME:?HOME is not set}/.cache/gangsched}"
CLIENTS_ROOT="$CACHE_ROOT/clients"

log() { echo "build-clients: $*" >&2; }
die() { echo "build-clients: ERROR: $*" >&2; exit 1; }

declare -A MODULE VERSION PKG BINARY SUM
NAMES=()
while read -r name module version pkg binary sum; do
  [[ -n "$name" ]] || continue
  NAMES+=("$name"); MODULE[$name]=$module; VERSION[$name]=$version
  PKG[$name]=$pkg; BINARY[$name]=$binary; SUM[$name]=$sum
done <<<"$CLIENTS"

if [[ "${1:-}" == "--list" ]]; then printf '%s\n' "${NAMES[@]}"; exit 0; fi
WANTED=("$@")
(( ${#WANTED[@]} )) || WANTED=("${NAMES[@]}")
for name in "${WANTED[@]}"; do
  [[ -n "${MODULE[$name]:-}" ]] || die "unknown client '$name' (known: ${NAMES[*]})"
done

out_dir() { echo "$CLIENTS_ROOT/$1-${VERSION[$1]}"; }
stamp() { echo "${MODULE[$1]}@${VERSION[$1]} ${SUM[$1]}"; }
built() {
  local dir; dir="$(out_dir "$1")"
  [[ -f "$dir/bin/${BINARY[$1]}" && -x "$dir/bin/${BINARY[$1]}" && -f "$dir/BUILT" && "$(<"$dir/BUILT")" == "$(stamp "$1")" ]]
}

build_one() {
  local name="$1" module="${MODULE[$1]}" version="${VERSION[$1]}" dir
  dir="$(out_dir "$name")"
  log "$name: fetching $module@$version through the module proxy..."
  local work="$TMP_DIR/src" out="$TMP_DIR/out"
  fetch_pinned_module "$module@$version" "${SUM[$name]}" "$work" hack/clients/versions.env
  mkdir -p "$out"
  local start=$SECONDS
  log "$name: go build ${PKG[$name]} (a cold build takes 3-7 minutes on 2 cores)..."
  (cd "$work" && GOFLAGS='-mod=readonly' "$GO" build -p "${BUILD_CLIENTS_PARALLEL:-2}" -trimpath \
      -ldflags '-s -w' -o "$out/${BINARY[$name]}" "${PKG[$name]}") \
    || die "$name: go build of $module@$version ${PKG[$name]} failed (see above)"
  log "$name: built in $((SECONDS - start))s"
  rm -rf "$dir"; mkdir -p "$dir/bin"
  mv "$out/${BINARY[$name]}" "$dir/bin/"
  mv "$work" "$dir/src"
  stamp "$name" >"$dir/BUILT"
}

command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found on PATH: install Go >= 1.25 (or set GO=/path/to/go)"
export GOTOOLCHAIN=local
mkdir -p "$CLIENTS_ROOT"
TMP_DIR=""
trap '[[ -z "$TMP_DIR" ]] || rm -rf "$TMP_DIR"' EXIT
for name in "${WANTED[@]}"; do
  if [[ "${BUILD_CLIENTS_FORCE:-0}" != 1 ]] && built "$name"; then
    log "$name: up to date: $(out_dir "$name")"; continue
  fi
  # One build at a time across every run on the machine (each go build takes both cores);
  # a run that waited finds the client built by the one it waited for.
  exec 9>"$CLIENTS_ROOT/.build.lock"
  flock -w 3600 9 || die "timed out waiting for another build-clients.sh (lock $CLIENTS_ROOT/.build.lock)"
  if [[ "${BUILD_CLIENTS_FORCE:-0}" != 1 ]] && built "$name"; then
    log "$name: built by a concurrent run: $(out_dir "$name")"; exec 9>&-; continue
  fi
  TMP_DIR="$(mktemp -d "$CLIENTS_ROOT/.build-$name.XXXXXX")"
  build_one "$name"
  rm -rf "$TMP_DIR"; TMP_DIR=""
  exec 9>&-
done
echo "$CLIENTS_ROOT"
