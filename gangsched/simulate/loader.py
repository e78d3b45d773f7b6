"""Reads the manifests given to `gangsched simulate` into an Inventory.

The files become documents sorted by kind (simulate/documents.py); here each is converted
into the model and checked against the others (a pod's node and PriorityClass exist, one
default class), and claims from templates are generated as kube-controller-manager would.
Every problem in every file is collected before failing, each on one line naming file:line,
the object and the field, so a user fixes a broken input in one pass instead of one error per
run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gangsched.core.api import (
    InvalidObject,
    Inventory,
    PriorityResolver,
    compute_disruptions_allowed,
    has_reported_disruptions,
    namespace_from_raw,
    node_from_raw,
    pdb_from_raw,
    pod_from_raw,
    pod_group_from_raw,
    priority_class_from_raw,
)
from gangsched.core.api.composite import composite_pod_group_from_raw
from gangsched.core.api.disruption import is_gang_budget
from gangsched.core.api.network_topology import NetworkTopology, network_topology_from_raw
from gangsched.core.api.nodes import NAMESPACE_NAME_LABEL
from gangsched.core.api.storage import (
    csi_driver_from_raw,
    csi_node_from_raw,
    csi_storage_capacity_from_raw,
    persistent_volume_claim_from_raw,
    persistent_volume_from_raw,
    storage_class_from_raw,
)
from gangsched.core.cluster import ClusterState
from gangsched.core.dra.parse_claims import (
    generated_claim_raw,
    resource_claim_from_raw,
    resource_claim_template_from_raw,
)
from gangsched.core.dra.parse_classes import device_class_from_raw
from gangsched.core.dra.parse_slices import resource_slice_from_raw
from gangsched.core.dra.state import dra_state
from gangsched.core.model import Pod, PriorityClass
from gangsched.core.volumes.book import VolumeBook
from gangsched.simulate.documents import (
    CLAIM_TEMPLATE,
    COMPOSITE,
    CSI_CAPACITY,
    CSI_DRIVER,
    CSI_NODE,
    DEVICE_CLASS,
    NAMESPACE,
    NETWORK_TOPOLOGY,
    NODE,
    PDB,
    PER_FILE,
    POD,
    POD_GROUP,
    PRIORITY_CLASS,
    PV,
    PVC,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    STORAGE_CLASS,
    WORKLOAD,
    Document,
    ManifestError,
    Problems,
    classify,
    read_file,
)

__all__ = ["ManifestError", "load_cluster", "load_manifests"]


def load_cluster(paths: Sequence[str], *, scheduler_name: str) -> ClusterState:
    """The ClusterState of everything in `paths` (what simulate and explain schedule), or
    ManifestError."""
    inventory = load_manifests(paths, scheduler_name=scheduler_name)
    return ClusterState.build(
        scheduler_name=scheduler_name,
        nodes=inventory.nodes,
        pods=inventory.pods,
        groups=inventory.pod_groups,
        composites=inventory.composite_pod_groups,
        priority_classes=inventory.priority_classes,
        budgets=inventory.budgets,
        namespaces=inventory.namespaces,
        # Volumes and DRA: what cycles reserve beside the nodes (their extensions).
        extensions=[inventory.volumes, dra_state(inventory)],
        network_topology=inventory.network_topology,
    )


def load_manifests(paths: Sequence[str], *, scheduler_name: str) -> Inventory:
    """Read, validate and convert every object in `paths`, or raise ManifestError."""
    if isinstance(paths, str):
        paths = [paths]  # a lone path would otherwise be read character by character
    problems = Problems()
    docs: list[Document] = []
    for index, path in enumerate(paths):
        docs.extend(read_file(path, problems, first_order=index * PER_FILE))
    by_kind = classify(docs, problems)
    inventory = Inventory(scheduler_name=scheduler_name)

    # Priority classes first: pods and groups resolve their class names against them.
    defaults: list[tuple[Document, PriorityClass]] = []
    for doc in by_kind[PRIORITY_CLASS]:
        try:
            priority_class = priority_class_from_raw(doc.raw)
        except InvalidObject as error:
            problems.invalid(doc, error)
            continue
        inventory.priority_classes.append(priority_class)
        if priority_class.global_default:
            defaults.append((doc, priority_class))
    for doc, _ in defaults[1:]:
        problems.object(
            doc,
            "globalDefault",
            f'PriorityClass "{defaults[0][1].name}" (at {defaults[0][0].source}) is already '
            "marked as default; only one default can exist",
        )
    priorities = PriorityResolver(inventory.priority_classes)

    for doc in by_kind[NAMESPACE]:
        try:
            name, labels = namespace_from_raw(doc.raw)
        except InvalidObject as error:
            problems.invalid(doc, error)
            continue
        inventory.namespaces[name] = labels
    for doc in by_kind[NODE]:
        try:
            inventory.nodes.append(node_from_raw(doc.raw))
        except InvalidObject as error:
            problems.invalid(doc, error)
    for doc in by_kind[WORKLOAD]:
        if not doc.name:
            problems.object(doc, "metadata.name", "is required")
    network = _network_topology(by_kind[NETWORK_TOPOLOGY], problems)
    inventory.network_topology = network
    for doc in by_kind[POD_GROUP]:
        try:
            inventory.pod_groups.append(
                pod_group_from_raw(doc.raw, priorities=priorities, network_topology=network)
            )
        except InvalidObject as error:
            problems.invalid(doc, error)
    for doc in by_kind[COMPOSITE]:
        try:
            inventory.composite_pod_groups.append(
                composite_pod_group_from_raw(doc.raw, priorities=priorities)
            )
        except InvalidObject as error:
            problems.invalid(doc, error)
    # Nodes that failed to convert still exist as far as their pods are concerned.
    node_names = {doc.name for doc in by_kind[NODE]}
    for doc in by_kind[POD]:
        try:
            pod = pod_from_raw(doc.raw, priorities=priorities)
        except InvalidObject as error:
            problems.invalid(doc, error)
            continue
        _check_pod(doc, pod, node_names, priorities, problems)
        inventory.pods.append(pod)
    for doc in by_kind[PDB]:
        if is_gang_budget(doc.raw):
            continue  # gangsched's own gang budgets never weigh on preemption
        try:
            budget = pdb_from_raw(doc.raw)
            if not has_reported_disruptions(doc.raw):
                matching = [
                    pod
                    for pod in inventory.pods
                    if pod.namespace == budget.namespace
                    and pod.holds_resources
                    and not pod.terminating
                    and budget.selector.matches(pod.labels)
                ]
                budget.disruptions_allowed = compute_disruptions_allowed(
                    doc.raw, matching_pods=matching
                )
        except InvalidObject as error:
            problems.invalid(doc, error)
            continue
        inventory.budgets.append(budget)

    _load_volumes(by_kind, inventory.volumes, problems)
    _load_dra(by_kind, inventory, problems)
    for namespace in _referenced_namespaces(inventory):
        inventory.namespaces.setdefault(namespace, {NAMESPACE_NAME_LABEL: namespace})
    problems.raise_if_any()
    return inventory


def _load_volumes(by_kind: dict[str, list[Document]], book: VolumeBook, problems: Problems) -> None:
    """The storage objects, as the informers would hold them."""
    for doc in by_kind[STORAGE_CLASS]:
        try:
            storage_class = storage_class_from_raw(doc.raw)
        except InvalidObject as error:
            problems.invalid(doc, error)
            continue
        book.classes[storage_class.name] = storage_class
    for doc in by_kind[PVC]:
        try:
            book.upsert_claim(persistent_volume_claim_from_raw(doc.raw))
        except InvalidObject as error:
            problems.invalid(doc, error)
    volumes = []
    for doc in by_kind[PV]:
        try:
            volumes.append(persistent_volume_from_raw(doc.raw))
        except InvalidObject as error:
            problems.invalid(doc, error)
    book.replace_volumes(volumes)
    for doc in by_kind[CSI_NODE]:
        try:
            csi_node = csi_node_from_raw(doc.raw)
        except InvalidObject as error:
            problems.invalid(doc, error)
            continue
        book.csi_nodes[csi_node.name] = csi_node
    for doc in by_kind[CSI_DRIVER]:
        try:
            driver = csi_driver_from_raw(doc.raw)
        except InvalidObject as error:
            problems.invalid(doc, error)
            continue
        book.drivers[driver.name] = driver
    for doc in by_kind[CSI_CAPACITY]:
        try:
            capacity = csi_storage_capacity_from_raw(doc.raw)
        except InvalidObject as error:
            problems.invalid(doc, error)
            continue
        book.capacities[capacity.key] = capacity


def _check_pod(
    doc: Document,
    pod: Pod,
    node_names: set[str],
    priorities: PriorityResolver,
    problems: Problems,
) -> None:
    """Cross-object checks a single pod's conversion cannot make."""
    if pod.node_name is not None and pod.node_name not in node_names:
        problems.object(doc, "spec.nodeName", f'node "{pod.node_name}" is not defined in the input')
    # With an explicit spec.priority the converter trusts the number (a live cluster's class
    # may be gone); in an input file the class must still exist, as admission would demand.
    spec = doc.raw.get("spec")
    class_name = spec.get("priorityClassName") if isinstance(spec, Mapping) else None
    if (
        isinstance(class_name, str)
        and class_name
        and spec.get("priority") is not None
        and priorities.get(class_name) is None
    ):
        problems.object(
            doc, "spec.priorityClassName", f'no PriorityClass with name "{class_name}" was found'
        )


def _load_dra(by_kind: dict[str, list[Document]], inventory: Inventory, problems: Problems) -> None:
    """DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates; then play
    kube-controller-manager's resourceclaim controller: a pod's claim C from a template,
    with no status yet, gets the claim `<pod>-C` generated from the template."""
    converters: list[tuple[str, Callable[[Any], Any], list[Any]]] = [
        (DEVICE_CLASS, device_class_from_raw, inventory.device_classes),
        (RESOURCE_SLICE, resource_slice_from_raw, inventory.resource_slices),
        (RESOURCE_CLAIM, resource_claim_from_raw, inventory.resource_claims),
        (CLAIM_TEMPLATE, resource_claim_template_from_raw, inventory.claim_templates),
    ]
    for kind, convert, into in converters:
        for doc in by_kind[kind]:
            try:
                into.append(convert(doc.raw))
            except InvalidObject as error:
                problems.invalid(doc, error)
    if not by_kind[CLAIM_TEMPLATE]:
        return
    templates = {(doc.namespace, doc.name): doc for doc in by_kind[CLAIM_TEMPLATE] if doc.name}
    claims = {claim.key for claim in inventory.resource_claims}
    raw_pods = {(doc.namespace, doc.name): doc for doc in by_kind[POD]}
    for index, pod in enumerate(inventory.pods):
        if not any(c.template_name and c.generated_name is None for c in pod.claims):
            continue
        pod_doc = raw_pods.get((pod.namespace, pod.name))
        new_claims = []
        for pod_claim in pod.claims:
            template = templates.get((pod.namespace, pod_claim.template_name))
            if pod_claim.generated_name is not None or template is None or pod_doc is None:
                new_claims.append(pod_claim)
                continue
            raw = generated_claim_raw(template.raw, pod=pod_doc.raw, pod_claim=pod_claim.name)
            name = raw["metadata"]["name"]
            if f"{pod.namespace}/{name}" not in claims:
                try:
                    inventory.resource_claims.append(resource_claim_from_raw(raw))
                except InvalidObject as error:
                    problems.invalid(template, error)
                    continue
                claims.add(f"{pod.namespace}/{name}")
            new_claims.append(dataclasses.replace(pod_claim, generated_name=name))
        inventory.pods[index].claims = tuple(new_claims)


def _referenced_namespaces(inventory: Inventory) -> list[str]:
    seen = [pod.namespace for pod in inventory.pods]
    seen += [group.ref.namespace for group in inventory.pod_groups]
    seen += [budget.namespace for budget in inventory.budgets]
    return list(dict.fromkeys(seen))


def _network_topology(docs: Sequence[Document], problems: Problems) -> NetworkTopology | None:
    """Koordinator's ClusterNetworkTopology objects, added one at a time so a malformed one
    (or one redefining a layer with another label) is reported at its own place."""
    accepted: list[Mapping[str, Any]] = []
    network: NetworkTopology | None = None
    for doc in docs:
        try:
            network = network_topology_from_raw([*accepted, doc.raw])
        except InvalidObject as error:
            problems.invalid(doc, error)
            continue
        accepted.append(doc.raw)
    return network
