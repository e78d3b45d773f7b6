# gangsched developer entry points. The two README commands are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: prereqs venv demo simulate-demo test unit lint typecheck contracts check bench bench-check \
	bench-compare clean \
	image test-image helm-binary prometheus-binaries clients-binaries e2e-clients \
	karpenter-binary e2e-autoscaling

# The runtime dependencies at the locked versions and hashes (what the image ships), then
# the package and its dev tools around them: a release of a dependency the day CI runs
# cannot change what the tests run against (tests/unit/test_install.py checks the match).
$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes --only-binary=:all: -r requirements.lock
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: prereqs $(STAMP)

prereqs:
	@PYTHON=$(PYTHON) hack/check-prereqs.sh

# The live demo: a local control plane (built from Go modules the first time), gangsched
# running as its ServiceAccount, the seed walkthrough replayed step by step, then teardown.
demo: venv
	hack/demo.sh

# The same walkthrough offline, in a second: the scheduler on an in-memory cluster.
simulate-demo: venv
	$(VENV)/bin/gangsched simulate examples/seed-walkthrough.yaml

lint: venv
	$(VENV)/bin/ruff check gangsched tests bench devtools
	$(VENV)/bin/ruff format --check gangsched tests bench devtools

typecheck: venv
	$(VENV)/bin/mypy --strict gangsched bench tests devtools

# Import contracts (pyproject.toml), then the code's shape (tests/unit/test_import_graph.py):
# no import cycle, no module over 500 lines, no private name imported across modules, no
# import inside a function but for start-up time.
contracts: venv
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -p no:cacheprovider tests/unit/test_import_graph.py

check: lint typecheck contracts

unit: venv
	$(PY) -m pytest -m 'not e2e' -q

# Every property test (hypothesis; e2e aside) with fresh random examples: the `fuzz` profile
# of tests/conftest.py, each test's max_examples times FUZZ_SCALE and a new seed per run
# (`make test` runs the same properties derandomized, the same examples every time, so it
# never fails by chance). Run it before resolving any change to the core. A failure prints
# its example, the @reproduce_failure blob and the seed: `make fuzz FUZZ_SEED=N` replays it.
.PHONY: fuzz
FUZZ_SCALE ?= 5
FUZZ_SEED ?=
fuzz: venv
	@seed="$(FUZZ_SEED)"; seed="$${seed:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"; \
	echo "make fuzz: seed $$seed, max_examples x$(FUZZ_SCALE)"; \
	GANGSCHED_FUZZ_SCALE=$(FUZZ_SCALE) $(PY) -m pytest -q -p no:cacheprovider \
		--hypothesis-profile=fuzz --hypothesis-seed=$$seed -m 'hypothesis and not e2e' tests \
	|| { echo "make fuzz: failed; replay: make fuzz FUZZ_SEED=$$seed FUZZ_SCALE=$(FUZZ_SCALE)"; exit 1; }

test: venv k8s-binaries prometheus-binaries check
	$(PY) -m pytest -q -m 'not image and not clients and not autoscaling'

# Prometheus and promtool for the observability e2e tests, built from their Go module
# (hack/build-prometheus.sh, pinned with its hash in hack/prometheus/versions.env; about 5-10
# minutes the first time on 2 cores, then cached), linked as hack/prometheus/bin.
prometheus-binaries:
	@bin_dir="$$(hack/build-prometheus.sh | tail -n1)" && ln -sfn "$$bin_dir" hack/prometheus/bin \
		&& echo "prometheus: $$bin_dir (linked as hack/prometheus/bin)"

# The real clients gangsched's users run (Kueue, LeaderWorkerSet, JobSet, Kubeflow Trainer)
# driving it on a local control plane (tests/e2e/test_clients_*.py). Kept out of `make test`:
# the first run builds each client from its Go module (hack/build-clients.sh, 3-7 minutes
# each on 2 cores, then cached in ~/.cache/gangsched/clients/). Karpenter, also pinned in
# hack/clients/versions.env, is built by karpenter-binary for e2e-autoscaling, not here, and
# scheduler-plugins' controller by bench.compare, which runs it beside Coscheduling.
CLIENTS ?= $(filter-out karpenter scheduler-plugins-controller,$(shell hack/build-clients.sh --list))
clients-binaries:
	hack/build-clients.sh $(CLIENTS)

e2e-clients: venv k8s-binaries clients-binaries
	$(PY) -m pytest -q -m clients tests/e2e

# gangsched under Karpenter: its kwok provider (sigs.k8s.io/karpenter ./kwok, pinned in
# hack/clients/versions.env, about 3 minutes to build the first time) adds and removes kwok nodes
# on the local control plane (tests/e2e/test_autoscaling.py, docs/concepts/autoscaling.md).
# Kept out of `make test`.
karpenter-binary:
	hack/build-clients.sh karpenter

e2e-autoscaling: venv k8s-binaries karpenter-binary
	$(PY) -m pytest -q -m autoscaling tests/e2e

# The container image from the Dockerfile, built with buildah on a stand-in for the official
# Python base (hack/image.sh: installs buildah and mmdebstrap from Debian if missing; cached
# base, rebuilt only when its inputs change); prints the image name and size.
image:
	hack/image.sh build

# The built image run against a local control plane as a pod would run it (tests/e2e/test_image.py).
# Kept out of `make test` because a cold image build takes minutes; .ci/run runs it after.
test-image: venv k8s-binaries image
	$(PY) -m pytest -q -m image tests/e2e/test_image.py

# Helm built from its Go module (hack/build-helm.sh, version in hack/helm/versions.env), linked
# as hack/helm/bin. The Helm e2e tests build it themselves when needed.
helm-binary:
	@bin_dir="$$(hack/build-helm.sh | tail -n1)" && ln -sfn "$$bin_dir" hack/helm/bin \
		&& echo "helm: $$bin_dir/helm (linked as hack/helm/bin)"

bench: venv
	$(PY) -m bench.core_bench

# The core, preemption, topology, DRA and volume benchmarks at a reduced size against
# bench/results/bench-check.json (bench/check.py): CPU time within BENCH_TOLERANCE times the
# baseline, correctness figures (gangs placed, victims) equal; exit 1 naming each regression.
# About 1.5-2 minutes on 2 cores. Kept out of `make test`; .ci/run runs it after.
# Re-record the baseline after an intended change: `$(PY) -m bench.check --record`.
BENCH_TOLERANCE ?= 3
bench-check: venv
	$(PY) -m bench.check --tolerance $(BENCH_TOLERANCE)

# gangsched vs the upstream kube-scheduler on the same local control plane (bench/README.md):
# fresh cluster per run, schedulers alternated, ROUNDS rounds, SIZE=default|small, medians,
# bench/results/compare.{json,md,png}. Extra flags: COMPARE_ARGS='--mode precreate ...'.
ROUNDS ?= 3
SIZE ?= default
WORKLOADS ?= a,b,c,d
bench-compare: venv k8s-binaries
	@$(PY) -c 'import matplotlib' 2>/dev/null || $(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m bench.compare --rounds $(ROUNDS) --size $(SIZE) --workloads $(WORKLOADS) $(COMPARE_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

include hack/cluster.mk
