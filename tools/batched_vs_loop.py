"""One LR group of each medium laws-table1 architecture, one by one against batched, on a device.

For each architecture of ``ARCHS_MEDIUM`` at its middle depth: ``G`` learning rates spread over
its LR window, ``S`` SGD steps; :func:`depthscale.train.train` once per LR (the loop every
sweep runs without ``--batch-lrs``) against one :func:`depthscale.train.train_batched` call (what
``reproduce --batch-lrs`` trains). Prints both wall times (after a 3-step warm-up of each; CUDA
synchronised), their ratio, and how far the members' final losses are from the loop's.

    PYTHONPATH=src python tools/batched_vs_loop.py --device cuda --members 8 --steps 150

The ``laws-sweep-*`` benchmarks time the same on the CPU at the quick sizes (README,
Performance); this is the GPU check, where one small run leaves the device idle.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import time

import numpy as np
import torch

from depthscale.claims.laws.settings import ARCHS_MEDIUM
from depthscale.data import load
from depthscale.models import build
from depthscale.train import TrainConfig, train, train_batched
from depthscale.train.loop import resolve_device


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--members", type=int, default=8, help="G: learning rates in the group")
    ap.add_argument("--steps", type=int, default=150)
    args = ap.parse_args()
    resolve_device(args.device)  # a clear error before any work (and float32, not TF32)
    for key, arch in ARCHS_MEDIUM.items():
        lo, hi, _ = arch["lr_logspace"]
        lrs = [float(v) for v in np.logspace(lo, hi, args.members)]
        depth = arch["depths"][len(arch["depths"]) // 2]
        data = load(arch["dataset"], seed=0, **arch.get("data", {}))
        model, plan = build(arch["model"], arch.get("recipe", "laws"),
                            input_shape=tuple(arch["input_shape"]), n_out=data.n_out,
                            width=arch["width"], depth=depth, seed=0, **arch.get("options", {}))
        cfg = TrainConfig(optimizer="sgd", steps=args.steps, batch_size=128, loss="ce", seed=0,
                          final_eval="test", device=args.device)
        warm = dataclasses.replace(cfg, steps=3)
        train(copy.deepcopy(model), plan, data, dataclasses.replace(warm, lr=lrs[0]))
        train_batched(model, plan, data, warm, lrs[:2])
        _sync(args.device)
        t0 = time.perf_counter()
        loop = [train(copy.deepcopy(model), plan, data, dataclasses.replace(cfg, lr=lr))
                for lr in lrs]
        _sync(args.device)
        t1 = time.perf_counter()
        batched = train_batched(model, plan, data, cfg, lrs)
        _sync(args.device)
        t2 = time.perf_counter()
        same = sum(a.status == b.status for a, b in zip(loop, batched, strict=True))
        diffs = [abs(a.losses[-1] - b.losses[-1]) / max(abs(a.losses[-1]), 1e-12)
                 for a, b in zip(loop, batched, strict=True)
                 if a.status == b.status == "ok" and math.isfinite(a.losses[-1])
                 and math.isfinite(b.losses[-1])]
        spread = (f"max {max(diffs):.2e}, median {float(np.median(diffs)):.2e}" if diffs
                  else "none finite")
        print(f"{key} L={depth} G={len(lrs)} steps={args.steps} device={args.device}: loop "
              f"{t1 - t0:.2f} s, batched {t2 - t1:.2f} s, ratio {(t1 - t0) / (t2 - t1):.2f}; "
              f"statuses equal {same}/{len(lrs)}; final-loss relative difference over "
              f"{len(diffs)} finite members: {spread}", flush=True)


if __name__ == "__main__":
    main()
