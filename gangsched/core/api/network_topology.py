"""Koordinator's network topology: the cluster-scoped `ClusterNetworkTopology` that names
layers after node labels, and the PodGroup annotation
`gang.scheduling.koordinator.sh/network-topology-spec` whose gather rules name those layers.

Koordinator's PodGroups say "gather on BlockLayer", not "gather on a label"; only the
ClusterNetworkTopology (scheduling.koordinator.sh/v1alpha1) says which node label a layer is.
Both are reduced here to the one `TopologyRequest` placement understands:
- the finest MustGather layer is the required key (a coarser MustGather is implied by it);
- Koordinator's solver then descends from the gather domain to the deepest layer that still
  holds the whole gang (down to a single node), so every layer finer than the required one is
  a preferred key, finest first, whether or not the annotation lists it as PreferGather.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import Reader, child, item
from gangsched.core.topology.request import GatherRule, TopologyRequest, label_key_problem

NETWORK_TOPOLOGY_SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
NETWORK_TOPOLOGY_API = "scheduling.koordinator.sh/v1alpha1"
#: Built into Koordinator: the whole cluster and a single node.
CLUSTER_LAYER, NODE_LAYER = "ClusterTopologyLayer", "NodeTopologyLayer"
HOSTNAME = "kubernetes.io/hostname"
MUST_GATHER, PREFER_GATHER = "MustGather", "PreferGather"
_SPEC = "spec.networkTopologySpec"
#: Where the gang's rules are written (on a PodGroup, or on an annotation gang's pods).
ORIGIN = child("metadata.annotations", NETWORK_TOPOLOGY_SPEC)
_RULES = child(ORIGIN, "gatherStrategy")


@dataclass(frozen=True, slots=True)
class NetworkTopology:
    """Layers by name: the node label each one is (None for the whole cluster) and its
    parent layer. Built from every ClusterNetworkTopology object of the cluster."""

    keys: Mapping[str, str | None] = field(
        default_factory=lambda: {CLUSTER_LAYER: None, NODE_LAYER: HOSTNAME}
    )
    parents: Mapping[str, str] = field(default_factory=dict)

    def depth(self, layer: str) -> int:
        """Distance from the whole cluster: finer layers are deeper; a layer without a parent
        hangs from the cluster (cycles stop at their length)."""
        if layer == NODE_LAYER:  # the leaf, whichever layer names it as child
            return len(self.keys) + 1
        depth, seen = 0, {layer}
        while layer in self.parents and self.parents[layer] not in seen:
            layer = self.parents[layer]
            seen.add(layer)
            depth += 1
        return depth if layer == CLUSTER_LAYER else depth + 1

    def finest_first(self) -> list[str]:
        return sorted(self.keys, key=lambda name: (-self.depth(name), name))


def network_topology_from_raw(raws: Iterable[Mapping[str, Any]]) -> NetworkTopology:
    """Every ClusterNetworkTopology of the cluster into one layer map; raises InvalidObject
    naming the object and field of the first malformed one (a layer defined twice with two
    different labels is refused too: placement would not know which one is meant)."""
    keys: dict[str, str | None] = {CLUSTER_LAYER: None, NODE_LAYER: HOSTNAME}
    parents: dict[str, str] = {}
    defined_by: dict[str, str] = {}
    for raw in raws:
        r = Reader.for_object("ClusterNetworkTopology", raw, namespaced=False)
        spec = r.mapping(r.raw.get("spec"), "spec")
        for index, entry_raw in enumerate(r.items(spec.get("networkTopologySpec"), _SPEC)):
            entry_field = item(_SPEC, index)
            entry = r.mapping(entry_raw, entry_field)
            layer = r.string(entry.get("topologyLayer"), child(entry_field, "topologyLayer"))
            if not layer:
                r.add(child(entry_field, "topologyLayer"), "is required")
                continue
            parent = r.string(
                entry.get("parentTopologyLayer"), child(entry_field, "parentTopologyLayer")
            )
            labels = r.strings(entry.get("labelKey"), child(entry_field, "labelKey"))
            key: str | None = keys.get(layer) if layer in (CLUSTER_LAYER, NODE_LAYER) else None
            if len(labels) > 1:
                r.add(
                    child(entry_field, "labelKey"),
                    f"names {len(labels)} labels; gangsched supports one label per layer",
                )
            elif labels:
                problem = label_key_problem(labels[0])
                if problem is not None:
                    r.add(item(child(entry_field, "labelKey"), 0), problem)
                key = labels[0]
            elif layer not in (CLUSTER_LAYER, NODE_LAYER):
                r.add(child(entry_field, "labelKey"), f"is required for layer {show(layer)}")
            if layer in defined_by and keys.get(layer) != key:
                r.add(
                    child(entry_field, "labelKey"),
                    f"layer {show(layer)} is already {show(keys.get(layer))} in "
                    f"ClusterNetworkTopology {show(defined_by[layer])}",
                )
            keys[layer] = key
            defined_by[layer] = r.name
            if parent:
                parents[layer] = parent
        r.done()
    return NetworkTopology(keys=keys, parents=parents)


def read_koordinator_topology(
    r: Reader, annotations: Mapping[str, str], network: NetworkTopology | None
) -> TopologyRequest | None:
    """The PodGroup's network-topology-spec annotation, resolved against the cluster's
    layers. A layer no ClusterNetworkTopology defines is refused with the layers that exist."""
    before = len(r.problems)
    rules = read_gather_rules(r, annotations)
    if not rules or len(r.problems) > before:
        return None
    request, problems = resolve_gather_rules(rules, network)
    for field_name, message in problems:
        r.add(field_name, message)
    return request


def read_gather_rules(r: Reader, annotations: Mapping[str, str]) -> tuple[GatherRule, ...]:
    """The annotation's gather rules as written (JSON and field checks only; which label a
    layer is depends on the cluster's layers, see `resolve_gather_rules`)."""
    raw = annotations.get(NETWORK_TOPOLOGY_SPEC)
    if raw is None:
        return ()
    try:
        spec = json.loads(raw)
    except ValueError as error:
        r.add(ORIGIN, f"is not JSON: {error}")
        return ()
    body = r.mapping(spec, ORIGIN)
    for extra in sorted(set(body) - {"gatherStrategy"}):
        r.add(child(ORIGIN, str(extra)), f"unknown field {show(extra)}; use gatherStrategy")
    rules: list[GatherRule] = []
    for index, rule_raw in enumerate(r.items(body.get("gatherStrategy"), _RULES)):
        rule_field = item(_RULES, index)
        rule = r.mapping(rule_raw, rule_field)
        layer = r.string(rule.get("layer"), child(rule_field, "layer"))
        strategy = r.string(rule.get("strategy"), child(rule_field, "strategy"))
        if strategy not in (MUST_GATHER, PREFER_GATHER):
            r.add(
                child(rule_field, "strategy"),
                f"{show(strategy)} is not a gather strategy; use {MUST_GATHER} or {PREFER_GATHER}",
            )
        multiple = rule.get("podCountMultiple")
        if multiple is not None and multiple != 1:
            r.add(
                child(rule_field, "podCountMultiple"),
                f"{show(multiple)} is not supported (gangsched places whole gangs per domain)",
            )
        rules.append(GatherRule(layer=layer, must=strategy == MUST_GATHER))
    return tuple(rules)


def resolve_gather_rules(
    rules: tuple[GatherRule, ...], network: NetworkTopology | None
) -> tuple[TopologyRequest | None, list[tuple[str, str]]]:
    """The constraint the rules ask for on the cluster's layers, or the problems (field,
    message) when they name layers the cluster does not define:
    - the finest MustGather layer is the required key (a coarser MustGather is implied by it);
    - every layer finer than it is preferred, finest first (Koordinator's solver descends to
      the deepest layer that still holds the whole gang)."""
    if not rules:
        return None, []
    if network is None:
        return None, [
            (
                ORIGIN,
                f"names layers, but no ClusterNetworkTopology ({NETWORK_TOPOLOGY_API}) defines any",
            )
        ]
    problems: list[tuple[str, str]] = []
    must: list[str] = []
    for index, rule in enumerate(rules):
        if rule.layer not in network.keys:
            defined = ", ".join(network.finest_first())
            problems.append(
                (
                    child(item(_RULES, index), "layer"),
                    f"{show(rule.layer)} is not a layer of the ClusterNetworkTopology; "
                    f"defined: {defined}",
                )
            )
        elif rule.must:
            must.append(rule.layer)
    if problems:
        return None, problems
    required_layer = max(must, key=network.depth, default=None)
    floor = network.depth(required_layer) if required_layer is not None else -1
    preferred = tuple(
        key
        for layer in network.finest_first()
        if network.depth(layer) > floor and (key := network.keys[layer]) is not None
    )
    required = network.keys[required_layer] if required_layer is not None else None
    if required is None and not preferred:
        return None, []
    return TopologyRequest(required=required, preferred=preferred, origin=ORIGIN), []
