"""Volcano's PodGroup (`scheduling.volcano.sh/v1beta1`) read as a gang.

LeaderWorkerSet (`gangSchedulingManagement.schedulerProvider: volcano`), Volcano Jobs, Spark and
Ray create these PodGroups and annotate their pods `scheduling.k8s.io/group-name`; users who
move to gangsched keep those controllers. The fields keep Volcano's meaning (volcano-sh/apis
`pkg/apis/scheduling/v1beta1/types.go`, its gang plugin):

- `minMember`: the members that must run together (0, the unset value, is a group of any size);
- `minTaskMember`: per task (a member's `volcano.sh/task-spec` annotation), how many of that
  task's members must be among them;
- `minResources`: what the gang needs free before it is tried (as scheduler-plugins');
- `priorityClassName`: the gang's priority (members carry it, as a Volcano Job's pods do).

`queue` names a Volcano Queue (capacity, fair share, reclaim): gangsched has no queues, so it
is read and ignored (the edge says so once in the log). `networkTopology` asks for placement
inside one HyperNode tier, which gangsched cannot honour, so a group naming it is refused
rather than placed across the network it wanted to avoid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangsched.core.api.errors import show
from gangsched.core.api.fields import INT32_MAX, Reader, child
from gangsched.core.api.priority import PriorityResolver, UnknownPriorityClass
from gangsched.core.model import PodGroup


def read_volcano(
    r: Reader, spec: Mapping[str, Any], group: PodGroup, priorities: PriorityResolver
) -> None:
    """Fill `group` from a scheduling.volcano.sh PodGroup's spec; problems go to `r`."""
    min_member = r.integer(spec.get("minMember"), "spec.minMember", minimum=0, maximum=INT32_MAX)
    group.min_member = max(min_member or 0, 1)
    group.min_task_members = _read_min_task_member(r, spec.get("minTaskMember"))
    group.min_resources = r.resources(spec.get("minResources"), "spec.minResources")
    r.string(spec.get("queue"), "spec.queue")
    class_name = r.string(spec.get("priorityClassName"), "spec.priorityClassName")
    if class_name:
        try:
            priority_class = priorities.resolve(class_name)
        except UnknownPriorityClass as unknown:
            r.add("spec.priorityClassName", unknown.message)
            priority_class = None
        if priority_class is not None:
            group.priority_class_name = class_name
            group.priority = priority_class.value
            group.preemption_policy = priority_class.preemption_policy
    if spec.get("networkTopology") is not None:
        r.add(
            "spec.networkTopology",
            "Volcano network-topology placement (HyperNode tiers) is not supported by "
            "gangsched; remove it to schedule the group anywhere "
            f"(got {show(spec['networkTopology'])})",
        )


def _read_min_task_member(r: Reader, raw: Any) -> dict[str, int]:
    field = "spec.minTaskMember"
    out: dict[str, int] = {}
    for task, count in r.mapping(raw, field).items():
        if not isinstance(task, str) or not task:
            r.add(field, f"task names must be non-empty strings, got {show(task)}")
            continue
        value = r.integer(count, child(field, task), minimum=0, maximum=INT32_MAX)
        if value:
            out[task] = value
    return out


def volcano_queue(raw_spec: Mapping[str, Any]) -> str:
    """The Volcano queue a PodGroup names ("default" where Volcano's CRD defaults it), or ""."""
    queue = raw_spec.get("queue")
    return queue if isinstance(queue, str) else ""
