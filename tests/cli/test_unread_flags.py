"""Flags typed but not read by the chosen command or mode are refused before any work, and a
flag read otherwise than it says is said (issue 43, item 8: ``limit kernel --particles`` ran and
ignored it; ``train --optimizer adam --momentum`` was refused only after the progress bar;
``--batch-size`` past the data meant full-batch steps without a word)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from depthscale.cli import main, parser
from depthscale.cli.flags import LIMIT_READS, UNREAD, typed_flags


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["limit", "kernel", "--particles", "64", "--inputs", "2", "--dim", "2"],
         "limit kernel does not read --particles (only 'limit sde / nfd / mean-ode' uses it)"),
        (["limit", "kernel", "--dataset", "digits", "--dim", "3", "--inputs", "2"],
         "limit kernel does not read --dim (--dataset gives the inputs)"),
        (["limit", "mean-ode", "--T", "2", "--steps", "1"], "does not read --T"),
        (["limit", "sde", "--coupling", "full", "--depth=3"], "does not read --coupling"),
        (["train", "--optimizer", "adam", "--mom", "0.9", "--steps", "1", "--width", "4",
          "--depth", "1"],
         "train does not read --momentum (with --optimizer adam: momentum is an SGD"),
        (["transfer-check", "--lr", "0.1", "--steps", "1"],
         "transfer-check does not read --lr"),
        (["explain", "--lr", "0.1", "--width", "4", "--depth", "1"],
         "explain does not read --lr"),
    ],
)
def test_an_unread_flag_is_refused_before_any_work(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out)] if argv[0] != "explain" else argv) == 2
    stdout, err = capsys.readouterr()
    assert stdout == ""  # no progress bar, no result before the refusal
    assert len(err.strip().splitlines()) == 1 and err.startswith("depthscale: error:")
    assert message in err, err
    assert not out.exists() and not (tmp_path / "runs").exists()


def test_a_flag_its_mode_reads_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["limit", "sde", "--particles", "16", "--inputs", "2", "--dim", "2",
                 "--depth-steps", "4", "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "sde_variance.csv").exists()
    capsys.readouterr()


def test_typed_flags_reads_prefixes_and_equals_forms() -> None:
    typed = typed_flags(parser(), ["limit", "nfd", "--part=8", "--eta-c", "0.2", "--T", "1"])
    assert typed == {"particles": "--particles", "eta_c": "--eta-c", "T": "--T"}


def test_every_flag_the_tables_name_exists() -> None:
    """A renamed flag would silently switch its check off: every dest named by a table is a
    flag of its command."""
    p = parser()
    subs = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices
    for command, unread in UNREAD.items():
        dests = {a.dest for a in subs[command]._actions}
        probe = p.parse_args([command, *(["kernel"] if command == "limit" else [])])
        for solver in (LIMIT_READS if command == "limit" else [None]):
            if solver is not None:
                probe.solver = solver
            for opt in ("sgd", "adam"):
                probe.optimizer = opt
                assert set(unread(probe)) <= dests, command


class _Tracking(argparse.Namespace):
    """A namespace that records which attributes a command reads."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        object.__setattr__(self, "_read", set())

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_"):
            object.__getattribute__(self, "_read").add(name)
        return object.__getattribute__(self, name)


_TINY = {"kernel": ["--inputs", "2", "--dim", "2"],
         "sde": ["--inputs", "2", "--dim", "2", "--particles", "16", "--depth-steps", "4"],
         "nfd": ["--dim", "2", "--particles", "8", "--depth-steps", "4", "--steps", "2"],
         "mean-ode": ["--phi", "tanh", "--inputs", "2", "--dim", "2", "--particles", "8",
                      "--depth-steps", "2", "--steps", "2"]}


def _reads(argv: list[str]) -> set[str]:
    ns = _Tracking()
    args = parser().parse_args(argv, namespace=ns)
    object.__setattr__(ns, "_read", set())
    assert args.func(args) == 0
    read: set[str] = object.__getattribute__(ns, "_read")
    return read


@pytest.mark.parametrize("solver", list(LIMIT_READS))
def test_the_limit_table_is_what_each_solver_reads(
    solver: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each solver, run at tiny sizes on a namespace that records its reads (with Gaussian
    inputs and, where it takes them, a dataset's), reads exactly the flags its row of the
    table lists, of those any solver reads."""
    monkeypatch.chdir(tmp_path)
    read = _reads(["limit", solver, *_TINY[solver], "--out", str(tmp_path)])
    if "dataset" in LIMIT_READS[solver]:
        read |= _reads(["limit", solver, *_TINY[solver], "--dataset", "digits", "--out",
                        str(tmp_path)])
    capsys.readouterr()
    assert read & set().union(*LIMIT_READS.values()) == LIMIT_READS[solver]


@pytest.mark.parametrize("command", [
    ["train", "--steps", "1"],
    ["coord-check", "--widths", "4,8", "--depths", "1,2", "--seeds", "1", "--steps", "1"],
])
def test_a_batch_over_the_data_is_said(command: list[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """--batch-size past the training set silently meant full-batch steps (issue 43's battery:
    'train --batch-size 100000000' exited 0 without a word)."""
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--dataset", "digits", "--width", "4", "--depth", "1",
                 "--batch-size", "100000000", "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "--batch-size 100,000,000 is over the" in err and "each batch holds all" in err
