#!/usr/bin/env python3
"""Check the shape of agent-link's code against the targets of the core's design.

Targets: the core package (`agent_link_core/`) at most 7,000 lines; no file over 800 lines
and no function over 150 lines in the core, the plugins, the examples and the test kit; no
import cycle among the modules of one package (the core, each plugin), function-local
imports included (imports under `if TYPE_CHECKING:` are left out: they never run).

The code does not meet every target yet, and `make lint` runs this script in CI, so it
prints every figure against its target and fails (exit 1) only when a figure is worse than
the checked-in allowance, `scripts/shape_allowance.json`: a ratchet listing today's known
excesses with their figures. An excess that grows, or a new one, fails; an excess that
shrank or went away is reported so the allowance can be lowered. `--update` rewrites the
allowance from the current figures (review its diff: it must only shrink).

Usage: `python scripts/check_shape.py [--root DIR] [--allowance FILE] [--update]`.
Exit status: 0 within the allowance, 1 worse than it, 2 for bad input (an unreadable
allowance file or a file that does not parse).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

CORE_MAX_LINES = 7000
FILE_MAX_LINES = 800
FUNCTION_MAX_LINES = 150
CORE_PACKAGE = "agent_link_core"
DEFAULT_ALLOWANCE = Path(__file__).with_name("shape_allowance.json")


class ShapeError(Exception):
    """Input the check cannot read (a file that does not parse, a bad allowance file)."""


@dataclass
class Shape:
    """The figures of one tree.

    core_lines: physical lines of the core package's `.py` files.
    files: `relative/path.py` -> lines, for every checked file.
    functions: `relative/path.py:Qual.name` -> lines (from `def` to its last line).
    cycles: each import cycle as the sorted list of its modules' dotted names.
    """

    core_lines: int = 0
    files: dict[str, int] = field(default_factory=dict)
    functions: dict[str, int] = field(default_factory=dict)
    cycles: list[list[str]] = field(default_factory=list)


def package_dirs(root: Path) -> list[Path]:
    """The package folders checked under `root`: the core, each plugin's, each example's, the test kit's."""
    found = [root / CORE_PACKAGE]
    for pattern in ("plugins/*/agent_link_*", "examples/*/agent_link_*", "testing/agent_link_*"):
        found.extend(sorted(p for p in root.glob(pattern) if (p / "__init__.py").is_file()))
    return [p for p in found if p.is_dir()]


def _modules(pkg: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every `.py` under the package folder `pkg`."""
    out: dict[str, Path] = {}
    for path in sorted(pkg.rglob("*.py")):
        parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _parse(path: Path, root: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
        raise ShapeError(f"{path.relative_to(root)}: cannot parse: {exc}") from exc


def _functions(tree: ast.Module) -> dict[str, int]:
    """Qualified name -> lines of every function (methods and nested functions included)."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out[name] = (child.end_lineno or child.lineno) - child.lineno + 1
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of `known` that `module` imports anywhere in its file (functions included)."""
    out: set[str] = set()

    def resolve(name: str) -> None:
        # `import a.b.c` runs a, a.b and a.b.c; the deepest known one is the edge that matters
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            out.add(name)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:
                    visit_one(sub)
                continue
            visit_one(child)

    def visit_one(child: ast.AST) -> None:
        if isinstance(child, ast.Import):
            for alias in child.names:
                resolve(alias.name)
        elif isinstance(child, ast.ImportFrom):
            if child.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (child.level - 1)] if child.level > 1 else base
                target = ".".join(base + ([child.module] if child.module else []))
            else:
                target = child.module or ""
            for alias in child.names:
                sub = f"{target}.{alias.name}"
                resolve(sub if sub in known else target)
        else:
            visit(child)

    visit(tree)
    out.discard(module)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def measure(root: Path) -> Shape:
    """The figures of the tree at `root`. Raises ShapeError for a file that does not parse."""
    shape = Shape()
    for pkg in package_dirs(root):
        modules = _modules(pkg)
        graph: dict[str, set[str]] = {}
        for name, path in modules.items():
            rel = path.relative_to(root).as_posix()
            lines = len(path.read_text(encoding="utf-8").splitlines())
            shape.files[rel] = lines
            if pkg.name == CORE_PACKAGE and pkg.parent == root:
                shape.core_lines += lines
            tree = _parse(path, root)
            for qual, length in _functions(tree).items():
                shape.functions[f"{rel}:{qual}"] = length
            graph[name] = _imports(tree, name, path.name == "__init__.py", set(modules))
        shape.cycles.extend(_cycles(graph))
    return shape


def load_allowance(path: Path) -> dict:
    """The allowance file: {"core_lines": int, "files": {path: lines}, "functions": {key: lines}, "cycles": [[module, ...]]}."""
    if not path.exists():
        return {"core_lines": CORE_MAX_LINES, "files": {}, "functions": {}, "cycles": []}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        allowance = {
            "core_lines": int(data["core_lines"]),
            "files": {str(k): int(v) for k, v in data["files"].items()},
            "functions": {str(k): int(v) for k, v in data["functions"].items()},
            "cycles": [sorted(str(m) for m in c) for c in data["cycles"]],
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ShapeError(f"{path}: not a shape allowance file ({exc.__class__.__name__}: {exc})") from exc
    return allowance


def allowance_of(shape: Shape) -> dict:
    """The allowance that admits exactly today's excesses of `shape`."""
    return {
        "core_lines": max(shape.core_lines, CORE_MAX_LINES),
        "files": {k: v for k, v in sorted(shape.files.items()) if v > FILE_MAX_LINES},
        "functions": {k: v for k, v in sorted(shape.functions.items()) if v > FUNCTION_MAX_LINES},
        "cycles": shape.cycles,
    }


def compare(shape: Shape, allowance: dict) -> tuple[list[str], list[str], list[str]]:
    """(report lines, failures, allowance entries that can be lowered or removed)."""
    report: list[str] = []
    failures: list[str] = []
    slack: list[str] = []

    def figure(label: str, value: int, target: int, allowed: int | None) -> None:
        state = "ok" if value <= target else ("over target, within allowance" if allowed is not None and value <= allowed else "FAIL")
        extra = f" (allowance {allowed})" if allowed is not None and value > target else ""
        report.append(f"  {label}: {value} / target {target}{extra}: {state}")
        if state == "FAIL":
            failures.append(f"{label}: {value} lines, target {target}" + (f", allowance {allowed}" if allowed is not None else ", no allowance"))
        elif allowed is not None and target < allowed and value < allowed:
            slack.append(f"{label}: allowance {allowed}, now {value}")

    report.append("core package lines:")
    figure(CORE_PACKAGE, shape.core_lines, CORE_MAX_LINES, allowance["core_lines"])
    for kind, items, target in (("files", shape.files, FILE_MAX_LINES), ("functions", shape.functions, FUNCTION_MAX_LINES)):
        over = {k: v for k, v in items.items() if v > target}
        report.append(f"{kind} over {target} lines: {len(over)} (target 0)")
        for key in sorted(over, key=lambda k: -over[k]):
            figure(key, over[key], target, allowance[kind].get(key))
        for key, allowed in sorted(allowance[kind].items()):
            if key not in over:
                slack.append(f"{key}: allowance {allowed}, now {items.get(key, 'gone')}")
    report.append(f"import cycles: {len(shape.cycles)} (target 0)")
    allowed_cycles = [set(c) for c in allowance["cycles"]]
    for cycle in shape.cycles:
        ok = any(set(cycle) <= a for a in allowed_cycles)
        report.append(f"  {' <-> '.join(cycle)}: {'within allowance' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"import cycle {' <-> '.join(cycle)}: not in the allowance")
    for allowed in allowance["cycles"]:
        if allowed not in shape.cycles:
            slack.append(f"import cycle {' <-> '.join(allowed)}: now smaller or gone")
    return report, failures, slack


def main(argv: list[str] | None = None) -> int:
    """Run the check; returns the exit status (0 within the allowance, 1 worse, 2 bad input)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="the repository folder")
    parser.add_argument("--allowance", type=Path, default=None, help="the allowance file (default: scripts/shape_allowance.json)")
    parser.add_argument("--update", action="store_true", help="rewrite the allowance from today's figures")
    args = parser.parse_args(argv)
    allowance_path = args.allowance or DEFAULT_ALLOWANCE
    try:
        shape = measure(args.root)
        if args.update:
            allowance_path.write_text(json.dumps(allowance_of(shape), indent=1) + "\n", encoding="utf-8")
            print(f"check_shape: wrote {allowance_path}")
            return 0
        allowance = load_allowance(allowance_path)
    except ShapeError as exc:
        print(f"check_shape: {exc}", file=sys.stderr)
        return 2
    report, failures, slack = compare(shape, allowance)
    print("\n".join(report))
    if slack:
        print("improved (lower the allowance with --update):")
        print("\n".join(f"  {s}" for s in slack))
    if failures:
        print("check_shape: worse than the allowance:", file=sys.stderr)
        print("\n".join(f"  {f}" for f in failures), file=sys.stderr)
        return 1
    print("check_shape: within the allowance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
