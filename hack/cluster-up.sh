#!/usr/bin/env bash
# Start a local Kubernetes control plane for gangsched: etcd + kube-apiserver +
# kube-controller-manager (the controllers a real cluster runs for volumes, resource claims,
# garbage collection, namespaces, PDB status, PodGroup protection and the workload
# controllers) + kwok (fake nodes whose pods turn Running when bound and really disappear when
# deleted). No kubelet, no scheduler (gangsched, or `make baseline-scheduler`, is the scheduler).
#
# Everything listens on loopback; state, logs and PID files live in CLUSTER_DIR (default .cluster/).
# Idempotent: a healthy cluster in CLUSTER_DIR is left alone; a leftover of a dead run is cleaned
# up through its own PID files first.
#
# Env (defaults in hack/cluster-lib.sh):
#   CLUSTER_DIR=.cluster  ETCD_PORT=23790 ETCD_PEER_PORT=23800 APISERVER_PORT=26443 KWOK_PORT=26080
#   KCM=1 (0: no kube-controller-manager)  KCM_PORT=<free port>  KCM_CONTROLLERS=<see cluster-lib.sh>
#   NODES=2 NODE_CPU=4 NODE_MEMORY=16Gi NODE_PODS=110 NODE_PREFIX=kwok-node-
#   FEATURE_GATES=GenericWorkload=true,PodGroupPreemptionPolicy=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true
#   RUNTIME_CONFIG=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true   READY_TIMEOUT=180
#   K8S_BIN_DIR=<dir with kube-apiserver, kubectl, etcd, kwok> (default: hack/build-k8s.sh output)
#   KWOK_PARALLELISM=16  (kwok's pod/node stage workers)
#   KWOK_MANAGE=all|annotated  (kwok fakes every node / only nodes annotated kwok.x-k8s.io/node=fake)
set -euo pipefail
# shellcheck source=cluster-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-lib.sh"
guard_cluster_dir

for v in ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KWOK_PORT NODES NODE_PODS; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
done
[[ "$KCM" == 0 || "$KCM" == 1 ]] || die "KCM must be 0 or 1, got '$KCM'"
[[ -z "$KCM_PORT" || "$KCM_PORT" =~ ^[0-9]+$ ]] || die "KCM_PORT must be a number, got '$KCM_PORT'"
command -v openssl >/dev/null 2>&1 || die "openssl is required (apt-get install openssl)"
command -v setsid >/dev/null 2>&1 || die "setsid is required (apt-get install util-linux)"

# ---------------------------------------------------------------- already up? leftover?
if [[ -d "$PID_DIR" ]] && compgen -G "$PID_DIR/*.pid" >/dev/null; then
  (
    load_cluster_env || exit 1
    pid_of etcd >/dev/null && pid_of kube-apiserver >/dev/null && pid_of kwok >/dev/null \
      && { [[ "$KCM" == 0 ]] || pid_of kube-controller-manager >/dev/null; } \
      && http_ok "https://$BIND_ADDRESS:$APISERVER_PORT/readyz" "$ADMIN_TOKEN"
  ) && {
    load_cluster_env
    log "cluster in $CLUSTER_DIR is already up and healthy (apiserver https://$BIND_ADDRESS:$APISERVER_PORT)"
    log "export KUBECONFIG=$KUBECONFIG_FILE"
    exit 0
  }
  log "found a leftover or unhealthy cluster in $CLUSTER_DIR; stopping it via its PID files"
  "$HACK_DIR/cluster-down.sh"
fi

resolve_bin_dir
for s in node-initialize node-heartbeat-with-lease pod-ready pod-complete pod-delete; do
  [[ -s "$KWOK_STAGE_DIR/$s.yaml" ]] || die "kwok stage file $KWOK_STAGE_DIR/$s.yaml missing: rerun hack/build-k8s.sh"
done

if [[ "$KCM" == 1 && -z "$KCM_PORT" ]]; then
  KCM_PORT="$(free_port)" || die "could not find a free port for kube-controller-manager"
fi
PORT_VARS=(ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KWOK_PORT)
[[ "$KCM" == 0 ]] || PORT_VARS+=(KCM_PORT)
for p in "${PORT_VARS[@]}"; do
  if port_in_use "${!p}"; then
    die "port ${!p} ($p) on $BIND_ADDRESS is already in use by another process (not this cluster's PID files in $CLUSTER_DIR). Stop it, or choose another port: $p=<port> $(basename "$0")"
  fi
done

# ---------------------------------------------------------------- fresh state
if [[ -d "$CLUSTER_DIR" ]]; then
  rm -rf "$CLUSTER_DIR/etcd" "$PKI_DIR" "$LOG_DIR" "$PID_DIR" "$CLUSTER_DIR/config" \
    "$KUBECONFIG_FILE" "$CLUSTER_ENV"
fi
mkdir -p "$CLUSTER_DIR" "$PID_DIR" "$LOG_DIR" "$PKI_DIR" "$CLUSTER_DIR/config"
chmod 700 "$CLUSTER_DIR" "$PKI_DIR"
touch "$STATE_MARKER"

log "generating CA, serving certificate, service-account key and admin token"
(
  cd "$PKI_DIR"
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout ca.key -out ca.crt \
    -subj "/CN=gangsched-test-ca" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -addext "subjectKeyIdentifier=hash" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout apiserver.key -out apiserver.csr \
    -subj "/CN=kube-apiserver" 2>/dev/null
  cat >apiserver.ext <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid,issuer
subjectAltName=IP:127.0.0.1,IP:$BIND_ADDRESS,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EOF
  openssl x509 -req -sha256 -days 3650 -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
    -extfile apiserver.ext -out apiserver.crt 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
) || die "openssl failed to generate the certificates in $PKI_DIR"
ADMIN_TOKEN="$(openssl rand -hex 24)"
echo "$ADMIN_TOKEN,admin,admin,system:masters" >"$PKI_DIR/tokens.csv"
# kube-controller-manager authenticates as the user the bootstrap RBAC policy grants its role
# (system:kube-controller-manager); each controller then uses its own service account in
# kube-system (--use-service-account-credentials, tokens from the TokenRequest API, signed
# with the same sa.key the apiserver verifies), as kubeadm clusters run it.
KCM_TOKEN="$(openssl rand -hex 24)"
echo "$KCM_TOKEN,system:kube-controller-manager,kube-controller-manager" >>"$PKI_DIR/tokens.csv"
chmod 600 "$PKI_DIR"/*

SERVER="https://$BIND_ADDRESS:$APISERVER_PORT"
CA_DATA="$(base64 -w0 <"$PKI_DIR/ca.crt")"
cat >"$KUBECONFIG_FILE" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gangsched
  cluster:
    server: $SERVER
    certificate-authority-data: $CA_DATA
users:
- name: admin
  user:
    token: $ADMIN_TOKEN
contexts:
- name: gangsched
  context:
    cluster: gangsched
    user: admin
    namespace: default
current-context: gangsched
EOF
chmod 600 "$KUBECONFIG_FILE"
KCM_KUBECONFIG="$CLUSTER_DIR/config/kube-controller-manager.kubeconfig"
sed -e 's/^- name: admin$/- name: kube-controller-manager/' \
  -e 's/^    user: admin$/    user: kube-controller-manager/' \
  -e "s/^    token: .*/    token: $KCM_TOKEN/" "$KUBECONFIG_FILE" >"$KCM_KUBECONFIG"
chmod 600 "$KCM_KUBECONFIG"

cat >"$CLUSTER_ENV" <<EOF
# written by hack/cluster-up.sh; read by cluster-down.sh, baseline-scheduler.sh and tests
CLUSTER_DIR='$CLUSTER_DIR'
K8S_BIN_DIR='$K8S_BIN_DIR'
BIND_ADDRESS='$BIND_ADDRESS'
ETCD_PORT='$ETCD_PORT'
ETCD_PEER_PORT='$ETCD_PEER_PORT'
APISERVER_PORT='$APISERVER_PORT'
KWOK_PORT='$KWOK_PORT'
KCM='$KCM'
KCM_PORT='$KCM_PORT'
KCM_CONTROLLERS='$KCM_CONTROLLERS'
SERVER='$SERVER'
ADMIN_TOKEN='$ADMIN_TOKEN'
KUBECONFIG_FILE='$KUBECONFIG_FILE'
FEATURE_GATES='$FEATURE_GATES'
RUNTIME_CONFIG='$RUNTIME_CONFIG'
NODES='$NODES'
NODE_PREFIX='$NODE_PREFIX'
EOF

KUBECTL=("$K8S_BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE")

# On failure stop what we started (by PID file) but keep the logs for diagnosis.
on_exit() {
  local rc=$?
  if ((rc != 0)); then
    log "cluster-up failed; stopping the components it started (logs kept in $LOG_DIR)"
    KEEP_STATE=1 "$HACK_DIR/cluster-down.sh" || true
  fi
}
trap on_exit EXIT

# ---------------------------------------------------------------- etcd
# etcd maps every ETCD_* environment variable to a flag: drop ours (and any stray ones).
mapfile -t ETCD_ENV_UNSET < <(compgen -e | grep '^ETCD_' | sed 's/^/-u/' || true)
start_daemon etcd env "${ETCD_ENV_UNSET[@]}" "$K8S_BIN_DIR/etcd" \
  --name gangsched \
  --data-dir "$CLUSTER_DIR/etcd" \
  --listen-client-urls "http://$BIND_ADDRESS:$ETCD_PORT" \
  --advertise-client-urls "http://$BIND_ADDRESS:$ETCD_PORT" \
  --listen-peer-urls "http://$BIND_ADDRESS:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://$BIND_ADDRESS:$ETCD_PEER_PORT" \
  --initial-cluster "gangsched=http://$BIND_ADDRESS:$ETCD_PEER_PORT" \
  --initial-cluster-state new \
  --unsafe-no-fsync \
  --quota-backend-bytes 8589934592 \
  --auto-compaction-mode periodic --auto-compaction-retention 5m \
  --log-level warn
wait_for etcd "etcd health on port $ETCD_PORT" http_ok "http://$BIND_ADDRESS:$ETCD_PORT/health"
log "etcd is healthy"

# ---------------------------------------------------------------- kube-apiserver
# ServiceAccount admission would refuse pods until the serviceaccount controller has created
# their namespace's "default" account (tests create a namespace and its pods at once; kwok
# pods need no token). TaintNodesByCondition puts not-ready taints on new nodes that only
# the node-lifecycle controller removes (not run: see hack/k8s/README.md). PodGroupProtection
# adds a finalizer that only kube-controller-manager's podgroup-protection controller removes.
DISABLED_ADMISSION=ServiceAccount,TaintNodesByCondition
[[ "$KCM" == 1 ]] || DISABLED_ADMISSION+=,PodGroupProtection
start_daemon kube-apiserver "$K8S_BIN_DIR/kube-apiserver" \
  --etcd-servers "http://$BIND_ADDRESS:$ETCD_PORT" \
  --bind-address "$BIND_ADDRESS" \
  --advertise-address "$BIND_ADDRESS" \
  --endpoint-reconciler-type none \
  --secure-port "$APISERVER_PORT" \
  --cert-dir "$PKI_DIR" \
  --tls-cert-file "$PKI_DIR/apiserver.crt" \
  --tls-private-key-file "$PKI_DIR/apiserver.key" \
  --client-ca-file "$PKI_DIR/ca.crt" \
  --token-auth-file "$PKI_DIR/tokens.csv" \
  --authorization-mode RBAC \
  --service-account-issuer "https://kubernetes.default.svc.cluster.local" \
  --service-account-key-file "$PKI_DIR/sa.pub" \
  --service-account-signing-key-file "$PKI_DIR/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 \
  --disable-admission-plugins "$DISABLED_ADMISSION" \
  --feature-gates "$FEATURE_GATES" \
  --runtime-config "$RUNTIME_CONFIG" \
  --max-requests-inflight 3000 \
  --max-mutating-requests-inflight 1000 \
  --profiling=false \
  --v 1
wait_for kube-apiserver "kube-apiserver /readyz at $SERVER" http_ok "$SERVER/readyz" "$ADMIN_TOKEN"
log "kube-apiserver is ready at $SERVER"
"${KUBECTL[@]}" get namespace default >/dev/null 2>&1 || "${KUBECTL[@]}" create namespace default >/dev/null \
  || die "could not create the default namespace"

# ---------------------------------------------------------------- kube-controller-manager
if [[ "$KCM" == 1 ]]; then
  start_daemon kube-controller-manager "$K8S_BIN_DIR/kube-controller-manager" \
    --kubeconfig "$KCM_KUBECONFIG" \
    --authentication-kubeconfig "$KCM_KUBECONFIG" \
    --authorization-kubeconfig "$KCM_KUBECONFIG" \
    --authentication-skip-lookup=true \
    --bind-address "$BIND_ADDRESS" \
    --secure-port "$KCM_PORT" \
    --cert-dir "$CLUSTER_DIR/config/kcm-serving" \
    --controllers "$KCM_CONTROLLERS" \
    --use-service-account-credentials=true \
    --leader-elect=false \
    --feature-gates "$FEATURE_GATES" \
    --kube-api-qps 200 \
    --kube-api-burst 400 \
    --profiling=false \
    --v 1
  wait_for kube-controller-manager "kube-controller-manager /healthz on port $KCM_PORT" \
    http_ok "https://$BIND_ADDRESS:$KCM_PORT/healthz"
  log "kube-controller-manager is running (controllers: $KCM_CONTROLLERS)"
fi

# ---------------------------------------------------------------- kwok
KWOK_PARALLELISM="${KWOK_PARALLELISM:-16}"
KWOK_CONFIG="$CLUSTER_DIR/config/kwok.yaml"
{
  cat <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: $KWOK_PARALLELISM
  nodePlayStageParallelism: $KWOK_PARALLELISM
  nodeLeaseParallelism: $KWOK_PARALLELISM
  podsOnNodeSyncParallelism: 4
EOF
  for s in node-initialize node-heartbeat-with-lease pod-ready pod-complete pod-delete; do
    echo "---"
    if [[ "$s" == pod-complete ]]; then
      # kwok's "fast" pod-complete finishes a Job's pod the moment it runs. A pod annotated
      # pod-complete.stage.kwok.x-k8s.io/delay (a Go duration, e.g. "1h"; the annotation of
      # kwok's own "general" stage) runs that long first, so a test can keep a Job's pods
      # holding their room (Kubeflow Trainer's TrainJobs in tests/e2e/test_clients_trainer.py).
      # Without the annotation the delay is 0, as before.
      awk '{ print } /^spec:$/ && !done {
        print "  delay:"
        print "    durationMilliseconds: 0"
        print "    durationFrom:"
        print "      expressionFrom: '"'"'.metadata.annotations[\"pod-complete.stage.kwok.x-k8s.io/delay\"]'"'"'"
        done = 1
      }' "$KWOK_STAGE_DIR/$s.yaml"
    else
      cat "$KWOK_STAGE_DIR/$s.yaml"
    fi
  done
} >"$KWOK_CONFIG"
# KWOK_MANAGE=all (default): kwok manages every node, so nodes from plain manifests (e.g. the
# scenarios' nodes) work too. KWOK_MANAGE=annotated: only nodes annotated kwok.x-k8s.io/node=fake.
case "${KWOK_MANAGE:-all}" in
  all) KWOK_MANAGE_ARGS=(--manage-all-nodes=true) ;;
  annotated) KWOK_MANAGE_ARGS=(--manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake) ;;
  *) die "KWOK_MANAGE must be 'all' or 'annotated', got '${KWOK_MANAGE}'" ;;
esac
start_daemon kwok "$K8S_BIN_DIR/kwok" \
  --kubeconfig "$KUBECONFIG_FILE" \
  --config "$KWOK_CONFIG" \
  "${KWOK_MANAGE_ARGS[@]}" \
  --node-lease-duration-seconds 40 \
  --cidr 10.244.0.1/16 \
  --node-ip 10.0.0.1 \
  --server-address "$BIND_ADDRESS:$KWOK_PORT"
wait_for kwok "kwok healthz on port $KWOK_PORT" http_ok "http://$BIND_ADDRESS:$KWOK_PORT/healthz"
log "kwok is running"

# ---------------------------------------------------------------- fake nodes
if ((NODES > 0)); then
  NODES_FILE="$CLUSTER_DIR/config/nodes.yaml"
  {
    echo "apiVersion: v1"
    echo "kind: List"
    echo "items:"
    for ((i = 0; i < NODES; i++)); do
      n="${NODE_PREFIX}${i}"
      cat <<EOF
- apiVersion: v1
  kind: Node
  metadata:
    name: $n
    annotations:
      kwok.x-k8s.io/node: fake
      node.alpha.kubernetes.io/ttl: "0"
    labels:
      type: kwok
      kubernetes.io/hostname: $n
      kubernetes.io/os: linux
      kubernetes.io/arch: amd64
      kubernetes.io/role: agent
  status:
    capacity: {cpu: "$NODE_CPU", memory: "$NODE_MEMORY", pods: "$NODE_PODS"}
    allocatable: {cpu: "$NODE_CPU", memory: "$NODE_MEMORY", pods: "$NODE_PODS"}
EOF
    done
  } >"$NODES_FILE"
  "${KUBECTL[@]}" create -f "$NODES_FILE" >/dev/null || die "creating $NODES fake nodes failed"
  log "created $NODES nodes ${NODE_PREFIX}0..$((NODES - 1)) (cpu=$NODE_CPU memory=$NODE_MEMORY pods=$NODE_PODS); waiting for Ready"
  nodes_ready() {
    local ready
    ready="$("${KUBECTL[@]}" get nodes -l type=kwok \
      -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null \
      | grep -c '^True$')" || true
    ((ready >= NODES))
  }
  wait_for kwok "$NODES nodes to become Ready" nodes_ready
fi

log "cluster is up: $SERVER ($NODES kwok nodes), state in $CLUSTER_DIR"
log "  export KUBECONFIG=$KUBECONFIG_FILE"
log "  export PATH=$K8S_BIN_DIR:\$PATH"
echo "$KUBECONFIG_FILE"
