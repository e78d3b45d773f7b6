#!/usr/bin/env bash
# Build Helm from its Go module (helm.sh/helm/v4/cmd/helm at HELM_VERSION from
# hack/helm/versions.env): no binary download. Cached beside the control plane:
#   ${GANGSCHED_K8S_CACHE:-$HOME/.cache/gangsched}/helm-<HELM_VERSION>/bin/helm
# Idempotent: does nothing when that binary exists and reports the pinned version.
# The LAST line printed on stdout is always the bin dir (progress goes to stderr).
#
# Env: GO (default: go on PATH), BUILD_HELM_FORCE=1 rebuilds.
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=helm/versions.env
source "$HACK_DIR/helm/versions.env"
GO="${GO:-go}"
CACHE_ROOT="${GANGSCHED_K8S_CACHE:-${HOME:?HOME is not set}/.cache/gangsched}"
BIN_DIR="$CACHE_ROOT/helm-${HELM_VERSION}/bin"
MODULE=helm.sh/helm/v${HELM_VERSION:1:1}

log() { echo "build-helm: $*" >&2; }
die() { echo "build-helm: ERROR: $*" >&2; exit 1; }

ok() {
  local out
  out=$("$BIN_DIR/helm" version --template '{{.Version}}' 2>/dev/null) && [[ "$out" == "$HELM_VERSION" ]]
}

if [[ "${BUILD_HELM_FORCE:-0}" != 1 ]] && ok; then
  log "up to date: $BIN_DIR/helm"
  echo "$BIN_DIR"
  exit 0
fi
command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found on PATH: install Go >= 1.26 (or set GO=/path/to/go)"
export GOTOOLCHAIN=local
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.build-helm.lock"
flock -w 3600 9 || die "timed out waiting for another build-helm.sh (lock $CACHE_ROOT/.build-helm.lock)"
if [[ "${BUILD_HELM_FORCE:-0}" != 1 ]] && ok; then
  log "built by a concurrent run: $BIN_DIR/helm"; echo "$BIN_DIR"; exit 0
fi

TMP_DIR="$(mktemp -d "$CACHE_ROOT/.build-helm.XXXXXX")"
trap 'rm -rf "$TMP_DIR"' EXIT
start=$SECONDS
log "building $MODULE/cmd/helm@$HELM_VERSION (go install; a cold build takes a few minutes on 2 cores)..."
# Helm's own go.mod (no replace directives) and its release ldflags (version). Same -trimpath
# and cgo setting as hack/build-k8s.sh, so the client-go/apimachinery packages both need are
# compiled once and shared through Go's build cache.
(cd "$TMP_DIR" && GOBIN="$TMP_DIR" GOFLAGS='' "$GO" install -p "${BUILD_HELM_PARALLEL:-2}" -trimpath \
    -ldflags "-s -w -X $MODULE/internal/version.version=$HELM_VERSION -X $MODULE/internal/version.gitTreeState=clean" \
    "$MODULE/cmd/helm@$HELM_VERSION") \
  || die "go install $MODULE/cmd/helm@$HELM_VERSION failed (see above)"
mkdir -p "$BIN_DIR"
mv -f "$TMP_DIR/helm" "$BIN_DIR/helm"
ok || die "$BIN_DIR/helm was built but does not report $HELM_VERSION"
log "built in $((SECONDS - start))s: $BIN_DIR/helm"
echo "$BIN_DIR"
