"""Names by which pods join groups and groups are defined, per PodGroup dialect.

Kept in one place because the pod converter (membership) and the PodGroup converter
(definitions) must agree on them, and users grep for them when a pod is not seen as a member.
"""

from __future__ import annotations

from gangsched.core.model import Dialect

#: Pod label naming a scheduling.sigs.k8s.io PodGroup (seed manifests, Koordinator).
SIGS_POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
#: Pod label naming a scheduling.x-k8s.io PodGroup (scheduler-plugins today, Kubeflow).
X_K8S_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
#: Koordinator gangs defined by pod annotations alone, without a PodGroup object.
KOORDINATOR_GANG_NAME = "gang.scheduling.koordinator.sh/name"
KOORDINATOR_MIN_AVAILABLE = "gang.scheduling.koordinator.sh/min-available"
#: On a PodGroup (or an annotation gang's pods): JSON list of "namespace/name" gangs placed
#: together (a GangGroup). Naming it on one side is enough.
KOORDINATOR_GANG_GROUPS = "gang.scheduling.koordinator.sh/groups"
#: Which members count toward minMember (once-satisfied | only-waiting | waiting-and-running).
KOORDINATOR_MATCH_POLICY = "gang.scheduling.koordinator.sh/match-policy"
#: The same under the older prefix; Koordinator reads it when the first is absent.
KOORDINATOR_MATCH_POLICY_ALIAS = "pod-group.scheduling.sigs.k8s.io/match-policy"
#: Strict | NonStrict: what Koordinator does with the reservations of a gang whose member failed.
KOORDINATOR_GANG_MODE = "gang.scheduling.koordinator.sh/mode"
#: The gang's expected number of members (informational; at least min-available).
KOORDINATOR_TOTAL_NUMBER = "gang.scheduling.koordinator.sh/total-number"
#: scheduler-plugins' retired lightweight coscheduling, still read by Koordinator: pod labels
#: naming an annotation-style gang and its size (the label size wins over the annotation).
LIGHTWEIGHT_GANG_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LIGHTWEIGHT_MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"

#: Pod annotations naming a scheduling.volcano.sh PodGroup (LeaderWorkerSet's and Volcano's
#: controllers write the first; Volcano reads both, the first before the second).
VOLCANO_GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
#: Pod annotation naming the member's task (a Volcano Job's task), which minTaskMember counts.
VOLCANO_TASK_ANNOTATION = "volcano.sh/task-spec"

#: API group of a PodGroup object -> its dialect.
POD_GROUP_API_GROUPS: dict[str, Dialect] = {
    Dialect.SIGS.value: Dialect.SIGS,
    Dialect.X_K8S.value: Dialect.X_K8S,
    Dialect.UPSTREAM.value: Dialect.UPSTREAM,
    Dialect.VOLCANO.value: Dialect.VOLCANO,
}


def api_group(api_version: str) -> str:
    """ "scheduling.k8s.io/v1alpha3" -> "scheduling.k8s.io"; the core group ("v1") is ""."""
    return api_version.rpartition("/")[0]
