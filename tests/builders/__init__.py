"""The one set of test builders: model objects for the pure core, raw JSON for the converters.

Unit convention, everywhere in this module: quantities are written as in a manifest, as
strings ("500m", "2Gi") or plain numbers meaning whole units (cpu=2 is two cores and
cpu=0.5 half of one, as `cpu: 2` and `cpu: 0.5` in YAML), converted with the production
parser. So a model pod and the raw pod it stands for are built from the same arguments, and
no test carries its own unit.

Defaults: a node has 4 CPUs, 16Gi and room for 110 pods; a pod requests 1 CPU and 100Mi and
names gangsched as its scheduler (pass OTHER_SCHEDULER for pods placed by someone else); a
pod without a node is pending, a pod with one is running.

Model builders are the short names (node, pod, group, ...); raw builders start with `raw_`
and return the dicts an informer or `gangsched simulate` reads (nodes, pods, PodGroups of
every dialect, priority classes, budgets, storage and claims).

Tests import every builder from here; the modules of this package group them by what they
build (common, model, volumes, raw, raw_storage, dra; api_server, a stand-in API server
for the client's tests).
"""

from __future__ import annotations

from tests.builders.api_server import (
    loopback_api_server as loopback_api_server,
)
from tests.builders.common import (
    GIB as GIB,
)
from tests.builders.common import (
    JSON as JSON,
)
from tests.builders.common import (
    OTHER_SCHEDULER as OTHER_SCHEDULER,
)
from tests.builders.common import (
    POD_GROUP_API_VERSIONS as POD_GROUP_API_VERSIONS,
)
from tests.builders.common import (
    SCHEDULER as SCHEDULER,
)
from tests.builders.common import (
    Quantity as Quantity,
)
from tests.builders.common import (
    manifest_resources as manifest_resources,
)
from tests.builders.common import (
    resources as resources,
)
from tests.builders.dra import (
    GPU_CLASS as GPU_CLASS,
)
from tests.builders.dra import (
    GPU_DRIVER as GPU_DRIVER,
)
from tests.builders.dra import (
    NVLINK as NVLINK,
)
from tests.builders.dra import (
    gpu_claim_spec as gpu_claim_spec,
)
from tests.builders.dra import (
    gpu_class as gpu_class,
)
from tests.builders.dra import (
    gpu_slice as gpu_slice,
)
from tests.builders.dra import (
    resource_claim as resource_claim,
)
from tests.builders.dra import (
    with_resource_claims as with_resource_claims,
)
from tests.builders.model import (
    budget as budget,
)
from tests.builders.model import (
    cluster as cluster,
)
from tests.builders.model import (
    gang_pods as gang_pods,
)
from tests.builders.model import (
    group as group,
)
from tests.builders.model import (
    lone as lone,
)
from tests.builders.model import (
    node as node,
)
from tests.builders.model import (
    pod as pod,
)
from tests.builders.model import (
    priority_class as priority_class,
)
from tests.builders.model import (
    ref as ref,
)
from tests.builders.model import (
    req as req,
)
from tests.builders.model import (
    selector as selector,
)
from tests.builders.model import (
    snapshot as snapshot,
)
from tests.builders.model import (
    term as term,
)
from tests.builders.raw import (
    kubeconfig_file as kubeconfig_file,
)
from tests.builders.raw import (
    raw_node as raw_node,
)
from tests.builders.raw import (
    raw_pdb as raw_pdb,
)
from tests.builders.raw import (
    raw_pod as raw_pod,
)
from tests.builders.raw import (
    raw_pod_group as raw_pod_group,
)
from tests.builders.raw import (
    raw_priority_class as raw_priority_class,
)
from tests.builders.raw_storage import (
    pod_claim as pod_claim,
)
from tests.builders.raw_storage import (
    pod_volume as pod_volume,
)
from tests.builders.raw_storage import (
    raw_pv as raw_pv,
)
from tests.builders.raw_storage import (
    raw_pvc as raw_pvc,
)
from tests.builders.raw_storage import (
    raw_resource_claim as raw_resource_claim,
)
from tests.builders.raw_storage import (
    raw_storage_class as raw_storage_class,
)
from tests.builders.volumes import (
    claim as claim,
)
from tests.builders.volumes import (
    local_volume as local_volume,
)
from tests.builders.volumes import (
    storage_class as storage_class,
)
from tests.builders.volumes import (
    volume_book as volume_book,
)
from tests.builders.volumes import (
    volume_cluster as volume_cluster,
)
from tests.builders.volumes import (
    with_claims as with_claims,
)
