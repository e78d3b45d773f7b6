"""Persistent volumes with kube-scheduler's semantics, inside the gang cycle.

- `model`: PVC, PV, StorageClass, CSINode, CSIDriver, CSIStorageCapacity;
- `book`: the volume state and the plan's decisions (assumed with the placements, journaled);
- `matching`: static PV matching and dynamic provisioning per node, as NumPy masks;
- plugins, one module each: `binding` (VolumeBinding), `zone` (VolumeZone), `restrictions`
  (VolumeRestrictions), `limits` (NodeVolumeLimits).

The decisions a cycle keeps leave the core as `BindVolume` and `SelectNode` values returned
with the gang's binds; the edge writes them all, waits until every claim is bound, and only
then binds the pods (gangsched.edge.prebind).
"""
