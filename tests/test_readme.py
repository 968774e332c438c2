"""The README and the documentation pages as written: the README stays a short page whose links
resolve, and every Python code block of the README and of ``docs/`` runs, each in a fresh
namespace, from a scratch folder, with ``examples/`` importable (the blocks say where their
models come from)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [(page.relative_to(ROOT).as_posix(), i + 1, code) for page in PAGES
          for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))]
#: what a newcomer reads in ten minutes (issue 41): the rest lives in docs/
README_LINES = 300


def test_the_readme_is_short_and_its_links_resolve() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_LINES
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links and all((ROOT / link).exists() for link in links), links
    assert sum(1 for page, _, _ in BLOCKS if page == "README.md") >= 2


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[f"{p}:{i}" for p, i, _ in BLOCKS])
def test_a_python_block_runs(block: tuple[str, int, str], tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    page, index, text = block
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    code = compile(text, f"{page} python block {index}", "exec")
    exec(code, {"__name__": f"block_{index}"})
    assert capsys.readouterr().out.strip()  # every block prints what it shows
    sys.modules.pop("own_transformer", None)


# ---- the "Paper equations and where they live" table (docs/equations.md) ------------------------
_TABLE = re.search(r"# Paper equations and where they live\n\n(.*?)\n\n",
                   (ROOT / "docs" / "equations.md").read_text(), flags=re.S)
EQUATION_ROWS = [
    [cell.strip() for cell in line.strip().strip("|").split("|")]
    for line in (_TABLE.group(1).splitlines()[2:] if _TABLE else [])
]
_PATH = re.compile(r"^([a-z_]+(?:\.[A-Za-z_]\w*)+)(\(.*\))?$")
_CITATION = re.compile(r"^(nfd|laws|chizat)\b")


def _resolve(path: str) -> object:
    """``depthscale.<path>``: the longest importable module, then attributes."""
    import importlib

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(["depthscale", *parts[:cut]]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(path)


def _cites(citation: str, sources: str) -> bool:
    """Whether ``sources`` cite the paper and every ``Eq. N`` that ``citation`` names."""
    paper = citation.split()[0]
    eqs = re.findall(r"Eq\. ?(\d+(?:-\d+)?)", citation)
    return paper in sources and all(re.search(rf"Eq\. ?{e}\b", sources) for e in eqs)


def test_the_equation_table_is_there() -> None:
    assert len(EQUATION_ROWS) >= 20 and all(len(r) == 2 for r in EQUATION_ROWS)


@pytest.mark.parametrize("row", EQUATION_ROWS, ids=[r[0][:40] for r in EQUATION_ROWS])
def test_every_code_path_of_the_equation_table_is_real(row: list[str]) -> None:
    """Each backticked path resolves to an object of depthscale (``Name(args)``: a callable
    that accepts those arguments); a recipe it names cites the row's equations, and a role named
    after "rules" is a role whose rule in some recipe cites them."""
    import ast
    import inspect

    from depthscale.param import RECIPES, ROLES, TRANSFER_RULES, Recipe

    equation, where = row
    citation = equation.split(" (")[0]  # "nfd Eq. 8", "laws Eq. 1 and Eq. 5", ...
    paths = [m for m in (_PATH.match(s) for s in re.findall(r"`([^`]*)`", where)) if m]
    assert paths, f"no code path in {where!r}"
    for m in paths:
        obj = _resolve(m.group(1))
        if m.group(2):  # a call: the arguments it shows must bind
            call = ast.parse(m.group(1).rpartition(".")[2] + m.group(2), mode="eval").body
            assert isinstance(call, ast.Call) and callable(obj)
            args = [ast.literal_eval(a) for a in call.args]
            inspect.signature(obj).bind_partial(
                *args, **{k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg})
            if obj is _resolve("param.transfer_lr"):
                assert args[0] in TRANSFER_RULES
        if isinstance(obj, Recipe):
            assert obj is RECIPES[obj.name]
            sources = " ".join([obj.source, *(r.source for r in obj.rules.values())])
            assert _CITATION.match(citation) and _cites(citation, sources), (obj.name, citation)
    for roles in re.findall(r"rules? ((?:`\w+`/?)+)", where):
        for role in re.findall(r"`(\w+)`", roles):
            assert role in ROLES and _CITATION.match(citation)
            assert any(_cites(citation, r.rules[role].source) for r in RECIPES.values()
                       if role in r.rules), (role, citation)
