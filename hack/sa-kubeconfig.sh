#!/usr/bin/env bash
# Write a kubeconfig that authenticates as the gangsched ServiceAccount (manifests/10-rbac.yaml),
# so gangsched runs with exactly the ClusterRole it ships with, not as cluster admin.
#   hack/sa-kubeconfig.sh ADMIN_KUBECONFIG OUT [DURATION]
set -euo pipefail
admin=${1:?admin kubeconfig}; out=${2:?output path}; duration=${3:-24h}
kubectl=${KUBECTL:-kubectl}
server=$("$kubectl" --kubeconfig "$admin" config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$("$kubectl" --kubeconfig "$admin" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
token=$("$kubectl" --kubeconfig "$admin" -n gangsched-system create token gangsched --duration "$duration")
umask 077
cat >"$out" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $server
$( [[ -n "$ca" ]] && echo "    certificate-authority-data: $ca" || echo "    insecure-skip-tls-verify: true" )
users:
- name: gangsched
  user:
    token: $token
contexts:
- name: gangsched
  context: {cluster: local, user: gangsched}
current-context: gangsched
KUBECONFIG
