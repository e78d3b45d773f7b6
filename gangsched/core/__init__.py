"""The pure scheduling core: model, snapshot, plugins, the PodGroup cycle, queue, preemption.

Synchronous and free of I/O: it takes cluster state and returns decisions as values
(Bind, Nominate, Evict, SetCondition, Event). An import-linter contract keeps asyncio,
Kubernetes clients, kopf, logging and metrics libraries out of it.
"""
