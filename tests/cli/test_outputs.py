"""Every command that writes checks its output before any work: a path that is a file, lies
under a file, cannot be written or has a name too long for the filesystem is one line on
stderr, exit code 2, and nothing is written (issue 12)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from depthscale.cli import main
from depthscale.errors import ConfigError
from depthscale.io.outputs import check_output_dir, check_output_file

EXAMPLE = Path(__file__).parents[2] / "examples" / "quick_resnet_depth_lr.toml"

#: command line up to the output flag, for every command that writes to disk
WRITERS: dict[str, list[str]] = {
    "train": ["train", "--steps", "1", "--width", "8", "--depth", "2", "--out"],
    "coord-check": ["coord-check", "--widths", "8,16", "--depths", "2,4", "--out"],
    "reproduce": ["reproduce", "nfd-prop1", "--out"],
    "sweep": ["sweep", str(EXAMPLE), "--out"],
    "fit": ["fit", "STUDY", "--out"],
    "limit": ["limit", "kernel", "--out"],
    "bench": ["bench", "plan-overhead", "--quick", "--json"],
    "status-csv": ["status", "STUDY", "--csv"],
    "status-parquet": ["status", "STUDY", "--parquet"],
}
_FILE_FLAGS = ("bench", "status-csv", "status-parquet")


def _unwritable(tmp_path: Path) -> Path:
    """A folder this process cannot write: mode 0o500, or /proc when running as root (whom
    permission bits do not stop)."""
    ro = tmp_path / "read-only"
    ro.mkdir()
    ro.chmod(0o500)
    if os.access(ro, os.W_OK):  # root
        return Path("/proc/depthscale-cannot-write-here")
    return ro / "out"


def _bad_outputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    return {
        "is-a-file": (a_file, "is a file"),
        "under-a-file": (a_file / "sub" / "out", "lies under"),
        "unwritable": (_unwritable(tmp_path), "cannot be written"),
        "name-too-long": (tmp_path / ("x" * 300), "characters"),
    }


@pytest.mark.parametrize("case", ["is-a-file", "under-a-file", "unwritable", "name-too-long"])
@pytest.mark.parametrize("command", list(WRITERS))
def test_bad_output_is_one_line_exit_2_before_any_work(
    command: str, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target, message = _bad_outputs(tmp_path)[case]
    if command in _FILE_FLAGS and case == "is-a-file":
        target, message = tmp_path, "is a folder"  # for a file flag, a folder is the mistake
    elif command in _FILE_FLAGS:
        target = target / "out.csv"
    study = tmp_path / "study"
    study.mkdir()
    argv = [str(study) if a == "STUDY" else a for a in WRITERS[command]] + [str(target)]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err, err
    assert err.startswith("depthscale: error: "), err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_check_output_dir_creates_nothing_and_accepts_new_nested_folders(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c"
    assert check_output_dir(target) == target
    assert list(tmp_path.iterdir()) == []  # the write probe is gone, no folder made
    with pytest.raises(ConfigError, match="is a folder"):
        check_output_file(tmp_path, "--json")
    assert check_output_file(tmp_path / "new.json", "--json") == tmp_path / "new.json"


_STUDY = """
[study]
name = "outputs-test"
model = "resnet1"
recipe = "laws"
dataset = "mnist1d"
[train]
steps = 3
[grid]
depth = [1]
width = [8]
seed = [0]
lr = [0.1]
"""


@pytest.fixture
def store_folder(tmp_path: Path) -> Path:
    """A study folder as 'depthscale sweep' leaves it (results.sqlite with one finished run,
    study.toml, study.lock), built through the store without training; and a claims.json."""
    from depthscale.studies.records import RunRecord
    from depthscale.studies.spec import expand, parse_study, run_id
    from depthscale.studies.store import open_store

    folder = tmp_path / "s"
    study = parse_study(_STUDY, source="study.toml")
    (spec,) = expand(study)
    with open_store(folder) as store:
        store.set_plan(study, [spec])
        store.record(RunRecord(run_id=run_id(spec), spec=spec, status="done",
                               metrics={"running_loss": 1.0, "steps_done": 3},
                               curve_steps=[1, 2, 3], curve_losses=[2.0, 1.5, 1.0],
                               seconds=0.1, versions={}, error=None,
                               finished_at="2026-01-01T00:00:00+00:00", worker="w"))
    (folder / "study.toml").write_text(_STUDY)
    (folder / "claims.json").write_text("[]\n")
    return folder


def _refused(argv: list[str], target: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``argv`` exits 2 with one line naming ``target``, no traceback, and ``target`` (if
    present) keeps its bytes; the line."""
    before = target.read_bytes() if target.exists() else None
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("depthscale: error: ") and str(target) in err, err
    assert (target.read_bytes() if target.exists() else None) == before
    return err


@pytest.mark.parametrize("flag", ["--csv", "--parquet"])
@pytest.mark.parametrize(("name", "says"), [
    ("results.sqlite", "a study's results store"),
    ("results.sqlite-wal", "write-ahead log"),  # absent: refused by name all the same
    ("results.sqlite-shm", "shared-memory index"),
    ("study.toml", "a study's spec copy"),
    ("study.lock", "lock file"),
    ("claims.json", "a reproduce folder's verdicts"),
])
def test_status_export_never_writes_over_the_files_of_its_store(
    flag: str, name: str, says: str, store_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43: 'status s --csv s/results.sqlite' replaced the store and exited 0."""
    target = store_folder / name
    err = _refused(["status", str(store_folder), flag, str(target)], target, capsys)
    assert says in err and "choose another path" in err, err
    assert main(["status", str(store_folder)]) == 0  # the store still opens
    assert "1/1 runs finished" in capsys.readouterr().out


@pytest.mark.parametrize(("command", "name", "content", "says"), [
    ("status-csv", "mine.csv", b"a,b\n1,2\n", "another file, not a CSV export"),
    ("status-csv", "copy.db", None, "an SQLite database"),
    ("status-parquet", "mine.parquet", b"PAR1 not ours PAR1", "a Parquet file, not a Parquet"),
    ("status-parquet", "notes.txt", b"my notes\n", "another file"),
    ("bench", "mine.json", b'{"a": 1}\n', "a JSON file, not depthscale bench results"),
    ("bench", "copy.db", None, "an SQLite database"),
])
def test_an_output_file_replaces_only_its_own_earlier_output(
    command: str, name: str, content: bytes | None, says: str, store_folder: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = store_folder.parent / name
    target.write_bytes(content if content is not None
                       else (store_folder / "results.sqlite").read_bytes())
    argv = [str(store_folder) if a == "STUDY" else a for a in WRITERS[command]] + [str(target)]
    err = _refused(argv, target, capsys)
    assert says in err and "remove the file yourself" in err, err


def test_bench_json_is_refused_over_a_kept_file_before_any_benchmark_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "claims.json"
    target.write_text("[]\n")
    err = _refused(["bench", "kernel", "--json", str(target)], target, capsys)
    assert "a reproduce folder's verdicts" in err


def test_status_export_replaces_its_own_earlier_export_and_an_empty_file(
    store_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow")
    csv_path, pq_path = store_folder.parent / "runs.csv", store_folder.parent / "runs.parquet"
    csv_path.write_bytes(b"")  # nothing there to lose
    for _ in range(2):
        assert main(["status", str(store_folder), "--csv", str(csv_path),
                     "--parquet", str(pq_path)]) == 0, capsys.readouterr().err
    assert csv_path.read_text().startswith("run_id,status,error,")
    import pyarrow.parquet as pq

    assert pq.read_schema(pq_path).metadata[b"depthscale.export"] == b"study-runs"


def test_bench_json_replaces_its_own_earlier_output(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import json

    import depthscale.benchmarks.plan_overhead as po

    for name, value in {"WIDTH": 8, "DEPTH": 2, "BATCH": 4, "QUICK_STEPS": 1,
                        "QUICK_REPEATS": 1, "WARMUP": 0}.items():
        monkeypatch.setattr(po, name, value)
    path = tmp_path / "bench.json"
    for _ in range(2):
        assert main(["bench", "plan-overhead", "--quick", "--json", str(path)]) == 0
    assert json.loads(path.read_text())["depthscale_output"] == "bench"


def test_the_kept_names_are_those_the_writers_use() -> None:
    from depthscale.claims.reproduce import LOCK_FILE as REPRODUCE_LOCK
    from depthscale.io.outputs import KEPT_FILES
    from depthscale.report.files import CLAIMS_FILE
    from depthscale.report.history import HISTORY_FILE
    from depthscale.studies.store import LOCK_FILE, STORE_FILE

    names = {STORE_FILE, f"{STORE_FILE}-wal", f"{STORE_FILE}-shm", LOCK_FILE, REPRODUCE_LOCK,
             CLAIMS_FILE, HISTORY_FILE, "study.toml", "spec.toml"}
    assert names <= set(KEPT_FILES)


def test_two_outputs_naming_one_file_are_refused_before_either_is_written(
    store_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'status s --csv out --parquet out' wrote the CSV, then refused the Parquet over it
    (exit 2 after writing: found by the property test)."""
    target = store_folder.parent / "out"
    err = _refused(["status", str(store_folder), "--csv", str(target), "--parquet",
                    str(target)], target, capsys)
    assert "--csv and --parquet name the same file" in err
    assert not target.exists()
