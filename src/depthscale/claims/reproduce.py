"""Run registered claims and write claims.json, a figure and a CSV per claim, and index.html.

Results are written after every claim (atomically), so a killed run keeps every claim that
finished; each finished record is also appended to ``runs.jsonl`` (the folder's history).
Every record carries its claim's headline (:class:`~depthscale.claims.registry.Headline`) and
the run's machine and package versions (``run``). A run into a folder with results replaces
only its own ids, two runs into one folder merge under the folder's lock (:data:`LOCK_FILE`),
and a SKIP never replaces a decided verdict.

``seeds=N`` reruns each claim at base seeds ``seed .. seed + N - 1`` (in ``OUT/seed-S/``; seeds
that disagree make it UNSTABLE); ``control=True`` runs the negative controls (in
``OUT/control/``, ids ``<claim>/control``, copying the claim's identical finished runs);
``budget_seconds`` is each claim's time budget, read by the sequential designs; ``ray_address``
runs the study sweeps as Ray tasks while this process writes every store and result. How
records, history and resuming work: docs/errors.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import math
import os
import platform
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthscale._version import __version__
from depthscale.claims.changes import SettingChange, apply_changes, describe_changes
from depthscale.claims.registry import CLAIMS, PLANNED, SCALES, ClaimContext
from depthscale.claims.verdicts import ClaimOutcome
from depthscale.errors import ConfigError, DataError, DepthscaleError
from depthscale.io.outputs import check_output_dir, folder_lock
from depthscale.report import (
    append_history,
    headline_record,
    read_claims_json,
    write_claims_json,
    write_index_html,
)
from depthscale.train.loop import check_device_name, resolve_device

__all__ = ["LOCK_FILE", "ClaimHooks", "SkipHook", "check_reproduce", "reproduce",
           "select_claims"]

#: held while claims.json and index.html are read, merged and rewritten
LOCK_FILE = "reproduce.lock"
_LOCK_WAIT = 60.0

#: on_claim(claim_id) -> (advance(k), set_total(n)) for progress display.
ClaimHooks = Callable[[str], tuple[Callable[[int], None], Callable[[int], None]]]
#: on_skip(record, kept): a claim ended SKIP now; ``kept`` is the decided record claims.json
#: keeps in its place (None: the SKIP was written).
SkipHook = Callable[[dict[str, Any], dict[str, Any] | None], None]


def select_claims(ids: Sequence[str]) -> list[str]:
    """The claim ids to run: all registered ones when ``ids`` is empty; errors for unknown or
    not-yet-implemented ids."""
    if not ids:
        return list(CLAIMS)
    for cid in ids:
        if cid in PLANNED:
            raise ConfigError(f"claim {cid!r} is not implemented yet: it needs {PLANNED[cid]}")
        if cid not in CLAIMS:
            raise ConfigError(f"unknown claim {cid!r}; known claims: {', '.join(CLAIMS)}")
    return list(dict.fromkeys(ids))


def _existing(out_dir: Path) -> list[dict[str, Any]]:
    path = out_dir / "claims.json"
    if not path.exists():
        return []
    try:
        return read_claims_json(path)
    except (ValueError, json.JSONDecodeError) as exc:
        raise DataError(
            f"{path} exists but is not a valid claims file ({exc}); move it away or pick "
            "another --out"
        ) from None


def _merge(out_dir: Path, record: dict[str, Any]
           ) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """Under the folder's lock: re-read claims.json, put ``record`` in, write claims.json,
    append it to runs.jsonl and write index.html. Two reproduce runs into one folder thus keep
    each other's verdicts. A SKIP (a crash, missing data or stored runs) never replaces a
    decided verdict: then nothing is written and that record is returned second (else None).
    """
    with folder_lock(out_dir, LOCK_FILE, wait=_LOCK_WAIT, what="reproduce folder"):
        results = {r["id"]: r for r in _existing(out_dir)}
        earlier = results.get(record["id"])
        if record["verdict"] == "SKIP" and earlier is not None and earlier["verdict"] != "SKIP":
            return results, earlier
        results[record["id"]] = record
        ordered = list(results.values())
        write_claims_json(out_dir, ordered)
        append_history(out_dir, record)
        write_index_html(out_dir, ordered)
    return results, None


def _cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def run_info(device: str, workers: int, budget_seconds: float | None = None,
             batch_lrs: bool = False,
             changes: Sequence[SettingChange] = (),
             from_stored: bool = False, ray: dict[str, Any] | None = None) -> dict[str, Any]:
    """Where and with what a reproduce call runs: start time, CPU and GPU models, torch
    threads, each claim's time budget (seconds, None: none), whether LR groups trained
    batched (``batch_lrs``), the settings changed by ``--set`` (``set``: one line, None
    when none; :mod:`~depthscale.claims.changes`), whether it judged stored runs alone
    (``from_stored``), where the sweeps ran (``backend``: local or ray; ``ray``,
    ``ray_nodes``, ``ray_cpus``: the cluster's address, nodes and CPUs, None when local), OS
    and the versions of
    depthscale, torch, numpy and Python (each record's ``run``, so the report shows the
    machine that computed it, not the reader's)."""
    import numpy
    import torch

    gpu = None
    if torch.cuda.is_available():
        gpu = ", ".join(dict.fromkeys(torch.cuda.get_device_name(i)
                                      for i in range(torch.cuda.device_count())))
    return {
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device, "cpu": _cpu_model(), "cpu_count": os.cpu_count(), "gpu": gpu,
        "threads": torch.get_num_threads(), "workers": workers, "budget_seconds": budget_seconds,
        "batch_lrs": batch_lrs, "set": describe_changes(changes) or None,
        "from_stored": from_stored, "backend": "local" if ray is None else "ray",
        **{f"ray{k}": None if ray is None else ray[key]
           for k, key in (("", "address"), ("_nodes", "nodes"), ("_cpus", "cpus"))},
        "os": f"{platform.system()} {platform.release()}".strip(),
        "depthscale": __version__, "torch": torch.__version__, "numpy": numpy.__version__,
        "python": platform.python_version(),
    }


def _headline(cid: str, record: dict[str, Any]) -> dict[str, Any] | None:
    """The claim's registry headline evaluated on the record's measured values and bands."""
    lead = CLAIMS[cid].headline
    if lead is None:
        return None
    key, ci = lead.pick(record["measured"])
    return headline_record(metric=key, ci_keys=ci, label=lead.label, paper=lead.paper,
                           measured=record["measured"], band=record["band"], ref=lead.ref,
                           statement=lead.statement, criterion=lead.criterion)


def _record(claim_id: str, scale: str, seed: int, seconds: float, outcome: ClaimOutcome,
            out_dir: Path) -> dict[str, Any]:
    c = CLAIMS[claim_id]

    def rel(p: Path | None) -> str | None:
        return None if p is None else Path(p).resolve().relative_to(out_dir.resolve()).as_posix()

    # banded values that were not measurable are already named by the verdict's reason
    unmeasurable = [k for k, v in outcome.measured.items() if v is None and k not in outcome.band]
    reason = "; ".join(
        r for r in (outcome.reason, unmeasurable and f"not measurable: {', '.join(unmeasurable)}")
        if r
    )
    if not reason and outcome.verdict != "PASS":
        reason = f"{outcome.verdict} without evidence from the runner (a bug: report it)"
    measured = {k: v for k, v in outcome.measured.items() if v is not None}
    return {
        "id": claim_id, "title": c.title, "paper": c.paper, "verdict": outcome.verdict,
        "reason": reason, "measured": measured, "band": outcome.band,
        "scale": scale, "seconds": round(seconds, 2), "figure": rel(outcome.figure),
        "data": rel(outcome.data), "paper_version": c.paper_version, "seeds": [],
        "control": None, "seed": seed, "version": __version__,
    }


def _run_claim(cid: str, ctx: ClaimContext, crashed: list[str]) -> ClaimOutcome:
    """One claim runner call; a missing dataset or an impossible setting is a SKIP with the
    reason, a crash (a bug) a SKIP named in ``crashed``."""
    try:
        return CLAIMS[cid].run(ctx)
    except DataError as exc:
        return ClaimOutcome("SKIP", reason=f"data unavailable: {exc}")
    except DepthscaleError as exc:
        return ClaimOutcome("SKIP", reason=f"cannot run: {exc}")
    except Exception as exc:  # a bug: keep the other claims, report it loudly
        if cid not in crashed:
            crashed.append(cid)
        last = traceback.format_exception_only(exc)[-1].strip()
        return ClaimOutcome("SKIP", reason=f"crashed: {last}")


def check_reproduce(ids: Sequence[str], *, scale: str = "quick", device: str = "cpu",
                    seeds: int = 1, control: bool = False, workers: int = 1,
                    budget_seconds: float | None = None, changes: Sequence[SettingChange] = (),
                    from_stored: bool = False, force: bool = False,
                    ray_address: str | None = None) -> list[str]:
    """Every check :func:`reproduce` makes of its arguments before any work (ConfigError),
    nothing run or written; the chosen claim ids."""
    return _check(ids, scale, workers, seeds, device, control, budget_seconds, changes,
                  from_stored, force, ray_address)


def _check(ids: Sequence[str], scale: str, workers: int, seeds: int, device: str,
           control: bool, budget_seconds: float | None = None,
           changes: Sequence[SettingChange] = (), from_stored: bool = False,
           force: bool = False, ray_address: str | None = None) -> list[str]:
    """The chosen claim ids, after every check of the arguments (ConfigError, before work):
    each ``--set`` path exists in every chosen claim, its value has the setting's type and
    range (:mod:`~depthscale.claims.changes`), and the changed claim's networks and studies
    stay within the bounds of every run (:mod:`~depthscale.claims.costs`; not under
    ``force``, nor ``from_stored``, which trains nothing); last, ``ray_address`` (Ray
    installed, the address reachable: :func:`~depthscale.studies.executors.check_ray_address`).
    """
    if scale not in SCALES:
        raise ConfigError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    if budget_seconds is not None and not (isinstance(budget_seconds, int | float)
                                           and math.isfinite(budget_seconds)
                                           and budget_seconds > 0):
        raise ConfigError(f"budget must be a positive number of seconds, got {budget_seconds!r}")
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ConfigError(f"seeds must be a whole number >= 1, got {seeds!r}")
    if ray_address is not None and from_stored:
        raise ConfigError("--ray runs the sweeps on a cluster, --from-stored trains nothing: "
                          "drop one of them")
    if ray_address is not None and device != "cpu":  # Ray hides GPUs from one-CPU tasks
        raise ConfigError(f"--ray runs the sweeps as one-CPU Ray tasks, not on {device}: "
                          "drop --ray to train on this machine's GPU, or --device")
    if from_stored:  # the device names the stored runs; nothing runs on it here
        check_device_name(device)
    else:
        resolve_device(device)  # CUDA asked for but absent: one line now, not a SKIP per claim
    chosen = select_claims(ids)
    if control:
        lacking = [cid for cid in chosen if CLAIMS[cid].control is None]
        if lacking:
            raise ConfigError(f"no negative control for: {', '.join(lacking)}")
    for cid in chosen:  # every --set path exists in every chosen claim, with a value in range
        apply_changes(CLAIMS[cid].settings_for(scale, control=control), changes, cid,
                      stock=CLAIMS[cid].stock())
    if changes and not (force or from_stored):
        from depthscale.claims.costs import check_claim_cost

        for cid in chosen:
            check_claim_cost(cid, scale, control, changes, device)
    if ray_address is not None:
        from depthscale.studies.executors import check_ray_address

        check_ray_address(ray_address)
    return chosen


@dataclass(frozen=True)
class _Run:
    """The settings one ``reproduce`` call runs every claim with."""

    scale: str
    out_dir: Path
    run_dir: Path
    device: str
    data_dir: Path | None
    seed: int
    seeds: int
    control: bool
    workers: int
    info: dict[str, Any]
    budget_seconds: float | None = None
    batch_lrs: bool = False
    changes: tuple[SettingChange, ...] = ()
    from_stored: bool = False
    ray_address: str | None = None


def _run_seeds(cid: str, run: _Run,
               hooks: tuple[Callable[[int], None], Callable[[int], None]],
               crashed: list[str]) -> dict[str, Any]:
    """One claim at each base seed: its record (seeds combined, a medium note, the control's
    id and what it changed)."""
    advance, set_total = hooks
    per_seed = []
    for base in range(run.seed, run.seed + run.seeds):
        where = run.run_dir / f"seed-{base}" if run.seeds > 1 else run.run_dir
        # the claim's own folder at this seed: a control copies its identical runs from there
        claim_dir = run.out_dir / f"seed-{base}" if run.seeds > 1 else run.out_dir
        where.mkdir(parents=True, exist_ok=True)
        ctx = ClaimContext(scale=run.scale, out_dir=where, device=run.device,
                           data_dir=run.data_dir, seed=base,
                           settings=apply_changes(
                               CLAIMS[cid].settings_for(run.scale, control=run.control),
                               run.changes, cid),
                           progress=advance, set_total=set_total, workers=run.workers,
                           budget_seconds=run.budget_seconds, batch_lrs=run.batch_lrs,
                           from_stored=run.from_stored, ray_address=run.ray_address,
                           shared_runs=claim_dir if run.control else None)
        t0 = time.perf_counter()
        outcome = _with_copies(_with_designs(_run_claim(cid, ctx, crashed), ctx), ctx)
        per_seed.append((base, _record(cid, run.scale, base, time.perf_counter() - t0, outcome,
                                       run.out_dir)))
    record = per_seed[0][1] if run.seeds == 1 else _combine_seeds(cid, per_seed)
    if run.scale == "medium" and "medium" not in CLAIMS[cid].settings:
        note = "no medium settings: the quick settings already decide this claim"
        record = {**record, "reason": "; ".join(r for r in (record["reason"], note) if r)}
    if run.changes:
        note = f"not the {run.scale} settings: changed by --set {describe_changes(run.changes)}"
        record = {**record, "reason": "; ".join(r for r in (note, record["reason"]) if r)}
    record = {**record, "headline": _headline(cid, record), "run": run.info}
    if run.control:
        what = CLAIMS[cid].control.what  # type: ignore[union-attr]  # checked in _check
        record = {**record, "id": f"{cid}/control", "control": what}
    return record


def _with_designs(outcome: ClaimOutcome, ctx: ClaimContext) -> ClaimOutcome:
    """``outcome`` with what the claim's sequential sweeps decided (``ctx.designs``: per
    study, its measured values and evidence) added to its measured values and reason."""
    if not ctx.designs:
        return outcome
    measured = dict(outcome.measured)
    for design in ctx.designs.values():
        measured.update(design["measured"])
    said = "sequential design: " + "; ".join(d["evidence"] for d in ctx.designs.values())
    reason = "; ".join(r for r in (outcome.reason, said) if r)
    return dataclasses.replace(outcome, measured=measured, reason=reason)


def _with_copies(outcome: ClaimOutcome, ctx: ClaimContext) -> ClaimOutcome:
    """``outcome`` whose reason says how many runs a control copied from its claim's folder
    (``ctx.runs_copied``) instead of training them."""
    if not ctx.runs_copied:
        return outcome
    said = (f"{ctx.runs_copied} finished run(s) copied from the claim's own folder, not "
            "trained again (the same run ids: the same training)")
    return dataclasses.replace(outcome, reason="; ".join(r for r in (outcome.reason, said) if r))


def _same_run(record: dict[str, Any], scale: str, seed: int, seeds: int,
              budget_seconds: float | None = None, batch_lrs: bool = False,
              changes: Sequence[SettingChange] = ()) -> bool:
    """Whether ``record`` (from claims.json) is this run's result already: same scale, base
    seed, number of seeds, budget, LR batching, settings changes (``--set``) and depthscale
    version, and decided (not a SKIP, which may be a crash or missing data that a rerun can
    fix)."""
    return (record["verdict"] != "SKIP" and record["scale"] == scale
            and record.get("seed") == seed and len(record.get("seeds") or []) == (
                seeds if seeds > 1 else 0)
            and (record.get("run") or {}).get("budget_seconds") == budget_seconds
            and bool((record.get("run") or {}).get("batch_lrs")) == batch_lrs
            and ((record.get("run") or {}).get("set") or "") == describe_changes(changes)
            and record.get("version") == __version__)


def _combine_seeds(cid: str, per_seed: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """One record from the records of several base seeds: their common verdict, or UNSTABLE
    when they disagree; measured values are seed means (of the values every seed measured),
    the figure and data those of the first seed, ``seeds`` each seed's verdict and values."""
    first = per_seed[0][1]
    verdicts = [r["verdict"] for _, r in per_seed]
    n_pass = verdicts.count("PASS")
    counted = sorted({v for v in verdicts if v != "SKIP"})  # a SKIP (no data) is no vote
    verdict = {0: "SKIP", 1: counted[0] if counted else "SKIP"}.get(len(counted), "UNSTABLE")
    common = [k for k in first["measured"] if all(k in r["measured"] for _, r in per_seed)]
    measured = {k: sum(r["measured"][k] for _, r in per_seed) / len(per_seed) for k in common}
    each = "; ".join(f"seed {s}: {r['verdict']}" + (f" ({r['reason']})" if r["reason"] else "")
                     for s, r in per_seed)
    reason = (f"{n_pass} of {len(per_seed)} base seeds pass; measured values are seed means. "
              f"{each}")
    return {
        **first, "verdict": verdict, "reason": reason, "measured": measured,
        "seconds": round(sum(r["seconds"] for _, r in per_seed), 2),
        "seeds": [{"seed": s, "verdict": r["verdict"], "measured": r["measured"]}
                  for s, r in per_seed],
    }


def reproduce(
    ids: Sequence[str],
    *,
    scale: str,
    out_dir: Path,
    device: str = "cpu",
    data_dir: Path | None = None,
    seed: int = 0,
    seeds: int = 1,
    control: bool = False,
    workers: int = 1,
    on_claim: ClaimHooks | None = None,
    rerun: bool = False,
    on_kept: Callable[[str], None] | None = None,
    budget_seconds: float | None = None,
    batch_lrs: bool = False,
    changes: Sequence[SettingChange] = (),
    from_stored: bool = False,
    on_skip: SkipHook | None = None,
    force: bool = False,
    ray_address: str | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Run claims; return (all results now in ``out_dir``, ids that crashed).

    Missing data ends a claim as SKIP with the reason; a crash as SKIP with the error, listed in
    the second return value. ``workers``: processes each claim's sweeps may use; ``seeds``: base
    seeds per claim; ``control``: run the negative controls; ``budget_seconds``: each claim's time
    budget; ``batch_lrs``: train each LR group as one batched run
    (:func:`~depthscale.train.train_batched`); ``changes``: ``--set`` changes
    (:mod:`~depthscale.claims.changes`), checked with sizes and time against the run bounds before
    any work unless ``force``; ``from_stored``: judge from the runs stored in ``out_dir``, training
    nothing (``device`` then only names them); ``ray_address``: run the study sweeps on that Ray
    cluster (``local``, ``auto`` or ``HOST:PORT``; ``workers`` then sizes only ``local``).
    Resuming: a non-SKIP result in ``out_dir/claims.json`` from the same scale, base seed, seeds,
    budget, LR batching, ``changes`` and version is kept (``on_kept(claim_id)``) unless
    ``rerun=True``; ``on_skip(record, kept)`` hears of every SKIP. Details: docs/errors.md.
    """
    chosen = _check(ids, scale, workers, seeds, device, control, budget_seconds, changes,
                    from_stored, force, ray_address)
    rerun = rerun or from_stored
    out_dir = check_output_dir(out_dir)
    with contextlib.ExitStack() as stack:
        cluster = None
        if ray_address is not None:  # joined (and its workers checked) before any claim runs
            from depthscale.studies.executors import ray_cluster

            cluster = stack.enter_context(ray_cluster(ray_address, workers))
        out_dir.mkdir(parents=True, exist_ok=True)
        with folder_lock(out_dir, LOCK_FILE, wait=_LOCK_WAIT, what="reproduce folder"):
            results = {r["id"]: r for r in _existing(out_dir)}  # a bad claims.json stops us
        run = _Run(scale, out_dir, out_dir / "control" if control else out_dir, device,
                   data_dir, seed, seeds, control, workers if cluster is None else cluster["cpus"],
                   run_info(device, workers, budget_seconds, batch_lrs, changes, from_stored,
                            cluster),
                   budget_seconds, batch_lrs, tuple(changes), from_stored, ray_address)
        return _run_chosen(chosen, run, results, rerun, on_claim, on_kept, on_skip)


def _run_chosen(chosen: Sequence[str], run: _Run, results: dict[str, dict[str, Any]],
                rerun: bool, on_claim: ClaimHooks | None, on_kept: Callable[[str], None] | None,
                on_skip: SkipHook | None) -> tuple[list[dict[str, Any]], list[str]]:
    """:func:`reproduce`'s loop over the chosen claims: each kept (a result of this same run
    already in ``results``) or run at every seed and merged into the folder."""
    crashed: list[str] = []
    scale, seed, seeds, control = run.scale, run.seed, run.seeds, run.control
    budget_seconds, batch_lrs, changes, out_dir = (run.budget_seconds, run.batch_lrs,
                                                   run.changes, run.out_dir)
    for cid in chosen:
        previous = results.get(f"{cid}/control" if control else cid)
        if not rerun and previous is not None and _same_run(previous, scale, seed, seeds,
                                                            budget_seconds, batch_lrs, changes):
            if on_kept is not None:
                on_kept(cid)
            continue
        hooks = on_claim(cid) if on_claim else (lambda _k: None, lambda _k: None)
        record = _run_seeds(cid, run, hooks, crashed)
        results, kept = _merge(out_dir, record)
        if record["verdict"] == "SKIP" and on_skip is not None:
            on_skip(record, kept)
    return list(results.values()), crashed
