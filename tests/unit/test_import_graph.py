"""The shape of the code (issue 31, "One direction through the code"), checked on every
`make check`:

- no import cycle anywhere in `gangsched/`: no strongly connected component of more than one
  module in grimp's import graph, built *with* the imports under `TYPE_CHECKING` and those
  inside functions (both are still dependencies);
- no module over 500 lines;
- no private name (`from gangsched.x import _name`) imported from another module;
- no import inside a function, except where start-up time needs it (`STARTUP_IMPORTS`, each
  with its reason).

What is known to break a rule today and is being fixed by others is listed here exactly
(`KNOWN_*`): a new offender fails, and so does a listed one that no longer offends, so each
list only shrinks and is deleted with its last entry (the lists of cycles, of modules over
500 lines and of private names imported are gone: there are none).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

import grimp
import pytest

import gangsched

PACKAGE = "gangsched"
SOURCE = Path(gangsched.__file__).resolve().parent
MAX_LINES = 500

#: Imports inside functions that start-up time needs: (module, function, what it imports)
#: -> why. Each command of the CLI loads only what it runs.
STARTUP_IMPORTS: dict[tuple[str, str, str], str] = {
    **{
        ("gangsched.cli", "_simulate", imported): "only `gangsched simulate` loads the core "
        "and the simulator (seconds), not --help, `run` or `explain`"
        for imported in (
            "gangsched.config",
            "gangsched.simulate.loader",
            "gangsched.simulate.output",
            "gangsched.simulate.runner",
        )
    },
    ("gangsched.cli", "_run", "uvloop"): "only `run` starts an event loop here (tens of ms)",
    **{
        where: "the CEL engine (0.1 s of every start's imports) loads with the first DRA "
        "selector compiled, not for clusters without DRA claims"
        for where in (
            ("gangsched.core.dra.cel", "SelectorCache.compile", "cel_expr_python"),
            ("gangsched.core.dra.cel", "SelectorCache.compile", "cel_expr_python.ext"),
            ("gangsched.core.dra.cel", "Selector.evaluate", "cel_expr_python"),
            ("gangsched.core.dra.cel_library", "functions", "cel_expr_python"),
        )
    },
    ("gangsched.cli", "_run_async", "asyncio"): "only `run` starts an event loop here",
    ("gangsched.cli", "_run_async", "gangsched.edge.early_lists"): "`run` sends its pod and "
    "node lists before it imports the core, kopf and the config (edge/early_lists.py)",
    ("gangsched.cli", "_run_async", "gangsched.edge.app"): "loaded by `_load_for_run` in a "
    "worker thread while the early lists are under way; here it is already loaded",
    ("gangsched.cli", "_run_async", "gangsched.edge.logs"): "as gangsched.edge.app",
    ("gangsched.cli", "_run_async", "gangsched.edge.reqwest_transport"): "as "
    "gangsched.edge.early_lists, which imports it next",
    ("gangsched.cli", "_load_for_run", "gangsched.config"): "imported in a worker thread, "
    "off the event loop, while the early lists are under way",
    ("gangsched.cli", "_load_for_run", "gangsched.edge.app"): "as gangsched.config: the "
    "core loads in the worker thread, the point of the function",
    ("gangsched.cli", "_load_for_run", "gangsched.edge.logs"): "as gangsched.edge.app",
    **{
        where: "aiohttp (kubernetes-asyncio's session) loads at the session's first use: "
        "`gangsched run`'s first lists go out on pyreqwest without it (0.1 s of CPU earlier, "
        "edge/slim_client.py)"
        for where in (
            ("gangsched.edge.kube", "Kube.api", "gangsched.edge.aiohttp_session"),
            ("gangsched.edge.kube", "Kube._send", "gangsched.edge.aiohttp_session"),
            ("gangsched.edge.kube", "_env_proxy", "aiohttp.helpers"),
            ("gangsched.edge.app", "_serve_metrics", "aiohttp"),
        )
    },
    ("gangsched.edge.app", "run", "gangsched.edge.kopf_host"): "kopf is loaded once the "
    "operator's caches have synced (in a worker thread), not before the lists and the first "
    "bind; here it is already loaded",
}

#: Imports inside functions that are not for start-up time, being removed by others.
KNOWN_FUNCTION_IMPORTS = frozenset(
    {
        # cli.py: `gangsched.explain` is lazy itself (a few ms to import): it can be a
        # module-level import.
        ("gangsched.cli", "_parser", "gangsched.explain"),
        ("gangsched.cli", "main", "gangsched.explain"),
    }
)


# -------------------------------------------------------------------------------- cycles
def import_cycles(graph: grimp.ImportGraph, package: str) -> list[frozenset[str]]:
    """The strongly connected components of more than one module among `package` and its
    descendants (Tarjan's algorithm, iterative), sorted."""
    modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    successors = {
        m: sorted(graph.find_modules_directly_imported_by(m) & modules) for m in sorted(modules)
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root, children_of_root in successors.items():
        if root in index:
            continue
        work = [(root, iter(children_of_root))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(successors[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return sorted(found, key=sorted)


def describe_cycle(graph: grimp.ImportGraph, component: frozenset[str]) -> str:
    """The modules of a cycle, one shortest round trip through the first of them, and every
    import within it (with its line), so the message says what to cut."""
    first = min(component)
    loops = []
    for successor in sorted(graph.find_modules_directly_imported_by(first) & component):
        chain = graph.find_shortest_chain(importer=successor, imported=first)
        if chain is not None:
            loops.append((first, *chain))
    loop = min(loops, key=len)
    lines = [
        f"cycle of {len(component)} modules: {', '.join(sorted(component))}",
        f"  e.g. {' -> '.join(loop)}",
        "  imports within it:",
    ]
    for importer in sorted(component):
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & component):
            details = graph.get_import_details(importer=importer, imported=imported)
            for detail in sorted(details, key=lambda d: d["line_number"]):
                lines.append(
                    f"    {importer}:{detail['line_number']}: {detail['line_contents'].strip()}"
                )
    return "\n".join(lines)


def check_no_cycles(
    graph: grimp.ImportGraph,
    package: str,
    known: dict[str, frozenset[str]] | None = None,
) -> None:
    """Fails, listing them, on the cycles of `package` that are not within a known one."""
    new = [
        cycle
        for cycle in import_cycles(graph, package)
        if not any(cycle <= modules for modules in (known or {}).values())
    ]
    assert not new, "import cycles in {}:\n{}".format(
        package, "\n".join(describe_cycle(graph, c) for c in new)
    )


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # exclude_type_checking_imports=False: an import under TYPE_CHECKING is a dependency too.
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=False, cache_dir=None)


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    check_no_cycles(graph, PACKAGE)


def synthetic_graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d", "other"):
        graph.add_module(module)
    for number, (importer, imported) in enumerate(imports, start=1):
        graph.add_import(
            importer=importer,
            imported=imported,
            line_number=number,
            line_contents=f"import {imported}",
        )
    return graph


def test_the_check_fails_on_a_planted_cycle() -> None:
    graph = synthetic_graph(
        ("pkg.a", "pkg.b"),
        ("pkg.b", "pkg.c"),
        ("pkg.c", "pkg.a"),  # the planted edge
        ("pkg.c", "pkg.d"),
        ("pkg.d", "other"),
        ("other", "pkg.a"),  # a cycle through another package is not this package's
    )
    assert import_cycles(graph, "pkg") == [frozenset({"pkg.a", "pkg.b", "pkg.c"})]
    with pytest.raises(AssertionError) as failure:
        check_no_cycles(graph, "pkg")
    message = str(failure.value)
    assert "cycle of 3 modules: pkg.a, pkg.b, pkg.c" in message
    assert "e.g. pkg.a -> pkg.b -> pkg.c -> pkg.a" in message
    assert "pkg.c:3: import pkg.a" in message
    # Known, it passes; one module more than known, it fails.
    check_no_cycles(graph, "pkg", {"x": frozenset({"pkg.a", "pkg.b", "pkg.c"})})
    with pytest.raises(AssertionError):
        check_no_cycles(graph, "pkg", {"x": frozenset({"pkg.a", "pkg.b"})})


def test_the_check_passes_without_a_cycle() -> None:
    graph = synthetic_graph(("pkg.a", "pkg.b"), ("pkg.b", "pkg.c"), ("pkg.a", "pkg.c"))
    assert import_cycles(graph, "pkg") == []
    check_no_cycles(graph, "pkg")


# --------------------------------------------------------------------------- module rules
@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: int


def modules() -> Iterator[Module]:
    for path in sorted(SOURCE.rglob("*.py")):
        parts = path.relative_to(SOURCE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        text = path.read_text()
        yield Module(name, path, ast.parse(text, str(path)), len(text.splitlines()))


def relative(path: Path) -> str:
    return path.relative_to(SOURCE.parent).as_posix()


def is_module(name: str) -> bool:
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return False
    base = SOURCE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def absolute(module: Module, node: ast.ImportFrom) -> str:
    """The module an `from ... import` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = module.name.split(".")
    if module.path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def check_exact(found: AbstractSet[object], known: AbstractSet[object], what: str) -> None:
    """`found` is exactly `known`: nothing new, and nothing listed that is gone."""
    lines = []
    if new := sorted(map(str, found - known)):
        lines += [f"new {what}:", *(f"  {entry}" for entry in new)]
    if gone := sorted(map(str, known - found)):
        lines += [f"listed, but no longer found (delete from the list) {what}:"]
        lines += [f"  {entry}" for entry in gone]
    assert not lines, "\n".join(lines)


def test_no_module_over_500_lines() -> None:
    oversized = {relative(m.path): m.lines for m in modules() if m.lines > MAX_LINES}
    check_exact(set(oversized), set(), f"modules over {MAX_LINES} lines: {oversized}")


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _package(name: str) -> str:
    return name.rpartition(".")[0]


def private_imports(module: Module) -> Iterator[tuple[str, str, str]]:
    """(importer, source, name) of each private name, and of each private module imported
    from outside its own package (name "<module>")."""
    own_package = module.name if module.path.name == "__init__.py" else _package(module.name)
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            sources = [alias.name for alias in node.names if alias.name.startswith("gangsched")]
        elif isinstance(node, ast.ImportFrom):
            source = absolute(module, node)
            sources = [source] + [f"{source}.{alias.name}" for alias in node.names]
        else:
            continue
        for source in sources:
            tail = source.rpartition(".")[2]
            if is_module(source) and _private(tail) and _package(source) != own_package:
                yield module.name, source, "<module>"
        if not isinstance(node, ast.ImportFrom):
            continue
        source = absolute(module, node)
        if not is_module(source):
            continue
        for alias in node.names:
            name = alias.name
            if _private(name):
                yield module.name, source, name


def test_no_private_name_imported_across_modules() -> None:
    found = {entry for module in modules() for entry in private_imports(module)}
    check_exact(found, set(), "private names imported from another module")


def function_imports(module: Module) -> Iterator[tuple[str, str, str]]:
    """(module, qualified function name, imported module) of each import statement inside a
    function (importlib calls are mechanisms, e.g. explain/__init__.py, edge/slim_client.py,
    not counted)."""

    def visit(
        node: ast.AST, scope: tuple[str, ...], in_function: bool
    ) -> Iterator[tuple[str, str, str]]:
        for child in ast.iter_child_nodes(node):
            where = ".".join(scope)
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from visit(child, (*scope, child.name), True)
                continue
            if isinstance(child, ast.ClassDef):
                yield from visit(child, (*scope, child.name), in_function)
                continue
            if in_function and isinstance(child, ast.Import):
                for alias in child.names:
                    yield module.name, where, alias.name
            elif in_function and isinstance(child, ast.ImportFrom):
                source = absolute(module, child)
                for alias in child.names:
                    name = f"{source}.{alias.name}"
                    yield module.name, where, name if is_module(name) else source
            yield from visit(child, scope, in_function)

    return visit(module.tree, (), False)


def test_imports_inside_functions_are_for_start_up_time() -> None:
    found = {entry for module in modules() for entry in function_imports(module)}
    check_exact(
        found - set(STARTUP_IMPORTS),
        KNOWN_FUNCTION_IMPORTS,
        "imports inside functions (move them to module level, or list them in "
        "STARTUP_IMPORTS with the start-up time they save)",
    )
    check_exact(found & set(STARTUP_IMPORTS), set(STARTUP_IMPORTS), "start-up imports")
    assert all(reason.strip() for reason in STARTUP_IMPORTS.values())


def test_the_private_check_finds_a_private_module_used_outside_its_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = {"gangsched.core.api", "gangsched.core.api._fields", "gangsched.core.api.errors"}
    monkeypatch.setattr(sys.modules[__name__], "is_module", names.__contains__)
    text = (
        "from gangsched.core.api._fields import Reader\n"
        "from gangsched.core.api import _fields\n"
        "import gangsched.core.api._fields\n"
        "from gangsched.core.api.errors import _show\n"
    )
    outside = Module("gangsched.core.dra.reader", SOURCE / "core/dra/reader.py", ast.parse(text), 4)
    inside = Module("gangsched.core.api.nodes", SOURCE / "core/api/nodes.py", ast.parse(text), 4)
    private_module = ("gangsched.core.dra.reader", "gangsched.core.api._fields", "<module>")
    assert set(private_imports(outside)) == {
        private_module,
        ("gangsched.core.dra.reader", "gangsched.core.api", "_fields"),
        ("gangsched.core.dra.reader", "gangsched.core.api.errors", "_show"),
    }
    # Within its own package a private module is the package's business; a private name not.
    assert set(private_imports(inside)) == {
        ("gangsched.core.api.nodes", "gangsched.core.api", "_fields"),
        ("gangsched.core.api.nodes", "gangsched.core.api.errors", "_show"),
    }
