"""Reads the manifests given to `gangsched simulate` into an Inventory.

Input is what users already have: `kubectl get -o yaml` dumps (kind List, or PodList items
without kind), multi-document YAML files, JSON. Every problem in every file is collected
before failing, each on one line naming file:line, the object and the field, so a user fixes a
broken input in one pass instead of one error per run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gangsched.core.api import (
    InvalidObject,
    Inventory,
    PriorityResolver,
    Problem,
    compute_disruptions_allowed,
    has_reported_disruptions,
    namespace_from_raw,
    node_from_raw,
    pdb_from_raw,
    pod_from_raw,
    pod_group_from_raw,
    priority_class_from_raw,
)
from gangsched.core.api.dialects import POD_GROUP_API_GROUPS, api_group
from gangsched.core.api.nodes import NAMESPACE_NAME_LABEL
from gangsched.core.api.storage import (
    csi_driver_from_raw,
    csi_node_from_raw,
    csi_storage_capacity_from_raw,
    persistent_volume_claim_from_raw,
    persistent_volume_from_raw,
    storage_class_from_raw,
)
from gangsched.core.dra.parse import (
    device_class_from_raw,
    generated_claim_raw,
    resource_claim_from_raw,
    resource_claim_template_from_raw,
    resource_slice_from_raw,
)
from gangsched.core.model import Pod, PriorityClass
from gangsched.core.volumes.book import VolumeBook

NAMESPACE, NODE, POD = "Namespace", "Node", "Pod"
PRIORITY_CLASS, PDB, POD_GROUP = "PriorityClass", "PodDisruptionBudget", "PodGroup"
#: scheduling.k8s.io Workloads are PodGroup templates for controllers (a Job creates its PodGroup
#: from one); kube-scheduler never reads them, so neither does simulate, but dumps contain them.
WORKLOAD = "Workload"
PVC, PV, STORAGE_CLASS = "PersistentVolumeClaim", "PersistentVolume", "StorageClass"
CSI_NODE, CSI_DRIVER, CSI_CAPACITY = "CSINode", "CSIDriver", "CSIStorageCapacity"
DEVICE_CLASS, RESOURCE_SLICE = "DeviceClass", "ResourceSlice"
RESOURCE_CLAIM, CLAIM_TEMPLATE = "ResourceClaim", "ResourceClaimTemplate"
RESOURCE_GROUP = "resource.k8s.io"

#: (API group, kind) the loader understands. The core group must be version v1.
_KNOWN: dict[tuple[str, str], str] = {
    ("", NAMESPACE): NAMESPACE,
    ("", NODE): NODE,
    ("", POD): POD,
    ("scheduling.k8s.io", PRIORITY_CLASS): PRIORITY_CLASS,
    ("policy", PDB): PDB,
    ("", PVC): PVC,
    ("", PV): PV,
    ("storage.k8s.io", STORAGE_CLASS): STORAGE_CLASS,
    ("storage.k8s.io", CSI_NODE): CSI_NODE,
    ("storage.k8s.io", CSI_DRIVER): CSI_DRIVER,
    ("storage.k8s.io", CSI_CAPACITY): CSI_CAPACITY,
    **{(group, POD_GROUP): POD_GROUP for group in POD_GROUP_API_GROUPS},
    ("scheduling.k8s.io", WORKLOAD): WORKLOAD,
    **{
        (RESOURCE_GROUP, kind): kind
        for kind in (DEVICE_CLASS, RESOURCE_SLICE, RESOURCE_CLAIM, CLAIM_TEMPLATE)
    },
}
_NAMESPACED = {POD, PDB, POD_GROUP, WORKLOAD, PVC, CSI_CAPACITY, RESOURCE_CLAIM, CLAIM_TEMPLATE}
#: Orders problems by file, then by position in the file; file-level errors sort last.
_PER_FILE = 10**9
_SUPPORTED = (
    "v1 Namespace, Node, Pod, PersistentVolumeClaim, PersistentVolume; scheduling.k8s.io "
    "PriorityClass; policy PodDisruptionBudget; storage.k8s.io StorageClass, CSINode, "
    "CSIDriver, CSIStorageCapacity; PodGroup of scheduling.sigs.k8s.io, scheduling.x-k8s.io "
    "or scheduling.k8s.io; scheduling.k8s.io Workload (read and ignored, as kube-scheduler does); "
    "resource.k8s.io/v1 DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate"
)


class ManifestError(ValueError):
    """The input cannot be simulated; `problems` lists everything wrong, in input order."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        header = f"{count} problem{'s' if count != 1 else ''} in the input"
        super().__init__("\n".join([header, *(str(problem) for problem in self.problems)]))


@dataclass(slots=True)
class _Document:
    raw: Any
    source: str
    order: int
    kind: str = ""

    @property
    def namespace(self) -> str:
        meta = self.raw.get("metadata") if isinstance(self.raw, Mapping) else None
        namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
        given = namespace if isinstance(namespace, str) else ""
        if self.kind in _NAMESPACED:
            return given or "default"
        return "" if self.kind else given  # unknown kinds: show what the user wrote

    @property
    def name(self) -> str:
        meta = self.raw.get("metadata") if isinstance(self.raw, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        return name if isinstance(name, str) else ""


class _Problems:
    """Problems tagged with the input position of their document, reported in input order."""

    def __init__(self) -> None:
        self._items: list[tuple[int, int, Problem]] = []

    def add(self, doc: _Document, problem: Problem) -> None:
        self._items.append(
            (doc.order, len(self._items), dataclasses.replace(problem, source=doc.source))
        )

    def object(self, doc: _Document, field: str, message: str) -> None:
        self.add(
            doc, Problem(doc.kind or _raw_kind(doc.raw), doc.namespace, doc.name, field, message)
        )

    def invalid(self, doc: _Document, error: InvalidObject) -> None:
        for problem in error.problems:
            self.add(doc, problem)

    def file(self, order: int, source: str, message: str) -> None:
        self._items.append((order, len(self._items), Problem("", "", "", "", message, source)))

    def raise_if_any(self) -> None:
        if self._items:
            raise ManifestError([problem for _, _, problem in sorted(self._items, key=_position)])


def _position(entry: tuple[int, int, Problem]) -> tuple[int, int]:
    return entry[0], entry[1]


def _raw_kind(raw: Any) -> str:
    kind = raw.get("kind") if isinstance(raw, Mapping) else None
    return kind if isinstance(kind, str) else ""


def load_manifests(paths: Sequence[str], *, scheduler_name: str) -> Inventory:
    """Read, validate and convert every object in `paths`, or raise ManifestError."""
    if isinstance(paths, str):
        paths = [paths]  # a lone path would otherwise be read character by character
    problems = _Problems()
    docs: list[_Document] = []
    for index, path in enumerate(paths):
        docs.extend(_read_file(path, problems, first_order=index * _PER_FILE))
    by_kind = _classify(docs, problems)
    inventory = Inventory(scheduler_name=scheduler_name)

    # Priority classes first: pods and groups resolve their class names against them.
    defaults: list[tuple[_Document, PriorityClass]] = []
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
    for doc in by_kind[POD_GROUP]:
        try:
            inventory.pod_groups.append(pod_group_from_raw(doc.raw, priorities=priorities))
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


def _load_volumes(
    by_kind: dict[str, list[_Document]], book: VolumeBook, problems: _Problems
) -> None:
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
    doc: _Document,
    pod: Pod,
    node_names: set[str],
    priorities: PriorityResolver,
    problems: _Problems,
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


def _load_dra(
    by_kind: dict[str, list[_Document]], inventory: Inventory, problems: _Problems
) -> None:
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


# -- classification -----------------------------------------------------------------------------
def _classify(docs: list[_Document], problems: _Problems) -> dict[str, list[_Document]]:
    """Sort documents by kind, rejecting unknown kinds and duplicate names."""
    by_kind: dict[str, list[_Document]] = {kind: [] for kind in set(_KNOWN.values())}
    first_seen: dict[tuple[str, str, str, str], _Document] = {}
    for doc in docs:
        raw = doc.raw
        if not isinstance(raw, Mapping):
            problems.object(
                doc, "", f"expected a Kubernetes object (a mapping), got {type(raw).__name__}"
            )
            continue
        api_version, kind = raw.get("apiVersion"), raw.get("kind")
        if not isinstance(api_version, str) or not api_version:
            problems.object(doc, "apiVersion", "is required")
            continue
        if not isinstance(kind, str) or not kind:
            problems.object(doc, "kind", "is required")
            continue
        if kind.endswith("List") and "items" in raw:
            problems.object(doc, "items", "must be a list of objects")
            continue
        group = api_group(api_version)
        known = _KNOWN.get((group, kind))
        if known is None or (not group and api_version != "v1"):
            problems.object(
                doc, "", f"unsupported object {api_version}/{kind}; gangsched reads {_SUPPORTED}"
            )
            continue
        doc.kind = known
        if doc.name:
            key = (group, kind, doc.namespace, doc.name)
            first = first_seen.get(key)
            if first is not None:
                problems.object(
                    doc, "metadata.name", f"duplicate {kind}; first defined at {first.source}"
                )
                continue
            first_seen[key] = doc
        by_kind[known].append(doc)
    return by_kind


_Emit = Callable[[Any, str], None]


# -- reading files ------------------------------------------------------------------------------
def _read_file(path: str, problems: _Problems, *, first_order: int) -> list[_Document]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        problems.file(first_order, path, f"cannot read the file: {reason}")
        return []
    docs: list[_Document] = []

    def emit(raw: Any, source: str) -> None:
        docs.append(_Document(raw=raw, source=source, order=first_order + len(docs)))

    if path.endswith(".json"):
        _read_json(path, text, emit, problems, first_order)
    elif text.lstrip().startswith(("{", "[")) and _is_json(text):
        _read_json(path, text, emit, problems, first_order)  # JSON without the suffix
    else:
        _read_yaml(path, text, emit, problems, first_order)
    return docs


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False  # maybe YAML flow style; the YAML reader reports real errors
    return True


def _read_json(path: str, text: str, emit: _Emit, problems: _Problems, order: int) -> None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        problems.file(
            order, f"{path}:{error.lineno}", f"invalid JSON: {error.msg} (column {error.colno})"
        )
        return
    entries = data if isinstance(data, list) else [data]
    for index, entry in enumerate(entries):
        source = f"{path}[{index}]" if isinstance(data, list) else path
        for raw, suffix in _expand(entry):
            emit(raw, f"{source}{suffix}")


def _read_yaml(path: str, text: str, emit: _Emit, problems: _Problems, order: int) -> None:
    loader = yaml.SafeLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                break
            raw = loader.construct_document(node)
            if raw is None:
                continue  # empty document (a stray "---")
            line = node.start_mark.line + 1
            item_lines = _item_lines(node)
            for index, (item, suffix) in enumerate(_expand(raw)):
                if suffix and index < len(item_lines):
                    emit(item, f"{path}:{item_lines[index]}")
                else:
                    emit(item, f"{path}:{line}{suffix}")
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        reason = getattr(error, "problem", None) or str(error)
        context = getattr(error, "context", None)
        context_mark = getattr(error, "context_mark", None)
        if context and context_mark is not None and context_mark is not mark:
            context += f" that started at line {context_mark.line + 1}"
        message = f"invalid YAML: {reason}" + (f" ({context})" if context else "")
        problems.file(order + _PER_FILE - 1, where, message)
    finally:
        loader.dispose()


def _item_lines(node: yaml.Node) -> list[int]:
    """Lines of the entries of a List document's `items`, for precise problem locations."""
    if not isinstance(node, yaml.MappingNode):
        return []
    for key, value in node.value:
        if (
            isinstance(key, yaml.ScalarNode)
            and key.value == "items"
            and isinstance(value, yaml.SequenceNode)
        ):
            return [entry.start_mark.line + 1 for entry in value.value]
    return []


def _expand(raw: Any) -> Iterator[tuple[Any, str]]:
    """A List (or PodList...) yields its items; API list responses omit the items' kind."""
    kind = _raw_kind(raw)
    if not (isinstance(raw, Mapping) and kind.endswith("List") and "items" in raw):
        yield raw, ""
        return
    items = raw.get("items") or []
    if not isinstance(items, list):
        yield raw, ""  # classified as a malformed list
        return
    item_kind = kind[: -len("List")]
    for index, entry in enumerate(items):
        if item_kind and isinstance(entry, Mapping) and "kind" not in entry:
            yield (
                {"apiVersion": raw.get("apiVersion"), "kind": item_kind, **entry},
                f" items[{index}]",
            )
        else:
            yield entry, f" items[{index}]"
