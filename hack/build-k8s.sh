#!/usr/bin/env bash
# Build the control-plane binaries gangsched's e2e tests, demo and benchmarks run against:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (k8s.io/kubernetes @ K8S_VERSION)
#   etcd (go.etcd.io/etcd/server/v3 @ ETCD_VERSION), kwok (sigs.k8s.io/kwok @ KWOK_VERSION)
# from Go modules (no Docker, no binary downloads). Versions come from hack/k8s/versions.env.
#
# Output: ${GANGSCHED_K8S_CACHE:-$HOME/.cache/gangsched}/k8s-<K8S>-etcd-<ETCD>-kwok-<KWOK>/bin
#         (plus ../kwok-stages/ with the kwok stage files cluster-up.sh passes to kwok -c).
# Idempotent: does nothing when every binary exists and answers --version.
# The LAST line printed on stdout is always the bin dir (progress goes to stderr).
#
# Env: GANGSCHED_K8S_CACHE  cache root (default $HOME/.cache/gangsched)
#      GO                   go binary (default: go on PATH; needs Go >= 1.26)
#      BUILD_K8S_FORCE=1    rebuild even if the binaries look fine
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MOD_DIR="$HACK_DIR/k8s"
# shellcheck source=k8s/versions.env
source "$MOD_DIR/versions.env"
GO="${GO:-go}"
CACHE_ROOT="${GANGSCHED_K8S_CACHE:-${HOME:?HOME is not set}/.cache/gangsched}"
OUT_DIR="$CACHE_ROOT/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}"
BIN_DIR="$OUT_DIR/bin"
STAGE_DIR="$OUT_DIR/kwok-stages"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)
# kwok stage files (paths inside the sigs.k8s.io/kwok module).
KWOK_STAGES=(
  kustomize/stage/node/fast/node-initialize.yaml
  kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  kustomize/stage/pod/fast/pod-ready.yaml
  kustomize/stage/pod/fast/pod-complete.yaml
  kustomize/stage/pod/fast/pod-delete.yaml
)

log() { echo "build-k8s: $*" >&2; }
die() { echo "build-k8s: ERROR: $*" >&2; exit 1; }

version_of() { # prints the version line of one built binary, fails if it does not run
  local b="$1" path="$BIN_DIR/$1"
  [[ -x "$path" ]] || return 1
  local out
  case "$b" in
    kubectl) out="$("$path" version --client 2>/dev/null)" || return 1 ;;
    *) out="$("$path" --version 2>/dev/null)" || return 1 ;;
  esac
  echo "${out%%$'\n'*}" # first line (no `| head`: SIGPIPE + pipefail would make this flaky)
}

all_ok() {
  local b v
  for b in "${BINARIES[@]}"; do
    v="$(version_of "$b")" || return 1
    [[ -n "$v" ]] || return 1
  done
  local s
  for s in "${KWOK_STAGES[@]}"; do [[ -s "$STAGE_DIR/$(basename "$s")" ]] || return 1; done
  # the k8s binaries must report the pinned version (catches a stale cache dir)
  [[ "$(version_of kube-apiserver)" == *"$K8S_VERSION"* ]] || return 1
  [[ "$(version_of etcd)" == *"${ETCD_VERSION#v}"* ]] || return 1
  return 0
}

if [[ "${BUILD_K8S_FORCE:-0}" != 1 ]] && all_ok; then
  log "up to date: $BIN_DIR"
  echo "$BIN_DIR"
  exit 0
fi

command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found on PATH: install Go >= 1.26 and put it on PATH (or set GO=/path/to/go)"
export GOTOOLCHAIN=local   # never try to download another toolchain
GOVER="$("$GO" env GOVERSION)" || die "'$GO env GOVERSION' failed"
[[ "$GOVER" =~ ^go1\.([0-9]+) ]] || die "cannot parse Go version '$GOVER'"
(( BASH_REMATCH[1] >= 26 )) || die "Go $GOVER is too old: k8s.io/kubernetes ${K8S_VERSION} needs Go >= 1.26"

"$MOD_DIR/gen-gomod.sh" --check || die "hack/k8s/go.mod does not match hack/k8s/versions.env (run hack/k8s/gen-gomod.sh)"

mkdir -p "$CACHE_ROOT"
# Serialise concurrent builds (a developer's `make` and a pytest session) on one lock file.
exec 9>"$CACHE_ROOT/.build-k8s.lock"
if command -v flock >/dev/null 2>&1; then
  flock -w 3600 9 || die "timed out waiting for another build-k8s.sh (lock $CACHE_ROOT/.build-k8s.lock)"
  if [[ "${BUILD_K8S_FORCE:-0}" != 1 ]] && all_ok; then
    log "built by a concurrent run: $BIN_DIR"; echo "$BIN_DIR"; exit 0
  fi
fi

TMP_DIR="$(mktemp -d "$CACHE_ROOT/.build.XXXXXX")"
trap 'rm -rf "$TMP_DIR"' EXIT
mkdir -p "$TMP_DIR/bin" "$TMP_DIR/kwok-stages"

K8S_MINOR="${K8S_VERSION#v1.}"; K8S_MINOR="${K8S_MINOR%%.*}"
BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
K8S_LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  K8S_LDFLAGS+=" -X ${pkg}.gitVersion=${K8S_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${K8S_MINOR}"
  K8S_LDFLAGS+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${BUILD_DATE}"
done
PARALLEL="${BUILD_K8S_PARALLEL:-2}"
GOFLAGS_BUILD=(-p "$PARALLEL" -trimpath)

start=$SECONDS
log "building kube-apiserver kube-controller-manager kube-scheduler kubectl ${K8S_VERSION} (go build -p ${PARALLEL}; a cold build takes a while on 2 cores)..."
(cd "$MOD_DIR" && "$GO" build "${GOFLAGS_BUILD[@]}" -mod=readonly -ldflags "$K8S_LDFLAGS" -o "$TMP_DIR/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl) \
  || die "go build of k8s.io/kubernetes ${K8S_VERSION} commands failed (see above)"
log "  done after $((SECONDS - start))s; building etcd ${ETCD_VERSION}..."
(cd "$MOD_DIR" && "$GO" build "${GOFLAGS_BUILD[@]}" -mod=readonly -ldflags "-s -w" -o "$TMP_DIR/bin/etcd" go.etcd.io/etcd/server/v3) \
  || die "go build of go.etcd.io/etcd/server/v3 ${ETCD_VERSION} failed (see above)"
log "  done after $((SECONDS - start))s; building kwok ${KWOK_VERSION}..."
# kwok has no replace directives, so `go install pkg@version` works and uses kwok's own go.mod.
(cd "$TMP_DIR" && GOBIN="$TMP_DIR/bin" GOFLAGS='' "$GO" install "${GOFLAGS_BUILD[@]}" \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}") \
  || die "go install sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION} failed (see above)"
KWOK_DIR="$(cd "$TMP_DIR" && GOFLAGS='' "$GO" mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')" || true
[[ -n "$KWOK_DIR" && -d "$KWOK_DIR" ]] || die "cannot locate sigs.k8s.io/kwok@${KWOK_VERSION} in the module cache"
for s in "${KWOK_STAGES[@]}"; do
  cp "$KWOK_DIR/$s" "$TMP_DIR/kwok-stages/" || die "kwok stage file $s missing in $KWOK_DIR"
done
log "all built in $((SECONDS - start))s"

for b in "${BINARIES[@]}"; do [[ -x "$TMP_DIR/bin/$b" ]] || die "expected binary $b was not produced"; done
mkdir -p "$BIN_DIR" "$STAGE_DIR"
chmod u+w "$TMP_DIR"/bin/* "$TMP_DIR"/kwok-stages/*
for b in "${BINARIES[@]}"; do mv -f "$TMP_DIR/bin/$b" "$BIN_DIR/$b"; done
cp -f "$TMP_DIR"/kwok-stages/* "$STAGE_DIR/"

for b in "${BINARIES[@]}"; do
  v="$(version_of "$b")" || die "$BIN_DIR/$b was built but does not run '--version'"
  log "  $b: $v"
done
all_ok || die "binaries in $BIN_DIR do not report the pinned versions (K8S ${K8S_VERSION}, etcd ${ETCD_VERSION})"
echo "$BIN_DIR"
