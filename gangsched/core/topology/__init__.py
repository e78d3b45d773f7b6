"""Topology-aware gang placement (issue 14): keep a gang inside one domain of a node label.

`request` is the one internal model every dialect is read into; `domains` groups nodes into
candidate domains; `domain_filter` confines members to one; `placement` runs the real gang
cycle per domain and picks the tightest feasible one. Preemption across domains lives with
the other preemption strategies (`gangsched.core.preemption.domains`).
"""
