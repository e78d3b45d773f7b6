"""Real clients (Kueue, LeaderWorkerSet, JobSet, Kubeflow Trainer) beside the e2e control plane.

Each controller is built from its Go module by hack/build-clients.sh (a missing binary is
built, never skipped: that takes minutes the first time) and runs as a local process. Their
CRDs come from the module (`config/`), unchanged. `install_client` + `run_client` do the
set-up every client shares (namespace, CRDs, RBAC, webhooks, certificates, configuration).

RBAC: each controller authenticates as its own ServiceAccount with what the module's RBAC
kustomization binds to that ServiceAccount (its manager ClusterRole, leader-election and
secrets Roles, ...), renamed with the release's namePrefix and namespace as kustomize would;
`ClientLayout.extra_rules` adds rules the module grants elsewhere (LWS's Helm chart grants
Volcano PodGroups only when its volcano provider is on), each documented where it is set.

Admission webhooks: the local cluster has no Service routing, so every webhook configuration
and CRD conversion webhook the module ships is rewritten from its `service:` to
`url: https://127.0.0.1:<port><path>`, with a CA generated here whose serving certificate the
controller reads from its cert dir (the controllers' own certificate rotation is turned off:
it writes a Secret a pod would mount). The webhook configurations are deleted again when the
controller stops, or their `failurePolicy: Fail` would block later tests' pods.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.processes import free_ports, http_get, log_tail, terminate

from .conftest import HACK, Cluster
from .harness import token_kubeconfig

JSON = dict[str, Any]
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


@dataclass(frozen=True)
class ClientBuild:
    name: str
    binary: Path
    #: The module's source as built (config/, manifests/, charts/).
    src: Path


def build_client(name: str) -> ClientBuild:
    """hack/build-clients.sh NAME: the cached binary, built first if missing."""
    timeout = float(os.environ.get("GANGSCHED_E2E_BUILD_TIMEOUT", "3600"))
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [str(HACK / "build-clients.sh"), name],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hack/build-clients.sh {name} did not finish within {timeout:.0f}s")
    if proc.returncode != 0 or not proc.stdout.strip():
        tail = "\n".join(proc.stderr.splitlines()[-40:])
        pytest.fail(f"cannot build {name}: hack/build-clients.sh exited {proc.returncode}\n{tail}")
    if time.monotonic() - started > 30:
        print(f"\n{name}: built in {time.monotonic() - started:.0f}s")
    root = Path(proc.stdout.strip().splitlines()[-1])
    matches = sorted(root.glob(f"{name}-v*/BUILT"))
    if not matches:
        pytest.fail(f"hack/build-clients.sh {name} left no build under {root}")
    out = matches[-1].parent
    binaries = list((out / "bin").iterdir())
    return ClientBuild(name=name, binary=binaries[0], src=out / "src")


# --------------------------------------------------------------------------------- TLS
@dataclass(frozen=True)
class WebhookTLS:
    """A CA and a serving certificate for 127.0.0.1, as controller-runtime's cert dir wants."""

    cert_dir: Path

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode((self.cert_dir / "ca.crt").read_bytes()).decode()


def webhook_tls(
    directory: Path, *, dns_names: Iterable[str] = (), ca_name: str = "gangsched-webhook-ca"
) -> WebhookTLS:
    """`dns_names` and `ca_name`: the Service name and CA name a controller's own certificate
    check insists on (cert-controller verifies the CA against its name too); it then keeps
    this certificate instead of generating one for a Service that routes nowhere."""
    directory.mkdir(parents=True, exist_ok=True)
    ext = directory / "server.ext"
    names = ",".join(f"DNS:{name}" for name in ("localhost", *dns_names))
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        f"subjectAltName=IP:127.0.0.1,{names}\n"
    )
    steps = [
        "openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout ca.key -out ca.crt "
        f"-subj /CN={ca_name} -addext basicConstraints=critical,CA:TRUE "
        "-addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature "
        f"-addext subjectAltName=DNS:{ca_name}",
        "openssl req -newkey rsa:2048 -nodes -sha256 -keyout tls.key -out tls.csr "
        "-subj /CN=127.0.0.1",
        "openssl x509 -req -sha256 -days 3650 -in tls.csr -CA ca.crt -CAkey ca.key "
        "-CAcreateserial -extfile server.ext -out tls.crt",
        # cert-controller (Trainer's rotator) reads the CA key as PKCS#1 only.
        "openssl rsa -in ca.key -traditional -out ca.key",
    ]
    for step in steps:
        proc = subprocess.run(
            step.split(), cwd=directory, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            pytest.fail(f"openssl failed: {step}\n{proc.stderr}")
    return WebhookTLS(directory)


# --------------------------------------------------------------------------- manifests
def load_documents(*paths: Path) -> list[JSON]:
    docs: list[JSON] = []
    for path in paths:
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            docs.extend(d for d in yaml.safe_load_all(file.read_text()) if isinstance(d, dict))
    return docs


def _url_config(client_config: JSON, *, port: int, tls: WebhookTLS) -> JSON:
    service = client_config.get("service") or {}
    path = str(service.get("path") or "/")
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": tls.ca_bundle}


def local_webhooks(
    docs: Iterable[JSON], *, port: int, tls: WebhookTLS, prefix: str, name: str = ""
) -> list[JSON]:
    """The module's webhook configurations pointed at the local controller (named
    `<prefix>-<name in the module>`, or `name` where the controller looks for that one)."""
    out = []
    for doc in docs:
        if doc.get("kind") not in WEBHOOK_KINDS:
            continue
        local = copy.deepcopy(doc)
        local["metadata"] = {"name": name or f"{prefix}-{doc['metadata']['name']}"}
        for hook in local.get("webhooks") or []:
            hook["clientConfig"] = _url_config(hook["clientConfig"], port=port, tls=tls)
        out.append(local)
    return out


def conversion_crds(crd_dir: Path) -> set[str]:
    """The CRDs a kubebuilder kustomization gives a conversion webhook (its patches)."""
    kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    names = set()
    for patch in kustomization.get("patches") or []:
        doc = yaml.safe_load((crd_dir / patch["path"]).read_text())
        if (doc.get("spec") or {}).get("conversion"):
            names.add(doc["metadata"]["name"])
    return names


def patch_webhooks(webhooks: list[JSON], patch_file: Path, *, kind: str) -> None:
    """Apply a kustomize JSON6902 patch of `replace /webhooks/N` ops (objectSelectors the
    release adds to the generated manifests) to the configuration of `kind`."""
    target = next(doc for doc in webhooks if doc["kind"] == kind)
    for op in yaml.safe_load(patch_file.read_text()):
        path = str(op["path"])
        if op["op"] != "replace" or not path.startswith("/webhooks/"):
            raise AssertionError(f"{patch_file}: unsupported patch op {op['op']} {path}")
        value = copy.deepcopy(op["value"])
        value["clientConfig"] = target["webhooks"][int(path.rsplit("/", 1)[1])]["clientConfig"]
        target["webhooks"][int(path.rsplit("/", 1)[1])] = value


def with_conversion_webhook(crd: JSON, *, port: int, tls: WebhookTLS) -> JSON:
    """The CRD converting between its versions through the controller's /convert."""
    local = copy.deepcopy(crd)
    local["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": _url_config({"service": {"path": "/convert"}}, port=port, tls=tls),
            "conversionReviewVersions": ["v1"],
        },
    }
    return local


def apply(cluster: Cluster, docs: Iterable[JSON]) -> None:
    """Server-side apply (CRDs are too large for the last-applied annotation)."""
    body = yaml.safe_dump_all(list(docs))
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "--field-manager=e2e", "-f", "-", input=body
    )


def wait_established(cluster: Cluster, crds: Iterable[JSON], timeout: float = 60) -> None:
    """Every CRD Established (kubectl wait fails outright on a CRD with no conditions yet)."""
    names = {str(c["metadata"]["name"]) for c in crds}
    deadline = time.monotonic() + timeout
    waiting = names
    while waiting:
        out = cluster.kubectl("get", "crd", "-o", "yaml", *sorted(waiting)).stdout
        listed = yaml.safe_load(out) or {}
        items = listed.get("items") if "items" in listed else [listed]
        for crd in items or []:
            conditions = (crd.get("status") or {}).get("conditions") or []
            if any(
                c.get("type") == "Established" and c.get("status") == "True" for c in conditions
            ):
                waiting = waiting - {crd["metadata"]["name"]}
        if waiting and time.monotonic() > deadline:
            pytest.fail(f"CRDs not Established within {timeout:.0f}s: {sorted(waiting)}")
        if waiting:
            time.sleep(0.5)


def delete(cluster: Cluster, docs: Iterable[JSON]) -> None:
    for doc in docs:
        cluster.kubectl(
            "delete", doc["kind"], doc["metadata"]["name"], "--ignore-not-found", check=False
        )


# --------------------------------------------------------------------------- processes
@dataclass
class Controller:
    """A client controller running locally; `ports` are the ones it was told to listen on."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    ports: dict[str, int] = field(default_factory=dict)
    webhooks: list[JSON] = field(default_factory=list)

    def log_tail(self, lines: int = 80) -> str:
        return log_tail(self.log, lines)

    def assert_alive(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")


def start_controller(
    name: str,
    argv: list[str],
    workdir: Path,
    *,
    kubeconfig: Path,
    ready_url: str,
    ports: dict[str, int],
) -> Controller:
    """Start the controller with `kubeconfig` (its ServiceAccount's) and wait for its readyz."""
    log = workdir / f"{name}.log"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    process = subprocess.Popen(
        argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=workdir, env=env
    )
    controller = Controller(name, process, log, ports)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        controller.assert_alive()
        try:
            status, _ = http_get(ready_url)
        except OSError:
            status = 0
        if status == 200:
            return controller
        time.sleep(0.5)
    terminate(process)
    pytest.fail(f"{name} was not ready at {ready_url} within 120s:\n{controller.log_tail()}")


def stop_controller(cluster: Cluster, controller: Controller) -> None:
    delete(cluster, controller.webhooks)
    terminate(controller.process, grace=10)


def ports(*names: str) -> dict[str, int]:
    return dict(zip(names, free_ports(len(names)), strict=True))


# ------------------------------------------------------------------------------ RBAC
RBAC_KINDS = ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "ServiceAccount")
NAMESPACED = ("Role", "RoleBinding", "ServiceAccount")


def upstream_rbac(
    rbac_dir: Path, *, prefix: str, namespace: str, extra_rules: Sequence[JSON] = ()
) -> tuple[list[JSON], str]:
    """The module's ServiceAccount and what its RBAC kustomization binds to it (the user-facing
    editor/viewer roles it also ships bind to nobody and are left out), renamed `prefix` +
    name in `namespace`; plus a ClusterRole of `extra_rules`. Returns (objects, account)."""
    kustomization = yaml.safe_load((rbac_dir / "kustomization.yaml").read_text())
    docs = [
        d
        for d in load_documents(*(rbac_dir / str(f) for f in kustomization["resources"]))
        if d.get("kind") in RBAC_KINDS
    ]
    accounts = [d for d in docs if d["kind"] == "ServiceAccount"]
    if len(accounts) != 1:
        raise AssertionError(f"{rbac_dir}: expected one ServiceAccount, found {len(accounts)}")
    account = str(accounts[0]["metadata"]["name"])

    def binds_account(binding: JSON) -> bool:
        return any(
            s.get("kind") == "ServiceAccount" and s.get("name") == account
            for s in binding.get("subjects") or []
        )

    bindings = [d for d in docs if d["kind"].endswith("Binding") and binds_account(d)]
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings}
    roles = [d for d in docs if (d["kind"], d["metadata"]["name"]) in bound]
    if extra_rules:
        roles.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "extra-role"},
                "rules": list(extra_rules),
            }
        )
        bindings.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "extra-rolebinding"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "extra-role",
                },
                "subjects": [{"kind": "ServiceAccount", "name": account}],
            }
        )
    out = []
    for doc in (accounts[0], *roles, *bindings):
        local = copy.deepcopy(doc)
        meta: JSON = {"name": prefix + str(doc["metadata"]["name"])}
        if doc["kind"] in NAMESPACED:
            meta["namespace"] = namespace
        local["metadata"] = meta
        if "roleRef" in local:
            local["roleRef"]["name"] = prefix + local["roleRef"]["name"]
            local["subjects"] = [
                {"kind": "ServiceAccount", "name": prefix + account, "namespace": namespace}
            ]
        out.append(local)
    return out, prefix + account


# ------------------------------------------------------------------------- one client
@dataclass(frozen=True)
class ClientLayout:
    """Where a client's module keeps what the harness installs (paths inside the module)."""

    name: str
    namespace: str
    #: The release's kustomize namePrefix (RBAC objects are renamed with it).
    prefix: str
    crds: str
    webhooks: str
    rbac: str
    #: The kubebuilder CRD kustomization whose patches turn on conversion webhooks.
    conversion: str = ""
    #: kustomize JSON6902 patches of the webhook configurations: (file, kind).
    webhook_patches: tuple[tuple[str, str], ...] = ()
    #: Name of the one webhook configuration, where the controller looks it up by name.
    webhook_name: str = ""
    #: RBAC rules the module grants outside its RBAC kustomization (documented per client).
    extra_rules: tuple[JSON, ...] = ()


@dataclass(frozen=True)
class ClientInstall:
    """A client's objects installed on the cluster, ready for its controller to start."""

    layout: ClientLayout
    build: ClientBuild
    workdir: Path
    tls: WebhookTLS
    listen: dict[str, int]
    webhooks: list[JSON]
    kubeconfig: Path

    @property
    def ready_url(self) -> str:
        return f"http://127.0.0.1:{self.listen['health']}/readyz"

    def controller_config(self, api_version: str, **fields: Any) -> Path:
        """A controller-runtime Configuration file: no leader election or certificate
        rotation, webhooks on 127.0.0.1 with our certificates, metrics off, health on
        `listen["health"]`; `fields` add to it."""
        config = {
            "apiVersion": api_version,
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {
                "port": self.listen["webhook"],
                "host": "127.0.0.1",
                "certDir": str(self.tls.cert_dir),
            },
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.listen['health']}"},
            **fields,
        }
        path = self.workdir / f"{self.layout.name}.yaml"
        path.write_text(yaml.safe_dump(config))
        return path


def install_client(
    cluster: Cluster,
    workdir: Path,
    layout: ClientLayout,
    *,
    tls: WebhookTLS | None = None,
    extra_crds: Sequence[JSON] = (),
) -> ClientInstall:
    """Build the client, install its namespace, CRDs (conversion webhooks pointed here) and
    RBAC, and prepare its webhook configurations and its ServiceAccount's kubeconfig."""
    build = build_client(layout.name)
    tls = tls or webhook_tls(workdir / "certs")
    listen = ports("webhook", "health")
    converted = conversion_crds(build.src / layout.conversion) if layout.conversion else set()
    crds = [
        with_conversion_webhook(crd, port=listen["webhook"], tls=tls)
        if crd["metadata"]["name"] in converted
        else crd
        for crd in load_documents(build.src / layout.crds)
        if crd.get("kind") == "CustomResourceDefinition"
    ]
    crds.extend(extra_crds)
    webhooks = local_webhooks(
        load_documents(build.src / layout.webhooks),
        port=listen["webhook"],
        tls=tls,
        prefix=layout.name,
        name=layout.webhook_name,
    )
    for patch, kind in layout.webhook_patches:
        patch_webhooks(webhooks, build.src / patch, kind=kind)
    rbac, account = upstream_rbac(
        build.src / layout.rbac,
        prefix=layout.prefix,
        namespace=layout.namespace,
        extra_rules=layout.extra_rules,
    )
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": layout.namespace}}
    apply(cluster, [namespace])
    apply(cluster, crds)
    wait_established(cluster, crds)
    apply(cluster, rbac)
    kubeconfig = token_kubeconfig(
        cluster, account, workdir / f"{layout.name}.kubeconfig", namespace=layout.namespace
    )
    return ClientInstall(layout, build, workdir, tls, listen, webhooks, kubeconfig)


@contextlib.contextmanager
def run_client(
    cluster: Cluster, install: ClientInstall, argv: Sequence[str], *, webhooks_first: bool = False
) -> Iterator[Controller]:
    """The controller (`argv` after the binary) running with its webhook configurations in
    place (applied once it is ready, or before it starts with `webhooks_first`, for a
    controller whose certificate check looks them up), all removed again afterwards."""
    if webhooks_first:
        apply(cluster, install.webhooks)
    try:
        controller = start_controller(
            install.layout.name,
            [str(install.build.binary), *argv],
            install.workdir,
            kubeconfig=install.kubeconfig,
            ready_url=install.ready_url,
            ports=install.listen,
        )
    except BaseException:
        delete(cluster, install.webhooks)
        raise
    controller.webhooks = install.webhooks
    try:
        if not webhooks_first:
            apply(cluster, install.webhooks)
        yield controller
    finally:
        stop_controller(cluster, controller)
