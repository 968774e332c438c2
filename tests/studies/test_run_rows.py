"""A run record crosses from studies to stats as one flat row: its settings (the spec's flat
fields and options) and its outcome, whose keys :class:`depthscale.stats.sweeps.RunOutcome`
declares. stats tells them apart by that declaration alone, so every key a record can hold
must be one or the other."""

from __future__ import annotations

from depthscale.stats.sweeps import OUTCOME_PREFIXES, RunOutcome, setting_keys
from depthscale.studies.runner import run_one
from depthscale.studies.spec import RunSpec


def _spec(**kw: object) -> RunSpec:
    base = dict(model="resnet1", recipe="laws", dataset="mnist1d", width=8, depth=2, lr=0.1,
                seed=0, steps=4, batch_size=32, eval_every=2,
                data_options=(("n_test", 64), ("n_train", 128)),
                plan_options=(("T", 2.0),), model_options=(("activation", "relu"),))
    base.update(kw)
    return RunSpec(**base)  # type: ignore[arg-type]


def test_a_row_is_its_settings_and_the_outcome_stats_declares() -> None:
    done, diverged = run_one(_spec()), run_one(_spec(lr=1e6))
    failed = run_one(_spec(model_options=(("activation", "nope"),)))
    assert (done.status, diverged.status, failed.status) == ("done", "diverged", "failed")
    for rec in (done, diverged, failed):
        flat = rec.spec.flat()
        settings = [k for k in flat if k != "data_dir"]
        assert setting_keys(rec) == settings == setting_keys(dict(rec))
        outcome = [k for k in rec if k not in flat]
        assert all(k in RunOutcome.__annotations__ or k.startswith(OUTCOME_PREFIXES)
                   for k in outcome), outcome
    assert {"evals", "final_test_loss", "version.torch"} <= set(done)
