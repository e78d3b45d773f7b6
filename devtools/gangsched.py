"""Running `gangsched run` as a real process, the way tests/e2e and bench/ both need it:
authenticated as a ServiceAccount through a token kubeconfig (so a permission missing from
the shipped ClusterRole fails instead of hiding behind cluster-admin), listening on free
loopback ports, logging to a file."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from devtools.processes import free_ports

ROOT = Path(__file__).resolve().parents[1]
COMMAND = (sys.executable, "-m", "gangsched.cli")


def token_kubeconfig(
    path: Path, *, server: str, ca_data: bytes | str, token: str, user: str
) -> Path:
    """A kubeconfig for `server` authenticating with a bearer token; `ca_data` is the PEM
    (bytes) or its base64 (str, as kubeconfigs carry it)."""
    ca = ca_data if isinstance(ca_data, str) else base64.b64encode(ca_data).decode()
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {"server": server, "certificate-authority-data": ca},
                    }
                ],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
                "current-context": "local",
            }
        )
    )
    path.chmod(0o600)
    return path


def listen_config(**fields: Any) -> dict[str, Any]:
    """`fields` (e.g. the shipped ConfigMap's) with the metrics and health servers moved to
    free loopback ports, so several processes and test runs never collide."""
    metrics, health = free_ports(2)
    return {
        **fields,
        "metricsAddress": f"127.0.0.1:{metrics}",
        "healthAddress": f"127.0.0.1:{health}",
    }


def metrics_url(config: Mapping[str, Any]) -> str:
    return f"http://{config['metricsAddress']}"


def argv(
    *,
    kubeconfig: Path,
    config: Path,
    identity: str | None = None,
    command: Sequence[str] = COMMAND,
) -> list[str]:
    extra = ["--identity", identity] if identity else []
    return [*command, "run", "--kubeconfig", str(kubeconfig), "--config", str(config), *extra]


def start(
    *,
    kubeconfig: Path,
    config: Mapping[str, Any],
    config_path: Path,
    log: Path,
    identity: str | None = None,
    command: Sequence[str] = COMMAND,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Write `config` to `config_path` and start `gangsched run` with its output in `log`.
    KUBECONFIG is dropped from the environment so only `kubeconfig` authenticates it."""
    config_path.write_text(yaml.safe_dump(dict(config)))
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    environment.pop("KUBECONFIG", None)
    return subprocess.Popen(
        argv(kubeconfig=kubeconfig, config=config_path, identity=identity, command=command),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=environment,
        start_new_session=new_session,
    )
