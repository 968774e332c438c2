"""The claim catalogue as Markdown (``docs/claims.md``): every registered claim with its paper
version, what it checks, its negative control and its headline (the number the report puts
beside the paper's), written from the registry so it cannot drift.
Regenerate with ``python -m depthscale.claims.catalogue > docs/claims.md``."""

from __future__ import annotations

from depthscale.claims.registry import CLAIMS, PAPERS, PLANNED

__all__ = ["catalogue_markdown"]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def catalogue_markdown() -> str:
    """The catalogue: papers and their versions, then one row per claim and per planned one."""
    lines = [
        "# Claims and their negative controls",
        "",
        "Generated from the claim registry by `python -m depthscale.claims.catalogue`; a test "
        "keeps it in sync. Each claim's negative control is a deliberately wrong setting under "
        "which its check must come out FAIL (`depthscale reproduce ID --control` runs it; the "
        "test suite runs every control at the smoke settings). *Contrast at smoke*: the same "
        "smoke run without the control PASSes, so the tests see both sides; where it is *no*, "
        "only a larger scale lets the correct run pass.",
        "",
        "Verdicts: PASS (reproduced), FAIL (not reproduced, our code suspected), REFUTED (the "
        "paper contradicted by two independent routes, with the control showing the check sees "
        "the effect), UNSTABLE (the verdict changes across `--seeds`), INCONCLUSIVE (the signal "
        "is below the noise at this scale), SKIP (not run).",
        "",
        "## Papers reproduced",
        "",
        *(f"- `{key}`: {_cell(version)}" for key, version in PAPERS.items()),
        "",
        "## Claims",
        "",
        "| claim | paper | what is checked | negative control | contrast at smoke |",
        "|---|---|---|---|---|",
    ]
    for cid, c in CLAIMS.items():
        control = _cell(c.control.what) if c.control else "**none yet**"
        contrast = ("yes" if c.control.contrast else "no") if c.control else "-"
        lines.append(f"| `{cid}` | {c.paper} | {_cell(c.title)} | {control} | {contrast} |")
    lines += [
        "",
        "## Headlines",
        "",
        "The number each report leads with (`index.html` card, console table, `headline` in "
        "`claims.json`): the measured key (the first one a run measured, where several are "
        "listed), beside the paper's value, with the claim in the paper's words.",
        "",
        "| claim | the paper says | reference | headline (measured key) | paper's value |",
        "|---|---|---|---|---|",
    ]
    for cid, c in CLAIMS.items():
        h = c.headline
        if h is None:
            lines.append(f"| `{cid}` | **no headline** | | | |")
            continue
        keys = " or ".join(f"`{k}`" for k in h.candidates)
        _, ci = h.pick({})
        interval = f", interval `{ci[0]}`, `{ci[1]}`" if ci else ""
        lines.append(f"| `{cid}` | {_cell(h.statement)} | {_cell(h.ref)} | {_cell(h.label)}: "
                     f"{keys}{interval} | {_cell(h.paper)} |")
    if PLANNED:
        lines += ["", "## Planned", ""]
        lines += [f"- `{cid}`: waits for {_cell(why)}" for cid, why in PLANNED.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(catalogue_markdown(), end="")
