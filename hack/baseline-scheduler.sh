#!/usr/bin/env bash
# Run the upstream kube-scheduler (same version as the apiserver) against the cluster started by
# hack/cluster-up.sh, as the baseline gangsched is compared with. It only schedules pods with
# `spec.schedulerName: kube-scheduler-baseline` (its single KubeSchedulerConfiguration profile),
# with gang scheduling, scheduling.k8s.io PodGroups and workload-aware preemption enabled
# (feature gate GenericWorkload, plus PodGroupPreemptionPolicy) and client QPS/burst raised.
#
# Usage: hack/baseline-scheduler.sh [up|down|status]   (default: up)
# Env:   CLUSTER_DIR (default .cluster)  SCHEDULER_PORT=26259  SCHEDULER_NAME=kube-scheduler-baseline
#        SCHEDULER_QPS=5000 SCHEDULER_BURST=5000 SCHEDULER_VERBOSITY=1
#        SCHEDULER_FEATURE_GATES (default: the gates the cluster was started with)
# Its /healthz and /metrics are open (no auth) on https://127.0.0.1:$SCHEDULER_PORT.
set -euo pipefail
# shellcheck source=cluster-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-lib.sh"
guard_cluster_dir
NAME=kube-scheduler-baseline
ACTION="${1:-up}"

case "$ACTION" in
  down)
    stop_daemon "$NAME"
    exit 0
    ;;
  status)
    if pid="$(pid_of "$NAME")"; then log "running (pid $pid)"; exit 0; fi
    log "not running"; exit 1
    ;;
  up) ;;
  *) die "usage: $0 [up|down|status]" ;;
esac

SCHEDULER_PORT_REQUESTED="$SCHEDULER_PORT"
load_cluster_env || die "no cluster in $CLUSTER_DIR (missing $CLUSTER_ENV): run 'make cluster-up' first"
SCHEDULER_PORT="$SCHEDULER_PORT_REQUESTED"
pid_of kube-apiserver >/dev/null || die "the kube-apiserver of $CLUSTER_DIR is not running: run 'make cluster-up'"
[[ -x "$K8S_BIN_DIR/kube-scheduler" ]] || die "$K8S_BIN_DIR/kube-scheduler missing: run 'make k8s-binaries'"

if pid="$(pid_of "$NAME")"; then
  log "already running (pid $pid, log $LOG_DIR/$NAME.log)"
  exit 0
fi
rm -f "$PID_DIR/$NAME.pid"
if port_in_use "$SCHEDULER_PORT"; then
  die "port $SCHEDULER_PORT (SCHEDULER_PORT) is already in use; choose another: SCHEDULER_PORT=<port> $0"
fi

SCHEDULER_NAME="${SCHEDULER_NAME:-kube-scheduler-baseline}"
CONFIG="$CLUSTER_DIR/config/kube-scheduler-baseline.yaml"
mkdir -p "$CLUSTER_DIR/config"
cat >"$CONFIG" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $KUBECONFIG_FILE
  qps: ${SCHEDULER_QPS:-5000}
  burst: ${SCHEDULER_BURST:-5000}
leaderElection:
  leaderElect: false
profiles:
- schedulerName: $SCHEDULER_NAME
EOF

start_daemon "$NAME" "$K8S_BIN_DIR/kube-scheduler" \
  --config "$CONFIG" \
  --authorization-always-allow-paths /healthz,/readyz,/livez,/metrics \
  --bind-address "$BIND_ADDRESS" \
  --secure-port "$SCHEDULER_PORT" \
  --feature-gates "${SCHEDULER_FEATURE_GATES:-$FEATURE_GATES}" \
  --v "${SCHEDULER_VERBOSITY:-1}"
wait_for "$NAME" "kube-scheduler /healthz on port $SCHEDULER_PORT" \
  http_ok "https://$BIND_ADDRESS:$SCHEDULER_PORT/healthz"
log "kube-scheduler is scheduling pods with schedulerName=$SCHEDULER_NAME (log $LOG_DIR/$NAME.log)"
