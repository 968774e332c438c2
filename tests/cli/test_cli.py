"""The command line: one-line errors with exit code 2, and working commands."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from depthscale.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explain", "--param", "mupp"], "unknown recipe 'mupp'"),
        (["explain", "--model", "resnet9"], "unknown model 'resnet9'"),
        (["explain", "--width", "0"], "--width: must be >= 1"),
        (["explain", "--depth", "-3"], "--depth: must be >= 1"),
        (["train", "--lr", "nan"], "must be finite"),
        (["train", "--lr", "inf", "--steps", "1"], "must be finite"),
        (["explain", "--dataset", "imagenet"], "unknown dataset"),
        (["train", "--dataset", "cifar10", "--steps", "1"], "cifar"),
        (["reproduce", "nfd-nope"], "unknown claim"),
        (["reproduce", "laws-table1", "--workers", "0"], "--workers: must be >= 1"),
        (["bench", "warp-drive"], "unknown benchmark"),
        (["coord-check", "--widths", "a,b"], "comma-separated integers"),
    ],
)
def test_user_mistakes_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if argv[0] == "train":
        argv = [*argv, "--out", str(tmp_path / "run")]
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("depthscale: error:") and message in err
    assert not (tmp_path / "run").exists()


def test_console_script_reports_errors_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "depthscale.cli", "explain", "--param", "nope"],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "unknown recipe" in proc.stderr


def test_the_cli_and_the_claims_start_without_the_plotting_and_scipy_stacks() -> None:
    """matplotlib and scipy are imported where a figure is drawn or a statistic computed, not
    at start-up: every process a sweep or a reproduce spawns, and every command, starts
    without them (about 1.3 s of imports on this machine)."""
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, depthscale.cli, depthscale.claims; print(sorted({m."
         "split('.')[0] for m in sys.modules} & {'matplotlib', 'scipy', 'transformers'}))"],
        capture_output=True, text=True, check=True,
    )
    assert proc.stdout.strip() == "[]", proc.stdout


def test_explain_prints_every_parameter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--model", "resnet2", "--param", "nfd-depth", "--width", "16",
                 "--depth", "4", "--dataset", "digits"]) == 0
    out = capsys.readouterr().out
    assert "branches.3.inner.weight" in out and "n sqrt(L)" in out and "nfd Eq. 8" in out


def test_train_writes_metrics(tmp_path: Path) -> None:
    out = tmp_path / "run"
    code = main(["train", "--model", "resnet1", "--dataset", "digits", "--width", "16",
                 "--depth", "2", "--steps", "5", "--out", str(out)])
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "ok" and metrics["steps_done"] == 5
    assert len((out / "losses.csv").read_text().splitlines()) == 6


def test_train_divergence_is_a_recorded_status_not_an_error(tmp_path: Path) -> None:
    out = tmp_path / "run"
    code = main(["train", "--param", "sp", "--dataset", "teacher", "--width", "16", "--depth",
                 "2", "--lr", "1e8", "--steps", "40", "--out", str(out)])
    assert code == 2  # cross-entropy on a regression set is a user mistake...
    code = main(["train", "--param", "sp", "--dataset", "digits", "--width", "16", "--depth",
                 "2", "--lr", "1e8", "--steps", "40", "--out", str(out)])
    assert code == 0  # ...a diverging LR is a finding
    assert json.loads((out / "metrics.json").read_text())["status"] == "diverged"


def test_coord_check_writes_csv_and_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["coord-check", "--dataset", "digits", "--widths", "16,32", "--depths", "2,4",
                 "--width", "16", "--depth", "2", "--seeds", "1", "--out", str(tmp_path)])
    assert code == 0
    assert (tmp_path / "coord_check.csv").exists()
    assert (tmp_path / "coord_check.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "act_vs_depth" in capsys.readouterr().out


def test_transfer_prints_the_laws_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["transfer", "--rule", "laws", "--from-depth", "8", "--lr", "0.05",
                 "--to-depth", "64"]) == 0
    out = capsys.readouterr().out
    assert f"{0.05 * 8**-1.5:.6g}" in out and "(L/L0)^(-3/2)" in out
    assert main(["transfer", "--rule", "laws", "--from-depth", "0", "--lr", "0.05",
                 "--to-depth", "4"]) == 2


def test_transfer_follows_the_optimizer_the_lr_was_tuned_with(
        capsys: pytest.CaptureFixture[str]) -> None:
    """CompleteP's branch LR: SGD eta_c n L/T (x2 from L = 4 to 8), Adam eta_c/sqrt(n)
    (depth-free; x1/2 from n = 128 to 512); laws defines no Adam rule (exit 2)."""
    base = ["transfer", "--rule", "completep", "--lr", "0.01", "--from-depth", "4",
            "--to-depth", "8"]
    assert main(base) == 0
    assert "lr 0.01 -> 0.02" in capsys.readouterr().out
    assert main([*base, "--from-width", "128", "--to-width", "512", "--optimizer", "adam"]) == 0
    out = capsys.readouterr().out
    assert "lr 0.01 -> 0.005" in out and "(adam)" in out
    assert main(["transfer", "--rule", "laws", "--lr", "0.01", "--from-depth", "4",
                 "--to-depth", "8", "--optimizer", "adam"]) == 2
    assert "defines no Adam transfer" in capsys.readouterr().err


def test_limit_kernel_and_sde_write_their_outputs(tmp_path: Path) -> None:
    import numpy as np

    assert main(["limit", "kernel", "--inputs", "4", "--depth", "8", "--out", str(tmp_path)]) == 0
    K = np.load(tmp_path / "kernel.npy")
    assert K.shape == (4, 4) and np.allclose(K, K.T)
    assert main(["limit", "sde", "--inputs", "2", "--particles", "500", "--depth-steps", "10",
                 "--out", str(tmp_path)]) == 0
    gaussian = (tmp_path / "sde_variance.csv").read_text()
    assert main(["limit", "sde", "--inputs", "2", "--particles", "500", "--depth-steps", "10",
                 "--increments", "two-point", "--out", str(tmp_path)]) == 0
    two_point = (tmp_path / "sde_variance.csv").read_text()
    assert len(two_point.splitlines()) == len(gaussian.splitlines()) == 1 + 11 * 2
    assert two_point != gaussian
    assert main(["limit", "sde", "--inputs", "2", "--particles", "500", "--depth-steps", "10",
                 "--increments", "two-point", "--dtype", "float32", "--out", str(tmp_path)]) == 0
    single = (tmp_path / "sde_variance.csv").read_text()
    assert len(single.splitlines()) == 1 + 11 * 2 and single != two_point
    assert main(["limit", "nfd", "--steps", "4", "--particles", "256", "--depth-steps", "4",
                 "--coupling", "eq15", "--out", str(tmp_path)]) == 0
    assert len((tmp_path / "nfd.csv").read_text().splitlines()) == 5
    assert main(["limit", "mean-ode", "--phi", "tanh", "--dim", "4", "--inputs", "3",
                 "--steps", "3", "--depth-steps", "4", "--particles", "64",
                 "--out", str(tmp_path)]) == 0
    assert len((tmp_path / "mean_ode.csv").read_text().splitlines()) == 5
    assert (tmp_path / "sde_variance.png").exists()
    assert main(["limit", "kernel", "--phi", "nope", "--out", str(tmp_path)]) == 2


def test_sweep_then_fit_writes_a_power_law(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[study]\nmodel = "resnet1"\nrecipe = "laws"\ndataset = "digits"\n'
        '[train]\nsteps = 5\nbatch_size = 32\n'
        "[grid]\ndepth = [1, 2, 4]\nwidth = [8]\nseed = [0, 1]\nlr = [0.01, 0.1, 1.0]\n"
    )
    out = tmp_path / "run"
    assert main(["sweep", str(spec), "--out", str(out)]) == 0
    assert main(["fit", str(out), "--effective-depth"]) == 0
    fit = json.loads((out / "fit.json").read_text())
    assert fit["axis"] == "effective_depth" and len(fit["per_size"]) == 3
    assert math.isfinite(fit["slope"]) and "log10 eta*" in capsys.readouterr().out
    assert (out / "fit.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["fit", str(tmp_path / "nothing-here")]) == 2
