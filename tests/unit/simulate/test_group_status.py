"""simulate shows each PodGroup's status as the live scheduler writes it, per dialect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gangsched.core.cluster import ClusterState
from gangsched.core.scheduler import SchedulerConfig
from gangsched.simulate.loader import load_manifests
from gangsched.simulate.runner import simulate

NODE = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "2", memory: 8Gi, pods: "110"}}
"""


def pod(name: str, *, cpu: str, group: str = "", label: str = "") -> str:
    link = f"schedulingGroup: {{podGroupName: {group}}}, " if group else ""
    labels = f", labels: {{{label}}}" if label else ""
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}{labels}}}\n"
        f"spec: {{schedulerName: gangsched, {link}"
        f"containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}\n"
    )


def upstream_group(name: str, min_count: int, version: str = "v1beta1") -> str:
    return (
        f"apiVersion: scheduling.k8s.io/{version}\nkind: PodGroup\n"
        f"metadata: {{name: {name}, generation: 2}}\n"
        f"spec: {{schedulingPolicy: {{gang: {{minCount: {min_count}}}}}}}\n"
    )


def run(tmp_path: Path, *docs: str) -> dict[str, Any]:
    path = tmp_path / "in.yaml"
    path.write_text("---\n".join([NODE, *docs]))
    inventory = load_manifests([str(path)], scheduler_name="gangsched")
    cluster = ClusterState.build(
        scheduler_name="gangsched",
        nodes=inventory.nodes,
        pods=inventory.pods,
        groups=inventory.pod_groups,
        priority_classes=inventory.priority_classes,
    )
    result = simulate(cluster, SchedulerConfig())
    groups: dict[str, Any] = result.as_dict()["podGroups"]  # type: ignore[assignment]
    return groups


def condition(group: dict[str, Any]) -> tuple[str, str, str]:
    (only,) = group["conditions"]
    return only["type"], only["status"], only["reason"]


def test_upstream_groups_get_kube_schedulers_condition(tmp_path: Path) -> None:
    groups = run(
        tmp_path,
        upstream_group("fits", 2),
        upstream_group("big", 2, "v1alpha3"),
        pod("a1", cpu="500m", group="fits"),
        pod("a2", cpu="500m", group="fits"),
        pod("b1", cpu="2", group="big"),
        pod("b2", cpu="2", group="big"),
    )
    assert condition(groups["default/fits"]) == ("PodGroupInitiallyScheduled", "True", "Scheduled")
    assert condition(groups["default/big"]) == (
        "PodGroupInitiallyScheduled",
        "False",
        "Unschedulable",
    )


def test_upstream_condition_stays_true_when_an_extra_member_fails(tmp_path: Path) -> None:
    groups = run(
        tmp_path,
        upstream_group("g", 1),
        pod("g1", cpu="1500m", group="g"),
        pod("g2", cpu="1500m", group="g"),  # extra member: no room left
    )
    assert condition(groups["default/g"]) == ("PodGroupInitiallyScheduled", "True", "Scheduled")


def test_x_k8s_groups_get_scheduler_plugins_phases(tmp_path: Path) -> None:
    x_group = (
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
        "metadata: {name: xg}\nspec: {minMember: 2}\n"
    )
    label = "scheduling.x-k8s.io/pod-group: xg"
    groups = run(
        tmp_path,
        x_group,
        pod("x1", cpu="100m", label=label),
        pod("x2", cpu="100m", label=label),
    )
    # Bound but not running: scheduler-plugins says Scheduling (ours would say Scheduled).
    assert groups["default/xg"]["phase"] == "Scheduling"
    assert "conditions" not in groups["default/xg"]
