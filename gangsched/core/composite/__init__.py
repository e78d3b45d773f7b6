"""CompositePodGroups (scheduling.k8s.io/v1alpha3, KEP-6012): gangs of gangs.

A tree of CompositePodGroups with PodGroups as leaves is scheduled as one unit from its root.
`tree` builds and checks it. `placer` is the tree placer, which places the leaves with the
topology placer; `placement` is its cycle, every level placed in one cycle or nothing of it,
built on `state` (readiness and satisfaction), `search`, `domains` (topology per level) and
`verdicts`. `status` writes the `CompositePodGroupInitiallyScheduled` condition. Pods only
ever join leaf PodGroups.
"""
