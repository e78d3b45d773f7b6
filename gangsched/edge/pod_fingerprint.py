"""A pod update's fingerprint: what it must change for the scheduler to care, and the one
change (a bind coming back, the start that follows) that needs no conversion at all.

gangsched.edge.cache skips an update whose fingerprint did not change (most pod events are
kubelet status churn), and `rebound` answers the next most common one without converting the
pod again.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import msgspec

from gangsched.core.api.pods import POD_PHASES
from gangsched.core.model import Pod

JSON = dict[str, Any]
_ENCODE = msgspec.msgpack.Encoder().encode


class PodFingerprint(NamedTuple):
    """What a pod update must change for the scheduler to care (`pod_fingerprint`)."""

    #: Everything but `bind`.
    stable: tuple[object, ...]
    #: spec.nodeName, status.phase and status.nominatedNodeName: what a bind, the start that
    #: follows and a nomination change (`rebound`).
    bind: tuple[object, object, object]


def pod_fingerprint(obj: JSON) -> PodFingerprint:
    """What a pod update must change for the scheduler to care. The spec is immutable but
    for these fields (and in-place resize, caught by the generation), so status updates
    from kubelets -- most pod events -- are skipped without converting the pod."""
    meta, spec, status = (
        _dict(obj.get("metadata")),
        _dict(obj.get("spec")),
        _dict(obj.get("status")),
    )
    bind = (spec.get("nodeName"), status.get("phase"), status.get("nominatedNodeName"))
    stable = (
        meta.get("uid"),
        meta.get("generation"),
        meta.get("deletionTimestamp") is not None,
        spec.get("schedulerName"),
        _exact(
            meta.get("labels"),
            meta.get("annotations"),
            # A controller adopting or orphaning the pod: its owner shows in its PodGroup's
            # occupiedBy and decides which pods go together as victims. What the conversion
            # reads of each reference (gangsched.edge.wire decodes no more of a listed pod).
            _owner_keys(meta.get("ownerReferences")),
            # Removing a gate may come with a tightened nodeSelector/affinity (KEP-3838) and
            # tolerations may be added to any pod; the generation catches these where the
            # server tracks it (PodObservedGenerationTracking), the fields themselves
            # everywhere.
            spec.get("schedulingGates"),
            spec.get("nodeSelector"),
            spec.get("affinity"),
            spec.get("tolerations"),
            # The resourceclaim controller names a pod's generated claims here (DRA).
            status.get("resourceClaimStatuses"),
            # In-place resize: what containers hold now counts until the resize is done.
            [
                (c.get("name"), c.get("allocatedResources"), c.get("resources"))
                for c in (status.get("containerStatuses") or [])
                + (status.get("initContainerStatuses") or [])
                if isinstance(c, dict) and (c.get("allocatedResources") or c.get("resources"))
            ],
        ),
        status.get("resize"),
        any(
            isinstance(c, dict)
            and c.get("type") == "PodResizePending"
            and c.get("reason") == "Infeasible"
            for c in status.get("conditions") or []
        ),
        # When it became Unschedulable: where a wait for new capacity starts (capacity_wait).
        next(
            (
                c.get("lastTransitionTime")
                for c in status.get("conditions") or []
                if isinstance(c, dict)
                and c.get("type") == "PodScheduled"
                and c.get("reason") == "Unschedulable"
            ),
            None,
        ),
        # A section that is not an object reads as empty above; `rebound` would then accept
        # what the full conversion refuses (an unreadable pod must be reported, never kept).
        (type(obj.get("metadata")), type(obj.get("spec")), type(obj.get("status"))),
    )
    return PodFingerprint(stable, bind)


def rebound(cached: Pod | None, old: PodFingerprint | None, new: PodFingerprint) -> Pod | None:
    """A bound pod whose update changed only its node, phase or nomination (its bind
    coming back, then the kubelet starting it: two events per pod we bind): the cached
    model with those replaced, as converting it again would give, without the conversion
    (6% of gangsched's CPU while binding precreated gangs, py-spy, issue 30). None when
    anything else changed, or the pod is not bound, gated or being deleted."""
    if old is None or cached is None or old.stable != new.stable or cached.scheduling_gates:
        return None
    node_name, phase, nominated = new.bind
    if (
        not isinstance(node_name, str)
        or not node_name
        or (phase is not None and phase not in POD_PHASES)
        or not isinstance(nominated, str | None)
        or new.stable[2]  # deletionTimestamp set: the full conversion reads it
    ):
        return None
    return dataclasses.replace(
        cached,
        node_name=node_name,
        phase=phase or "Pending",
        nominated_node_name=nominated or None,
        terminating=False,
    )


def _owner_keys(refs: object) -> object:
    """Of each owner reference, what pod_from_raw reads (and a typed list decodes)."""
    if not isinstance(refs, list):
        return repr(refs)  # absent, or not a list: the conversion reports it
    return [(r.get("name"), r.get("controller")) if isinstance(r, dict) else repr(r) for r in refs]


def _exact(*values: object) -> bytes | str:
    """The values as one msgpack encoding: equal exactly when the values are, with the same
    JSON types (1, 1.0 and True differ, as they do in repr, and read differently), at a
    fifth of repr's cost (a listed pod's tolerations: 0.3 vs 2.7 us). Pods come from JSON,
    where nothing else occurs; a value msgpack cannot encode falls back to repr (such a
    fingerprint never equals an encoded one: the pod is converted again, never wrongly
    kept)."""
    try:
        return _ENCODE(values)
    except (TypeError, OverflowError, msgspec.EncodeError):
        return repr(values)


def _dict(value: object) -> JSON:
    return value if isinstance(value, dict) else {}
