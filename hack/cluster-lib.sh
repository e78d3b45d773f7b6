# shellcheck shell=bash disable=SC2034  # variables used by the scripts that source this file
# Shared settings and helpers for hack/cluster-up.sh, cluster-down.sh and baseline-scheduler.sh.
# Sourced, not executed. Every setting can be overridden from the environment, so a test session
# can run its own cluster (own CLUSTER_DIR and ports) next to a developer's `make cluster-up`.

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HACK_DIR/.." && pwd)"

CLUSTER_DIR="${CLUSTER_DIR:-$REPO_ROOT/.cluster}"
BIND_ADDRESS="${BIND_ADDRESS:-127.0.0.1}"      # loopback only
ETCD_PORT="${ETCD_PORT:-23790}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-23800}"
APISERVER_PORT="${APISERVER_PORT:-26443}"
KWOK_PORT="${KWOK_PORT:-26080}"                # kwok's own healthz/metrics server
SCHEDULER_PORT="${SCHEDULER_PORT:-26259}"      # baseline kube-scheduler's secure port (healthz)
KCM_PORT="${KCM_PORT:-}"                       # kube-controller-manager's secure port (healthz); empty: a free one

# kube-controller-manager: KCM=0 starts none. The controllers a real cluster runs for what
# gangsched relies on, and that work with kwok's fake nodes (hack/k8s/README.md says why each,
# and why not node-lifecycle / taint-eviction / pod-garbage-collector).
KCM="${KCM:-1}"
KCM_CONTROLLERS="${KCM_CONTROLLERS:-persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller,ephemeral-volume-controller,resourceclaim-controller,garbage-collector-controller,namespace-controller,serviceaccount-controller,disruption-controller,podgroup-protection-controller,job-controller,replicaset-controller,deployment-controller,statefulset-controller}"

NODES="${NODES:-2}"
NODE_CPU="${NODE_CPU:-4}"
NODE_MEMORY="${NODE_MEMORY:-16Gi}"
NODE_PODS="${NODE_PODS:-110}"
NODE_PREFIX="${NODE_PREFIX:-kwok-node-}"

# scheduling.k8s.io PodGroup/Workload (v1beta1 in 1.37) + gang scheduling + workload-aware
# preemption are all behind GenericWorkload; PodGroupPreemptionPolicy adds PodGroup.spec.preemptionPolicy;
# TopologyAwareWorkloadScheduling adds PodGroup.spec.schedulingConstraints; CompositePodGroup (needs
# the other two) serves compositepodgroups and PodGroup.spec.parentCompositePodGroupName. Both
# scheduling.k8s.io versions are off by default: v1beta1 serves PodGroup and Workload (the storage
# version), v1alpha3 additionally CompositePodGroup.
FEATURE_GATES="${FEATURE_GATES:-GenericWorkload=true,PodGroupPreemptionPolicy=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true}"
RUNTIME_CONFIG="${RUNTIME_CONFIG:-scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true}"

READY_TIMEOUT="${READY_TIMEOUT:-180}"           # seconds to wait for each component

STATE_MARKER="$CLUSTER_DIR/.gangsched-cluster"
PID_DIR="$CLUSTER_DIR/pids"
LOG_DIR="$CLUSTER_DIR/logs"
PKI_DIR="$CLUSTER_DIR/pki"
KUBECONFIG_FILE="$CLUSTER_DIR/kubeconfig"
CLUSTER_ENV="$CLUSTER_DIR/cluster.env"

log() { echo "[$(basename "$0" .sh)] $*" >&2; }
die() { echo "[$(basename "$0" .sh)] ERROR: $*" >&2; exit 1; }

guard_cluster_dir() {
  case "$CLUSTER_DIR" in
    ""|"/"|"$HOME"|"$REPO_ROOT") die "refusing to use CLUSTER_DIR='$CLUSTER_DIR'" ;;
  esac
}

# is_ours NAME PID: true if PID is alive and is the NAME process this cluster dir started
# (its command line names the binary and mentions CLUSTER_DIR). Guards against recycled PIDs.
is_ours() {
  local name="$1" pid="$2" cmd
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmd" == *"$CLUSTER_DIR"* ]] || return 1
  case "$name" in
    kube-scheduler-baseline) [[ "$cmd" == *kube-scheduler* ]] ;;
    etcd | kube-apiserver | kube-controller-manager | kwok) [[ "$cmd" == *"$name"* ]] ;;
    *) return 0 ;; # other daemons registered in PID_DIR: CLUSTER_DIR in the command line suffices
  esac
}

pid_of() { # pid_of NAME: prints the recorded PID if that process is ours and alive
  local f="$PID_DIR/$1.pid" pid
  [[ -s "$f" ]] || return 1
  pid="$(<"$f")"
  is_ours "$1" "$pid" || return 1
  echo "$pid"
}

# start_daemon NAME CMD...: run CMD detached (own session, stdin /dev/null, output to the log),
# record its PID. setsid without --fork execs in place, so $! is the daemon's PID.
start_daemon() {
  local name="$1"; shift
  mkdir -p "$PID_DIR" "$LOG_DIR"
  setsid "$@" </dev/null >"$LOG_DIR/$name.log" 2>&1 &
  echo "$!" >"$PID_DIR/$name.pid"
  log "started $name (pid $!, log $LOG_DIR/$name.log)"
}

# stop_daemon NAME: SIGTERM the recorded process (only if it is ours), SIGKILL after 20s.
stop_daemon() {
  local name="$1" f="$PID_DIR/$1.pid" pid i
  [[ -e "$f" ]] || return 0
  pid="$(<"$f")"
  if is_ours "$name" "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 200; i++)); do
      is_ours "$name" "$pid" || break
      sleep 0.1
    done
    if is_ours "$name" "$pid"; then
      log "$name (pid $pid) ignored SIGTERM for 20s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
    fi
    log "stopped $name (pid $pid)"
  else
    log "$name: pid file $f is stale (pid $pid is not running this cluster's $name); removing it"
  fi
  rm -f "$f"
}

log_tail() { # log_tail NAME [LINES]
  local f="$LOG_DIR/$1.log"
  [[ -f "$f" ]] || return 0
  echo "----- last ${2:-30} lines of $f -----" >&2
  tail -n "${2:-30}" "$f" >&2 || true
  echo "-----" >&2
}

port_in_use() { # true if something accepts TCP connections on BIND_ADDRESS:PORT
  (exec 3<>"/dev/tcp/$BIND_ADDRESS/$1") 2>/dev/null
}

free_port() { # a TCP port on BIND_ADDRESS that nothing listens on now
  # Below the kernel's ephemeral range (as devtools/processes.free_ports): a bind(0) port could
  # be handed to an outgoing connection before the server that is to listen on it starts.
  python3 -c 'import random, socket, sys
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
ports = list(range(20000, low)) if low > 20100 else []
random.shuffle(ports)
for port in ports + [0]:
    s = socket.socket()
    try:
        s.bind((sys.argv[1], port))
    except OSError:
        s.close()
        continue
    print(s.getsockname()[1])
    s.close()
    break' "$BIND_ADDRESS"
}

http_ok() { # http_ok URL [TOKEN]: true if GET URL answers 2xx (TLS not verified: local health only)
  local url="$1" token="${2:-}"
  if command -v curl >/dev/null 2>&1; then
    if [[ -n "$token" ]]; then
      curl -fsSk --max-time 5 -H "Authorization: Bearer $token" "$url" >/dev/null 2>&1
    else
      curl -fsSk --max-time 5 "$url" >/dev/null 2>&1
    fi
  else
    python3 - "$url" "$token" <<'PY' >/dev/null 2>&1
import ssl, sys, urllib.request
req = urllib.request.Request(sys.argv[1])
if sys.argv[2]:
    req.add_header("Authorization", "Bearer " + sys.argv[2])
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
urllib.request.urlopen(req, timeout=5, context=ctx)
PY
  fi
}

# wait_for NAME DESCRIPTION CMD...: poll CMD until it succeeds; fail with the log tail if the
# NAME daemon dies or READY_TIMEOUT passes.
wait_for() {
  local name="$1" what="$2"; shift 2
  local deadline=$((SECONDS + READY_TIMEOUT))
  until "$@"; do
    if ! pid_of "$name" >/dev/null; then
      log_tail "$name" 40
      die "$name exited while waiting for $what (log: $LOG_DIR/$name.log)"
    fi
    if ((SECONDS >= deadline)); then
      log_tail "$name" 40
      die "timed out after ${READY_TIMEOUT}s waiting for $what (log: $LOG_DIR/$name.log)"
    fi
    sleep 0.5
  done
}

load_cluster_env() { # the values a running cluster was started with win over the environment
  [[ -f "$CLUSTER_ENV" ]] || return 1
  # shellcheck disable=SC1090
  source "$CLUSTER_ENV"
}

resolve_bin_dir() { # sets K8S_BIN_DIR (builds the binaries when missing)
  if [[ -z "${K8S_BIN_DIR:-}" ]]; then
    K8S_BIN_DIR="$("$HACK_DIR/build-k8s.sh" | tail -n1)" || die "hack/build-k8s.sh failed"
  fi
  local b
  local needed=(kube-apiserver kubectl etcd kwok)
  [[ "${KCM:-1}" == 0 ]] || needed+=(kube-controller-manager)
  for b in "${needed[@]}"; do
    [[ -x "$K8S_BIN_DIR/$b" ]] || die "$K8S_BIN_DIR/$b missing: run 'make k8s-binaries' (hack/build-k8s.sh)"
  done
  KWOK_STAGE_DIR="${KWOK_STAGE_DIR:-$K8S_BIN_DIR/../kwok-stages}"
}
