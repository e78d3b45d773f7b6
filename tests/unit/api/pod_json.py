"""Raw pod JSON and problem collection shared by the pod conversion tests."""

from __future__ import annotations

from typing import Any

import pytest

from gangsched.core.api import InvalidObject, PriorityResolver, pod_from_raw

MI = 1024**2
NO_CLASSES = PriorityResolver()


def raw_pod(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    body["spec"].update(spec)
    return body


def container(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "busybox", "resources": resources, **extra}


def problems_of(raw: dict[str, Any], priorities: PriorityResolver = NO_CLASSES) -> list[str]:
    with pytest.raises(InvalidObject) as caught:
        pod_from_raw(raw, priorities=priorities)
    return [str(problem) for problem in caught.value.problems]
