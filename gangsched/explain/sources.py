"""Where `gangsched explain` reads the cluster from: manifests, or the API server once.

Offline, manifests are read by the simulate loader (same validation, same problems). Against
a cluster, every resource the scheduler watches is listed once through the operator's `Kube`
and converted by the operator's own `ClusterCache`, so the dry run sees exactly what
`gangsched run` would see; the PodGroup and member pods are kept raw for their status, and
the namespace's events are read for the recent history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

from gangsched.core.cluster import ClusterState
from gangsched.core.model import Dialect, GroupRef
from gangsched.core.scheduler import Scheduler
from gangsched.edge.cache import ClusterCache
from gangsched.edge.composite_cache import CompositeCache
from gangsched.edge.dra_cache import DRA_INFORMERS, RESOURCE_API, DraCache
from gangsched.edge.kube import JSON, Kube, KubeError
from gangsched.edge.volume_cache import STORAGE_INFORMERS, VolumeCache
from gangsched.edge.watches import COMPOSITE_API_VERSION, POD_GROUP_GROUPS
from gangsched.simulate.loader import load_cluster

#: Page size of list requests (as kubectl's chunking).
PAGE = 500


class SourceError(Exception):
    """Reading the cluster failed. `code` is the exit status (1: no access or unreachable,
    2: bad input such as an unusable kubeconfig)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def from_manifests(paths: list[str], *, scheduler_name: str) -> ClusterState:
    """A ClusterState from manifest files (ManifestError lists every problem)."""
    return load_cluster(paths, scheduler_name=scheduler_name)


@dataclass
class ClusterRead:
    cluster: ClusterState
    #: Dialect -> apiVersion the server serves PodGroups at.
    versions: dict[Dialect, str] = field(default_factory=dict)
    #: Raw PodGroups and pods by (dialect or None for pods, "namespace/name").
    raw_groups: dict[GroupRef, JSON] = field(default_factory=dict)
    raw_pods: dict[str, JSON] = field(default_factory=dict)
    #: Objects the scheduler cannot read ("Kind/ns/name" -> problem).
    problems: dict[str, str] = field(default_factory=dict)


async def connect(kubeconfig: str | None) -> Kube:
    try:
        return await Kube.connect(kubeconfig)
    except FileNotFoundError as exc:
        raise SourceError(f"cannot read the kubeconfig: {exc.filename or exc}", 2) from None
    except Exception as exc:  # kubernetes_asyncio's ConfigException and YAML errors
        text = str(exc).strip() or type(exc).__name__
        raise SourceError(f"cannot load the kubeconfig: {text}", 2) from None


def _access_error(what: str, exc: Exception) -> SourceError:
    if isinstance(exc, KubeError):
        if exc.forbidden or exc.status == 401:
            return SourceError(f"no access: cannot {what}: {exc.status} {exc.message}")
        return SourceError(f"cannot {what}: {exc.status} {exc.reason or ''} {exc.message}".strip())
    text = str(exc).strip() or type(exc).__name__
    return SourceError(f"cannot reach the API server to {what}: {text}")


async def _list(
    kube: Kube, path: str, what: str, *, kind: str = "", api_version: str = ""
) -> list[JSON]:
    """All items (paged), with the kind and apiVersion list responses leave out of items."""
    items: list[JSON] = []
    token = ""
    while True:
        query: dict[str, Any] = {"limit": PAGE}
        if token:
            query["continue"] = token
        try:
            page = await kube.get(path, **query)
        except (TimeoutError, KubeError, aiohttp.ClientError, OSError) as exc:
            raise _access_error(f"list {what}", exc) from None
        items.extend(page.get("items") or [])
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            break
    for item in items:
        if kind:
            item.setdefault("kind", kind)
        if api_version:
            item.setdefault("apiVersion", api_version)
    return items


async def _pod_group_versions(kube: Kube) -> dict[Dialect, str]:
    """The apiVersion serving PodGroups for each dialect the server has (as the operator's
    discovery: the first version, in the server's order, that has the resource)."""
    try:
        groups = await kube.get("/apis")
    except (TimeoutError, KubeError, aiohttp.ClientError, OSError) as exc:
        raise _access_error("discover the API groups", exc) from None
    versions: dict[Dialect, str] = {}
    for entry in groups.get("groups", []):
        dialect = POD_GROUP_GROUPS.get(str(entry.get("name")))
        if dialect is None:
            continue
        for candidate in entry.get("versions") or []:
            group_version = str(candidate.get("groupVersion", ""))
            try:
                resources = await kube.get(f"/apis/{group_version}")
            except KubeError:
                continue
            if any(r.get("name") == "podgroups" for r in resources.get("resources", [])):
                versions[dialect] = group_version
                break
    return versions


async def _serves_composites(kube: Kube) -> bool:
    try:
        resources = await kube.get(f"/apis/{COMPOSITE_API_VERSION}")
    except (TimeoutError, KubeError, aiohttp.ClientError, OSError):
        return False
    return any(r.get("name") == "compositepodgroups" for r in resources.get("resources", []))


async def from_cluster(kube: Kube, *, scheduler_name: str) -> ClusterRead:
    """List everything the scheduler watches, once, into a throwaway ClusterState."""
    cluster = ClusterState(scheduler_name=scheduler_name)
    cache = ClusterCache(Scheduler(cluster))
    read = ClusterRead(cluster=cluster)
    read.versions = await _pod_group_versions(kube)
    # Order matters as for the informers' first sync: classes before pods and groups (their
    # priorities), nodes before pods (their capacity), pods before budgets (disruptions).
    v1 = {"api_version": "v1"}
    cache.namespaces().replace(
        await _list(kube, "/api/v1/namespaces", "namespaces", kind="Namespace", **v1)
    )
    cache.priority_classes().replace(
        await _list(
            kube,
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            "priorityclasses",
            kind="PriorityClass",
            api_version="scheduling.k8s.io/v1",
        )
    )
    cache.nodes().replace(await _list(kube, "/api/v1/nodes", "nodes", kind="Node", **v1))
    pods = await _list(kube, "/api/v1/pods", "pods", kind="Pod", **v1)
    cache.pods().replace(pods)
    for pod in pods:
        meta = pod.get("metadata") or {}
        read.raw_pods[f"{meta.get('namespace')}/{meta.get('name')}"] = pod
    for dialect, version in read.versions.items():
        groups = await _list(
            kube,
            f"/apis/{version}/podgroups",
            f"podgroups.{dialect.value}",
            kind="PodGroup",
            api_version=version,
        )
        for group in groups:
            meta = group.get("metadata") or {}
            ref = GroupRef(dialect, str(meta.get("namespace")), str(meta.get("name")))
            read.raw_groups[ref] = group
        cache.pod_groups().replace(groups)
    if read.versions.get(Dialect.UPSTREAM) and await _serves_composites(kube):
        # CompositePodGroups (v1alpha3 only): the trees the upstream PodGroups belong to.
        CompositeCache(cache).handler().replace(
            await _list(
                kube,
                f"/apis/{COMPOSITE_API_VERSION}/compositepodgroups",
                "compositepodgroups.scheduling.k8s.io",
                kind="CompositePodGroup",
                api_version=COMPOSITE_API_VERSION,
            )
        )
    cache.budgets().replace(
        await _list(
            kube,
            "/apis/policy/v1/poddisruptionbudgets",
            "poddisruptionbudgets",
            kind="PodDisruptionBudget",
            api_version="policy/v1",
        )
    )
    volume_cache = VolumeCache(cache)
    for name, path, handler in STORAGE_INFORMERS:
        handler(volume_cache).replace(await _list(kube, path, name))
    try:
        await kube.get(RESOURCE_API)
    except Exception:  # resource.k8s.io/v1 not served: pods with claims cannot be placed
        pass
    else:
        dra_cache = DraCache(cache)
        dra_cache.enable()
        for dra_name, dra_path, dra_handler in DRA_INFORMERS:
            dra_handler(dra_cache).replace(await _list(kube, dra_path, dra_name))
    read.problems = dict(cache.problems)
    return read


def _event_time(event: JSON) -> str:
    series = event.get("series") or {}
    return str(
        series.get("lastObservedTime")
        or event.get("eventTime")
        or event.get("deprecatedLastTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def _age(stamp: str, now: datetime) -> str:
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return "?"
    seconds = max(0, int((now - when).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


async def recent_events(
    kube: Kube,
    namespace: str,
    *,
    groups: set[str],
    pods: set[str],
    limit: int = 10,
) -> list[JSON]:
    """The latest events about the PodGroups `groups` or the pods `pods` (names in
    `namespace`), or naming one of the groups as related (preemption victims), oldest
    first. Raises SourceError (e.g. no access to events) for the caller to note."""
    path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    items = await _list(kube, path, "events")
    now = datetime.now(UTC)
    chosen = []
    for event in items:
        regarding = event.get("regarding") or {}
        related = event.get("related") or {}
        kind, name = regarding.get("kind"), regarding.get("name")
        about_group = (kind == "PodGroup" and name in groups) or (
            related.get("kind") == "PodGroup" and related.get("name") in groups
        )
        if about_group or (kind == "Pod" and name in pods):
            stamp = _event_time(event)
            count = (event.get("series") or {}).get("count") or event.get("deprecatedCount") or 1
            chosen.append(
                {
                    "time": stamp,
                    "age": _age(stamp, now),
                    "type": event.get("type", ""),
                    "reason": event.get("reason", ""),
                    "object": f"{kind}/{name}",
                    "note": event.get("note", ""),
                    "count": int(count),
                    "reportingController": event.get("reportingController", ""),
                }
            )
    chosen.sort(key=lambda e: str(e["time"]))
    return chosen[-limit:]


def status_of(read: ClusterRead, ref: GroupRef) -> JSON | None:
    """The status the API server holds: the PodGroup's, or a lone pod's (phase, conditions)."""
    if ref.dialect is Dialect.LONE_POD:
        pod = read.raw_pods.get(ref.key)
        if pod is None:
            return None
        status = pod.get("status") or {}
        return {
            "phase": status.get("phase"),
            "nominatedNodeName": status.get("nominatedNodeName"),
            "conditions": status.get("conditions") or [],
        }
    group = read.raw_groups.get(ref)
    if group is None:
        return None
    return dict(group.get("status") or {})
