"""kube-controller-manager's persistent-volume binder beside the e2e control plane.

The volume tests need the real PV controller: it binds a claim to the PV whose claimRef the
scheduler set, and to the PV a provisioner created for the selected node. When the cluster
already runs kube-controller-manager (hack/cluster-up.sh starts one where it is built), that
one is used; otherwise this module starts one with just the PV binder, as the cluster's admin.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.processes import terminate

from .conftest import Cluster


def running_in_cluster(cluster: Cluster) -> bool:
    """A kube-controller-manager started with the cluster (hack/cluster-lib.sh's PID file)."""
    for pid_file in (cluster.dir / "pids").glob("*controller-manager*.pid"):
        try:
            if Path(f"/proc/{int(pid_file.read_text().strip())}").exists():
                return True
        except ValueError:
            continue
    return False


@pytest.fixture(scope="module")
def pv_controller(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    if running_in_cluster(cluster):
        yield
        return
    binary = cluster.bin_dir / "kube-controller-manager"
    if not binary.is_file():
        pytest.fail(f"kube-controller-manager is not built in {cluster.bin_dir}")
    log = tmp_path_factory.mktemp("kcm") / "kube-controller-manager.log"
    process = subprocess.Popen(
        [
            str(binary),
            f"--kubeconfig={cluster.kubeconfig}",
            "--controllers=persistentvolume-binder-controller",
            "--leader-elect=false",
            "--secure-port=0",
            "--use-service-account-credentials=false",
            # Re-check unbound claims often (the default 15 s would slow every test).
            "--pvclaimbinder-sync-period=2s",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        yield
    finally:
        terminate(process, grace=10)
        if process.returncode not in (0, -15, None):
            print(log.read_text(errors="replace")[-3000:])
