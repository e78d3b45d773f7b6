"""Fuzzed configuration files for `gangsched run`: whatever the file holds, the command either
exits 2 with one line per problem naming the field (never a traceback), or everything the
scheduler builds from the config at start-up can be built."""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangsched import cli
from gangsched.config import Config
from gangsched.core.cluster import ClusterState
from gangsched.core.scheduler import Scheduler
from gangsched.edge import app, logs
from gangsched.edge.leader import LeaderElector
from tests import builders as b

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "0.0.0.0:10259", "127.0.0.1:0", ":8080", "host", "x:y", "1:99999"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=6,
)

# Every field the schema knows, with plausible and implausible values.
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "schedulerName": st.one_of(st.sampled_from(["gangsched", "", "my-sched"]), values),
    "metricsAddress": st.one_of(
        st.sampled_from(["0.0.0.0:10259", "127.0.0.1:0", "[::1]:9090", ":80", "nope", "a:b"]),
        values,
    ),
    "healthAddress": st.one_of(st.sampled_from(["0.0.0.0:10258", "1.2.3.4:70000"]), values),
    "logFormat": st.one_of(st.sampled_from(["json", "console", "xml"]), values),
    "bindConcurrency": st.one_of(st.integers(-3, 64), values),
    "scoring": st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "strategy": st.sampled_from(["LeastAllocated", "MostAllocated", "Random"]),
                "resources": st.dictionaries(
                    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", ""]),
                    st.one_of(st.floats(-2, 5), values),
                    max_size=3,
                ),
                "weights": st.dictionaries(
                    st.sampled_from(["NodeResourcesFit", "NodeAffinity", "Bogus"]),
                    st.one_of(st.floats(-1, 10), values),
                    max_size=3,
                ),
            },
        ),
        values,
    ),
    "preemption": st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "enabled": st.one_of(st.booleans(), values),
                "strategy": st.sampled_from(["mincost", "kep", "off", "other"]),
            },
        ),
        values,
    ),
    "search": st.one_of(
        st.fixed_dictionaries(
            {},
            optional={"budget": st.integers(-5, 5000), "width": st.integers(-2, 20)},
        ),
        values,
    ),
    "backoff": st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "initialSeconds": st.one_of(st.floats(-1, 20), values),
                "maxSeconds": st.one_of(st.floats(-1, 20), values),
            },
        ),
        values,
    ),
    "leaderElection": st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "enabled": st.booleans(),
                "leaseName": st.one_of(st.sampled_from(["gangsched", ""]), values),
                "leaseNamespace": st.sampled_from(["gangsched-system", "", "Bad_NS"]),
                "leaseDurationSeconds": st.one_of(st.floats(-1, 30), values),
                "renewDeadlineSeconds": st.one_of(st.floats(-1, 30), values),
                "retryPeriodSeconds": st.one_of(st.floats(-1, 30), values),
            },
        ),
        values,
    ),
}
configs = st.one_of(
    st.fixed_dictionaries({}, optional=FIELDS),
    st.dictionaries(st.text(max_size=12), values, max_size=4),  # unknown fields
    values,  # not even a mapping
)


def startup_objects(config: Config) -> None:
    """What `gangsched run` builds from the config before it talks to the API server."""
    for address in (config.metricsAddress, config.healthAddress):
        host, port = app._host_port(address)
        assert 0 <= port <= 65535 and isinstance(host, str)
    low = [b.pod(f"low-{i}", cpu=2, node_name="n1", scheduler_name="other") for i in range(2)]
    high = b.gang_pods("g", 2, cpu=2, priority=10, scheduler_name=config.schedulerName)
    cluster = ClusterState.build(
        scheduler_name=config.schedulerName,
        nodes=[b.node("n1", cpu=4), b.node("n2", cpu=2)],
        pods=[*low, *high],
        groups=[b.group("g", 2)],
    )
    scheduler = Scheduler(cluster, config.scheduler_config(), preemptor=config.preemptor())
    scheduler.enqueue_pending(0.0)
    report = scheduler.step(0.0)  # scoring, the search and preemption with these settings
    assert report is not None
    election = config.leaderElection
    elector = LeaderElector(
        kube=None,  # type: ignore[arg-type]
        identity="x",
        name=election.leaseName,
        namespace=election.leaseNamespace,
        lease_seconds=election.leaseDurationSeconds,
        renew_deadline=election.renewDeadlineSeconds,
        retry_period=election.retryPeriodSeconds,
    )
    assert elector.path.endswith(f"/leases/{election.leaseName}")
    if election.enabled:
        # client-go's rules: lease > renew deadline > retry period, all finite.
        assert math.isfinite(election.leaseDurationSeconds)
        assert election.leaseDurationSeconds > election.renewDeadlineSeconds
        assert election.renewDeadlineSeconds > election.retryPeriodSeconds
        assert election.leaseName and election.leaseNamespace


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(raw=configs)
def test_any_config_file_exits_2_naming_the_field_or_starts(
    raw: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    started: list[Config] = []

    async def fake_run(*, config: Config, **_: Any) -> int:
        started.append(config)
        return 0

    monkeypatch.setattr(app, "run", fake_run)
    monkeypatch.setattr(logs, "configure", lambda *_: None)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["run", "--config", str(path), "--kubeconfig", "/dev/null"])
    if code == 2:
        lines = err.getvalue().strip().splitlines()
        assert lines, "exit 2 must say why"
        assert "Traceback" not in err.getvalue()
        for line in lines:
            assert line.startswith(f"{path}: "), line  # each problem names the file and field
        assert not started
    else:
        assert code == 0, err.getvalue()
        (config,) = started
        startup_objects(config)


def test_the_shipped_configmap_config_starts() -> None:
    docs = yaml.safe_load_all((Path(__file__).parents[3] / "manifests" / "20-config.yaml").open())
    (config_map,) = [d for d in docs if d]
    config = Config.model_validate(yaml.safe_load(config_map["data"]["config.yaml"]))
    startup_objects(config)


def test_every_problem_is_on_its_own_line_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "bogus: 1\nbindConcurrency: zero\nmetricsAddress: nope\n"
        "leaderElection: {leaseDurationSeconds: 5, renewDeadlineSeconds: 10}\n"
    )
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli.main(["run", "--config", str(path)]) == 2
    text = err.getvalue()
    for field in ("bogus", "bindConcurrency", "metricsAddress", "leaderElection"):
        assert f"{path}: {field}" in text, text


@pytest.mark.parametrize(
    "weights", ["{cpu: 1.0e-308}", "{cpu: 0}", "{cpu: -1}", "{cpu: 101}", "{}"]
)
def test_resource_weights_outside_kube_schedulers_range_are_refused(
    weights: str, tmp_path: Path
) -> None:
    """make fuzz found it: a weight of 1e-308 was accepted and every allocation score was NaN
    (100 / the weights' sum overflowed); kube-scheduler takes weights from 1 to 100."""
    path = tmp_path / "c.yaml"
    path.write_text(f"scoring: {{resources: {weights}}}\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli.main(["run", "--config", str(path)]) == 2
    assert f"{path}: scoring.resources" in err.getvalue(), err.getvalue()
    assert "Traceback" not in err.getvalue()
