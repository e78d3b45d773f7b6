"""README.md and docs/ are executable: every code block and every command they show is checked
here, offline, so the documentation cannot drift from the code.

Fenced blocks, by language (any other language fails, so every block says what it is):

- ``yaml``: every document parses. A block of Kubernetes objects is one input file of
  `gangsched simulate -o json`, run in-process, which must load and run it (exit 0); objects of
  the CRDs in crds/ must also satisfy the CRD's openAPI schema. A block without `apiVersion` is a
  configuration file, validated by `gangsched.config.Config`.
- ``json``: parses. After `<!-- output of: CMD -->` it must be CMD's real output, free-text
  messages aside.
- ``sh``: every command is checked (below), and the offline `gangsched simulate` and
  `gangsched explain -f` commands are run and must exit 0.
- ``text``: output, not input; only the repository paths it names are checked.
- ``mermaid``: the architecture picture; every module path in it must exist.
- `<!-- file: PATH -->` before a block: the block is exactly PATH's content.

Commands, in ``sh`` blocks and in inline code:

- `gangsched ...`, `.venv/bin/gangsched ...`, `kubectl gangsched ...`: parsed by the real
  parser (`gangsched.cli`); every repository file they name exists, and a `--config` given is a
  valid configuration;
- `make TARGET [VAR=value]`: the target exists in the Makefile or hack/cluster.mk, and the
  variable is one they use;
- `helm ...`: the chart exists, every `--set` key exists in its values.yaml, and a `--set
  config.*` still gives a valid configuration;
- `kubectl apply|delete -f PATH`: PATH holds Kubernetes objects; a Deployment or Service named in
  `gangsched-system` (and a container named by `set image`) is one that manifests/ creates;
- `docker build .`, scripts and `python -m MODULE`: the Dockerfile, script or module exists;
- any other program fails the test until a check is added here.

Anywhere in the docs, every repository path (`gangsched/...`, `examples/...`, `tests/...`, ...)
and every dotted module (`gangsched.x.y`, with an optional attribute) must exist, and relative
links (with their #anchors) must resolve. Every example file named is simulated (or, for a
configuration, validated), and the README's tour is replayed offline.

The reference pages list exactly what the code defines: configuration keys and defaults
(`gangsched.config.Config`), metrics (`gangsched.edge.metrics.Metrics`), alerts
(deploy/monitoring/prometheus-rules.yaml), each command's options (the parser), and condition
and event names (string literals in gangsched/). The README is at most 210 lines and starts with
its two commands.

What needs a live cluster is covered by the e2e tests: the chart's install, upgrade and uninstall
by tests/e2e/test_helm.py; `kubectl apply -f crds/ -f manifests/` and the locked install by
tests/e2e/test_deploy.py; `gangsched explain` against a cluster (and `kubectl gangsched`) by
tests/e2e/test_explain.py; the monitoring objects on a real Prometheus by
tests/e2e/test_observability.py; the image by tests/e2e/test_image.py (`make test-image`); the
live demo by hack/demo.sh itself, which fails when a step of the walkthrough is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from gangsched import cli, explain
from gangsched.config import Config, load_config

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
README_MAX_LINES = 210
TOP_DIRS = "gangsched|tests|hack|deploy|examples|manifests|crds|bench|devtools|docs|\\.ci"
#: A repository path: a top-level folder, then more. Not part of a longer path or a URL.
REPO_PATH = re.compile(rf"(?<![\w./~$-])(?:{TOP_DIRS})/[\w./*-]*")
#: A dotted module of gangsched, maybe with an attribute: gangsched.core.cycle.GangPlacer.
#: Not a domain such as the `gangsched.io/` of annotation names (a "/" follows it).
MODULE = re.compile(r"(?<![\w./-])gangsched(?:\.[A-Za-z_]\w*)+(?![\w/-])")
#: Paths the build makes (symlinks to the Go builds' caches), absent from a fresh clone.
GENERATED = {"hack/k8s/bin", "hack/prometheus/bin", "hack/helm/bin"}
FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*(file|output of):\s*(.+?)\s*-->$")
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
LANGUAGES = {"yaml", "json", "sh", "text", "mermaid"}
COMMAND_WORDS = {
    "gangsched",
    ".venv/bin/gangsched",
    "kubectl",
    "helm",
    "make",
    "docker",
    ".venv/bin/python",
    "python3",
}
JSON = dict[str, Any]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    text: str
    #: ("file" | "output of", argument) from the HTML comment right before the fence.
    marker: tuple[str, str] | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def split_page(page: Path) -> tuple[list[Block], str]:
    """The fenced blocks of a page, and its prose (everything outside them)."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            prose.append(lines[i])
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"{page.relative_to(ROOT)}:{start + 1}: unterminated code block"
        before = next((line for line in reversed(lines[:start]) if line.strip()), "")
        found = MARKER.match(before.strip())
        marker = (found.group(1), found.group(2)) if found else None
        blocks.append(Block(page, start + 1, fence.group(1), "\n".join(body) + "\n", marker))
        i += 1
    return blocks, "\n".join(prose)


BLOCKS = [block for page in PAGES for block in split_page(page)[0]]


def blocks_of(lang: str) -> list[Block]:
    return [block for block in BLOCKS if block.lang == lang]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ------------------------------------------------------------------------------ running gangsched
def expand(args: list[str]) -> list[str]:
    """Shell globs over the repository, as the shell would expand them."""
    out: list[str] = []
    for arg in args:
        if any(c in arg for c in "*?[") and not arg.startswith("-"):
            matches = sorted(rel(p) for p in ROOT.glob(arg))
            assert matches, f"{arg}: matches no file"
            out += matches
        else:
            out.append(arg)
    return out


def parse_gangsched(args: list[str]) -> argparse.Namespace | None:
    """The real parser's reading of `gangsched ARGS` (None for --help/--version), or a failure
    with argparse's message."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            return cli._parser().parse_args(args)
    except SystemExit as exc:
        assert exc.code == 0, f"gangsched {shlex.join(args)}: {stderr.getvalue().strip()}"
        return None


def run_offline(args: list[str]) -> str:
    """Run an offline `gangsched simulate` or `gangsched explain -f` in-process, in the
    repository, and return what it printed; it must exit 0."""
    ns = parse_gangsched(args)
    assert ns is not None
    out, err = io.StringIO(), io.StringIO()
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli._simulate(ns) if ns.command == "simulate" else explain.run(ns)
    finally:
        os.chdir(cwd)
    assert code == 0, f"gangsched {shlex.join(args)} exited {code}:\n{err.getvalue()}"
    return out.getvalue()


def simulate_text(text: str, tmp_path: Path) -> JSON:
    manifest = tmp_path / "block.yaml"
    manifest.write_text(text)
    result: JSON = json.loads(run_offline(["simulate", str(manifest), "-o", "json"]))
    return result


# ------------------------------------------------------------------------------ paths and modules
def check_repo_path(token: str) -> None:
    path = token.removeprefix("./").rstrip(".,:;")
    if any(c in path for c in "<>{}") or "..." in path:
        return
    if path.rstrip("/") in GENERATED:
        return
    if any(c in path for c in "*?["):
        assert list(ROOT.glob(path)), f"{path}: matches no file in the repository"
    else:
        assert (ROOT / path).exists(), f"{path}: no such file or folder in the repository"


def module_file(dotted: str) -> Path | None:
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def check_module(dotted: str) -> None:
    """gangsched.a.b[.Attribute[.more]]: the longest module prefix exists and defines the
    first attribute after it."""
    parts = dotted.rstrip(".").split(".")
    for cut in range(len(parts), 0, -1):
        found = module_file(".".join(parts[:cut]))
        if found is None:
            continue
        if cut < len(parts):
            name = parts[cut]
            defined = re.compile(rf"^(?:class|def|async def) {name}\b|^{name}\b\s*[:=]", re.M)
            assert defined.search(found.read_text()) or module_file(".".join(parts[: cut + 1])), (
                f"{dotted}: {rel(found)} defines no {name}"
            )
        return
    pytest.fail(f"{dotted}: no such module")


def repo_paths(text: str) -> list[str]:
    return REPO_PATH.findall(text)


def modules(text: str) -> list[str]:
    return [m for m in MODULE.findall(text) if not m.endswith((".yaml", ".py", ".json"))]


# ------------------------------------------------------------------------------ shell commands
def shell_commands(text: str) -> Iterator[list[str]]:
    """The simple commands of a shell snippet: continuation lines joined, comments dropped,
    split at `&&`, `||`, `;` and `|`, environment assignments in front removed."""
    for line in text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        command: list[str] = []
        for token in [*lexer, ";"]:
            if token in {"&&", "||", ";", "|", "&"}:
                while command and re.match(r"^[A-Z_][A-Z0-9_]*=", command[0]):
                    command.pop(0)
                if command:
                    yield command
                command = []
            else:
                command.append(token)


def makefile_text() -> str:
    return (ROOT / "Makefile").read_text() + (ROOT / "hack" / "cluster.mk").read_text()


def make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9][\w.-]*)\s*:(?!=)", makefile_text(), re.M))


def manifests() -> list[JSON]:
    objects: list[JSON] = []
    for path in sorted((ROOT / "manifests").glob("*.yaml")):
        objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return objects


def kubernetes_objects(path: Path) -> list[JSON]:
    """The objects `kubectl apply -f PATH` sends: a folder's .json, .yaml and .yml files."""
    suffixes = {".json", ".yaml", ".yml"}
    files = sorted(p for p in path.iterdir() if p.suffix in suffixes) if path.is_dir() else [path]
    objects = [doc for file in files for doc in yaml.safe_load_all(file.read_text()) if doc]
    assert objects, f"{rel(path)}: no Kubernetes objects"
    for obj in objects:
        assert isinstance(obj, dict) and obj.get("apiVersion") and obj.get("kind"), (
            f"{rel(path)}: not a Kubernetes object: {str(obj)[:80]}"
        )
    return objects


def option_values(args: list[str], *names: str) -> list[str]:
    values = []
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                values.append(args[i + 1])
            elif arg.startswith(f"{name}="):
                values.append(arg.partition("=")[2])
    return values


def helm_values() -> JSON:
    values: JSON = yaml.safe_load((ROOT / "deploy/helm/gangsched/values.yaml").read_text())
    return values


def check_gangsched(args: list[str], *, run: bool) -> None:
    args = expand(args)
    if len(args) == 1 and not args[0].startswith("-"):
        args = [*args, "--help"]  # a bare subcommand named in prose: it must exist
    ns = parse_gangsched(args)
    for token in args:
        for path in repo_paths(token):
            check_repo_path(path)
    if ns is None:
        return
    if ns.config and (ROOT / ns.config).exists():
        load_config(ROOT / ns.config)
    if run and (ns.command == "simulate" or (ns.command == "explain" and ns.file)):
        run_offline(args)


def check_make(args: list[str]) -> None:
    targets = [arg for arg in args if "=" not in arg and not arg.startswith("-")]
    assert targets, "make without a target"
    missing = sorted(set(targets) - make_targets())
    assert not missing, f"make: no target {missing} in the Makefile or hack/cluster.mk"
    for assignment in (arg for arg in args if "=" in arg):
        name = assignment.partition("=")[0]
        assert re.search(rf"\b{name}\b", makefile_text()), f"make: {name} is not a variable it uses"


def check_helm(args: list[str]) -> None:
    assert args and args[0] in {"install", "upgrade", "uninstall", "template", "lint", "status"}
    for token in args:
        for path in repo_paths(token):
            check_repo_path(path)
            if path.startswith("deploy/helm/"):
                assert (ROOT / path / "Chart.yaml").exists(), f"{path}: not a chart"
    for path in option_values(args, "-f", "--values"):
        check_repo_path(path)
    values = helm_values()
    config: JSON = dict(values["config"])
    for setting in option_values(args, "--set"):
        for assignment in setting.split(","):
            key, _, raw = assignment.partition("=")
            node: Any = values
            parts = key.split(".")
            for part in parts:
                assert isinstance(node, dict) and part in node, f"helm --set {key}: no such value"
                node = node[part]
            if parts[0] == "config":
                target = config
                for part in parts[1:-1]:
                    target[part] = dict(target[part])
                    target = target[part]
                target[parts[-1]] = yaml.safe_load(raw)
    config["leaderElection"] = {**config["leaderElection"], "leaseNamespace": "gangsched-system"}
    Config.model_validate(config)


def check_kubectl(args: list[str], *, run: bool) -> None:
    verbs = {
        "apply",
        "delete",
        "create",
        "get",
        "describe",
        "drain",
        "logs",
        "rollout",
        "port-forward",
        "set",
        "wait",
    }
    if args and args[0] == "gangsched":
        check_gangsched(args[1:], run=run)
        return
    namespace = (option_values(args, "-n", "--namespace") or [""])[0]
    while args and args[0] in {"-n", "--namespace"}:
        args = args[2:]  # the namespace before the verb
    assert args and args[0] in verbs, f"kubectl {args[:1]}: not a verb this test knows"
    if args[0] in {"apply", "delete", "create"}:
        files = option_values(args, "-f", "--filename")
        assert files, f"kubectl {args[0]} without -f"
        for file in files:
            check_repo_path(file)
            kubernetes_objects(ROOT / file)
    if namespace != "gangsched-system":
        return
    kinds = {"deployment": "Deployment", "svc": "Service", "service": "Service"}
    shipped = {
        (obj["kind"], obj["metadata"]["name"]): obj
        for obj in manifests()
        if obj["metadata"].get("namespace") == namespace
    }
    for token in args:
        kind, _, name = token.partition("/")
        if kind in kinds and name:
            assert (kinds[kind], name) in shipped, f"{token}: manifests/ creates no such object"
    if args[:2] == ["set", "image"]:
        deployment = shipped[("Deployment", args[2].partition("/")[2])]
        containers = {c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]}
        for assignment in args[3:]:
            container = assignment.partition("=")[0]
            assert container in containers, f"set image: no container {container}"


def check_python(args: list[str]) -> None:
    if args[:1] == ["-m"]:
        module = args[1]
        top = module.split(".")[0]
        if (ROOT / top).is_dir():
            assert module_file(module), f"python -m {module}: no such module"
        else:
            assert importlib.util.find_spec(module), f"python -m {module}: not installed"
        rest = args[2:]
    else:
        check_repo_path(args[0])
        rest = args[1:]
    for token in rest:
        for path in repo_paths(token):
            check_repo_path(path)


def check_command(command: list[str], *, run: bool) -> None:
    program, args = command[0], command[1:]
    if program in {"gangsched", ".venv/bin/gangsched"}:
        check_gangsched(args, run=run)
    elif program == "kubectl":
        check_kubectl(args, run=run)
    elif program == "helm":
        check_helm(args)
    elif program == "make":
        check_make(args)
    elif program in {".venv/bin/python", "python3"}:
        check_python(args)
    elif program == "docker":
        assert args[0] in {"build", "push"}, f"docker {args[0]}"
        if args[0] == "build":
            assert args[-1] == "." and (ROOT / "Dockerfile").exists()
    elif program in {"export", "curl"}:
        pass
    elif program == "bash" or re.match(rf"^(?:{TOP_DIRS})/", program):
        script = args[0] if program == "bash" else program
        check_repo_path(script)
        assert program == "bash" or os.access(ROOT / script, os.X_OK), f"{script}: not executable"
    else:
        pytest.fail(f"{shlex.join(command)}: a program this test cannot check (add a check)")


# ------------------------------------------------------------------------------ CRD schemas
def crd_schemas() -> dict[tuple[str, str, str], JSON]:
    """(group, version, kind) -> the openAPIV3Schema of every CRD in crds/."""
    schemas = {}
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            key = (crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"])
            schemas[key] = version["schema"]["openAPIV3Schema"]
    return schemas


def schema_problems(value: Any, schema: JSON, where: str) -> list[str]:
    """A structural-schema check: types, unknown fields, required, enum, pattern, bounds."""
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, int | str) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected an integer or a string"]
    kind = schema.get("type")
    problems: list[str] = []
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{where}: expected an object"]
        problems += [f"{where}.{r}: required" for r in schema.get("required", []) if r not in value]
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if properties is not None and key in properties:
                problems += schema_problems(item, properties[key], f"{where}.{key}")
            elif isinstance(extra, dict):
                problems += schema_problems(item, extra, f"{where}.{key}")
            elif properties is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                problems.append(f"{where}.{key}: unknown field")
    elif kind == "array":
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        for i, item in enumerate(value):
            problems += schema_problems(item, schema.get("items", {}), f"{where}[{i}]")
    elif kind == "string":
        if not isinstance(value, str):
            return [f"{where}: expected a string"]
        if "enum" in schema and value not in schema["enum"]:
            problems.append(f"{where}: {value!r} is not one of {schema['enum']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            problems.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if len(value) > schema.get("maxLength", len(value)):
            problems.append(f"{where}: longer than {schema['maxLength']}")
    elif kind in {"integer", "number"}:
        types = int if kind == "integer" else int | float
        if not isinstance(value, types) or isinstance(value, bool):
            return [f"{where}: expected {'an integer' if kind == 'integer' else 'a number'}"]
        if value < schema.get("minimum", value) or value > schema.get("maximum", value):
            problems.append(f"{where}: {value} is out of range")
    elif kind == "boolean" and not isinstance(value, bool):
        problems.append(f"{where}: expected a boolean")
    return problems


def check_crd_object(obj: JSON, where: str) -> None:
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    schema = crd_schemas().get((group, version, str(obj["kind"])))
    if schema is not None:
        problems = schema_problems(obj, schema, obj["kind"])
        assert not problems, f"{where}: the CRD refuses it: {problems}"


def yaml_documents(text: str) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def is_kubernetes(docs: list[Any]) -> bool:
    return all(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d in docs)


# ------------------------------------------------------------------------------ the blocks
def test_every_block_names_its_language() -> None:
    odd = [f"{b.where}: ```{b.lang}" for b in BLOCKS if b.lang not in LANGUAGES]
    assert not odd, f"blocks must be one of {sorted(LANGUAGES)}: {odd}"


@pytest.mark.parametrize("block", blocks_of("yaml"), ids=lambda b: b.where)
def test_yaml_block(block: Block, tmp_path: Path) -> None:
    docs = yaml_documents(block.text)
    assert docs, f"{block.where}: empty"
    if is_kubernetes(docs):
        for doc in docs:
            check_crd_object(doc, block.where)
        simulate_text(block.text, tmp_path)
    else:
        assert len(docs) == 1 and isinstance(docs[0], dict), (
            f"{block.where}: neither objects nor a config"
        )
        Config.model_validate(docs[0])


@pytest.mark.parametrize("block", blocks_of("sh"), ids=lambda b: b.where)
def test_shell_block(block: Block) -> None:
    commands = list(shell_commands(block.text))
    assert commands, f"{block.where}: no command"
    for command in commands:
        check_command(command, run=True)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.marker], ids=lambda b: b.where)
def test_marked_block(block: Block) -> None:
    assert block.marker is not None
    kind, argument = block.marker
    if kind == "file":
        check_repo_path(argument)
        assert block.text == (ROOT / argument).read_text(), (
            f"{block.where}: differs from {argument}; copy the file into the block"
        )
        return
    assert block.lang == "json", f"{block.where}: `output of` is compared for json blocks only"
    command = shlex.split(argument)
    assert command[0] == "gangsched"
    real = json.loads(run_offline(command[1:]))
    shown = json.loads(block.text)
    same_shape(shown, real, block.where)


FREE_TEXT_MAPS = {"preempted", "unschedulable", "waiting"}


def same_shape(shown: Any, real: Any, where: str, key: str = "", parent: str = "") -> None:
    """Equal, except free text: any "message", and the reasons in the maps of reasons."""
    if isinstance(real, dict):
        assert isinstance(shown, dict) and sorted(shown) == sorted(real), (
            f"{where}: at {key or 'the top'}, keys {sorted(shown)} shown, {sorted(real)} real"
        )
        for k in real:
            same_shape(shown[k], real[k], where, k, key)
    elif isinstance(real, list):
        assert isinstance(shown, list) and len(shown) == len(real), f"{where}: {key} differs"
        for s, r in zip(shown, real, strict=True):
            same_shape(s, r, where, key, parent)
    elif isinstance(real, str) and (key == "message" or parent in FREE_TEXT_MAPS):
        assert isinstance(shown, str)
    else:
        assert shown == real, f"{where}: {key}: {shown!r} shown, {real!r} real"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_inline_commands_parse(page: Path) -> None:
    for span in INLINE.findall(split_page(page)[1]):
        words = span.split()
        if len(words) < 2 or words[0] not in COMMAND_WORDS or "..." in span:
            continue
        for command in shell_commands(span):
            check_command(command, run=False)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_paths_and_modules_named_exist(page: Path) -> None:
    text = page.read_text()
    for path in repo_paths(text):
        check_repo_path(path)
    for dotted in modules(text):
        check_module(dotted)


def slug(heading: str) -> str:
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    _, prose = split_page(page)
    return {slug(m) for m in re.findall(r"^#+ (.+)$", prose, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_relative_links_resolve(page: Path) -> None:
    for target in LINK.findall(split_page(page)[1]):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{rel(page)}: link to {target}: no such file"
        if anchor:
            assert resolved.suffix == ".md" and anchor in anchors(resolved), (
                f"{rel(page)}: link to {target}: no heading #{anchor} in {rel(resolved)}"
            )


def named_examples() -> list[str]:
    names = {p for page in PAGES for p in repo_paths(page.read_text()) if p.startswith("examples/")}
    files = {rel(f) for name in names for f in ROOT.glob(name.rstrip(".,:;")) if f.is_file()}
    return sorted(f for f in files if f.endswith(".yaml"))


@pytest.mark.parametrize("example", named_examples())
def test_named_example_simulates(example: str) -> None:
    """A top-level example is one cluster; a folder of examples (examples/demo/, applied step
    by step) is one cluster together."""
    docs = yaml_documents((ROOT / example).read_text())
    if not is_kubernetes(docs):
        load_config(ROOT / example)
        return
    for doc in docs:
        check_crd_object(doc, example)
    folder = (ROOT / example).parent
    together = [example]
    if folder != ROOT / "examples":
        together = [rel(p) for p in sorted(folder.glob("*.yaml"))]
    run_offline(["simulate", *together, "-o", "json"])


# ------------------------------------------------------------------------------ the README
def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    assert lines[0].startswith("# ")
    first_fence = next(i for i, line in enumerate(lines) if line.startswith("```"))
    intro = [line for line in lines[1:first_fence] if line.strip()]
    assert intro and not any(line.startswith("#") for line in intro), (
        "the title, a short intro paragraph, then the two commands"
    )
    first = next(b for b in BLOCKS if b.page.name == "README.md" and b.page.parent == ROOT)
    commands = [c[:2] for c in shell_commands(first.text)]
    assert first.lang == "sh" and commands == [["make", "demo"], ["make", "test"]]


def test_readme_tour_offline() -> None:
    """The tour's gang binds whole on a small cluster, and the GPU gang stays pending whole."""
    files = [
        "examples/demo/01-cluster.yaml",
        *sorted(rel(p) for p in ROOT.glob("examples/install/*.yaml")),
    ]
    result = json.loads(run_offline(["simulate", *files, "-o", "json"]))
    trained = {pod for pod in result["bound"] if pod.startswith("default/train-")}
    assert trained == {f"default/train-{i}" for i in range(4)}
    assert result["podGroups"]["default/train"]["scheduled"] == 4
    assert set(result["unschedulable"]) == {"default/gpu-train-0", "default/gpu-train-1"}
    assert "Insufficient nvidia.com/gpu" in result["unschedulable"]["default/gpu-train-0"]


# ------------------------------------------------------------------------------ reference tables
def table_rows(page: str, after: str = "") -> list[list[str]]:
    """The rows of the first table after the heading `after` (or of the page), cells split."""
    _, prose = split_page(ROOT / page)
    if after:
        prose = prose[prose.index(after) :]
    rows: list[list[str]] = []
    for line in prose.splitlines():
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= set("-: ") for cell in cells):
                rows.append(cells)  # not the separator row
        elif rows:
            break
    return rows[1:]  # without the header


def code(cell: str) -> list[str]:
    return INLINE.findall(cell)


def config_leaves(model: BaseModel, prefix: str = "") -> dict[str, Any]:
    leaves: dict[str, Any] = {}
    for name, value in model:
        if isinstance(value, BaseModel):
            leaves |= config_leaves(value, f"{prefix}{name}.")
        else:
            leaves[f"{prefix}{name}"] = value
    return leaves


def test_configuration_reference_lists_every_key_with_its_default() -> None:
    shown = {
        code(row[0])[0]: yaml.safe_load(code(row[1])[0])
        for row in table_rows("docs/reference/configuration.md")
    }
    real = config_leaves(Config())
    assert sorted(shown) == sorted(real)
    for key, default in real.items():
        assert shown[key] == default, f"{key}: default {shown[key]!r} shown, {default!r} real"


def test_metrics_reference_lists_every_metric() -> None:
    from prometheus_client.metrics import MetricWrapperBase

    from gangsched.edge.metrics import Metrics

    real = {}
    for metric in vars(Metrics()).values():
        if isinstance(metric, MetricWrapperBase):
            name = metric._name + ("_total" if metric._type == "counter" else "")
            real[name] = (metric._type, sorted(metric._labelnames))
    shown = {
        code(row[0])[0]: (row[1], sorted(code(row[2])))
        for row in table_rows("docs/reference/metrics.md")
    }
    assert shown == real


def test_alerts_reference_lists_every_alert() -> None:
    rules = yaml.safe_load((ROOT / "deploy/monitoring/prometheus-rules.yaml").read_text())
    real = {
        rule["alert"]: rule["labels"]["severity"]
        for group in rules["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    shown = {
        code(row[0])[0]: row[1] for row in table_rows("docs/reference/metrics.md", "## Alerts")
    }
    assert shown == real


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli._parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    choices: dict[str, argparse.ArgumentParser] = action.choices
    return choices


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_commands_reference_lists_every_option(command: str) -> None:
    real = set()
    for action in subcommands()[command]._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names = action.option_strings or [str(action.metavar or action.dest)]
        real.add(frozenset(names))
    rows = table_rows("docs/reference/commands.md", f"## `gangsched {command}`")
    shown = {frozenset(code(row[0])) for row in rows}
    assert shown == real


def test_condition_and_event_names_exist_in_the_code() -> None:
    source = "\n".join(p.read_text() for p in (ROOT / "gangsched").rglob("*.py"))
    _, prose = split_page(ROOT / "docs/reference/conditions-and-events.md")
    names = {
        word
        for span in INLINE.findall(prose)
        for word in re.split(r"[=\s,]", span)
        if re.fullmatch(r"[A-Z][a-z]+[A-Za-z]*", word) and word not in {"True", "False"}
    }
    missing = sorted(name for name in names if f'"{name}"' not in source)
    assert not missing, f"named in the docs but not in gangsched/: {missing}"


def test_simulate_json_reference_lists_every_key() -> None:
    result = json.loads(run_offline(["simulate", "examples/seed-walkthrough.yaml", "-o", "json"]))
    page = "docs/reference/simulate-json.md"
    assert {code(row[0])[0] for row in table_rows(page)} == set(result)
    runner = (ROOT / "gangsched/simulate/runner.py").read_text()
    for row in table_rows(page, "Each `podGroups` entry has:"):
        key = code(row[0])[0]
        assert f'"{key}"' in runner, f"{key}: not a key simulate writes"
