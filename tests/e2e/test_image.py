"""The container image `make image` builds (hack/image.sh: buildah on a Debian-built stand-in
for python:3.11-slim-bookworm), checked and run the way a pod runs it.

* What is inside: the numeric non-root user, gangsched --version, no pip (no way to install
  anything), no compiler, and no trace in any layer of the proxy CA the build got as a secret.
* Run: `buildah run` with the host network as user 65532, the configuration file and the
  ServiceAccount token mounted read-only where a pod has them, in-cluster configuration
  through KUBERNETES_SERVICE_HOST/PORT; the seed walkthrough replayed through it; SIGTERM (as
  the kubelet sends it) stops it cleanly.

Marked `image` (`make test-image`, run by .ci/run): a cold image build takes minutes, so it is
not part of `make test`.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import ssl
import subprocess
import tarfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import REPO_ROOT, Cluster
from .harness import SYSTEM_NS, install, manifest_config
from .k8s import Kube, unique_name
from .walkthrough import replay_seed_walkthrough

pytestmark = [pytest.mark.e2e, pytest.mark.image]

IMAGE_SH = REPO_ROOT / "hack" / "image.sh"
# Where a pod has its ServiceAccount token: /var/run/secrets/kubernetes.io/serviceaccount. In the
# image /var/run is a symlink to /run, and buildah does not mount through a symlink.
SA_DIR = "/run/secrets/kubernetes.io/serviceaccount"
MOZILLA = Path("/usr/share/ca-certificates/mozilla")


def buildah(*args: str, timeout: float = 600, check: bool = True) -> str:
    proc = subprocess.run(
        [str(IMAGE_SH), "buildah", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"buildah {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc.stdout


@pytest.fixture(scope="module")
def image() -> str:
    """The image `make image` built (built here if missing; cached when unchanged)."""
    proc = subprocess.run(
        [str(IMAGE_SH), "build"], capture_output=True, text=True, timeout=3600, check=False
    )
    assert proc.returncode == 0, f"hack/image.sh build failed:\n{proc.stderr[-4000:]}"
    name, _, size = proc.stdout.strip().splitlines()[-1].partition(" size ")
    print(f"\nimage {name}: {size}")
    return name


@pytest.fixture(scope="module")
def container(image: str) -> Iterator[str]:
    name = unique_name("gangsched-image-test")
    buildah("from", "--pull=never", "--name", name, image)
    try:
        yield name
    finally:
        buildah("rm", name, check=False)


def run_in(
    container: str, script: str, *, user: str | None = None
) -> subprocess.CompletedProcess[str]:
    args = ["run", "--isolation", "chroot"]
    if user:
        args += ["--user", user]
    return subprocess.run(
        [str(IMAGE_SH), "buildah", *args, container, "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def image_config(image: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(buildah("inspect", "--type", "image", image))
    return config["OCIv1"]["config"]  # type: ignore[no-any-return]


def test_image_runs_as_numeric_non_root_and_reports_its_version(image: str, container: str) -> None:
    config = image_config(image)
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["gangsched"]
    assert config["Cmd"] == ["run", "--config", "/etc/gangsched/config.yaml"]
    # The image's own user (no --user): what a pod without runAsUser gets.
    proc = run_in(container, "id -u; id -g; gangsched --version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["65532", "65532", "gangsched", "0.1.0"], proc.stdout


# Prints one line per finding, then the interpreter's version (proof the script ran through).
NOTHING_TO_INSTALL_WITH = r"""
for py in python3 /usr/local/bin/python3.11 /opt/gangsched/bin/python; do
  $py -c 'import pip' 2>/dev/null && echo "pip importable by $py"
done
for tool in pip pip3 pip3.11 gcc cc c++ g++ clang tcc ld as make; do
  command -v "$tool" >/dev/null 2>&1 && echo "found $tool: $(command -v $tool)"
done
find / -xdev \( -path '*-packages/pip' -o -name 'pip-*.whl' -o -name cc1 \) -print
python3 -c 'import sys; print(sys.version_info[:2])'
"""


def test_image_has_no_pip_and_no_compiler(container: str) -> None:
    proc = run_in(container, NOTHING_TO_INSTALL_WITH)
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "(3, 11)", proc.stdout + proc.stderr  # the script ran to the end
    assert lines[:-1] == [], "\n".join(lines[:-1])


# Prints what is left of the pruned paths (nothing, if pruned), whether the full client still
# imports, and what `gangsched explain` says of an unreachable API server (slim client, config,
# connection and a request, all in the image), then "done".
PRUNED_AND_EXPLAIN = r"""
site=$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
for entry in {entries}; do
  for path in "$site"/$entry; do [ -e "$path" ] && echo "shipped: $path"; done
done
python -c 'import kubernetes_asyncio.client' 2>/dev/null && echo "the full client imports"
cat > /tmp/kubeconfig <<'EOF'
{{"apiVersion": "v1", "kind": "Config", "current-context": "x",
 "clusters": [{{"name": "c", "cluster": {{"server": "http://127.0.0.1:1"}}}}],
 "users": [{{"name": "u", "user": {{"token": "t"}}}}],
 "contexts": [{{"name": "x", "context": {{"cluster": "c", "user": "u"}}}}]}}
EOF
gangsched explain default/x --kubeconfig /tmp/kubeconfig 2>&1; echo "explain exit $?"
echo done
"""


def test_image_ships_none_of_what_it_prunes_and_explains(container: str) -> None:
    """hack/image-prune.txt's paths are gone, and the commands that use kubernetes-asyncio
    still load: `gangsched run` in the walkthrough below, `gangsched explain` here."""
    entries = [
        line.split("#", 1)[0].strip()
        for line in (REPO_ROOT / "hack" / "image-prune.txt").read_text().splitlines()
    ]
    script = PRUNED_AND_EXPLAIN.format(entries=" ".join(e for e in entries if e))
    proc = run_in(container, script, user="65532:65532")
    lines = proc.stdout.strip().splitlines()
    assert lines and lines[-1] == "done", proc.stdout + proc.stderr
    assert not [line for line in lines if line.startswith(("shipped:", "the full"))], lines
    assert "explain exit 1" in lines, proc.stdout
    assert "cannot reach the API server" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stdout, proc.stdout


def _certs(bundle: str) -> list[bytes]:
    return [
        ssl.PEM_cert_to_DER_cert(m[0])
        for m in re.finditer(
            r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", bundle, flags=re.S
        )
    ]


def private_cas() -> list[bytes]:
    """DER of the CAs passed to the build as the pip-ca secret (hack/image.sh's choice) that
    are not Mozilla's public roots: the proxy's, which must not end up in the image."""
    path = os.environ.get("PIP_CA") or os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    assert path, "no CA file (PIP_CA, PIP_CERT or SSL_CERT_FILE): the build got no secret to leak"
    public = {der for crt in MOZILLA.glob("*.crt") for der in _certs(crt.read_text())}
    found = [der for der in _certs(Path(path).read_text()) if der not in public]
    assert found, f"{path} holds no private CA: this check would check nothing"
    return found


def needles(der: bytes) -> list[bytes]:
    """The CA as it could appear in a file: DER, and a line of its PEM body."""
    body = base64.b64encode(der)
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return [der, lines[len(lines) // 2]]


def test_no_layer_holds_the_build_secret(image: str, tmp_path: Path) -> None:
    searched = [n for der in private_cas() for n in needles(der)]
    out = tmp_path / "oci"
    buildah("push", "--disable-compression", image, f"oci:{out}", timeout=900)
    index = json.loads((out / "index.json").read_text())
    manifest_digest = index["manifests"][0]["digest"].split(":")[1]
    manifest = json.loads((out / "blobs" / "sha256" / manifest_digest).read_text())
    config_blob = (
        out / "blobs" / "sha256" / manifest["config"]["digest"].split(":")[1]
    ).read_bytes()
    assert not [n for n in searched if n in config_blob], "the image config holds the CA"
    files = 0
    for layer in manifest["layers"]:
        blob = out / "blobs" / "sha256" / layer["digest"].split(":")[1]
        with tarfile.open(blob) as tar:
            for member in tar:
                assert not member.name.lstrip("./").startswith("run/secrets/"), member.name
                if not member.isfile():
                    continue
                handle = tar.extractfile(member)
                assert handle is not None
                data = handle.read()
                files += 1
                hits = [n for n in searched if n in data]
                assert not hits, f"layer {layer['digest'][:19]} holds the proxy CA in {member.name}"
    assert files > 1000, f"only {files} files scanned: the export is not the image"


# ----------------------------------------------------------------------------------- the run
def service_account_dir(cluster: Cluster, directory: Path) -> Path:
    """token, ca.crt, namespace as the kubelet projects them for the shipped ServiceAccount."""
    directory.mkdir()
    token = cluster.kubectl(
        "-n", SYSTEM_NS, "create", "token", "gangsched", "--duration", "1h"
    ).stdout.strip()
    kubeconfig = yaml.safe_load(cluster.kubeconfig.read_text())
    ca = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(ca)
    (directory / "namespace").write_text(SYSTEM_NS)
    for path in (directory, *directory.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return directory


def _descendants(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        children = (task / "children").read_text().split() if (task / "children").exists() else []
        for child in map(int, children):
            out += [child, *_descendants(child)]
    return out


def scheduler_process(buildah_pid: int) -> tuple[int, str] | None:
    """(pid, /proc status) of the gangsched process inside the container, once started."""
    for pid in _descendants(buildah_pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        # The interpreter running the venv's entry point: argv [venv python, entry point, ...].
        # Not buildah's exec helper, its parent, whose argv [buildah-chroot-exec, entry point,
        # ...] names the entry point too: a SIGTERM to the helper kills it, its child gets
        # SIGKILL (the parent-death signal) and buildah run exits 1, with no clean shutdown.
        # In a pod the kubelet's SIGTERM reaches the interpreter itself (PID 1).
        if cmdline[:2] == [b"/opt/gangsched/bin/python", b"/opt/gangsched/bin/gangsched"]:
            return pid, status
    return None


@pytest.mark.asyncio(loop_scope="session")
async def test_image_schedules_the_seed_walkthrough_in_cluster(
    image: str, cluster: Cluster, kube: Kube, tmp_path: Path
) -> None:
    install(cluster)  # CRDs, RBAC (the ServiceAccount the token is for), ConfigMap
    await kube.delete(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NS}/leases/gangsched")
    config = manifest_config()  # manifests/' ConfigMap, listening on free loopback ports
    config_dir = tmp_path / "config"
    config_dir.mkdir(mode=0o755)
    (config_dir / "config.yaml").write_text(yaml.safe_dump(config))
    (config_dir / "config.yaml").chmod(0o644)
    sa = service_account_dir(cluster, tmp_path / "serviceaccount")
    entrypoint = image_config(image)
    command = [*entrypoint["Entrypoint"], *entrypoint["Cmd"]]
    name = unique_name("gangsched-image-run")
    buildah("from", "--pull=never", "--name", name, image)
    log = tmp_path / "gangsched.log"
    apiserver = urllib.parse.urlsplit(cluster.server)
    process = subprocess.Popen(
        [
            str(IMAGE_SH), "buildah", "run", "--isolation", "chroot", "--network", "host",
            "--user", "65532:65532",
            "--volume", f"{config_dir}:/etc/gangsched:ro",
            "--volume", f"{sa}:{SA_DIR}:ro",
            "--mount", "type=tmpfs,destination=/tmp",
            "--env", f"KUBERNETES_SERVICE_HOST={apiserver.hostname}",
            "--env", f"KUBERNETES_SERVICE_PORT={apiserver.port}",
            "--env", f"POD_NAME={name}",
            "--env", f"POD_NAMESPACE={SYSTEM_NS}",
            name, "--", *command,
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    inner: tuple[int, str] | None = None

    def tail() -> str:
        return "\n".join(log.read_text(errors="replace").splitlines()[-40:])

    def alive() -> None:
        if process.poll() is not None:
            raise AssertionError(f"gangsched in the image exited {process.returncode}:\n{tail()}")

    try:
        deadline = time.monotonic() + 120
        ready = False
        while not ready:
            alive()
            assert time.monotonic() < deadline, f"not ready within 120s:\n{tail()}"
            try:
                url = f"http://{config['metricsAddress']}/readyz"
                with urllib.request.urlopen(url, timeout=2) as response:
                    ready = response.status == 200
            except OSError:
                time.sleep(0.5)
        inner = scheduler_process(process.pid)
        assert inner is not None, "no gangsched process found under buildah run"
        pid, status = inner
        uids = re.search(r"^Uid:\s+(.*)$", status, flags=re.M)
        assert uids and set(uids[1].split()) == {"65532"}, status
        pid_dir = cluster.dir / "pids"
        if pid_dir.is_dir():  # cluster-down stops it if this test dies
            (pid_dir / f"e2e-{name}.pid").write_text(str(pid))

        seen = await replay_seed_walkthrough(cluster, kube, workdir=tmp_path, alive=alive)
        assert sorted(seen["placed"]) == ["hp-worker-1", "hp-worker-2"]

        # The binds are the image's: its ServiceAccount's token made them, in-cluster.
        with urllib.request.urlopen(f"http://{config['metricsAddress']}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        assert re.search(r"^gangsched_leader 1(\.0)?$", metrics, flags=re.M), metrics[-2000:]
        lease = await kube.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NS}/leases/gangsched"
        )
        assert lease["spec"]["holderIdentity"] == name

        # The kubelet's SIGTERM goes to the container's process: a clean exit, lease released.
        os.kill(pid, signal.SIGTERM)
        assert process.wait(timeout=60) == 0, tail()
        lease = await kube.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NS}/leases/gangsched"
        )
        assert not lease["spec"].get("holderIdentity"), lease["spec"]
        text = log.read_text(errors="replace")
        assert "Traceback" not in text, tail()
        records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        assert records, f"no JSON log lines (logFormat json):\n{tail()}"
    finally:
        if process.poll() is None:
            if inner is not None:
                os.kill(inner[0], signal.SIGKILL)
            process.kill()
            process.wait(timeout=30)
        buildah("rm", name, check=False)
