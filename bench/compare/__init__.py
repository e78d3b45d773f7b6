"""gangsched side by side with the upstream kube-scheduler (issue 8); not a test.

Same release of the control plane (kube-apiserver, kube-scheduler v1.37.1 with
GenericWorkload=true: scheduling.k8s.io/v1beta1 PodGroups, gang scheduling and workload-aware
preemption, plus PodGroupPreemptionPolicy=true), same kwok nodes, same gangs; each scheduler
gets the workload in its own dialect:

* ``gangsched``: our dialect (scheduling.sigs.k8s.io PodGroup, pod label), schedulerName gangsched;
* ``kube-scheduler``: upstream PodGroups (``spec.schedulingPolicy.gang.minCount``, pod
  ``spec.schedulingGroup.podGroupName``), schedulerName kube-scheduler-baseline;
* ``gangsched-upstream``: gangsched on the upstream dialect (a check that the dialect costs
  nothing);
* ``coscheduling``: scheduler-plugins v0.33.5's kube-scheduler (built from its Go module by
  hack/build-clients.sh) with Coscheduling configured as its docs say (every extension point,
  its queue sort, a 10 s permit wait), ``scheduling.x-k8s.io`` PodGroups (``minMember``) and
  the ``scheduling.x-k8s.io/pod-group`` pod label, schedulerName scheduler-plugins-coscheduling;
  run as its chart installs it, with scheduler-plugins' controller (which writes the PodGroups'
  status) started beside the scheduler and counted in its column.

Workloads (sizes from ``--size default|small`` and per-field overrides, see SIZES):

(a) gangs: 1,000 nodes, 1,000 gangs of 3 one-CPU pods created at once;
(b) large gangs: 1,000 nodes, 100 gangs of 8-24 pods (mean 16);
(c) preemption: 100 nodes x 4 CPU full of 1,000 bound low-priority 400m pods (30% of them in
    disruptionMode All groups of 10 spread over 10 nodes), then 10 high-priority gangs of 10
    pods at 3970m; victims are low pods deleted (or being deleted) at the end;
(d) restart: 2,000 nodes and 20,000 bound pods, 100 pending gangs of 4; time from scheduler
    start to first and last bind;
(x) deadlock: 20 gangs of 8 one-CPU pods, their members created interleaved, on 10 nodes x 4
    CPU (room for 5 gangs): how many gangs end bound whole, partly bound, or held in Permit
    after at most 60 s (every run also counts its gangs left partly bound).

Every run gets a fresh control plane (``Cluster.start()``), except (d), whose 20,000 bound
pods are created once per round: between two (d) runs of a round the pending gangs are
deleted and recreated, so each scheduler starts on the same objects. Rounds alternate the schedulers
(A B C, A B C, ...). Objects are created by ``bench/loadgen`` (Go, standard library, 64
requests in flight on one HTTP/2 connection like client-go), so the creator is not the slow
part; ``--mode precreate`` creates everything before starting the scheduler instead.

What is measured and how: see bench/README.md ("Side by side with kube-scheduler").

    .venv/bin/python -m bench.compare [--rounds 3] [--workloads a,b,c,d] [--size small]

One module per job: cluster (control plane per run), workloads (the gangs in each dialect),
schedulers (launching them), measure (instruments), runs (one measured run), report (medians
and table), plot; main is the command line.
"""
