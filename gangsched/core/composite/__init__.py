"""CompositePodGroups (scheduling.k8s.io/v1alpha3, KEP-6012): gangs of gangs.

A tree of CompositePodGroups with PodGroups as leaves is scheduled as one unit from its root:
`tree` builds and checks it, `readiness` decides when the root may be tried, `placement`
places every level in one cycle (all or nothing per level), `status` writes the
`CompositePodGroupInitiallyScheduled` condition. Pods only ever join leaf PodGroups.
"""
