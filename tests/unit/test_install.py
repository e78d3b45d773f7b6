"""The production install is consistent: lock files, Dockerfile, .dockerignore and the
Deployment agree with each other and with pyproject.toml. (The install itself, from the lock
into a fresh venv, runs in tests/e2e/test_deploy.py, which then runs that venv's gangsched on
the local control plane.)"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def locked(name: str) -> dict[str, tuple[str, list[str]]]:
    """package -> (version, hashes) of a --require-hashes requirements file."""
    text = (ROOT / name).read_text().replace("\\\n", " ")
    entries: dict[str, tuple[str, list[str]]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^([A-Za-z0-9._-]+)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})+)$", line)
        assert match, f"{name}: not an exact pin with hashes: {line!r}"
        entries[canonicalize_name(match[1])] = (match[2], re.findall(r"[0-9a-f]{64}", match[3]))
    return entries


def test_every_runtime_dependency_is_pinned_with_hashes_and_satisfies_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = locked("requirements.lock")
    for spec in project["dependencies"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in lock, f"{req.name} is not in requirements.lock"
        assert req.specifier.contains(lock[name][0]), f"{name}=={lock[name][0]} violates {spec}"
    dev = {canonicalize_name(Requirement(s).name) for s in project["optional-dependencies"]["dev"]}
    assert not dev & set(lock), f"dev-only packages in the runtime lock: {dev & set(lock)}"


def test_lock_matches_the_venv_the_tests_ran_against() -> None:
    for name, (version, hashes) in locked("requirements.lock").items():
        assert metadata.version(name) == version, (
            f"{name}: venv has {metadata.version(name)}, lock has {version}; "
            "run .venv/bin/python hack/gen-requirements-lock.py"
        )
        assert hashes


def test_build_backend_is_locked_and_satisfies_build_system() -> None:
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    lock = locked("requirements-build.lock")
    for spec in build["requires"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in lock and req.specifier.contains(lock[name][0]), spec


def stages(dockerfile: str) -> list[list[str]]:
    out: list[list[str]] = []
    for raw in dockerfile.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if line.startswith("FROM "):
            out.append([])
        if out and line and not line.startswith("#"):
            out[-1].append(line)
    return out


def test_dockerfile_is_multi_stage_slim_non_root_and_uses_the_locked_installer() -> None:
    text = (ROOT / "Dockerfile").read_text()
    build, final = stages(text)
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in text  # the lock's CPython (3.11)
    assert all(s[0].startswith("FROM ${PYTHON_IMAGE}") for s in (build, final))
    assert any("install-locked.sh deps" in line for line in build)
    assert any("install-locked.sh wheel" in line for line in build)
    final_text = "\n".join(final)
    for forbidden in ("apt-get", "gcc", "build-essential", "pip install", "install-locked"):
        assert forbidden not in final_text, f"final stage must not run {forbidden}"
    user = next(line for line in final if line.startswith("USER "))
    uid = user.split()[1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "numeric non-root user (runAsNonRoot can check it)"
    assert 'ENTRYPOINT ["gangsched"]' in final_text
    assert "COPY --from=build /opt/gangsched /opt/gangsched" in final_text


def test_installer_uses_hashes_binary_wheels_and_the_locked_backend() -> None:
    script = (ROOT / "hack" / "install-locked.sh").read_text()
    assert "--require-hashes" in script and "--only-binary=:all:" in script
    assert "--no-build-isolation" in script and "requirements-build.lock" in script


def test_dockerignore_lets_in_exactly_what_the_build_copies() -> None:
    allowed = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied: set[str] = set()
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            copied.update(p.rstrip("/") for p in line.split()[1:-1])
    assert copied <= allowed, copied - allowed
    for path in allowed:
        assert (ROOT / path).exists(), path


def test_deployment_runs_the_image_entrypoint_with_the_configmap() -> None:
    docs = [
        d
        for f in sorted((ROOT / "manifests").glob("*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
        if d
    ]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    config_path = args[args.index("--config") + 1]
    mount = next(m for m in container["volumeMounts"] if config_path.startswith(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert config_path.rsplit("/", 1)[1] in config_map["data"]
    assert "run" in args
