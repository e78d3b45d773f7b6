#!/usr/bin/env bash
# Show whether the control plane in CLUSTER_DIR (default .cluster/) is up. Exit 0 if the
# apiserver is ready, 1 otherwise.
set -euo pipefail
# shellcheck source=cluster-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-lib.sh"
if ! load_cluster_env; then
  log "no cluster in $CLUSTER_DIR"
  exit 1
fi
for name in etcd kube-apiserver kube-controller-manager kwok kube-scheduler-baseline; do
  if pid="$(pid_of "$name")"; then
    log "$name: running (pid $pid)"
  elif [[ -e "$PID_DIR/$name.pid" ]]; then
    log "$name: NOT running (stale pid file)"
  else
    log "$name: not started"
  fi
done
if http_ok "$SERVER/readyz" "$ADMIN_TOKEN"; then
  log "apiserver $SERVER is ready; export KUBECONFIG=$KUBECONFIG_FILE"
  "$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" get nodes -o wide 2>/dev/null | head -n 20 >&2 || true
  exit 0
fi
log "apiserver $SERVER is not ready"
exit 1
