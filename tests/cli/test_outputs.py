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
