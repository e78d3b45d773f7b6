"""Unsupported: refuse what gangsched cannot place correctly yet, rather than bind it wrong.

The API server binds whatever a scheduler asks; a pod bound without what its spec needs
never starts (a pod with resource claims waits in ContainerCreating for devices nobody
allocated, its gang half running). Such a pod is unschedulable on every node, with a message
saying what is not supported, like a kube-scheduler PreFilter rejection: no node is tried,
no preemption is attempted, and a gang that needs the pod to reach minMember binds nothing.
The pod reader lists what it found in `Pod.unsupported`.
"""

from __future__ import annotations

from gangsched.core.framework import PodContext
from gangsched.core.snapshot import Snapshot


class Unsupported:
    name = "Unsupported"

    def pre_filter(self, ctx: PodContext, snap: Snapshot) -> str | None:
        if not ctx.pod.unsupported:
            return None
        return f"gangsched does not support {' or '.join(ctx.pod.unsupported)} yet"
