"""What a PodGroup asks of topology, whichever dialect it was written in.

Upstream (KEP-5732) has one hard key; our CRD adds a preferred level; Koordinator and KAI
have gather layers. All of them reduce to: a required label key (the gang must sit inside one
value of it, or nowhere), and preferred keys tried first, finest first, before climbing to the
required level (or to the whole cluster when nothing is required).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A gang's topology constraint. `required` is a node label key or None; `preferred`
    holds label keys tried before it, finest first. `origin` names the field it came from
    (messages and `explain` quote it)."""

    required: str | None = None
    preferred: tuple[str, ...] = ()
    origin: str = ""
    #: Why the constraint cannot be honoured (a Koordinator annotation gang naming a layer
    #: no ClusterNetworkTopology defines): the gang is not placed, and says this.
    problem: str = ""

    @property
    def levels(self) -> tuple[str | None, ...]:
        """Keys in the order placement tries them; a trailing None is the whole cluster
        (only when nothing is required)."""
        ordered: list[str | None] = [key for key in self.preferred if key != self.required]
        ordered.append(self.required)
        return tuple(ordered)

    def describe(self) -> str:
        parts = []
        if self.required:
            parts.append(f"required {self.required}")
        if self.preferred:
            parts.append(f"preferred {', '.join(self.preferred)}")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class GatherRule:
    """One rule of Koordinator's network-topology-spec: gather the gang on `layer`, as a
    must (MustGather) or a preference (PreferGather). Layers are names; the cluster's
    ClusterNetworkTopology says which node label each one is."""

    layer: str
    must: bool


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a valid label key (the API server's qualified-name rule), or None."""
    if not key:
        return "must be a non-empty label key"
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return f"{key!r} has an empty prefix before '/'"
    if len(name) > 63 or not _NAME.match(name):
        return (
            f"{key!r} is not a valid label key: the name part must be 63 characters or less, "
            "alphanumeric, '-', '_' or '.', starting and ending with an alphanumeric character"
        )
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"{key!r} is not a valid label key: the prefix must be a DNS subdomain"
    return None
