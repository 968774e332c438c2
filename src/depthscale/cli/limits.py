"""``depthscale limit``: the infinite-width/depth solvers (nfd Prop. 2-3, Def. 1; chizat
Eq. 10-14)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from depthscale.cli.common import finite_float, positive_int, seed_value, status


def _limit_inputs(args: argparse.Namespace) -> Any:
    import numpy as np

    if args.dataset is None:
        return np.random.default_rng(args.seed).standard_normal((args.inputs, args.dim))
    from depthscale.data import load

    data = load(args.dataset, data_dir=args.data_dir, seed=args.seed)
    return data.x_train[: args.inputs].flatten(1).double().numpy()


def _out(args: argparse.Namespace) -> Path:
    """The output folder, made when the first result is written (a refused run makes none)."""
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    return out


def _cmd_limit(args: argparse.Namespace) -> int:
    import numpy as np

    from depthscale import limits
    from depthscale.io.atomic import write_csv
    from depthscale.report.figures import new_figure, save_figure

    if args.solver != "kernel" and args.particles is None:
        args.particles = 10_000 if args.solver == "sde" else 4096
    _check_budget(args)
    if args.solver == "nfd":
        return _limit_nfd(args)
    if args.solver == "mean-ode":
        return _limit_mean_ode(args)
    X = _limit_inputs(args)
    if args.solver == "kernel":
        with status(f"NNGP kernel ODE for {len(X)} inputs"):
            K = limits.nngp_kernel(X, args.phi, args.T)
        np.save(_out(args) / "kernel.npy", K)
        print(f"C_T ({len(X)} x {len(X)}, phi={args.phi}, T={args.T:g}) in "
              f"{args.out / 'kernel.npy'}; min eigenvalue {limits.min_eigenvalue(K):.6g}")
        if args.depth:
            E = limits.nngp_kernel_euler(X, args.phi, args.T, args.depth)
            rel = float(np.linalg.norm(E - K) / np.linalg.norm(K))
            print(f"finite-depth recursion at L={args.depth}: relative error {rel:.3e}")
        return 0
    steps = args.depth_steps or 200
    with status(f"forward SDE: {args.particles} particles x {steps} steps"):
        res = limits.forward_sde(X, args.phi, args.T, steps, args.particles, args.seed,
                                 increments=args.increments, dtype=args.dtype)
    ode = limits.kernel_path(X, args.phi, res.times)
    rows = [{"t": float(t), "input": i, "sde_variance": float(c[i, i]),
             "ode_variance": float(o[i, i])}
            for t, c, o in zip(res.times, res.cov_path, ode, strict=True) for i in range(len(X))]
    write_csv(_out(args) / "sde_variance.csv", rows)
    fig, axes = new_figure()
    for i in range(min(len(X), 4)):
        axes[0].plot(res.times, res.cov_path[:, i, i], label=f"particles, input {i}")
        axes[0].plot(res.times, ode[:, i, i], "k--", lw=0.8)
    axes[0].set_xlabel("t")
    axes[0].set_ylabel("E[h_t^2] (dashed: kernel ODE)")
    axes[0].legend(fontsize=7)
    save_figure(fig, args.out / "sde_variance.png")
    print(f"forward SDE ({args.increments} increments, {args.dtype}), {args.particles} particles "
          f"x {steps} steps: terminal variance "
          f"{np.diag(res.cov_path[-1]).round(5).tolist()} vs ODE "
          f"{np.diag(ode[-1]).round(5).tolist()}; data and figure in {args.out}")
    return 0


def _check_budget(args: argparse.Namespace) -> None:
    """ConfigError, before any work, when the solver would need more than 8 GiB, or (nfd,
    mean-ode) surely take over a day (unless ``--force``), with the estimate and its formula
    (:func:`depthscale.train.budget.solver_cost`)."""
    from depthscale.cli.flags import LIMIT_READS
    from depthscale.train.budget import LIMITS, solver_cost

    sizes = {k: getattr(args, k) for k in ("inputs", "dim", "particles", "depth_steps", "steps")
             if k in LIMIT_READS[args.solver]}  # only what the solver reads
    if "depth_steps" in sizes:
        sizes["depth_steps"] = sizes["depth_steps"] or {"sde": 200, "nfd": 64}.get(args.solver,
                                                                                   16)
    solver_cost(args.solver, **sizes, limits=None if args.force else LIMITS)


def _limit_nfd(args: argparse.Namespace) -> int:
    """Online SGD in the joint limit (nfd Def. 1) on a teacher stream; outputs and losses."""
    from depthscale import limits
    from depthscale.io.atomic import write_csv
    from depthscale.report.figures import new_figure, save_figure
    from depthscale.train.finite.nfd import teacher_stream

    xs, ys = teacher_stream(args.steps, dim=args.dim, seed=args.seed)
    depth_steps = args.depth_steps or 64
    sim = limits.NFD(phi=args.phi, T=args.T, eta_c=args.eta_c, depth_steps=depth_steps,
                     particles=args.particles, coupling=args.coupling, seed=args.seed)
    with status(f"NFD: {args.steps} online steps, {args.particles} particles, "
                 f"{depth_steps} depth steps"):
        res = sim.train(xs, ys)
    rows = [{"step": k, "y": float(y), "f": float(f), "f_se": float(se), "loss": float(lo)}
            for k, (y, f, se, lo) in enumerate(zip(ys, res.outputs, res.output_se, res.losses,
                                                    strict=True))]
    write_csv(_out(args) / "nfd.csv", rows)
    fig, axes = new_figure()
    axes[0].semilogy(range(len(rows)), [r["loss"] + 1e-300 for r in rows], "o-")
    axes[0].set_xlabel("online step k")
    axes[0].set_ylabel("L(f^(k), y^(k))")
    axes[0].set_title(f"NFD limit, coupling={args.coupling}", fontsize=9)
    save_figure(fig, args.out / "nfd.png")
    print(f"NFD ({args.coupling}): mean loss of the last quarter "
          f"{float(res.losses[-max(1, len(rows) // 4):].mean()):.4g}; data in {args.out}")
    return 0


def _limit_mean_ode(args: argparse.Namespace) -> int:
    """GD on Chizat's Neural Mean ODE (Eq. 10-14), 2LP blocks, on his synthetic data."""
    from depthscale import limits
    from depthscale.data import load
    from depthscale.io.atomic import write_csv
    from depthscale.report.figures import new_figure, save_figure

    data = load("chizat", dim=args.dim, n_train=args.inputs, seed=args.seed)
    X, Y = data.x_train.double().numpy(), data.y_train.double().numpy()
    depth_steps = args.depth_steps or 16
    solver = limits.MeanODE(args.dim, rho=args.phi, depth_steps=depth_steps,
                            particles=args.particles, seed=args.seed)
    with status(f"Neural Mean ODE: {args.steps} GD steps, {depth_steps} depth steps, "
                 f"{args.particles} particles"):
        res = solver.train(X, Y, args.steps)
    write_csv(_out(args) / "mean_ode.csv",
              [{"step": k, "loss": float(v)} for k, v in enumerate(res.losses)])
    fig, axes = new_figure()
    axes[0].semilogy(range(len(res.losses)), res.losses, "o-", ms=2)
    axes[0].set_xlabel("GD step k")
    axes[0].set_ylabel("mean |h(1, x) - y|^2 / (2D)")
    axes[0].set_title("Neural Mean ODE (chizat Eq. 10-14)", fontsize=9)
    save_figure(fig, args.out / "mean_ode.png")
    print(f"Neural Mean ODE: loss {res.losses[0]:.4g} -> {res.losses[-1]:.4g} after {args.steps} "
          f"steps; data in {args.out}")
    return 0


def register(sub: Any) -> None:
    """Add this module's commands to the ``depthscale`` subparsers."""
    lim = sub.add_parser("limit", help="infinite-width/depth solvers (nfd Prop. 2-3)")
    lim.add_argument("solver", choices=("kernel", "sde", "nfd", "mean-ode"),
                     help="kernel: NNGP kernel ODE C_T; sde: forward McKean-Vlasov particles; "
                     "nfd: online SGD in the joint limit (Def. 1) on a teacher stream; "
                     "mean-ode: GD on Chizat's Neural Mean ODE (2LP blocks, --phi tanh)")
    lim.add_argument("--phi", default="relu", help="activation (relu, erf, tanh, gelu, identity)")
    lim.add_argument("--T", type=finite_float, default=1.0, help="time horizon T")
    lim.add_argument("--dataset", default=None, help="take inputs from this dataset "
                     "(default: Gaussian inputs)")
    lim.add_argument("--data-dir", type=Path, default=None)
    lim.add_argument("--inputs", type=positive_int, default=8, help="number of inputs N")
    lim.add_argument("--dim", type=positive_int, default=16,
                     help="input dimension of Gaussian inputs")
    lim.add_argument("--depth", type=int, default=0,
                     help="kernel: also compare with the finite-depth recursion at this L")
    lim.add_argument("--depth-steps", type=int, default=None,
                     help="depth grid (default 200 for sde, 64 for nfd)")
    lim.add_argument("--steps", type=positive_int, default=50,
                     help="nfd, mean-ode: training steps K")
    lim.add_argument("--eta-c", type=finite_float, default=0.1, help="nfd: eta_c")
    lim.add_argument("--coupling", default="none", choices=("none", "eq15", "full"),
                     help="nfd: none = Def. 1 (decoupled), eq15 = paper's tau^2 terms, "
                     "full = standard backprop's response terms")
    lim.add_argument("--increments", default="gaussian", choices=("gaussian", "two-point"),
                     help="sde: Brownian increments per step, normals (Euler-Maruyama) or fair "
                     "signs (weak Euler: same weak order, ~6x faster; moments, not paths)")
    lim.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                     help="sde: particle precision; float32 with two-point increments is "
                     "~2x faster again (moments within Monte Carlo error)")
    lim.add_argument("--particles", type=positive_int, default=None,
                     help="particles (default 10000 for sde; 4096 for nfd and mean-ode)")
    lim.add_argument("--seed", type=seed_value, default=0)
    lim.add_argument("--force", action="store_true",
                     help="run a solver over the memory limit (8 GiB estimated) anyway")
    lim.add_argument("--out", type=Path, default=Path("runs/limit"))
    lim.set_defaults(func=_cmd_limit, output_dirs=("out",))
