"""RBAC: the shipped ClusterRole/Role with one rule (or verb) removed. gangsched must say which
permission is missing -- an error log line naming the verb and resource, the failing operation
in gangsched_api_errors_total, and where the failure is about an object, an event on it --
instead of failing silently. Without the list of a kind it can do without (PodGroups,
CompositePodGroups, ResourceClaims) it schedules the rest and /readyz names what it lacks.

Each case runs gangsched as its own ServiceAccount bound to a trimmed copy of the shipped
roles (the shipped ones stay intact for the other tests), with the ConfigMap's config and
its own lease name.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from .conftest import Cluster
from .harness import SYSTEM_NS, Replica, eventually, install, manifest_config, manifest_docs
from .k8s import JSON, Kube, unique_name
from .workload import Gang, Workload

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


@dataclass(frozen=True)
class Case:
    id: str
    api_group: str
    resource: str
    verb: str  # the verb removed; the whole rule goes unless `only_verb`
    logged_resource: str
    operation: str  # gangsched_api_errors_total{operation=...}
    only_verb: bool = False


CASES = [
    Case("binding", "", "pods/binding", "create", "pods/binding", "bind"),
    Case("pod-status", "", "pods/status", "patch", "pods/status", "pod_status"),
    Case(
        "podgroups",
        "scheduling.sigs.k8s.io",
        "podgroups",
        "list",
        "podgroups.scheduling.sigs.k8s.io",
        "list/watch podgroups.scheduling.sigs.k8s.io",
    ),
    Case(
        "compositepodgroups",
        "scheduling.k8s.io",
        "compositepodgroups",
        "list",
        "compositepodgroups.scheduling.k8s.io",
        "list/watch compositepodgroups.scheduling.k8s.io",
    ),
    Case("events", "events.k8s.io", "events", "create", "events.events.k8s.io", "event"),
    Case(
        "claims",
        "",
        "persistentvolumeclaims",
        "list",
        "persistentvolumeclaims",
        "list/watch persistentvolumeclaims",
    ),
    Case(
        "resourceclaims",
        "resource.k8s.io",
        "resourceclaims",
        "list",
        "resourceclaims.resource.k8s.io",
        "list/watch resourceclaims.resource.k8s.io",
    ),
    Case(
        "budgets",  # gang protection's PodDisruptionBudgets (the gang "fits" runs)
        "policy",
        "poddisruptionbudgets",
        "create",
        "poddisruptionbudgets.policy",
        "create_budget",
        only_verb=True,
    ),
    Case(
        "lease-update",
        "coordination.k8s.io",
        "leases",
        "update",
        "leases.coordination.k8s.io",
        "",
        only_verb=True,
    ),
]


#: Kinds gangsched can schedule without: a forbidden list counts as empty (pods that need the
#: kind wait, nothing is bound without it) and /readyz names it; the rest is scheduled. A
#: forbidden list of any other kind holds scheduling (/readyz 503), as kube-scheduler's
#: informers do.
OPTIONAL = {"podgroups", "compositepodgroups", "resourceclaims"}

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def trimmed_roles(case: Case, name: str) -> list[JSON]:
    """The shipped RBAC objects, renamed for `name`, without the case's rule (or verb)."""
    out = []
    for original in manifest_docs():
        if original["kind"] not in RBAC_KINDS:
            continue
        doc = copy.deepcopy(original)
        doc["metadata"]["name"] = f"{name}-{doc['metadata']['name']}"
        if doc["kind"] == "ServiceAccount":
            doc["metadata"]["name"] = name
        if "roleRef" in doc:
            doc["roleRef"]["name"] = f"{name}-{doc['roleRef']['name']}"
            doc["subjects"] = [{"kind": "ServiceAccount", "name": name, "namespace": SYSTEM_NS}]
        rules = []
        for rule in doc.get("rules", []):
            matches = (
                case.api_group in rule["apiGroups"]
                and case.resource in rule["resources"]
                and case.verb in rule["verbs"]
            )
            if not matches:
                rules.append(rule)
            elif case.only_verb:
                rules.append({**rule, "verbs": [v for v in rule["verbs"] if v != case.verb]})
        if "rules" in doc:
            doc["rules"] = rules
        out.append(doc)
    return out


@pytest.fixture
async def env(cluster: Cluster, kube: Kube) -> AsyncIterator[Workload]:
    install(cluster)
    workload = Workload(kube, unique_name("rbac"))
    await workload.setup({"rbac-normal": 1000})
    await workload.add_nodes(1)
    yield workload
    await workload.cleanup()


def missing_permission_logged(replica: Replica, case: Case) -> bool:
    return any(
        r.get("event") == "missing RBAC permission"
        and r.get("level") == "error"
        and r.get("verb") == case.verb
        and r.get("resource") == case.logged_resource
        for r in replica.events()
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_a_missing_permission_is_reported_clearly(
    case: Case, cluster: Cluster, kube: Kube, env: Workload
) -> None:
    name = f"gs-rbac-{case.id}"
    for obj in trimmed_roles(case, name):
        await kube.apply(obj)
    lease = f"{name}-lease"
    await kube.delete(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NS}/leases/{lease}")
    config = manifest_config(leaderElection={"leaseName": lease})
    workdir = cluster.dir / f"e2e-{env.id}"
    replica = Replica(cluster, name, workdir, config, service_account=name)
    try:
        replica.start()
        # Work that needs every permission: a gang that fits (bind, events, PodGroup status)
        # and a pod that never fits (PodScheduled=False through pods/status).
        await env.create_gangs(
            [
                Gang("fits", 2, 2, "500m", "rbac-normal", 1000),
                Gang("huge", 1, 1, "64", "rbac-normal", 1000, lone=True),
                Gang("solo", 1, 1, "500m", "rbac-normal", 1000, lone=True),
            ]
        )
        await eventually(
            lambda: missing_permission_logged(replica, case),
            timeout=150,  # start-up, sync, leader election and a first cycle on a loaded machine
            what=f"an error log naming {case.verb} {case.logged_resource}:\n{replica.tail()}",
        )
        detail: dict[str, Any] = {}
        if case.id == "lease-update":
            # It got the lease by creating it, cannot renew: it must not go on as leader.
            detail["exit"] = await replica.wait_exit(timeout=40)
            assert detail["exit"] == 1, replica.tail()
        else:

            def forbidden() -> float | None:
                # Read until it counts (NaN when /metrics did not answer in time).
                value = replica.metric(
                    "gangsched_api_errors_total", operation=case.operation, code="403"
                )
                return value if value > 0 else None

            detail["metric"] = await eventually(
                forbidden,
                timeout=60,
                what=f"gangsched_api_errors_total{{operation={case.operation!r}, code='403'}}",
            )
        if case.id in OPTIONAL:
            detail["readyz"] = await _scheduled_without(replica, env, case)
        elif case.verb == "list":
            answer: list[tuple[int, str]] = []

            def readyz_names_it() -> bool:
                try:
                    answer[:] = [replica.http("/readyz")]
                except OSError as exc:  # no answer in time: ask again
                    answer[:] = [(0, repr(exc))]
                status, body = answer[0]
                return status == 503 and case.logged_resource in body and "403" in body

            try:
                await eventually(readyz_names_it, timeout=60, what="/readyz naming the 403")
            except AssertionError:
                raise AssertionError(f"/readyz: {answer}") from None
            detail["readyz"] = answer[0][1][:120]
        if case.id == "binding":
            note = await _event_note(
                kube, env, "fits", "FailedScheduling", containing=("403", "pods/binding")
            )
            assert note and "403" in note and "pods/binding" in note, note
            detail["event"] = note[:120]
        print(f"\nRBAC without {case.verb} {case.logged_resource}: {detail}")
        assert replica.alive or case.id == "lease-update", replica.tail()
        assert "Traceback" not in replica.text(), replica.tail(80)
    finally:
        await replica.stop()
        for obj in reversed(trimmed_roles(case, name)):
            path = await kube.object_path(obj)
            await kube.delete(path)


async def _scheduled_without(replica: Replica, workload: Workload, case: Case) -> str:
    """An optional kind's list is forbidden: /readyz is 200 and names it, the lone pod that
    needs nothing of it is bound, and (PodGroups unseen) the gang's members are not."""

    def ready_without() -> str | None:
        try:
            status, body = replica.http("/readyz")
        except OSError:  # no answer in time: ask again
            return None
        return body if status == 200 and case.logged_resource in body else None

    body: str = await eventually(
        ready_without, timeout=90, what=f"/readyz 200 naming {case.logged_resource}"
    )
    assert "scheduling without" in body and "403" in body, body

    async def solo_bound() -> bool:
        pods = await workload.pods()
        return bool(pods["solo"]["spec"].get("nodeName"))

    await eventually(solo_bound, timeout=90, what="the lone pod bound without the kind")
    if case.id == "podgroups":
        pods = await workload.pods()
        bound = [n for n in ("fits-0", "fits-1") if pods[n]["spec"].get("nodeName")]
        assert not bound, f"members of a gang whose PodGroup cannot be read were bound: {bound}"
    return body[:120]


async def _event_note(
    kube: Kube, workload: Workload, name: str, reason: str, *, containing: tuple[str, ...]
) -> str | None:
    """The first `reason` event on `name` whose note holds every one of `containing` (another
    event of that reason, e.g. a waiting message, may come first)."""
    notes: list[str] = []

    async def find() -> str | None:
        events = await kube.get(
            f"/apis/events.k8s.io/v1/namespaces/{workload.ns}/events",
            fieldSelector=f"regarding.name={name}",
        )
        notes[:] = [e["note"] for e in events["items"] if e["reason"] == reason]
        return next((n for n in notes if all(text in n for text in containing)), None)

    try:
        result: str | None = await eventually(
            find, timeout=60, what=f"a {reason} event on {name} saying {containing}"
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}; its {reason} notes: {notes}") from None
    return result
