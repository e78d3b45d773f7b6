#!/usr/bin/env bash
# The live demo: the seed walkthrough on a real kube-apiserver with kwok nodes.
# Brings up a private control plane (building it the first time), installs gangsched's CRD and
# RBAC, runs `gangsched run` as its ServiceAccount, replays the walkthrough step by step, and
# tears everything down (also on failure or Ctrl-C).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
export CLUSTER_DIR="${DEMO_CLUSTER_DIR:-$ROOT/.cluster-demo}"
export APISERVER_PORT="${DEMO_APISERVER_PORT:-27443}" ETCD_PORT="${DEMO_ETCD_PORT:-27379}"
export ETCD_PEER_PORT="${DEMO_ETCD_PEER_PORT:-27380}" KWOK_PORT="${DEMO_KWOK_PORT:-27080}"
export NODES=0
PY="${PYTHON:-$ROOT/.venv/bin/python}"
GANGSCHED_PID=""

say() { printf '\n\033[1m### %s\033[0m\n' "$*"; }
teardown() {
  local code=$?
  if [[ -n "$GANGSCHED_PID" ]] && kill -0 "$GANGSCHED_PID" 2>/dev/null; then
    kill -TERM "$GANGSCHED_PID" 2>/dev/null || true
    wait "$GANGSCHED_PID" 2>/dev/null || true
  fi
  if ((code != 0)) && [[ -f "$CLUSTER_DIR/gangsched.log" ]]; then
    echo "--- last lines of the gangsched log ---" >&2
    tail -n 30 "$CLUSTER_DIR/gangsched.log" >&2 || true
  fi
  hack/cluster-down.sh >/dev/null 2>&1 || true
  exit "$code"
}
trap teardown EXIT INT TERM

BIN_DIR=$(hack/build-k8s.sh | tail -n1)
export PATH="$BIN_DIR:$PATH"
say "Starting etcd, kube-apiserver and kwok on loopback (state in $CLUSTER_DIR)"
K8S_BIN_DIR="$BIN_DIR" hack/cluster-up.sh >/dev/null
export KUBECONFIG="$CLUSTER_DIR/kubeconfig"

say "Installing the PodGroup CRD and gangsched's namespace, ServiceAccount and ClusterRole"
kubectl apply -f crds/ >/dev/null
kubectl wait --for condition=Established --timeout=60s crd --all >/dev/null
kubectl apply -f manifests/ >/dev/null
KUBECTL=kubectl hack/sa-kubeconfig.sh "$KUBECONFIG" "$CLUSTER_DIR/gangsched.kubeconfig" 2h

cat >"$CLUSTER_DIR/gangsched.yaml" <<CONFIG
schedulerName: gangsched
metricsAddress: 127.0.0.1:${DEMO_METRICS_PORT:-27259}
healthAddress: 127.0.0.1:${DEMO_HEALTH_PORT:-27258}
logFormat: console
leaderElection: {enabled: true, leaseNamespace: gangsched-system}
CONFIG
say "Starting gangsched (as system:serviceaccount:gangsched-system:gangsched)"
"$PY" -m gangsched.cli run --kubeconfig "$CLUSTER_DIR/gangsched.kubeconfig" \
  --config "$CLUSTER_DIR/gangsched.yaml" >"$CLUSTER_DIR/gangsched.log" 2>&1 &
GANGSCHED_PID=$!

say "Step 1: two 4-CPU nodes and two priority classes"
kubectl apply -f examples/demo/01-cluster.yaml
kubectl wait --for condition=Ready --timeout=60s node/cn-beijing.1 node/cn-beijing.2 >/dev/null
kubectl get nodes -o wide

say "Step 2: fill both nodes with low-priority pods (4 CPU each)"
kubectl apply -f examples/demo/02-low-priority-pods.yaml
kubectl wait --for condition=Ready --timeout=60s pod/lp-pod-1 pod/lp-pod-2 >/dev/null
kubectl get pods -o wide

say "Step 3: submit a 2-pod high-priority gang (3 CPU per pod) that cannot fit"
# A watch on the pods shows the preemption as it happens: the victims marked DisruptionTarget
# and terminating, the members nominated, then bound and running (devtools/demo_timeline.py).
# On kwok all of it takes about a second, so no `kubectl wait` on any one step could see them
# all; the timeline ends when both members run and fails if a step was missing. The 120 s is
# a guard for a broken scheduler, not a wait: a working run ends as soon as the gang runs.
rm -f "$CLUSTER_DIR/watch.ready"
"$PY" -m devtools.demo_timeline --members hp-worker-1,hp-worker-2 --victims lp-pod-1,lp-pod-2 \
  --ready-file "$CLUSTER_DIR/watch.ready" -- \
  timeout 120 kubectl get pods --watch --output-watch-events -o json 2>"$CLUSTER_DIR/watch.err" &
TIMELINE_PID=$!
until [[ -e "$CLUSTER_DIR/watch.ready" ]]; do
  kill -0 "$TIMELINE_PID" 2>/dev/null || { cat "$CLUSTER_DIR/watch.err" >&2; exit 1; }
  sleep 0.1
done
kubectl apply -f examples/demo/03-high-priority-job.yaml
wait "$TIMELINE_PID"

say "The preemption's events, naming the gang"
kubectl get events.events.k8s.io --field-selector reason=Preempted \
  -o custom-columns=VICTIM:.regarding.name,REASON:.reason,RELATED:.related.kind,NAME:.related.name

say "Step 4: the gang runs, one member per node"
kubectl wait --for=jsonpath='{.status.phase}'=Running --timeout=30s podgroup.scheduling.sigs.k8s.io/hp-training-job >/dev/null
kubectl get pods -o wide
kubectl get podgroups.scheduling.sigs.k8s.io hp-training-job

nodes=$(kubectl get pods hp-worker-1 hp-worker-2 -o jsonpath='{.items[*].spec.nodeName}')
if [[ "$(tr ' ' '\n' <<<"$nodes" | sort -u | wc -l)" -ne 2 ]]; then
  echo "demo failed: the gang's members are not on two different nodes ($nodes)" >&2
  exit 1
fi
say "Done: the gang runs whole, one member per node; tearing down"
