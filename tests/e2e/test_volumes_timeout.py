"""The pre-bind stage's timeout on the real control plane: claims that no provisioner serves
are given up after `volumeBindTimeoutSeconds`, the selected-node written for them is taken
back, no pod is bound and the pods say why.

Its own gangsched replica (schedulerName gangsched-timeout, a 4 s timeout, its own lease),
so the shared scheduler of the other volume tests keeps kube-scheduler's 600 s.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Cluster
from .controller_manager import pv_controller  # noqa: F401  (fixture)
from .harness import Replica, install, manifest_config
from .k8s import Kube
from .operator_fixture import Gangsched, gangsched  # noqa: F401  (fixture)
from .test_volumes import VolumeEnv, create_gang
from .volume_provisioner import SELECTED_NODE

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

SCHEDULER = "gangsched-timeout"


async def test_unconfirmed_volumes_time_out_and_nothing_binds(
    cluster: Cluster,
    kube: Kube,
    gangsched: Gangsched,  # noqa: F811
    pv_controller: None,  # noqa: F811
    tmp_path: Any,
) -> None:
    install(cluster)
    config = manifest_config(
        schedulerName=SCHEDULER,
        volumeBindTimeoutSeconds=4,
        backoff={"initialSeconds": 30, "maxSeconds": 30},
        leaderElection={"leaseName": "gs-volume-timeout"},
    )
    replica = Replica(cluster, "gs-volume-timeout", tmp_path, config)
    env = VolumeEnv(kube, gangsched)
    await env.setup()
    try:
        replica.start()
        await replica.wait_ready()
        await env.add_nodes(2, cpu="4")
        unserved = await env.storage_class("unserved", provisioner="nobody.example.com")
        for name in ("a", "b"):
            await env.claim(f"data-{name}", unserved)
        original = env.pod

        def pod(name: str, **kwargs: Any) -> Any:
            return original(name, scheduler_name=SCHEDULER, **kwargs)

        env.pod = pod  # type: ignore[method-assign]
        await create_gang(env, "job", [("a", ["data-a"]), ("b", ["data-b"])])

        async def timed_out() -> str | None:
            message = (await env.pod_condition("a")).get("message", "")
            return message if "timed out after 4s" in message else None

        message = await env.kube_wait(timed_out, "the pre-bind timeout", timeout=120)
        assert message is not None and 'running PreBind plugin "VolumeBinding"' in message
        pods = await env.pods()
        assert not pods["a"]["spec"].get("nodeName") and not pods["b"]["spec"].get("nodeName")
        claims = await env.claims()
        for name in ("a", "b"):  # the selected-node written for them was taken back
            annotations = claims[f"data-{name}"]["metadata"].get("annotations") or {}
            assert SELECTED_NODE not in annotations, claims[f"data-{name}"]
        assert "Traceback" not in replica.text(), replica.tail(80)
    finally:
        await replica.stop()
        await env.cleanup()
