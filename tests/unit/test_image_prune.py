"""What the image prunes (hack/image-prune.txt) is never loaded by gangsched.

The Dockerfile deletes those paths from the image's site-packages; these tests run gangsched
in fresh interpreters of the development venv (the same locked versions, test_install.py)
with those modules made unimportable, so that a new import of one fails here, in CI, rather
than in a pod. Checked: every gangsched module imports; every import statement in gangsched,
including those inside functions, resolves; `gangsched simulate` and `gangsched explain`
(offline, and against an unreachable API server) run; `gangsched run`'s start-up path (slim
client, config, kopf, the connection) loads. The image itself, pruned, runs the seed
walkthrough in tests/e2e/test_image.py.
"""

from __future__ import annotations

import ast
import glob
import json
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from tests.builders import kubeconfig_file

ROOT = Path(__file__).resolve().parents[2]
PRUNE_LIST = ROOT / "hack" / "image-prune.txt"
SITE = Path(sysconfig.get_path("purelib"))


def entries() -> list[str]:
    """The list's paths (shell globs relative to site-packages), as the Dockerfile reads it."""
    out = []
    for raw in PRUNE_LIST.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def pruned_modules() -> list[str]:
    """The importable modules and packages the entries remove, as dotted names: a directory
    `pkg/sub` is pkg.sub, `pkg/name.py` or `pkg/name.*` (source, extension, stub) pkg.name;
    other files (documents) are no modules."""
    names = set()
    for entry in entries():
        for path in map(Path, glob.glob(str(SITE / entry))):
            parts = path.relative_to(SITE).parts
            if path.is_dir():
                names.add(".".join(parts))
            elif path.suffix in (".py", ".so", ".pyi"):
                names.add(".".join([*parts[:-1], parts[-1].split(".", 1)[0]]))
    return sorted(names)


def test_the_list_is_well_formed_and_names_what_is_installed() -> None:
    found = entries()
    assert found, "hack/image-prune.txt lists nothing"
    for entry in found:
        assert not entry.startswith("/") and ".." not in entry.split("/"), entry
        assert " " not in entry, f"one path per line: {entry!r}"
        # The image build fails on an entry that matches nothing; catch it here first.
        assert glob.glob(str(SITE / entry)), f"{entry} matches nothing in {SITE}"
    # gangsched itself is never pruned, nor a whole distribution (drop it from the lock).
    assert not [m for m in pruned_modules() if "." not in m or m.startswith("gangsched")]
    assert "kubernetes_asyncio.client.models" in pruned_modules()


# The finder the probes install first: the pruned modules cannot be imported, as in the image.
_BLOCK = textwrap.dedent(
    """
    import importlib.abc, json, sys
    PRUNED = tuple(json.loads(sys.argv[1]))

    class Pruned(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == p or name.startswith(p + ".") for p in PRUNED):
                raise ModuleNotFoundError(
                    f"No module named {name!r} (the image prunes it: hack/image-prune.txt)",
                    name=name,
                )
            return None

    sys.meta_path.insert(0, Pruned())
    """
)


def probe(body: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = _BLOCK + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script, json.dumps(pruned_modules()), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_statements() -> list[tuple[str, list[str], str]]:
    """(module, names from it, file:line) of every import statement in gangsched that can
    run: module level or inside functions, not under `if TYPE_CHECKING:`."""
    found: list[tuple[str, list[str], str]] = []
    for path in sorted((ROOT / "gangsched").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        package = package.removesuffix(".__init__")
        skipped: set[int] = set()
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _type_checking_only(node):
                skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                found += [(alias.name, [], where) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                if base != "__future__":
                    found.append((base, [alias.name for alias in node.names], where))
    return found


def test_every_gangsched_module_and_import_loads_without_the_pruned_modules() -> None:
    """As `gangsched run` and `gangsched explain` load them: the slim client first."""
    statements = import_statements()
    assert any(m.startswith("kubernetes_asyncio") for m, _, _ in statements)  # the scan works
    assert any("edge/kube.py" in where for _, _, where in statements)
    done = probe(
        """
        import importlib, pkgutil
        from gangsched.edge import slim_client
        assert slim_client.install(), "the slim client did not install"
        import gangsched
        failed = []
        for info in pkgutil.walk_packages(gangsched.__path__, "gangsched."):
            try:
                importlib.import_module(info.name)
            except ImportError as exc:
                failed.append(f"import {info.name}: {exc}")
        for module, names, where in json.loads(sys.argv[2]):
            try:
                imported = importlib.import_module(module)
                for name in names:
                    if name != "*" and not hasattr(imported, name):
                        importlib.import_module(f"{module}.{name}")
            except ImportError as exc:
                failed.append(f"{where}: {module} {names}: {exc}")
        print(json.dumps(failed))
        """,
        json.dumps(statements),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failed, "\n".join(failed)


def _kubeconfig(tmp_path: Path) -> Path:
    return kubeconfig_file(tmp_path / "kubeconfig", server="http://127.0.0.1:1")


_MAIN = """
import runpy
sys.argv = ["gangsched", *sys.argv[2:]]
runpy.run_module("gangsched.cli", run_name="__main__")
"""


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["simulate", "examples/seed-walkthrough.yaml"], 0),
        (["simulate", "examples/dra-two-gpus.yaml"], 0),  # CEL device selectors
        (["explain", "default/hp-training-job", "-f", "examples/seed-walkthrough.yaml"], 0),
        (["explain", "default/x", "--kubeconfig", "KUBECONFIG"], 1),  # unreachable: exit 1
    ],
    ids=["simulate", "simulate-dra", "explain-offline", "explain-cluster"],
)
def test_commands_run_without_the_pruned_modules(
    argv: list[str], code: int, tmp_path: Path
) -> None:
    argv = [str(_kubeconfig(tmp_path)) if a == "KUBECONFIG" else a for a in argv]
    done = probe(_MAIN, *argv)
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    if code:
        assert "cannot reach the API server" in done.stderr, done.stderr


def test_the_start_of_gangsched_run_loads_without_the_pruned_modules(tmp_path: Path) -> None:
    """What `gangsched run` does before its first request (cli._run, _load_for_run): the real
    run, in the pruned image, is tests/e2e/test_image.py."""
    done = probe(
        """
        import asyncio
        from gangsched import cli
        from gangsched.edge import slim_client
        assert slim_client.install()
        config, problem = cli._load_for_run(None)
        assert config is not None, problem
        from gangsched.edge.early_lists import EarlyLists
        from gangsched.edge.kube import Kube

        async def main():
            kube = await Kube.connect(sys.argv[2])
            await kube.close()

        asyncio.run(main())
        print("ok")
        """,
        str(_kubeconfig(tmp_path)),
    )
    assert done.returncode == 0 and done.stdout.split() == ["ok"], done.stderr[-3000:]
