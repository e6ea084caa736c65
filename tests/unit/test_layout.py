"""Layering rules of the source tree, checked on the code itself."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[2] / "src"
GENERATED = "hookmesh.v1"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _private_owner(target: str) -> str | None:
    """The package that owns `target` when a part of it is private (``a.b._c.d`` -> ``a.b``)."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _within(package: str, owner: str) -> bool:
    return package == owner or package.startswith(owner + ".")


def test_no_module_imports_another_packages_private_parts() -> None:
    """A private module or name (``_x``) is used only inside the package that owns it."""
    leaks = []
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        if module.startswith(GENERATED):
            continue
        package = _package_of(module, path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for target in targets:
                owner = _private_owner(target)
                if owner is not None and not _within(package, owner):
                    leaks.append(f"{path.relative_to(SRC)}:{node.lineno} imports {target}")
    assert not leaks, "\n".join(leaks)


def test_benchmarks_do_not_import_the_tests() -> None:
    """A bench runs what users run: its helpers come from `hookmesh` (`hookmesh.testing`)."""
    bench = SRC.parent / "bench"
    leaks = []
    for path in sorted(bench.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            leaks += [
                f"{path.name}:{node.lineno} imports {n}"
                for n in names
                if n.split(".")[0] == "tests"
            ]
    assert not leaks, "\n".join(leaks)
