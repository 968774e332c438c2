"""Measure depthscale on the architecture zoo (tests/zoo/architectures.py): one row per model
(the table of docs/zoo.md).

Per model, at width 64 and depth 2 unless said otherwise:

* what ``ds.param.inspect`` finds (width, residual branches = the depth a plan receives,
  blocks, tied) against the truth, the key parameters whose role is not one the truth allows,
  and the parameters left unclassified;
* the cross-entropy of the model's own init, and after ``plan.apply`` (the README's ten
  lines: inspect, plan by what it found, apply with the example input; a model the zoo
  expects to be refused gets the ``roles=`` its refusal names, and the refusal column says
  whether the plain lines were refused with a message naming that fix) under sp, mup and
  completep; whether the model's own conventions (Gemma's 1 + w norms, a layer scale)
  survive completep's apply;
* the coordinate-check verdicts under sp and completep (Adam, lr 3e-3, one step, 2 seeds,
  widths 32-128 at depth 1, depths 4-16 at width 64, widths only for the U-Net and the
  post-LN models; the settings of tests/zoo);
* the LR-transfer drift under completep in decades, per axis (width 32 -> 128 at depth 1,
  depth 1 -> 4 at width 32; 5 LRs 0.03-3, 20 Adam steps, 2 seeds) and its verdict.

Each cell catches its own exception and shows its type (the message goes to the JSON and the
notes under the table), so one failing model does not stop the table. Run from the repository
root::

    PYTHONPATH=src python tools/zoo_table.py --json zoo.json > zoo.md
    PYTHONPATH=src python tools/zoo_table.py --models own-gpt,hf-llama --transfer none
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "zoo"))

from architectures import BY_NAME, ZOO, Arch

import depthscale as ds
from depthscale.errors import ConfigError

WIDTH, DEPTH = 64, 2
LOSS_RECIPES = ("sp", "mup", "completep")
LOSS_FACTOR = 2.0  # tests/zoo: loss after apply <= 2 max(own init loss, ln V)


class Cell:
    """One measurement: its value, or the error that stopped it."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        t0 = time.perf_counter()
        self.value: Any = None
        self.error: str | None = None
        self.detail = ""
        try:
            self.value = fn()
        except Exception as exc:
            self.error = type(exc).__name__
            self.detail = " ".join(str(exc).split())[:400] or traceback.format_exc(limit=1)
        self.seconds = time.perf_counter() - t0

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seconds": round(self.seconds, 2)}
        if self.error is None:
            out["value"] = self.value
        else:
            out["error"] = self.error
            out["message"] = self.detail
        return out


def ce(arch: Arch, model: torch.nn.Module, inputs: Any, y: torch.Tensor) -> float:
    with torch.no_grad():
        logits = arch.forward(model, inputs)
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), y.reshape(-1)))


def ten_lines(arch: Arch, model: torch.nn.Module, x: Any, recipe: str,
              seed: int = 0, base: torch.nn.Module | None = None) -> ds.param.Plan:
    """inspect, plan by what it found, apply with the example input (a model the zoo expects
    to be refused gets the ``roles=`` its refusal names)."""
    st = ds.param.inspect(model, x)
    try:
        p = ds.param.plan(recipe, width=st.width, depth=st.depth)
    except ConfigError as exc:  # no branches: a width-only plan, if plan names depth=1
        if st.depth != 0 or "depth=1" not in str(exc):
            raise
        p = ds.param.plan(recipe, width=st.width, depth=1)
    roles = None if arch.refusal is None else arch.refusal.fix
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p.apply(model, roles, example_input=x, seed=seed, base=base)
    return p


def factory(arch: Arch, recipe: str, x: torch.Tensor) -> Any:
    """make(width, depth, seed), with base= the model at the sweep's smallest width."""
    def make(width: int, depth: int, seed: int) -> tuple[torch.nn.Module, ds.param.Plan]:
        model = arch.tensor_model(arch.build(width, depth, seed))
        base = arch.tensor_model(arch.build(min(arch.widths), depth, seed))
        return model, ten_lines(arch, model, x, recipe, seed, base)
    return make


# ---- the measurements ------------------------------------------------------------------------

def structure(arch: Arch) -> dict[str, Any]:
    model = arch.build(WIDTH, DEPTH, 0)
    x, _ = arch.example()
    st = ds.param.inspect(model, x)
    truth = arch.truth(WIDTH, DEPTH)
    names = [n for n, _ in model.named_parameters()]
    wrong = {}
    for pattern, allowed in truth.roles.items():
        for n in names:
            if fnmatch.fnmatchcase(n, pattern) and st.roles.get(n) not in allowed:
                wrong[n] = f"{st.roles.get(n)} (truth: {'/'.join(sorted(allowed))})"
    found = {"width": st.width, "branches": st.depth, "blocks": len(st.blocks),
             "tied": bool(st.tied)}
    want = {"width": truth.width, "branches": truth.branches,
            "blocks": len(st.blocks) if truth.blocks_ok(len(st.blocks)) else _blocks(truth),
            "tied": truth.tied}
    return {"found": found, "truth": want, "match": found == want, "wrong_roles": wrong,
            "unclassified": sorted(st.unclassified), "summary": st.summary()}


def losses(arch: Arch) -> dict[str, Cell]:
    x, y = arch.example()
    cells = {"own": Cell(lambda: ce(arch, arch.build(WIDTH, DEPTH, 0), x, y))}
    for recipe in LOSS_RECIPES:
        def after(recipe: str = recipe) -> float:
            model = arch.build(WIDTH, DEPTH, 0)
            ten_lines(arch, model, x, recipe)
            return ce(arch, model, x, y)
        cells[recipe] = Cell(after)
    return cells


def kept(arch: Arch) -> dict[str, Any] | None:
    patterns = arch.truth(WIDTH, DEPTH).kept
    if not patterns:
        return None
    model = arch.build(WIDTH, DEPTH, 0)
    x, _ = arch.example()
    before = {n: p.detach().clone() for n, p in model.named_parameters()
              if any(fnmatch.fnmatchcase(n, k) for k in patterns)}
    ten_lines(arch, model, x, "completep")
    params = dict(model.named_parameters())
    changed = {n: f"{float(v.flatten()[0]):g} -> {float(params[n].detach().flatten()[0]):g}"
               for n, v in before.items() if not torch.equal(v, params[n])}
    return {"kept": not changed, "changed": changed}


def coord(arch: Arch, recipe: str) -> dict[str, Any]:
    data = arch.data()
    x, y = data.x_train[:8], data.y_train[:8]
    rep = ds.probes.coord_check(factory(arch, recipe, x), x, y, widths=arch.widths,
                                depths=arch.coord_depths, base_width=64, base_depth=1,
                                lr=3e-3, optimizer="adam", seeds=range(2))
    outside = [f.text() for f in rep.fits if f.finding == "contradicts"]
    return {"verdict": rep.verdict, "outside": outside}


def transfer(arch: Arch) -> dict[str, Any]:
    data = arch.data(n_train=256)
    lrs = [10 ** (k / 2) for k in range(-3, 2)]
    depths = (1, 4) if arch.truth(32, 1).branches else ()
    chk = ds.probes.lr_transfer_check(factory(arch, "completep", data.x_train[:8]), data, lrs,
                                      depths=depths, widths=(32, 128), base_width=32,
                                      base_depth=1, optimizer="adam", steps=20,
                                      batch_size=32, seeds=range(2))
    return {"verdict": chk.verdict, "drift": chk.drift,
            "width": chk.axis_drift.get("width"), "depth": chk.axis_drift.get("depth"),
            "ci": [chk.ci_low, chk.ci_high],
            "eta_star": {f"w{s.width}-d{s.depth}": s.optimum.lr for s in chk.sizes}}


def measure(arch: Arch, with_transfer: bool, log: Callable[[str], None]) -> dict[str, Any]:
    t0 = time.perf_counter()
    row: dict[str, Any] = {"name": arch.name, "notes": arch.truth(WIDTH, DEPTH).notes}
    row["structure"] = Cell(lambda: structure(arch))
    row["loss"] = losses(arch)
    row["kept"] = Cell(lambda: kept(arch))
    row["refusal"] = None if arch.refusal is None else Cell(lambda: refusal(arch))
    for recipe in ("sp", "completep"):
        row[f"coord_{recipe}"] = Cell(lambda recipe=recipe: coord(arch, recipe))
    row["transfer"] = Cell(lambda: transfer(arch)) if with_transfer else None
    row["seconds"] = round(time.perf_counter() - t0, 1)
    log(f"{arch.name}: {row['seconds']} s")
    return row


def refusal(arch: Arch) -> dict[str, Any]:
    assert arch.refusal is not None
    model = arch.build(WIDTH, DEPTH, 0)
    x, _ = arch.example()
    st = ds.param.inspect(model, x)
    try:
        ds.param.plan("completep", width=st.width, depth=st.depth).apply(model, example_input=x)
    except ConfigError as exc:
        named = all(s in str(exc) for s in arch.refusal.names)
        return {"refused": True, "names_fix": named, "message": str(exc)[:300]}
    return {"refused": False, "names_fix": False, "message": ""}


# ---- the table -------------------------------------------------------------------------------

def _err(cell: Cell) -> str:
    return f"**{cell.error}**"


def _blocks(truth: Any) -> Any:
    """The truth's block count: an int, or the sorted list of counts that are equally right."""
    return sorted(truth.blocks) if isinstance(truth.blocks, frozenset) else truth.blocks


def _fmt_struct(d: dict[str, Any]) -> str:
    blocks = d["blocks"]
    blocks = " or ".join(map(str, blocks)) if isinstance(blocks, list) else blocks
    return f"{d['width']} / {d['branches']} / {blocks} / {'T' if d['tied'] else 'F'}"


def _cell_loss(cell: Cell, bound: float | None) -> str:
    if cell.error:
        return _err(cell)
    v = cell.value
    flag = " ✗" if bound is not None and not (math.isfinite(v) and v <= bound) else ""
    return f"{v:.2f}{flag}"


def _cell_coord(cell: Cell) -> str:
    return _err(cell) if cell.error else cell.value["verdict"]


def _cell_transfer(cell: Cell | None) -> tuple[str, str, str]:
    if cell is None:
        return "skipped", "skipped", "skipped"
    if cell.error:
        return _err(cell), _err(cell), _err(cell)

    def dec(v: float | None) -> str:
        return "-" if v is None or not math.isfinite(v) else f"{v:.2f}"
    v = cell.value
    return dec(v["width"]), dec(v["depth"]), v["verdict"]


def markdown(rows: list[dict[str, Any]], header: str) -> str:
    head = ["model", "truth w / K / blocks / tied", "inspect w / K / blocks / tied",
            "roles wrong", "loss own", *(f"loss {r}" for r in LOSS_RECIPES), "kept",
            "coord sp", "coord completep", "drift width", "drift depth", "transfer"]
    lines = [header, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for row in rows:
        s: Cell = row["structure"]
        arch = BY_NAME[row["name"]]
        truth = arch.truth(WIDTH, DEPTH)
        want = {"width": truth.width, "branches": truth.branches, "blocks": _blocks(truth),
                "tied": truth.tied}
        if s.error:
            found, wrong = _err(s), "-"
        else:
            found = _fmt_struct(s.value["found"]) + ("" if s.value["match"] else " ✗")
            extra = len(s.value["unclassified"])
            wrong = str(len(s.value["wrong_roles"])) + (f" (+{extra} unclassified)"
                                                        if extra else "")
        own = row["loss"]["own"]
        bound = (LOSS_FACTOR * max(own.value, math.log(arch.n_out)) if own.error is None
                 else None)
        k: Cell = row["kept"]
        kept_text = (_err(k) if k.error else "-" if k.value is None
                     else "yes" if k.value["kept"] else "no ✗")
        tw, td, tv = _cell_transfer(row["transfer"])
        cells = [row["name"] + (" (refusal)" if arch.refusal else ""), _fmt_struct(want),
                 found, wrong, _cell_loss(own, None),
                 *(_cell_loss(row["loss"][r], bound) for r in LOSS_RECIPES), kept_text,
                 _cell_coord(row["coord_sp"]), _cell_coord(row["coord_completep"]), tw, td, tv]
        lines.append("| " + " | ".join(cells) + " |")
        failed: dict[str, list[str]] = {}
        for key, cell in _cells(row):
            if cell.error:
                failed.setdefault(f"{cell.error}: {cell.detail[:240]}", []).append(key)
        for text, keys in failed.items():
            notes.append(f"- {row['name']}, {', '.join(keys)}: {text}")
        if not s.error and s.value["wrong_roles"]:
            shown = "; ".join(f"{n}: {r}" for n, r in list(s.value["wrong_roles"].items())[:4])
            more = len(s.value["wrong_roles"]) - 4
            notes.append(f"- {row['name']}, roles: {shown}" + (f"; +{more} more"
                                                                if more > 0 else ""))
        if not k.error and k.value and not k.value["kept"]:
            first = next(iter(k.value["changed"].items()))
            notes.append(f"- {row['name']}, kept: {len(k.value['changed'])} parameter(s) "
                         f"changed by completep's apply, e.g. {first[0]}: {first[1]}")
        r = row["refusal"]
        if r is not None and not r.error:
            notes.append(f"- {row['name']}, refusal: refused={r.value['refused']}, names the "
                         f"fix={r.value['names_fix']}: {r.value['message'][:200]}")
    lines += ["", "Legend: w = residual stream width, K = residual branches (the depth "
              "`plan` receives), ✗ = differs from the truth or breaks the loss bound "
              f"(loss after apply <= {LOSS_FACTOR:g} max(own init loss, ln V)); `kept`: the "
              "model's own conventions (Gemma's 1 + w norms, ConvNeXt's layer scale) survive "
              "completep's apply; drift in decades of the optimal LR (width 32 -> 128, depth 1 "
              "-> 4 blocks), verdict PASS below 0.3 decades.", ""]
    if notes:
        lines += ["Errors and findings:", "", *notes]
    return "\n".join(lines)


def _cells(row: dict[str, Any]) -> list[tuple[str, Cell]]:
    out = [("structure", row["structure"]), ("kept", row["kept"])]
    out += [(f"loss {k}", c) for k, c in row["loss"].items()]
    out += [(k, row[k]) for k in ("coord_sp", "coord_completep", "transfer", "refusal")
            if row.get(k) is not None]
    return out


def to_json(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": row["name"], "notes": row["notes"], "seconds": row["seconds"]}
    for key, value in row.items():
        if isinstance(value, Cell):
            out[key] = value.json()
        elif isinstance(value, dict) and key == "loss":
            out[key] = {k: c.json() for k, c in value.items()}
        elif value is None and key in ("transfer", "refusal"):
            out[key] = None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all", help="comma-separated zoo names (all)")
    parser.add_argument("--transfer", default="all",
                        help="models to run the LR-transfer check on: all, none, or names")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    names = [a.name for a in ZOO] if args.models == "all" else args.models.split(",")
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; the zoo: {', '.join(BY_NAME)}")
    transfer_set = (set(names) if args.transfer == "all" else set() if args.transfer == "none"
                    else set(args.transfer.split(",")))
    t0 = time.perf_counter()
    rows = [measure(BY_NAME[n], n in transfer_set,
                    lambda m: print(m, file=sys.stderr, flush=True)) for n in names]
    total = time.perf_counter() - t0
    import transformers

    header = (f"Zoo table: depthscale at width {WIDTH}, depth {DEPTH} (torch {torch.__version__}"
              f", transformers {transformers.__version__}; {len(rows)} models in {total:.0f} s "
              f"on {torch.get_num_threads()} thread(s))")
    print(markdown(rows, header))
    if args.json:
        args.json.write_text(json.dumps({"header": header, "width": WIDTH, "depth": DEPTH,
                                         "seconds": round(total, 1),
                                         "rows": [to_json(r) for r in rows]}, indent=1,
                                        default=str))


if __name__ == "__main__":
    main()
