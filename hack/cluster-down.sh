#!/usr/bin/env bash
# Stop the control plane started by hack/cluster-up.sh in CLUSTER_DIR (default .cluster/) and
# remove its state. Stops exactly the processes recorded in CLUSTER_DIR/pids/*.pid (checking each
# PID still runs that cluster's binary), never anything by name. Safe to run when nothing is up.
#
# Env: CLUSTER_DIR (default .cluster)   KEEP_STATE=1 keeps etcd data, logs and certificates.
set -euo pipefail
# shellcheck source=cluster-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-lib.sh"
guard_cluster_dir

if [[ ! -d "$CLUSTER_DIR" ]]; then
  log "nothing to do: $CLUSTER_DIR does not exist"
  exit 0
fi

# Stop in reverse dependency order; the baseline scheduler and kwok are clients of the apiserver.
for name in kube-scheduler-baseline kwok kube-controller-manager kube-apiserver etcd; do
  stop_daemon "$name"
done
# Anything else somebody registered in our PID dir (e.g. an operator started by a test).
if [[ -d "$PID_DIR" ]]; then
  for f in "$PID_DIR"/*.pid; do
    [[ -e "$f" ]] || continue
    stop_daemon "$(basename "$f" .pid)"
  done
fi

if [[ "${KEEP_STATE:-0}" == 1 ]]; then
  log "stopped; state kept in $CLUSTER_DIR (KEEP_STATE=1)"
  exit 0
fi
rm -rf "$CLUSTER_DIR/etcd" "$PKI_DIR" "$LOG_DIR" "$PID_DIR" "$CLUSTER_DIR/config" \
  "$KUBECONFIG_FILE" "$CLUSTER_ENV" "$STATE_MARKER"
rmdir "$CLUSTER_DIR" 2>/dev/null || true
log "cluster in $CLUSTER_DIR stopped and its state removed"
