# Local Kubernetes control plane (etcd + kube-apiserver + kwok, optional upstream kube-scheduler)
# built from Go modules. Included by the top-level Makefile.
#
#   make k8s-binaries                 build/cache the binaries (hack/build-k8s.sh); links hack/k8s/bin
#   make cluster-up [NODES=2 NODE_CPU=4 NODE_MEMORY=16Gi NODE_PODS=110]
#   make baseline-scheduler           upstream kube-scheduler, schedulerName kube-scheduler-baseline
#   make baseline-scheduler-down
#   make cluster-down
#   make cluster-status
#
# Ports/state (also settable in the environment): CLUSTER_DIR=.cluster ETCD_PORT=23790
# ETCD_PEER_PORT=23800 APISERVER_PORT=26443 KWOK_PORT=26080 SCHEDULER_PORT=26259.
# Then: export KUBECONFIG=$(CLUSTER_DIR)/kubeconfig

CLUSTER_DIR ?= $(CURDIR)/.cluster
NODES ?= 2
NODE_CPU ?= 4
NODE_MEMORY ?= 16Gi
NODE_PODS ?= 110
ETCD_PORT ?= 23790
ETCD_PEER_PORT ?= 23800
APISERVER_PORT ?= 26443
KWOK_PORT ?= 26080
SCHEDULER_PORT ?= 26259

CLUSTER_ENV_VARS = CLUSTER_DIR='$(CLUSTER_DIR)' NODES='$(NODES)' NODE_CPU='$(NODE_CPU)' \
	NODE_MEMORY='$(NODE_MEMORY)' NODE_PODS='$(NODE_PODS)' ETCD_PORT='$(ETCD_PORT)' \
	ETCD_PEER_PORT='$(ETCD_PEER_PORT)' APISERVER_PORT='$(APISERVER_PORT)' KWOK_PORT='$(KWOK_PORT)' \
	SCHEDULER_PORT='$(SCHEDULER_PORT)'

.PHONY: k8s-binaries k8s-gomod cluster-up cluster-down cluster-status baseline-scheduler baseline-scheduler-down

k8s-binaries:
	@bin_dir="$$(hack/build-k8s.sh | tail -n1)" && ln -sfn "$$bin_dir" hack/k8s/bin \
		&& echo "k8s binaries: $$bin_dir (linked as hack/k8s/bin)"

# Regenerate hack/k8s/go.mod + go.sum after editing hack/k8s/versions.env.
k8s-gomod:
	hack/k8s/gen-gomod.sh

cluster-up: k8s-binaries
	@$(CLUSTER_ENV_VARS) hack/cluster-up.sh >/dev/null
	@echo "export KUBECONFIG=$(CLUSTER_DIR)/kubeconfig"

cluster-down:
	@$(CLUSTER_ENV_VARS) hack/cluster-down.sh

cluster-status:
	@$(CLUSTER_ENV_VARS) hack/cluster-status.sh

baseline-scheduler:
	@$(CLUSTER_ENV_VARS) hack/baseline-scheduler.sh up

baseline-scheduler-down:
	@$(CLUSTER_ENV_VARS) hack/baseline-scheduler.sh down
