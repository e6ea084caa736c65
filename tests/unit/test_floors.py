"""The floors of `src/hookmesh`: each package imports only packages below it, and no module
takes part in an import circle. Every import counts: TYPE_CHECKING blocks and imports inside
functions too, since each is a dependency a reader must follow."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).parents[2] / "src"

FLOORS: list[tuple[str, ...]] = [
    # generated code, stable errors, small helpers with no hookmesh imports, metric instruments
    (
        "hookmesh.v1",
        "hookmesh.errors",
        "hookmesh._security",
        "hookmesh._files",
        "hookmesh._imports",
        "hookmesh._processes",
        "hookmesh.metrics",
    ),
    # the domain model and its codecs; real PostgreSQL and Envoy processes for tests and `up`
    ("hookmesh.schema", "hookmesh.testing"),
    # chat models; tools and their run context; the A2A wire codec
    ("hookmesh.models", "hookmesh.tools", "hookmesh.a2a"),
    # the middleware core: base class, chains, the agent view, typed hook kwargs, blame
    ("hookmesh.middleware",),
    # the Agent and its ReAct loop
    ("hookmesh.agent",),
    # what every server shares: start and stop, auth, the interceptor, settings, HTTP limits
    ("hookmesh.server",),
    # the sidecar host and the remote proxy
    ("hookmesh.remote",),
    # the retrieval and speech engines
    ("hookmesh.retrieval", "hookmesh.tts"),
    # the memory engine (it embeds with the retrieval engine's embedder)
    ("hookmesh.memory",),
    # Python clients of the services (the built-ins reach services through them)
    ("hookmesh.client",),
    # the built-in middlewares
    ("hookmesh.middleware.builtin",),
    # the servers and their stores; the sidecar conformance kit
    ("hookmesh.services", "hookmesh.conformance"),
    # `hookmesh up` and the demo
    ("hookmesh.suite",),
    # the `hookmesh` command
    ("hookmesh.cli",),
]
_FLOOR_OF = {package: level for level, floor in enumerate(FLOORS) for package in floor}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def package_of(module: str) -> str | None:
    """The listed package `module` belongs to (the longest listed prefix), or None."""
    best = None
    for package in _FLOOR_OF:
        if (module == package or module.startswith(package + ".")) and (
            best is None or len(package) > len(best)
        ):
            best = package
    return best


def imports_of(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every hookmesh module `module` imports, with the line: ``from a import b`` names the
    submodule ``a.b`` when there is one, else ``a``."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "hookmesh":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")
                drop = node.level - 1 if is_package else node.level
                parent = parent[: len(parent) - drop]
                base = ".".join([*parent, base] if base else parent)
            if base.split(".")[0] != "hookmesh":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in MODULES else base), node.lineno


def _graph() -> dict[str, set[str]]:
    return {
        module: {target for target, _ in imports_of(module, path) if target in MODULES} - {module}
        for module, path in MODULES.items()
    }


def floor_violations() -> list[str]:
    """Imports that run up a floor or sideways to a sibling package, as file:line lines."""
    found = []
    for module, path in MODULES.items():
        source = package_of(module)
        if source is None:
            continue
        for target, line in imports_of(module, path):
            dest = package_of(target)
            if dest is None or dest == source:
                continue
            if _FLOOR_OF[dest] >= _FLOOR_OF[source]:
                way = "up" if _FLOOR_OF[dest] > _FLOOR_OF[source] else "sideways"
                found.append(
                    f"{path.relative_to(SRC)}:{line} imports {target} ({way}: {source} -> {dest})"
                )
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
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
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return out


def _explain(group: list[str], graph: dict[str, set[str]]) -> str:
    members = set(group)
    lines = []
    for module in group:
        for target, line in imports_of(module, MODULES[module]):
            if target in members and target != module:
                lines.append(f"  {MODULES[module].relative_to(SRC)}:{line} imports {target}")
    return "\n".join(sorted(set(lines)))


def test_every_package_has_a_floor() -> None:
    unplaced = sorted(
        m for m in MODULES if package_of(m) is None and m not in ("hookmesh", "hookmesh.suite.demo")
    )
    assert not unplaced, f"modules in no floor of FLOORS: {unplaced}"


def test_imports_only_run_down() -> None:
    problems = floor_violations()
    assert not problems, "imports that run up or sideways:\n" + "\n".join(problems)


def test_no_import_circles() -> None:
    graph = _graph()
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(_explain(g, graph) for g in found)


def test_the_check_sees_a_planted_upward_import_and_circle() -> None:
    """The rules above fail on the mistakes they name (checked on a planted graph)."""
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert circles(planted) == [["a", "b", "c"]]
    assert package_of("hookmesh.middleware.builtin.tasks") == "hookmesh.middleware.builtin"
    assert _FLOOR_OF["hookmesh.middleware"] < _FLOOR_OF["hookmesh.agent"]
