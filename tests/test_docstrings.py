"""Docstrings say what a function computes and cite its equation; no lab notes in the source.

Every module, class and function docstring under src/depthscale is at most 15 lines, and no
docstring or ``#`` comment carries a date, a measured time, a machine anecdote, a measured value
given as a result or a reference to files outside the repository (issue 41): measured numbers
live in docs/ (performance.md, results.md) and in the claims' records.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "depthscale"
MAX_LINES = 15


PATTERNS = {
    "date": re.compile(r"\b20\d\d-\d\d-\d\d\b|\b2026\b"),
    "time": re.compile(
        r"\b\d+(\.\d+)? ?(s|ms|us|min|minutes|seconds|hours|CPU-min|CPU-hours)\b"),
    "machine": re.compile(r"\blent\b|\bH100\b|\bH200\b|on this CPU|\bhere:"),
    "measured value": re.compile(r"\b[Mm]easured:? [-+~]?\d|\(measured\)|, measured\)"),
    "outside the repository": re.compile(r"CLAIMS\.md|shared/"),
}

#: documented formats and defaults, not measurements: (file, matched text)
ALLOWED = {
    ("report/_fmt.py", "12.3 s"), ("report/_fmt.py", "4 min"), ("report/_fmt.py", "05 s"),
    ("cli/claims.py", "90s"),
    ("studies/spec_bounds.py", "24 hours"),
}

def _files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _docstrings(tree: ast.Module) -> list[tuple[int, str, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc is not None:
                found.append((getattr(node, "lineno", 1), getattr(node, "name", "<module>"), doc))
    return found


def _comments(source: str) -> list[tuple[int, str]]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]


def _violations(path: Path) -> list[str]:
    rel = _rel(path)
    source = path.read_text(encoding="utf-8")
    texts = [(line, name, doc) for line, name, doc in _docstrings(ast.parse(source))]
    out = [f"{rel}:{line} {name}: docstring of {len(doc.splitlines())} lines"
           for line, name, doc in texts
           if len(doc.splitlines()) > MAX_LINES]
    texts += [(line, "#", text) for line, text in _comments(source)]
    for line, name, text in texts:
        for kind, pattern in PATTERNS.items():
            for match in pattern.finditer(text):
                if (rel, match.group(0)) not in ALLOWED:
                    out.append(f"{rel}:{line} {name}: {kind} {match.group(0)!r}")
    return out


@pytest.mark.parametrize("path", _files(), ids=_rel)
def test_no_lab_notes(path: Path) -> None:
    assert _violations(path) == []


def test_patterns_catch_lab_notes() -> None:
    notes = ["run on 2026-11-27", "took 12.6 s", "about 2 min here", "on a lent H100",
             "on this CPU", "measured: -0.48", "see shared/CLAIMS.md", "4.4 CPU-hours"]
    for note in notes:
        assert any(p.search(note) for p in PATTERNS.values()), note
    for fine in ["a grid of 2048 widths", "O(L N^2)", "laws Eq. 5", "the measured error"]:
        assert not any(p.search(fine) for p in PATTERNS.values()), fine
