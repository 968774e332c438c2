"""Atomic writes and CSV files (depthscale.io.atomic): a failed write keeps the old file and
leaves no temporary one; CSV headers are the union of keys and floats round-trip."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from depthscale.io.atomic import atomic_write, write_csv


def test_atomic_write_keeps_permissions_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "f.txt"
    with atomic_write(target) as fh:
        fh.write("one")
    assert target.read_text() == "one"
    assert target.stat().st_mode & 0o777 == 0o644
    target.chmod(0o600)
    with atomic_write(target) as fh:
        fh.write("two")
    assert target.read_text() == "two" and target.stat().st_mode & 0o777 == 0o600
    with pytest.raises(KeyboardInterrupt), atomic_write(target) as fh:
        fh.write("three")
        raise KeyboardInterrupt
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]
    with pytest.raises(ValueError, match="mode"):
        atomic_write(target, "a").__enter__()  # type: ignore[arg-type]


def test_write_csv_union_header_and_exact_floats(tmp_path: Path) -> None:
    rows = [{"width": 64, "loss": 0.1}, {"width": 128, "lr": 1e-3, "note": None},
            {"loss": 1 / 3, "ok": True}]
    path = write_csv(tmp_path / "d" / "data.csv", rows)
    with path.open(newline="", encoding="utf-8") as fh:
        read = list(csv.reader(fh))
    assert read[0] == ["width", "loss", "lr", "note", "ok"]
    assert read[1] == ["64", "0.1", "", "", ""]
    assert read[2] == ["128", "", "0.001", "", ""]
    assert float(read[3][1]) == 1 / 3
    assert read[3][4] == "True"


def test_write_csv_rejects_nested_cells_and_keeps_old_file(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "data.csv", [{"a": 1}])
    with pytest.raises(ValueError, match="column 'b'"):
        write_csv(path, [{"a": 2}, {"b": [1, 2]}])
    assert path.read_text() == "a\n1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["data.csv"]
    assert write_csv(tmp_path / "empty.csv", []).read_text() == ""
