"""The house in numbers: source files by size, functions by length, and package-level import
arrows, for ``src/depthscale`` at any commit.

    python tools/house_metrics.py [--root src/depthscale] [--files 600] [--functions 60]

Prints the files over ``--files`` lines, the functions over ``--functions`` lines (nested
functions counted inside their parent as well as on their own), totals per package, and every
import of one package by another (function-level imports included), so a refactor's
before/after tables come from one script.
"""

from __future__ import annotations

import argparse
import ast
import collections
from pathlib import Path


def _functions(tree: ast.AST, path: str) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            out.append((length, f"{path}::{node.name}"))
    return out


def _package(rel: Path) -> str:
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "depthscale":
                found.add(parts[1] if len(parts) > 1 else "<package root>")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="src/depthscale")
    parser.add_argument("--files", type=int, default=600)
    parser.add_argument("--functions", type=int, default=60)
    args = parser.parse_args()
    root = Path(args.root)
    sizes, funcs = [], []
    per_package: collections.Counter[str] = collections.Counter()
    arrows: dict[str, set[str]] = collections.defaultdict(set)
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        text = f.read_text(encoding="utf-8")
        n = text.count("\n")
        sizes.append((n, str(rel)))
        per_package[_package(rel)] += n
        tree = ast.parse(text)
        funcs += _functions(tree, str(rel))
        arrows[_package(rel)] |= _imports(tree) - {_package(rel)}
    total = sum(n for n, _ in sizes)
    print(f"{len(sizes)} files, {total} lines; largest {max(sizes)[0]} "
          f"({max(sizes)[1]}); longest function {max(funcs)[0]} ({max(funcs)[1]})\n")
    print(f"| file over {args.files} lines | lines |\n|---|---|")
    for n, p in sorted(sizes, reverse=True):
        if n > args.files:
            print(f"| {p} | {n} |")
    print(f"\n| function over {args.functions} lines | lines |\n|---|---|")
    for n, p in sorted(funcs, reverse=True):
        if n > args.functions:
            print(f"| {p} | {n} |")
    print("\n| package | lines | imports |\n|---|---|---|")
    for pkg, n in per_package.most_common():
        print(f"| {pkg} | {n} | {', '.join(sorted(arrows[pkg]))} |")


if __name__ == "__main__":
    main()
