#!/usr/bin/env bash
# Restart the kube-apiserver (and with --etcd, etcd too) of the control plane in CLUSTER_DIR,
# by the PIDs in CLUSTER_DIR/pids and with the exact command lines they run with (read from
# /proc/PID/cmdline): a fault-injection helper for the e2e tests and for trying gangsched's
# recovery by hand. Nothing else is touched (kwok and any scheduler keep running and must
# reconnect on their own).
#
#   CLUSTER_DIR=.cluster hack/cluster-restart-apiserver.sh [--etcd] [--down SECONDS] [--signal TERM|KILL]
#
#   --etcd          stop etcd too (after the apiserver) and start it first (its data is kept)
#   --down SECONDS  how long everything stays down (default 0)
#   --signal SIG    TERM (default: graceful, in-flight requests finish) or KILL (a crash)
#
# Prints `stopped_at=<epoch s> ready_at=<epoch s> downtime=<s>` on stdout; logs are appended
# to CLUSTER_DIR/logs/<component>.log.
set -euo pipefail
# shellcheck source=cluster-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-lib.sh"
guard_cluster_dir

WITH_ETCD=0 DOWN=0 SIGNAL=TERM
while (($#)); do
  case "$1" in
    --etcd) WITH_ETCD=1 ;;
    --down) DOWN="${2:?--down needs seconds}"; shift ;;
    --signal) SIGNAL="${2:?--signal needs TERM or KILL}"; shift ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
  shift
done
[[ "$SIGNAL" == TERM || "$SIGNAL" == KILL ]] || die "--signal must be TERM or KILL"
load_cluster_env || die "no cluster in $CLUSTER_DIR (cluster.env missing)"

components=(kube-apiserver)
((WITH_ETCD)) && components+=(etcd)

declare -A CMDLINES
for name in "${components[@]}"; do
  pid="$(pid_of "$name")" || die "$name is not running (no live PID in $PID_DIR/$name.pid)"
  # NUL-separated argv, kept verbatim (arguments may contain spaces or commas).
  CMDLINES[$name]="$(tr '\0' '\n' <"/proc/$pid/cmdline" | base64 -w0)"
done

# kube-apiserver stops listening at once on SIGTERM but its process can linger for 30 s or more
# (shutdown of its internal controllers); 10 s is plenty for in-flight requests.
stop_one() { # stop_one NAME: signal the recorded PID, wait until it is gone (SIGKILL after 10 s)
  local name="$1" pid i
  pid="$(pid_of "$name")" || return 0
  kill "-$SIGNAL" "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    is_ours "$name" "$pid" || break
    sleep 0.1
  done
  if is_ours "$name" "$pid"; then
    log "$name (pid $pid) still running 10s after SIG$SIGNAL; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while is_ours "$name" "$pid"; do sleep 0.1; done
  fi
  log "stopped $name (pid $pid, SIG$SIGNAL)"
}

start_one() { # start_one NAME: the same command line, detached, log appended, PID recorded
  local name="$1" cmd=()
  mapfile -t cmd < <(base64 -d <<<"${CMDLINES[$name]}")
  local prefix=()
  if [[ "$name" == etcd ]]; then
    # etcd maps every ETCD_* environment variable to a flag (as in cluster-up.sh).
    mapfile -t prefix < <(compgen -e | grep '^ETCD_' | sed 's/^/-u/' || true)
    prefix=(env "${prefix[@]}")
  fi
  echo "----- restarted by $(basename "$0") at $(date -u +%FT%TZ) -----" >>"$LOG_DIR/$name.log"
  setsid "${prefix[@]}" "${cmd[@]}" </dev/null >>"$LOG_DIR/$name.log" 2>&1 &
  echo "$!" >"$PID_DIR/$name.pid"
  log "started $name again (pid $!)"
}

# A killed process loses its command line (is_ours) before the kernel closes its sockets:
# wait for the port itself, or the restarted process may find it still in use.
port_free() { # port_free PORT: up to 10 s
  local i
  for ((i = 0; i < 100; i++)); do
    port_in_use "$1" || return 0
    sleep 0.1
  done
  die "port $1 is still in use after stopping its process"
}

stopped_at="$(date +%s.%N)"
stop_one kube-apiserver
port_free "$APISERVER_PORT"
if ((WITH_ETCD)); then
  stop_one etcd
  port_free "$ETCD_PORT"
fi
sleep "$DOWN"
if ((WITH_ETCD)); then
  start_one etcd
  wait_for etcd "etcd health on port $ETCD_PORT" http_ok "http://$BIND_ADDRESS:$ETCD_PORT/health"
fi
start_one kube-apiserver
wait_for kube-apiserver "kube-apiserver /readyz at $SERVER" http_ok "$SERVER/readyz" "$ADMIN_TOKEN"
ready_at="$(date +%s.%N)"
log "kube-apiserver ready again at $SERVER"
printf 'stopped_at=%s ready_at=%s downtime=%.1f\n' "$stopped_at" "$ready_at" \
  "$(echo "$ready_at - $stopped_at" | bc -l 2>/dev/null || python3 -c "print($ready_at - $stopped_at)")"
