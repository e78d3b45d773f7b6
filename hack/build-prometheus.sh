#!/usr/bin/env bash
# Build Prometheus and promtool from their Go module (hack/prometheus/versions.env): the real
# server the observability e2e tests scrape gangsched with and evaluate the shipped alert rules
# in, and the rule checker. No root, no binary download, no distribution package: pinned by
# version and module hash like the clients, cached beside the control plane:
#   ${GANGSCHED_K8S_CACHE:-$HOME/.cache/gangsched}/prometheus-<version>/bin/{prometheus,promtool}
#   .../BUILT  "<module>@<version> <hash>" (written last: a half build is redone)
# Built with `-tags remove_all_sd` (no cloud service discovery: the tests use static targets),
# which saves about half the build. The web UI's assets are not embedded; the HTTP API is whole.
# Idempotent. The LAST line printed on stdout is the bin dir (progress goes to stderr).
#
# Env: GO (default: go on PATH), BUILD_PROMETHEUS_FORCE=1 rebuilds.
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=prometheus/versions.env
source "$HACK_DIR/prometheus/versions.env"
# shellcheck source=gomod-lib.sh
source "$HACK_DIR/gomod-lib.sh"
GO="${GO:-go}"
CACHE_ROOT="${GANGSCHED_K8S_CACHE:-${HOME:?HOME is not set}/.cache/gangsched}"
OUT_DIR="$CACHE_ROOT/prometheus-$PROMETHEUS_VERSION"
BIN_DIR="$OUT_DIR/bin"
STAMP="$PROMETHEUS_MODULE@$PROMETHEUS_MODULE_VERSION $PROMETHEUS_SUM"

log() { echo "build-prometheus: $*" >&2; }
die() { echo "build-prometheus: ERROR: $*" >&2; exit 1; }

ok() {
  [[ -f "$OUT_DIR/BUILT" && "$(<"$OUT_DIR/BUILT")" == "$STAMP" ]] || return 1
  local b out
  for b in prometheus promtool; do
    out=$("$BIN_DIR/$b" --version 2>&1) || return 1
    [[ "$out" == *"version $PROMETHEUS_VERSION"* ]] || return 1
  done
}

if [[ "${BUILD_PROMETHEUS_FORCE:-0}" != 1 ]] && ok; then
  log "up to date: $BIN_DIR"
  echo "$BIN_DIR"
  exit 0
fi
command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found on PATH: install Go >= 1.26 (or set GO=/path/to/go)"
export GOTOOLCHAIN=local
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.build-prometheus.lock"
flock -w 3600 9 || die "timed out waiting for another build-prometheus.sh (lock $CACHE_ROOT/.build-prometheus.lock)"
if [[ "${BUILD_PROMETHEUS_FORCE:-0}" != 1 ]] && ok; then
  log "built by a concurrent run: $BIN_DIR"; echo "$BIN_DIR"; exit 0
fi

TMP_DIR="$(mktemp -d "$CACHE_ROOT/.build-prometheus.XXXXXX")"
trap 'chmod -R u+w "$TMP_DIR" 2>/dev/null; rm -rf "$TMP_DIR"' EXIT
module="$PROMETHEUS_MODULE@$PROMETHEUS_MODULE_VERSION"
log "fetching $module through the module proxy..."
work="$TMP_DIR/src"
fetch_pinned_module "$module" "$PROMETHEUS_SUM" "$work" hack/prometheus/versions.env
start=$SECONDS
log "go build ./cmd/prometheus ./cmd/promtool (a cold build takes about 5-10 minutes on 2 cores)..."
# GOWORK=off: the module's go.work names modules its zip does not carry.
(cd "$work" && GOWORK=off GOFLAGS='-mod=readonly' "$GO" build -p "${BUILD_PROMETHEUS_PARALLEL:-2}" \
    -trimpath -tags remove_all_sd \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION -X github.com/prometheus/common/version.Branch=HEAD" \
    -o "$TMP_DIR/out/" ./cmd/prometheus ./cmd/promtool) \
  || die "go build of $module failed (see above)"
rm -rf "$OUT_DIR"; mkdir -p "$BIN_DIR"
mv "$TMP_DIR/out/prometheus" "$TMP_DIR/out/promtool" "$BIN_DIR/"
echo "$STAMP" >"$OUT_DIR/BUILT"
ok || die "$BIN_DIR was built but its binaries do not report version $PROMETHEUS_VERSION"
log "built in $((SECONDS - start))s: $BIN_DIR"
echo "$BIN_DIR"
