"""Mutation testing with cosmic-ray: each module's mutants against the tests that guard it.

    python scripts/mutate.py [MODULE ...]          (default: every module in tests/mutation.toml)

For each module, tests/mutation.toml names the tests to run, optionally the functions to
mutate (when the whole module is too slow for one machine), and the equivalent mutants
(a mutation no test can tell from the original, each with the reason). The run happens in a
copy of the tree under .mutation/ (cosmic-ray rewrites the file it mutates, so the working
tree is never touched and other work can go on), one mutant at a time: baseline first
(the tests must pass unmutated), then every mutant, then a report per module: killed,
survived, equivalent, score = killed / (mutants - equivalent), time, and the diff of every
survivor. A session is kept per module in .mutation/, so an interrupted run resumes.

Exits 1 when a module's score is below `--target` (default 90 %).
"""

from __future__ import annotations

import argparse
import ast
import fcntl
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "tests" / "mutation.toml"
WORK = ROOT / ".mutation"


@dataclass
class Module:
    """One module's mutation settings, from tests/mutation.toml."""

    path: str
    tests: list[str]
    functions: list[str]
    equivalent: list[dict[str, str]]


def load(names: list[str]) -> list[Module]:
    """The modules to mutate: those named, or every one configured."""
    table = tomllib.loads(CONFIG.read_text())["modules"]
    unknown = [n for n in names if n not in table]
    if unknown:
        sys.exit(f"not in {CONFIG.relative_to(ROOT)}: {', '.join(unknown)}")
    return [
        Module(
            name,
            table[name]["tests"],
            table[name].get("functions", []),
            table[name].get("equivalent", []),
        )
        for name in names or list(table)
    ]


def fingerprint(module: Module) -> str:
    """What a session's results depend on: the module's source, its tests and scope (the
    tests' own source may change: survivors are run again every time)."""
    text = (ROOT / module.path).read_text() + repr((module.tests, module.functions))
    return hashlib.sha256(text.encode()).hexdigest()


def copy_tree(target: Path) -> None:
    """The working tree's files (tracked and new, committed or not) into `target`."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    if target.exists():
        shutil.rmtree(target)
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    modules = ROOT / "clients" / "node" / "node_modules"
    if modules.exists():  # the Node tests' dependencies: linked, never copied
        (target / "clients" / "node" / "node_modules").symlink_to(modules.resolve())


def function_lines(source: str, names: list[str]) -> list[tuple[int, int]]:
    """The line span of each named function (``name`` or ``Class.name``).

    Raises:
        SystemExit: A name is not in the module.
    """
    spans: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                spans[name] = (child.lineno, child.end_lineno or child.lineno)
                visit(child, f"{name}.")

    visit(ast.parse(source), "")
    missing = [n for n in names if n not in spans]
    if missing:
        sys.exit(f"functions not found: {', '.join(missing)}")
    return [spans[n] for n in names]


def write_config(module: Module, tree: Path, timeout: float) -> Path:
    """The module's cosmic-ray config (tests run by this Python, stopping at the first
    failure)."""
    tests = " ".join(module.tests)
    command = f"{sys.executable} -m pytest -x -q -p no:cacheprovider {tests}"
    config = WORK / (module.path.replace("/", "_") + ".toml")
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{module.path}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    return config


def cosmic_ray(*args: str | Path, tree: Path) -> None:
    """Run a cosmic-ray command in `tree`, its package imported from there."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    command = [str(Path(sys.executable).with_name("cosmic-ray")), *map(str, args)]
    subprocess.run(command, cwd=tree, env=env, check=True)


def baseline(module: Module, tree: Path) -> float:
    """Seconds the module's tests take unmutated.

    Raises:
        SystemExit: They fail unmutated (no mutant could be judged).
    """
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *module.tests],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"{module.path}: the tests fail unmutated:\n{done.stdout[-3000:]}")
    return time.perf_counter() - began


def retry_survivors(session: Path) -> None:
    """Forget the survivors' results, so this run judges them again (after new tests)."""
    with sqlite3.connect(session) as db:
        db.execute("DELETE FROM work_results WHERE lower(test_outcome) = 'survived'")


def annotations(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (start, end) positions of the annotations Python never evaluates: with ``from
    __future__ import annotations``, those of function signatures and of variables outside
    class bodies (a class's may be read, by pydantic for one, so they are mutated)."""
    tree = ast.parse(source)
    future = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(a.name == "annotations" for a in node.names)
        for node in tree.body
    )
    if not future:
        return []
    found: list[ast.expr] = []
    in_class: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            in_class.update(id(child) for child in node.body)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            found.extend(a.annotation for a in every if a is not None and a.annotation)
            if node.returns is not None:
                found.append(node.returns)
        if isinstance(node, ast.AnnAssign) and id(node) not in in_class:
            found.append(node.annotation)
    return [
        ((n.lineno, n.col_offset), (n.end_lineno or n.lineno, n.end_col_offset or 0))
        for n in found
    ]


def skip(module: Module, tree: Path, session: Path) -> None:
    """Mark the mutants outside the chosen functions, and those inside an annotation that is
    never evaluated (equivalent by construction), as skipped."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    source = (tree / module.path).read_text()
    spans = function_lines(source, module.functions) if module.functions else []
    unevaluated = annotations(source)
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.pending_work_items:
            [mutation] = item.mutations
            start = tuple(mutation.start_pos)
            why = ""
            if spans and not any(a <= start[0] <= b for a, b in spans):
                why = "out of scope"
            elif any(a <= start < b for a, b in unevaluated):
                why = "equivalent: inside an annotation, never evaluated"
            if why:
                db.set_result(
                    item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=why)
                )


def equivalent(module: Module, operator: str, diff: str) -> str:
    """The reason a surviving mutant is equivalent, or '' when no entry names it: an entry
    matches its operator, a piece of the original line and, when given, of the mutated one."""
    removed = [line[1:] for line in diff.splitlines() if line[:1] == "-" and line[:3] != "---"]
    added = [line[1:] for line in diff.splitlines() if line[:1] == "+" and line[:3] != "+++"]
    for entry in module.equivalent:
        if (
            entry["operator"] == operator
            and any(entry["line"] in line for line in removed)
            and any(entry.get("mutated", "") in line for line in added)
        ):
            return entry["why"]
    return ""


def report(module: Module, session: Path, seconds: float) -> float:
    """Print the module's score and its survivors; returns the score (0-100)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    killed = survived = automatic = scoped_out = other = 0
    survivors: list[str] = []
    equivalent_ones: list[str] = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                if (result.output or "").startswith("equivalent"):
                    automatic += 1
                else:
                    scoped_out += 1
            elif result.worker_outcome != WorkerOutcome.NORMAL:
                other += 1  # no mutation possible, or the worker failed
            elif result.test_outcome == TestOutcome.KILLED:
                killed += 1
            elif result.test_outcome == TestOutcome.SURVIVED:
                [mutation] = item.mutations
                where = f"{mutation.operator_name} at line {mutation.start_pos[0]}"
                why = equivalent(module, mutation.operator_name, result.diff or "")
                if why:
                    equivalent_ones.append(f"    {where}: {why}")
                    continue
                survived += 1
                survivors.append(f"--- {where}\n{result.diff}")
            else:
                other += 1
    judged = killed + survived
    score = 100.0 * killed / judged if judged else 100.0
    print(
        f"{module.path}: {score:.1f}% killed ({killed} of {judged}; {survived} survived,"
        f" {len(equivalent_ones)} named equivalent, {automatic} in annotations,"
        f" {scoped_out} out of scope, {other} not run) in {seconds:.0f} s"
    )
    for line in equivalent_ones:
        print(line)
    for survivor in survivors:
        print(survivor)
    return score


_LOCK: list[object] = []
"""The open lock file, kept for the whole run."""


def hold(path: Path) -> None:
    """Take the checkout's run lock: two runs would share one copied tree, each applying
    its mutants to the other's tests (mutants judged alive that are not)."""
    lock = path.open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(f"another mutation run is going on in this checkout ({path} is locked)")
    _LOCK.append(lock)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("modules", nargs="*", help="module paths (default: every configured)")
    parser.add_argument("--target", type=float, default=90.0, help="least score in percent")
    parser.add_argument("--fresh", action="store_true", help="forget earlier sessions")
    args = parser.parse_args()
    modules = load(args.modules)
    WORK.mkdir(exist_ok=True)
    hold(WORK / "lock")
    tree = WORK / "tree"
    copy_tree(tree)
    scores: dict[str, float] = {}
    for module in modules:
        session = WORK / (module.path.replace("/", "_") + ".sqlite")
        stamp = session.with_suffix(".stamp")
        digest = fingerprint(module)
        if args.fresh or not stamp.exists() or stamp.read_text() != digest:
            session.unlink(missing_ok=True)  # the module or its settings changed: start over
        stamp.write_text(digest)
        began = time.perf_counter()
        took = baseline(module, tree)
        config = write_config(module, tree, timeout=max(30.0, 4 * took))
        if not session.exists():
            cosmic_ray("init", config, session, tree=tree)
        retry_survivors(session)
        skip(module, tree, session)
        cosmic_ray("exec", config, session, tree=tree)
        scores[module.path] = report(module, session, time.perf_counter() - began)
    low = [m for m, s in scores.items() if s < args.target]
    if low:
        sys.exit(f"below {args.target:g}%: {', '.join(low)}")


if __name__ == "__main__":
    main()
