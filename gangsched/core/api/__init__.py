"""Raw Kubernetes JSON in, the scheduler's model out, with every problem reported at once.

Pure: used by the informers (gangsched.edge) and the manifest loader (gangsched.simulate).
"""

from __future__ import annotations

from gangsched.core.api.errors import InvalidObject, Problem
from gangsched.core.api.inventory import Inventory
from gangsched.core.api.nodes import namespace_from_raw, node_from_raw
from gangsched.core.api.podgroups import pod_group_from_raw
from gangsched.core.api.pods import pod_from_raw
from gangsched.core.api.policy import (
    compute_disruptions_allowed,
    has_reported_disruptions,
    pdb_from_raw,
)
from gangsched.core.api.priority import (
    PriorityResolver,
    UnknownPriorityClass,
    priority_class_from_raw,
)
from gangsched.core.api.selectors import label_selector_from_raw, node_selector_term_from_raw

__all__ = [
    "InvalidObject",
    "Inventory",
    "PriorityResolver",
    "Problem",
    "UnknownPriorityClass",
    "compute_disruptions_allowed",
    "has_reported_disruptions",
    "label_selector_from_raw",
    "namespace_from_raw",
    "node_from_raw",
    "node_selector_term_from_raw",
    "pdb_from_raw",
    "pod_from_raw",
    "pod_group_from_raw",
    "priority_class_from_raw",
]
