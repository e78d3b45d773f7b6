"""The input files of `gangsched simulate` as documents: read, expanded, sorted by kind.

Input is what users already have: `kubectl get -o yaml` dumps (kind List, or PodList items
without kind), multi-document YAML files, JSON. Each document remembers where it came from
(file:line, the List item), so every problem is reported at its place; problems are collected
in input order and raised together as one ManifestError.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gangsched.core.api import InvalidObject, Problem
from gangsched.core.api.dialects import POD_GROUP_API_GROUPS, api_group

NAMESPACE, NODE, POD = "Namespace", "Node", "Pod"
PRIORITY_CLASS, PDB, POD_GROUP = "PriorityClass", "PodDisruptionBudget", "PodGroup"
#: scheduling.k8s.io Workloads are PodGroup templates for controllers (a Job creates its PodGroup
#: from one); kube-scheduler never reads them, so neither does simulate, but dumps contain them.
WORKLOAD = "Workload"
#: scheduling.k8s.io/v1alpha3 CompositePodGroup: a level of a PodGroup tree (KEP-6012).
COMPOSITE = "CompositePodGroup"
PVC, PV, STORAGE_CLASS = "PersistentVolumeClaim", "PersistentVolume", "StorageClass"
CSI_NODE, CSI_DRIVER, CSI_CAPACITY = "CSINode", "CSIDriver", "CSIStorageCapacity"
DEVICE_CLASS, RESOURCE_SLICE = "DeviceClass", "ResourceSlice"
RESOURCE_CLAIM, CLAIM_TEMPLATE = "ResourceClaim", "ResourceClaimTemplate"
RESOURCE_GROUP = "resource.k8s.io"
#: Koordinator's cluster-scoped layer map read by its network-topology-spec PodGroup annotation.
NETWORK_TOPOLOGY = "ClusterNetworkTopology"

#: (API group, kind) the loader understands. The core group must be version v1.
KNOWN_KINDS: dict[tuple[str, str], str] = {
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
    ("scheduling.k8s.io", COMPOSITE): COMPOSITE,
    ("scheduling.koordinator.sh", NETWORK_TOPOLOGY): NETWORK_TOPOLOGY,
    **{
        (RESOURCE_GROUP, kind): kind
        for kind in (DEVICE_CLASS, RESOURCE_SLICE, RESOURCE_CLAIM, CLAIM_TEMPLATE)
    },
}
_NAMESPACED = {
    POD,
    PDB,
    POD_GROUP,
    WORKLOAD,
    COMPOSITE,
    PVC,
    CSI_CAPACITY,
    RESOURCE_CLAIM,
    CLAIM_TEMPLATE,
}
#: Orders problems by file, then by position in the file; file-level errors sort last.
PER_FILE = 10**9
_SUPPORTED = (
    "v1 Namespace, Node, Pod, PersistentVolumeClaim, PersistentVolume; scheduling.k8s.io "
    "PriorityClass; policy PodDisruptionBudget; storage.k8s.io StorageClass, CSINode, "
    "CSIDriver, CSIStorageCapacity; PodGroup of scheduling.sigs.k8s.io, scheduling.x-k8s.io, "
    "scheduling.k8s.io or scheduling.volcano.sh; scheduling.k8s.io/v1alpha3 CompositePodGroup; "
    "scheduling.k8s.io Workload (read and ignored, as kube-scheduler does); "
    "resource.k8s.io/v1 DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate; "
    "scheduling.koordinator.sh/v1alpha1 ClusterNetworkTopology"
)


class ManifestError(ValueError):
    """The input cannot be simulated; `problems` lists everything wrong, in input order."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        header = f"{count} problem{'s' if count != 1 else ''} in the input"
        super().__init__("\n".join([header, *(str(problem) for problem in self.problems)]))


@dataclass(slots=True)
class Document:
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


class Problems:
    """Problems tagged with the input position of their document, reported in input order."""

    def __init__(self) -> None:
        self._items: list[tuple[int, int, Problem]] = []

    def add(self, doc: Document, problem: Problem) -> None:
        self._items.append(
            (doc.order, len(self._items), dataclasses.replace(problem, source=doc.source))
        )

    def object(self, doc: Document, field: str, message: str) -> None:
        self.add(
            doc, Problem(doc.kind or _raw_kind(doc.raw), doc.namespace, doc.name, field, message)
        )

    def invalid(self, doc: Document, error: InvalidObject) -> None:
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


# -- classification -----------------------------------------------------------------------------
def classify(docs: list[Document], problems: Problems) -> dict[str, list[Document]]:
    """Sort documents by kind, rejecting unknown kinds and duplicate names."""
    by_kind: dict[str, list[Document]] = {kind: [] for kind in set(KNOWN_KINDS.values())}
    first_seen: dict[tuple[str, str, str, str], Document] = {}
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
        known = KNOWN_KINDS.get((group, kind))
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
def read_file(path: str, problems: Problems, *, first_order: int) -> list[Document]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        problems.file(first_order, path, f"cannot read the file: {reason}")
        return []
    docs: list[Document] = []

    def emit(raw: Any, source: str) -> None:
        docs.append(Document(raw=raw, source=source, order=first_order + len(docs)))

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


def _read_json(path: str, text: str, emit: _Emit, problems: Problems, order: int) -> None:
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


def _read_yaml(path: str, text: str, emit: _Emit, problems: Problems, order: int) -> None:
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
        problems.file(order + PER_FILE - 1, where, message)
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
