"""Small async helpers for end-to-end tests against a real kube-apiserver.

Reusable by every e2e test (control plane smoke tests, the operator's tests, benchmarks):

* :func:`new_api_client` builds a ``kubernetes_asyncio`` ``ApiClient`` from a kubeconfig.
* :class:`Kube` does raw JSON requests through that client (no generated models), resolves the
  REST path of any ``apiVersion``/``kind`` through discovery, applies manifests with server-side
  apply, binds pods through ``pods/binding`` and waits for conditions.
* :func:`fake_node`, :func:`pod_manifest` and :func:`load_manifests` build objects.

Raw requests use ``_preload_content=False``: the generated clients choke on some answers (a
successful ``pods/binding`` POST returns a ``Status``, which the ``V1Binding`` model rejects with
``ValueError: Invalid value for target``), and decoding into models is slow anyway.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes_asyncio import client, config

T = TypeVar("T")
JSON = dict[str, Any]

FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"


class KubeError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.body = body
        reason = body.get("reason", "") if isinstance(body, dict) else ""
        message = body.get("message", body) if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status} {reason}: {message}")


async def new_api_client(kubeconfig: str | Path) -> client.ApiClient:
    """An ``ApiClient`` for the kubeconfig's current context (caller closes it)."""
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    return client.ApiClient(configuration=cfg)


def unique_name(prefix: str) -> str:
    """A DNS-1123 name unique across test runs: ``prefix-<8 hex>``."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def wait_for(
    check: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = 60.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Poll ``check`` until it returns something truthy and return that; raise TimeoutError.

    Exceptions raised by ``check`` propagate (make ``check`` return None to keep waiting).
    """
    deadline = time.monotonic() + timeout
    last = await check()
    while not last:
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})"
            )
        await asyncio.sleep(interval)
        last = await check()
    return last


def load_manifests(path: str | Path) -> list[JSON]:
    """All non-empty YAML documents of a manifest file."""
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def fake_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
) -> JSON:
    """A Node that kwok manages (Ready, heartbeats, runs its bound pods)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": pods},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
        },
    }


def pod_manifest(
    name: str,
    *,
    namespace: str = "default",
    scheduler_name: str = "gangsched",
    cpu: str = "100m",
    memory: str = "64Mi",
    labels: Mapping[str, str] | None = None,
    priority_class_name: str | None = None,
    node_name: str | None = None,
    extra_spec: Mapping[str, Any] | None = None,
) -> JSON:
    """A single-container pod requesting ``cpu``/``memory`` (requests == limits)."""
    resources = {"cpu": cpu, "memory": memory}
    spec: JSON = {
        "schedulerName": scheduler_name,
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": dict(resources), "limits": dict(resources)},
            }
        ],
        "terminationGracePeriodSeconds": 30,
    }
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    if node_name:
        spec["nodeName"] = node_name
    spec.update(extra_spec or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
    }


def condition(obj: Mapping[str, Any], type_: str) -> JSON | None:
    """The ``status.conditions`` entry of the given type, if any."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def is_node_ready(node: Mapping[str, Any]) -> bool:
    c = condition(node, "Ready")
    return bool(c and c.get("status") == "True")


class Kube:
    """Raw JSON access to the API server through a ``kubernetes_asyncio`` ``ApiClient``."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self._resources: dict[str, list[JSON]] = {}

    @classmethod
    async def from_kubeconfig(cls, kubeconfig: str | Path) -> Kube:
        return cls(await new_api_client(kubeconfig))

    async def close(self) -> None:
        await self.api.close()

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ raw requests
    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        ok: Callable[[int], bool] = lambda s: 200 <= s < 300,
        timeout: float = 60.0,
    ) -> Any:
        """Send one request; return the decoded JSON body (or text). Raise KubeError if not ok.
        `accept` asks for another rendering (a meta.k8s.io Table, as kubectl get prints)."""
        params = list(query.items()) if isinstance(query, Mapping) else list(query or [])
        resp = await self.api.call_api(
            path,
            method.upper(),
            query_params=params,
            header_params={"Content-Type": content_type, "Accept": accept},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        try:
            raw = await resp.read()
            status = resp.status
        finally:
            resp.release()
        text = raw.decode("utf-8", errors="replace")
        try:
            data: Any = json.loads(text) if text else None
        except json.JSONDecodeError:
            data = text
        if not ok(status):
            raise KubeError(method.upper(), path, status, data)
        return data

    async def get(self, path: str, **query: Any) -> JSON:
        result: JSON = await self.request("GET", path, query=query)
        return result

    async def get_or_none(self, path: str) -> JSON | None:
        try:
            return await self.get(path)
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    async def create(self, path: str, body: Mapping[str, Any], **query: Any) -> JSON:
        result: JSON = await self.request("POST", path, dict(body), query=query)
        return result

    async def patch(
        self, path: str, body: Mapping[str, Any], *, kind: str = "merge", **query: Any
    ) -> JSON:
        """PATCH with ``kind`` = merge | strategic | json | apply."""
        content_type = {
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "json": "application/json-patch+json",
            "apply": "application/apply-patch+yaml",
        }[kind]
        result: JSON = await self.request(
            "PATCH", path, body, query=query, content_type=content_type
        )
        return result

    async def delete(
        self, path: str, *, grace_period_seconds: int | None = None, missing_ok: bool = True
    ) -> JSON | None:
        body: JSON = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        try:
            result: JSON = await self.request("DELETE", path, body)
            return result
        except KubeError as e:
            if missing_ok and e.status == 404:
                return None
            raise

    # ------------------------------------------------------------------ discovery / paths
    async def resources(self, api_version: str) -> list[JSON]:
        """The discovery list (``resources``) of one group/version, cached."""
        if api_version not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            self._resources[api_version] = (await self.get(base)).get("resources", [])
        return self._resources[api_version]

    def forget_discovery(self) -> None:
        """Drop cached discovery (e.g. after installing a CRD)."""
        self._resources.clear()

    async def path_for(
        self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None
    ) -> str:
        """REST path of a kind's collection (or of one object when ``name`` is given)."""
        for r in await self.resources(api_version):
            if r.get("kind") == kind and "/" not in r.get("name", ""):
                plural = r["name"]
                namespaced = bool(r.get("namespaced"))
                break
        else:
            raise LookupError(f"kind {kind} is not served by {api_version}")
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        path = base
        if namespaced:
            path += f"/namespaces/{namespace or 'default'}"
        path += f"/{plural}"
        if name:
            path += f"/{name}"
        return path

    async def object_path(self, obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        return await self.path_for(
            obj["apiVersion"], obj["kind"], meta.get("namespace"), meta.get("name")
        )

    # ------------------------------------------------------------------ objects
    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str = "gangsched-e2e",
        dry_run: bool = False,
    ) -> JSON:
        """Server-side apply one object (create or update), forcing field ownership."""
        query: dict[str, Any] = {"fieldManager": field_manager, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        return await self.patch(await self.object_path(obj), obj, kind="apply", **query)

    async def apply_all(self, objs: Iterable[Mapping[str, Any]], **kwargs: Any) -> list[JSON]:
        return [await self.apply(o, **kwargs) for o in objs]

    async def create_namespace(self, name: str, priority_classes: Mapping[str, int]) -> None:
        """A test's namespace and the PriorityClasses (name -> value) its pods use."""
        await self.create("/api/v1/namespaces", {"metadata": {"name": name}})
        for class_name, value in priority_classes.items():
            await self.apply(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": class_name},
                    "value": value,
                    "preemptionPolicy": "PreemptLowerPriority",
                }
            )

    async def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> Any:
        """Bind a pod to a node through ``pods/binding`` (what a scheduler does)."""
        metadata: JSON = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return await self.request(
            "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body
        )

    async def wait_for_object(
        self,
        path: str,
        predicate: Callable[[JSON], bool],
        *,
        timeout: float = 60.0,
        what: str | None = None,
    ) -> JSON:
        """Poll GET ``path`` until ``predicate(obj)``; return the object."""

        async def check() -> JSON | None:
            obj = await self.get_or_none(path)
            return obj if obj is not None and predicate(obj) else None

        return await wait_for(check, timeout=timeout, what=what or f"{path} to match")

    async def wait_gone(self, path: str, *, timeout: float = 60.0) -> None:
        async def check() -> bool:
            return await self.get_or_none(path) is None

        await wait_for(check, timeout=timeout, what=f"{path} to be deleted")

    async def wait_crd_established(self, name: str, *, timeout: float = 60.0) -> JSON:
        crd = await self.wait_for_object(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
            lambda o: (condition(o, "Established") or {}).get("status") == "True",
            timeout=timeout,
            what=f"CRD {name} to be Established",
        )
        self.forget_discovery()
        return crd

    async def ready_nodes(self, label_selector: str = "type=kwok") -> list[JSON]:
        nodes = await self.get("/api/v1/nodes", labelSelector=label_selector)
        return [n for n in nodes.get("items", []) if is_node_ready(n)]
