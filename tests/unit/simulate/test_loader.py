"""load_manifests: every input shape users have, and every problem reported at once."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gangsched.core.model import PREEMPT_NEVER, Dialect, DisruptionMode, GroupRef
from gangsched.simulate.loader import ManifestError, load_manifests

SCENARIOS = Path("/work/shared/scenarios")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "manifests"
SCHEDULER = "gangsched"

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: n1
status:
  allocatable: {cpu: "4", memory: 8Gi}
"""


def write(tmp_path: Path, text: str, name: str = "input.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def problems(*paths: str) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        load_manifests(paths, scheduler_name=SCHEDULER)
    return [str(problem) for problem in caught.value.problems]


def pod(name: str, extra_spec: str = "", namespace: str = "default") -> str:
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata:
          name: {name}
          namespace: {namespace}
        spec:
          schedulerName: gangsched
          containers:
          - name: main
        """) + textwrap.indent(textwrap.dedent(extra_spec), "  ")


# -- inputs that load ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path",
    sorted(SCENARIOS.glob("*.yaml")) if SCENARIOS.is_dir() else [],
    ids=lambda path: path.name,
)
def test_every_acceptance_scenario_loads(path: Path) -> None:
    inventory = load_manifests([str(path)], scheduler_name=SCHEDULER)
    assert inventory.nodes and inventory.pods
    assert inventory.scheduler_name == SCHEDULER
    assert "default" in inventory.namespaces
    pending = [p for p in inventory.pods if p.node_name is None]
    assert pending and all(p.scheduler_name == SCHEDULER for p in pending)


def test_scenario_details() -> None:
    if not SCENARIOS.is_dir():
        pytest.skip("shared scenarios not available")
    seed = load_manifests([str(SCENARIOS / "seed-job-preemption.yaml")], scheduler_name=SCHEDULER)
    workers = {p.name: p for p in seed.pods}
    assert workers["hp-worker-1"].priority == 1_000_000
    assert workers["hp-worker-1"].requests == {"cpu": 3000, "memory": 40 * 1024**2}
    assert workers["hp-worker-1"].group == GroupRef(Dialect.SIGS, "default", "hp-training-job")
    assert workers["lp-pod-1"].node_name == "cn-beijing.1"
    (group,) = seed.pod_groups
    assert (group.min_member, group.schedule_timeout_seconds) == (2, 300)

    all_mode = load_manifests([str(SCENARIOS / "wap-victim-all-mode.yaml")], scheduler_name="x")
    (victims,) = all_mode.pod_groups
    assert victims.disruption_mode is DisruptionMode.ALL
    assert victims.priority == 10

    pdb = load_manifests([str(SCENARIOS / "wap-pdb-reprieve.yaml")], scheduler_name=SCHEDULER)
    (budget,) = pdb.budgets
    assert budget.disruptions_allowed == 0  # from the reported status


def test_kind_list(tmp_path: Path) -> None:
    inventory = load_manifests([str(FIXTURES / "kind-list.yaml")], scheduler_name=SCHEDULER)
    assert [node.name for node in inventory.nodes] == ["n1"]
    assert [pod.key for pod in inventory.pods] == ["team-a/running", "team-a/pending"]
    # Namespaces only referenced still get the name label selectors rely on.
    assert inventory.namespaces == {"team-a": {"kubernetes.io/metadata.name": "team-a"}}


def test_typed_list_json_without_item_kinds() -> None:
    inventory = load_manifests([str(FIXTURES / "podlist.json")], scheduler_name=SCHEDULER)
    p1, p2 = inventory.pods
    assert (p1.key, p1.uid, p1.requests) == ("default/p1", "u1", {"cpu": 250})
    assert (p2.key, p2.scheduler_name) == ("default/p2", "default-scheduler")


def test_json_object_and_array(tmp_path: Path) -> None:
    node = '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n%d"}}'
    single = write(tmp_path, node % 1, "one.json")
    array = write(tmp_path, f"[{node % 2}, {node % 3}]", "many.json")
    inventory = load_manifests([single, array], scheduler_name=SCHEDULER)
    assert [n.name for n in inventory.nodes] == ["n1", "n2", "n3"]


def test_every_dialect_in_one_file() -> None:
    inventory = load_manifests([str(FIXTURES / "dialects.yaml")], scheduler_name=SCHEDULER)
    assert inventory.namespaces["ml"] == {"team": "research", "kubernetes.io/metadata.name": "ml"}
    groups = {group.ref: group for group in inventory.pod_groups}
    trainer = groups[GroupRef(Dialect.SIGS, "ml", "trainer")]
    assert trainer.gang_group == (
        GroupRef(Dialect.SIGS, "ml", "trainer"),
        GroupRef(Dialect.SIGS, "ml", "ps"),
    )
    assert (trainer.priority, trainer.disruption_mode) == (1000, DisruptionMode.ALL)
    assert groups[GroupRef(Dialect.X_K8S, "ml", "trainer")].min_member == 3
    upstream = groups[GroupRef(Dialect.UPSTREAM, "ml", "upstream-gang")]
    assert (upstream.min_member, upstream.disruption_mode) == (4, DisruptionMode.ALL)
    assert (upstream.priority, upstream.preemption_policy) == (100, PREEMPT_NEVER)

    pods = {p.name: p for p in inventory.pods}
    assert pods["sigs-member"].group == GroupRef(Dialect.SIGS, "ml", "trainer")
    assert pods["sigs-member"].requests == {"nvidia.com/gpu": 1}  # defaulted from the limit
    assert pods["x-k8s-member"].group == GroupRef(Dialect.X_K8S, "ml", "trainer")
    assert pods["upstream-member"].group == GroupRef(Dialect.UPSTREAM, "ml", "upstream-gang")
    assert pods["koord-member"].group == GroupRef(Dialect.KOORDINATOR, "ml", "annotation-gang")
    assert pods["koord-member"].annotation_min_available == 2
    # A pod naming a PodGroup that does not exist loads fine.
    assert pods["orphan"].group == GroupRef(Dialect.SIGS, "ml", "does-not-exist")
    # The global default class applies to pods without a class.
    assert (pods["x-k8s-member"].priority, pods["x-k8s-member"].preemption_policy) == (
        100,
        PREEMPT_NEVER,
    )


def test_empty_documents_and_comments_are_skipped(tmp_path: Path) -> None:
    path = write(tmp_path, f"---\n# nothing\n---\n{NODE}---\n---\n")
    assert len(load_manifests([path], scheduler_name=SCHEDULER).nodes) == 1
    assert load_manifests([write(tmp_path, "", "empty.yaml")], scheduler_name=SCHEDULER).pods == []


def test_priority_classes_may_come_after_their_users(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        pod("p", "priorityClassName: late\n")
        + "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
        "metadata: {name: late}\nvalue: 5\n",
    )
    (loaded,) = load_manifests([path], scheduler_name=SCHEDULER).pods
    assert loaded.priority == 5


def test_disruptions_allowed_computed_when_status_is_absent(tmp_path: Path) -> None:
    guarded = "\n".join(
        pod(f"db-{i}", "nodeName: n1\n").replace("metadata:\n", "metadata:\n  labels: {app: db}\n")
        for i in range(3)
    )
    terminating = pod("db-old", "nodeName: n1\n").replace(
        "metadata:\n",
        "metadata:\n  labels: {app: db}\n  deletionTimestamp: '2026-01-01T00:00:00Z'\n",
    )
    pending = pod("db-new").replace("metadata:\n", "metadata:\n  labels: {app: db}\n")
    other_ns = pod("db-x", "nodeName: n1\n", namespace="other").replace(
        "metadata:\n", "metadata:\n  labels: {app: db}\n"
    )
    budget = """\
        apiVersion: policy/v1
        kind: PodDisruptionBudget
        metadata: {name: db}
        spec:
          minAvailable: 2
          selector: {matchLabels: {app: db}}
        """
    docs = [NODE, *guarded.split("\n\n"), terminating, pending, other_ns, textwrap.dedent(budget)]
    path = write(tmp_path, "---\n".join(doc if doc.endswith("\n") else doc + "\n" for doc in docs))
    (loaded,) = load_manifests([path], scheduler_name=SCHEDULER).budgets
    assert loaded.disruptions_allowed == 1  # 3 healthy bound pods, 2 must stay


# -- problems -----------------------------------------------------------------------------------
def test_broken_yaml_names_file_and_line() -> None:
    path = str(FIXTURES / "broken.yaml")
    assert problems(path) == [
        f"{path}:11: invalid YAML: expected ',' or '}}', but got ':' "
        "(while parsing a flow mapping that started at line 10)"
    ]


def test_invalid_json_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "kind": "Node",\n  oops\n}', "bad.json")
    assert problems(path) == [
        f"{path}:3: invalid JSON: Expecting property name enclosed in double quotes (column 3)"
    ]


def test_unreadable_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.yaml")
    assert problems(missing) == [f"{missing}: cannot read the file: No such file or directory"]


def test_unknown_kinds_and_versions(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web, namespace: prod}
        ---
        apiVersion: v2
        kind: Pod
        metadata: {name: p}
        ---
        apiVersion: batch/v1
        kind: Job
        metadata: {name: w}
        ---
        kind: Node
        metadata: {name: n}
        ---
        - just
        - a list
        """,
    )
    supported = (
        "gangsched reads v1 Namespace, Node, Pod, PersistentVolumeClaim, PersistentVolume; "
        "scheduling.k8s.io PriorityClass; policy PodDisruptionBudget; storage.k8s.io "
        "StorageClass, CSINode, CSIDriver, CSIStorageCapacity; PodGroup of "
        "scheduling.sigs.k8s.io, scheduling.x-k8s.io, scheduling.k8s.io or scheduling.volcano.sh; "
        "scheduling.k8s.io/v1alpha3 CompositePodGroup; scheduling.k8s.io "
        "Workload (read and ignored, as kube-scheduler does); resource.k8s.io/v1 DeviceClass, "
        "ResourceSlice, ResourceClaim, ResourceClaimTemplate; scheduling.koordinator.sh/v1alpha1 "
        "ClusterNetworkTopology"
    )
    assert problems(path) == [
        f"{path}:1: Deployment prod/web: unsupported object apps/v1/Deployment; {supported}",
        f"{path}:5: Pod p: unsupported object v2/Pod; {supported}",
        f"{path}:9: Job w: unsupported object batch/v1/Job; {supported}",
        f"{path}:13: Node n: apiVersion: is required",
        f"{path}:16: expected a Kubernetes object (a mapping), got list",
    ]


def test_workloads_are_read_and_ignored(tmp_path: Path) -> None:
    # A 1.37 namespace dump: the Workload a Job created, its PodGroup and the pods.
    path = write(
        tmp_path,
        NODE
        + """\
---
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: job-1, namespace: ml}
spec:
  controllerRef: {apiGroup: batch, kind: Job, name: job-1}
  podGroupTemplates:
  - name: workers
    schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: job-1-workers, namespace: ml}
spec:
  workloadRef: {workloadName: job-1, templateName: workers}
  schedulingPolicy: {gang: {minCount: 2}}
""",
    )
    inventory = load_manifests([path], scheduler_name=SCHEDULER)
    assert [g.ref for g in inventory.pod_groups] == [
        GroupRef(Dialect.UPSTREAM, "ml", "job-1-workers")
    ]
    nameless = write(
        tmp_path, "apiVersion: scheduling.k8s.io/v1alpha3\nkind: Workload\nspec: {}\n", "w.yaml"
    )
    assert problems(nameless) == [
        f"{nameless}:1: Workload default/<unnamed>: metadata.name: is required"
    ]


def test_duplicates_name_the_first_definition(tmp_path: Path) -> None:
    first = write(tmp_path, NODE + "---\n" + pod("web"), "a.yaml")
    second = write(
        tmp_path,
        NODE + "---\n" + pod("web") + "---\n" + pod("web", namespace="other"),
        "b.yaml",
    )
    assert problems(first, second) == [
        f"{second}:1: Node n1: metadata.name: duplicate Node; first defined at {first}:1",
        f"{second}:8: Pod default/web: metadata.name: duplicate Pod; first defined at {first}:8",
    ]


def test_same_name_in_two_dialects_is_not_a_duplicate(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        apiVersion: scheduling.sigs.k8s.io/v1alpha1
        kind: PodGroup
        metadata: {name: g}
        spec: {minMember: 1}
        ---
        apiVersion: scheduling.x-k8s.io/v1alpha1
        kind: PodGroup
        metadata: {name: g}
        spec: {minMember: 1}
        """,
    )
    assert len(load_manifests([path], scheduler_name=SCHEDULER).pod_groups) == 2


def test_pod_on_unknown_node(tmp_path: Path) -> None:
    path = write(tmp_path, NODE + "---\n" + pod("web", "nodeName: n9\n"))
    assert problems(path) == [
        f'{path}:8: Pod default/web: spec.nodeName: node "n9" is not defined in the input'
    ]


def test_unknown_priority_class_names(tmp_path: Path) -> None:
    group = """\
        apiVersion: scheduling.sigs.k8s.io/v1alpha1
        kind: PodGroup
        metadata: {name: g}
        spec: {minMember: 2, priorityClassName: vip}
        """
    path = write(
        tmp_path,
        pod("a", "priorityClassName: vip\n")
        + "---\n"
        + pod("b", "priorityClassName: vip\npriority: 5\n")
        + "---\n"
        + textwrap.dedent(group),
    )
    message = 'spec.priorityClassName: no PriorityClass with name "vip" was found'
    assert problems(path) == [
        f"{path}:1: Pod default/a: {message}",
        f"{path}:12: Pod default/b: {message}",
        f"{path}:24: PodGroup default/g: {message}",
    ]


def test_only_one_global_default(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: a}
        value: 1
        globalDefault: true
        ---
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: b}
        value: 2
        globalDefault: true
        """,
    )
    assert problems(path) == [
        f'{path}:7: PriorityClass b: globalDefault: PriorityClass "a" (at {path}:1) is already '
        "marked as default; only one default can exist"
    ]


def test_bad_quantity_min_member_and_missing_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        apiVersion: v1
        kind: Node
        metadata: {name: n1}
        status:
          allocatable: {cpu: four}
        ---
        apiVersion: scheduling.sigs.k8s.io/v1alpha1
        kind: PodGroup
        metadata: {name: g, namespace: ml}
        spec: {minMember: 0}
        ---
        apiVersion: scheduling.sigs.k8s.io/v1alpha1
        kind: PodGroup
        metadata: {name: h, namespace: ml}
        spec: {}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {namespace: ml}
        spec: {}
        ---
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: novalue}
        """,
    )
    assert problems(path) == [
        f'{path}:1: Node n1: status.allocatable.cpu: "four" is not a valid quantity '
        "(e.g. 500m, 2, 1.5Gi, 1e3)",
        f"{path}:7: PodGroup ml/g: spec.minMember: must be at least 1, got 0",
        f"{path}:12: PodGroup ml/h: spec.minMember: is required",
        f"{path}:17: Pod ml/<unnamed>: metadata.name: is required",
        f"{path}:17: Pod ml/<unnamed>: spec.containers: at least one container is required",
        f"{path}:22: PriorityClass novalue: value: is required",
    ]


def test_all_problems_across_files_are_reported_together_in_input_order(tmp_path: Path) -> None:
    first = write(
        tmp_path,
        pod("a", "nodeName: nowhere\n")
        + "---\n"
        + pod("b").replace("- name: main", "- name: main\n    resources: {requests: {cpu: x}}"),
        "first.yaml",
    )
    second = write(tmp_path, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n", "second.yaml")
    third = write(tmp_path, "a: [unclosed\n", "third.yaml")
    with pytest.raises(ManifestError) as caught:
        load_manifests([first, second, third], scheduler_name=SCHEDULER)
    lines = [str(problem) for problem in caught.value.problems]
    assert [line.split(": ")[0] for line in lines] == [
        f"{first}:1",
        f"{first}:12",
        f"{second}:1",
        f"{third}:2",
    ]
    assert str(caught.value).splitlines()[0] == "4 problems in the input"
    assert all("\n" not in line for line in lines)


def test_list_item_problems_point_at_the_item(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        apiVersion: v1
        kind: List
        items:
        - apiVersion: v1
          kind: Node
          metadata: {name: ok}
        - apiVersion: v1
          kind: Node
          metadata: {name: bad}
          status: {allocatable: {memory: lots}}
        """,
    )
    assert problems(path) == [
        f'{path}:7: Node bad: status.allocatable.memory: "lots" is not a valid quantity '
        "(e.g. 500m, 2, 1.5Gi, 1e3)"
    ]


def test_malformed_list(tmp_path: Path) -> None:
    path = write(tmp_path, "apiVersion: v1\nkind: List\nitems: {a: b}\n")
    assert problems(path) == [f"{path}:1: List <unnamed>: items: must be a list of objects"]


def test_yaml_flow_style_and_suffixless_json(tmp_path: Path) -> None:
    flow = write(tmp_path, "{apiVersion: v1, kind: Node, metadata: {name: a}}\n", "flow.yaml")
    json_text = write(tmp_path, '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b"}}')
    inventory = load_manifests([flow, json_text], scheduler_name=SCHEDULER)
    assert [node.name for node in inventory.nodes] == ["a", "b"]


def test_a_single_path_string_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, NODE)
    assert len(load_manifests(path, scheduler_name=SCHEDULER).nodes) == 1


def test_pod_on_a_broken_node_reports_only_the_node(tmp_path: Path) -> None:
    path = write(
        tmp_path, NODE.replace('cpu: "4"', "cpu: four") + "---\n" + pod("p", "nodeName: n1\n")
    )
    found = problems(path)
    assert len(found) == 1 and "Node n1: status.allocatable.cpu" in found[0]
