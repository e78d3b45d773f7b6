"""The object an event is about: a PodGroup found by its key in whichever dialect holds it
(with that dialect's apiVersion and its uid), a pod with its uid."""

from __future__ import annotations

from gangsched.core.cluster import ClusterState
from gangsched.core.model import Dialect
from gangsched.core.scheduler import Scheduler
from gangsched.edge.cache import ClusterCache
from gangsched.edge.events import EventRecorder, ObjectRef
from gangsched.edge.metrics import Metrics
from gangsched.edge.pod_writes import PodWriter
from tests.builders import raw_pod, raw_pod_group


def test_podgroups_and_pods_are_referred_to_with_their_api_version_and_uid() -> None:
    scheduler = Scheduler(ClusterState(scheduler_name="gangsched"))
    cache = ClusterCache(scheduler, clock=lambda: 0.0)
    cache.pod_groups().replace(
        [raw_pod_group(f"g{i}", 2, uid=f"sigs-{i}") for i in range(50)]
        + [raw_pod_group("x", 2, dialect=Dialect.X_K8S, uid="x-uid")]
    )
    cache.pods().replace([raw_pod("p", uid="p-uid")])
    writer = PodWriter(
        kube=None,  # type: ignore[arg-type]
        scheduler=scheduler,
        cache=cache,
        events=EventRecorder(kube=None),  # type: ignore[arg-type]
        metrics=Metrics(),
        may_write=lambda: True,
        api_versions={Dialect.X_K8S: "scheduling.x-k8s.io/v1alpha1"},
    )
    assert writer.ref("PodGroup", "default/x") == ObjectRef(
        "PodGroup", "default", "x", "scheduling.x-k8s.io/v1alpha1", "x-uid"
    )
    assert writer.ref("PodGroup", "default/g7") == ObjectRef(
        "PodGroup", "default", "g7", "v1", "sigs-7"
    )
    assert writer.ref("Pod", "default/p") == ObjectRef("Pod", "default", "p", "v1", "p-uid")
    missing = writer.ref("PodGroup", "default/nope")
    assert (missing.name, missing.uid) == ("nope", "")
