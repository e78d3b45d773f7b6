"""deploy/helm/gangsched: the generated parts (CRDs, RBAC, the configuration block of
values.yaml, the monitoring files) are up to date with crds/, manifests/ and deploy/monitoring/,
and the generator translates every RBAC object of manifests/ -- so a rule another change adds
there reaches the chart, or this test says to run deploy/helm/sync.py. The chart rendered by
Helm is compared with manifests/ object by object in tests/e2e/test_helm.py."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from gangsched.config import Config

ROOT = Path(__file__).resolve().parents[2]
SYNC = ROOT / "deploy" / "helm" / "sync.py"
CHART = ROOT / "deploy" / "helm" / "gangsched"


def load_sync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("helm_sync", SYNC)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_chart_files_are_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, str(SYNC), "--check"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_chart_crds_are_the_repository_crds_byte_for_byte() -> None:
    ours = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert ours and chart == ours


def test_values_config_is_a_valid_configuration_equal_to_the_manifests_one() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    config_map = next(
        doc
        for path in sorted((ROOT / "manifests").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc["kind"] == "ConfigMap"
    )
    manifest_config = yaml.safe_load(config_map["data"]["config.yaml"])
    chart_config = values["config"]
    assert chart_config["leaderElection"]["leaseNamespace"] == ""  # the release namespace
    chart_config["leaderElection"]["leaseNamespace"] = "gangsched-system"
    assert chart_config == manifest_config
    Config.model_validate(chart_config)


def rbac_rules(text: str) -> dict[tuple[str, str], list[dict[str, list[str]]]]:
    """(kind, name) -> rules of the Roles and ClusterRoles in a (rendered or plain) file."""
    return {
        (doc["kind"], doc["metadata"]["name"]): doc["rules"]
        for doc in yaml.safe_load_all(text)
        if doc and doc.get("kind") in ("Role", "ClusterRole")
    }


def render_rbac(template: str) -> str:
    """The generated template's Go-template actions replaced as a default install fills them
    (release "gangsched" in gangsched-system): enough to read its rules and names."""
    filled = {
        '{{ include "gangsched.fullname" . }}': "gangsched",
        '{{ include "gangsched.serviceAccountName" . }}': "gangsched",
        '{{ include "gangsched.leaseNamespace" . }}': "gangsched-system",
        "{{ .Release.Namespace }}": "gangsched-system",
    }
    out = []
    for raw in template.splitlines():
        stripped = raw.strip()
        if stripped.startswith("{{-") and stripped.endswith("}}"):
            continue
        line = raw
        for action, value in filled.items():
            line = line.replace(action, value)
        assert "{{" not in line, line
        out.append(line)
    return "\n".join(out)


def test_rbac_template_grants_exactly_the_manifests_rules() -> None:
    manifests = "\n---\n".join(p.read_text() for p in sorted((ROOT / "manifests").glob("*.yaml")))
    rendered = render_rbac((CHART / "templates" / "rbac.yaml").read_text())
    assert rbac_rules(rendered) == rbac_rules(manifests)
    assert rbac_rules(rendered), "no rules found"


def test_a_rule_added_to_manifests_reaches_the_chart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync = load_sync()
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for path in (ROOT / "manifests").glob("*.yaml"):
        (manifests / path.name).write_text(path.read_text())
    rbac = manifests / "10-rbac.yaml"
    rbac.write_text(
        rbac.read_text().replace(
            "rules:\n",
            "rules:\n  # added by another change\n"
            "  - apiGroups: [storage.k8s.io]\n    resources: [csinodes]\n"
            "    verbs: [get, list, watch]\n",
            1,
        )
    )
    (manifests / "15-extra.yaml").write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
        "metadata:\n  name: gangsched-dra\n  labels: {app.kubernetes.io/name: gangsched}\n"
        "rules:\n  - apiGroups: [resource.k8s.io]\n    resources: [resourceclaims]\n"
        "    verbs: [get]\n"
    )
    monkeypatch.setattr(sync, "MANIFESTS", manifests)
    rendered = render_rbac(sync.rbac_template())
    rules = rbac_rules(rendered)
    assert "# added by another change" in rendered  # comments kept
    assert {"apiGroups": ["storage.k8s.io"], "resources": ["csinodes"], "verbs": [
        "get", "list", "watch"
    ]} in rules[("ClusterRole", "gangsched")]  # fmt: skip
    assert rules[("ClusterRole", "gangsched-dra")] == [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}
    ]


def test_objects_the_generator_cannot_translate_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync = load_sync()
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "10-rbac.yaml").write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
        "metadata:\n  name: someone-else\nrules: []\n"
    )
    monkeypatch.setattr(sync, "MANIFESTS", manifests)
    with pytest.raises(sync.StaleSourceError, match="someone-else"):
        sync.rbac_template()
