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
#: On a PodGroup: JSON list of "namespace/name" PodGroups placed together (a GangGroup).
KOORDINATOR_GANG_GROUPS = "gang.scheduling.koordinator.sh/groups"

#: API group of a PodGroup object -> its dialect.
POD_GROUP_API_GROUPS: dict[str, Dialect] = {
    Dialect.SIGS.value: Dialect.SIGS,
    Dialect.X_K8S.value: Dialect.X_K8S,
    Dialect.UPSTREAM.value: Dialect.UPSTREAM,
}


def api_group(api_version: str) -> str:
    """ "scheduling.k8s.io/v1alpha3" -> "scheduling.k8s.io"; the core group ("v1") is ""."""
    return api_version.rpartition("/")[0]
