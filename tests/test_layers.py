"""The layers import one way (DESIGN.md "Layers"): every module's imports, module-level and
inside functions, are read with ``ast`` and each arrow between packages is checked against the
floors below; ``import depthscale`` loads no study, store, claim or report machinery."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "depthscale"

#: The floors, bottom to top, as the code has them: a package may import the packages of
#: lower floors (and itself), nothing above or beside it. Real floors found in the code:
#: ``data`` needs nothing but the errors; the limit solvers need only the rule table and the
#: activation record (the finite networks that mirror a limit train in ``train``), so they sit
#: just above ``param``; ``report`` draws and writes with ``stats`` and ``io`` only and the
#: claims draw through it, so it sits between studies and claims; the CLI runs the benchmarks.
FLOORS: list[tuple[str, ...]] = [
    ("errors", "_version"),
    ("stats", "io", "activations", "calls"),
    ("param", "data"),
    ("limits",),
    ("models",),
    ("train",),
    ("probes",),
    ("studies",),
    ("report",),
    ("claims",),
    ("benchmarks",),
    ("cli",),
    ("__main__",),  # python -m depthscale
]
FLOOR = {pkg: i for i, floor in enumerate(FLOORS) for pkg in floor}
#: Who may import the papers' claims (docs/development.md: the CLI, the laws-sweep benchmarks, which
#: time the claims' own quick sizes).
CLAIMS_USERS = {"cli", "benchmarks"}
#: Beyond the standard library, the only third-party imports of the leaves.
LEAF_THIRD_PARTY = {"stats": {"numpy", "scipy"}, "io": set(), "errors": set(),
                    "_version": set()}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str | None:
    """The layer a module belongs to: ``depthscale.<first part>`` (None: the root)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "depthscale" and len(parts) > 1 else None


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, at any depth, relative ones resolved; a
    ``from depthscale import x`` counts as importing ``depthscale.x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = _module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*here[: len(here) - node.level + 1], *filter(None, [base])])
            out.append((node.lineno, base))
            if base == "depthscale":
                out += [(node.lineno, f"depthscale.{a.name}") for a in node.names]
    return out


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_package_has_a_floor() -> None:
    found = {_package(_module_name(p)) for p in _sources()} - {None}
    assert found <= set(FLOOR), f"packages without a floor: {sorted(found - set(FLOOR))}"


def test_imports_point_down_the_floors_only() -> None:
    wrong = []
    for path in _sources():
        me = _package(_module_name(path))
        if me is None or me not in FLOOR:
            continue  # the root: checked below; no floor: see above
        for line, target in _imports(path):
            them = _package(target)
            if them is None or them == me:
                continue
            where = f"{path.relative_to(SRC)}:{line} imports {target}"
            if them not in FLOOR:
                wrong.append(f"{where}: {them} is no layer")
            elif FLOOR[them] >= FLOOR[me]:
                wrong.append(f"{where}: {me} (floor {FLOOR[me]}) may not import {them} "
                             f"(floor {FLOOR[them]})")
            elif them == "claims" and me not in CLAIMS_USERS:
                wrong.append(f"{where}: only {sorted(CLAIMS_USERS)} import claims")
    assert not wrong, "\n".join(wrong)


def _module_graph() -> dict[str, set[str]]:
    """Module -> the depthscale modules it imports (module level, in functions and under
    TYPE_CHECKING alike): ``from p import n`` points at ``p.n`` where that is a module, else at
    ``p``; a package's ``__init__`` re-exporting its own submodules is no arrow."""
    modules = {_module_name(p): p for p in _sources()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*here[: len(here) - node.level + 1],
                                     *filter(None, [base])])
                subs = {f"{base}.{a.name}" for a in node.names} & set(modules)
                targets |= subs or {base}
        own = name + "." if path.name == "__init__.py" else None
        graph[name] = {m for m in targets & set(modules)
                       if m != name and not (own and m.startswith(own))}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_circles_are_found() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    """No module reaches itself through imports, lazy and type-only ones included: a circle
    hidden by an import inside a function is still a loop in the design."""
    circles = _circles(_module_graph())
    assert not circles, "\n".join(" <-> ".join(c) for c in circles)


@pytest.mark.parametrize("leaf", sorted(LEAF_THIRD_PARTY))
def test_leaves_import_only_the_standard_library_and_their_few_packages(leaf: str) -> None:
    paths = [p for p in _sources() if _package(_module_name(p)) == leaf]
    assert paths
    allowed = set(sys.stdlib_module_names) | LEAF_THIRD_PARTY[leaf] | {"__future__"}
    wrong = [f"{p.relative_to(SRC)}:{line} imports {target}"
             for p in paths for line, target in _imports(p)
             if not target.startswith("depthscale") and target.split(".")[0] not in allowed]
    assert not wrong, "\n".join(wrong)


def test_import_depthscale_loads_no_study_claim_report_or_store() -> None:
    code = ("import json, sys, depthscale; "
            "print(json.dumps(sorted(m for m in sys.modules "
            "if m.startswith(('depthscale.', 'sqlite3', 'ray')))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(SRC)})
    loaded = json.loads(run.stdout)
    assert "depthscale.probes" in loaded and "depthscale.train" in loaded
    heavy = [m for m in loaded if m.startswith(("sqlite3", "ray", "depthscale.studies",
                                                "depthscale.claims", "depthscale.report",
                                                "depthscale.cli"))]
    assert not heavy, heavy
